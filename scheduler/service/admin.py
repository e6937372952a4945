"""Admin operations: teams, members and their roles, hosts and their agent tokens."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from scheduler import holds
from scheduler.credentials import (
    HOST_TOKEN_PATH,
    AgentSecretError,
    host_token,
    read_secret,
    token_sha256,
    unsafe_agent_url,
    without_credentials,
)
from scheduler.errors import Action, Conflict, NotFound, Problem, UserError
from scheduler.service.context import Context
from scheduler.service.lookup import team_by_name
from storage.models import ACTIVE_STATES, Host, HostState, Member, Role, Team
from storage.queries import cluster as cluster_queries
from storage.queries import jobs as job_queries
from storage.queries import org as org_queries


def add_team(ctx: Context, name: str, channel: str | None) -> Team:
    """Create a team."""
    ctx.require_admin(Action.ADD_TEAMS)
    if org_queries.team_by_name(session=ctx.session, name=name) is not None:
        raise Conflict(Problem.TEAM_EXISTS, name=name)
    team = Team(name=name, channel=channel, created_at=ctx.now)
    ctx.session.add(team)
    ctx.session.flush()
    ctx.audit("team.add", "team", team.id, name=name, channel=channel)
    return team


def list_teams(ctx: Context) -> Sequence[Team]:
    """Every team."""
    return org_queries.all_teams(session=ctx.session)


def remove_team(ctx: Context, name: str) -> Team:
    """Remove a team that has no members and no jobs waiting or running."""
    ctx.require_admin(Action.REMOVE_TEAMS)
    team = team_by_name(ctx, name)
    if org_queries.members(session=ctx.session, team_id=team.id):
        raise Conflict(Problem.TEAM_HAS_MEMBERS, team=team.name)
    active = job_queries.jobs_in_states(
        session=ctx.session,
        states=tuple(ACTIVE_STATES),
        team_id=team.id,
    )
    if active:
        raise Conflict(Problem.TEAM_HAS_JOBS, team=team.name, n=len(active))
    ctx.session.delete(team)
    ctx.audit("team.remove", "team", team.id, name=team.name)
    return team


def add_member(ctx: Context, user: str, team: str, role: str) -> tuple[Member, bool]:
    """Add a user to a team with a role, or move them; True when they were new."""
    ctx.require_admin(Action.ADD_MEMBERS)
    team_row = team_by_name(ctx, team)
    member = org_queries.member_by_user(session=ctx.session, user_id=user)
    created = member is None
    if member is None:
        member = Member(slack_user_id=user, created_at=ctx.now)
    before = (member.team_id, member.role)
    member.team_id = team_row.id
    member.role = Role(role)
    ctx.session.add(member)
    ctx.session.flush()
    ctx.audit(
        "member.add",
        "member",
        user,
        team=team_row.name,
        role=role,
        before=None if created else list(before),
    )
    return member, created


def remove_member(ctx: Context, user: str) -> Member:
    """Forget a user; their jobs stay as they are."""
    ctx.require_admin(Action.REMOVE_MEMBERS)
    member = _member(ctx, user)
    ctx.session.delete(member)
    ctx.audit("member.remove", "member", user)
    return member


def set_role(ctx: Context, user: str, role: str) -> Member:
    """Change a member's role."""
    ctx.require_admin(Action.CHANGE_ROLES)
    member = _member(ctx, user)
    before = member.role
    member.role = Role(role)
    ctx.session.add(member)
    ctx.audit("member.role", "member", user, before=before, after=role)
    return member


def list_members(ctx: Context, team: str | None) -> Sequence[Member]:
    """Members, of one team or all (admins only: who is who is not everyone's business)."""
    ctx.require_admin(Action.LIST_MEMBERS)
    team_id = team_by_name(ctx, team).id if team else None
    return org_queries.members(session=ctx.session, team_id=team_id)


@dataclass(frozen=True)
class IssuedToken:
    """A host's new agent token, to show the admin once (it is kept nowhere in clear), and
    where the host's agent reads it."""

    host: str
    url: str
    generation: int
    token: str
    path: str = HOST_TOKEN_PATH


def add_host(ctx: Context, name: str, url: str) -> tuple[Host, IssuedToken | None]:
    """Register a GPU host by its agent's URL, with a token of its own when the scheduler
    has an agent secret (None: it uses the shared PAIKA_AGENT_TOKEN)."""
    ctx.require_admin(Action.ADD_HOSTS)
    unsafe = unsafe_agent_url(url)
    if unsafe == "credentials":
        raise UserError(Problem.HOST_URL_CREDENTIALS, url=without_credentials(url))
    if unsafe is not None:
        raise UserError(Problem.HOST_URL_LINK_LOCAL, url=url)
    if cluster_queries.host_by_name(session=ctx.session, name=name) is not None:
        raise Conflict(Problem.HOST_EXISTS, name=name)
    secret = None if ctx.agent_secret_file is None else _secret(ctx)
    host = Host(name=name, url=url.rstrip("/"), state=HostState.UNKNOWN, added_at=ctx.now)
    ctx.session.add(host)
    ctx.session.flush()
    ctx.audit("host.add", "host", host.id, name=name, url=host.url)
    return host, None if secret is None else _issue(ctx, host, secret, "host.token_issue")


