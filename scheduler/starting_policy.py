"""`paika init`: a starting policy file written from the cards the agents report.

On a new install the policy's catalogue must name the team's real cards, or no job can ask
for them (an H800 the catalogue lacks shows as free on the board and is never used). Nobody
should have to type NVML names by hand: `paika init` registers the hosts it is given, asks
every registered host's agent for its cards (with the host's own token), and writes the
bundled example's policy with its catalogue, teams, admins, channel, zone and language
replaced by the real ones. Prices are left at 0 for the team to fill in (paika doctor says
so until they are); speeds are rough figures for well-known models, 1.0 for the rest.

What is written always loads: the text is validated as a policy before the file is written,
and an existing file is never replaced unless asked.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from sqlalchemy import Engine

from scheduler.commands import token_said
from scheduler.config import policy_from_text
from scheduler.credentials import AgentKeys, AgentSecretError, read_secret
from scheduler.doctor import (
    HOSTS_AT_ONCE,
    HostRow,
    live_cards,
    registered_hosts,
    suggested_type_name,
)
from scheduler.results import Said, SaidCode
from scheduler.service import admin
from scheduler.service.context import Actor, Context
from scheduler.settings import BUNDLED_POLICY, Settings
from storage.db import make_engine, normalize_url, session_scope, upgrade
from storage.models import Role
from storage.queries import cluster as cluster_queries

# Who registers hosts in the audit trail when `paika init` does it (root on the scheduler).
INIT_ACTOR = "paika-init"

# Rough throughput of well-known models against the catalogue's reference card (A100 = 1.0),
# for mixed-precision training. Matched on whole words of the NVML name, longest first, so
# "H20" never takes an "H200". A starting point only: the file says to measure and edit.
KNOWN_SPEEDS: dict[str, float] = {
    "B200": 4.5,
    "H200": 2.4,
    "H100": 2.2,
    "H800": 2.2,
    "GH200": 2.4,
    "H20": 0.6,
    "A100": 1.0,
    "A800": 1.0,
    "L40S": 0.9,
    "L40": 0.7,
    "L20": 0.5,
    "L4": 0.25,
    "A40": 0.6,
    "A30": 0.5,
    "A10": 0.45,
    "RTX 4090": 0.8,
    "RTX 4090 D": 0.75,
    "RTX 3090": 0.5,
    "RTX A6000": 0.6,
    "RTX 6000 ADA": 0.9,
    "V100": 0.5,
    "T4": 0.25,
}


@dataclass(frozen=True)
class HostLook:
    """What one registered host's agent said of its cards (`live`), or the cards its last
    poll stored when the agent could not be asked now."""

    host: str
    url: str
    cards: tuple[tuple[str, float], ...]
    live: bool


@dataclass(frozen=True)
class CardKind:
    """One kind of card the hosts have: its NVML name and memory, how many, and where."""

    nvml_name: str
    memory_gib: int
    count: int
    hosts: tuple[str, ...]

    @property
    def type_name(self) -> str:
        return suggested_type_name(self.nvml_name, self.memory_gib)

    @property
    def speed(self) -> float | None:
        return guessed_speed(self.nvml_name)


@dataclass(frozen=True)
class Registered:
    """A host `paika init` was given: newly registered (with its token when the scheduler
    has an agent secret), or registered before (`existed`; its URL as registered)."""

    name: str
    url: str
    token: admin.IssuedToken | None
    existed: bool

    def said(self) -> Said:
        """What `/gpu admin host add` says of a host added with its token: the token once,
        and how to install it there."""
        assert self.token is not None
        return token_said(SaidCode.HOST_ADDED_WITH_TOKEN, self.token)


# A MIG instance's name ends in its profile: "NVIDIA A100-SXM4-80GB MIG 3g.40gb" has 3 of
# the card's 7 compute slices.
_MIG_PROFILE = re.compile(r"(?<![A-Z0-9])MIG (\d)G\.", re.IGNORECASE)
MIG_COMPUTE_SLICES = 7


def guessed_speed(nvml_name: str) -> float | None:
    """A rough speed for a well-known model (None: not one paika knows); a MIG instance of
    one gets its share of the card's compute slices."""
    words = [w for w in re.split(r"[^A-Z0-9]+", nvml_name.upper()) if w]
    profile = _MIG_PROFILE.search(nvml_name)
    share = int(profile.group(1)) / MIG_COMPUTE_SLICES if profile else 1.0
    for model in sorted(KNOWN_SPEEDS, key=lambda m: -len(m.split())):
        parts = model.split()
        for at in range(len(words) - len(parts) + 1):
            if words[at : at + len(parts)] == parts:
                return round(KNOWN_SPEEDS[model] * share, 2)
    return None


