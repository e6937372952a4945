"""Feedback on shared cards: a job that slows its neighbour is stopped, queued again and kept
apart from it (issue 31, "Feedback").

At every poll each run on a shared card (a card with two or more open parts) is judged by its
own SM busy % on that card, as its agent sampled it, against its fingerprint, what its earlier
runs showed alone (scheduler/policy/sharing.py: `slowed`). The watcher keeps, per run, since
when it has been slowed. A run slowed for `sharing.feedback_minutes` on end:
- the neighbour it is blamed on is the one that joined the card last (with two jobs a card,
  the default, the other one);
- of the two, the opportunistic job (`opportunistic`: the lower class, else the later to
  join) is asked to stop with the stop "slowed", which queues it again once its host confirms
  the stop, as the idle reclaim's stop does (scheduler/hosts/reconcile.py, REQUEUED_STOPS);
- the pair is recorded (storage/queries/share_apart.py), so the policy never places the two
  on one card again (the snapshot's `Pending.apart_from`);
- both owners are told who slowed whom, by how much, and what paika did (JOB_KEPT_APART
  events through the outbox, in the same transaction as the stop and the pair).

A poll that says nothing of a run (its host silent, no sample, no fingerprint to judge by) or
shows it at its pace starts its window again: only a slowdown seen poll after poll for the
whole window stops anyone.

The windows live in memory only: a scheduler that restarts starts every window again, so a
slowed run then waits `feedback_minutes` more before anything is done. Nothing is lost but
those minutes, and keeping them in the database would cost a write per shared run per poll.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from scheduler.config import PolicyConfig
from scheduler.dispatch import agent_job_id
from scheduler.fingerprints import fingerprint_for
from scheduler.hosts.reconcile import ACTOR
from scheduler.hosts.report import HostReport
from scheduler.notices.events import Event, EventCode, EventKind, record
from scheduler.policy.colocation import Fingerprint
from scheduler.policy.reasons import ReasonCode
from scheduler.policy.sharing import Sharer, opportunistic, slowdown_seen, slowed
from storage.db import session_scope
from storage.models import Allocation, Job, JobState
from storage.models.cluster import WHOLE_CARD
from storage.queries import audit, share_apart
from storage.queries import cluster as cluster_queries
from storage.queries import jobs as job_queries

log = logging.getLogger(__name__)
STOP_REASON = "slowed"  # the stop's name: REQUEUED_STOPS queues the job again
AUDIT_ACTION = "job.share_slowed"

Run = tuple[int, int]  # (job id, attempt)


@dataclass(frozen=True)
class Tenant:
    """A run on a shared card at this poll."""

    job: Job
    allocation: Allocation
    sm_pct: float | None  # its own SM busy % on the card now (None: not sampled)

    @property
    def run(self) -> Run:
        return (self.job.id or 0, self.job.attempts)

    @property
    def sharer(self) -> Sharer:
        return Sharer(self.job.id or 0, self.job.priority, self.allocation.started_at.timestamp())


@dataclass
class Feedback:
    """What one poll's watch did: the jobs asked to stop (the cycle sends the stops) and the
    events it recorded."""

    stops: list[int] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)


class ShareWatch:
    """Keeps, per run on a shared card, since when it has been slowed (see the module)."""

    def __init__(self) -> None:
        self.slowed_since: dict[Run, datetime] = {}
        # A run's fingerprint comes from earlier runs only: it does not change while it runs.
        self._fingerprints: dict[Run, Fingerprint | None] = {}

    def watch(
        self,
        engine: Engine,
        policy: PolicyConfig,
        reports: Mapping[str, HostReport],
        now: datetime,
    ) -> Feedback:
        """Judge every run on a shared card by this poll's samples; stop the opportunistic
        job of each pair whose slowdown has lasted the whole window."""
        found = Feedback()
        with Session(engine) as session:
            cards = _shared_cards(session, reports)
            judged = self._judge(session, policy, cards, now)
        window = timedelta(minutes=policy.sharing.feedback_minutes)
        for gpu_label, tenants in sorted(cards.items()):
            for slowed_one in tenants:
                since = judged.get(slowed_one.run)
                if since is None or now - since < window:
                    continue
                others = [t for t in tenants if t.run != slowed_one.run]
                if not others:
                    continue
                # The one that joined last, after which the card is no longer what it was.
                by = max(others, key=lambda t: (t.allocation.started_at, t.job.id or 0))
                try:
                    self._act(engine, policy, gpu_label, slowed_one, by, now, found)
                except Exception:
                    log.exception(
                        "job #%s: its slowdown on %s was not acted on (next poll again)",
                        slowed_one.job.id,
                        gpu_label,
                        extra={"job_id": slowed_one.job.id},
                    )
                break  # one stop per card and poll: the card changes with it
        return found

    def _judge(
        self,
        session: Session,
        policy: PolicyConfig,
        cards: Mapping[str, list[Tenant]],
        now: datetime,
    ) -> dict[Run, datetime]:
        """Since when each run on a shared card has been slowed, this poll's window kept."""
        knobs = policy.knobs()
        seen: dict[Run, datetime] = {}
        for tenants in cards.values():
            for tenant in tenants:
                fingerprint = self._fingerprint(session, tenant)
                if slowed(tenant.sm_pct, fingerprint, knobs):
                    seen[tenant.run] = self.slowed_since.get(tenant.run, now)
        self.slowed_since = seen  # the rest start their window again
        running = {tenant.run for tenants in cards.values() for tenant in tenants}
        self._fingerprints = {r: f for r, f in self._fingerprints.items() if r in running}
        return seen

    def _fingerprint(self, session: Session, tenant: Tenant) -> Fingerprint | None:
        if tenant.run not in self._fingerprints:
            self._fingerprints[tenant.run] = fingerprint_for(session, tenant.job)
        return self._fingerprints[tenant.run]

    def _act(
        self,
        engine: Engine,
        policy: PolicyConfig,
        card: str,
        slowed_one: Tenant,
        by: Tenant,
        now: datetime,
        found: Feedback,
    ) -> None:
        """Stop the opportunistic job of the pair, keep the two apart, tell both owners; all
        in one transaction, only while the run it stops is still running and not stopping."""
        stop_id = opportunistic(slowed_one.sharer, by.sharer).job_id
        to_stop = slowed_one if stop_id == slowed_one.job.id else by
        fingerprint = self._fingerprints.get(slowed_one.run)
        lost = slowdown_seen(slowed_one.sm_pct, fingerprint) or 0.0
        values: dict[str, Any] = {
            "slowed": slowed_one.job.id,
            "slowed_name": slowed_one.job.name,
            "by": by.job.id,
            "by_name": by.job.name,
            "stopped": stop_id,
            "card": card,
            "sm_pct": round(slowed_one.sm_pct or 0.0, 1),
            "alone_pct": round(fingerprint.gpu_util if fingerprint else 0.0, 1),
            "lost_pct": round(lost * 100, 1),
            "minutes": policy.sharing.feedback_minutes,
        }
        events: list[Event] = []
        with session_scope(engine) as session:
            jobs = {
                t.job.id or 0: job_queries.get_job(session=session, job_id=t.job.id or 0)
                for t in (slowed_one, by)
            }
            stopping = jobs.get(stop_id)
            if (
                stopping is None
                or stopping.state != JobState.RUNNING
                or stopping.stop_requested_at is not None
                or stopping.attempts != to_stop.job.attempts
            ):
                return  # ended, stopping already, or another run by now: nothing to do
            stopping.stop_requested_at, stopping.stop_reason = now, STOP_REASON
            session.add(stopping)
            pair = (slowed_one.job.id or 0, by.job.id or 0)
            code = ReasonCode.SHARE_SLOWED.value
            share_apart.keep_apart(
                session=session, jobs=pair, at=now, reason_code=code, reason_values=values
            )
            audit.record(
                session=session,
                at=now,
                actor=ACTOR,
                action=AUDIT_ACTION,
                target_kind="job",
                target_id=stop_id,
                detail={**values, "attempt": stopping.attempts},
            )
            told: set[str] = set()
            # The stopped job's owner first: one owner of both jobs hears it once.
            for job in sorted(
                (j for j in jobs.values() if j is not None), key=lambda j: j.id != stop_id
            ):
                if job.owner in told:
                    continue
                told.add(job.owner)
                event = Event(
                    EventKind.JOB_KEPT_APART,
                    now,
                    EventCode.SHARE_SLOWED,
                    job.id,
                    name=job.name,
                    owner=job.owner,
                    detail=values,
                )
                events.append(record(session, event))
        for run in (slowed_one.run, by.run):
            self.slowed_since.pop(run, None)
        log.info(
            "job #%s ran %s%% below its pace beside job #%s on %s: job #%s is stopped and queued"
            " again, the two kept apart",
            slowed_one.job.id,
            values["lost_pct"],
            by.job.id,
            card,
            stop_id,
            extra={"job_id": stop_id},
        )
        found.stops.append(stop_id)
        found.events += events


