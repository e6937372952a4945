"""Fixtures of the storage tests: an empty database of each backend for migration tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from paika_test_servers import BACKENDS, create_database, without_tls
from sqlalchemy import Engine, text

from storage.db import make_engine


@pytest.fixture(params=BACKENDS)
def bare(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """An engine on an empty database of one backend, with no schema yet."""
    if request.param == "sqlite":
        engine = make_engine(f"sqlite:///{tmp_path / 'old.db'}")
        yield engine
        engine.dispose()
        return
    url, admin = create_database(request.param)
    engine = make_engine(without_tls(url))
    yield engine
    engine.dispose()
    with admin.connect() as conn:
        force = " WITH (FORCE)" if request.param == "postgresql" else ""
        conn.execute(text(f"DROP DATABASE {url.rsplit('/', 1)[1].split('?')[0]}{force}"))
    admin.dispose()
