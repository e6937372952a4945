"""The archive's stores: the local folder, and S3 with bucket versioning on moto's server over
HTTP on 127.0.0.1 (tests/paika_test_s3.py), each test on a fresh folder or bucket."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from paika_test_s3 import S3Server, fake_aws, s3_store

from storage.objects.base import ObjectStore
from storage.objects.local import LocalStore


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with pytest.MonkeyPatch.context() as env:
        fake_aws(env, tmp_path_factory.mktemp("aws") / "none")
        server = S3Server()
        server.start()
        yield server
        server.kill()


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    """An empty store of each backend."""
    if request.param == "local":
        return LocalStore(tmp_path / "objects")
    server: S3Server = request.getfixturevalue("s3_server")
    return s3_store(server.url, versioned=True)
