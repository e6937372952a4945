"""Every notice of the outbox as one plain sentence, from the catalogue, in a reader's language.

The scheduler stores a notice as its kind and the values it names; this says it. The console
prints the sentence, and Slack shows it as the notification text (and, for job and host
events, as the line under the title), so the two faces cannot drift apart in their words.
A notice an older paika stored with its English sentence is said as stored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import date
from typing import Any

from bot.i18n import amount, counted, day, has, refusal_words, t, term
from bot.reason_words import reason_words
from scheduler.door import (
    EVENT_KINDS,
    Announcement,
    Digest,
    Event,
    EventCode,
    NoticeKind,
    event_of,
    reason_of,
)

Sentence = Callable[[str, Announcement], str]

# How many of the jobs a quota alert would cut off its sentence names.
CUT_OFF_NAMED = 5


def preempt_reason(lang: str, code: object, for_job: object) -> str:
    """Why a job was preempted ("for core job #57"), from its PreemptCode value; a code the
    catalogue does not know is shown as it is."""
    key = f"notice.event.preempt_for.{code}"
    return t(lang, key, for_job=for_job) if has(key) else str(code or "?")


def notification(digest: Digest, lang: str) -> str:
    """The message's text: what a notification or a screen reader says."""
    return t(
        lang,
        "digest.notification",
        day=day(lang, digest.day),
        free=digest.free_gpus,
        total=amount(lang, "count.gpus", digest.total_gpus),
        running=amount(lang, "count.jobs", digest.running),
        waiting=digest.waiting,
        data=digest.waiting_for_data,
    )


def sentence(lang: str, notice: Announcement) -> str:
    """The notice said in `lang`: from its values, or as an older paika stored it."""
    if notice.legacy_text:
        return notice.legacy_text
    say = SENTENCES.get(notice.kind)
    return say(lang, notice) if say is not None else notice.kind


def users(user_ids: Sequence[str]) -> str:
    """Slack users as mentions, as the console shows whom a notice is for."""
    return ", ".join(f"<@{user}>" for user in user_ids)


# ---------------------------------------------------------------- job and host events


def event_sentence(lang: str, event: Event) -> str:
    """What happened to a job or host, in `lang`."""
    values: dict[str, Any] = {
        "id": event.job_id if event.job_id is not None else "?",
        "name": event.name or "",
        "host": event.host or "?",
        **event.detail,
    }
    code = event.code or EventCode.FINISHED
    key = f"notice.event.{code.value}"
    extra = _EVENT_VALUES.get(code)
    if extra is not None:
        values.update(extra(lang, values))
    if code in _PREEMPTED and "preempt" in values:  # a preemption that says why and for whom
        values.update(_preempted(lang, values))
        key = _PREEMPTED[code]
    return t(lang, key, **values)


# Preemption notices that name their reason, the run stopped and where it resumes from.
_PREEMPTED = {
    EventCode.PREEMPT_ASKED: "notice.event.preempt_asked_resumes",
    EventCode.STOPPED_REQUEUED: "notice.event.stopped_preempted",
}


def _preempted(lang: str, values: Mapping[str, Any]) -> dict[str, object]:
    reason = preempt_reason(lang, values.get("preempt"), values.get("for_job", "?"))
    hosts = ", ".join(str(host) for host in values.get("hosts") or ()) or "?"
    place = values.get("resumes")
    resumes = (
        t(lang, "notice.event.resumes.place", place=place)
        if place
        else t(lang, "notice.event.resumes.host", hosts=hosts)
        if values.get("hosts")
        else t(lang, "notice.event.resumes.none")
    )
    return {
        "reason": reason,
        "resumes": resumes,
        "attempt": values.get("attempt", "?"),
        "minutes": float(values.get("minutes") or 0),
        "lost": float(values.get("lost_gpu_hours") or 0),
    }


