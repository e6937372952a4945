"""The agent's disk stays bounded: a job's log keeps its tail under a cap, job logs never
take the reserve the agent keeps for its own records, a full disk gives up the reserve file so
exit codes and the job table are still written, and a low disk refuses starts (507, said
why) and is reported in the status the scheduler polls.

The small disks are real: a 40 MiB tmpfs mounted for the test (the tests run as root)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from agent_harness import SPEC, TOKEN, wait_for

from scheduler.agent.app import build_app
from scheduler.agent.client import AgentClient
from scheduler.agent.errors import AgentError
from scheduler.agent.jobs import RESERVE_FILE, JobStore
from scheduler.agent.protocol import JobState, StartRequest
from scheduler.agent.simulated import SimulatedReader
from scheduler.hosts.poll import report_of
from scheduler.hosts.report import DISK_LOW
from scheduler.serving import serve_in_thread, stop_server

MIB = 1024 * 1024
RESERVE = 4 * MIB


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 40 MiB filesystem of its own (tmpfs), removed after the test."""
    where = tmp_path / "disk"
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@contextlib.contextmanager
def agent_on(state_dir: Path, **options: object) -> Iterator[tuple[AgentClient, JobStore]]:
    store = JobStore(state_dir, poll_interval_s=0.05, allow_root_jobs=True, **options)  # type: ignore[arg-type]
    reader = SimulatedReader(SPEC, host="disk-host", loads=store)
    server, thread, port = serve_in_thread(build_app(reader, store, TOKEN))
    client = AgentClient(f"http://127.0.0.1:{port}", TOKEN, timeout=10.0)
    try:
        yield client, store
    finally:
        stop_server(server, thread)
        client.close()
        for job in store.all_jobs():
            if job.state is JobState.RUNNING:
                store.stop(job.job_id, grace_s=0)
        wait_for(
            lambda: all(j.state is not JobState.RUNNING for j in store.all_jobs()),
            10,
            "the test's jobs to end",
        )
        store.close()


def _free(path: Path) -> int:
    info = os.statvfs(path)
    return info.f_bavail * info.f_frsize


def _waiting_job(job_id: str, go: Path, code: int) -> StartRequest:
    """A job that ends with `code` once the file `go` exists."""
    shell = f"while [ ! -e {go} ]; do sleep 0.05; done; exit {code}"
    return StartRequest(job_id=job_id, gpus=[0], shell=shell)


def test_a_job_flooding_its_log_leaves_the_neighbours_exit_and_later_starts_intact(
    small_disk: Path, tmp_path: Path
) -> None:
    # Before: `yes` filled the disk in a blink; the neighbour's exit code could not be
    # written (recorded lost, so rerun) and every later start was a 500.
    go = tmp_path / "go"
    options = {"disk_reserve_bytes": RESERVE, "reserve_file_bytes": RESERVE}
    with agent_on(small_disk / "state", **options) as (client, store):
        client.start_job(_waiting_job("neighbour.1", go, 7))
        client.start_job(StartRequest(job_id="flood.1", gpus=[1], argv=["yes"]))
        wait_for(lambda: bool(client.status(since="0").disk.low), 30, "the disk to run low")  # type: ignore[union-attr]
        # The flood stops at the reserve: the room under it stays the agent's.
        assert _free(small_disk) >= RESERVE - 2 * MIB
        go.touch()
        wait_for(lambda: client.job("neighbour.1").state is not JobState.RUNNING, 10, "its end")
        ended = client.job("neighbour.1")
        assert (ended.state, ended.exit_code) == (JobState.EXITED, 7)
        with pytest.raises(AgentError) as refused:
            client.start_job(StartRequest(job_id="later.1", gpus=[2], argv=["true"]))
        assert refused.value.status == 507
        assert "disk is nearly full" in refused.value.message
        assert "--disk-reserve-mib" in refused.value.message
        status = client.status(since="0")
        assert status.disk is not None and status.disk.low
        assert status.disk.reserve_bytes == RESERVE
        reason = report_of("disk-host", status, 0.0).unhealthy
        assert reason is not None and reason.startswith(DISK_LOW)
        metrics = httpx.get(
            f"{client.base_url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}
        ).text
        assert 'paika_agent_disk_low{host="disk-host"} 1.0' in metrics
        reserve = [
            line.split()[-1]
            for line in metrics.splitlines()
            if line.startswith('paika_agent_disk_reserve_bytes{host="disk-host"}')
        ]
        assert [float(value) for value in reserve] == [RESERVE]
        # The table was written: a fresh agent on the same dir knows the neighbour's end.
        assert client.ack(["neighbour.1"]).acked == 1
        log_size = os.stat(small_disk / "state" / "logs" / "flood.1.log").st_size
        assert log_size < 40 * MIB


def test_a_full_disk_gives_up_the_reserve_so_the_exit_and_the_table_are_written(
    small_disk: Path, tmp_path: Path
) -> None:
    # Before: something else filled the disk to its last byte; the wrapper could not write
    # the neighbour's exit code (recorded lost) and the job table could not be saved (500).
    go = tmp_path / "go"
    state = small_disk / "state"
    with agent_on(state, disk_reserve_bytes=RESERVE, reserve_file_bytes=RESERVE) as (
        client,
        store,
    ):
        wait_for(lambda: (state / RESERVE_FILE).exists(), 10, "the reserve file")
        assert (state / RESERVE_FILE).stat().st_size == RESERVE
        client.start_job(_waiting_job("neighbour.1", go, 7))
        filler = small_disk / "filler"
        with filler.open("wb") as out:  # every free byte, in one go
            os.posix_fallocate(out.fileno(), 0, _free(small_disk))
        wait_for(lambda: not (state / RESERVE_FILE).exists(), 10, "the reserve to be given up")
        go.touch()
        wait_for(lambda: client.job("neighbour.1").state is not JobState.RUNNING, 10, "its end")
        ended = client.job("neighbour.1")
        assert (ended.state, ended.exit_code) == (JobState.EXITED, 7)
        assert client.ack(["neighbour.1"]).acked == 1  # the table is saved
        assert client.status(since="0").disk.low  # type: ignore[union-attr]
        filler.unlink()
        wait_for(lambda: not client.status(since="0").disk.low, 10, "room again")  # type: ignore[union-attr]
        client.start_job(StartRequest(job_id="later.1", gpus=[2], argv=["true"]))
    with JobStore(state, allow_root_jobs=True) as again:
        assert again.get("neighbour.1").exit_code == 7


