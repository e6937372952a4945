"""How long the console's commands take, each as its own process, as an operator runs them.

A fresh data dir (SQLite, the local object store) holds a small team's state, made through
the real service: `--hosts` simulated GPU hosts (4 cards each) added by an admin, people of
two teams with quotas, `--jobs` jobs submitted through the `/gpu` grammar (some waiting for
their data), a few cycles of the real scheduler against the hosts' agents (on loopback, in
this process) so that some jobs run, and a snapshot of the queue in the object store. The
agents are stopped before anything is timed (paika's commands do not ask them, except
doctor, which finds them unreachable at once).

Then each command runs `--repeat` times as `paika ...` (the console script of this
interpreter's environment): `cmd help`, `cmd --user U queue`, `cmd --user U status ID`,
`digest --print`, `digest --print --png F`, `state show`, `doctor`. Printed per command: the
median and the fastest wall time, its exit status, how many modules it imported, and which of
the heavy packages the console should not need it loaded (matplotlib, slack_sdk, slack_bolt,
alembic, httpx, boto3). Goals (issue 29): `paika cmd` <= 0.5 s, `paika digest --print`
<= 1 s. Then `paika up` runs on the same data dir and the `paika cmd` rows are timed again,
answered through its console socket (bot/console_socket.py).

Python writes no bytecode when PYTHONDONTWRITEBYTECODE is set, so every process compiles
every module again and each figure is about twice what an installed paika takes: run it as

    env -u PYTHONDONTWRITEBYTECODE .venv/bin/python bench/cli_timings.py [--repeat 7]
        [--jobs 40] [--hosts 4] [--keep]

(it compiles paika's and its packages' bytecode first, as an install does). The last line is
one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sqlmodel import Session, select  # noqa: E402

from bot.console_socket import SOCKET_NAME  # noqa: E402
from scheduler.agent.app import build_app  # noqa: E402
from scheduler.agent.jobs import JobStore  # noqa: E402
from scheduler.agent.simulated import SimulatedReader  # noqa: E402
from scheduler.app import Paika  # noqa: E402
from scheduler.archive import state  # noqa: E402
from scheduler.notices.events import RecordingObserver  # noqa: E402
from scheduler.runner import agent_cycle  # noqa: E402
from scheduler.service import jobs  # noqa: E402
from scheduler.serving import serve_in_thread, stop_server  # noqa: E402
from scheduler.settings import Settings  # noqa: E402
from storage.models import Job, JobState  # noqa: E402
from storage.objects import keys  # noqa: E402
from storage.objects.local import LocalStore  # noqa: E402

ADMIN = "UBENCHADMIN"
TOKEN = "bench-cli-timings-agent-token-0123456789"
PEOPLE = (
    ("UALICE", "vision", "member"),
    ("UBOB", "vision", "member"),
    ("UVERA", "vision", "approver"),
    ("UNINA", "nlp", "member"),
    ("UNOAH", "nlp", "approver"),
)
SPEC = "4xA100-80GB"
# The packages the console's commands should never load (tests/test_console_imports.py).
HEAVY = ("matplotlib", "slack_sdk", "slack_bolt", "alembic", "httpx", "boto3")

# Runs the console script's entry, then prints how many modules it loaded and which heavy ones.
COUNTING = """
import json, sys
sys.argv = ["paika", *sys.argv[1:]]
from bot.cli import main
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
heavy = sorted({{name.partition(".")[0] for name in sys.modules}} & set({heavy!r}))
print(json.dumps({{"code": code, "modules": len(sys.modules), "heavy": heavy}}), file=sys.stderr)
"""


def seed(data: Path, job_count: int, host_count: int) -> int:
    """The team's state, made through the service; the id of a job that runs."""
    settings = Settings(data_dir=data, admins=(ADMIN,), agent_token=TOKEN, config=None)
    paika = Paika.start(settings)
    agents = []
    try:
        for index in range(host_count):
            name = f"gpu-{index + 1:02d}"
            store = JobStore(data / "agents" / name, allow_root_jobs=True)
            reader = SimulatedReader(SPEC, host=name, loads=store)
            server, thread, port = serve_in_thread(build_app(reader, store, TOKEN, host=name))
            agents.append((name, store, server, thread, f"http://127.0.0.1:{port}"))
        said = [
            (ADMIN, f"admin member add <@{u}> team={team} role={role}") for u, team, role in PEOPLE
        ]
        said += [(ADMIN, f"admin host add {name} url={url}") for name, _, _, _, url in agents]
        said += [
            (
                ADMIN,
                "admin quota add team=vision type=any hours=4000 expires=2099-12-31 owner=<@UVERA>",
            ),
            (
                ADMIN,
                "admin quota add team=nlp type=any hours=3000 expires=2099-12-31 owner=<@UNOAH>",
            ),
        ]
        for index in range(job_count):
            user, team, role = PEOPLE[index % len(PEOPLE)]
            priority = ("core" if role == "approver" else "normal", "normal", "idle")[index % 3]
            data_at = "ready" if index % 4 else f"s3://datasets/{team}-{index}"
            said.append(
                (
                    user,
                    f"submit name={team}-{index:03d} gpus={1 + index % 4} hours={2 + index % 5} "
                    f"priority={priority} data={data_at} project={team}-p{index % 3} "
                    "cmd='sleep 3600'",
                )
            )
        for user, text in said:
            reply = paika.run(text, user)
            if not reply.ok:
                raise RuntimeError(f"seeding failed on {text!r}: {reply.text}")
        cycle = agent_cycle(paika, RecordingObserver())
        for _ in range(3):  # report the GPUs, start what fits, see it running
            cycle.run_once()
        with paika.context(ADMIN) as ctx:
            waits = jobs.current_waits(ctx)
        at = datetime.now(UTC).replace(microsecond=0)
        with Session(paika.engine) as session:
            doc = state.build_document(session, paika.policy, waits, at, 1)
            running = session.exec(select(Job.id).where(Job.state == JobState.RUNNING)).first()
        LocalStore(data / "objects").put(keys.snapshot(at), state.encode(doc))
        if running is None:
            raise RuntimeError("no job started on the simulated hosts")
        return running
    finally:
        for _name, store, server, thread, _url in agents:
            for job in store.all_jobs():
                if job.state == "running":
                    store.stop(job.job_id, 0.5)
            stop_server(server, thread)
            store.close()
        paika.engine.dispose()


