"""`paika up`, the program's entry for the running service.

It makes the process's own settings (the signal handlers; the interpreter's switch interval
when Slack is served), opens paika, and declares the running parts, which one owner
(scheduler.running.Running) starts in order and stops in reverse, each within its bound:
doctor, cycle, slack (with SLACK_BOT_TOKEN), ops (unless Slack's HTTP mode serves /metrics
and /healthz), archive, courier, scheduling, console. What threads each runs, where they wait
and what bounds their queues: the table in scheduler/running.py.

bot/cli.py parses the command and calls `up` here; this module is imported only then.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

import typer

from scheduler.running import Part, Running

if TYPE_CHECKING:
    from bot.console_socket import Answer, ConsoleSocket
    from bot.runtime import SlackBot
    from scheduler.app import Paika
    from scheduler.archive.archiver import Archiver
    from scheduler.config import PolicyConfig
    from scheduler.cycle import Cycle
    from scheduler.periodic import Periodic
    from scheduler.settings import Settings

log = logging.getLogger("paika")

# The switch interval while Slack is served (see quick_acks).
SWITCH_INTERVAL_S = 0.001
# How often paika up runs paika doctor's checks again, so the board's admins see a fixed
# problem go (and a new one come) without a restart.
RECHECK_S = 3600.0
# The parts paika up may run, in their start order (scheduler/running.py's table).
PARTS = ("doctor", "cycle", "slack", "ops", "archive", "courier", "scheduling", "console")

ConsoleReply = Callable[["Paika", str, "str | None", "str | None"], tuple[bool, str]]


def quick_acks() -> None:
    """Let the event loop that acks Slack's requests take the interpreter back sooner: the
    answers are computed on a worker thread that holds the GIL for long stretches, and the
    loop waits up to the switch interval for it at every step; Python's default (5 ms) let a
    burst of acks queue behind the answers (bench/slack_ack.py). A setting of the whole
    process, so the program's entry makes it (here), never a library as it builds an app."""
    sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))


def up(open_paika: Callable[[], Paika], console_reply: ConsoleReply) -> None:
    """Run the service until SIGINT or SIGTERM, then stop it within its bound.

    `open_paika`: paika from the settings (its errors said, as typer.Exit); `console_reply`:
    how a `paika cmd` through the console socket is answered."""
    from scheduler.agent.observe import LogSettingError, configure_logging
    from scheduler.observe.logs import quiet_chatter
    from scheduler.settings import Settings

    # Ctrl-C or a TERM from the moment paika starts: one that comes while it is still starting
    # (its HTTP server may already answer) stops it cleanly once it is up, never halfway.
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    # Logging first, so what starting says (each migration applied, the policy version in
    # force) is in the log too.
    settings = Settings()
    try:
        configure_logging(settings.log_format, settings.log_level)
    except LogSettingError as exc:
        typer.echo(f"paika: {exc}", err=True)
        raise typer.Exit(2) from exc
    quiet_chatter()  # what changed, not every cycle's polls (PAIKA_LOG_LEVEL=DEBUG: those too)
    paika = open_paika()
    if paika.settings.slack_bot_token is not None:
        quick_acks()
    service = Service(paika, partial(console_reply, paika))
    running = Running(service.parts())
    running.start()
    # Every thread is a part's (scheduler/running.py's table names them).
    log.debug("threads: %s", ", ".join(sorted(t.name for t in threading.enumerate())))
    slack = (
        "Slack off (no SLACK_BOT_TOKEN)" if service.bot is None else f"Slack on {service.bot.where}"
    )
    archiver = service.archiver
    assert archiver is not None  # started above
    # Logged, not echoed: with PAIKA_LOG_FORMAT=json every line paika writes is JSON.
    log.info(
        "paika is up: a cycle every %g s; %s; metrics and health on %s/metrics, %s/healthz; "
        "the team's memory in %s. Ctrl-C stops it.",
        paika.policy.scheduler.cycle_seconds,
        slack,
        service.where,
        service.where,
        archiver.where,
    )
    stopping.wait()
    late = running.stop()
    if late:
        log.warning("paika stopped; not within their bounds: %s.", ", ".join(late))
    else:
        log.info("paika stopped.")


