"""Which Unix account GPU hosts run each person's jobs as.

An admin maps a person, or a whole team, to an account (`/gpu admin account set`); the
policy file's `accounts:` may hold the same mappings. A person's own mapping wins over their
team's, and a mapping set by an admin over the policy file's. The account is looked up when a
job is submitted and kept with the job, so the job runs as whom it was submitted for even if
the mapping changes while it waits. With `accounts.required`, a job whose owner maps to no
account is refused at submit with what to do about it.
"""

from __future__ import annotations

from collections import defaultdict

from scheduler.account_map import mapped_account
from scheduler.agent.protocol import is_account_name
from scheduler.errors import Action, NotFound, Problem, UserError
from scheduler.results import Listing, Said, SaidCode
from scheduler.service.context import Context
from scheduler.service.lookup import team_by_name
from storage.models import AccountSubject, Team
from storage.queries import org as org_queries


def account_for(ctx: Context, user_id: str, team: Team) -> str | None:
    """The account `user_id`'s jobs for `team` run as, or None when nothing maps them."""
    return mapped_account(ctx.session, ctx.policy.accounts, user_id, team.name)


def require_account(ctx: Context, user_id: str, team: Team) -> str | None:
    """`account_for`, refusing a job that maps to none when the policy requires one."""
    account = account_for(ctx, user_id, team)
    if account is None and ctx.policy.accounts.required:
        raise UserError(Problem.NO_ACCOUNT, user=user_id)
    return account


def set_account(
    ctx: Context, user: str | None, team: str | None, account: str, *, force: bool = False
) -> Said:
    """Map a person or a team to a Unix account (admins only). An account named as a
    system account is refused unless `force` (audited as forced): the hosts' agents refuse
    system accounts by their uid anyway, this says so before any job waits on it."""
    ctx.require_admin(Action.MANAGE_ACCOUNTS)
    kind, subject = _subject(ctx, user, team)
    if not is_account_name(account):
        raise UserError(Problem.BAD_ACCOUNT_NAME, account=account)
    if system_account_name(account) and not force:
        raise UserError(Problem.ACCOUNT_SYSTEM, account=account)
    org_queries.set_unix_account(
        session=ctx.session,
        kind=kind,
        subject=subject,
        account=account,
        by=ctx.actor.user_id,
        at=ctx.now,
    )
    others = [other for other in _mapped_to(ctx)[account] if other != (kind, subject)]
    forced = {"forced": True} if force and system_account_name(account) else {}
    ctx.audit("account.set", kind, subject, account=account, shared_with=len(others), **forced)
    person = kind is AccountSubject.USER
    if others:  # they will share everything on the hosts: say so (docs: Shared Unix accounts)
        code = SaidCode.ACCOUNT_SET_USER_SHARED if person else SaidCode.ACCOUNT_SET_TEAM_SHARED
        return Said(code, {"subject": subject, "account": account, "others": len(others)})
    code = SaidCode.ACCOUNT_SET_USER if person else SaidCode.ACCOUNT_SET_TEAM
    return Said(code, {"subject": subject, "account": account})


# Accounts the base systems (Debian, Ubuntu, RHEL, SUSE) and common services make for
# themselves, and the privileged groups' names; `systemd-…` and `_…` names are the system's too.
SYSTEM_ACCOUNTS = frozenset(
    {"root", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp"}
    | {"proxy", "www-data", "backup", "list", "irc", "gnats", "nobody", "nfsnobody", "adm"}
    | {"halt", "shutdown", "operator", "ftp", "messagebus", "sshd", "syslog", "polkitd", "dbus"}
    | {"tss", "chrony", "ntp", "postfix", "postgres", "mysql", "redis", "nginx", "apache"}
    | {"docker", "wheel", "sudo", "lxd", "libvirt", "disk", "slurm", "munge", "nvidia-persistenced"}
)


def system_account_name(account: str) -> bool:
    """Whether `account` is the name of a system account (or a privileged group) on most
    hosts; the agent's check by uid and groups is the one that holds."""
    name = account.lower()
    return name in SYSTEM_ACCOUNTS or name.startswith(("systemd-", "_"))


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
    """Every mapping: set by admins, then from the policy file (admins only); an account
    that more than one person or team runs as is marked shared."""
    ctx.require_admin(Action.MANAGE_ACCOUNTS)
    shared = {account for account, subjects in _mapped_to(ctx).items() if len(subjects) > 1}
    pairs = [
        (AccountSubject(row.subject_kind), row.subject, row.account, False)
        for row in org_queries.unix_accounts(session=ctx.session)
    ]
    mapped = ctx.policy.accounts
    for kind, table in ((AccountSubject.USER, mapped.users), (AccountSubject.TEAM, mapped.teams)):
        pairs += [(kind, subject, account, True) for subject, account in sorted(table.items())]
    rows = [
        Said(
            _ROW[kind, from_policy, account in shared],
            {"subject": subject, "account": account},
        )
        for kind, subject, account, from_policy in pairs
    ]
    return Listing(rows, SaidCode.ACCOUNT_NONE)


def _mapped_to(ctx: Context) -> defaultdict[str, set[tuple[AccountSubject, str]]]:
    """Account → the people and teams that run as it: an admin's mapping, else the policy
    file's (an admin's mapping of the same person or team wins)."""
    effective: dict[tuple[AccountSubject, str], str] = {}
    mapped = ctx.policy.accounts
    for kind, table in ((AccountSubject.USER, mapped.users), (AccountSubject.TEAM, mapped.teams)):
        effective.update(((kind, subject), account) for subject, account in table.items())
    for row in org_queries.unix_accounts(session=ctx.session):
        effective[AccountSubject(row.subject_kind), row.subject] = row.account
    found: defaultdict[str, set[tuple[AccountSubject, str]]] = defaultdict(set)
    for pair, account in effective.items():
        found[account].add(pair)
    return found


_ROW = {
    (AccountSubject.USER, False, False): SaidCode.ACCOUNT_ROW_USER,
    (AccountSubject.TEAM, False, False): SaidCode.ACCOUNT_ROW_TEAM,
    (AccountSubject.USER, True, False): SaidCode.ACCOUNT_ROW_USER_POLICY,
    (AccountSubject.TEAM, True, False): SaidCode.ACCOUNT_ROW_TEAM_POLICY,
    (AccountSubject.USER, False, True): SaidCode.ACCOUNT_ROW_USER_SHARED,
    (AccountSubject.TEAM, False, True): SaidCode.ACCOUNT_ROW_TEAM_SHARED,
    (AccountSubject.USER, True, True): SaidCode.ACCOUNT_ROW_USER_POLICY_SHARED,
    (AccountSubject.TEAM, True, True): SaidCode.ACCOUNT_ROW_TEAM_POLICY_SHARED,
}


def _subject(ctx: Context, user: str | None, team: str | None) -> tuple[AccountSubject, str]:
    if (user is None) == (team is None):
        raise UserError(Problem.ACCOUNT_FOR_WHOM)
    if user is not None:
        return AccountSubject.USER, user
    return AccountSubject.TEAM, team_by_name(ctx, team or "").name