def _shared_cards(session: Session, reports: Mapping[str, HostReport]) -> dict[str, list[Tenant]]:
    """Each card shared now ("host/index") by two or more running jobs not being stopped,
    with their SM busy % at this poll (None where the poll said nothing of it)."""
    parts = [
        (gpu_id, job_id)
        for gpu_id, job_id, milli in cluster_queries.open_parts(session=session)
        if milli < WHOLE_CARD
    ]
    by_gpu: dict[int, list[int]] = {}
    for gpu_id, job_id in parts:
        by_gpu.setdefault(gpu_id, []).append(job_id)
    shared = {gpu_id: jobs for gpu_id, jobs in by_gpu.items() if len(jobs) > 1}
    if not shared:
        return {}
    hosts = {host.id: host.name for host in cluster_queries.all_hosts(session=session)}
    gpus = {gpu.id: gpu for gpu in cluster_queries.all_gpus(session=session) if gpu.id in shared}
    opened = {
        (a.gpu_id, a.job_id): a
        for a in cluster_queries.open_allocations(session=session)
        if a.gpu_id in shared
    }
    samples: dict[tuple[str, str, int], float | None] = {}
    for host, report in reports.items():
        if report.ok:
            for sample in report.samples:
                samples[(host, sample.run, sample.gpu)] = sample.sm_pct
    cards: dict[str, list[Tenant]] = {}
    for gpu_id, job_ids in shared.items():
        gpu = gpus.get(gpu_id)
        if gpu is None:
            continue
        host = hosts.get(gpu.host_id, "?")
        tenants = []
        for job_id in job_ids:
            job = job_queries.get_job(session=session, job_id=job_id)
            # A job on its way off the card (a cancel, a preemption) slows nobody for long.
            if job is None or job.state != JobState.RUNNING or job.stop_requested_at is not None:
                continue
            run = agent_job_id(job_id, job.attempts)
            sm_pct = samples.get((host, run, gpu.index))
            tenants.append(Tenant(job, opened[(gpu_id, job_id)], sm_pct))
        if len(tenants) > 1:
            cards[f"{host}/{gpu.index}"] = tenants
    return cards
