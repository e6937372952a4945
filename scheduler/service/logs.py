"""`/gpu logs <job> [lines=N]`: the tail of a job's output, read by its host's executor (the
agent there; on a Slurm pool, the file its `log_path` names, where this machine can read it).

Who may read it: the job's owner, approvers of its team, admins (the output may hold what
the job's command and data hold). A run on several hosts is read from rank 0's host (the
first of the run's hosts by id, as the cycle ranks them at start); an ended job from its
last run's host, while that agent still keeps the run.

The agent is asked once the database work is over: the read transaction ends first, so a
slow host holds no snapshot or lock, and the call has a short timeout of its own so a
host that is down answers the user within seconds, never a hang.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, replace

from scheduler.credentials import AgentKeys, read_secret
from scheduler.dispatch import LogRequest, agent_job_id
from scheduler.errors import Action, Problem, UserError
from scheduler.service.context import Context
from scheduler.service.jobs import require_owner_or_approver
from scheduler.service.lookup import job_by_ref, team_name
from scheduler.service.records import JobRecord
from storage.queries import cluster as cluster_queries

# Seconds the agent has to answer: well inside the time a person waits for a reply.
LOG_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class LogSource:
    """Where one run's output is read: the host (rank 0's), its agent and the run's id there."""

    host: str
    url: str
    run: str
    attempt: int
    hosts: tuple[str, ...]  # every host of the run, in rank order
    token: str | None
    key_problem: str | None  # why no token can be presented (for the admin who can fix it)


@dataclass(frozen=True)
class LogsResult:
    """The last lines of a job's output, as its host's agent keeps them."""

    job: JobRecord
    team: str
    host: str
    hosts: tuple[str, ...]  # more than one: the run spanned them and `host` is rank 0's
    attempt: int
    asked: int  # how many lines were asked for
    lines: tuple[str, ...]

    @property
    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)


def logs(
    ctx: Context,
    job_id: int | None,
    name: str | None,
    lines: int,
    *,
    tls: ssl.SSLContext | None = None,
    timeout: float = LOG_TIMEOUT_S,
) -> LogsResult:
    """The last `lines` lines of the job's latest run, read by its host's executor."""
    job = job_by_ref(ctx, job_id, name)
    require_owner_or_approver(ctx, job, Action.READ_LOGS)
    record = JobRecord.of(job)
    source = _source(ctx, record, job.attempts)
    team = team_name(ctx, job.team_id)
    # Nothing was written: end the read transaction before the host is asked.
    ctx.session.commit()
    # The executors load when a run's output is asked for: every face imports this module.
    from scheduler.executors import kind_of

    found = ctx.policy.pool_of(source.host)
    executor, options = ("agents", None) if found is None else (found[1].executor, found[1].options)
    if tls is None and ctx.agent_ca_file is not None:
        from scheduler.agent.client import shared_tls

        tls = shared_tls(str(ctx.agent_ca_file))
    request = LogRequest(
        job_id=record.id,
        attempt=source.attempt,
        name=record.name,
        account=job.account,
        host=source.host,
        url=source.url,
        lines=lines,
        timeout=timeout,
        options=options,
        token=source.token,
        key_problem=source.key_problem,
        tls=tls,
    )
    found_lines = kind_of(executor).read_log(request)
    # A person reads the command only within the job's team (as `/gpu status` shows it).
    shown = record if ctx.actor.in_team(job.team_id) else replace(record, command="")
    return LogsResult(shown, team, source.host, source.hosts, source.attempt, lines, found_lines)


def _source(ctx: Context, job: JobRecord, attempt: int) -> LogSource:
    hosts = cluster_queries.last_run_hosts(session=ctx.session, job_id=job.id)
    if not hosts or attempt < 1:
        raise UserError(Problem.LOGS_NEVER_RAN, job_id=job.id, state=job.state)
    first = hosts[0]
    secret = read_secret(ctx.agent_secret_file) if ctx.agent_secret_file is not None else None
    key = AgentKeys(ctx.agent_token, secret).key_of(first)
    return LogSource(
        first.name,
        first.url,
        agent_job_id(job.id, attempt),
        attempt,
        tuple(host.name for host in hosts),
        key.token,
        key.problem,
    )
