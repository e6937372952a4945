"""`paika doctor`: what stands between an install and a working queue, found before `paika up`.

Each check returns plain findings: a code, how much it matters and the values it names (no
sentences; bot/doctor_words.py says them, en and zh). A finding `blocks` when paika cannot
start, or a host can never run a job, until it is fixed; a `warn` is something that will
surprise the team (cards no job can ask for, jobs that will wait for an account, no digest);
`ok` says what was checked and found right.

The checks, in order: the policy file in force; the admins; the database (reachable, schema
current); the object store; the agents' tokens; every registered host's agent (reachable over
its URL, its certificate verified against PAIKA_AGENT_CA_FILE, its clock against this one,
its cards against the policy's catalogue, and, for an agent running as root, the members
whose jobs it would refuse for want of a Unix account). Slack's checks need Slack's client
and live in the bot (bot/doctor_slack.py); they return the same findings.

One check that fails never stops the others: each says what it found or why it could not look.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from scheduler.account_map import mapped_account
from scheduler.agent.client import AgentClient, shared_tls, transport_failure
from scheduler.agent.errors import AgentError, AgentNotTrusted
from scheduler.agent.protocol import GpuInfo, Health
from scheduler.checkup import Finding as Finding
from scheduler.checkup import Severity as Severity
from scheduler.checkup import blocks as blocks
from scheduler.config import PolicyConfig, load_policy
from scheduler.credentials import AgentKeys, AgentSecretError, read_secret
from scheduler.errors import ConfigError
from scheduler.settings import BUNDLED_POLICY, Settings
from storage.db import (
    consistent_reads,
    current_revision,
    head_revision,
    make_engine,
    normalize_url,
)
from storage.objects.base import StoreUnavailable
from storage.objects.open import open_store
from storage.queries import cluster as cluster_queries
from storage.queries import org as org_queries

# An agent whose clock is this far from the scheduler's is reported: job times, idle
# detection and the ledger all compare the two (the Date header says whole seconds).
SKEW_WARN_S = 5.0
HOSTS_AT_ONCE = 16  # agents asked at the same time
HEALTH_PATH = "/v1/health"  # the one route of an agent that needs no token
MIB_PER_GIB = 1024


@dataclass
class _Seen:
    """What the checks learn along the way and later checks use."""

    policy: PolicyConfig | None = None
    engine: Engine | None = None
    keys: AgentKeys | None = None


def examine(
    settings: Settings,
    *,
    timeout: float = 3.0,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> list[Finding]:
    """Every check but Slack's, in order; see the module's docstring."""
    seen = _Seen()
    found: list[Finding] = []
    found += check_policy(settings, seen)
    found += check_admins(settings, seen.policy)
    found += check_database(settings, seen)
    found += check_store(settings)
    found += check_agent_keys(settings, seen)
    try:
        if seen.engine is not None and not blocks(
            f for f in found if f.code == "agents.ca_unusable"
        ):
            found += check_hosts(settings, seen, timeout=timeout, clock=clock)
    finally:
        if seen.engine is not None:
            seen.engine.dispose()
    return found


# ---------------------------------------------------------------- the policy and the admins


def check_policy(settings: Settings, seen: _Seen) -> list[Finding]:
    path = settings.policy_path()
    if not path.exists():
        return [Finding("policy.missing", Severity.BLOCK, {"path": str(path)})]
    try:
        seen.policy = load_policy(path)
    except ConfigError as exc:
        return [Finding("policy.invalid", Severity.BLOCK, {"path": str(path), "detail": str(exc)})]
    if settings.config is None or settings.config.resolve() == BUNDLED_POLICY.resolve():
        return [
            Finding(
                "policy.bundled",
                Severity.WARN,
                {
                    "path": str(BUNDLED_POLICY),
                    "teams": sorted(seen.policy.teams),
                    "channels": _channels(seen.policy),
                    "gpu_types": list(seen.policy.gpu_types),
                },
            )
        ]
    found = [Finding("policy.file", Severity.OK, {"path": str(path)})]
    # paika init leaves prices at 0 for the team to fill in; until they do, matching's
    # "cheapest type that fits" is a tie and the ledger says nothing cost anything.
    unpriced = [
        name for name, spec in seen.policy.gpu_types.items() if spec.price_per_gpu_hour == 0
    ]
    if unpriced:
        found.append(
            Finding("policy.unpriced", Severity.WARN, {"path": str(path), "gpu_types": unpriced})
        )
    return found


def _channels(policy: PolicyConfig) -> list[str]:
    named = [policy.slack.channel, policy.slack.approvals_channel]
    named += [team.channel for team in policy.teams.values()]
    return list(dict.fromkeys(name for name in named if name))


def check_admins(settings: Settings, policy: PolicyConfig | None) -> list[Finding]:
    admins = sorted(set(settings.admins) | set(policy.admins if policy else ()))
    if not admins:
        return [Finding("admins.none", Severity.WARN)]
    return [Finding("admins.set", Severity.OK, {"admins": admins})]


# ---------------------------------------------------------------- the database and the store


def shown_url(url: str) -> str:
    """A database URL without its password."""
    try:
        return make_url(normalize_url(url)).render_as_string()
    except Exception:  # noqa: BLE001 (a URL that does not parse is shown as "?")
        return "?"


def check_database(settings: Settings, seen: _Seen) -> list[Finding]:
    url = settings.resolved_database_url()
    where = shown_url(url)
    engine = None
    try:
        engine = make_engine(url)
        current = current_revision(engine)
    except (SQLAlchemyError, OSError, ValueError) as exc:
        if engine is not None:
            engine.dispose()  # nothing of it is kept open
        detail = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        return [Finding("database.unreachable", Severity.BLOCK, {"url": where, "detail": detail})]
    head = head_revision()
    if current != head:
        engine.dispose()  # tables not as this code reads them: nothing more is read there
        return [
            Finding(
                "database.behind",
                Severity.WARN,
                {"url": where, "current": current or "", "head": head or ""},
            )
        ]
    seen.engine = engine
    return [Finding("database.ok", Severity.OK, {"url": where, "revision": current or ""})]


def check_store(settings: Settings) -> list[Finding]:
    try:
        store = open_store(
            settings.object_store_spec(),
            endpoint_url=settings.s3_endpoint_url,
            region=settings.s3_region,
            addressing_style=settings.s3_addressing_style,
            signature_version=settings.s3_signature_version,
        )
        store.check()
    except (StoreUnavailable, ValueError) as exc:
        spec = settings.object_store_spec()
        return [Finding("store.unreachable", Severity.WARN, {"where": spec, "detail": str(exc)})]
    return [Finding("store.ok", Severity.OK, {"where": store.where})]


# ---------------------------------------------------------------- the agents


def check_agent_keys(settings: Settings, seen: _Seen) -> list[Finding]:
    if not settings.agent_token and settings.agent_secret_file is None:
        return [Finding("agents.no_token", Severity.BLOCK)]
    secret = None
    if settings.agent_secret_file is not None:
        try:
            secret = read_secret(settings.agent_secret_file)
        except AgentSecretError as exc:
            return [Finding("agents.secret_unusable", Severity.BLOCK, {"detail": str(exc)})]
    seen.keys = AgentKeys(settings.agent_token, secret)
    ca = settings.agent_ca_file
    if ca is not None:
        try:
            ssl.create_default_context(cafile=str(ca))
        except (OSError, ssl.SSLError) as exc:
            detail = {"path": str(ca), "detail": str(exc)}
            return [Finding("agents.ca_unusable", Severity.BLOCK, detail)]
    return []


@dataclass(frozen=True)
class Answer:
    """What one agent's health answer said, and its clock against ours."""

    health: Health
    skew_s: float | None


