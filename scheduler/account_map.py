"""Which Unix account a person's jobs run as: the rule, for every part that needs it.

An admin's mapping (`/gpu admin account set`, in the database) wins over the policy file's
`accounts:`, and a person's own mapping over their team's. The services (submit, `/gpu admin
account`), the cycle's held jobs and `paika doctor` all ask here, so they cannot disagree.
"""

from __future__ import annotations

from sqlmodel import Session

from scheduler.config import Accounts
from storage.models import AccountSubject
from storage.queries import org as org_queries


def mapped_account(session: Session, mapped: Accounts, user_id: str, team: str) -> str | None:
    """The account `user_id`'s jobs for `team` run as, from the database's mappings and the
    policy's `accounts:` (None: nothing maps them)."""
    set_by_admins = org_queries.unix_accounts_of(session=session, user_id=user_id, team=team)
    return (
        set_by_admins.get(AccountSubject.USER)
        or mapped.users.get(user_id)
        or set_by_admins.get(AccountSubject.TEAM)
        or mapped.teams.get(team)
    )
