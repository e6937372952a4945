"""Shared cards in the pure policy: who joins which card, what it holds, and what never happens.

Properties (hypothesis) over generated clusters of shared cards and queues of share jobs:
- a card is never booked past whole (the parts of its jobs add up to at most 1000), and what
  its jobs declared, with the reserve, always fits its memory;
- a core job never shares, and never waits behind a share job;
- no card takes more jobs than the policy allows.
"""

from __future__ import annotations

from dataclasses import replace

from builders import NOW, job, snapshot
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.policy.colocation import Fingerprint
from scheduler.policy.plan import PreemptCode
from scheduler.policy.reasons import ReasonCode
from scheduler.policy.scheduler import could_act, schedule
from scheduler.policy.sharing import WHOLE_CARD, share_milli
from scheduler.policy.snapshot import HOUR, Gpu, Host, Knobs, Pending, Running, Snapshot

LIGHT = Fingerprint(gpu_util=10.0, gmem_util=5.0, gmem_mib=8000.0)
MIDDLING = Fingerprint(gpu_util=60.0, gmem_util=20.0, gmem_mib=8000.0)
HEAVY = Fingerprint(gpu_util=99.0, gmem_util=70.0, gmem_mib=16000.0)
PCIE_HEAVY = Fingerprint(gpu_util=10.0, gmem_util=5.0, gmem_mib=4000.0, pcie_mbps=12000.0)


def _host(name: str, cards: int, *, sharing: str = "mps", first_id: int = 1) -> Host:
    return Host(
        name,
        tuple(Gpu(first_id + i, name, "A100-80GB", 80.0) for i in range(cards)),
        sharing=sharing,
    )


def _share(
    job_id: int,
    mem: float,
    *,
    fingerprint: Fingerprint | None = None,
    priority: str = "normal",
    hours: float = 1.0,
) -> Pending:
    return replace(
        job(job_id, mem=mem, priority=priority, hours=hours), share=True, fingerprint=fingerprint
    )


def _tenant(
    job_id: int, gpu: Gpu, mem: float, fingerprint: Fingerprint | None, *, ends_in_h: float = 2.0
) -> Running:
    return Running(
        job_id,
        "normal",
        "vision",
        (gpu.id,),
        gpu.gpu_type,
        NOW - HOUR,
        NOW + ends_in_h * HOUR,
        share_gib=mem,
        fingerprint=fingerprint,
    )


def _shared(host: Host, gpu_index: int, tenants: tuple[Running, ...]) -> Host:
    """`host` with its card `gpu_index` shared by `tenants`."""
    gpus = list(host.gpus)
    ids = tuple(t.id for t in tenants)
    gpus[gpu_index] = replace(gpus[gpu_index], job_id=ids[0], tenants=ids)
    return replace(host, gpus=tuple(gpus))


def test_two_share_jobs_take_one_card_not_two() -> None:
    plan = schedule(
        snapshot(
            [_host("g1", 2)], [_share(1, 20, fingerprint=LIGHT), _share(2, 30, fingerprint=LIGHT)]
        )
    )
    first, second = plan.starts
    assert first.gpu_ids == second.gpu_ids
    assert first.share_milli == share_milli(20, 80) == 250
    assert second.share_milli == share_milli(30, 80) == 375
    assert second.shares_with == (1,)
    assert second.match.why is not None and second.match.why.code is ReasonCode.MATCH_SHARES
    assert second.match.why.values["beside"] == "#1"
    assert first.match.why is not None
    assert first.match.why.code is ReasonCode.MATCH_SHARES_NEW_CARD


def test_a_job_joins_the_busiest_card_on_the_fullest_host() -> None:
    busy, roomy = _host("busy", 2), _host("roomy", 4, first_id=10)
    a = _tenant(101, busy.gpus[0], 40, LIGHT)
    b = _tenant(102, roomy.gpus[0], 10, LIGHT)
    hosts = [_shared(busy, 0, (a,)), _shared(roomy, 0, (b,))]
    plan = schedule(snapshot(hosts, [_share(1, 20, fingerprint=LIGHT)], [a, b]))
    (start,) = plan.starts
    assert start.gpu_ids == (busy.gpus[0].id,)  # 40 GiB declared there, 10 on the other
    assert start.match.why is not None
    assert start.match.why.values["used"] == 40 and start.match.why.values["memory"] == 20


