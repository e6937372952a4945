"""The policy's stated invariants, over generated clusters and queues (hypothesis).

- the pass is deterministic, and decides the same whether or not it is asked for reasons;
- a job whose data is not ready never gets GPUs;
- a core job never waits behind a startable normal one: lower classes never change which core
  jobs start;
- no job waits past the backstop: a job past `starve_after_hours` is ordered ahead of every job
  of its class that is not, and starving jobs go in submit order;
- preemption stops only idle-class or declared jobs, never core work, never past the cap,
  never within the minimum run time, and starts are never placed on GPUs already held.
"""

from __future__ import annotations

from dataclasses import replace

from builders import CATALOG, NOW
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.policy.matching import CardNeeds
from scheduler.policy.ranking import ordered
from scheduler.policy.scheduler import schedule
from scheduler.policy.snapshot import HOUR, Gpu, Host, Knobs, Pending, Running, Snapshot

CLASSES = ("core", "normal", "idle")


@st.composite
def clusters(draw: st.DrawFn) -> Snapshot:
    """Hosts of one or two types, some GPUs held by running jobs, and a queue."""
    types = draw(st.lists(st.sampled_from([c.name for c in CATALOG]), min_size=1, max_size=2))
    hosts: list[Host] = []
    gpu_id = 1
    for index in range(draw(st.integers(1, 4))):
        gpu_type = types[index % len(types)]
        memory = next(c.memory_gib for c in CATALOG if c.name == gpu_type)
        size = draw(st.sampled_from((1, 2, 4, 8)))
        hosts.append(
            Host(
                f"h{index}",
                tuple(Gpu(gpu_id + i, f"h{index}", gpu_type, memory) for i in range(size)),
            )
        )
        gpu_id += size
    running: list[Running] = []
    job_id = 1000
    for h in hosts:
        taken = 0
        while taken < len(h.gpus) and draw(st.booleans()):
            gpus = draw(st.integers(1, len(h.gpus) - taken))
            ids = tuple(g.id for g in h.gpus[taken : taken + gpus])
            taken += gpus
            started = NOW - draw(st.floats(0, 48)) * HOUR
            running.append(
                Running(
                    job_id,
                    draw(st.sampled_from(CLASSES)),
                    draw(st.sampled_from(("vision", "nlp"))),
                    ids,
                    h.gpus[0].gpu_type,
                    started,
                    NOW + draw(st.floats(0, 200)) * HOUR,
                    preempting=draw(st.booleans()) and draw(st.booleans()),
                    preemptible=draw(st.booleans()),
                    preemptions=draw(st.integers(0, 4)),
                    grace_s=draw(st.one_of(st.none(), st.floats(30, 3600))),
                )
            )
            job_id += 1
    held = {gpu: r.id for r in running for gpu in r.gpu_ids}
    hosts = [
        replace(h, gpus=tuple(replace(g, job_id=held.get(g.id)) for g in h.gpus)) for h in hosts
    ]
    pending = [
        Pending(
            i,
            draw(st.sampled_from(CLASSES)),
            draw(st.sampled_from(("vision", "nlp"))),
            "U1",
            NOW - draw(st.floats(0, 600)) * HOUR - i,
            draw(st.booleans()),
            draw(st.sampled_from((1, 1, 2, 4, 8))),
            CardNeeds(None, None),
            draw(st.floats(0.02, 500)),
            preemptible=draw(st.booleans()),
        )
        for i in range(1, draw(st.integers(0, 12)) + 1)
    ]
    knobs = Knobs(
        starve_after_hours=draw(st.one_of(st.none(), st.floats(1, 400))),
        preempt_max_per_job=draw(st.integers(1, 4)),
        preempt_min_run_s=draw(st.floats(0, 4 * HOUR)),
        shorter_factor=draw(st.one_of(st.none(), st.floats(1, 16))),
    )
    usage = {"vision": draw(st.floats(0, 100)), "nlp": draw(st.floats(0, 100))}
    return Snapshot(
        NOW, tuple(hosts), tuple(running), tuple(pending), CATALOG, knobs, team_usage=usage
    )


@settings(max_examples=200, deadline=None)
@given(clusters())
def test_the_pass_is_deterministic_and_never_starts_a_job_whose_data_is_not_ready(
    snap: Snapshot,
) -> None:
    plan = schedule(snap)
    assert plan.starts == schedule(snap).starts
    assert plan.preemptions == schedule(snap).preemptions
    ready = {j.id for j in snap.pending if j.data_ready}
    assert {s.job_id for s in plan.starts} <= ready
    held = {g.id for h in snap.hosts for g in h.gpus if g.job_id is not None}
    placed = [gpu for s in plan.starts for gpu in s.gpu_ids]
    assert len(placed) == len(set(placed)) and not held & set(placed)


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_asking_for_reasons_never_changes_a_decision(snap: Snapshot) -> None:
    """A pass without reasons passes over jobs as blocked as one already tried; the one
    with reasons tries each: both decide the same."""
    quick, explained = schedule(snap), schedule(snap, explain=True)
    assert quick.starts == explained.starts
    assert quick.preemptions == explained.preemptions
    assert quick.reservations == explained.reservations


