"""Teams, members, their preferences, and the Unix accounts their jobs run as."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import and_, or_
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from storage.models import AccountSubject, Member, Team, UnixAccount, UserPref
from storage.queries.names import first_named


def team_by_name(*, session: Session, name: str) -> Team | None:
    """The team called `name` (whatever its case, in any script), if any."""
    return first_named(session, select(Team), col(Team.name), name)


def team_by_id(*, session: Session, team_id: int) -> Team | None:
    """The team with this id, if any."""
    return session.get(Team, team_id)


def all_teams(*, session: Session) -> Sequence[Team]:
    """Every team, by name."""
    return session.exec(select(Team).order_by(Team.name)).all()


def member_by_user(*, session: Session, user_id: str) -> Member | None:
    """The member row of a Slack user, if they are known."""
    return session.exec(select(Member).where(Member.slack_user_id == user_id)).first()


def members(*, session: Session, team_id: int | None = None) -> Sequence[Member]:
    """Members, of one team or of all, by user id."""
    query = select(Member).order_by(Member.slack_user_id)
    if team_id is not None:
        query = query.where(Member.team_id == team_id)
    return session.exec(query).all()


def user_pref(*, session: Session, user_id: str) -> UserPref | None:
    """A Slack user's preferences, if they ever chose any."""
    return session.get(UserPref, user_id)


def set_language(*, session: Session, user_id: str, language: str, at: datetime) -> UserPref:
    """Save a user's reply language, creating their preferences row if needed."""
    pref = session.get(UserPref, user_id)
    if pref is None:
        pref = UserPref(slack_user_id=user_id, language=language, updated_at=at)
    else:
        pref.language, pref.updated_at = language, at
    session.add(pref)
    session.flush()
    return pref


def unix_account(*, session: Session, kind: AccountSubject, subject: str) -> UnixAccount | None:
    """The account mapped to one person (a Slack user id) or one team (its name), if any."""
    return session.exec(
        select(UnixAccount).where(UnixAccount.subject_kind == kind, UnixAccount.subject == subject)
    ).first()


def unix_accounts_of(*, session: Session, user_id: str, team: str) -> dict[str, str]:
    """The accounts mapped to a person and to their team, by subject kind, in one query
    (it runs for every submit)."""
    rows = session.execute(
        sa_select(col(UnixAccount.subject_kind), col(UnixAccount.account)).where(
            or_(
                and_(
                    col(UnixAccount.subject_kind) == AccountSubject.USER,
                    col(UnixAccount.subject) == user_id,
                ),
                and_(
                    col(UnixAccount.subject_kind) == AccountSubject.TEAM,
                    col(UnixAccount.subject) == team,
                ),
            )
        )
    ).all()
    return {str(kind): str(account) for kind, account in rows}


def unix_accounts(*, session: Session) -> Sequence[UnixAccount]:
    """Every mapping set with /gpu admin account: people first, then teams."""
    return session.exec(
        select(UnixAccount).order_by(
            UnixAccount.subject_kind.desc(),  # type: ignore[attr-defined]
            UnixAccount.subject,
        )
    ).all()


def set_unix_account(
    *, session: Session, kind: AccountSubject, subject: str, account: str, by: str, at: datetime
) -> UnixAccount:
    """Map a person or a team to an account, replacing what was there."""
    row = unix_account(session=session, kind=kind, subject=subject)
    if row is None:
        row = UnixAccount(subject_kind=kind, subject=subject, account=account, set_by=by, set_at=at)
    else:
        row.account, row.set_by, row.set_at = account, by, at
    session.add(row)
    session.flush()
    return row