def test_memory_must_fit_with_the_reserve() -> None:
    host = _host("g1", 1)
    there = _tenant(101, host.gpus[0], 60, LIGHT)
    knobs = Knobs(share_reserve_gib=2.0)
    fits = schedule(
        snapshot(
            [_shared(host, 0, (there,))], [_share(1, 18, fingerprint=LIGHT)], [there], knobs=knobs
        )
    )
    too_much = schedule(
        snapshot(
            [_shared(host, 0, (there,))], [_share(1, 19, fingerprint=LIGHT)], [there], knobs=knobs
        )
    )
    assert len(fits.starts) == 1 and too_much.starts == ()


def test_two_jobs_that_press_memory_bandwidth_are_never_stacked() -> None:
    host = _host("g1", 1)
    there = _tenant(101, host.gpus[0], 20, HEAVY)
    plan = schedule(
        snapshot([_shared(host, 0, (there,))], [_share(1, 20, fingerprint=HEAVY)], [there])
    )
    assert plan.starts == ()


def test_a_job_with_no_earlier_run_shares_only_beside_a_light_one() -> None:
    host = _host("g1", 1)
    light = _tenant(101, host.gpus[0], 20, LIGHT)
    middling = _tenant(102, host.gpus[0], 20, MIDDLING)
    unknown = _tenant(103, host.gpus[0], 20, None)
    beside_light = schedule(snapshot([_shared(host, 0, (light,))], [_share(1, 20)], [light]))
    beside_middling = schedule(
        snapshot([_shared(host, 0, (middling,))], [_share(1, 20)], [middling])
    )
    beside_unknown = schedule(snapshot([_shared(host, 0, (unknown,))], [_share(1, 20)], [unknown]))
    assert len(beside_light.starts) == 1
    assert beside_middling.starts == () and beside_unknown.starts == ()


def test_a_pcie_heavy_job_goes_to_another_host_when_one_serves() -> None:
    one, other = _host("one", 2), _host("other", 2, first_id=10)
    there = _tenant(101, one.gpus[0], 10, PCIE_HEAVY)
    also = _tenant(102, other.gpus[0], 10, LIGHT)
    hosts = [_shared(one, 0, (there,)), _shared(other, 0, (also,))]
    plan = schedule(snapshot(hosts, [_share(1, 10, fingerprint=PCIE_HEAVY)], [there, also]))
    (start,) = plan.starts
    assert start.hosts == ("other",)


def test_a_host_that_keeps_no_jobs_apart_shares_nothing() -> None:
    plan = schedule(snapshot([_host("g1", 2, sharing="")], [_share(1, 20), _share(2, 20)]))
    assert [s.share_milli for s in plan.starts] == [None, None]  # each takes a whole card
    assert len({s.gpu_ids for s in plan.starts}) == 2


def test_a_core_job_never_shares() -> None:
    plan = schedule(snapshot([_host("g1", 2)], [_share(1, 20, priority="core"), _share(2, 20)]))
    core = next(s for s in plan.starts if s.job_id == 1)
    assert core.share_milli is None


def test_whole_card_work_never_lands_on_a_shared_card() -> None:
    host = _host("g1", 1)
    there = _tenant(101, host.gpus[0], 10, LIGHT)
    plan = schedule(snapshot([_shared(host, 0, (there,))], [job(1)], [there]))
    assert plan.starts == ()


def test_a_core_job_takes_a_shared_card_back_by_stopping_all_its_jobs() -> None:
    host = _host("g1", 1)
    a = _tenant(101, host.gpus[0], 20, LIGHT)
    b = _tenant(102, host.gpus[0], 20, LIGHT)
    shared = _shared(host, 0, (a, b))
    plan = schedule(snapshot([shared], [job(1, priority="core")], [a, b]))
    assert sorted(p.job_id for p in plan.preemptions) == [101, 102]
    assert {p.code for p in plan.preemptions} == {PreemptCode.SHARED_FOR_CORE}
    # A normal whole-card job stops nobody on a shared card.
    assert schedule(snapshot([shared], [job(1)], [a, b])).preemptions == ()


