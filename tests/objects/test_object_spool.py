"""The spool: pending writes on disk, in order, within a bound that never costs a config version
or a log line."""

from __future__ import annotations

import logging
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from storage.objects.base import BadKey
from storage.objects.spool import IDEM, Kind, Spool, SpoolBusy, SpoolEntry


def _drain(spool: Spool) -> list[SpoolEntry]:
    taken = []
    while (entry := spool.peek()) is not None:
        taken.append(entry)
        spool.done(entry)
    return taken


def _entries(folder: Path) -> list[Path]:
    return [path for path in folder.iterdir() if path.name != ".owner"]


def _key(kind: Kind, n: int) -> str:
    """Keys of one length, so every entry of the same bytes costs the same on disk."""
    return f"{kind[:4]}/{n:07d}"


def test_entries_come_out_in_the_order_they_went_in(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool", 1 << 20)
    for n in range(5):
        spool.add(f"decisions/2026-12-01/{n}.jsonl", f"line {n}".encode(), kind="decisions")
    assert len(spool) == 5
    taken = _drain(spool)
    assert [e.key for e in taken] == [f"decisions/2026-12-01/{n}.jsonl" for n in range(5)]
    assert [e.data for e in taken] == [f"line {n}".encode() for n in range(5)]
    assert len(spool) == 0 and spool.bytes == 0
    assert _entries(tmp_path / "spool") == []


def test_the_spool_survives_a_restart_and_goes_on_after_its_last_entry(tmp_path: Path) -> None:
    first = Spool(tmp_path / "spool", 1 << 20)
    first.add("config/policy.yml", b"a: 1\n", {"paika-reason": "调整"}, kind="config")
    first.add("snapshots/x.json.gz", b"\x1f\x8b\x00", kind="snapshot")
    before = first.peek()
    first.close()
    again = Spool(tmp_path / "spool", 1 << 20)
    again.add("audit/2026-12-01.jsonl", b"{}", kind="audit")
    assert again.peek() == before
    taken = _drain(again)
    assert [(e.kind, e.key, e.data) for e in taken] == [
        ("config", "config/policy.yml", b"a: 1\n"),
        ("snapshot", "snapshots/x.json.gz", b"\x1f\x8b\x00"),
        ("audit", "audit/2026-12-01.jsonl", b"{}"),
    ]
    assert taken[0].meta["paika-reason"] == "调整"
    assert [e.seq for e in taken] == sorted(e.seq for e in taken)


def test_a_write_cut_short_is_not_an_entry(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool", 1 << 20)
    spool.add("config/policy.yml", b"a", kind="config")
    spool.close()
    (tmp_path / "spool" / ".tmp-dead").write_bytes(b"half an entry")
    again = Spool(tmp_path / "spool", 1 << 20)
    assert len(again) == 1
    assert not (tmp_path / "spool" / ".tmp-dead").exists()


def test_the_folder_is_0700_and_entries_0600(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool", 1 << 20)
    spool.add("config/policy.yml", b"a", kind="config")
    assert stat.S_IMODE((tmp_path / "spool").stat().st_mode) == 0o700
    for path in (tmp_path / "spool").iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_each_entry_carries_a_hash_of_its_key_meta_and_bytes(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool", 1 << 20)
    spool.add("config/policy.yml", b"a", {"paika-version": "1"}, kind="config")
    spool.add("config/policy.yml", b"a", {"paika-version": "1"}, kind="config")
    spool.add("config/policy.yml", b"a", {"paika-version": "2"}, kind="config")
    spool.add("config/policy.yml", b"b", {"paika-version": "2"}, kind="config")
    spool.add("config/other.yml", b"b", {"paika-version": "2"}, kind="config")
    spool.add("config/policy.yml", b"a", {"paika-version": "1", IDEM: "forged"}, kind="config")
    idems = [e.idem for e in _drain(spool)]
    assert idems[0] == idems[1] == idems[5]
    assert len(set(idems[1:5])) == 4


def test_a_full_spool_drops_the_oldest_snapshots_first_then_digests_never_the_rest(
    tmp_path: Path,
) -> None:
    blob = bytes(1000)
    spool = Spool(tmp_path / "spool", 1 << 20)
    spool.add(_key("snapshot", 0), blob, kind="snapshot")
    one = spool.bytes
    spool.max_bytes = 6 * one  # room for six entries
    for kind, n in [("config", 0), ("snapshot", 1), ("digest", 0), ("decisions", 0)]:
        assert spool.add(_key(kind, n), blob, kind=kind) == ()
    assert spool.add(_key("snapshot", 2), blob, kind="snapshot") == ()
    assert spool.bytes == spool.max_bytes

    def pushed_out(kind: Kind, n: int) -> list[tuple[str, str]]:
        return [(d.kind, d.key) for d in spool.add(_key(kind, n), blob, kind=kind)]

    assert pushed_out("audit", 0) == [("snapshot", _key("snapshot", 0))]
    assert pushed_out("template", 0) == [("snapshot", _key("snapshot", 1))]
    assert pushed_out("spec", 0) == [("snapshot", _key("snapshot", 2))]
    assert pushed_out("config", 1) == [("digest", _key("digest", 0))]
    assert dict(spool.dropped) == {"snapshot": 3, "digest": 1}
    assert spool.bytes == spool.max_bytes
    assert [e.key for e in _drain(spool)] == [
        _key("config", 0),
        _key("decisions", 0),
        _key("audit", 0),
        _key("template", 0),
        _key("spec", 0),
        _key("config", 1),
    ]


def test_entries_that_are_never_dropped_are_kept_past_the_bound_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blob = bytes(1000)
    spool = Spool(tmp_path / "spool", 1500)
    spool.add("snapshots/s0", blob, kind="snapshot")
    assert spool.add("config/policy.yml", blob, kind="config")[0].key == "snapshots/s0"
    with caplog.at_level(logging.WARNING):
        assert spool.add("decisions/l0", blob, kind="decisions") == ()
    assert "over its bound" in caplog.text
    assert spool.bytes > spool.max_bytes
    assert [e.kind for e in _drain(spool)] == ["config", "decisions"]


def test_a_snapshot_that_cannot_fit_is_itself_dropped_and_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spool = Spool(tmp_path / "spool", 1500)
    spool.add("config/policy.yml", bytes(1000), kind="config")
    with caplog.at_level(logging.WARNING):
        dropped = spool.add("snapshots/big", bytes(1000), kind="snapshot")
    assert [(d.kind, d.key) for d in dropped] == [("snapshot", "snapshots/big")]
    assert "snapshots/big" in caplog.text
    assert spool.dropped["snapshot"] == 1
    assert [e.kind for e in _drain(spool)] == ["config"]


def test_finishing_an_entry_the_bound_already_dropped_changes_nothing(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool", 1500)
    spool.add("snapshots/s0", bytes(1000), kind="snapshot")
    sending = spool.peek()
    assert sending is not None
    spool.add("config/policy.yml", bytes(1000), kind="config")
    spool.done(sending)
    assert [e.kind for e in _drain(spool)] == ["config"]


def test_an_unknown_kind_or_a_bad_key_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path / "spool", 1 << 20)
    with pytest.raises(ValueError, match="kind"):
        spool.add("config/policy.yml", b"a", kind="policy")  # type: ignore[arg-type]
    with pytest.raises(BadKey):
        spool.add("../x", b"a", kind="config")
    assert len(spool) == 0 and _entries(tmp_path / "spool") == []


def test_meta_too_big_for_s3_is_refused_when_added_not_when_sent(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool", 1 << 20)
    with pytest.raises(BadKey, match="2048"):
        spool.add("config/policy.yml", b"a", {"paika-reason": "原" * 230}, kind="config")
    # Fits alone, not with the idem the spool adds.
    with pytest.raises(BadKey, match="2048"):
        spool.add("config/policy.yml", b"a", {"paika-reason": "原" * 224}, kind="config")
    assert len(spool) == 0


def test_one_spool_folder_has_one_owner_at_a_time(tmp_path: Path) -> None:
    with Spool(tmp_path / "spool", 1 << 20) as owner:
        owner.add("config/policy.yml", b"a", kind="config")
        with pytest.raises(SpoolBusy, match="spool folder of its own"):
            Spool(tmp_path / "spool", 1 << 20)
    with Spool(tmp_path / "spool", 1 << 20) as next_owner:
        assert len(next_owner) == 1


def test_a_dead_owner_leaves_the_folder_to_the_next(tmp_path: Path) -> None:
    folder = tmp_path / "spool"
    code = (
        "import os, sys; from pathlib import Path; from storage.objects.spool import Spool; "
        f"s = Spool(Path({str(folder)!r}), 1 << 20); "
        "s.add('config/policy.yml', b'a', kind='config'); os._exit(9)"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 9
    with Spool(folder, 1 << 20) as spool:
        assert len(spool) == 1
