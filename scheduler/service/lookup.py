"""Finding what a command names, with errors that say how to find it instead."""

from __future__ import annotations

import re

from scheduler.errors import Conflict, NotFound, Problem
from scheduler.service.context import Context
from storage.models import Job, Team
from storage.queries import jobs as job_queries
from storage.queries import org as org_queries


def member_ref(array_id: int, member: int) -> str:
    """How a job of an array travels as a name to `job_by_ref`: "#40.3" (no name people
    choose starts with #)."""
    return f"#{array_id}.{member}"


def job_by_ref(ctx: Context, job_id: int | None, name: str | None) -> Job:
    """A job by `#id`, one of an array by "#40.3" (`member_ref`), or by name: jobs not yet
    ended (the actor's own first), else the actor's newest."""
    if name is not None and (member := _MEMBER.fullmatch(name)):
        array_id, index = int(member[1]), int(member[2])
        found = job_queries.array_member(session=ctx.session, array_id=array_id, index=index)
        if found is None:
            if job_queries.get_job(session=ctx.session, job_id=array_id) is None:
                raise NotFound(Problem.JOB_NOT_FOUND, job_id=array_id)
            raise NotFound(Problem.ARRAY_MEMBER_NOT_FOUND, job_id=array_id, member=index)
        return found
    if job_id is not None:
        job = job_queries.get_job(session=ctx.session, job_id=job_id)
        if job is None:
            raise NotFound(Problem.JOB_NOT_FOUND, job_id=job_id)
        return job
    candidates = list(job_queries.active_jobs_named(session=ctx.session, name=name or ""))
    own = [job for job in candidates if job.owner == ctx.actor.user_id]
    matches = own or candidates
    if not matches:
        # A finished job is still found by name: the actor's newest one.
        latest = job_queries.latest_job_named(
            session=ctx.session, name=name or "", owner=ctx.actor.user_id
        )
        if latest is not None:
            return latest
        raise NotFound(Problem.JOB_NAME_NOT_FOUND, name=name or "")
    if len(matches) > 1:
        jobs = tuple(f"#{job.id}" for job in matches)
        raise Conflict(Problem.JOB_NAME_AMBIGUOUS, name=name or "", jobs=jobs)
    return matches[0]


_MEMBER = re.compile(r"#([0-9]+)\.([0-9]+)")


def team_by_name(ctx: Context, name: str) -> Team:
    """A team by name, or an error listing the teams there are."""
    team = org_queries.team_by_name(session=ctx.session, name=name)
    if team is None:
        known = tuple(t.name for t in org_queries.all_teams(session=ctx.session))
        raise NotFound(Problem.TEAM_NOT_FOUND, name=name, teams=known)
    return team


def team_name(ctx: Context, team_id: int) -> str:
    """A team's name for display."""
    team = org_queries.team_by_id(session=ctx.session, team_id=team_id)
    return team.name if team else f"team {team_id}"


def submit_team_names(ctx: Context) -> list[str]:
    """The teams the actor may submit jobs for, as listed: a member's own, an admin's every
    one (what `submit` accepts: scheduler/service/jobs.py)."""
    teams = org_queries.all_teams(session=ctx.session)
    return [team.name for team in teams if ctx.actor.in_team(team.id or 0)]