def test_a_card_being_taken_back_takes_no_new_job() -> None:
    host = _host("g1", 1)
    leaving = replace(_tenant(101, host.gpus[0], 20, LIGHT), preempting=True)
    shared = _shared(host, 0, (leaving,))
    assert schedule(snapshot([shared], [_share(1, 20, fingerprint=LIGHT)], [leaving])).starts == ()
    # The same card with its job staying takes the share job beside it.
    staying = replace(leaving, preempting=False)
    shared = _shared(host, 0, (staying,))
    plan = schedule(snapshot([shared], [_share(1, 20, fingerprint=LIGHT)], [staying]))
    assert [s.shares_with for s in plan.starts] == [(101,)]


def test_a_job_joins_no_shared_card_kept_for_a_waiting_job_it_would_delay() -> None:
    host = _host("g1", 2)
    there = _tenant(101, host.gpus[0], 20, LIGHT, ends_in_h=1)
    whole = Running(102, "normal", "nlp", (host.gpus[1].id,), "A100-80GB", NOW, NOW + 3 * HOUR)
    gpus = (replace(host.gpus[0], job_id=101, tenants=(101,)), replace(host.gpus[1], job_id=102))
    busy = replace(host, gpus=gpus)
    # Job 1 waits for both cards, kept for it from 3 h on (EASY's reservation).
    waiting = job(1, gpus=2, hours=2, waited_h=2)
    long, short = _share(2, 20, fingerprint=LIGHT, hours=10), _share(3, 20, fingerprint=LIGHT)
    # The short job ends before job 1 may start and joins; the long one would delay it. With no
    # card free, job 1 keeps its place all the same (a join may take the card that frees first).
    for share, joins in ((long, False), (short, True)):
        plan = schedule(snapshot([busy], [waiting, share], [there, whole]))
        assert [(s.job_id, s.shares_with) for s in plan.starts] == (
            [(share.id, (101,))] if joins else []
        )
        assert [(r.job_id, r.start) for r in plan.reservations] == [(1, NOW + 3 * HOUR)]


def test_a_shared_card_frees_when_its_last_job_ends() -> None:
    host = _host("g1", 1)
    soon = _tenant(101, host.gpus[0], 20, LIGHT, ends_in_h=1)
    late = _tenant(102, host.gpus[0], 20, LIGHT, ends_in_h=5)
    plan = schedule(
        snapshot([_shared(host, 0, (soon, late))], [job(1)], [soon, late]), explain=True
    )
    eta = plan.waits[1].eta
    assert eta is not None and abs(eta - (NOW + 5 * HOUR)) < 1


def test_a_waiting_share_job_makes_a_pass_worth_running_with_no_card_free() -> None:
    host = _host("g1", 1)
    there = _tenant(101, host.gpus[0], 20, LIGHT)
    snap = snapshot([_shared(host, 0, (there,))], [_share(1, 20, fingerprint=LIGHT)], [there])
    assert could_act(snap)
    assert len(schedule(snap).starts) == 1


# --- properties


@st.composite
def shared_clusters(draw: st.DrawFn) -> Snapshot:
    """One or two sharing hosts with some cards already shared, and a queue of share jobs,
    whole-card jobs and core jobs."""
    fingerprints = st.sampled_from([None, LIGHT, MIDDLING, HEAVY, PCIE_HEAVY])
    hosts: list[Host] = []
    running: list[Running] = []
    gpu_id, job_id = 1, 500
    knobs = Knobs(
        share_max_jobs=draw(st.integers(1, 4)), share_reserve_gib=draw(st.sampled_from([0.0, 2.0]))
    )
    for index in range(draw(st.integers(1, 2))):
        host = _host(f"h{index}", draw(st.integers(1, 3)), first_id=gpu_id)
        gpu_id += len(host.gpus)
        for card in range(len(host.gpus)):
            tenants: list[Running] = []
            used = 0.0
            for _ in range(draw(st.integers(0, knobs.share_max_jobs))):
                mem = draw(st.sampled_from([5.0, 10.0, 20.0, 30.0]))
                if used + mem + knobs.share_reserve_gib > 80:
                    break
                used += mem
                tenants.append(
                    _tenant(
                        job_id,
                        host.gpus[card],
                        mem,
                        draw(fingerprints),
                        ends_in_h=draw(st.floats(0.5, 10)),
                    )
                )
                job_id += 1
            if tenants:
                host = _shared(host, card, tuple(tenants))
                running.extend(tenants)
        hosts.append(host)
    pending: list[Pending] = []
    for index in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["share", "share", "whole", "core", "core_share"]))
        mem = draw(st.sampled_from([5.0, 10.0, 20.0, 40.0, 79.0]))
        if kind == "share":
            pending.append(_share(index + 1, mem, fingerprint=draw(fingerprints)))
        elif kind == "core_share":
            pending.append(_share(index + 1, mem, priority="core"))
        else:
            pending.append(job(index + 1, priority="core" if kind == "core" else "normal"))
    return snapshot(hosts, pending, running, knobs=knobs)


