"""The `paika` command line, and the one place that wires paika together: the faces (Slack,
the console) to the core, the cycle and the agent. Nothing imports it. `paika up`'s running
service is assembled in bot/up.py, which this command calls.

It runs the same grammar as `/gpu`, plus operator commands.

Only what a command needs is imported when it runs. `paika agent` runs on every GPU host and
must start without the database, Slack, the periodic scheduler, matplotlib or the simulator:
the service's modules are imported inside the commands that use them, and the commands in
DEFERRED are imported from their own modules when they are looked up (to run them, or to list
them in --help).
"""

from __future__ import annotations

import importlib
import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup
from typer.main import get_command_from_info
from typer.models import CommandInfo

if TYPE_CHECKING:
    from scheduler.app import Paika

# Commands defined in modules of their own, as "module:function", in the order --help lists them.
DEFERRED = {
    "init": "bot.init_cli:init_command",
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
    help="paika (排卡): a shared GPU training queue run from Slack. Try: paika demo, then "
    "paika cmd help; on a new install, paika init, then paika doctor.",
    no_args_is_help=True,
    add_completion=False,
    cls=_Commands,
)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
app.add_typer(db_app, name="db")
deploy_app = typer.Typer(help="Deployment files.", no_args_is_help=True)
app.add_typer(deploy_app, name="deploy")
state_app = typer.Typer(
    help="The queue and the GPUs as snapshots in the object store: show, diff, restore.",
    no_args_is_help=True,
)
app.add_typer(state_app, name="state")
share_app = typer.Typer(
    help="Whether two jobs may share a GPU, and the slowdown paika expects.",
    no_args_is_help=True,
)
app.add_typer(share_app, name="share")


def _say(lang: str | None, key: str, **params: object) -> str:
    """The command's own words from the catalogue, in `lang` (English when none is known or
    `lang` is not one paika speaks). Imported here: an agent's install has no PyYAML."""
    from bot.i18n import DEFAULT, t

    return t(lang or DEFAULT, key, **params)


def _start(lang: str | None = None) -> Paika:
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
        typer.echo(_say(lang, "cli.policy_invalid", problem=exc), err=True)
        raise typer.Exit(2) from exc
    except OperationalError as exc:
        url = make_url(normalize_url(settings.resolved_database_url())).render_as_string()
        typer.echo(_say(lang, "cli.no_database", url=url, problem=exc.orig), err=True)
        raise typer.Exit(2) from exc


