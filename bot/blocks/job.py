"""How one job is shown in every builder: its needs, data, wait and a one-line summary."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from bot.blocks.common import mention, mrkdwn_escape
from bot.i18n import eta, t, term, wait_words, when
from bot.notice_words import preempt_reason
from scheduler.door import CardUse, JobRecord, JobView, PreemptedRecord, Wait


def ref(job_id: int | None, name: str) -> str:
    """A job as people name it: bold id, then its escaped name."""
    return f"*#{job_id}* {mrkdwn_escape(name)}"


def priority(lang: str, value: str) -> str:
    return term(lang, "priority", value)


def state(lang: str, value: str) -> str:
    return term(lang, "state", value)


def gpu_hours(lang: str, value: float) -> str:
    return t(lang, "unit.gpu_hours", n=value)


def needs(lang: str, job: JobRecord) -> str:
    """What the job asks of the cluster: "2×GPU A100-80GB ≥40 GiB"."""
    parts = [t(lang, "needs.gpus", n=job.gpus)]
    if job.gpu_types:
        parts.append("/".join(mrkdwn_escape(name) for name in job.gpu_types))
    if job.shares_card:  # its memory is what it uses, beside another job's
        parts.append(t(lang, "needs.shared", gib=job.min_memory_gib or 0))
    elif job.min_memory_gib:
        parts.append(t(lang, "needs.memory", gib=job.min_memory_gib))
    if job.min_speed:
        parts.append(t(lang, "needs.speed", speed=job.min_speed))
    return " ".join(parts)


def data(lang: str, job: JobRecord) -> str:
    """Whether its data is ready, and where it is."""
    words = t(lang, "data.ready" if job.data_ready else "data.not_ready")
    if job.data_location:
        location = mrkdwn_escape(job.data_location)
        return t(lang, "data.with_location", state=words, location=location)
    return words


def why_and_when(lang: str, wait: Wait, zone: ZoneInfo, now: datetime) -> str:
    """Why it waits, then its estimated start when there is one: one line for listings."""
    moment = now.timestamp()
    text = mrkdwn_escape(wait_words(lang, wait, moment))
    if wait.eta is not None:
        text += " · " + t(lang, "label.eta_inline", eta=eta(lang, wait.eta, zone, moment))
    return text


def wait_detail(lang: str, wait: Wait, zone: ZoneInfo, now: datetime) -> str:
    """Place, reason and ETA on their own lines, for a reply about one job."""
    moment = now.timestamp()
    return "\n".join(
        (
            labelled_inline(lang, t(lang, "label.place"), str(wait.position)),
            labelled_inline(
                lang, t(lang, "label.why"), mrkdwn_escape(wait_words(lang, wait, moment))
            ),
            labelled_inline(lang, t(lang, "label.eta"), eta(lang, wait.eta, zone, moment)),
        )
    )


def labelled_inline(lang: str, label: str, value: str) -> str:
    """A bold label and its value on one line: "*Reason:* …"."""
    return t(lang, "label.with_value", label=label, value=value)


def waiting_line(lang: str, view: JobView, zone: ZoneInfo, now: datetime) -> str:
    """A waiting job in a queue listing: place, job, team, class, needs, estimate — why, ETA."""
    job, wait = view.job, view.wait
    place = f"{wait.position}." if wait else "-"
    why = why_and_when(lang, wait, zone, now) if wait else state(lang, job.state)
    return (
        f"{place} {ref(job.id, job.name)} · {mrkdwn_escape(view.team)} · {priority(lang, job.priority)}"
        f" · {needs(lang, job)} · {gpu_hours(lang, job.est_gpu_hours)} — {why}"
    )


def running_line(lang: str, view: JobView, zone: ZoneInfo) -> str:
    """A running job in a listing: job, team, class, needs, owner, since when."""
    job = view.job
    return (
        f"{ref(job.id, job.name)} · {mrkdwn_escape(view.team)} · {priority(lang, job.priority)}"
        f" · {needs(lang, job)} · {mention(job.owner)} · "
        + t(lang, "queue.since", at=when(lang, job.started_at, zone))
    )


def own_line(lang: str, view: JobView, zone: ZoneInfo, now: datetime) -> str:
    """One of the user's own jobs (App Home): job, state, then why it waits or since when."""
    job = view.job
    head = f"{ref(job.id, job.name)} · {state(lang, job.state)} · {priority(lang, job.priority)} · {needs(lang, job)}"
    if view.wait is not None:
        place = t(lang, "home.place", n=view.wait.position)
        return f"{head}\n      {place} — {why_and_when(lang, view.wait, zone, now)}"
    if job.started_at is not None:
        return f"{head} · " + t(lang, "queue.since", at=when(lang, job.started_at, zone))
    return head


def whole_card_line(lang: str, job: JobRecord) -> str | None:
    """For a job that asked to share a card and is core work now (a bump): it takes a
    whole card from here on; None for any other job."""
    return t(lang, "bump.whole_card") if job.share and not job.shares_card else None


def card_use_line(lang: str, use: CardUse) -> str:
    """How the job's earlier runs used a card alone: what sharing a card is decided by."""
    pcie = (
        t(
            lang,
            "status.card_use.pcie",
            mbps=use.pcie_mbps,
            pressure=term(lang, "pressure", use.pcie),
        )
        if use.pcie_mbps is not None and use.pcie is not None
        else ""
    )
    return t(
        lang,
        "status.card_use",
        sm=use.sm_pct,
        bandwidth=use.bandwidth_pct,
        pressure=term(lang, "pressure", use.bandwidth),
        memory=use.memory_gib,
        pcie=pcie,
    )


def preempted_line(lang: str, preempted: PreemptedRecord) -> str:
    """How often the job was preempted, what that lost, and why the last time."""
    for_job = preempted.for_job if preempted.for_job is not None else "?"
    reason = preempt_reason(lang, preempted.code, for_job)
    key = "status.preempted.once" if preempted.times == 1 else "status.preempted"
    return t(lang, key, times=preempted.times, lost=preempted.lost_gpu_hours, reason=reason)
