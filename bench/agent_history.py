"""An agent with a long history: the size and time of one poll, and of a start.

An agent is started over real HTTP on loopback on a job table of `N` ended runs (each with
`--report-kib` of report lines, as a busy host keeps after months of short jobs), for each N of
`--runs`. Measured, median of `--repeats`:

- whole: GET /v1/status without a cursor (what a scheduler before cursors asks): every job;
- first: GET /v1/status?since=0 (a scheduler's first poll after its start): one page;
- steady: GET /v1/status?since=<the current cursor> (every later poll): the changes only;
- start: POST /v1/jobs of a short job (its table is written before the answer).

    .venv/bin/python bench/agent_history.py [--runs 0,2000,20000] [--report-kib 1] [--repeats 5]

Prints its figures and ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from scheduler.agent.app import build_app
from scheduler.agent.jobs import STATE_FILE, JobStore
from scheduler.agent.simulated import SimulatedReader
from scheduler.serving import serve_in_thread, stop_server

TOKEN = "bench-token-0123456789"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


def write_history(state_dir: Path, runs: int, report_kib: int) -> None:
    state_dir.mkdir(mode=0o700, parents=True)
    lines = ["metric=loss:0.3 " + "x" * 1000] * report_kib
    now = time.time() - 86400
    records = [
        {
            "job_id": f"{n}.1",
            "gpus": [n % 8],
            "command": ["python", "train.py", "--epochs", "3"],
            "pid": None,
            "start_ticks": None,
            "started_at": now + n,
            "log_path": "",
            "exit_path": "",
            "state": "exited",
            "ended_at": now + n + 1,
            "exit_code": 0,
            "report_lines": lines,
            "seq": n + 1,
        }
        for n in range(runs)
    ]
    data = {"version": 1, "epoch": "bench", "seq": runs, "jobs": records}
    (state_dir / STATE_FILE).write_text(json.dumps(data))


def timed(call: Callable[[], httpx.Response], repeats: int) -> tuple[float, int]:
    """(median seconds, bytes of the last answer)."""
    took, size = [], 0
    for _ in range(repeats):
        began = time.perf_counter()
        answer = call()
        took.append(time.perf_counter() - began)
        answer.raise_for_status()
        size = len(answer.content)
    return statistics.median(took), size


def one(runs: int, report_kib: int, repeats: int) -> dict[str, float | int]:
    with tempfile.TemporaryDirectory() as scratch:
        state = Path(scratch) / "state"
        write_history(state, runs, report_kib)
        store = JobStore(state, allow_root_jobs=True, python=sys.executable)
        reader = SimulatedReader("8xA100-80GB", host="bench", loads=store)
        server, thread, port = serve_in_thread(build_app(reader, store, TOKEN))
        url = f"http://127.0.0.1:{port}"
        try:
            with httpx.Client(base_url=url, headers=HEADERS, timeout=120) as http:
                whole = timed(lambda: http.get("/v1/status"), repeats)
                first = timed(lambda: http.get("/v1/status", params={"since": "0"}), repeats)
                cursor = store.cursor()
                steady = timed(lambda: http.get("/v1/status", params={"since": cursor}), repeats)
                count = iter(range(repeats))

                def start() -> httpx.Response:
                    n = next(count)  # a GPU of its own (at most 8 repeats): nothing waits
                    body = {"job_id": f"new{n}.1", "gpus": [n % 8], "argv": ["sleep", "5"]}
                    return http.post("/v1/jobs", json=body)

                started = timed(start, repeats)
        finally:
            stop_server(server, thread)
            for job in store.all_jobs():
                if job.running:
                    store.stop(job.job_id, grace_s=0)
            store.close()
    return {
        "runs": runs,
        "whole_bytes": whole[1],
        "whole_s": round(whole[0], 4),
        "first_bytes": first[1],
        "first_s": round(first[0], 4),
        "steady_bytes": steady[1],
        "steady_s": round(steady[0], 4),
        "start_s": round(started[0], 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="0,2000,20000")
    parser.add_argument("--report-kib", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if not 1 <= args.repeats <= 8:
        parser.error("--repeats: from 1 to 8 (each start takes a GPU of its own)")
    results = [one(int(n), args.report_kib, args.repeats) for n in args.runs.split(",")]
    for r in results:
        print(
            f"{r['runs']:>6} ended runs: whole {r['whole_bytes'] / 1e6:8.2f} MB "
            f"{r['whole_s'] * 1000:8.1f} ms | first page {r['first_bytes'] / 1e6:6.2f} MB "
            f"{r['first_s'] * 1000:7.1f} ms | steady {r['steady_bytes']:6d} B "
            f"{r['steady_s'] * 1000:6.1f} ms | start {r['start_s'] * 1000:6.1f} ms"
        )
    print(json.dumps({"report_kib": args.report_kib, "results": results}))


if __name__ == "__main__":
    main()