class Service:
    """paika up's parts, each started and stopped by Running; what a part starts, the parts
    after it use (the cycle, the bot's announcer, the archive, the courier)."""

    def __init__(self, paika: Paika, answer_console: Answer) -> None:
        from bot.said import problem
        from scheduler.notices.outbox import backlog
        from scheduler.observe.health import check, stale_after
        from scheduler.observe.http import ReportDesk
        from scheduler.observe.metrics import ServiceMetrics
        from scheduler.observe.watch import CycleWatch
        from scheduler.outputs import ReportLimits

        self.paika = paika
        self.answer_console = answer_console
        settings = paika.settings
        self.watch = CycleWatch()
        self.metrics = ServiceMetrics(self.watch, lambda: backlog(paika.engine, paika.clock.now()))
        knobs = paika.policy.scheduler
        stale = stale_after(knobs.cycle_seconds, knobs.hosts.poll_timeout_seconds)
        self.health = partial(check, self.watch, stale)
        limits = ReportLimits.of(settings)
        self.desk = ReportDesk(paika.engine, paika.clock, partial(problem, "en"), limits)
        self.slack = settings.slack_bot_token is not None
        # Slack's HTTP mode serves /metrics and /healthz beside /slack/events; otherwise they
        # get a server of their own on the same address.
        self.serves_ops = not self.slack or settings.slack_app_token is not None
        self.doctor = Doctor(settings, paika.policy)
        self.cycle: Cycle | None = None
        self.bot: SlackBot | None = None
        self.ops: tuple[Any, Any] | None = None
        self.where = ""  # the URL of /metrics and /healthz, less the path
        self.archiver: Archiver | None = None
        self.periodic: Periodic | None = None
        self.console: ConsoleSocket | None = None

    def parts(self) -> list[Part]:
        """The parts in their start order (PARTS, less those these settings do not run)."""
        parts = [
            Part(
                "doctor",
                self.doctor.start,
                self.doctor.stop,
                "on agents and Slack, then an hour",
                5,
            ),
            Part("cycle", self.start_cycle, self.stop_cycle, "on the agents' answers", 10),
        ]
        if self.slack:
            parts.append(
                Part("slack", self.start_slack, self.stop_slack, "on sockets and queues", 15)
            )
        if self.serves_ops:
            parts.append(Part("ops", self.start_ops, self.stop_ops, "on sockets", 10))
        parts += [
            Part("archive", self.start_archive, self.stop_archive, "on the object store", 15),
            Part("courier", self.start_courier, self.stop_courier, "on its wake-up, 5 s", 15),
            Part("scheduling", self.start_scheduling, self.stop_scheduling, "on its timer", 30),
            Part("console", self.start_console, self.stop_console, "on accept()", 5),
        ]
        return parts

    # -- cycle: the poller's loop (its thread starts as the cycle is built)

    def start_cycle(self) -> None:
        from scheduler.credentials import AgentSecretError
        from scheduler.notices.events import LoggingObserver
        from scheduler.runner import MissingAgentToken, agent_cycle

        try:
            self.cycle = agent_cycle(self.paika, LoggingObserver())
        except (MissingAgentToken, AgentSecretError) as exc:
            typer.echo(f"paika: {exc}", err=True)
            raise typer.Exit(2) from exc

    def stop_cycle(self) -> None:
        assert self.cycle is not None
        self.cycle.close()

    # -- slack: the bot, its server or socket and its pools

    def start_slack(self) -> None:
        self.bot = _start_bot(self.paika, self.metrics.slack_acked, self._routes())
        if self.bot.mode == "http":
            self.where = self.bot.where.removesuffix("/slack/events")

    def stop_slack(self) -> None:
        assert self.bot is not None
        self.bot.stop()

    # -- ops: /metrics, /healthz and the jobs' reports on a server of their own

    def start_ops(self) -> None:
        from scheduler.observe.http import ops_app

        self.ops, self.where = _serve_ops(self.paika, ops_app(self.metrics, self.health, self.desk))

    def stop_ops(self) -> None:
        from scheduler.serving import stop_server

        assert self.ops is not None
        stop_server(*self.ops)

    # -- archive: the object store's shipper

    def start_archive(self) -> None:
        self.archiver = _open_archive(self.paika)
        self.archiver.shipper.start()

    def stop_archive(self) -> None:
        assert self.archiver is not None
        self.archiver.close()

    # -- courier and scheduling: Periodic's two threads

    def start_courier(self) -> None:
        from bot.console_notices import ConsoleAnnouncer
        from scheduler.periodic import Periodic

        assert self.cycle is not None
        # Every notice goes through the outbox: to Slack, or printed when Slack is off.
        announcer = ConsoleAnnouncer() if self.bot is None else self.bot.announcer
        self.periodic = Periodic(
            self.paika.engine,
            self.paika.policy,
            self.paika.clock,
            self.cycle,
            announcer,
            watch=self.watch,
            after_cycle=self.metrics.cycle_done,
            archiver=self.archiver,
        )
        self.paika.on_change = self.periodic.courier.wake  # a command's notices go out at once
        self.periodic.courier.start()

    def stop_courier(self) -> None:
        assert self.periodic is not None
        self.periodic.courier.stop()

    def start_scheduling(self) -> None:
        assert self.periodic is not None
        self.periodic.start_scheduling()

    def stop_scheduling(self) -> None:
        assert self.periodic is not None
        self.periodic.stop_scheduling()

    # -- console: `paika cmd` answered on a socket in the data dir

    def start_console(self) -> None:
        self.console = _open_console_socket(self.answer_console)

    def stop_console(self) -> None:
        if self.console is not None:
            self.console.close()

    def _routes(self) -> list[Any]:
        from scheduler.observe.http import ops_routes

        return ops_routes(self.metrics, self.health, self.desk)


