"""How fast the bot acknowledges Slack in HTTP mode, with a database holding 2,000 jobs.

    .venv/bin/python bench/slack_ack.py [--jobs 2000] [--concurrency 50] [--rounds 4]

Each round sends `concurrency` signed slash commands at once over real HTTP — half
`/gpu queue`, half `/gpu submit …` — to the real Bolt app served by uvicorn in its own
process (as in production, where Slack is another machine), with the Web API on the
tests' fake Slack server in this process. It reports the acknowledgement latency (request
sent → HTTP 200) and, for reference, how long the full answers took to arrive by
response_url. Slack's limit for the acknowledgement is 3,000 ms; the goal is p99 ≤ 200 ms.
The last line is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr
from sqlmodel import Session

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "bot"))  # the offline Slack test kit

from fakes import BOT_TOKEN, SIGNING_SECRET, signing  # noqa: E402
from fakes.slack_server import FakeSlack  # noqa: E402

from bot.app import build_app  # noqa: E402
from bot.http import EVENTS_PATH, http_app  # noqa: E402
from bot.services import BotServices  # noqa: E402
from scheduler.app import Paika  # noqa: E402
from scheduler.clock import SystemClock  # noqa: E402
from scheduler.hosts.inventory import apply_reports  # noqa: E402
from scheduler.hosts.report import GpuReading, HostReport  # noqa: E402
from scheduler.serving import serve_in_thread, stop_server  # noqa: E402
from scheduler.settings import Settings  # noqa: E402

USERS = [f"UBENCH{i:03d}" for i in range(40)]
CARDS = (("NVIDIA A100-SXM4-80GB", 80), ("NVIDIA A10", 24), ("Tesla T4", 16))


def seeded(folder: Path, jobs: int, hosts: int) -> Paika:
    """A paika core on SQLite with `hosts` 8-GPU hosts and `jobs` queued jobs."""
    settings = Settings(
        data_dir=folder,
        database_url=f"sqlite:///{folder / 'paika.db'}",
        admins=("UADMIN",),
        agent_token="bench-agent-token",
    )
    paika = Paika.start(settings, clock=SystemClock())
    for index, user in enumerate(USERS):
        paika.run(f"admin member add <@{user}> team={('vision', 'nlp')[index % 2]}", "UADMIN")
    reports = {}
    for h in range(hosts):
        name = f"gpu{h:03d}"
        paika.run(f"admin host add {name} url=http://127.0.0.1:9/{name}", "UADMIN")
        card, memory = CARDS[h % len(CARDS)]
        readings = tuple(GpuReading(i, f"GPU-{h}-{i}", card, memory, 0.0, 0.0) for i in range(8))
        reports[name] = HostReport(name, True, gpus=readings)
    with Session(paika.engine) as session:
        apply_reports(session, paika.policy, reports, paika.clock.now())
        session.commit()
    for index in range(jobs):
        gpus = (1, 1, 2, 4, 8)[index % 5]
        data = "ready" if index % 3 else "pending"
        paika.run(
            f"submit name=seed{index} gpus={gpus} hours={gpus * (1 + index % 9)} "
            f'priority={("normal", "idle", "normal")[index % 3]} data={data} cmd="python train.py"',
            USERS[index % len(USERS)],
        )
    return paika


async def burst(url: str, slack: FakeSlack, size: int, round_no: int) -> list[float]:
    """`size` signed commands at once; the acknowledgement latency of each, in ms."""

    async def one(client: httpx.AsyncClient, i: int) -> float:
        text = (
            "queue"
            if i % 2 == 0
            else f'submit name=b{round_no}x{i} gpus=1 hours=2 priority=normal data=ready cmd="python t.py"'
        )
        body, headers = signing.slash_command(
            SIGNING_SECRET,
            text,
            user_id=USERS[i % len(USERS)],
            response_url=slack.response_url(f"r{round_no}"),
        )
        began = time.perf_counter()
        answer = await client.post(url, content=body, headers=headers)
        elapsed = (time.perf_counter() - began) * 1000
        assert answer.status_code == 200, answer.text
        return elapsed

    limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)
    async with httpx.AsyncClient(limits=limits, timeout=30, trust_env=False) as client:
        return list(await asyncio.gather(*(one(client, i) for i in range(size))))


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def serve_bot(
    folder: str, jobs: int, hosts: int, api_url: str, ready: multiprocessing.Queue[Any]
) -> None:
    """The bot's process: seed the database, serve Slack over HTTP until terminated."""
    began = time.perf_counter()
    paika = seeded(Path(folder), jobs, hosts)
    seeding_s = time.perf_counter() - began
    settings = paika.settings.model_copy(
        update={
            "slack_bot_token": SecretStr(BOT_TOKEN),
            "slack_signing_secret": SecretStr(SIGNING_SECRET),
            "slack_api_url": api_url,
        }
    )
    app, messenger = build_app(settings, BotServices(paika))
    server, thread, port = serve_in_thread(http_app(app, messenger.pacing))
    ready.put((port, seeding_s))
    try:
        thread.join()
    finally:
        stop_server(server, thread)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--hosts", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp, FakeSlack() as slack:
        ready: multiprocessing.Queue[Any] = multiprocessing.Queue()
        bot = multiprocessing.Process(
            target=serve_bot, args=(tmp, args.jobs, args.hosts, slack.api_url, ready)
        )
        bot.start()
        port, seeding_s = ready.get(timeout=3600)
        url = f"http://127.0.0.1:{port}{EVENTS_PATH}"
        acks: list[float] = []
        answers: list[float] = []
        try:
            for round_no in range(args.rounds):
                began = time.perf_counter()
                acks += asyncio.run(burst(url, slack, args.concurrency, round_no))
                slack.wait_for_response(f"r{round_no}", count=args.concurrency, timeout=600)
                answers.append((time.perf_counter() - began) * 1000)
        finally:
            bot.terminate()
            bot.join()
        slack.assert_nothing_invalid()

    figures = {
        "jobs_in_database": args.jobs,
        "gpus": args.hosts * 8,
        "requests": len(acks),
        "concurrency": args.concurrency,
        "ack_p50_ms": round(statistics.median(acks), 1),
        "ack_p99_ms": round(percentile(acks, 0.99), 1),
        "ack_max_ms": round(max(acks), 1),
        "all_answers_of_a_burst_ms_median": round(statistics.median(answers), 1),
        "seeding_s": round(seeding_s, 1),
    }
    width = max(map(len, figures))
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