def ask_health(
    url: str, ca_file: Path | None, timeout: float, clock: Callable[[], datetime]
) -> Answer:
    """GET /v1/health (no token needed) with the scheduler's own TLS trust; the agent's clock
    from the answer's Date header against `clock` at the request's middle. Raises AgentError
    (AgentNotTrusted for a certificate that does not verify)."""
    tls = shared_tls(str(ca_file) if ca_file else None)
    base = url.rstrip("/")
    with httpx.Client(verify=tls, timeout=timeout) as client:
        before = clock()
        try:
            response = client.get(base + HEALTH_PATH)
        except httpx.TransportError as exc:
            raise transport_failure(base, exc) from exc
        middle = before + (clock() - before) / 2
    if response.status_code != 200:
        raise AgentError(response.status_code, response.text[:200])
    health = Health.from_json(response.content)
    skew: float | None = None
    date = response.headers.get("date")
    if date:
        try:
            skew = (parsedate_to_datetime(date) - middle).total_seconds()
        except (TypeError, ValueError):
            skew = None
    return Answer(health, skew)


@dataclass(frozen=True)
class HostRow:
    """What the checks read of a registered host (and what its token is worked out from)."""

    name: str
    url: str
    token_generation: int
    token_salt: str | None
    token_sha256: str | None
    token_revoked_at: datetime | None
    cards: tuple[tuple[str, float], ...]  # as its last poll stored them