def rotate_token(ctx: Context, name: str) -> IssuedToken:
    """Issue a host a new token (its first, or after a revocation); the old one stops
    working for the scheduler at once, and on the host when the new one is installed."""
    ctx.require_admin(Action.ISSUE_TOKENS)
    host = _host(ctx, name)
    secret = _secret(ctx)
    return _issue(ctx, host, secret, "host.token_rotate")


def revoke_token(ctx: Context, name: str) -> Host:
    """Stop using a host's token: no poll, start or stop goes there until a new token is issued."""
    ctx.require_admin(Action.REVOKE_TOKENS)
    host = _host(ctx, name)
    if host.token_revoked_at is not None:
        raise Conflict(Problem.TOKEN_ALREADY_REVOKED, host=host.name)
    host.token_revoked_at = ctx.now
    host.token_changed_by = ctx.actor.user_id
    ctx.session.add(host)
    ctx.audit(
        "host.token_revoke", "host", host.id, name=host.name, generation=host.token_generation
    )
    return host


def _issue(ctx: Context, host: Host, secret: bytes, action: str) -> IssuedToken:
    """A new generation of the host's token: its hash, salt and times stored, never the token."""
    host.token_generation += 1
    host.token_salt = secrets.token_hex(8)
    token = host_token(secret, host.name, host.token_generation, host.token_salt)
    host.token_sha256 = token_sha256(token)
    if host.token_issued_at is None:
        host.token_issued_at = ctx.now
    host.token_rotated_at = ctx.now
    host.token_revoked_at = None
    host.token_changed_by = ctx.actor.user_id
    ctx.session.add(host)
    ctx.audit(action, "host", host.id, name=host.name, generation=host.token_generation)
    return IssuedToken(host.name, host.url, host.token_generation, token)


def _secret(ctx: Context) -> bytes:
    path = ctx.agent_secret_file
    if path is None:
        raise Conflict(Problem.NO_AGENT_SECRET)
    try:
        return read_secret(path)
    except AgentSecretError as exc:
        raise Conflict(Problem.AGENT_SECRET_UNUSABLE, detail=str(exc)) from exc


def set_draining(ctx: Context, name: str, draining: bool) -> Host:
    """Drain a host (no new jobs start there) or put it back in service. Putting it back
    also lets go of the jobs it had refused for good (an admin fixed the host: created
    the account, restarted its agent as root …): they may be sent there again."""
    ctx.require_admin(Action.DRAIN_HOSTS if draining else Action.RESUME_HOSTS)
    host = _host(ctx, name)
    host.draining = draining
    ctx.session.add(host)
    released = (
        [] if draining else holds.release_host(ctx.session, host.name, ctx.now, ctx.actor.user_id)
    )
    ctx.audit(
        "host.drain" if draining else "host.resume",
        "host",
        host.id,
        name=host.name,
        **({"released_jobs": released} if released else {}),
    )
    return host


def remove_host(ctx: Context, name: str) -> Host:
    """Remove a host that no job holds a GPU on; its GPUs and their history go with it."""
    ctx.require_admin(Action.REMOVE_HOSTS)
    host = _host(ctx, name)
    allocations = cluster_queries.allocations_of_host(session=ctx.session, host_id=host.id or 0)
    if any(a.ended_at is None for a in allocations):
        raise Conflict(Problem.HOST_IN_USE, host=host.name)
    if allocations:
        raise Conflict(Problem.HOST_HAS_HISTORY, host=host.name)
    gpus = cluster_queries.gpus_of_host(session=ctx.session, host_id=host.id or 0)
    # Its cards' readings go first (they name the cards); start holds name the host by
    # name, so the refusals it made stay on record.
    cluster_queries.delete_samples_of_gpus(
        session=ctx.session, gpu_ids=[gpu.id for gpu in gpus if gpu.id is not None]
    )
    for gpu in gpus:
        ctx.session.delete(gpu)
    ctx.session.delete(host)
    ctx.audit("host.remove", "host", host.id, name=host.name)
    return host


def list_hosts(ctx: Context) -> Sequence[Host]:
    """Every registered host, with its agent's address (admins only)."""
    ctx.require_admin(Action.LIST_HOSTS)
    return cluster_queries.all_hosts(session=ctx.session)


def unlisted_models(ctx: Context, host: Host) -> dict[str, int]:
    """The host's cards of a model no GPU type of the policy matches, by the name its agent
    reports: no job can ask for them until an admin adds the type."""
    counts: dict[str, int] = {}
    for card in cluster_queries.gpus_of_host(session=ctx.session, host_id=host.id or 0):
        if card.gpu_type not in ctx.policy.gpu_types:
            counts[card.name or card.gpu_type] = counts.get(card.name or card.gpu_type, 0) + 1
    return counts


def _member(ctx: Context, user: str) -> Member:
    member = org_queries.member_by_user(session=ctx.session, user_id=user)
    if member is None:
        raise NotFound(Problem.MEMBER_NOT_FOUND, user=user)
    return member


def _host(ctx: Context, name: str) -> Host:
    host = cluster_queries.host_by_name(session=ctx.session, name=name)
    if host is None:
        raise NotFound(Problem.HOST_NOT_FOUND, name=name)
    return host
