"""How fast the bot acknowledges Slack in HTTP mode, with a database holding 2,000 jobs.

    .venv/bin/python bench/slack_ack.py [--jobs 2000] [--concurrency 50] [--rounds 4]
                                        [--modal-every 5]

Each round sends `concurrency` signed slash commands at once over real HTTP — every
`modal-every`th a bare `/gpu submit` that opens the submit modal, the rest half
`/gpu queue`, half `/gpu submit …` — to the real Bolt app served by uvicorn in its own
process (as in production, where Slack is another machine), with the Web API on the
offline Slack (`fake_slack`) in this process. It reports the acknowledgement latency
(request sent → HTTP 200), the modal latency (request sent → views.open reaching the fake
Slack) and how long all answers of a burst took to arrive by response_url. Slack's limit for both
the acknowledgement and views.open (the trigger_id expires) is 3,000 ms; the goals are
p99 ≤ 200 ms for acks and every answer of a burst of 50 within 2,000 ms at 2,000 jobs.
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

from bot.app import build_app
from bot.http import EVENTS_PATH, http_app
from bot.services import BotServices
from bot.up import quick_acks
from scheduler.app import Paika
from scheduler.clock import SystemClock
from scheduler.hosts.inventory import apply_reports
from scheduler.hosts.report import GpuReading, HostReport
from scheduler.serving import serve_in_thread, stop_server
from scheduler.settings import Settings

# The offline Slack lives beside the tests, not in the installed packages.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fake_slack import BOT_TOKEN, SIGNING_SECRET, signing  # noqa: E402
from fake_slack.slack_server import FakeSlack  # noqa: E402

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


def opens_modal(i: int, modal_every: int) -> bool:
    return modal_every > 0 and i % modal_every == modal_every - 1


def command_text(i: int, round_no: int, modal_every: int) -> str:
    if opens_modal(i, modal_every):
        return "submit"
    if i % 2 == 0:
        return "queue"
    return (
        f'submit name=b{round_no}x{i} gpus=1 hours=2 priority=normal data=ready cmd="python t.py"'
    )


async def burst(
    url: str, slack: FakeSlack, size: int, round_no: int, modal_every: int
) -> tuple[list[float], dict[str, float]]:
    """`size` signed commands at once: the acknowledgement latency of each, in ms, and when
    each modal command was sent (perf_counter), by its trigger_id."""
    sent: dict[str, float] = {}

    async def one(client: httpx.AsyncClient, i: int) -> float:
        trigger_id = f"bench.{round_no}.{i}"
        body, headers = signing.slash_command(
            SIGNING_SECRET,
            command_text(i, round_no, modal_every),
            user_id=USERS[i % len(USERS)],
            response_url=slack.response_url(f"r{round_no}"),
            trigger_id=trigger_id,
        )
        began = time.perf_counter()
        if opens_modal(i, modal_every):
            sent[trigger_id] = began
        answer = await client.post(url, content=body, headers=headers)
        elapsed = (time.perf_counter() - began) * 1000
        assert answer.status_code == 200, answer.text
        return elapsed

    limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)
    async with httpx.AsyncClient(limits=limits, timeout=30, trust_env=False) as client:
        acks = list(await asyncio.gather(*(one(client, i) for i in range(size))))
    return acks, sent


def modal_latencies(slack: FakeSlack, sent: dict[str, float], timeout: float) -> list[float]:
    """Command sent → views.open received by the fake Slack, in ms, for each modal command."""
    slack.wait_for("views.open", count=len(sent), timeout=timeout)
    return [
        (call.received - sent[call.args["trigger_id"]]) * 1000
        for call in slack.calls("views.open")
        if call.args.get("trigger_id") in sent
    ]


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
    quick_acks()  # as paika up does
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
    parser.add_argument("--modal-every", type=int, default=5, help="0: no modal commands")
    args = parser.parse_args()
    modals_per_burst = sum(opens_modal(i, args.modal_every) for i in range(args.concurrency))

    with tempfile.TemporaryDirectory() as tmp, FakeSlack() as slack:
        ready: multiprocessing.Queue[Any] = multiprocessing.Queue()
        bot = multiprocessing.Process(
            target=serve_bot, args=(tmp, args.jobs, args.hosts, slack.api_url, ready)
        )
        bot.start()
        port, seeding_s = ready.get(timeout=3600)
        url = f"http://127.0.0.1:{port}{EVENTS_PATH}"
        acks: list[float] = []
        modals: list[float] = []
        answers: list[float] = []
        try:
            for round_no in range(args.rounds):
                began = time.perf_counter()
                acked, sent = asyncio.run(
                    burst(url, slack, args.concurrency, round_no, args.modal_every)
                )
                acks += acked
                count = args.concurrency - modals_per_burst
                slack.wait_for_response(f"r{round_no}", count=count, timeout=600)
                answers.append((time.perf_counter() - began) * 1000)
                if sent:
                    modals += modal_latencies(slack, sent, timeout=600)
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
        "modals_per_burst": modals_per_burst,
        "views_open_p50_ms": round(statistics.median(modals), 1) if modals else None,
        "views_open_p99_ms": round(percentile(modals, 0.99), 1) if modals else None,
        "views_open_max_ms": round(max(modals), 1) if modals else None,
        "all_answers_of_a_burst_ms_median": round(statistics.median(answers), 1),
        "all_answers_of_a_burst_ms_max": round(max(answers), 1),
        "seeding_s": round(seeding_s, 1),
    }
    width = max(map(len, figures))
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
