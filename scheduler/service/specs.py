"""A job's spec: the submission as it was given, kept with the job and never changed.

The spec holds the submit keys the person gave with the template's fields filled in (not
the grammar's defaults, which the policy may change), and the template and version they
came from; values are plain JSON, written as `/gpu submit` takes them, so reading a spec
back through the grammar repeats the submission. A bump or a ready changes the job, not
its spec.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

from scheduler.errors import Action, PermissionDenied, Problem, UserError
from scheduler.grammar.values import DataSpec, Duration
from scheduler.service.context import Context
from scheduler.service.lookup import job_by_ref, team_name

TEMPLATE = "template"
TEMPLATE_VERSION = "template_version"


def spec_of(fields: Mapping[str, Any], template_version: int | None) -> dict[str, Any]:
    """The spec of a submission: its parsed keys as plain JSON values, and the template's
    version when a template filled some in."""
    spec = {key: plain(value) for key, value in fields.items()}
    if template_version is not None and TEMPLATE in spec:
        spec[TEMPLATE_VERSION] = template_version
    return spec


def plain(value: Any) -> Any:
    """One parsed value as plain JSON: data readiness as the word or place typed, a list of
    GPU types as a list, a date as ISO text."""
    if isinstance(value, DataSpec):
        # The form can say "ready, and it is at /mnt/x"; the text grammar cannot, and
        # ready is what decides how the job is queued.
        if value.after is not None:
            return f"after:#{value.after}"
        return "ready" if value.ready else (value.location or "pending")
    if isinstance(value, Duration):  # with its unit: read back, it is the same length
        return str(value)
    if isinstance(value, tuple | list):
        return [plain(item) for item in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value


def to_repeat(ctx: Context, job_id: int | None, name: str | None) -> Mapping[str, Any]:
    """The spec of an earlier job, to submit it again (`submit again=<job>`): its team's
    members (and admins) may, as its spec holds its command."""
    job = job_by_ref(ctx, job_id, name)
    if not ctx.actor.in_team(job.team_id):
        raise PermissionDenied(
            Problem.OTHER_TEAMS_JOB,
            job_id=job.id or 0,
            team=team_name(ctx, job.team_id),
            action=Action.REPEAT,
            owner=job.owner,
        )
    if job.spec is None:
        raise UserError(Problem.NO_SPEC_TO_REPEAT, job_id=job.id or 0)
    return job.spec