def _refuse_undecodable(lang: str | None, key: str, value: str) -> None:
    """Bytes that are not text in the terminal's encoding reach Python as lone surrogates,
    which no database or Slack can store: say so (`key`, naming the argument) and exit 2,
    rather than a traceback."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        shown = value.encode("utf-8", "backslashreplace").decode("utf-8")
        typer.echo(_say(lang, key, shown=shown), err=True)
        raise typer.Exit(2) from None


# Whom `paika cmd help` reads the help as when no --user is given and no admin is set.
HELP_READER = "U0PAIKAHELP"


@app.command()
def cmd(
    text: Annotated[str, typer.Argument(help='The text of a /gpu command, e.g. "queue mine".')],
    user: Annotated[
        str | None,
        typer.Option(
            "--user",
            "-u",
            help="The Slack member id to act as (in Slack: your profile → ⋯ → Copy member ID); "
            "not needed for help.",
        ),
    ] = None,
    lang: Annotated[
        str | None,
        typer.Option(
            "--lang", help="The reply's language: en or zh (default: USER's /gpu lang, else en)."
        ),
    ] = None,
) -> None:
    """Run a /gpu command as USER and print the reply (exit status 1 on a user error)."""
    from bot.i18n import LANGUAGES

    if lang is not None and lang not in LANGUAGES:
        typer.echo(_say(lang, "cli.unknown_language", command="cmd", given=lang), err=True)
        raise typer.Exit(2)
    asks_help = text.split()[:1] == ["help"]
    if user is None and not asks_help:
        typer.echo(_say(lang, "cli.cmd_needs_user", text=text), err=True)
        raise typer.Exit(2)
    user = (user or "").strip()
    _refuse_undecodable(lang, "cli.not_text.user", user)
    _refuse_undecodable(lang, "cli.not_text.text", text)
    ok, words = console_reply(_start(lang), text, user, lang)
    typer.echo(words, err=not ok)
    if not ok:
        raise typer.Exit(1)


def console_reply(paika: Paika, text: str, user: str | None, lang: str | None) -> tuple[bool, str]:
    """What `paika cmd TEXT --user USER --lang LANG` prints, and whether the command went
    well: run in this process, or by `paika up` for a `paika cmd` through its socket."""
    from bot.console import render
    from scheduler.service.slack import chosen_language

    user = (user or "").strip()
    if not user:  # help for no one in particular: an admin's, so every command is listed
        user = min(paika.admins, default=HELP_READER)
    reply = paika.run(text, user)
    # In the reader's language (the reply's own text is English, in the words of whichever
    # face started this paika).
    said = lang or chosen_language(paika.engine, user) or "en"
    result = reply.result if reply.ok else reply.error
    words = reply.text if result is None else render(result, paika.policy.zone, said)
    return reply.ok, words


def _cmd_through_service(args: list[str]) -> bool:
    """`paika cmd ARGS` answered by the running `paika up` on its socket, printed as in
    process; False when no service took it (or the arguments are for typer to read)."""
    from bot.console_socket import NotAnswered, ask, parse_cmd, settings_digest, socket_path

    parsed = parse_cmd(args)
    if parsed is None:
        return False
    text, user, lang = parsed  # an unknown --lang: the service leaves it to typer's path
    if user is None and text.split()[:1] != ["help"]:
        return False
    if not (_is_text(text) and _is_text(user or "")):
        return False  # said in process, as it always is
    cwd = os.getcwd()
    try:
        answer = ask(
            socket_path(os.environ, cwd),
            settings_digest(os.environ, cwd),
            text,
            user.strip() if user else None,
            lang,
        )
    except NotAnswered as exc:
        key = "cli.cmd_unanswered_because" if str(exc) else "cli.cmd_unanswered"
        typer.echo(_say(lang, key, problem=exc), err=True)
        raise SystemExit(2) from None
    if answer is None:
        return False
    ok, words = answer
    typer.echo(words, err=not ok)
    if not ok:
        raise SystemExit(1)
    return True


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# Words that only a job's own report has (`metric=` is both: a job reports `metric=loss:0.31`,
# the ledger report picks a metric by name, `metric=loss`).
JOB_REPORT_KEYS = ("output", "checkpoint", "status", "note")


def is_job_report(words: list[str], fmt: str | None, env: Mapping[str, str]) -> bool:
    """Whether `paika report WORDS` is a running job reporting its outputs rather than the
    ledger's export: never with --format; always inside a paika job (PAIKA_JOB_ID set);
    else when a word is one only a job's report has."""
    if fmt is not None:
        return False
    if env.get("PAIKA_JOB_ID"):
        return True
    for word in words:
        key, sep, value = word.partition("=")
        if sep and (key in JOB_REPORT_KEYS or (key == "metric" and ":" in value)):
            return True
    return False


@app.command("report")
def report_command(
    words: Annotated[list[str] | None, typer.Argument(help="The keys of the report.")] = None,
    fmt: Annotated[str | None, typer.Option("--format", help="csv (the default) or json.")] = None,
    user: Annotated[str | None, typer.Option("--user", help="The Slack user id.")] = None,
) -> None:
    """Print the whole ledger report (every group and job, no pages) as CSV or JSON, with the
    keys of /gpu report (paika report by=project days=90 --format csv). Inside a running job:
    report its metrics, outputs and status to paika instead, with the keys of /gpu done
    (paika report metric=loss:0.31 output=s3://ckpt/x status=succeeded)."""
    import os

    if is_job_report(words or [], fmt, os.environ):
        from bot.job_report import job_report

        raise typer.Exit(job_report(words or []))
    from bot.report_export import export_report

    raise typer.Exit(export_report(words or [], fmt or "csv", user, _start))