def _filled(snap: Snapshot, data: st.DataObject) -> Snapshot:
    """The cluster with its free GPUs taken, most of them, by running jobs of any class (a
    full cluster, where a pass can only stop jobs, or one with too few GPUs free)."""
    running = list(snap.running)
    held = {gpu: r.id for r in running for gpu in r.gpu_ids}
    job_id = 5000
    for host in snap.hosts:
        free = [g.id for g in host.gpus if g.id not in held and data.draw(st.integers(0, 5)) > 0]
        if not free:
            continue
        running.append(
            Running(
                job_id,
                data.draw(st.sampled_from(CLASSES)),
                "vision",
                tuple(free),
                host.gpus[0].gpu_type,
                NOW - data.draw(st.floats(0, 48)) * HOUR,
                NOW + data.draw(st.floats(0, 200)) * HOUR,
                preemptible=data.draw(st.booleans()),
            )
        )
        held.update((gpu, job_id) for gpu in free)
        job_id += 1
    hosts = tuple(
        replace(h, gpus=tuple(replace(g, job_id=held.get(g.id)) for g in h.gpus))
        for h in snap.hosts
    )
    return replace(snap, hosts=hosts, running=tuple(running))


@settings(max_examples=300, deadline=None)
@given(clusters(), st.data())
def test_a_pass_where_nothing_can_start_decides_as_the_whole_pass(
    snap: Snapshot, data: st.DataObject
) -> None:
    """With no GPU free, or (when the plan need not list reservations) too few for any ready
    job, the pass orders only the jobs some running job could be stopped for: it stops the
    same jobs for the same waiting jobs as the pass that orders and admits every job."""
    if data.draw(st.booleans()):
        snap = _filled(snap, data)
    whole = schedule(snap, explain=True)
    for quick in (schedule(snap), schedule(snap, reservations=False)):
        assert quick.starts == whole.starts
        assert quick.preemptions == whole.preemptions
    assert schedule(snap).reservations == whole.reservations


@settings(max_examples=200, deadline=None)
@given(clusters())
def test_lower_classes_never_change_which_core_jobs_start(snap: Snapshot) -> None:
    core_only = replace(snap, pending=tuple(j for j in snap.pending if j.priority == "core"))
    started = {s.job_id for s in schedule(snap).starts}
    core = {j.id for j in snap.pending if j.priority == "core"}
    assert started & core == {s.job_id for s in schedule(core_only).starts}


@settings(max_examples=200, deadline=None)
@given(clusters())
def test_starving_jobs_go_first_in_their_class_in_submit_order(snap: Snapshot) -> None:
    limit = snap.knobs.starve_after_hours
    queue = ordered(snap.pending, snap.now, snap.knobs, snap.team_usage)
    for cls in CLASSES:
        of_class = [j for j in queue if j.priority == cls]
        starving = [
            limit is not None and snap.now - j.submitted_at >= limit * HOUR for j in of_class
        ]
        assert starving == sorted(starving, reverse=True)  # every starving job ahead
        first = [j.submitted_at for j, s in zip(of_class, starving, strict=True) if s]
        assert first == sorted(first)


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_preemption_stops_only_what_may_be_stopped(snap: Snapshot) -> None:
    knobs = snap.knobs
    by_id = {r.id: r for r in snap.running}
    pending = {j.id: j for j in snap.pending}
    for stop in schedule(snap).preemptions:
        victim = by_id[stop.job_id]
        assert not victim.preempting  # never asked twice
        assert victim.priority != "core"
        assert pending[stop.for_job].data_ready
        if victim.priority == "idle" and not victim.preemptible:
            assert pending[stop.for_job].priority == "core"
            continue
        assert victim.preemptible
        assert victim.preemptions < knobs.preempt_max_per_job
        assert snap.now - victim.started_at >= knobs.preempt_min_run_s
        grace = victim.grace_s if victim.grace_s is not None else knobs.idle_grace_s
        assert stop.deadline == snap.now + grace


@settings(max_examples=200, deadline=None)
@given(clusters(), st.data())
def test_earliest_starts_kept_between_placements_match_fresh_ones(
    snap: Snapshot, data: st.DataObject
) -> None:
    """Capacity keeps each host's GPUs in order of when they free up, across the pass's
    placements and reservations: what it answers is what a fresh look gives."""
    from scheduler.policy.capacity import Capacity, Reservation

    capacity = Capacity(snap)
    types = sorted(capacity.pools)

    asks = [(t, gpus, past) for t in types for gpus in (1, 2, 3, 4, 8) for past in (False, True)]

    def answers() -> list[tuple[float, frozenset[int]]]:
        return [capacity.earliest_start(t, g, past_reservations=p) for t, g, p in asks]

    def check() -> None:
        kept = answers()
        capacity._host_times.clear()
        capacity._soonest.clear()
        assert kept == answers()  # and every host's order is kept again for the next step

    for step in range(data.draw(st.integers(1, 6))):
        check()
        gpu_type = data.draw(st.sampled_from(types))
        gpus = data.draw(st.sampled_from((1, 2, 4)))
        until = NOW + data.draw(st.floats(0, 100)) * HOUR
        if data.draw(st.booleans()):
            placement = capacity.place_now(gpu_type, gpus, core=True, run_seconds=HOUR)
            if placement is not None:
                capacity.assume(placement, until, core=False)
        else:
            start, ids = capacity.earliest_start(gpu_type, gpus)
            if ids:
                capacity.reserve(Reservation(step, gpu_type, start, ids), until)
    check()