def _where(lang: str, values: Mapping[str, Any]) -> dict[str, object]:
    hosts = ", ".join(str(host) for host in values.get("hosts") or ()) or "?"
    if values.get("gpu_type"):
        hosts = t(
            lang,
            "notice.event.where_cards",
            hosts=hosts,
            gpus=values.get("gpus", "?"),
            gpu_type=values["gpu_type"],
        )
    return {"where": hosts}


def _lost_why(lang: str, values: Mapping[str, Any]) -> dict[str, object]:
    why = str(values.get("why"))
    key = f"notice.event.why.{why}"
    hours = float(values.get("hours") or 0)
    minutes = float(values.get("minutes") or 0)
    # Slurm's own words for why it held a run pending, where it said any.
    said = values.get("reason")
    reason = t(lang, "notice.event.pending_reason", reason=said) if said else ""
    return {"why": t(lang, key, hours=hours, minutes=minutes, reason=reason) if has(key) else why}


def _stop(lang: str, values: Mapping[str, Any]) -> dict[str, object]:
    stop = str(values.get("stop"))
    key = f"notice.event.stop.{stop}"
    return {"why": t(lang, key) if has(key) else stop}


def _dispatch_problem(lang: str, values: Mapping[str, Any]) -> dict[str, object]:
    """A refused or failed start with a code (the Slurm executor's) said in the reader's
    words; without one, the host's own words as they came."""
    key = f"notice.event.dispatch.{values.get('dispatch')}"
    return {"problem": t(lang, key)} if values.get("dispatch") and has(key) else {}


def _killed_how(lang: str, values: Mapping[str, Any]) -> dict[str, object]:
    """How a killed run ended: on its host, or as its executor (Slurm) says it ended it."""
    ended_by = values.get("ended_by")
    if not ended_by:
        return {"how": t(lang, "notice.event.killed_how.host")}
    key = f"notice.event.killed_how.{ended_by}"
    if has(key):
        return {"how": t(lang, key)}
    return {"how": t(lang, "notice.event.killed_how.other", state=str(ended_by).upper())}


def _refusal(lang: str, values: Mapping[str, Any]) -> dict[str, object]:
    """Why a host refuses a job's start for good, and what to do about it, in `lang`."""
    return {"refusal": refusal_words(lang, values.get("refusal"), values.get("host"), values)}


_EVENT_VALUES: Mapping[EventCode, Callable[[str, Mapping[str, Any]], dict[str, object]]] = {
    EventCode.START_HELD: _refusal,
    EventCode.UNSETTLED_ENDED: lambda lang, v: {"state": term(lang, "state", str(v["state"]))},
    EventCode.START_REFUSED: _dispatch_problem,
    EventCode.START_FAILED: _dispatch_problem,
    EventCode.STARTED: _where,
    EventCode.KILLED: _killed_how,
    EventCode.LOST: _lost_why,
    EventCode.LOST_REQUEUED: _lost_why,
    EventCode.STOPPED_REQUEUED: _stop,
    EventCode.STOPPED: _stop,
    EventCode.STOPPED_UNSTARTED: lambda lang, v: {"state": term(lang, "state", str(v["state"]))},
}


def _event(lang: str, notice: Announcement) -> str:
    return event_sentence(lang, event_of(notice))


# ---------------------------------------------------------------- bump requests


def _bump_values(lang: str, info: Mapping[str, Any]) -> dict[str, object]:
    return {
        "request": info.get("request_id"),
        "id": info.get("job_id"),
        "name": info.get("name", ""),
        "source": term(lang, "priority", str(info.get("from_priority"))),
        "target": term(lang, "priority", str(info.get("to_priority"))),
        "reason": info.get("reason") or "",
    }


def _bump_request(lang: str, notice: Announcement) -> str:
    info = notice.detail
    user = users([str(info.get("requested_by"))])
    return t(lang, "notice.bump.request", user=user, **_bump_values(lang, info))


