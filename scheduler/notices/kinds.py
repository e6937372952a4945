"""Every kind of notice paika sends, in one list: the outbox stores the kind with each
notice, and each medium's sender must know how to deliver every one of them (a test checks
the Slack sender)."""

from __future__ import annotations

from enum import StrEnum


class NoticeKind(StrEnum):
    """What a notice is about."""

    # Job and host events, from the cycle (scheduler.notices.events)
    JOB_STARTED = "job_started"
    JOB_FINISHED = "job_finished"
    JOB_FAILED = "job_failed"
    JOB_LOST = "job_lost"
    JOB_UNKNOWN = "job_unknown"  # its host stopped answering; it keeps its GPUs
    JOB_RESUMED = "job_resumed"  # its host answers again and still runs it
    JOB_PREEMPTED = "job_preempted"
    JOB_REQUEUED = "job_requeued"
    # Told to the admins (the channel): a job whose settling raised, contained to it; and,
    # to its owner and the admins, a job held because a host refused its start for good.
    JOB_UNSETTLED = "job_unsettled"
    JOB_HELD = "job_held"
    # One of two jobs on a shared card slowed the other: one was stopped and queued again,
    # and the two are kept apart (scheduler/share_watch.py); told to both owners.
    JOB_KEPT_APART = "job_kept_apart"
    # A job another waits for to succeed failed or was cancelled: the dependant is held and
    # its owner told once, with Cancel and Release (scheduler/dependencies.py).
    JOB_UPSTREAM_FAILED = "job_upstream_failed"
    # A host's planned maintenance opens while a job of theirs is expected to still run
    # there: told the day before and an hour before (scheduler/maintenance.py).
    MAINTENANCE_AHEAD = "maintenance_ahead"
    # Every job of an array has ended: told once to its owner (scheduler/array_watch.py).
    ARRAY_ENDED = "array_ended"
    HOST_DOWN = "host_down"
    HOST_UP = "host_up"
    # Bump requests for the approvers, and their decisions (scheduler.notices.approvals)
    BUMP_REQUEST = "bump_request"
    BUMP_DECIDED = "bump_decided"
    # Alerts (scheduler.alerts) and the daily board (scheduler.digest)
    QUOTA_EXPIRY = "quota_expiry"
    QUOTA_USED = "quota_used"
    GPUS_IDLE = "gpus_idle"
    GPUS_RECLAIMED = "gpus_reclaimed"
    JOB_OVERRUN = "job_overrun"  # a run past its estimate × the overrun factor (Extend / Stop)
    DIGEST = "digest"
    # The object store (scheduler.archive): unreachable past the threshold, and back
    STORE_DOWN = "store_down"
    STORE_BACK = "store_back"


EVENT_KINDS = frozenset(
    {
        NoticeKind.JOB_STARTED,
        NoticeKind.JOB_FINISHED,
        NoticeKind.JOB_FAILED,
        NoticeKind.JOB_LOST,
        NoticeKind.JOB_UNKNOWN,
        NoticeKind.JOB_RESUMED,
        NoticeKind.JOB_PREEMPTED,
        NoticeKind.JOB_REQUEUED,
        NoticeKind.JOB_UNSETTLED,
        NoticeKind.JOB_HELD,
        NoticeKind.JOB_KEPT_APART,
        NoticeKind.HOST_DOWN,
        NoticeKind.HOST_UP,
    }
)