@settings(max_examples=300, deadline=None)
@given(shared_clusters())
def test_cards_are_never_over_booked_and_shared_memory_always_fits(snap: Snapshot) -> None:
    plan = schedule(snap)
    gpus = {gpu.id: gpu for host in snap.hosts for gpu in host.gpus}
    running = {r.id: r for r in snap.running}
    parts: dict[int, int] = {}
    declared: dict[int, float] = {}
    jobs: dict[int, int] = {}
    for gpu in gpus.values():
        for tenant in gpu.tenants:
            parts[gpu.id] = parts.get(gpu.id, 0) + share_milli(
                running[tenant].share_gib or 0, gpu.memory_gib
            )
            declared[gpu.id] = declared.get(gpu.id, 0.0) + (running[tenant].share_gib or 0)
            jobs[gpu.id] = jobs.get(gpu.id, 0) + 1
        if gpu.job_id is not None and not gpu.tenants:
            parts[gpu.id] = WHOLE_CARD
    pending = {p.id: p for p in snap.pending}
    for start in plan.starts:
        for gpu_id in start.gpu_ids:
            part = start.share_milli if start.share_milli is not None else WHOLE_CARD
            if start.share_milli is None:
                assert parts.get(gpu_id, 0) == 0, "a whole-card start on a held card"
            parts[gpu_id] = parts.get(gpu_id, 0) + part
            assert parts[gpu_id] <= WHOLE_CARD
            if start.share_milli is not None:
                job_ = pending[start.job_id]
                assert job_.priority != "core"
                declared[gpu_id] = declared.get(gpu_id, 0.0) + (job_.needs.min_memory_gib or 0)
                jobs[gpu_id] = jobs.get(gpu_id, 0) + 1
                assert declared[gpu_id] + snap.knobs.share_reserve_gib <= gpus[gpu_id].memory_gib
                assert jobs[gpu_id] <= snap.knobs.share_max_jobs


@settings(max_examples=200, deadline=None)
@given(shared_clusters())
def test_share_jobs_never_change_which_core_jobs_start(snap: Snapshot) -> None:
    core_alone = replace(snap, pending=tuple(p for p in snap.pending if p.priority == "core"))
    with_all = {s.job_id for s in schedule(snap).starts}
    alone = {s.job_id for s in schedule(core_alone).starts}
    core = {p.id for p in snap.pending if p.priority == "core"}
    assert with_all & core == alone & core


def test_the_parts_the_database_books_must_fit_not_only_the_memory() -> None:
    # 5 + 5 + 30 + 40 GiB fill an 80 GiB card exactly, but each part is booked rounded up
    # (63 + 63 + 375 + 500 thousandths): the database would refuse the fourth, so the policy does.
    host = _host("g1", 1)
    tenants = tuple(
        _tenant(100 + i, host.gpus[0], mem, LIGHT) for i, mem in enumerate((5.0, 5.0, 30.0))
    )
    knobs = Knobs(share_reserve_gib=0.0, share_max_jobs=4)
    shared = _shared(host, 0, tenants)
    assert (
        schedule(
            snapshot([shared], [_share(1, 40, fingerprint=LIGHT)], tenants, knobs=knobs)
        ).starts
        == ()
    )
    (fits,) = schedule(
        snapshot([shared], [_share(1, 39, fingerprint=LIGHT)], tenants, knobs=knobs)
    ).starts
    assert fits.share_milli == 488


