"""What the faces say of arrays (count=, sweep=): the submit's line, the status summary with
each job of it, the cancel of all of it. The console and Block Kit say the same words."""

from __future__ import annotations

from bot.i18n import counted, t, term
from scheduler.door import ArrayStatus, ArraySummary

STATE_ORDER = ("running", "unknown", "queued", "waiting_data", "preempted", "succeeded", "failed")


def submitted(lang: str, array: ArraySummary) -> str:
    """The line a submit adds when it made an array."""
    key = "array.submitted_limited" if array.max_running else "array.submitted"
    return t(
        lang,
        key,
        id=array.array_id,
        size=array.size,
        last=array.size,
        first_job=array.array_id,
        last_job=array.last_id,
        most=array.max_running or 0,
    )


def summary(lang: str, array: ArrayStatus, *, shown: int = 50) -> list[str]:
    """The array in a status: how many jobs in each state, then each job by its place (the
    first `shown` of them, then how many more)."""
    counts = array.counts()
    ordered = sorted(counts, key=lambda s: STATE_ORDER.index(s) if s in STATE_ORDER else 99)
    states = " · ".join(f"{counts[s]} {term(lang, 'state', s)}" for s in ordered)
    key = "array.summary_limited" if array.max_running else "array.summary"
    lines = [t(lang, key, id=array.array_id, size=array.size, most=array.max_running or 0)]
    lines[0] += " " + states
    if array.ranked_by is not None:
        order = "array.ranked_lower" if array.lower else "array.ranked_higher"
        lines[0] += " · " + t(lang, order, metric=array.ranked_by)
    for member in array.members[:shown]:
        values = " ".join(f"{k}={v}" for k, v in member.values.items())
        metrics = ", ".join(
            f"{k} {v}" for k, v in member.metrics.items() if not isinstance(v, dict)
        )
        lines.append(
            t(
                lang,
                "array.member",
                ref=f"#{array.array_id}.{member.index}",
                job=member.job_id,
                values=values,
                state=term(lang, "state", member.state),
            )
            + (f" · {metrics}" if metrics else "")
        )
    if len(array.members) > shown:
        lines.append(t(lang, "array.more", n=len(array.members) - shown))
    return lines


def pipeline(lang: str, steps: tuple[tuple[int, str], ...]) -> str:
    """The steps a pipeline's submit made, first to last."""
    chain = " → ".join(f"#{job_id} {name}" for job_id, name in steps)
    return t(lang, "submit.pipeline", steps=chain)


def cancelled(lang: str, array_id: int, n: int) -> str:
    """What cancelling an array by its number reached."""
    return counted(lang, "array.cancelled", n, id=array_id, n=n)