def open_database(settings: Settings) -> Engine:
    """The database in settings, its schema brought up to date (as `paika up` does)."""
    engine = make_engine(settings.resolved_database_url())
    try:
        upgrade(engine)
    except BaseException:
        engine.dispose()
        raise
    return engine


def register_hosts(
    engine: Engine, settings: Settings, hosts: Iterable[tuple[str, str]], now: datetime
) -> list[Registered]:
    """Register each (name, URL) not registered yet, as `/gpu admin host add` does (the same
    URL checks, a token of its own from the agent secret); one transaction per host, so a
    refusal of one (a bad URL) leaves the others registered. A refusal is raised after the
    hosts before it were registered."""
    policy = policy_from_text(BUNDLED_POLICY.read_text(encoding="utf-8"), str(BUNDLED_POLICY))
    actor = Actor(INIT_ACTOR, Role.ADMIN, None, None)
    done: list[Registered] = []
    for name, url in hosts:
        with session_scope(engine) as session:
            ctx = Context(
                session,
                now,
                policy,
                actor,
                agent_secret_file=settings.agent_secret_file,
                agent_token=settings.agent_token,
                agent_ca_file=settings.agent_ca_file,
            )
            existing = cluster_queries.host_by_name(session=session, name=name)
            if existing is not None:
                done.append(Registered(name, existing.url, None, existed=True))
                continue
            host, issued = admin.add_host(ctx, name, url)
            done.append(Registered(host.name, host.url, issued, existed=False))
    return done


def look_at_hosts(engine: Engine, settings: Settings, timeout: float) -> list[HostLook]:
    """Every registered host's cards: as its agent reports them now, else as last polled."""
    hosts = registered_hosts(engine)
    if not hosts:
        return []
    try:
        secret = read_secret(settings.agent_secret_file) if settings.agent_secret_file else None
    except AgentSecretError:  # no host's own token can be worked out: their last polls say
        secret = None
    keys = AgentKeys(settings.agent_token, secret)

    def look(host: HostRow) -> HostLook:
        cards = live_cards(host, keys, timeout, settings.agent_ca_file)
        if cards:
            return HostLook(host.name, host.url, tuple(cards), live=True)
        return HostLook(host.name, host.url, host.cards, live=False)

    with ThreadPoolExecutor(max_workers=min(HOSTS_AT_ONCE, len(hosts))) as pool:
        return list(pool.map(look, hosts))


def card_kinds(looks: Iterable[HostLook]) -> list[CardKind]:
    """The kinds of card across the hosts, by NVML name and whole GiB, most cards first."""
    counts: dict[tuple[str, int], int] = {}
    where: dict[tuple[str, int], list[str]] = {}
    for look in looks:
        for name, gib in look.cards:
            key = (name, round(gib))
            counts[key] = counts.get(key, 0) + 1
            if look.host not in where.setdefault(key, []):
                where[key].append(look.host)
    kinds = [CardKind(n, g, counts[(n, g)], tuple(where[(n, g)])) for n, g in counts]
    return sorted(kinds, key=lambda k: (-k.count, k.nvml_name, k.memory_gib))


def _q(value: str) -> str:
    """A YAML scalar for any text (JSON's quoted string is valid YAML)."""
    return json.dumps(value, ensure_ascii=False)


def _catalogue_names(kinds: list[CardKind]) -> list[str]:
    """Each kind's catalogue name: two kinds that would get one name (the same model twice
    with other words around it) keep apart by a number, since a key names one type."""
    names: list[str] = []
    for kind in kinds:
        name, base, n = kind.type_name, kind.type_name, 2
        while name in names:
            name, n = f"{base}-{n}", n + 1
        names.append(name)
    return names


def _catalogue(kinds: list[CardKind]) -> list[str]:
    lines = [
        "gpu_types:",
        "  # From the cards your agents report. Fill in price_per_gpu_hour (what one GPU-hour",
        "  # costs you: matching picks the cheapest type that fits, and the ledger counts in it);",
        "  # speed is a rough figure against an A100 (1.0): measure and edit.",
    ]
    for kind, name in zip(kinds, _catalogue_names(kinds), strict=True):
        speed = kind.speed
        note = (
            f"{kind.count} on {', '.join(kind.hosts)}"
            if speed is not None
            else f"{kind.count} on {', '.join(kind.hosts)}; a model paika has no speed for: set it"
        )
        lines.append(f"  # {note}")
        lines.append(
            f"  {name}: {{memory_gib: {kind.memory_gib}, nvml_names: [{_q(kind.nvml_name)}], "
            f"speed: {speed if speed is not None else 1.0}, price_per_gpu_hour: 0}}"
        )
    return lines


