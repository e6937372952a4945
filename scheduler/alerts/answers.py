"""What every answer to a job's notice checks first (the idle-GPU ask, the overrun notice):
the notice under a lock, its job, and whether the person who pressed may answer for it.

The owner, their team's approvers and admins may; the first answer holds (the caller looks
at `row.answered_at`)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from sqlmodel import Session

from scheduler.notices.kinds import NoticeKind
from scheduler.notices.outbox import Announcement, from_row
from scheduler.service.context import resolve_actor
from storage.models import Job, Notice
from storage.queries import jobs as job_queries
from storage.queries import notices as notice_queries


@dataclass(frozen=True)
class Answering:
    """A notice being answered: None for `row` when the key is unknown or of another kind."""

    row: Notice | None
    notice: Announcement | None = None
    job: Job | None = None
    allowed: bool = False


def answering(
    session: Session, key: str, kind: NoticeKind, user_id: str, admins: Collection[str]
) -> Answering:
    """Lock the notice `key` of `kind` and read its job and who may answer (in `session`)."""
    row = notice_queries.lock_notice(session=session, key=key)
    if row is None or row.kind != kind:
        return Answering(None)
    notice = from_row(row)
    job = job_queries.get_job(session=session, job_id=int(notice.detail.get("job_id", 0)))
    actor = resolve_actor(session, user_id, admins)
    allowed = actor.is_admin or (
        job is not None and (user_id == job.owner or actor.is_approver_of(job.team_id))
    )
    return Answering(row, notice, job, allowed)
