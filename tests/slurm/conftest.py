"""A real Slurm for the tests, found through SLURM_CONF (tests/slurm/one-node.sh starts a
one-node one with fake GPUs; .ci/run does before the tests).

Where none answers the tests skip, unless PAIKA_TEST_REQUIRE_SERVERS=1 (set by .ci/run),
where a missing Slurm fails the run. Each test's Slurm jobs carry its own name prefix and
are cancelled when it ends, so tests never see each other's jobs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
from paika_test_servers import servers_required

T = TypeVar("T")


@dataclass(frozen=True)
class LiveSlurm:
    """The running cluster as tests/slurm/one-node.sh sets it up."""

    conf: str
    partition: str = "debug"
    node: str = "localhost"


@pytest.fixture(scope="session")
def live_slurm() -> LiveSlurm:
    """The running Slurm, or a skip (a failure under PAIKA_TEST_REQUIRE_SERVERS=1)."""
    conf = os.environ.get("SLURM_CONF")
    problem = None
    if not conf:
        problem = "SLURM_CONF is not set (start a Slurm with tests/slurm/one-node.sh)"
    elif shutil.which("sinfo") is None:
        problem = "Slurm's clients are not installed"
    else:
        answer = subprocess.run(
            ["sinfo", "--noheader", "--Node", "--format=%N %T"],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "SLURM_CONF": conf},
            check=False,
        )
        if answer.returncode != 0 or "localhost" not in answer.stdout:
            problem = f"no Slurm answers at {conf}: {answer.stderr.strip() or answer.stdout}"
    if problem is not None:
        if servers_required():
            pytest.fail(problem + "; PAIKA_TEST_REQUIRE_SERVERS=1 makes it required")
        pytest.skip(problem)
    assert conf is not None
    return LiveSlurm(conf)


@pytest.fixture
def slurm_prefix(live_slurm: LiveSlurm) -> Iterator[str]:
    """A job-name prefix of this test's own; its jobs are cancelled when it ends."""
    prefix = f"t{uuid.uuid4().hex[:8]}-"
    yield prefix
    env = {**os.environ, "SLURM_CONF": live_slurm.conf}

    def left() -> list[str]:
        out = subprocess.run(
            ["squeue", "--noheader", "--format=%i %j"],
            capture_output=True,
            text=True,
            timeout=30,
            env=env,
            check=True,
        ).stdout
        return [
            line.split()[0]
            for line in out.splitlines()
            if line.split()[1:2] and line.split()[1].startswith(prefix)
        ]

    ids = left()
    if ids:
        subprocess.run(["scancel", *ids], timeout=30, env=env, check=True)
    wait_for(lambda: not left(), timeout=60, what=f"jobs {prefix}* to leave the queue")


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder every account can write (a job run as another user writes its log here)."""
    folder = Path(tempfile.mkdtemp(prefix="paika-slurm-"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def wait_for(check: Callable[[], T], *, timeout: float = 30, what: str = "it") -> T:
    """Poll `check` until it gives something true; its value. Fails after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout:g} s for {what}")
        time.sleep(0.1)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every Slurm test runs on one worker: they share the one-node Slurm and its four GPUs,
    and some stop slurmctld, which every other Slurm test needs. They run first: one after
    the other they take minutes of Slurm's own waiting, which the other workers fill."""
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here):
            item.add_marker(pytest.mark.xdist_group("slurm"))
    items.sort(key=lambda item: not item.path.is_relative_to(here))  # stable: order kept


@pytest.fixture(autouse=True)
def _on_the_slurm_worker(request: pytest.FixtureRequest) -> None:
    """Under pytest-xdist's loadgroup a Slurm test must carry its group: were grouping lost
    (as pytest 9.2 loses it), two workers would share the Slurm and fail each other's tests
    at random; this fails them all at once, saying why."""
    if getattr(request.config.option, "loadgroup", False):
        assert request.node.nodeid.endswith("@slurm"), (
            f"{request.node.nodeid} is not grouped with the other Slurm tests; "
            "pytest-xdist's --dist loadgroup is not grouping (see the pytest pin in pyproject.toml)"
        )