def registered_hosts(engine: Engine) -> list[HostRow]:
    """Every registered host, with the cards its last poll stored."""
    with consistent_reads(engine) as session:
        return [
            HostRow(
                h.name,
                h.url,
                h.token_generation,
                h.token_salt,
                h.token_sha256,
                h.token_revoked_at,
                tuple(
                    (g.name or g.gpu_type, g.memory_gib)
                    for g in cluster_queries.gpus_of_host(session=session, host_id=h.id or 0)
                ),
            )
            for h in cluster_queries.all_hosts(session=session)
        ]


def check_hosts(
    settings: Settings, seen: _Seen, *, timeout: float, clock: Callable[[], datetime]
) -> list[Finding]:
    assert seen.engine is not None
    hosts = registered_hosts(seen.engine)
    if not hosts:
        return [Finding("hosts.none", Severity.WARN)]
    found: list[Finding] = []
    root_hosts: list[str] = []
    unknown: dict[tuple[str, int], list[str]] = {}
    # Each host's agent is asked at once: one that does not answer costs `timeout`, not N of them.
    at_once = min(HOSTS_AT_ONCE, len(hosts))
    with ThreadPoolExecutor(at_once, thread_name_prefix="paika-doctor-hosts") as pool:
        looks = list(pool.map(lambda h: _look(h, seen, settings, timeout, clock), hosts))
    for host, look in zip(hosts, looks, strict=True):
        found += look.findings
        if look.root:
            root_hosts.append(host.name)
        for name, memory_gib in look.cards:
            if seen.policy is not None and seen.policy.type_for_card(name, memory_gib) is None:
                unknown.setdefault((name, round(memory_gib)), []).append(host.name)
    found += [_unknown_card(name, gib, where) for (name, gib), where in sorted(unknown.items())]
    if root_hosts and seen.policy is not None:
        found += _unmapped_members(seen, settings, root_hosts)
    return found


@dataclass(frozen=True)
class _Look:
    """What asking one host's agent found: its findings, its cards, whether it runs as root."""

    findings: list[Finding]
    cards: list[tuple[str, float]]
    root: bool = False


