"""Match review: the GPU type a job was put on, what else was weighed, and what the run
would have cost on the cheapest and on the fastest adequate type.

The comparison assumes the run scales with the catalogue's speeds: the work done is its
GPU-hours × the speed of the type it ran on (reference-card hours); on another type the same
work takes work ÷ that type's speed GPU-hours, at that type's price. "Adequate" is the
policy's own fit check (scheduler.policy.matching), on the job's needs.

Anyone may look: the ledger is public on this cluster, as `/gpu report` is, and a choice
of card is what the queue rules are argued about.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from scheduler.fingerprints import CardUse, card_use
from scheduler.policy.matching import CardType, fitting_types
from scheduler.policy.reasons import Reason, reason_of
from scheduler.service.context import Context
from scheduler.service.lookup import job_by_ref, team_by_name
from scheduler.snapshots import card_needs
from storage.models import Job, LedgerEntry
from storage.queries import accounting
from storage.queries import matches as match_queries
from storage.queries import org as org_queries
from storage.queries.accounting import Charge, JobFacts, JobFilter

# Below this a difference in cost is rounding, not a costlier choice.
CENT = 0.005
DEFAULT_LIMIT = 10


@dataclass(frozen=True)
class Weighed:
    """One GPU type weighed at the match, and the verdict on it (the policy's words)."""

    gpu_type: str
    price_per_gpu_hour: float
    verdict: str
    wait_minutes: float | None = None  # how long a cheaper type would have kept it waiting
    verdict_why: Reason | None = None  # the verdict as a code (None: shown as stored)


@dataclass(frozen=True)
class Costed:
    """The run's work on one GPU type: GPU-hours and cost."""

    gpu_type: str
    gpu_hours: float
    cost: float


@dataclass(frozen=True)
class MatchReview:
    """`/gpu match <job>`."""

    job_id: int
    name: str
    owner: str
    team: str
    state: str
    matched_at: datetime | None  # None: never started, so never matched
    chosen: str | None
    reason: str | None  # the policy's reason for the choice, as recorded
    weighed: tuple[Weighed, ...]
    ran: tuple[Costed, ...]  # what the run really cost, by the type it ran on
    cheapest: Costed | None  # the same work on the cheapest adequate type
    fastest: Costed | None  # … and on the fastest adequate type
    attempts: int = 0  # how many times it was matched (started)
    reason_why: Reason | None = None  # `reason` as a code and its values (None: as stored)
    # How its earlier runs used a card alone (None: none sampled yet): what sharing weighs.
    card_use: CardUse | None = None

    @property
    def cost(self) -> float:
        return sum(part.cost for part in self.ran)

    @property
    def extra_cost(self) -> float:
        """What the run cost beyond the cheapest adequate type (0 when it ran on it)."""
        if self.cheapest is None:
            return 0.0
        extra = self.cost - self.cheapest.cost
        return extra if extra > CENT else 0.0

    @property
    def wait_saved_minutes(self) -> float | None:
        """How long the cheapest adequate type would have kept it waiting, when recorded."""
        if self.cheapest is None:
            return None
        return next(
            (w.wait_minutes for w in self.weighed if w.gpu_type == self.cheapest.gpu_type),
            None,
        )


@dataclass(frozen=True)
class CostlierRun:
    """One run of the period on a costlier type than the cheapest adequate one."""

    job_id: int
    name: str
    owner: str
    team: str
    ran_on: str  # the type(s) it ran on in the period
    gpu_hours: float
    cost: float
    cheapest: Costed
    extra_cost: float
    wait_saved_minutes: float | None


@dataclass(frozen=True)
class MatchesReport:
    """`/gpu report matches`: the costliest choices of the period, most extra cost first."""

    start: datetime
    end: datetime
    team: str | None
    runs: tuple[CostlierRun, ...]
    total_extra: float  # over every costlier run of the period, not only those listed
    count: int  # how many runs cost more than they had to


def review(ctx: Context, job_id: int | None, name: str | None) -> MatchReview:
    """The match of one job and, once it has run, its cost against the alternatives."""
    job = job_by_ref(ctx, job_id, name)
    found = match_queries.matches_of_job(session=ctx.session, job_id=job.id or 0)
    latest = found[-1] if found else None
    entries = accounting.ledger_of_job(session=ctx.session, job_id=job.id or 0)
    spent = _by_type((entry.gpu_type, entry.gpu_hours, entry.cost) for entry in entries)
    catalog = ctx.policy.catalog()
    cheapest, fastest = _alternatives(catalog, job, _work(catalog, spent))
    return MatchReview(
        job_id=job.id or 0,
        name=job.name,
        owner=job.owner,
        team=_team_name(ctx, job.team_id),
        state=job.state,
        matched_at=latest.at if latest else None,
        chosen=latest.chosen_type if latest else None,
        reason=latest.reason if latest else None,
        weighed=_weighed(latest.alternatives if latest else None),
        ran=tuple(spent),
        cheapest=cheapest if spent else None,
        fastest=fastest if spent else None,
        attempts=len(found),
        reason_why=reason_of(latest.reason_code, latest.reason_values) if latest else None,
        card_use=card_use(ctx.session, job),
    )


def costliest(
    ctx: Context, team: str | None, start: datetime, end: datetime, limit: int
) -> MatchesReport:
    """Runs of the period whose type cost more than the cheapest adequate one would have
    for the same work (ledger entries that cross the period's edges count for their share)."""
    found = team_by_name(ctx, team) if team is not None else None
    rows = accounting.charges_between(
        session=ctx.session,
        start=start,
        end=end,
        jobs=JobFilter(team_id=found.id if found else None),
    )
    charges: dict[int, list[tuple[str, float, float]]] = defaultdict(list)
    for entry in rows:
        share = _entry_share(entry, start, end)
        charges[entry.job_id].append((entry.gpu_type, entry.gpu_hours * share, entry.cost * share))
    jobs = accounting.job_facts(session=ctx.session, job_ids=list(charges))
    catalog = ctx.policy.catalog()
    teams = _team_names(ctx)
    runs = []
    for job_id, job in jobs.items():
        spent = _by_type(charges[job_id])
        cheapest, _ = _alternatives(catalog, job, _work(catalog, spent))
        cost = sum(part.cost for part in spent)
        if cheapest is None or cost - cheapest.cost <= CENT:
            continue
        runs.append(
            CostlierRun(
                job_id=job_id,
                name=job.name,
                owner=job.owner,
                team=teams.get(job.team_id, f"team {job.team_id}"),
                ran_on=", ".join(part.gpu_type for part in spent),
                gpu_hours=sum(part.gpu_hours for part in spent),
                cost=cost,
                cheapest=cheapest,
                extra_cost=cost - cheapest.cost,
                wait_saved_minutes=None,
            )
        )
    runs.sort(key=lambda run: (-run.extra_cost, run.job_id))
    # Only the runs listed show the wait their choice saved: only their matches are read.
    shown = runs[:limit]
    weighed = match_queries.latest_alternatives(
        session=ctx.session, job_ids=[run.job_id for run in shown]
    )
    return MatchesReport(
        start=start,
        end=end,
        team=found.name if found else None,
        runs=tuple(
            replace(
                run,
                wait_saved_minutes=next(
                    (
                        w.wait_minutes
                        for w in _weighed(weighed.get(run.job_id))
                        if w.gpu_type == run.cheapest.gpu_type
                    ),
                    None,
                ),
            )
            for run in shown
        ),
        total_extra=sum(run.extra_cost for run in runs),
        count=len(runs),
    )


def _entry_share(entry: LedgerEntry | Charge, start: datetime, end: datetime) -> float:
    """The part of the entry inside [start, end) (all of it for an instant inside, or for
    a sum of entries wholly inside), as `/gpu report` counts it."""
    if entry.started_at is None or entry.ended_at is None:
        return 1.0
    length = (entry.ended_at - entry.started_at).total_seconds()
    if length <= 0:
        return 1.0
    inside = (min(entry.ended_at, end) - max(entry.started_at, start)).total_seconds()
    return max(0.0, min(1.0, inside / length))


def _by_type(charges: Iterable[tuple[str, float, float]]) -> list[Costed]:
    """GPU-hours and cost summed by the type they were spent on."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for gpu_type, hours, cost in charges:
        sums[gpu_type][0] += hours
        sums[gpu_type][1] += cost
    return [Costed(gpu_type, hours, cost) for gpu_type, (hours, cost) in sums.items()]


def _work(catalog: Sequence[CardType], spent: Sequence[Costed]) -> float:
    """The run's work in reference-card GPU-hours (a type the catalogue no longer has
    counts at the reference speed)."""
    speeds = {card.name: card.speed for card in catalog}
    return sum(part.gpu_hours * speeds.get(part.gpu_type, 1.0) for part in spent)


def _alternatives(
    catalog: Sequence[CardType], job: Job | JobFacts, work: float
) -> tuple[Costed | None, Costed | None]:
    """The same work on the cheapest and on the fastest adequate type."""
    adequate = fitting_types(catalog, card_needs(job))  # cheapest first
    if not adequate:
        return None, None
    fastest = max(adequate, key=lambda card: (card.speed, -card.price_per_gpu_hour))
    return _on(adequate[0], work), _on(fastest, work)


def _on(card: CardType, work: float) -> Costed:
    hours = work / card.speed
    return Costed(card.name, hours, hours * card.price_per_gpu_hour)


def _weighed(alternatives: Sequence[Mapping[str, Any]] | None) -> tuple[Weighed, ...]:
    """The alternatives as the match recorded them (older matches have no waits)."""
    weighed = []
    for alternative in alternatives or ():
        wait = alternative.get("wait_s")
        weighed.append(
            Weighed(
                str(alternative.get("gpu_type", "?")),
                float(alternative.get("price_per_gpu_hour") or 0.0),
                str(alternative.get("verdict", "")),
                float(wait) / 60 if wait is not None else None,
                reason_of(alternative.get("verdict_code"), alternative.get("verdict_values")),
            )
        )
    return tuple(weighed)


def _team_names(ctx: Context) -> dict[int, str]:
    return {
        team.id: team.name
        for team in org_queries.all_teams(session=ctx.session)
        if team.id is not None
    }


def _team_name(ctx: Context, team_id: int) -> str:
    team = org_queries.team_by_id(session=ctx.session, team_id=team_id)
    return team.name if team else f"team {team_id}"