@app.command()
def up() -> None:
    """Run the service: the scheduling cycle against the registered GPU hosts (Ctrl-C stops).

    Settings, from the environment (all of them: docs/reference/settings.md); paika doctor
    checks them, and paika up logs the same checks as warnings when it starts:
    PAIKA_DATABASE_URL: the database (default: SQLite under PAIKA_DATA_DIR)
    PAIKA_CONFIG: your policy file (default: the bundled example, not your team's)
    PAIKA_ADMINS: admins' Slack member ids (profile → ⋯ → Copy member ID)
    PAIKA_AGENT_SECRET_FILE or PAIKA_AGENT_TOKEN: the agents' tokens (one is required)
    PAIKA_AGENT_CA_FILE: the CA that https:// agents' certificates are checked against
    PAIKA_OBJECT_STORE: s3://bucket/prefix or a folder (default: under PAIKA_DATA_DIR)
    SLACK_BOT_TOKEN: Slack on (unset: notices go to the console)
    SLACK_APP_TOKEN: Socket Mode; or SLACK_SIGNING_SECRET: HTTP mode, on
    PAIKA_HTTP_HOST:PAIKA_HTTP_PORT (default 127.0.0.1:3000)"""
    from bot.up import up as run

    run(_start, console_reply)  # the running service: bot/up.py


@app.command()
def doctor(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the findings as JSON, for machines.")
    ] = False,
    lang: Annotated[str, typer.Option("--lang", help="The language: en or zh.")] = "en",
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.1, help="Seconds to wait for each agent.")
    ] = 3.0,
) -> None:
    """Check an install before (and after) paika up: the policy file in force, the admins, the
    database, the object store, every registered host's agent (reachable, certificate,
    clock, cards the policy knows, accounts for root agents) and Slack (token, channels).
    Exit status 0 when nothing blocks, 1 when something does."""
    import json

    from bot.doctor_slack import check_slack
    from bot.doctor_words import as_json as findings_json
    from bot.doctor_words import report
    from bot.i18n import LANGUAGES
    from scheduler.config import load_policy
    from scheduler.doctor import blocks, examine
    from scheduler.errors import ConfigError
    from scheduler.settings import Settings

    if lang not in LANGUAGES:
        typer.echo(_say(lang, "cli.unknown_language", command="doctor", given=lang), err=True)
        raise typer.Exit(2)
    settings = Settings()
    findings = examine(settings, timeout=timeout)
    try:
        policy = load_policy(settings.policy_path())
    except ConfigError:
        policy = None  # examine said so
    findings += check_slack(settings, policy)
    if as_json:
        typer.echo(json.dumps(findings_json(lang, findings), ensure_ascii=False, indent=2))
    else:
        typer.echo(report(lang, findings))
    if blocks(findings):
        raise typer.Exit(1)


@app.command()
def demo(
    seconds: Annotated[float, typer.Option(help="Stop after this many real seconds.")] = 55,
    speed: Annotated[float, typer.Option(help="paika seconds per real second.")] = 600,
    seed: Annotated[int, typer.Option(help="Which mixed workload to run.")] = 7,
    quiet: Annotated[bool, typer.Option(help="Only the summary.")] = False,
) -> None:
    """The quick start: the real service on SQLite with three simulated GPU hosts, in accelerated time."""
    from bot.console import render
    from bot.console_notices import ConsoleAnnouncer
    from scheduler.demo import run_demo

    run_demo(
        seconds=seconds,
        speed=speed,
        seed=seed,
        out=sys.stdout,
        quiet=quiet,
        words=render,
        announcer=ConsoleAnnouncer(sys.stdout),
    )


