"""The local folder backend: what only a folder on this machine can get wrong."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from storage.objects import keys
from storage.objects.base import BadKey, StoreUnavailable
from storage.objects.local import LocalStore


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_folders_are_0700_and_files_0600_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        LocalStore(tmp_path / "objects").put(keys.template("ml", "bert"), b"{}", {"paika-a": "1"})
    finally:
        os.umask(old)
    made = list((tmp_path / "objects").rglob("*"))
    assert made
    for path in made:
        if path.is_dir():
            assert _mode(path) == 0o700, path
        else:
            assert _mode(path) == 0o600, path
    assert _mode(tmp_path / "objects") == 0o700


@pytest.mark.parametrize("bad", ["../outside", "a/../../outside", "/tmp/outside", "x.versions/y"])
def test_no_key_writes_outside_the_root(tmp_path: Path, bad: str) -> None:
    store = LocalStore(tmp_path / "root" / "objects")
    with pytest.raises(BadKey):
        store.put(bad, b"x")
    assert not (tmp_path / "outside.versions").exists()
    assert not (tmp_path / "root" / "outside.versions").exists()
    assert not (tmp_path / "root" / "objects").exists()
    with pytest.raises(BadKey):
        store.keys("../")


def test_writers_at_once_each_get_their_own_version(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "objects")
    start = threading.Barrier(8)

    def write(n: int) -> None:
        start.wait()
        for round_ in range(5):
            store.put(keys.CONFIG, f"{n}-{round_}".encode())

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    versions = store.versions(keys.CONFIG)
    assert len(versions) == 40
    sequences = [int(v.version_id.split("-", 1)[0]) for v in versions]
    assert sequences == list(range(40, 0, -1))
    assert sorted(store.get(keys.CONFIG, v.version_id) for v in versions) == sorted(
        f"{n}-{r}".encode() for n in range(8) for r in range(5)
    )


def test_a_write_cut_short_leaves_no_version(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "objects")
    first = store.put(keys.CONFIG, b"one")
    # What a crash between writing the data and the rename leaves behind.
    staged = tmp_path / "objects" / "config" / "policy.yml.versions" / ".tmp-dead"
    staged.mkdir()
    (staged / "data").write_bytes(b"half")
    assert [v.version_id for v in store.versions(keys.CONFIG)] == [first.version_id]
    assert store.get(keys.CONFIG) == b"one"
    assert store.put(keys.CONFIG, b"two").version_id.startswith("00000002-")
    assert staged.exists()  # it might be a live write
    os.utime(staged, (0, 0))  # it was not: an hour and more old
    store.put(keys.CONFIG, b"three")
    assert not staged.exists()
    assert [store.get(keys.CONFIG, v.version_id) for v in store.versions(keys.CONFIG)] == [
        b"three",
        b"two",
        b"one",
    ]


def test_a_store_that_cannot_write_says_so(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    store = LocalStore(blocked / "objects")
    with pytest.raises(StoreUnavailable):
        store.check()
    with pytest.raises(StoreUnavailable):
        store.put(keys.CONFIG, b"x")


def test_where_is_the_folder(tmp_path: Path) -> None:
    assert LocalStore(tmp_path / "objects").where == str((tmp_path / "objects").resolve())
