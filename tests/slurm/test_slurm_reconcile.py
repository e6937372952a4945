"""Reading Slurm's nodes and queue into hosts' reports, case by case, on JSON captured from
the real one-node Slurm 22.05 (tests/slurm/captured/)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from scheduler.config import SlurmPool, load_policy
from scheduler.hosts.poll import Target
from scheduler.settings import BUNDLED_POLICY
from scheduler.slurm.commands import SlurmCommands
from scheduler.slurm.errors import SlurmError, SlurmProblem
from scheduler.slurm.models import EndedRun, Node, NodeReply, QueuedJob, QueueReply
from scheduler.slurm.reconcile import (
    SlurmPoller,
    node_cards,
    node_report,
    recorded_state,
    run_state,
    unhealthy_reason,
    used_indices,
)

CAPTURED = Path(__file__).parent / "captured"
POOL = SlurmPool(
    partition="debug", gres={"T4-16GB": "t4"}, log_path="/logs/{job_id}", job_name_prefix="p-"
)


def captured_node(name: str) -> Node:
    (node,) = NodeReply.model_validate_json((CAPTURED / f"sinfo-{name}.json").read_text()).nodes
    return node


def queued(name: str, state: str = "RUNNING", **changes: object) -> QueuedJob:
    """A job of the captured queue, renamed and changed."""
    first = QueueReply.model_validate_json((CAPTURED / "squeue.json").read_text()).jobs[0]
    return first.model_copy(update={"name": name, "job_state": state, **changes})


@pytest.mark.parametrize(
    ("gres", "cards"),
    [
        ("gpu:a100:2,gpu:t4:2", [(0, "a100"), (1, "a100"), (2, "t4"), (3, "t4")]),
        ("gpu:t4:2(S:0-1),gpu:a100:1(S:0)", [(0, "t4"), (1, "t4"), (2, "a100")]),
        ("gpu:2", [(0, "gpu"), (1, "gpu")]),
        ("", []),
        ("mps:100,gpu:t4:1", [(0, "t4")]),
    ],
)
def test_a_nodes_gpus_are_numbered_in_the_order_it_lists_them(
    gres: str, cards: list[tuple[int, str]]
) -> None:
    assert [(c.index, c.slurm_type) for c in node_cards(gres)] == cards


@pytest.mark.parametrize(
    ("gres", "held"),
    [
        ("gpu:a100:0(IDX:N/A),gpu:t4:2(IDX:2-3)", {2, 3}),
        ("gpu:t4:3(IDX:0,2-3)", {0, 2, 3}),
        ("gpu:a100:0(IDX:N/A),gpu:t4:0(IDX:N/A)", set()),
        ("gpu:t4:1(IDX:3)", {3}),
    ],
)
def test_the_cards_held_are_read_from_slurms_index_lists(gres: str, held: set[int]) -> None:
    assert used_indices(gres) == held


@pytest.mark.parametrize(
    ("captured", "reason"),
    [
        ("mixed", None),
        ("drained", "Slurm node IDLE+DRAIN: fan broken"),
        ("draining", "Slurm node MIXED+DRAIN: fan broken"),
    ],
)
def test_a_drained_or_draining_node_is_unhealthy_with_its_reason(
    captured: str, reason: str | None
) -> None:
    assert unhealthy_reason(captured_node(captured)) == reason


def test_a_down_or_silent_node_is_unhealthy() -> None:
    node = captured_node("mixed")
    down = node.model_copy(update={"state": "down", "reason": "Not responding"})
    silent = node.model_copy(update={"state_flags": ("NOT_RESPONDING",)})
    assert unhealthy_reason(down) == "Slurm node DOWN: Not responding"
    assert unhealthy_reason(silent) == "Slurm node MIXED+NOT_RESPONDING"


@pytest.mark.parametrize(
    ("state", "raw_exit", "seen"),
    [
        ("RUNNING", 0, ("running", None, None)),
        ("PENDING", 0, ("running", None, None)),
        ("COMPLETING", 0, ("running", None, None)),
        ("COMPLETED", 0, ("exited", 0, None)),
        ("FAILED", 3 << 8, ("exited", 3, None)),
        ("FAILED", 9, ("killed", None, "failed")),  # a signal ended the batch shell
        ("FAILED", 0, ("killed", None, "failed")),  # it failed without its shell failing
        ("TIMEOUT", 15, ("killed", None, "timeout")),
        ("CANCELLED", 15, ("killed", None, "cancelled")),
        ("NODE_FAIL", 0, ("lost", None, "node_fail")),
        ("OUT_OF_MEMORY", 0, ("killed", None, "out_of_memory")),
        ("PREEMPTED", 0, ("lost", None, "preempted")),
    ],
)
def test_a_runs_state_is_said_as_an_agent_says_it(
    state: str, raw_exit: int, seen: tuple[str, int | None, str | None]
) -> None:
    run = run_state("41.2", queued("p-41.2.localhost", state, exit_code=raw_exit))
    assert (run.job_id, run.state, run.exit_code, run.ended_by) == ("41.2", *seen)


def test_a_nodes_report_names_paikas_runs_and_takes_other_jobs_cards() -> None:
    policy = load_policy(BUNDLED_POLICY)
    node = captured_node("mixed").model_copy(
        update={"gres_used": "gpu:a100:1(IDX:0),gpu:t4:2(IDX:2-3)"}
    )
    queue = [
        queued("p-41.2.localhost", gres_detail=("gpu:t4:1(IDX:3)",)),  # paika's, on this node
        queued("p-40.1.localhost", "COMPLETED", exit_code=0, gres_detail=()),  # paika's, ended
        queued("p-39.1.elsewhere", gres_detail=("gpu:t4:1(IDX:2)",)),  # paika's, another node
        queued("someone-else", gres_detail=("gpu:t4:1(IDX:2)",)),  # not paika's
        queued("q-38.1.localhost", gres_detail=("gpu:a100:1(IDX:0)",)),  # another paika's prefix
    ]
    report = node_report(policy, POOL, "localhost", node, queue)
    assert report.ok and report.unhealthy is None
    cards = [(g.index, g.gpu_type, g.holder, g.taken) for g in report.gpus]
    assert cards == [
        (0, "slurm:a100", None, True),  # no type of the pool: paika never plans on it
        (1, "slurm:a100", None, False),
        (2, "T4-16GB", None, True),
        (3, "T4-16GB", "41.2", False),
    ]
    assert {g.memory_total_gib for g in report.gpus if g.gpu_type == "T4-16GB"} == {16.0}
    assert all(g.utilization_pct is None for g in report.gpus)  # Slurm does not say
    assert {run: j.state for run, j in report.jobs.items()} == {
        "41.2": "running",
        "40.1": "exited",
    }


def test_a_node_slurm_does_not_know_does_not_answer() -> None:
    report = node_report(load_policy(BUNDLED_POLICY), POOL, "gone", None, [])
    assert not report.ok and not report.patient and report.error == "Slurm has no node 'gone'"


@pytest.mark.parametrize(
    ("state", "exit_code", "seen"),
    [
        ("COMPLETED", "0:0", ("exited", 0, None)),
        ("FAILED", "3:0", ("exited", 3, None)),
        ("FAILED", "0:9", ("killed", None, "failed")),
        ("TIMEOUT", "0:15", ("killed", None, "timeout")),
        ("CANCELLED", "0:15", ("killed", None, "cancelled")),
        ("RUNNING", "0:0", ("running", None, None)),  # its end has not reached slurmdbd yet
    ],
)
def test_a_run_squeue_forgot_is_said_as_slurmdbd_recorded_it(
    state: str, exit_code: str, seen: tuple[str, int | None, str | None]
) -> None:
    record = EndedRun(
        job_id=7, name="p-41.2.localhost", state=state, exit_code=exit_code,
        elapsed_seconds=90, nodes="localhost",
    )  # fmt: skip
    run = recorded_state("41.2", record)
    assert (run.state, run.exit_code, run.ended_by) == seen
    assert run.ran_seconds == (90.0 if seen[0] != "running" else None)


class AccountingAway(SlurmCommands):
    """squeue and sinfo answer (from the captured JSON); sacct fails: slurmdbd is away."""

    def nodes(self) -> tuple[Node, ...]:
        return (captured_node("mixed"),)

    def queue(self) -> tuple[QueuedJob, ...]:
        return (queued("p-9.1.localhost"),)

    def ended_runs(self, names: Sequence[str], *, since: str = "") -> tuple[EndedRun, ...]:
        raise SlurmError(SlurmProblem.OTHER, ["sacct"], "Connection refused to slurmdbd")


def test_without_slurmdbd_a_forgotten_run_concludes_nothing() -> None:
    policy = load_policy(BUNDLED_POLICY)
    forgot = Target("localhost", "", runs=("8.1", "9.1"))  # 8.1: squeue lists it no more
    other = Target("gone", "", runs=())
    reports = SlurmPoller(AccountingAway)(policy, POOL, [forgot, other])
    assert not reports["localhost"].ok and reports["localhost"].patient
    assert "sacct" in (reports["localhost"].error or "")
    assert not reports["gone"].ok and not reports["gone"].patient  # read as ever


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (("RESERVED",), "Slurm node MIXED+RESERVED: in an active Slurm reservation"),
        (
            ("MAINTENANCE", "RESERVED"),
            "Slurm node MIXED+MAINTENANCE+RESERVED: in an active Slurm reservation",
        ),
    ],
)
def test_a_node_in_an_active_reservation_is_unhealthy(flags: tuple[str, ...], reason: str) -> None:
    # As sinfo --json shows it in 22.05: the state stays, the flag says it is reserved.
    node = captured_node("mixed").model_copy(update={"state_flags": flags})
    assert unhealthy_reason(node) == reason


# A run cancelled while PENDING, as Slurm 22.05 shows it: no node, its last pending reason
# kept, start_time = end_time (the cancel).
NEVER_RAN = {"nodes": "", "submit_time": 1000, "start_time": 1700, "end_time": 1700}
RAN = {"nodes": "localhost", "submit_time": 1000, "start_time": 1010, "end_time": 1700}


@pytest.mark.parametrize(
    ("state", "times", "cancelled", "seen"),
    [
        # held 700 s, past the 600 s limit, never ran: lost (whoever cancelled it)
        ("CANCELLED", NEVER_RAN, False, ("lost", "pending", False)),
        ("CANCELLED", NEVER_RAN, True, ("lost", "pending", False)),
        # paika says it cancelled it for that, whatever Slurm's times say
        ("CANCELLED", {**NEVER_RAN, "end_time": 1100}, True, ("lost", "pending", False)),
        # cancelled before the limit, by no one paika knows: killed, as before
        ("CANCELLED", {**NEVER_RAN, "end_time": 1100}, False, ("killed", "cancelled", True)),
        # it started before the cancel reached it: it ran, it is no pending run
        ("CANCELLED", RAN, True, ("killed", "cancelled", True)),
        ("FAILED", NEVER_RAN, True, ("killed", "failed", True)),
    ],
)
def test_a_run_cancelled_for_pending_past_the_limit_is_lost_never_having_run(
    state: str,
    times: dict[str, object],
    cancelled: bool,
    seen: tuple[str, str, bool],
) -> None:
    job = queued("p-41.2.localhost", state, state_reason="Resources", exit_code=0, **times)
    run = run_state("41.2", job, limit_s=600, cancelled=cancelled)
    assert (run.state, run.ended_by, run.launched) == seen
    if run.state == "lost":
        assert (run.pending_past_s, run.pending_reason) == (600, "Resources")
        assert (run.ran_seconds, run.accounted) == (0.0, True)  # nothing to charge


def test_a_pending_run_is_running_and_holds_its_booked_cards() -> None:
    # Its cards are in no gres_detail while it pends: the report names no holder, and the
    # database's booking (its open allocations) keeps them, as for any running job.
    job = queued("p-41.2.localhost", "PENDING", nodes="", gres_detail=(), start_time=0)
    assert run_state("41.2", job, limit_s=600).state == "running"


@pytest.mark.parametrize(
    ("nodes", "ended_at", "cancelled", "state"),
    [
        ("None assigned", 1700, False, "lost"),  # held past the limit by slurmdbd's times
        ("None assigned", 1100, True, "lost"),  # paika cancelled it for that
        ("None assigned", 1100, False, "killed"),
        ("localhost", 1700, True, "killed"),  # it ran
    ],
)
def test_a_pending_run_squeue_forgot_is_said_from_slurmdbds_times(
    nodes: str, ended_at: int, cancelled: bool, state: str
) -> None:
    record = EndedRun(
        job_id=7, name="p-41.2.localhost", state="CANCELLED", exit_code="0:0",
        elapsed_seconds=0, nodes=nodes, submitted=1000, ended_at=ended_at,
    )  # fmt: skip
    run = recorded_state("41.2", record, limit_s=600, cancelled=cancelled)
    assert run.state == state
    assert run.pending_reason is None  # slurmdbd keeps none


class PendingQueue(SlurmCommands):
    """The captured node, and one paika run Slurm holds PENDING since 1000 (then, once
    cancelled, CANCELLED without having run); `refuse`: scancel fails."""

    refuse: SlurmError | None = None
    jobs: dict[int, QueuedJob] = {}
    cancels: list[int] = []

    def nodes(self) -> tuple[Node, ...]:
        return (captured_node("mixed"),)

    def queue(self) -> tuple[QueuedJob, ...]:
        return tuple(self.jobs.values())

    def cancel_pending(self, job_id: int) -> None:
        PendingQueue.cancels.append(job_id)
        if PendingQueue.refuse is not None:
            raise PendingQueue.refuse
        pending = self.jobs[job_id]
        ended = {"job_state": "CANCELLED", "end_time": 1700, "start_time": 1700}
        self.jobs[job_id] = pending.model_copy(update=ended)


def pending_queue(refuse: SlurmError | None = None) -> None:
    job = queued(
        "p-9.1.localhost", "PENDING", job_id=77, nodes="", gres_detail=(), submit_time=1000,
        start_time=0, end_time=0, state_reason="ReqNodeNotAvail, Reserved for maintenance",
    )  # fmt: skip
    PendingQueue.jobs, PendingQueue.cancels, PendingQueue.refuse = {77: job}, [], refuse


def test_the_poller_cancels_a_run_pending_past_the_limit_and_concludes_only_on_its_end() -> None:
    policy = load_policy(BUNDLED_POLICY)
    pending_queue()
    now = [1000.0 + 599]
    poller = SlurmPoller(PendingQueue, clock=lambda: now[0])
    target = Target("localhost", "", runs=("9.1",))
    assert poller(policy, POOL, [target])["localhost"].jobs["9.1"].state == "running"
    assert PendingQueue.cancels == []  # not yet past the limit

    now[0] = 1000.0 + 600
    first = poller(policy, POOL, [target])["localhost"].jobs["9.1"]
    assert first.state == "running" and PendingQueue.cancels == [77]  # not concluded yet
    after = poller(policy, POOL, [target])["localhost"].jobs["9.1"]
    assert (after.state, after.ended_by, after.launched) == ("lost", "pending", False)
    assert after.pending_reason == "ReqNodeNotAvail, Reserved for maintenance"
    assert PendingQueue.cancels == [77]  # once: it is no longer pending


def test_a_cancel_slurm_refuses_concludes_nothing_and_is_sent_again() -> None:
    policy = load_policy(BUNDLED_POLICY)
    pending_queue(SlurmError(SlurmProblem.UNREACHABLE, ["scancel"], "Connection refused"))
    poller = SlurmPoller(PendingQueue, clock=lambda: 5000.0)
    target = Target("localhost", "", runs=("9.1",))
    for _ in range(2):
        assert poller(policy, POOL, [target])["localhost"].jobs["9.1"].state == "running"
    assert PendingQueue.cancels == [77, 77]
    PendingQueue.refuse = None
    poller(policy, POOL, [target])
    assert poller(policy, POOL, [target])["localhost"].jobs["9.1"].state == "lost"


def test_a_run_paika_does_not_hold_is_not_cancelled_for_its_pending_time() -> None:
    pending_queue()
    poller = SlurmPoller(PendingQueue, clock=lambda: 5000.0)
    poller(load_policy(BUNDLED_POLICY), POOL, [Target("localhost", "", runs=())])
    assert PendingQueue.cancels == []


@pytest.mark.parametrize("seconds", [0, 59, 7 * 24 * 3600 + 1])
def test_a_pending_limit_out_of_bounds_is_refused_with_its_bounds(seconds: int) -> None:
    with pytest.raises(ValueError, match=r"out of bounds: from 60 s .* to 604800 s"):
        SlurmPool(
            partition="debug", gres={"T4-16GB": "t4"}, log_path="/logs/{job_id}",
            pending_timeout_seconds=seconds,
        )  # fmt: skip
