"""The `paika` command line, and the one place that wires paika together: the faces (Slack,
the console) to the core, the cycle and the agent. Nothing imports it.

It runs the same grammar as `/gpu`, plus operator commands.

Only what a command needs is imported when it runs. `paika agent` runs on every GPU host and
must start without the database, Slack, the periodic scheduler, matplotlib or the simulator:
the service's modules are imported inside the commands that use them, and the commands in
DEFERRED are imported from their own modules when they are looked up (to run them, or to list
them in --help).
"""

from __future__ import annotations

import importlib
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup
from typer.main import get_command_from_info
from typer.models import CommandInfo

if TYPE_CHECKING:
    from bot.runtime import SlackBot
    from scheduler.app import Paika

# Commands defined in modules of their own, as "module:function", in the order --help lists them.
DEFERRED = {
    "simulate": "scheduler.simulate.command:simulate_command",
    "agent": "scheduler.agent.command:agent_app",
}


class _Placeholder(TyperCommand):
    """Holds a deferred command's place in the group until the command is looked up."""


class _Commands(TyperGroup):
    """paika's commands: a deferred one is imported and built when it is looked up."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        # (ctx: the Context class of the click that typer builds on; it varies with typer.)
        command = super().get_command(ctx, cmd_name)
        if isinstance(command, _Placeholder):
            module, _, function = DEFERRED[cmd_name].partition(":")
            callback = getattr(importlib.import_module(module), function)
            if isinstance(callback, typer.Typer):  # a command with subcommands of its own
                command = typer.main.get_group(callback)
                command.name = cmd_name
            else:
                command = get_command_from_info(
                    CommandInfo(name=cmd_name, callback=callback),
                    pretty_exceptions_short=app.pretty_exceptions_short,
                    rich_markup_mode=self.rich_markup_mode,
                )
            self.commands[cmd_name] = command
        return command


app = typer.Typer(
    name="paika",
    help="paika (排卡): a shared GPU training queue run from Slack. Try: paika cmd help",
    no_args_is_help=True,
    add_completion=False,
    cls=_Commands,
)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
app.add_typer(db_app, name="db")


def _start() -> Paika:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import OperationalError

    from bot.console import render
    from scheduler.app import Paika
    from scheduler.errors import ConfigError
    from scheduler.settings import Settings
    from storage.db import normalize_url

    settings = Settings()
    try:
        return Paika.start(settings, words=render)
    except ConfigError as exc:
        typer.echo(f"paika: the policy file is invalid: {exc}", err=True)
        raise typer.Exit(2) from exc
    except OperationalError as exc:
        url = make_url(normalize_url(settings.resolved_database_url())).render_as_string()
        typer.echo(f"paika: cannot reach the database at {url}: {exc.orig}", err=True)
        typer.echo("Check PAIKA_DATABASE_URL and that the server is running.", err=True)
        raise typer.Exit(2) from exc


@app.command()
def cmd(
    text: Annotated[str, typer.Argument(help='The text of a /gpu command, e.g. "queue mine".')],
    user: Annotated[str, typer.Option("--user", "-u", help="The Slack user id to act as.")],
) -> None:
    """Run a /gpu command as USER and print the reply (exit status 1 on a user error)."""
    reply = _start().run(text, user.strip())
    typer.echo(reply.text, err=not reply.ok)
    if not reply.ok:
        raise typer.Exit(1)


@app.command()
def up() -> None:
    """Run the service: the scheduling cycle against the registered GPU hosts (Ctrl-C stops)."""
    from scheduler.hosts.credentials import AgentSecretError
    from scheduler.notices.events import LoggingObserver
    from scheduler.periodic import Periodic
    from scheduler.runner import MissingAgentToken, agent_cycle

    paika = _start()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        cycle = agent_cycle(paika, LoggingObserver())
    except (MissingAgentToken, AgentSecretError) as exc:
        typer.echo(f"paika: {exc}", err=True)
        raise typer.Exit(2) from exc
    bot = _start_bot(paika)
    # Every notice goes through the outbox: to Slack, or printed when Slack is off (None).
    announcer = None if bot is None else bot.announcer
    periodic = Periodic(paika.engine, paika.policy, paika.clock, cycle, announcer)
    paika.on_change = periodic.courier.wake  # a command's notices go out at once
    periodic.start()
    slack = "Slack off (no SLACK_BOT_TOKEN)" if bot is None else f"Slack on {bot.where}"
    typer.echo(
        f"paika is up: a cycle every {paika.policy.scheduler.cycle_seconds:g} s; {slack}. Ctrl-C stops it.",
        err=True,
    )
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    stopping.wait()
    periodic.stop()
    if bot is not None:
        bot.stop()
    typer.echo("paika stopped.", err=True)


def _start_bot(paika: Paika) -> SlackBot | None:
    """The Slack bot, when a bot token is set; its settings are checked before anything runs."""
    if paika.settings.slack_bot_token is None:
        return None
    from bot.runtime import start_bot  # Slack's libraries load only when Slack is used
    from scheduler.errors import ConfigError

    try:
        return start_bot(paika)
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


@app.command()
def demo(
    seconds: Annotated[float, typer.Option(help="Stop after this many real seconds.")] = 55,
    speed: Annotated[float, typer.Option(help="paika seconds per real second.")] = 600,
    seed: Annotated[int, typer.Option(help="Which mixed workload to run.")] = 7,
    quiet: Annotated[bool, typer.Option(help="Only the summary.")] = False,
) -> None:
    """The quick start: the real service on SQLite with three simulated GPU hosts, in accelerated time."""
    from bot.console import render
    from scheduler.demo import run_demo

    run_demo(seconds=seconds, speed=speed, seed=seed, out=sys.stdout, quiet=quiet, words=render)


@app.command("digest")
def digest_command(
    show: Annotated[
        bool, typer.Option("--print", help="Print the digest as text to standard output.")
    ] = False,
    png: Annotated[
        Path | None, typer.Option("--png", help="Write the digest's picture to this PNG file.")
    ] = None,
    lang: Annotated[str, typer.Option("--lang", help="The picture's language: en or zh.")] = "en",
) -> None:
    """The daily GPU board without Slack: as text (--print) and as a picture (--png FILE)."""
    if not show and png is None:
        typer.echo(
            "paika digest: say what to make: --print for text, --png FILE for the picture, or both.",
            err=True,
        )
        raise typer.Exit(2)
    if lang not in ("en", "zh"):
        typer.echo(f"paika digest: --lang {lang} is not known; use en or zh.", err=True)
        raise typer.Exit(2)
    from scheduler.digest import digest_now  # matplotlib and friends load only when asked
    from scheduler.digest.text import render_text

    paika = _start()
    digest = digest_now(paika)
    if show:
        typer.echo(render_text(digest, paika.policy.zone), nl=False)
    if png is not None:
        from scheduler.digest.picture import render_png

        try:
            png.write_bytes(render_png(digest, lang))
        except OSError as exc:
            typer.echo(f"paika digest: cannot write {png}: {exc.strerror}", err=True)
            raise typer.Exit(1) from exc
        typer.echo(f"picture written to {png}", err=True)


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Bring the database schema up to the newest revision."""
    from scheduler.settings import Settings
    from storage.db import current_revision, make_engine, upgrade

    engine = make_engine(Settings().resolved_database_url())
    before = current_revision(engine)
    upgrade(engine)
    after = current_revision(engine)
    typer.echo(
        f"database at revision {after}" + ("" if before == after else f" (was {before or 'empty'})")
    )