def _bump_decided(lang: str, notice: Announcement) -> str:
    info = notice.detail
    values = _bump_values(lang, info)
    values.update(
        user=users([str(info.get("decided_by"))]),
        state=term(lang, "bump_state", str(info.get("state"))),
        reason=reason_words(
            lang,
            reason_of(info.get("decision_reason_code"), info.get("decision_reason_values")),
            info.get("decision_reason"),
        ),
    )
    key = "notice.bump.decided_reason" if values["reason"] else "notice.bump.decided"
    return t(lang, key, **values)


# ---------------------------------------------------------------- alerts


def _quota(lang: str, notice: Announcement) -> str:
    info = notice.detail
    if "covered_by" in info:
        return t(lang, "notice.quota.covered", id=info.get("quota_id"), by=info["covered_by"])
    quota = t(
        lang,
        "notice.quota.name",
        id=info.get("quota_id"),
        team=info.get("team", "?"),
        gpu_type=info.get("gpu_type") or t(lang, "quota.any_type"),
    )
    left = t(
        lang,
        "notice.quota.left",
        left=float(info.get("left_hours", 0)),
        total=float(info.get("gpu_hours", 0)),
    )
    on = _day(lang, info.get("expires_on"))
    if notice.kind == NoticeKind.QUOTA_EXPIRY:
        when = _days_left(lang, int(info.get("days_left", 0)))
        text = t(lang, "notice.quota.expiry", quota=quota, day=on, when=when, left=left)
    else:
        pct = float(info.get("used_pct", 0))
        text = t(lang, "notice.quota.used", quota=quota, pct=pct, left=left, day=on)
    return text + _cut_off(lang, info)


def _days_left(lang: str, days: int) -> str:
    if days <= 0:
        return t(lang, "alert.quota_expiry.today")
    if days == 1:
        return t(lang, "alert.quota_expiry.tomorrow")
    return t(lang, "alert.quota_expiry.in_days", n=days)


def _cut_off(lang: str, info: Mapping[str, Any]) -> str:
    jobs: Sequence[Mapping[str, Any]] = info.get("jobs") or []
    if not jobs:
        return ""
    named = ", ".join(f"#{job.get('id')} {job.get('name', '?')}" for job in jobs[:CUT_OFF_NAMED])
    more = len(jobs) - CUT_OFF_NAMED + int(info.get("jobs_more", 0))
    if more > 0:
        return t(lang, "notice.quota.cut_off_more", jobs=named, n=more)
    return t(lang, "notice.quota.cut_off", jobs=named)


def _idle_ask(lang: str, notice: Announcement) -> str:
    info = notice.detail
    action = str(info.get("action"))
    then_key = f"notice.idle.then.{action}"
    text = t(
        lang,
        "notice.idle.ask",
        id=info.get("job_id"),
        name=info.get("name", "?"),
        gpus=info.get("gpus", "?"),
        gpu_type=info.get("gpu_type", "?"),
        hosts=", ".join(str(host) for host in info.get("hosts") or ()) or "?",
        pct=float(info.get("idle_pct", 0)),
        minutes=float(info.get("idle_minutes", 0)),
        grace=float(info.get("grace_minutes", 0)),
        then=t(lang, then_key if has(then_key) else "notice.idle.then.keep"),
    )
    beside = info.get("shared_with") or ()
    if not beside:
        return text
    jobs = ", ".join(f"#{job.get('job_id')} <@{job.get('owner')}>" for job in beside)
    return t(lang, "notice.idle.shared", text=text, jobs=jobs)


def _overrun(lang: str, notice: Announcement) -> str:
    info = notice.detail
    return t(
        lang,
        "notice.overrun",
        id=info.get("job_id"),
        name=info.get("name", "?"),
        elapsed=float(info.get("elapsed_hours") or 0),
        estimate=float(info.get("estimate_hours") or 0),
        hours=float(info.get("extend_to_hours") or 0),
    )