@app.command("digest")
def digest_command(
    show: Annotated[
        bool, typer.Option("--print", help="Print the digest as text to standard output.")
    ] = False,
    png: Annotated[
        Path | None, typer.Option("--png", help="Write the digest's picture to this PNG file.")
    ] = None,
    lang: Annotated[
        str | None,
        typer.Option(
            "--lang",
            help="The text's and picture's language: en or zh (default: the policy's "
            "slack.default_language, the language of the channel's digest).",
        ),
    ] = None,
) -> None:
    """The daily GPU board without Slack: as text (--print) and as a picture (--png FILE)."""
    if not show and png is None:
        typer.echo(_say(lang, "cli.digest_nothing_asked"), err=True)
        raise typer.Exit(2)
    if lang is not None and lang not in ("en", "zh"):
        typer.echo(_say(lang, "cli.unknown_language", command="digest", given=lang), err=True)
        raise typer.Exit(2)
    from bot.digest.text import render_text
    from scheduler.digest import digest_now  # matplotlib and friends load only when asked

    paika = _start(lang)
    said = lang or paika.policy.slack.default_language
    digest = digest_now(paika)
    if show:
        typer.echo(render_text(digest, paika.policy.zone, said), nl=False)
    if png is not None:
        from bot.digest.picture import font_note, render_png

        try:
            png.write_bytes(render_png(digest, said))
        except OSError as exc:
            typer.echo(
                _say(said, "cli.digest_unwritable", path=png, problem=exc.strerror), err=True
            )
            raise typer.Exit(1) from exc
        typer.echo(_say(said, "cli.digest_written", path=png), err=True)
        if (note := font_note(said)) is not None:
            typer.echo(note, err=True)


Moment = Annotated[
    str,
    typer.Option(
        "--at",
        help="ISO 8601, e.g. 2026-12-01T10:00 (the policy's time zone unless one is given), or latest.",
    ),
]
Lang = Annotated[str, typer.Option("--lang", help="The language: en or zh.")]


class _Snapshots:
    """What the state commands share: settings, the policy, the store and the words."""

    def __init__(self, command: str, lang: str) -> None:
        from bot.i18n import LANGUAGES
        from scheduler.config import load_policy
        from scheduler.errors import ConfigError
        from scheduler.settings import Settings
        from storage.objects.open import open_store

        if lang not in LANGUAGES:
            typer.echo(
                _say(lang, "cli.unknown_language", command=f"state {command}", given=lang),
                err=True,
            )
            raise typer.Exit(2)
        self.command, self.lang = command, lang
        self.settings = Settings()
        try:
            self.policy = load_policy(self.settings.policy_path())
        except ConfigError as exc:
            typer.echo(_say(lang, "cli.policy_invalid", problem=exc), err=True)
            raise typer.Exit(2) from exc
        self.store = open_store(
            self.settings.object_store_spec(),
            endpoint_url=self.settings.s3_endpoint_url,
            region=self.settings.s3_region,
            addressing_style=self.settings.s3_addressing_style,
            signature_version=self.settings.s3_signature_version,
        )

    def fail(self, error: Exception) -> typer.Exit:
        """Say a user error in the reader's language; the command exits 2."""
        from bot.console import render

        typer.echo(render(error, self.policy.zone, self.lang), err=True)
        return typer.Exit(2)

    def at(self, moment: str) -> tuple[str, dict[str, Any]]:
        """The key and document of the newest snapshot taken at or before `moment`."""
        from scheduler.archive.state import decode
        from scheduler.archive.state_view import parse_moment
        from scheduler.errors import Problem, UserError
        from storage.objects import snapshots
        from storage.objects.base import StoreUnavailable

        try:
            when = parse_moment(moment, self.policy.zone)
            key = snapshots.latest_at(self.store, when)
            if key is None:
                raise UserError(Problem.NO_SNAPSHOT, at=moment, where=self.store.where)
            return key, decode(snapshots.read(self.store, key), key=key)
        except UserError as exc:
            raise self.fail(exc) from exc
        except StoreUnavailable as exc:
            raise self.fail(
                UserError(Problem.STORE_UNAVAILABLE, where=self.store.where, detail=str(exc))
            ) from exc

    def config_history(self) -> list[Any]:
        """The policy config's versions the store keeps, oldest first."""
        from scheduler.archive.history import config_history
        from scheduler.errors import Problem, UserError
        from storage.objects.base import StoreUnavailable

        try:
            return config_history(self.store)
        except StoreUnavailable as exc:
            raise self.fail(
                UserError(Problem.STORE_UNAVAILABLE, where=self.store.where, detail=str(exc))
            ) from exc

    def echo(self, result: object) -> None:
        from bot.console import render

        typer.echo(render(result, self.policy.zone, self.lang))