@db_app.command("current")
def db_current() -> None:
    """Show the schema revision of the database and of this code."""
    from scheduler.settings import Settings
    from storage.db import current_revision, head_revision, make_engine

    engine = make_engine(Settings().resolved_database_url())
    typer.echo(f"database: {current_revision(engine) or 'empty'} · code: {head_revision()}")


@app.command("agent-secret")
def agent_secret(
    file: Annotated[
        Path | None,
        typer.Option("--file", help="Where the secret lives (default: PAIKA_AGENT_SECRET_FILE)."),
    ] = None,
) -> None:
    """Make the scheduler's agent secret (0600) if it is missing; each host's token derives from it."""
    from scheduler.hosts.credentials import AgentSecretError, create_secret, read_secret
    from scheduler.settings import Settings

    path = file or Settings().agent_secret_file
    if path is None:
        typer.echo("paika: give --file or set PAIKA_AGENT_SECRET_FILE.", err=True)
        raise typer.Exit(2)
    made = create_secret(path)
    try:
        read_secret(path)
    except AgentSecretError as exc:
        typer.echo(f"paika: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(
        f"{'made' if made else 'kept'} the agent secret {path}; "
        f"run paika with PAIKA_AGENT_SECRET_FILE={path}"
    )


@app.command("version")
def show_version() -> None:
    """Print paika's version."""
    from importlib.metadata import version

    typer.echo(version("paika"))


def _deferred() -> None:
    """Stands in for a command of DEFERRED; never runs."""


for _name in DEFERRED:
    app.command(_name, cls=_Placeholder)(_deferred)


def main() -> None:
    """Console-script entry point."""
    app()
