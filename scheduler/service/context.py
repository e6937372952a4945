"""Who is acting, on which session, at what time, under which policy."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlmodel import Session

from scheduler.config import PolicyConfig
from scheduler.errors import Action, PermissionDenied, Problem
from scheduler.service.waits import WaitsBoard
from storage.models import Member, Role, Team
from storage.queries import audit
from storage.queries import org as org_queries

ROLE_RANK = {Role.MEMBER: 0, Role.APPROVER: 1, Role.ADMIN: 2}


@dataclass(frozen=True)
class Actor:
    """The Slack user behind a command, with their role and team."""

    user_id: str
    role: Role | None  # None: not known to paika yet
    team_id: int | None
    team_name: str | None

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN

    def is_approver_of(self, team_id: int) -> bool:
        """Approvers decide for their own team; admins for every team."""
        return self.is_admin or (self.role is Role.APPROVER and self.team_id == team_id)

    def in_team(self, team_id: int) -> bool:
        """Members act within their own team; admins anywhere."""
        return self.is_admin or (self.team_id is not None and self.team_id == team_id)


def resolve_actor(session: Session, user_id: str, bootstrap_admins: Collection[str]) -> Actor:
    """The actor for a Slack user id; ids in `bootstrap_admins` are admins whatever the table says."""
    member = org_queries.member_by_user(session=session, user_id=user_id)
    role = Role(member.role) if member else None
    if user_id in bootstrap_admins:
        role = Role.ADMIN
    team = _team_of(session, member)
    return Actor(user_id, role, team.id if team else None, team.name if team else None)


def _team_of(session: Session, member: Member | None) -> Team | None:
    if member is None or member.team_id is None:
        return None
    return org_queries.team_by_id(session=session, team_id=member.team_id)


def track_writes(session: Session) -> None:
    """Mark the session once a flush writes something (`Context.wrote` reads the mark)."""

    def flushed(session: Session, _flush: object) -> None:
        session.info["wrote"] = True

    event.listen(session, "after_flush", flushed)


@dataclass
class Context:
    """One command's world: the unit of work, the time, the policy and the actor."""

    session: Session
    now: datetime
    policy: PolicyConfig
    actor: Actor
    # Results a read-only stretch of work may share (see jobs.reusing_waits); empty otherwise.
    reuse: dict[str, Any] = field(default_factory=dict)
    # The process's shared reasons and ETAs (None: computed for this command alone), and
    # whether a command that changed something leaves them to be filled in after its commit.
    waits_board: WaitsBoard | None = None
    defer_waits: bool = False
    # The secret hosts' own agent tokens derive from (None: hosts use the shared token).
    agent_secret_file: Path | None = None
    # The token shared by hosts without one of their own, and the CA their TLS certificates
    # are checked against: commands that read from an agent (`/gpu logs`) need both.
    agent_token: str | None = None
    agent_ca_file: Path | None = None

    @property
    def wrote(self) -> bool:
        """Whether this unit of work has changed anything yet (flushed or not)."""
        session = self.session
        return bool(session.new or session.dirty or session.deleted or session.info.get("wrote"))

    def audit(self, action: str, target_kind: str, target_id: object, **detail: Any) -> None:
        """Record that the actor changed something."""
        audit.record(
            session=self.session,
            at=self.now,
            actor=self.actor.user_id,
            action=action,
            target_kind=target_kind,
            target_id=target_id,
            detail=detail or None,
        )

    def moment(self, at: datetime) -> datetime:
        """A moment a person typed, in UTC: one without an offset is in the policy's zone."""
        if at.tzinfo is None:
            at = at.replace(tzinfo=self.policy.zone)
        return at.astimezone(UTC)

    def require_admin(self, action: Action) -> None:
        """Refuse unless the actor is an admin."""
        if not self.actor.is_admin:
            raise PermissionDenied(Problem.ADMINS_ONLY, action=action)

    def require_team(self) -> Team:
        """The actor's team, or a clear refusal telling them how to join one."""
        if self.actor.team_id is None:
            raise PermissionDenied(Problem.NOT_IN_A_TEAM, user=self.actor.user_id)
        team = org_queries.team_by_id(session=self.session, team_id=self.actor.team_id)
        if team is None:  # the team row was removed under the member
            raise PermissionDenied(Problem.TEAM_GONE)
        return team