@state_app.command("show")
def state_show(
    at: Moment = "latest",
    as_json: Annotated[bool, typer.Option("--json", help="Print the snapshot's JSON.")] = False,
    lang: Lang = "en",
) -> None:
    """The board and the queue as they were at a moment (the newest snapshot at or before it)."""
    import json

    import bot.console_state  # noqa: F401  (registers the snapshot's words)
    from bot.i18n import t
    from scheduler.archive.state_view import snapshot_view

    found = _Snapshots("show", lang)
    key, doc = found.at(at)
    if as_json:
        typer.echo(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False))
        return
    typer.echo(t(lang, "snapshot.store", snapshot=key, where=found.store.where), err=True)
    found.echo(snapshot_view(doc, found.policy))


@state_app.command("diff")
def state_diff(
    first: Annotated[str, typer.Argument(help="The earlier moment (ISO 8601, or latest).")],
    second: Annotated[str, typer.Argument(help="The later moment (ISO 8601, or latest).")],
    lang: Lang = "en",
) -> None:
    """What changed in the queue and the cluster between the snapshots at two moments."""
    import bot.console_state  # noqa: F401  (registers the snapshot's words)
    from scheduler.archive.state_diff import diff

    found = _Snapshots("diff", lang)
    _, before = found.at(first)
    _, after = found.at(second)
    found.echo(diff(before, after))


@state_app.command("restore")
def state_restore(at: Moment = "latest", lang: Lang = "en") -> None:
    """Rebuild an empty database (PAIKA_DATABASE_URL) from the snapshot at a moment: the same
    queue, jobs under the same numbers (a take-over). A database that holds rows is refused."""
    from datetime import UTC, datetime

    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import OperationalError

    from bot.console_state import restored
    from scheduler.archive.state import restore
    from scheduler.errors import UserError
    from storage.db import make_engine, normalize_url, upgrade

    found = _Snapshots("restore", lang)
    _, doc = found.at(at)
    config = found.config_history()
    url = found.settings.resolved_database_url()
    shown = make_url(normalize_url(url)).render_as_string()  # no password
    engine = make_engine(url)
    try:
        upgrade(engine)
        result = restore(engine, doc, datetime.now(UTC), config)
    except UserError as exc:
        raise found.fail(exc) from exc
    except OperationalError as exc:
        typer.echo(_say(lang, "cli.no_database", url=shown, problem=exc.orig), err=True)
        raise typer.Exit(2) from exc
    finally:
        engine.dispose()
    typer.echo(restored(lang, result, shown, found.policy.zone))


# The columns of `paika share check --pairs`: job a's fingerprint, then job b's.
PAIR_COLUMNS = tuple(
    f"{side}_{field}" for side in ("a", "b") for field in ("gpu_util", "gmem_util", "gmem_mb")
)

# What the verdict's reason and a fingerprint's problem (scheduler.policy.colocation's codes)
# are called in the catalogue.
SHARE_WORDS = {
    "ok": "cli.share.ok",
    "memory": "cli.share.memory",
    "bandwidth": "cli.share.bandwidth",
    "pcie": "cli.share.pcie",
    "compute": "cli.share.compute",
}
FINGERPRINT_PROBLEMS = {
    "missing": "cli.share.problem.missing",
    "unknown": "cli.share.problem.unknown",
    "repeated": "cli.share.problem.repeated",
    "not_a_number": "cli.share.problem.not_a_number",
    "out_of_range": "cli.share.problem.out_of_range",
    "malformed": "cli.share.problem.malformed",
}