def _array_ended(lang: str, notice: Announcement) -> str:
    info = notice.detail
    failed = [str(ref) for ref in info.get("failed_jobs") or ()]
    return t(
        lang,
        "notice.array_ended",
        id=info.get("array_id"),
        name=info.get("name", "?"),
        size=int(info.get("size") or 0),
        succeeded=int(info.get("succeeded") or 0),
        failed=int(info.get("failed") or 0),
        cancelled=int(info.get("cancelled") or 0),
        failed_jobs=t(lang, "notice.array_failed_jobs", jobs=", ".join(failed)) if failed else "",
    )


def _held(lang: str, notice: Announcement) -> str:
    info = notice.detail
    return t(
        lang,
        "notice.held",
        id=info.get("job_id"),
        name=info.get("name", "?"),
        upstream=info.get("upstream"),
        upstream_name=info.get("upstream_name", "?"),
        state=term(lang, "state", str(info.get("upstream_state", "failed"))),
    )


def _maintenance(lang: str, notice: Announcement) -> str:
    info = notice.detail
    lead = "hour" if info.get("lead") == "hour" else "day"
    key = f"notice.maintenance.{lead}" + (".resumes" if info.get("preemptible") else "")
    return t(
        lang,
        key,
        id=info.get("job_id"),
        name=info.get("name", "?"),
        host=info.get("host", "?"),
        starts=info.get("starts", "?"),
        ends=info.get("ends", "?"),
        reason=info.get("reason", ""),
    )


def _reclaimed(lang: str, notice: Announcement) -> str:
    info = notice.detail
    by = info.get("by")
    if by:
        why = t(lang, "notice.reclaim.by", user=users([str(by)]))
    else:
        why = t(lang, "notice.reclaim.no_answer", minutes=float(info.get("grace_minutes", 0)))
    requeued = info.get("action") == "requeue"
    return t(
        lang,
        "notice.reclaim",
        id=info.get("job_id"),
        name=info.get("name", "?"),
        minutes=float(info.get("idle_minutes", 0)),
        why=why,
        outcome=t(lang, "notice.reclaim.requeue" if requeued else "notice.reclaim.release"),
    )


def _digest(lang: str, notice: Announcement) -> str:
    # The same line Slack's digest message carries as its notification text.
    return notification(Digest.from_json(notice.detail), lang)


def _day(lang: str, value: object) -> str:
    return day(lang, date.fromisoformat(value)) if isinstance(value, str) else "?"


# ---------------------------------------------------------------- the object store


def _store(lang: str, notice: Announcement) -> str:
    info = notice.detail
    dropped = {str(kind): int(n) for kind, n in (info.get("dropped") or {}).items() if n}
    values = {
        "where": info.get("where", "?"),
        "minutes": int(info.get("minutes") or 0),
        "error": info.get("error") or "?",
        "waiting": int(info.get("waiting") or 0),
    }
    text = counted(lang, f"notice.{notice.kind}", values["waiting"], **values)
    if dropped:
        n = sum(dropped.values())
        text += counted(lang, "notice.store_dropped", n, n=n)
    return text


SENTENCES: Mapping[str, Sentence] = {
    **{kind.value: _event for kind in EVENT_KINDS},
    NoticeKind.BUMP_REQUEST: _bump_request,
    NoticeKind.BUMP_DECIDED: _bump_decided,
    NoticeKind.QUOTA_EXPIRY: _quota,
    NoticeKind.QUOTA_USED: _quota,
    NoticeKind.GPUS_IDLE: _idle_ask,
    NoticeKind.GPUS_RECLAIMED: _reclaimed,
    NoticeKind.JOB_OVERRUN: _overrun,
    NoticeKind.JOB_UPSTREAM_FAILED: _held,
    NoticeKind.MAINTENANCE_AHEAD: _maintenance,
    NoticeKind.ARRAY_ENDED: _array_ended,
    NoticeKind.DIGEST: _digest,
    NoticeKind.STORE_DOWN: _store,
    NoticeKind.STORE_BACK: _store,
}