def commands(job_id: int, png: Path) -> dict[str, list[str]]:
    return {
        "cmd help": ["cmd", "help"],
        "cmd queue": ["cmd", "--user", "UALICE", "queue"],
        "cmd status": ["cmd", "--user", "UALICE", f"status {job_id}"],
        "digest --print": ["digest", "--print"],
        "digest --print --png": ["digest", "--print", "--png", str(png)],
        "state show": ["state", "show"],
        "doctor": ["doctor", "--timeout", "1"],
    }


def paika_script() -> list[str]:
    script = Path(sys.executable).with_name("paika")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from bot.cli import main; main()"]


def measure(args: list[str], env: dict[str, str], repeat: int) -> dict[str, Any]:
    """Wall times of `paika ARGS` run `repeat` times, and what one more run imported."""
    times, codes = [], set()
    for _ in range(repeat):
        started = time.perf_counter()
        done = subprocess.run(
            [*paika_script(), *args], env=env, capture_output=True, timeout=300, check=False
        )
        times.append(time.perf_counter() - started)
        codes.add(done.returncode)
    counted = subprocess.run(
        [sys.executable, "-c", COUNTING.format(heavy=HEAVY), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    loaded = json.loads(counted.stderr.strip().splitlines()[-1])
    return {
        "median_s": round(statistics.median(times), 3),
        "min_s": round(min(times), 3),
        "exit": sorted(codes),
        "modules": loaded["modules"],
        "heavy": loaded["heavy"],
    }


def print_row(name: str, row: dict[str, Any]) -> None:
    print(
        f"{name:<30}{row['median_s']:>10.3f}{row['min_s']:>8.3f}"
        f"{','.join(map(str, row['exit'])):>6}{row['modules']:>9}  "
        f"{', '.join(row['heavy']) or '-'}"
    )


@contextmanager
def running_service(env: dict[str, str], folder: Path) -> Iterator[Path]:
    """`paika up` on the bench's data dir (console mode; its hosts' agents are gone, which
    it logs), until its console socket answers; stopped after."""
    with socket.socket() as probe:  # a free port for its /metrics
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = Path(env["PAIKA_DATA_DIR"]) / SOCKET_NAME
    with (folder / "paika-up.log").open("w") as sink:
        up = subprocess.Popen(
            [*paika_script(), "up"],
            env={**env, "PAIKA_HTTP_PORT": str(port)},
            stdout=sink,
            stderr=sink,
        )
    try:
        deadline = time.monotonic() + 60
        while not path.is_socket():
            if up.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((folder / "paika-up.log").read_text())
            time.sleep(0.1)
        yield path
    finally:
        up.send_signal(signal.SIGINT)
        up.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--keep", action="store_true", help="keep the data dir, and say where")
    args = parser.parse_args()
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print(
            "note: PYTHONDONTWRITEBYTECODE is set: every command compiles every module, and "
            "takes about twice what an installed paika does (run with env -u ...)",
            file=sys.stderr,
        )
    else:  # as an install does: every later process reads its modules' bytecode
        for folder in (ROOT / "bot", ROOT / "scheduler", ROOT / "storage"):
            compileall.compile_dir(folder, quiet=1, workers=0)
        compileall.compile_dir(sysconfig.get_paths()["purelib"], quiet=1, workers=0)
    folder = Path(tempfile.mkdtemp(prefix="paika-cli-timings-"))
    try:
        data = folder / "data"
        started = time.perf_counter()
        job_id = seed(data, args.jobs, args.hosts)
        print(
            f"seeded {args.jobs} jobs on {args.hosts} hosts of {SPEC} in "
            f"{time.perf_counter() - started:.1f} s (SQLite, {data})"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("PAIKA_")}
        env |= {"PAIKA_DATA_DIR": str(data), "PAIKA_ADMINS": ADMIN, "PAIKA_AGENT_TOKEN": TOKEN}
        figures: dict[str, Any] = {}
        print(f"{'command':<30}{'median s':>10}{'min s':>8}{'exit':>6}{'modules':>9}  heavy loaded")
        for name, argv in commands(job_id, folder / "digest.png").items():
            figures[name] = measure(argv, env, args.repeat)
            print_row(name, figures[name])
        with running_service(env, folder) as socket_path:
            print(f"through paika up (its socket {socket_path}):")
            for name, argv in commands(job_id, folder / "digest.png").items():
                if argv[0] == "cmd":
                    figures[f"{name} (paika up)"] = row = measure(argv, env, args.repeat)
                    print_row(f"{name} (paika up)", row)
        print(json.dumps({"repeat": args.repeat, "jobs": args.jobs, "commands": figures}))
    finally:
        if args.keep:
            print(f"kept {folder}", file=sys.stderr)
        else:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