@share_app.command("check")
def share_check(
    a: Annotated[
        str | None,
        typer.Option(
            "--a", help='One job\'s fingerprint: "gpu_util=57.8,gmem_util=20.2,gmem_mb=2458".'
        ),
    ] = None,
    b: Annotated[str | None, typer.Option("--b", help="The other job's fingerprint.")] = None,
    pairs: Annotated[
        Path | None,
        typer.Option(
            "--pairs",
            help="A CSV of pairs (columns " + ",".join(PAIR_COLUMNS) + "): one JSON line each.",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help='Print {"share": …, "slowdown": …, "why": …}.')
    ] = False,
    card_gib: Annotated[float, typer.Option("--card-gib", help="The card's memory, GiB.")] = 80.0,
    max_slowdown: Annotated[
        float,
        typer.Option("--max-slowdown", help="The most slowdown a share may cost (0.15 = 15%)."),
    ] = 0.15,
    lang: Lang = "en",
) -> None:
    """May two jobs, given as fingerprints of how each uses a card alone, share one GPU? Says the
    slowdown expected of the slower one, by the rule the scheduler's policy uses."""
    import csv
    import json

    from scheduler.policy import colocation

    def fail(key: str, **params: object) -> typer.Exit:
        typer.echo(_say(lang, key, **params), err=True)
        return typer.Exit(2)

    if lang not in ("en", "zh"):
        raise fail("cli.unknown_language", command="share check", given=lang)
    if not (math.isfinite(card_gib) and card_gib > 0):
        raise fail(
            "cli.share.bad_option",
            option="card-gib",
            given=card_gib,
            expected=_say(lang, "cli.share.card_gib"),
        )
    if not 0.0 <= max_slowdown <= 1.0:
        raise fail(
            "cli.share.bad_option",
            option="max-slowdown",
            given=max_slowdown,
            expected=_say(lang, "cli.share.max_slowdown"),
        )
    card_mib = card_gib * 1024.0

    def problem(error: colocation.FingerprintError, field: str) -> str:
        return _say(lang, FINGERPRINT_PROBLEMS[error.problem], field=field, value=error.value)

    def verdict(first: colocation.Fingerprint, second: colocation.Fingerprint) -> str:
        found = colocation.pair(first, second, card_mib=card_mib, max_slowdown=max_slowdown)
        # share and slowdown first, in this order: the contract others read.
        return json.dumps(
            {"share": found.share, "slowdown": round(found.slowdown, 4), "why": found.why}
        )

    if pairs is not None:
        if a is not None or b is not None:
            raise fail("cli.share.both")
        try:
            with pairs.open(newline="", encoding="utf-8") as handle:
                rows = csv.DictReader(handle)
                missing = [c for c in PAIR_COLUMNS if c not in (rows.fieldnames or ())]
                if missing:
                    raise fail(
                        "cli.share.no_columns",
                        path=pairs,
                        missing=",".join(missing),
                        columns=",".join(PAIR_COLUMNS),
                    )
                for number, row in enumerate(rows, start=2):  # the header is line 1
                    sides = []
                    for side in ("a", "b"):
                        text = ",".join(
                            f"{field}={row[f'{side}_{field}'] or ''}"
                            for field in ("gpu_util", "gmem_util", "gmem_mb")
                        )
                        try:
                            sides.append(colocation.parse(text))
                        except colocation.FingerprintError as exc:
                            raise fail(
                                "cli.share.bad_row",
                                path=pairs,
                                row=number,
                                problem=problem(exc, f"{side}_{exc.field}"),
                                columns=",".join(PAIR_COLUMNS),
                            ) from None
                    typer.echo(verdict(sides[0], sides[1]))
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            reason = getattr(exc, "strerror", None) or exc  # the path is said once
            raise fail("cli.share.unreadable", path=pairs, problem=reason) from None
        return
    if a is None or b is None:
        raise fail("cli.share.nothing", form=colocation.FORM)
    fingerprints = []
    for side, text in (("a", a), ("b", b)):
        try:
            fingerprints.append(colocation.parse(text))
        except colocation.FingerprintError as exc:
            raise fail(
                "cli.share.bad_fingerprint",
                side=side,
                problem=problem(exc, exc.field),
                form=colocation.FORM,
            ) from None
    first, second = fingerprints
    if as_json:
        typer.echo(verdict(first, second))
        return
    found = colocation.pair(first, second, card_mib=card_mib, max_slowdown=max_slowdown)
    need_gib = (first.gmem_mib + second.gmem_mib + colocation.RESERVE_MIB) / 1024.0
    typer.echo(
        _say(
            lang,
            SHARE_WORDS[found.why],
            slowdown=found.slowdown,
            most=max_slowdown,
            need=need_gib,
            card=card_gib,
            busy=colocation.BANDWIDTH_HEAVY,
            mbps=colocation.PCIE_HEAVY_MBPS,
        )
    )


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