class Doctor:
    """paika doctor's checks in the background at paika up, and again every RECHECK_S: each
    finding that is not fine is logged as a warning the first time it is found, and the last
    result is kept for the board's admins; none stops the start. (The bot logs what each
    channel resolved to itself: those of Slack's checks are left to it.)"""

    def __init__(self, settings: Settings, policy: PolicyConfig) -> None:
        self.settings, self.policy = settings, policy
        self.said: set[str] = set()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="paika-doctor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the thread once a round in progress is done (Running bounds the wait)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stopping.is_set():
            self.check()
            self._stopping.wait(RECHECK_S)

    def check(self) -> None:
        from datetime import UTC, datetime

        from bot.doctor_words import finding_line
        from scheduler import checkup
        from scheduler.doctor import examine

        try:
            findings = examine(self.settings)
            if self.settings.slack_bot_token is not None:
                from bot.doctor_slack import CHANNEL_CODES, check_slack

                slack = check_slack(self.settings, self.policy)
                findings += [f for f in slack if f.code not in CHANNEL_CODES]
        except Exception:  # a check that crashes must not take paika up with it
            log.exception("paika doctor's checks failed")
            return
        for finding in checkup.remember(findings, datetime.now(UTC)).findings:
            line = finding_line("en", finding)
            if line not in self.said:
                self.said.add(line)
                log.warning("paika doctor: %s", line)


def _open_console_socket(answer: Answer) -> ConsoleSocket | None:
    """`paika cmd` answered here, on a socket in the data dir (bot/console_socket.py)."""
    from bot.console_socket import ConsoleSocket, settings_digest, socket_path
    from bot.i18n import LANGUAGES

    cwd = os.getcwd()
    path = socket_path(os.environ, cwd)
    digest = settings_digest(os.environ, cwd)
    console = ConsoleSocket.open(path, digest, answer, LANGUAGES)
    if console is not None:
        log.info("paika cmd is answered here, through %s", path)
    return console


def _open_archive(paika: Paika) -> Archiver:
    """The object store the settings name, its spool and shipper; the digest's picture is
    drawn here (bot/ knows pictures) for the archive."""
    from bot.digest.picture import render_png
    from scheduler.archive.setup import open_archive
    from scheduler.digest.model import Digest
    from storage.objects.base import BadKey
    from storage.objects.spool import SpoolBusy

    def picture(detail: Mapping[str, Any]) -> bytes:
        return render_png(Digest.from_json(detail), paika.policy.slack.default_language)

    try:
        return open_archive(paika.settings, paika.engine, paika.clock, picture=picture)
    except (BadKey, ValueError) as exc:
        typer.echo(f"paika: PAIKA_OBJECT_STORE is not usable: {exc}", err=True)
        raise typer.Exit(2) from exc
    except SpoolBusy as exc:
        typer.echo(f"paika: {exc}", err=True)
        typer.echo(
            "Another paika up uses this data folder; give each its own PAIKA_DATA_DIR.", err=True
        )
        raise typer.Exit(2) from exc


def _serve_ops(paika: Paika, ops: Any) -> tuple[tuple[Any, Any], str]:
    """Serve /metrics and /healthz on PAIKA_HTTP_HOST:PAIKA_HTTP_PORT: ((server, thread), URL)."""
    from scheduler.serving import bounds_for, serve_in_thread

    host, port = paika.settings.http_host, paika.settings.http_port
    try:
        server, thread, bound = serve_in_thread(ops, host, port, bounds=bounds_for(paika.settings))
    except OSError as exc:
        typer.echo(
            f"paika: cannot listen on {host}:{port} for /metrics and /healthz: {exc}", err=True
        )
        typer.echo("Set PAIKA_HTTP_HOST / PAIKA_HTTP_PORT to a free address.", err=True)
        raise typer.Exit(2) from exc
    return (server, thread), f"http://{host}:{bound}"


def _start_bot(paika: Paika, acked: Callable[[str, float], None], routes: list[Any]) -> SlackBot:
    """The Slack bot (SLACK_BOT_TOKEN is set); its settings are checked before anything runs.
    It times its acks into `acked` and, in HTTP mode, serves `routes` beside Slack's."""
    from bot.runtime import start_bot  # Slack's libraries load only when Slack is used
    from scheduler.errors import ConfigError

    try:
        return start_bot(paika, acked=acked, more_routes=routes)
    except ConfigError as exc:
        typer.echo(f"paika: Slack settings: {exc}", err=True)
        raise typer.Exit(2) from exc
    except OSError as exc:
        where = f"{paika.settings.http_host}:{paika.settings.http_port}"
        typer.echo(f"paika: cannot listen on {where} for Slack: {exc}", err=True)
        typer.echo(
            "Set PAIKA_HTTP_HOST / PAIKA_HTTP_PORT, or SLACK_APP_TOKEN for Socket Mode.", err=True
        )
        raise typer.Exit(2) from exc
