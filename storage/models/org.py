"""Who is who: teams, their members with a role, each person's preferences, and the Unix
account a person's (or a team's) jobs run as on GPU hosts."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import String, UniqueConstraint
from sqlmodel import Field, SQLModel

from storage.limits import CHANNEL, LANGUAGE, ROLE, TEAM_NAME, UNIX_ACCOUNT
from storage.models.base import SLACK_ID, at_field
from storage.types import name_string


class Role(StrEnum):
    """Roles, from least to most trusted."""

    MEMBER = "member"
    APPROVER = "approver"
    ADMIN = "admin"


class Team(SQLModel, table=True):
    """A team that shares GPUs, quotas and templates."""

    __tablename__ = "teams"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_type=name_string(TEAM_NAME), unique=True)
    channel: str | None = Field(default=None, sa_type=String(CHANNEL))
    created_at: datetime = at_field()


class Member(SQLModel, table=True):
    """A Slack user known to paika; admins may belong to no team."""

    __tablename__ = "members"

    id: int | None = Field(default=None, primary_key=True)
    slack_user_id: str = Field(sa_type=String(SLACK_ID), unique=True)
    team_id: int | None = Field(default=None, foreign_key="teams.id", index=True)
    role: str = Field(sa_type=String(ROLE), default=Role.MEMBER)
    created_at: datetime = at_field()


class UserPref(SQLModel, table=True):
    """One Slack user's preferences; a user who never chose has no row."""

    __tablename__ = "user_prefs"

    slack_user_id: str = Field(sa_type=String(SLACK_ID), primary_key=True)
    language: str = Field(sa_type=String(LANGUAGE))  # "en" or "zh", for the bot's replies
    updated_at: datetime = at_field()


class AccountSubject(StrEnum):
    """Whose jobs an account mapping covers: one person's, or a whole team's."""

    USER = "user"
    TEAM = "team"


class UnixAccount(SQLModel, table=True):
    """The Unix account GPU hosts run a person's (or a team's) jobs as, set by an admin.

    A person's own mapping wins over their team's; the policy file's `accounts:` holds the
    same kind of mapping for installs that keep it in configuration.
    """

    __tablename__ = "unix_accounts"
    __table_args__ = (UniqueConstraint("subject_kind", "subject"),)

    id: int | None = Field(default=None, primary_key=True)
    subject_kind: str = Field(sa_type=String(8))  # AccountSubject
    subject: str = Field(sa_type=String(TEAM_NAME))  # a Slack user id, or a team's name
    account: str = Field(sa_type=String(UNIX_ACCOUNT))
    set_by: str = Field(sa_type=String(SLACK_ID))
    set_at: datetime = at_field()
