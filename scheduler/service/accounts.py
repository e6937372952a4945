"""Which Unix account GPU hosts run each person's jobs as.

An admin maps a person, or a whole team, to an account (`/gpu admin account set`); the
policy file's `accounts:` may hold the same mappings. A person's own mapping wins over their
team's, and a mapping set by an admin over the policy file's. The account is looked up when a
job is submitted and kept with the job, so the job runs as whom it was submitted for even if
the mapping changes while it waits. With `accounts.required`, a job whose owner maps to no
account is refused at submit with what to do about it.
"""

from __future__ import annotations

from scheduler.agent.protocol import is_account_name
from scheduler.errors import Action, NotFound, Problem, UserError
from scheduler.results import Listing, Said, SaidCode
from scheduler.service.context import Context
from scheduler.service.lookup import team_by_name
from storage.models import AccountSubject, Team
from storage.queries import org as org_queries


def account_for(ctx: Context, user_id: str, team: Team) -> str | None:
    """The account `user_id`'s jobs for `team` run as, or None when nothing maps them."""
    mapped = ctx.policy.accounts
    set_by_admins = org_queries.unix_accounts_of(
        session=ctx.session, user_id=user_id, team=team.name
    )
    return (
        set_by_admins.get(AccountSubject.USER)
        or mapped.users.get(user_id)
        or set_by_admins.get(AccountSubject.TEAM)
        or mapped.teams.get(team.name)
    )


def require_account(ctx: Context, user_id: str, team: Team) -> str | None:
    """`account_for`, refusing a job that maps to none when the policy requires one."""
    account = account_for(ctx, user_id, team)
    if account is None and ctx.policy.accounts.required:
        raise UserError(Problem.NO_ACCOUNT, user=user_id)
    return account


def set_account(ctx: Context, user: str | None, team: str | None, account: str) -> Said:
    """Map a person or a team to a Unix account (admins only)."""
    ctx.require_admin(Action.MANAGE_ACCOUNTS)
    kind, subject = _subject(ctx, user, team)
    if not is_account_name(account):
        raise UserError(Problem.BAD_ACCOUNT_NAME, account=account)
    org_queries.set_unix_account(
        session=ctx.session,
        kind=kind,
        subject=subject,
        account=account,
        by=ctx.actor.user_id,
        at=ctx.now,
    )
    ctx.audit("account.set", kind, subject, account=account)
    code = SaidCode.ACCOUNT_SET_USER if kind is AccountSubject.USER else SaidCode.ACCOUNT_SET_TEAM
    return Said(code, {"subject": subject, "account": account})


def remove_account(ctx: Context, user: str | None, team: str | None) -> Said:
    """Forget an admin's mapping of a person or a team (admins only)."""
    ctx.require_admin(Action.MANAGE_ACCOUNTS)
    kind, subject = _subject(ctx, user, team)
    row = org_queries.unix_account(session=ctx.session, kind=kind, subject=subject)
    if row is None:
        raise NotFound(Problem.NO_ACCOUNT_MAPPING, subject=subject)
    ctx.session.delete(row)
    ctx.audit("account.remove", kind, subject, account=row.account)
    code = (
        SaidCode.ACCOUNT_REMOVED_USER
        if kind is AccountSubject.USER
        else SaidCode.ACCOUNT_REMOVED_TEAM
    )
    return Said(code, {"subject": subject, "account": row.account})


def list_accounts(ctx: Context) -> Listing:
    """Every mapping: set by admins, then from the policy file (admins only)."""
    ctx.require_admin(Action.MANAGE_ACCOUNTS)
    rows = [
        Said(
            _ROW[AccountSubject(row.subject_kind), False],
            {"subject": row.subject, "account": row.account},
        )
        for row in org_queries.unix_accounts(session=ctx.session)
    ]
    mapped = ctx.policy.accounts
    for kind, table in ((AccountSubject.USER, mapped.users), (AccountSubject.TEAM, mapped.teams)):
        rows += [
            Said(_ROW[kind, True], {"subject": subject, "account": account})
            for subject, account in sorted(table.items())
        ]
    return Listing(rows, SaidCode.ACCOUNT_NONE)


_ROW = {
    (AccountSubject.USER, False): SaidCode.ACCOUNT_ROW_USER,
    (AccountSubject.TEAM, False): SaidCode.ACCOUNT_ROW_TEAM,
    (AccountSubject.USER, True): SaidCode.ACCOUNT_ROW_USER_POLICY,
    (AccountSubject.TEAM, True): SaidCode.ACCOUNT_ROW_TEAM_POLICY,
}


def _subject(ctx: Context, user: str | None, team: str | None) -> tuple[AccountSubject, str]:
    if (user is None) == (team is None):
        raise UserError(Problem.ACCOUNT_FOR_WHOM)
    if user is not None:
        return AccountSubject.USER, user
    return AccountSubject.TEAM, team_by_name(ctx, team or "").name
