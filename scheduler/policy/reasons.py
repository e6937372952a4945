"""Why a job changed state, why the policy chose a GPU type, and its verdict on each type it
weighed: as codes with the values they name, so each face says them in its reader's language.

One registry: every code and the English the scheduler stores beside it (the job's history,
logs, exports and snapshots keep that text, and so do rows written before codes). A reason
may name another (`why`, `done`): "requeued: its host lost it" is REQUEUED_BECAUSE around
AGENT_LOST. Words typed by a person (a cancel's reason) are no code: they stay as typed.

Pure, beside the policy: it gives its own reasons (a match's, a verdict's) as codes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class ReasonCode(StrEnum):
    """Every reason and verdict a reader may be shown; `bot/messages.yml` says each as
    `reason.<value>`, with the same values."""

    # --- a job's history: people's changes
    SUBMITTED = "submitted"
    DATA_READY = "data_ready"
    DATA_FROM_JOB = "data_from_job"  # upstream: the job whose success made its data ready
    DATA_RELEASED = "data_released"  # by: who let it go on without the job making its data
    CANCELLED = "cancelled"
    RESTORED_WITHOUT_COMMAND = "restored_without_command"  # the archive kept it masked
    # --- a stop paika asked for, once its host confirms it (scheduler.hosts.reconcile)
    RELEASED_IDLE = "released_idle"
    MARKED_DONE = "marked_done"
    ESTIMATE_LIMIT = "estimate_limit"
    FOR_CORE_WORK = "for_core_work"
    GPUS_SAT_IDLE = "gpus_sat_idle"
    SHARE_SLOWED = "share_slowed"  # a job on its shared card ran too slowly beside the other
    HOST_MAINTENANCE = "host_maintenance"  # its host's planned maintenance began
    PREEMPTED_FOR_CORE = "preempted_for_core"  # for_job
    PREEMPTED_FOR_SHORTER = "preempted_for_shorter"  # for_job
    PREEMPTED_FOR_STARVING = "preempted_for_starving"  # for_job
    # --- reasons around another one (why, done: reasons; stop: a stop's name)
    REQUEUED = "requeued"
    REQUEUED_BECAUSE = "requeued_because"  # why
    STOPPED_BECAUSE = "stopped_because"  # why
    ENDED_BECAUSE = "ended_because"  # done, why
    NEVER_RAN = "never_ran"  # why
    STOPPED_BEFORE_START = "stopped_before_start"  # stop
    STOPPED_WHILE = "stopped_while"  # stop, why
    LOST_AFTER_ATTEMPTS = "lost_after_attempts"  # why, attempts
    UNSETTLED = "unsettled"  # error (paika's own, as raised)
    # --- its host
    HOST_ANSWERS = "host_answers"
    HOST_SILENT = "host_silent"  # minutes
    NEVER_TOOK_START = "never_took_start"
    AGENT_LOST = "agent_lost"
    HOST_GAVE_UP = "host_gave_up"  # hours
    NODE_FAILED = "node_failed"
    EXECUTOR_PREEMPTED = "executor_preempted"
    PENDING_TOO_LONG = "pending_too_long"  # minutes
    PENDING_TOO_LONG_SAID = "pending_too_long_said"  # minutes, slurm_reason (Slurm's word)
    # --- how its run ended
    EXITED_OK = "exited_ok"
    EXITED_REPORTED_FAILED = "exited_reported_failed"
    EXITED = "exited"  # exit_code
    KILLED = "killed"
    ENDED_BY_EXECUTOR = "ended_by_executor"  # ended_by (the executor's state, e.g. TIMEOUT)
    OVER_SHARED_MEMORY = "over_shared_memory"  # used, declared (GiB)
    # --- its start (problem: the host's own words; dispatch, refusal: their codes)
    START_REFUSED = "start_refused"  # host, problem[, dispatch]
    START_FAILED = "start_failed"  # host, problem[, dispatch]
    START_HELD = "start_held"  # host, problem, refusal
    # --- a bump request closed by paika: its job no longer waits
    BUMP_MOOT = "bump_moot"  # state (the job's)
    # --- why the policy chose the type it started a job on
    MATCH_FIRST_FIT = "match_first_fit"
    MATCH_CHEAPEST_FREE = "match_cheapest_free"
    MATCH_CHEAPER_REFUSED = "match_cheaper_refused"
    MATCH_WAITED_FOR_CHEAPER = "match_waited_for_cheaper"  # minutes
    MATCH_CHEAPER_NOT_SOON = "match_cheaper_not_soon"  # gpu_type, minutes
    # on a shared card: gpu_type, card (host/index), memory (GiB: its own), used (the card's
    # other jobs'), total; beside (the jobs beside it), pressure (theirs and its own), slowdown %
    MATCH_SHARES = "match_shares"
    MATCH_SHARES_NEW_CARD = "match_shares_new_card"  # gpu_type, card, memory, total
    # --- its verdict on each type it weighed
    VERDICT_CHOSEN = "verdict_chosen"
    VERDICT_NOT_ALLOWED = "verdict_not_allowed"
    VERDICT_TOO_LITTLE_MEMORY = "verdict_too_little_memory"  # memory, needed (GiB)
    VERDICT_TOO_SLOW = "verdict_too_slow"  # speed, needed
    VERDICT_QUOTA_CANNOT_PAY = "verdict_quota_cannot_pay"
    VERDICT_NO_HOST_HAS_ENOUGH = "verdict_no_host_has_enough"
    VERDICT_COSTLIER = "verdict_costlier"
    VERDICT_NOT_ENOUGH_FREE = "verdict_not_enough_free"


C = ReasonCode
# The English stored beside each code: str.format templates over its values.
ENGLISH: Mapping[ReasonCode, str] = {
    C.SUBMITTED: "submitted",
    C.DATA_READY: "data ready",
    C.HOST_MAINTENANCE: "its host's planned maintenance began",
    C.DATA_FROM_JOB: "data ready: job #{upstream} succeeded",
    C.DATA_RELEASED: "data marked ready by {by} without the job that makes it",
    C.CANCELLED: "cancelled",
    C.RESTORED_WITHOUT_COMMAND: (
        "cancelled at restore: the archive kept its command masked (archive.commands);"
        " submit it again"
    ),
    C.RELEASED_IDLE: "released: its GPUs sat idle",
    C.MARKED_DONE: "marked done",
    C.ESTIMATE_LIMIT: "stopped: ran past its estimate's hard limit",
    C.FOR_CORE_WORK: "for core work",
    C.GPUS_SAT_IDLE: "its GPUs sat idle",
    C.SHARE_SLOWED: "a job on its shared card ran too slowly beside it; the two are kept apart",
    C.PREEMPTED_FOR_CORE: "preempted for core job #{for_job}",
    C.PREEMPTED_FOR_SHORTER: "preempted for shorter job #{for_job}",
    C.PREEMPTED_FOR_STARVING: "preempted for job #{for_job}, waiting past the backstop",
    C.REQUEUED: "requeued",
    C.REQUEUED_BECAUSE: "requeued: {why}",
    C.STOPPED_BECAUSE: "stopped: {why}",
    C.ENDED_BECAUSE: "{done} ({why})",
    C.NEVER_RAN: "{why}; it never ran",
    C.STOPPED_BEFORE_START: "stopped ({stop}) before it started",
    C.STOPPED_WHILE: "stopped ({stop}) while {why}",
    C.LOST_AFTER_ATTEMPTS: "lost: {why}, after {attempts} attempts",
    C.UNSETTLED: "it could not be settled: {error}",
    C.HOST_ANSWERS: "its host answers again",
    C.HOST_SILENT: "its host has not answered for {minutes:.0f} min",
    C.NEVER_TOOK_START: "its host never took the start",
    C.AGENT_LOST: "its host lost it (the agent restarted without it)",
    C.HOST_GAVE_UP: "its host did not answer for {hours:g} h",
    C.NODE_FAILED: "its Slurm node failed under it",
    C.EXECUTOR_PREEMPTED: "Slurm preempted it",
    C.PENDING_TOO_LONG: "Slurm kept it pending past {minutes:g} min",
    C.PENDING_TOO_LONG_SAID: "Slurm kept it pending past {minutes:g} min ({slurm_reason})",
    C.EXITED_OK: "exited with 0",
    C.EXITED_REPORTED_FAILED: "exited with 0, but the job reported status=failed",
    C.EXITED: "exited with {exit_code}",
    C.KILLED: "was killed on its host",
    C.ENDED_BY_EXECUTOR: "ended by its executor: {ended_by}",
    C.START_REFUSED: "its start was refused on {host}: {problem}",
    C.START_FAILED: "start failed on {host}: {problem}",
    C.START_HELD: "held off {host}, which refuses to start it: {problem}",
    C.BUMP_MOOT: "job {state}",
    C.MATCH_FIRST_FIT: "first adequate GPUs free in host order (type-blind)",
    C.MATCH_CHEAPEST_FREE: "the cheapest adequate type, with GPUs free now",
    C.MATCH_CHEAPER_REFUSED: "a costlier type: a host of the cheaper one refused it",
    C.MATCH_WAITED_FOR_CHEAPER: "waited over {minutes:g} min for a cheaper type",
    C.MATCH_CHEAPER_NOT_SOON: "no {gpu_type} frees up within {minutes:g} min",
    C.OVER_SHARED_MEMORY: (
        "stopped on its shared card: it used {used:g} GiB, more than the {declared:g} GiB it"
        " declared (mem=), while its neighbour needed the room; submit it again with a larger"
        " mem="
    ),
    C.MATCH_SHARES: (
        "shares {gpu_type} on {card} with {beside}: memory {memory:g} + {used:g} of {total:g} GiB,"
        " bandwidth {pressure}"
    ),
    C.MATCH_SHARES_NEW_CARD: (
        "the first job on a shared {gpu_type} ({card}): memory {memory:g} of {total:g} GiB"
    ),
    C.VERDICT_CHOSEN: "chosen",
    C.VERDICT_NOT_ALLOWED: "not among the allowed types",
    C.VERDICT_TOO_LITTLE_MEMORY: "{memory:g} GiB < {needed:g} GiB needed",
    C.VERDICT_TOO_SLOW: "speed {speed:g} < {needed:g} needed",
    C.VERDICT_QUOTA_CANNOT_PAY: "its quota cannot pay",
    C.VERDICT_NO_HOST_HAS_ENOUGH: "no host has enough of them",
    C.VERDICT_COSTLIER: "costlier",
    C.VERDICT_NOT_ENOUGH_FREE: "not enough free now",
}


@dataclass(frozen=True, slots=True)
class Reason:
    """A reason as a code and the values it names (`values`: name → a JSON scalar, or a
    reason said inside this one)."""

    code: ReasonCode
    values: Mapping[str, Any] = field(default_factory=dict)

    def english(self) -> str:
        """The English stored beside the code (what older rows hold alone)."""
        said = {
            name: value.english() if isinstance(value, Reason) else value
            for name, value in self.values.items()
        }
        return ENGLISH[self.code].format(**said)

    def stored_values(self) -> dict[str, Any] | None:
        """The values as JSON (a reason inside as {"code", "values"}); None when it names none."""
        if not self.values:
            return None
        return {name: _stored(value) for name, value in self.values.items()}


def because(code: ReasonCode, **values: Any) -> Reason:
    """A reason, its values by name: `because(ReasonCode.EXITED, exit_code=1)`."""
    return Reason(code, values)


def reason_of(code: str | None, values: Mapping[str, Any] | None) -> Reason | None:
    """A stored code and its values back as a Reason; None for none, or for a code (or a
    reason inside it) this version does not know: the reader is shown the stored text."""
    if not code:
        return None
    try:
        known = ReasonCode(code)
    except ValueError:
        return None
    read: dict[str, Any] = {}
    for name, value in (values or {}).items():
        if isinstance(value, Mapping):
            inner = reason_of(value.get("code"), value.get("values"))
            if inner is None:
                return None
            read[name] = inner
        else:
            read[name] = value
    return Reason(known, read)


def english_of(reason: str | Reason | None) -> str | None:
    """The stored text of a reason given as words (typed by a person) or as a code."""
    return reason.english() if isinstance(reason, Reason) else reason


def _stored(value: Any) -> Any:
    if isinstance(value, Reason):
        return {"code": value.code.value, "values": value.stored_values() or {}}
    return value
