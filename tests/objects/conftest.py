"""The object store's fixtures: one store per backend, each on a fresh bucket or folder.

The S3 backends talk to moto's server over real HTTP on 127.0.0.1 (paika_test_s3.py),
with fake credentials set in the environment for the session (boto3's own chain reads them;
no profile or file on this machine is read).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from paika_test_s3 import S3Server, fake_aws, s3_store

from storage.objects.base import ObjectStore
from storage.objects.local import LocalStore

BACKENDS = ["local", "s3-versioned", "s3-stamped"]


@pytest.fixture(scope="session")
def aws_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """boto3's credential chain finds only the fake keys."""
    nowhere = tmp_path_factory.mktemp("aws") / "none"
    with pytest.MonkeyPatch.context() as env:
        fake_aws(env, nowhere)
        yield


@pytest.fixture(scope="session")
def s3_server(aws_env: None) -> Iterator[S3Server]:
    server = S3Server()
    server.start()
    yield server
    server.kill()


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    """An empty store of each backend."""
    if request.param == "local":
        return LocalStore(tmp_path / "objects")
    server: S3Server = request.getfixturevalue("s3_server")
    return s3_store(server.url, versioned=request.param == "s3-versioned")