def _teams(teams: Mapping[str, str | None]) -> list[str]:
    if not teams:
        return [
            'teams: {}  # e.g. vision: {channel: "#vision-gpu"}; or /gpu admin team add NAME',
        ]
    lines = ["teams:"]
    for name, channel in teams.items():
        lines.append(f"  {_q(name)}: {{channel: {_q(channel) if channel else 'null'}}}")
    return lines


def _replace_block(lines: list[str], key: str, block: list[str]) -> list[str]:
    """`lines` with the top-level `key:` and its indented lines replaced by `block`."""
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{key}:"))
    end = start + 1
    while end < len(lines) and lines[end][:1] in (" ", "\t") and lines[end].strip():
        end += 1
    return lines[:start] + block + lines[end:]


def _replace_in_block(lines: list[str], key: str, sub: str, value: str) -> list[str]:
    """`lines` with `  sub: …` under the top-level `key:` given `value` (its comment kept)."""
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{key}:"))
    pattern = re.compile(rf"^(\s+{re.escape(sub)}:\s*)(\S+)(\s*(#.*)?)$")
    for i in range(start + 1, len(lines)):
        if lines[i][:1] not in (" ", "\t"):
            break
        match = pattern.match(lines[i])
        if match:
            value_width = max(len(match[2]), len(value))
            lines = list(lines)
            lines[i] = f"{match[1]}{value.ljust(value_width)}{match[3] or ''}".rstrip()
            return lines
    raise KeyError(f"{key}.{sub}")


def _replace_nested(lines: list[str], key: str, sub: str, line: str) -> list[str]:
    """`lines` with the mapping `  sub:` under the top-level `key:` (its line and the lines
    indented under it) replaced by the one line `line`."""
    start = next(i for i, text in enumerate(lines) if text.startswith(f"{key}:"))
    at = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(f"  {sub}:"))
    end = at + 1
    while end < len(lines) and lines[end].startswith("    ") and lines[end].lstrip()[:1] != "#":
        end += 1
    return lines[:at] + [line] + lines[end:]


def starting_policy(
    kinds: list[CardKind],
    *,
    admins: Iterable[str] = (),
    teams: Mapping[str, str | None] | None = None,
    channel: str | None = None,
    timezone: str = "UTC",
    language: str = "en",
    template: str | None = None,
) -> str:
    """The bundled example's policy text with the real catalogue, teams, admins, channel, zone
    and language; validated as a policy (ConfigError if it would not load)."""
    text = template if template is not None else BUNDLED_POLICY.read_text(encoding="utf-8")
    lines = text.splitlines()
    lines[0] = "# paika policy file, written by paika init from the cards the agents reported."
    lines = _replace_block(lines, "timezone", [f"timezone: {_q(timezone)}"])
    lines = _replace_block(lines, "gpu_types", _catalogue(kinds))
    lines = _replace_block(lines, "teams", _teams(teams or {}))
    lines = _replace_block(lines, "admins", [f"admins: [{', '.join(_q(a) for a in admins)}]"])
    # The example keeps headroom on a type of its own catalogue; the team's types are new.
    first = _catalogue_names(kinds)[:1]
    example = f"{{{first[0]}: 1}}" if first else "{TYPE: 1}"
    lines = _replace_nested(
        lines,
        "scheduler",
        "headroom",
        f"  headroom: {{}}                 # GPUs per type only core jobs may take, e.g. {example}",
    )
    lines = _replace_in_block(lines, "slack", "channel", _q(channel) if channel else "null")
    lines = _replace_in_block(lines, "slack", "default_language", language)
    written = "\n".join(lines) + "\n"
    policy_from_text(written, "the policy paika init writes")
    return written


def write_new(path: Path, text: str, *, replace: bool = False) -> None:
    """Write `text` to `path` whole (a temporary file renamed into place, 0644), refusing
    with FileExistsError when it exists and `replace` is not set (when it is, the old file is
    kept as PATH.bak)."""
    if path.exists():
        if not replace:
            raise FileExistsError(str(path))
        backup = path.with_name(path.name + ".bak")
        backup.write_bytes(path.read_bytes())  # what the team had, in case they want it back
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def local_timezone() -> str:
    """This machine's zone name (from /etc/localtime or TZ), else UTC."""
    named = os.environ.get("TZ", "").lstrip(":")
    if named and "/" in named and not named.startswith("/"):
        return named
    try:
        target = os.readlink("/etc/localtime")
    except OSError:
        return "UTC"
    _, found, zone = target.partition("zoneinfo/")
    return zone if found and zone else "UTC"


__all__ = [
    "CardKind",
    "HostLook",
    "Registered",
    "card_kinds",
    "guessed_speed",
    "local_timezone",
    "look_at_hosts",
    "normalize_url",
    "open_database",
    "register_hosts",
    "starting_policy",
    "write_new",
]
