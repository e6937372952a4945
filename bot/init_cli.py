"""`paika init`: register the GPU hosts and write a starting policy from their real cards.

Run it on the scheduler's machine, as the user paika runs as, with paika's settings in the
environment. It may be run again and again: a host already registered is left as it is, and a
policy file that exists is never replaced without --force (the old one is then kept beside it
as PATH.bak). The words come from the catalogue (bot/messages.yml, `init.*`), en or zh.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bot.i18n import LANGUAGES, t
from bot.said import problem, say

if TYPE_CHECKING:
    from scheduler.starting_policy import HostLook

KINDS_SHOWN = 4  # card kinds named per host line; more are counted


def init_command(
    host: Annotated[
        list[str] | None,
        typer.Option(
            "--host",
            help="A GPU host to register, NAME=URL of its agent (e.g. "
            "gpu-01=https://gpu-01:8470); repeat for each. Hosts registered before are kept.",
        ),
    ] = None,
    write: Annotated[
        Path | None,
        typer.Option(
            "--write",
            help="Where to write the policy (default: PAIKA_CONFIG). An existing file is kept.",
        ),
    ] = None,
    admin: Annotated[
        list[str] | None,
        typer.Option("--admin", help="A Slack member id of an admin (default: PAIKA_ADMINS)."),
    ] = None,
    team: Annotated[
        list[str] | None,
        typer.Option(
            "--team", help='A team, NAME or NAME=#channel (e.g. "vision=#vision-gpu"); repeat.'
        ),
    ] = None,
    channel: Annotated[
        str | None,
        typer.Option("--channel", help="The channel for the daily digest and host alerts."),
    ] = None,
    timezone: Annotated[
        str | None,
        typer.Option("--timezone", help="The zone times are shown in (default: this machine's)."),
    ] = None,
    lang: Annotated[
        str, typer.Option("--lang", help="en or zh: these words, and the team's default.")
    ] = "en",
    force: Annotated[
        bool, typer.Option("--force", help="Replace an existing policy file (kept as .bak).")
    ] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.1, help="Seconds to wait for each agent.")
    ] = 5.0,
) -> None:
    """Register the GPU hosts (--host NAME=URL) and write a starting policy file from the
    cards their agents report, with prices to fill in. Run it again once the agents are up."""
    from datetime import UTC, datetime

    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError

    from scheduler.errors import ConfigError, UserError
    from scheduler.settings import Settings
    from scheduler.starting_policy import (
        card_kinds,
        local_timezone,
        look_at_hosts,
        normalize_url,
        open_database,
        register_hosts,
        starting_policy,
        write_new,
    )

    if lang not in LANGUAGES:
        typer.echo(t(lang, "cli.unknown_language", command="init", given=lang), err=True)
        raise typer.Exit(2)
    settings = Settings()
    hosts = [_host_pair(lang, given) for given in host or ()]
    teams = dict(_team_pair(given) for given in team or ())
    path = write or settings.config
    try:
        engine = open_database(settings)
    except SQLAlchemyError as exc:
        url = make_url(normalize_url(settings.resolved_database_url())).render_as_string()
        detail = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        typer.echo(t(lang, "init.no_database", url=url, detail=detail), err=True)
        raise typer.Exit(2) from exc
    try:
        try:
            registered = register_hosts(engine, settings, hosts, datetime.now(UTC))
        except UserError as exc:
            typer.echo(problem(lang, exc), err=True)
            raise typer.Exit(1) from exc
        for done in registered:
            if done.existed:
                typer.echo(t(lang, "init.host_known", name=done.name, url=done.url))
            elif done.token is not None:
                typer.echo(say(lang, done.said()))
            else:
                typer.echo(t(lang, "init.host_added_shared", name=done.name, url=done.url))
        looks = look_at_hosts(engine, settings, timeout)
    finally:
        engine.dispose()
    if not looks:
        typer.echo(t(lang, "init.no_hosts"), err=True)
        raise typer.Exit(1)
    for look in looks:
        typer.echo(_host_line(lang, look))
    kinds = card_kinds(looks)
    if not kinds:
        typer.echo(t(lang, "init.no_cards"), err=True)
        raise typer.Exit(1)
    if path is None:  # the hosts are registered; only where to write is missing
        typer.echo(t(lang, "init.no_path"), err=True)
        raise typer.Exit(2)
    try:
        text = starting_policy(
            kinds,
            admins=admin if admin else settings.admins,
            teams=teams,
            channel=channel,
            timezone=timezone or local_timezone(),
            language=lang,
        )
    except ConfigError as exc:  # a value given here that the policy refuses: say which
        typer.echo(t(lang, "init.refused", detail=str(exc)), err=True)
        raise typer.Exit(2) from exc
    try:
        write_new(path, text, replace=force)
    except FileExistsError:
        typer.echo(t(lang, "init.exists", path=str(path)), err=True)
        raise typer.Exit(1) from None
    except OSError as exc:
        typer.echo(t(lang, "init.unwritable", path=str(path), detail=str(exc)), err=True)
        raise typer.Exit(1) from exc
    typer.echo(t(lang, "init.written", path=str(path), types=len(kinds)))
    silent = [look.host for look in looks if not look.cards]
    if silent:
        typer.echo(t(lang, "init.silent_left_out", hosts=", ".join(silent)))
    said_config = settings.config is not None and settings.config.resolve() == path.resolve()
    typer.echo(t(lang, "init.next" if said_config else "init.next_set_config", path=str(path)))


def _host_pair(lang: str, given: str) -> tuple[str, str]:
    name, sep, url = given.partition("=")
    if not sep or not name.strip() or not url.strip():
        typer.echo(t(lang, "init.bad_host", given=given), err=True)
        raise typer.Exit(2)
    return name.strip(), url.strip()


def _team_pair(given: str) -> tuple[str, str | None]:
    name, _, channel = given.partition("=")
    return name.strip(), channel.strip() or None


def _host_line(lang: str, look: HostLook) -> str:
    from scheduler.starting_policy import card_kinds

    kinds = card_kinds([look])
    cards = ", ".join(
        t(lang, "init.cards_of_kind", n=k.count, name=k.nvml_name, gib=k.memory_gib)
        for k in kinds[:KINDS_SHOWN]
    )
    if len(kinds) > KINDS_SHOWN:
        cards += t(lang, "init.more_kinds", n=len(kinds) - KINDS_SHOWN)
    if look.live:
        return t(lang, "init.host_cards", host=look.host, cards=cards)
    if look.cards:
        return t(lang, "init.host_cards_polled", host=look.host, url=look.url, cards=cards)
    return t(lang, "init.host_silent", host=look.host, url=look.url)
