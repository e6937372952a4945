"""One suite, every backend: a local folder, S3 with bucket versioning, S3 with stamped keys."""

from __future__ import annotations

from datetime import date

import pytest

from storage.objects import keys
from storage.objects.base import BadKey, NoSuchObject, ObjectStore

POLICY = keys.CONFIG
REASON_ZH = "把 A100 的配额从 8 调到 12：月底赶论文 (100% 需要)"


def test_a_put_reads_back_with_its_meta(store: ObjectStore) -> None:
    put = store.put(POLICY, b"fairness: 0.5\n", {"paika-author": "U1", "paika-version": "1"})
    assert store.get(POLICY) == b"fairness: 0.5\n"
    head = store.head(POLICY)
    assert head is not None
    assert (head.key, head.version_id, head.size) == (POLICY, put.version_id, 14)
    assert dict(head.meta) == {"paika-author": "U1", "paika-version": "1"}
    assert head.at.tzinfo is not None
    assert dict(put.meta) == dict(head.meta) and put.size == head.size


def test_every_version_is_kept_newest_first_and_old_ones_stay_readable(
    store: ObjectStore,
) -> None:
    made = [
        store.put(POLICY, f"version {n}\n".encode(), {"paika-version": str(n)}) for n in (1, 2, 3)
    ]
    versions = store.versions(POLICY)
    assert [v.meta["paika-version"] for v in versions] == ["3", "2", "1"]
    assert [v.version_id for v in versions] == [m.version_id for m in reversed(made)]
    assert len({v.version_id for v in versions}) == 3
    assert all(newer.at >= older.at for newer, older in zip(versions, versions[1:], strict=False))
    assert store.get(POLICY, made[0].version_id) == b"version 1\n"
    assert store.get(POLICY) == b"version 3\n"
    old = store.head(POLICY, made[1].version_id)
    assert old is not None and old.meta["paika-version"] == "2"


def test_rolling_back_writes_the_old_content_as_a_new_version(store: ObjectStore) -> None:
    first = store.put(POLICY, b"a: 1\n", {"paika-version": "1"})
    store.put(POLICY, b"a: 2\n", {"paika-version": "2"})
    store.put(POLICY, store.get(POLICY, first.version_id), {"paika-version": "3"})
    assert store.get(POLICY) == b"a: 1\n"
    assert [v.meta["paika-version"] for v in store.versions(POLICY)] == ["3", "2", "1"]


def test_meta_in_chinese_and_with_percent_signs_reads_back_as_written(
    store: ObjectStore,
) -> None:
    meta = {"paika-reason": REASON_ZH, "paika-author": "张伟 <U07>", "paika-odd": "%41 +/="}
    store.put(POLICY, b"x", meta)
    newest = store.head(POLICY)
    assert newest is not None and dict(newest.meta) == meta
    assert dict(store.versions(POLICY)[0].meta) == meta


def test_bytes_of_every_value_and_empty_objects_read_back(store: ObjectStore) -> None:
    every_byte = bytes(range(256)) * 3
    store.put("digests/2026-12-01.png", every_byte)
    store.put("audit/2026-12-01.jsonl", b"")
    assert store.get("digests/2026-12-01.png") == every_byte
    assert store.get("audit/2026-12-01.jsonl") == b""


def test_keys_lists_each_key_once_under_a_prefix(store: ObjectStore) -> None:
    day1, day2 = date(2026, 12, 1), date(2026, 12, 2)
    names = [
        POLICY,
        keys.decisions(day1, 1, 40),
        keys.decisions(day1, 41, 90),
        keys.decisions(day2, 91, 95),
        keys.template("视觉组", "train-7b"),
        keys.spec(12),
    ]
    for name in names:
        store.put(name, b"1")
    store.put(POLICY, b"2")
    assert store.keys(keys.decisions_day(day1)) == sorted(names[1:3])
    assert store.keys(keys.DECISIONS) == sorted(names[1:4])
    assert store.keys("dec") == sorted(names[1:4])
    assert store.keys("") == sorted(names)
    assert store.keys("snapshots/") == []


def test_a_key_with_non_ascii_names_round_trips(store: ObjectStore) -> None:
    name = keys.template("视觉组", "训练 模板")
    store.put(name, b"{}")
    assert store.get(name) == b"{}"
    assert store.keys("templates/") == [name]


def test_missing_keys_and_versions_say_so(store: ObjectStore) -> None:
    assert store.head(POLICY) is None
    assert store.versions(POLICY) == []
    with pytest.raises(NoSuchObject):
        store.get(POLICY)
    store.put(POLICY, b"x")
    with pytest.raises(NoSuchObject):
        store.get(POLICY, "no-such-version")
    assert store.head(POLICY, "no-such-version") is None
    with pytest.raises(NoSuchObject):
        store.get("config/other.yml")


@pytest.mark.parametrize(
    "bad", ["", "/etc/passwd", "../escape", "a/../../b", "a//b", "a/./b", "a/"]
)
def test_keys_that_could_name_another_place_are_refused(store: ObjectStore, bad: str) -> None:
    with pytest.raises(BadKey):
        store.put(bad, b"x")
    with pytest.raises(BadKey):
        store.get(bad)


def test_meta_names_the_store_would_mangle_are_refused(store: ObjectStore) -> None:
    with pytest.raises(BadKey):
        store.put(POLICY, b"x", {"Paika-Author": "U1"})
    assert store.head(POLICY) is None


def test_the_store_answers_its_check(store: ObjectStore) -> None:
    store.check()
    assert store.where


def test_meta_up_to_s3s_two_kilobytes_is_kept_and_more_is_refused(store: ObjectStore) -> None:
    # 9 bytes a character once percent-encoded: 200 fit with the name, 230 do not.
    store.put(POLICY, b"x", {"paika-reason": "配" * 200})
    newest = store.head(POLICY)
    assert newest is not None and newest.meta["paika-reason"] == "配" * 200
    with pytest.raises(BadKey, match="2048"):
        store.put(POLICY, b"y", {"paika-reason": "配" * 230})
    assert store.get(POLICY) == b"x"
