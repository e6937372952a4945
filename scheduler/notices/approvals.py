"""Bump requests and decisions as notices: the approvers are asked, and the person who asked
hears the answer, through the outbox like every other notice.

The notice is claimed in the transaction that opens or decides the request, so neither is
lost to a crash or a Slack outage. Where the approvers are asked (the approvals channel,
the team's channel, or each approver by DM) is the bot's business when it delivers.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from scheduler.notices.kinds import NoticeKind
from scheduler.notices.outbox import Announcement, claim
from storage.models import BumpRequest, Job

REQUEST_KIND = NoticeKind.BUMP_REQUEST
DECISION_KIND = NoticeKind.BUMP_DECIDED


def ask_approvers(session: Any, request: BumpRequest, job: Job, now: datetime) -> None:
    """Ask the job team's approvers to decide `request` (in the caller's transaction)."""
    text = (
        f"<@{request.requested_by}> asks to move job #{job.id} {job.name} from "
        f"{request.from_priority} to {request.to_priority}: {request.reason}. "
        f"Approvers: /gpu approve {request.id} or /gpu deny {request.id}"
    )
    claim(
        session,
        Announcement(
            key=f"{REQUEST_KIND}:{request.id}",
            kind=REQUEST_KIND,
            at=now,
            text=text,
            detail={"subject": f"bump:{request.id}", "request_id": request.id, "job_id": job.id},
        ),
    )


def tell_requester(session: Any, request: BumpRequest, job: Job, now: datetime) -> None:
    """Tell whoever asked how `request` was decided (in the caller's transaction)."""
    text = (
        f"bump request #{request.id} for job #{job.id} {job.name} was {request.state} "
        f"by <@{request.decided_by}>"
        + (f": {request.decision_reason}" if request.decision_reason else "")
    )
    claim(
        session,
        Announcement(
            key=f"{DECISION_KIND}:{request.id}",
            kind=DECISION_KIND,
            at=now,
            text=text,
            to_users=(request.requested_by,),
            detail={"subject": f"bump:{request.id}", "request_id": request.id, "job_id": job.id},
        ),
    )