def _look(
    host: HostRow,
    seen: _Seen,
    settings: Settings,
    timeout: float,
    clock: Callable[[], datetime],
) -> _Look:
    values: dict[str, Any] = {"host": host.name, "url": host.url}
    try:
        answer = ask_health(host.url, settings.agent_ca_file, timeout, clock)
    except AgentNotTrusted as exc:
        ca = str(settings.agent_ca_file) if settings.agent_ca_file else ""
        detail = {"ca_file": ca, "detail": exc.message}
        return _Look(
            [Finding("agent.untrusted", Severity.BLOCK, values | detail)], list(host.cards)
        )
    except Exception as exc:  # noqa: BLE001 (whatever it was, this host only: the others go on)
        detail = {"detail": exc.message if isinstance(exc, AgentError) else repr(exc)}
        return _Look(
            [Finding("agent.unreachable", Severity.WARN, values | detail)], list(host.cards)
        )
    skew = answer.skew_s
    values |= {
        "skew_s": round(skew, 1) if skew is not None else None,
        "tls": answer.health.tls,
        "root": answer.health.root,
        "version": answer.health.agent_version,
    }
    findings = [Finding("agent.ok", Severity.OK, values)]
    if skew is not None and abs(skew) > SKEW_WARN_S:
        findings.append(
            Finding(
                "agent.clock_skew", Severity.WARN, {"host": host.name, "skew_s": round(skew, 1)}
            )
        )
    cards = live_cards(host, seen.keys, timeout, settings.agent_ca_file) or list(host.cards)
    return _Look(findings, cards, answer.health.root)


def live_cards(
    host: HostRow, keys: AgentKeys | None, timeout: float, ca_file: Path | None
) -> list[tuple[str, float]]:
    """The cards (NVML name, GiB) the agent reports now, asked with its token from `keys`;
    [] when it cannot say (no token, no answer, a refusal)."""
    if keys is None:
        return []
    key = keys.key_of(host)
    if key.token is None:
        return []
    try:
        with AgentClient(
            host.url, key.token, timeout=timeout, tls=shared_tls(str(ca_file) if ca_file else None)
        ) as client:
            gpus: list[GpuInfo] = client.gpus()
    except AgentError:
        return []
    return [(g.name, (g.memory_total_mib or 0) / MIB_PER_GIB) for g in gpus]


def suggested_type_name(nvml_name: str, memory_gib: int) -> str:
    """A catalogue name for a card: its model without the maker's words, and its memory
    ("NVIDIA H800" with 80 GiB: H800-80GB)."""
    words = [w for w in re.split(r"[^A-Za-z0-9.]+", nvml_name) if w]
    words = [w for w in words if w.upper() not in ("NVIDIA", "GEFORCE", "TESLA", "QUADRO")]
    base = "-".join(words) or "GPU"
    size = f"{memory_gib}GB"
    if not any(w.upper() == size for w in words):
        base = f"{base}-{size}"
    return base[:64]


def _unknown_card(name: str, memory_gib: int, hosts: list[str]) -> Finding:
    type_name = suggested_type_name(name, memory_gib)
    line = (
        f'{type_name}: {{memory_gib: {memory_gib}, nvml_names: ["{name}"], '
        "speed: 1.0, price_per_gpu_hour: 0}"
    )
    return Finding(
        "card.unknown",
        Severity.WARN,
        {
            "name": name,
            "memory_gib": memory_gib,
            "hosts": hosts,
            "gpu_type": type_name,
            "yaml": line,
        },
    )


def _unmapped_members(seen: _Seen, settings: Settings, root_hosts: list[str]) -> list[Finding]:
    """The people a root agent would run no job for: no Unix account maps them."""
    assert seen.engine is not None and seen.policy is not None
    policy = seen.policy
    with consistent_reads(seen.engine) as session:
        teams = {t.id: t.name for t in org_queries.all_teams(session=session)}
        people = {
            m.slack_user_id: teams.get(m.team_id, "") for m in org_queries.members(session=session)
        }
        for admin in (*settings.admins, *policy.admins):
            people.setdefault(admin, "")
        unmapped = sorted(
            user
            for user, team in people.items()
            if mapped_account(session, policy.accounts, user, team) is None
        )
    if not unmapped:
        return [Finding("accounts.mapped", Severity.OK, {"hosts": root_hosts})]
    return [Finding("accounts.unmapped", Severity.WARN, {"hosts": root_hosts, "users": unmapped})]