def test_a_log_keeps_its_tail_under_its_cap(tmp_path: Path) -> None:
    # Before: a job's log grew without bound.
    cap = 64 * 1024
    program = "import sys\nfor i in range(100000): print(i)\n"
    with agent_on(tmp_path / "state", log_max_bytes=cap) as (client, _store):
        client.start_job(
            StartRequest(job_id="chatty.1", gpus=[0], argv=[sys.executable, "-c", program])
        )
        log = tmp_path / "state" / "logs" / "chatty.1.log"
        wait_for(lambda: log.read_bytes().endswith(b"\n99999\n"), 30, "the log's last line")
        assert cap // 2 <= log.stat().st_size <= cap  # at least half of it: the end
        lines = log.read_text().splitlines()[1:]  # the first may be cut
        numbers = [int(line) for line in lines]
        assert numbers == list(range(numbers[0], 100000))
        assert client.log("chatty.1", lines=3).lines == ("99997", "99998", "99999")


def test_a_report_file_holds_only_what_was_not_read_and_its_numbers_stay_right(
    tmp_path: Path,
) -> None:
    # Before: a run's report file kept everything the job wrote (the agent read 512 KiB a
    # second of it), so a job writing reports without pause filled the agent's disk.
    lines = 3_000_000  # 30 MiB of report lines, written as fast as Python can
    program = (
        "import os, time\n"
        "with open(os.environ['PAIKA_REPORT_FILE'], 'a') as out:\n"
        f"    for i in range({lines}): out.write(f'metric=n:{{i}}\\n')\n"
        "time.sleep(60)\n"
    )
    with agent_on(tmp_path / "state") as (client, store):
        client.start_job(
            StartRequest(job_id="talky.1", gpus=[0], argv=[sys.executable, "-c", program])
        )
        last = f"metric=n:{lines - 1}"

        def caught_up() -> bool:
            job = client.job("talky.1")
            return bool(job.report_lines) and job.report_lines[-1] == last

        wait_for(caught_up, 60, "the agent to read the report file's end")
        job = client.job("talky.1")
        assert job.report_first > 1  # lines were dropped, and counted
        assert job.report_first + len(job.report_lines) - 1 == lines
        first = int(job.report_lines[0].rpartition(":")[2])
        assert first == job.report_first - 1  # each line keeps its number
        report = Path(store._jobs["talky.1"].report_path or "")
        assert report.stat().st_size > 30 * MIB
        assert report.stat().st_blocks * 512 < 10 * MIB  # only the unread part holds blocks


def test_a_low_disk_removes_the_logs_of_forgotten_runs_oldest_first(
    small_disk: Path, tmp_path: Path
) -> None:
    # Before: nothing ever freed the space the agent's logs took.
    state = small_disk / "state"
    options = {"disk_reserve_bytes": RESERVE, "keep_ended_s": 0.0, "tidy_interval_s": 0.05}
    program = f"import sys\nsys.stdout.write('x' * {12 * MIB})\n"
    with agent_on(state, **options) as (client, store):
        client.start_job(
            StartRequest(job_id="old.1", gpus=[0], argv=[sys.executable, "-c", program])
        )
        log = state / "logs" / "old.1.log"
        wait_for(lambda: log.exists() and log.stat().st_size == 12 * MIB, 30, "the whole log")
        wait_for(lambda: client.job("old.1").state is not JobState.RUNNING, 10, "its end")
        assert client.ack(["old.1"]).acked == 1
        wait_for(lambda: "old.1" not in {j.job_id for j in store.all_jobs()}, 10, "forgotten")
        assert log.exists()  # young, and few logs: kept while there is room
        with (small_disk / "filler").open("wb") as out:
            os.posix_fallocate(out.fileno(), 0, _free(small_disk) - 6 * MIB)
        wait_for(lambda: not log.exists(), 10, "the forgotten run's log to go")
        wait_for(lambda: not store.disk().low, 10, "room again")


def test_a_read_larger_than_the_cap_leaves_no_gap_in_the_log(tmp_path: Path) -> None:
    # Before: when the pump fell behind and read more than the cap at once (a busy machine;
    # the pipe holds a MiB), it kept the chunk's last half-cap after the log's old tail, so the
    # log jumped from the old lines to the newest ones with everything between them missing.
    from scheduler.agent.logpump import Log

    path = tmp_path / "job.log"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        log = Log(fd, cap=4096, keep_free=0)
        log.write(b"".join(b"%d\n" % i for i in range(300)))  # 1,490 bytes: under the cap
        log.write(b"".join(b"%d\n" % i for i in range(300, 3000)))  # 13 KB in one read
    finally:
        os.close(fd)
    lines = path.read_text().splitlines()[1:]  # the first may be cut
    numbers = [int(line) for line in lines]
    assert numbers == list(range(numbers[0], 3000))
    assert 4096 // 2 - 8 <= path.stat().st_size <= 4096