def test_a_part_declared_exactly_is_booked_exactly() -> None:
    # Parts that fill a card between them must fit it: no thousandth added by a float's last bit.
    for card in (15.0, 16.0, 24.0, 40.0, 80.0, 11.0):
        assert [share_milli(m / 1000 * card, card) for m in range(1, 1001)] == list(range(1, 1001))
    assert share_milli(20.01, 80) == 251  # a part over a thousandth still rounds up


def test_with_mps_only_jobs_of_one_account_share_a_card() -> None:
    # MPS runs one server per Unix account: a second account's job would wait for the first's.
    host = _host("g1", 1)
    there = replace(_tenant(101, host.gpus[0], 20, LIGHT), account="alice")
    shared = _shared(host, 0, (there,))
    bob = replace(_share(1, 20, fingerprint=LIGHT), account="bob")
    alice = replace(_share(2, 20, fingerprint=LIGHT), account="alice")
    assert schedule(snapshot([shared], [bob], [there])).starts == ()
    (start,) = schedule(snapshot([shared], [alice], [there])).starts
    assert start.shares_with == (101,)
    # Advisory caps keep no server per account: any two accounts may share there.
    advisory = replace(shared, sharing="advisory")
    assert len(schedule(snapshot([advisory], [bob], [there])).starts) == 1


def test_a_costlier_card_is_opened_for_sharing_as_one_is_taken_whole() -> None:
    """With the cheap cards full, a share job that may use any card waits for a cheap one
    as a whole-card job would (its T4 frees in 15 min), rather than open the free A100 for
    sharing and settle the share jobs after it on the costly host; once it has waited its
    hour, it opens the A100."""
    t4 = Host("t", (Gpu(1, "t", "T4-16GB", 16.0),), sharing="mps")
    a100 = _host("a", 1, first_id=2)
    busy = Running(9, "normal", "vision", (1,), "T4-16GB", NOW - HOUR, NOW + HOUR / 4)
    cluster = [replace(t4, gpus=(replace(t4.gpus[0], job_id=9),)), a100]
    fresh = _share(1, 6, fingerprint=LIGHT, hours=4)
    plan = schedule(snapshot(cluster, [fresh], [busy]), explain=True)
    assert plan.starts == ()
    assert plan.waits[1].gpu_type == "T4-16GB" and plan.waits[1].costlier == "A100-80GB"
    waited = replace(fresh, submitted_at=NOW - 2 * HOUR)
    opened = schedule(snapshot(cluster, [waited], [busy])).starts
    assert [(s.gpu_type, s.share_milli is not None) for s in opened] == [("A100-80GB", True)]


def test_share_jobs_alike_join_the_card_the_first_of_them_opened() -> None:
    """A pass remembers the kinds of share job that found no card to join, until a shared card
    is opened: the second of two alike joins the card the first opened, and a smaller one
    still joins a card a bigger one of its kind could not."""
    alike = schedule(
        snapshot(
            [_host("g1", 2)], [_share(1, 20, fingerprint=LIGHT), _share(2, 20, fingerprint=LIGHT)]
        )
    )
    assert len({s.gpu_ids for s in alike.starts}) == 1 and len(alike.starts) == 2
    host = _host("g1", 1)
    there = _tenant(101, host.gpus[0], 50, LIGHT)
    big, small = _share(1, 40, fingerprint=LIGHT), _share(2, 20, fingerprint=LIGHT)
    plan = schedule(snapshot([_shared(host, 0, (there,))], [big, small], [there]))
    assert [s.job_id for s in plan.starts] == [2]


def test_a_share_job_refused_a_card_does_not_hold_back_a_lighter_one_of_its_needs() -> None:
    """A job that presses memory bandwidth may not join a card where another does, and has no
    card of its own: a light job asking the same memory, behind it, still joins."""
    host = _host("g1", 1)
    there = _tenant(101, host.gpus[0], 20, HEAVY)
    heavy, light_one = _share(1, 20, fingerprint=HEAVY), _share(2, 20, fingerprint=LIGHT)
    plan = schedule(snapshot([_shared(host, 0, (there,))], [heavy, light_one], [there]))
    assert [s.job_id for s in plan.starts] == [2]
