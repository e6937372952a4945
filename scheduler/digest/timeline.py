"""The picture's data: each GPU's last day as stretches (which job, idle, free, down), and
where the waiting jobs should run in the next hours.

Who held a GPU comes from the allocations, exactly; whether it was idle or answering at
all comes from the samples, summed per `BUCKET` in SQL (a day of one-minute samples for
dozens of GPUs never comes back row by row).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlmodel import Session

from scheduler.config import PolicyConfig
from scheduler.digest.model import GpuRow, Planned, Segment, SegmentKind, Timeline
from scheduler.service.board import CardState, CardView
from scheduler.service.jobs import JobView, can_start_next
from storage.models import Gpu, Host, HostState
from storage.queries import cluster as cluster_queries
from storage.queries import digest as digest_queries
from storage.queries.digest import SampleBucket

WINDOW = timedelta(hours=24)
AHEAD = timedelta(hours=6)  # how far the planned runs are drawn
BUCKET = timedelta(minutes=5)
# Every GPU of a cluster paika is meant for gets a row (the picture makes rows thinner
# past a point); beyond this many a row is too thin to read, and the rest are counted in
# a footnote.
MAX_ROWS = 160


def sample_interval(policy: PolicyConfig) -> float:
    """Seconds between two samples of a GPU (`PolicyConfig.sample_period_seconds`)."""
    return policy.sample_period_seconds()


@dataclass(frozen=True)
class _Held:
    start: datetime
    end: datetime
    job_id: int
    name: str


def build_timeline(
    session: Session,
    policy: PolicyConfig,
    now: datetime,
    cards: Mapping[tuple[str, int], CardView],
    waiting: Sequence[JobView],
    expected_ends: Mapping[int, float],
    run_seconds: Mapping[int, float],
) -> Timeline:
    """Every GPU (the first `MAX_ROWS`) from a day ago to now, and planned runs `AHEAD`.

    `cards` is the board's view of each GPU now (by host and index); `expected_ends` the
    end each running job's estimate promises and `run_seconds` each waiting job's
    expected run time, both as the policy computes them (POSIX seconds).
    """
    start = now - WINDOW
    hosts = {host.id: host for host in cluster_queries.all_hosts(session=session)}
    gpus = sorted(
        (gpu for gpu in cluster_queries.all_gpus(session=session) if gpu.host_id in hosts),
        key=lambda gpu: (hosts[gpu.host_id].name, gpu.index),
    )
    shown = gpus[:MAX_ROWS]
    ids = [gpu.id or 0 for gpu in shown]
    buckets: dict[int, dict[int, SampleBucket]] = defaultdict(dict)
    for found in digest_queries.sample_buckets(
        session=session,
        start=start,
        end=now,
        width_seconds=BUCKET.total_seconds(),
        idle_below_pct=policy.reclaim.idle_utilization_pct,
        gpu_ids=ids,
    ):
        buckets[found.gpu_id][found.bucket] = found
    held: dict[int, list[_Held]] = defaultdict(list)
    for allocation, name in digest_queries.allocations_between(
        session=session, start=start, end=now, gpu_ids=ids
    ):
        held[allocation.gpu_id].append(
            _Held(allocation.started_at, allocation.ended_at or now, allocation.job_id, name)
        )
    gap = max(1, math.ceil(2 * sample_interval(policy) / BUCKET.total_seconds() - 1e-9))
    rows = []
    for gpu in shown:
        host = hosts[gpu.host_id]
        card = cards.get((host.name, gpu.index))
        paint = _Painter(start, now, gap)
        on = [job.job_id for job in card.jobs] if card and card.jobs else []
        if card and not on and card.job_id is not None:
            on = [card.job_id]
        # A shared card comes free when the last of its jobs should end.
        ends = [end for job_id in on if (end := expected_ends.get(job_id)) is not None]
        rows.append(
            GpuRow(
                host=host.name,
                index=gpu.index,
                gpu_type=gpu.gpu_type,
                state=card.state.value if card else CardState.FREE.value,
                segments=paint.segments(host, gpu, held[gpu.id or 0], buckets[gpu.id or 0]),
                job_id=card.job_id if card else None,
                expected_end=_moment(max(ends)) if ends else None,
                also=tuple(job_id for job_id in on if card and job_id != card.job_id),
            )
        )
    planned = _plan(rows, waiting, run_seconds, now, now + AHEAD)
    return Timeline(start, now, now + AHEAD, tuple(rows), len(gpus) - len(shown), planned)


def _moment(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


class _Painter:
    """Lays a GPU's layers over each other: free, then jobs, then idle (only where held),
    then down, and reads off the stretches."""

    def __init__(self, start: datetime, now: datetime, gap: int) -> None:
        self.start, self.now, self.gap = start, now, gap
        self.count = math.ceil((now - start) / BUCKET)

    def segments(
        self, host: Host, gpu: Gpu, held: Sequence[_Held], buckets: Mapping[int, SampleBucket]
    ) -> tuple[Segment, ...]:
        begin = max(self.start, host.added_at)
        if begin >= self.now:
            return ()
        held = [h for h in held if h.end > begin and h.start < self.now]
        idle = self._runs(i for i, b in buckets.items() if b.readings and 2 * b.idle > b.readings)
        down = self._down(host, gpu, begin, buckets)
        edges = {begin, self.now}
        for a, b in (*((h.start, h.end) for h in held), *idle, *down):
            edges.update(edge for edge in (a, b) if begin < edge < self.now)
        out: list[Segment] = []
        ordered = sorted(edges)
        for a, b in zip(ordered, ordered[1:], strict=False):
            mid = a + (b - a) / 2
            segment = self._at(mid, a, b, held, idle, down)
            last = out[-1] if out else None
            if last and (last.kind, last.job_id, last.also) == (
                segment.kind,
                segment.job_id,
                segment.also,
            ):
                out[-1] = Segment(last.start, b, last.kind, last.job_id, last.job_name, last.also)
            else:
                out.append(segment)
        return tuple(out)

    @staticmethod
    def _at(
        mid: datetime,
        a: datetime,
        b: datetime,
        held: Sequence[_Held],
        idle: Sequence[tuple[datetime, datetime]],
        down: Sequence[tuple[datetime, datetime]],
    ) -> Segment:
        if any(s <= mid < e for s, e in down):
            return Segment(a, b, SegmentKind.DOWN)
        holders = [h for h in held if h.start <= mid < h.end]
        if not holders:
            return Segment(a, b, SegmentKind.FREE)
        holder = holders[0]
        kind = SegmentKind.IDLE if any(s <= mid < e for s, e in idle) else SegmentKind.JOB
        # A shared card: its other jobs then, each drawn beside the first.
        also = tuple(h.job_id for h in holders[1:] if h.job_id != holder.job_id)
        return Segment(a, b, kind, holder.job_id, holder.name, also)

    def _down(
        self, host: Host, gpu: Gpu, begin: datetime, buckets: Mapping[int, SampleBucket]
    ) -> list[tuple[datetime, datetime]]:
        """Stretches without a reading: runs of at least `gap` empty buckets while the host
        was registered. A GPU with no sample at all in the window is down only if it is down
        now (the cycle may simply not have sampled yet, as on a fresh install)."""
        if not buckets:
            if host.state == HostState.DOWN:
                since = host.state_since or begin
            elif not gpu.healthy:
                since = gpu.last_seen_at or begin
            else:
                return []
            return [(max(begin, since), self.now)] if since < self.now else []
        first = self._index(begin)
        empty = [i for i in range(first, self.count) if i not in buckets]
        runs = []
        for a, b in self._runs(empty):
            if (b - a) / BUCKET >= self.gap - 1e-9:
                runs.append((max(a, begin), b))
        return runs

    def _index(self, moment: datetime) -> int:
        return max(0, min(self.count, int((moment - self.start) / BUCKET)))

    def _runs(self, indexes: Iterable[int]) -> list[tuple[datetime, datetime]]:
        """Consecutive bucket indexes as time stretches, ending at now at the latest."""
        runs: list[list[int]] = []
        for i in sorted(max(0, min(self.count - 1, i)) for i in indexes):
            if runs and i <= runs[-1][1] + 1:
                runs[-1][1] = max(runs[-1][1], i)
            else:
                runs.append([i, i])
        return [
            (self.start + a * BUCKET, min(self.now, self.start + (b + 1) * BUCKET)) for a, b in runs
        ]


def _plan(
    rows: Sequence[GpuRow],
    waiting: Sequence[JobView],
    run_seconds: Mapping[int, float],
    now: datetime,
    until: datetime,
) -> tuple[Planned, ...]:
    """Waiting jobs that can start next whose ETA falls before `until`, each put on the shown GPUs of its type
    that come free first, on one host where one has enough (as the policy places jobs).

    The policy estimates when, not where; the rows are a likely place, drawn so that a
    reader sees which cards the queue is waiting for.
    """
    free_from: dict[int, datetime | None] = {}
    for i, row in enumerate(rows):
        if row.state in (CardState.FREE, CardState.BUSY, CardState.IDLE_HELD):
            end = row.expected_end if row.job_id is not None else now
            free_from[i] = max(now, end or now)
        else:
            free_from[i] = None
    # The jobs "next up" names (the board's rule), in the order it names them: a job its
    # data, its quota or the hosts hold back is not drawn as if it would start.
    due = sorted(
        (v for v in waiting if can_start_next(v) and v.wait and v.wait.gpu_type),
        key=lambda v: (v.wait.eta or 0.0, v.wait.position) if v.wait else (0.0, 0),
    )
    planned = []
    for view in due:
        wait, job = view.wait, view.job
        assert wait is not None and wait.eta is not None and wait.gpu_type is not None
        begin = max(now, datetime.fromtimestamp(wait.eta, UTC))
        if begin >= until:
            continue
        end = begin + timedelta(seconds=run_seconds.get(job.id or 0, 3600.0))
        chosen = _rows_for(rows, free_from, wait.gpu_type, job.gpus)
        for i in chosen:
            free_from[i] = end
        planned.append(
            Planned(
                job.id or 0,
                job.name,
                job.priority,
                wait.gpu_type,
                job.gpus,
                begin,
                end,
                chosen,
            )
        )
    return tuple(planned)


def _rows_for(
    rows: Sequence[GpuRow], free_from: Mapping[int, datetime | None], gpu_type: str, gpus: int
) -> tuple[int, ...]:
    by_host: dict[str, list[tuple[datetime, int]]] = defaultdict(list)
    for i, row in enumerate(rows):
        moment = free_from.get(i)
        if row.gpu_type == gpu_type and moment is not None:
            by_host[row.host].append((moment, i))
    whole = [
        (sorted(found)[gpus - 1][0], host, sorted(found)[:gpus])
        for host, found in by_host.items()
        if len(found) >= gpus
    ]
    if whole:
        _, _, best = min(whole, key=lambda item: (item[0], item[1]))
        return tuple(sorted(i for _, i in best))
    # No shown host has enough of the type (more are beyond the rows shown): draw it on
    # the ones that come free first.
    every = sorted(found for found_on_host in by_host.values() for found in found_on_host)
    return tuple(sorted(i for _, i in every[:gpus]))
