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
    claim(
        session,
        Announcement(
            key=f"{REQUEST_KIND}:{request.id}",
            kind=REQUEST_KIND,
            at=now,
            detail=_values(request, job),
        ),
    )


def tell_requester(session: Any, request: BumpRequest, job: Job, now: datetime) -> None:
    """Tell whoever asked how `request` was decided (in the caller's transaction)."""
    claim(
        session,
        Announcement(
            key=f"{DECISION_KIND}:{request.id}",
            kind=DECISION_KIND,
            at=now,
            to_users=(request.requested_by,),
            detail={
                **_values(request, job),
                "state": request.state,
                "decided_by": request.decided_by,
                "decision_reason": request.decision_reason,
                "decision_reason_code": request.decision_reason_code,
                "decision_reason_values": request.decision_reason_values,
            },
        ),
    )


def _values(request: BumpRequest, job: Job) -> dict[str, Any]:
    """What a bump notice names: the request and its job, as they were when it was raised."""
    return {
        "subject": f"bump:{request.id}",
        "request_id": request.id,
        "job_id": job.id,
        "name": job.name,
        "requested_by": request.requested_by,
        "from_priority": request.from_priority,
        "to_priority": request.to_priority,
        "reason": request.reason,
    }