@deploy_app.command("units")
def deploy_units(
    exec_path: Annotated[
        str | None,
        typer.Option("--exec", help="The paika command the units run (default: this one)."),
    ] = None,
    write: Annotated[
        Path | None, typer.Option("--write", help="Write the unit files into this folder.")
    ] = None,
) -> None:
    """The systemd units for the scheduler (paika.service) and the GPU host agent
    (paika-agent.service), printed, or written with --write (e.g. /etc/systemd/system)."""
    from scheduler.deploy import units

    command = exec_path or str(Path(sys.argv[0]).resolve())
    try:
        found = units(command)
    except ValueError as exc:
        typer.echo(f"paika deploy units: --exec {exc}", err=True)
        raise typer.Exit(2) from exc
    for name, text in found.items():
        if write is None:
            typer.echo(f"# ---- {name}\n{text}")
            continue
        try:
            (write / name).write_text(text)
        except OSError as exc:
            typer.echo(f"paika deploy units: cannot write {write / name}: {exc.strerror}", err=True)
            raise typer.Exit(1) from exc
        typer.echo(f"wrote {write / name}", err=True)


@app.command("agent-secret")
def agent_secret(
    file: Annotated[
        Path | None,
        typer.Option("--file", help="Where the secret lives (default: PAIKA_AGENT_SECRET_FILE)."),
    ] = None,
) -> None:
    """Make the scheduler's agent secret (0600) if it is missing; each host's token derives from it."""
    from scheduler.credentials import AgentSecretError, create_secret, read_secret
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


# The top-level modules that only paika[server] installs (rich comes with typer, so every
# install has it). A GPU host installs only paika[agent]: there a command of the scheduler
# or the bot fails on one of these, and says so plainly.
SERVER_MODULES = frozenset(
    {
        "slack_bolt",
        "slack_sdk",
        "apscheduler",
        "sqlmodel",
        "sqlalchemy",
        "pydantic_settings",
        "alembic",
        "yaml",
        "matplotlib",
        "boto3",
        "botocore",
        "orjson",
    }
)


def main() -> None:
    """Console-script entry point."""
    try:
        # `paika cmd` first asks the running paika up, which has everything loaded already.
        if sys.argv[1:2] == ["cmd"] and _cmd_through_service(sys.argv[2:]):
            return
        app()
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in SERVER_MODULES:
            raise
        command = " ".join(sys.argv[1:2]) or "this command"
        typer.echo(
            f"paika {command}: needs the scheduler's packages ({exc.name} is not installed); "
            "this install is for a GPU host's agent only. Install paika[server] "
            "(pip install 'paika[server]', or uv sync --extra server) to run it.",
            err=True,
        )
        raise SystemExit(2) from None
