"""Results of commands that carry no service record of their own.

The scheduler says what it did as a code and the plain values the sentence names; the
faces hold the words (`bot/messages.yml`, where each `SaidCode` is a key) and say them in
the reader's language.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum


class SaidCode(StrEnum):
    """What a template or admin command answers; each value is its catalogue key."""

    TEMPLATE_SAVED = "template.saved"
    TEMPLATE_UPDATED = "template.updated"
    TEMPLATE_SHOWN = "template.shown"
    TEMPLATE_DELETED = "template.deleted"
    TEMPLATE_ROW = "template.row"
    TEMPLATE_NONE = "template.none"
    TEMPLATE_UNCHANGED = "template.unchanged"
    TEAM_ADDED = "team.added"
    TEAM_ADDED_WITH_CHANNEL = "team.added_with_channel"
    TEAM_REMOVED = "team.removed"
    TEAM_ROW = "team.row"
    TEAM_ROW_WITH_CHANNEL = "team.row_with_channel"
    TEAM_NONE = "team.none"
    MEMBER_ADDED = "member.added"
    MEMBER_MOVED = "member.moved"
    MEMBER_REMOVED = "member.removed"
    MEMBER_ROLE = "member.role"
    MEMBER_ROW = "member.row"
    MEMBER_ROW_WITHOUT_TEAM = "member.row_without_team"
    MEMBER_NONE = "member.none"
    HOST_ADDED = "host.added"
    HOST_ADDED_WITH_TOKEN = "host.added_with_token"
    HOST_TOKEN_ROTATED = "host.token_rotated"
    HOST_TOKEN_REVOKED = "host.token_revoked"
    HOST_DRAINING = "host.draining"
    HOST_RESUMED = "host.resumed"
    HOST_REMOVED = "host.removed"
    HOST_ROW = "host.row"
    HOST_ROW_DRAINING = "host.row_draining"
    HOST_ROW_TROUBLE = "host.row_trouble"
    HOST_ROW_DISK_LOW = "host.row_disk_low"
    HOST_ROW_UNLISTED = "host.row_unlisted"
    HOST_NONE = "host.none"
    ACCOUNT_SET_USER = "account.set_user"
    ACCOUNT_SET_TEAM = "account.set_team"
    ACCOUNT_REMOVED_USER = "account.removed_user"
    ACCOUNT_REMOVED_TEAM = "account.removed_team"
    ACCOUNT_ROW_USER = "account.row_user"
    ACCOUNT_ROW_TEAM = "account.row_team"
    ACCOUNT_ROW_USER_POLICY = "account.row_user_policy"
    ACCOUNT_ROW_TEAM_POLICY = "account.row_team_policy"
    ACCOUNT_NONE = "account.none"
    # The account is also another person's or team's: they share everything on the hosts.
    ACCOUNT_SET_USER_SHARED = "account.set_user_shared"
    ACCOUNT_SET_TEAM_SHARED = "account.set_team_shared"
    ACCOUNT_ROW_USER_SHARED = "account.row_user_shared"
    ACCOUNT_ROW_TEAM_SHARED = "account.row_team_shared"
    ACCOUNT_ROW_USER_POLICY_SHARED = "account.row_user_policy_shared"
    ACCOUNT_ROW_TEAM_POLICY_SHARED = "account.row_team_policy_shared"
    BOOKING_ADDED = "booking.added"
    BOOKING_ROW = "booking.row"
    BOOKING_YOURS = "booking.yours"
    BOOKING_CANCELLED = "booking.cancelled"
    BOOKING_NONE = "booking.none"
    MAINTENANCE_ADDED = "maintenance.added"
    MAINTENANCE_ROW = "maintenance.row"
    MAINTENANCE_ROW_UNDER_WAY = "maintenance.row_under_way"
    MAINTENANCE_CANCELLED = "maintenance.cancelled"
    MAINTENANCE_NONE = "maintenance.none"
    QUOTA_NONE_FOR_TEAM = "quota.none_for_team"
    QUOTA_NONE_AT_ALL = "quota.none_at_all"


# What a value may be: a name, a number, or a template's fields (written as `/gpu` takes them).
Value = str | int | float | Mapping[str, object]


@dataclass(frozen=True)
class Said:
    """One sentence to say: its code and the values it names (names, ids, stored roles)."""

    code: SaidCode
    values: Mapping[str, Value] = field(default_factory=dict)


@dataclass(frozen=True)
class Listing:
    """Rows to show one per line, each a sentence of plain values, and what to say when
    there are none (a team's templates, the teams, the members, the hosts)."""

    rows: Sequence[Said]
    empty: SaidCode
