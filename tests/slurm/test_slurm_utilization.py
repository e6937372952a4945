"""A Slurm pool's cards' use from the report-only agents on its nodes (`utilization: agents`),
case by case: what is taken from the agent, what stays Slurm's, and that a silent agent
costs nothing but the utilization."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

import pytest

from scheduler.config import PolicyConfig, load_policy
from scheduler.executors import slurm_kind
from scheduler.hosts.executor import AgentsExecutor
from scheduler.hosts.poll import Poller, Target
from scheduler.hosts.report import AgentJobState, GpuReading, HostReport
from scheduler.pools import Pools
from scheduler.settings import BUNDLED_POLICY
from scheduler.slurm.models import QueuedJob
from scheduler.slurm.utilization import with_utilization


def slurm_card(index: int, **changes: object) -> GpuReading:
    """A card as Slurm's read gives it: type and size from the catalog, no use."""
    card = GpuReading(
        index=index,
        uuid=None,
        name="t4",
        memory_total_gib=16.0,
        memory_used_gib=0.0,
        utilization_pct=None,
        gpu_type="T4-16GB",
    )
    return replace(card, **changes)  # type: ignore[arg-type]


def agent_card(index: int, pct: float | None, used: float = 3.0) -> GpuReading:
    """A card as the node's agent reads it through NVML."""
    return GpuReading(
        index=index,
        uuid=f"GPU-{index}",
        name="Tesla T4",
        memory_total_gib=15.0,
        memory_used_gib=used,
        utilization_pct=pct,
        processes={4000 + index: used},
        holder=None,
    )


RUN = AgentJobState("7-1", "running")
SLURM = HostReport(
    "node01",
    True,
    gpus=(slurm_card(0, holder="7-1"), slurm_card(1, taken=True), slurm_card(2)),
    jobs={"7-1": RUN},
    latency_s=0.1,
)
AGENT = HostReport(
    "node01", True, gpus=(agent_card(0, 97.0), agent_card(1, 40.0), agent_card(2, 0.0))
)


def used(report: HostReport) -> list[tuple[int, float | None, float, str | None, str]]:
    return [(g.index, g.utilization_pct, g.memory_used_gib, g.uuid, g.name) for g in report.gpus]


def slurms_own(report: HostReport) -> list[tuple[int, str | None, bool, str | None, float]]:
    return [(g.index, g.holder, g.taken, g.gpu_type, g.memory_total_gib) for g in report.gpus]


@pytest.mark.parametrize(
    ("slurm", "agent", "expected"),
    [
        pytest.param(
            SLURM,
            AGENT,
            [
                (0, 97.0, 3.0, "GPU-0", "Tesla T4"),
                (1, 40.0, 3.0, "GPU-1", "Tesla T4"),
                (2, 0.0, 3.0, "GPU-2", "Tesla T4"),
            ],
            id="every card matched by index",
        ),
        pytest.param(
            SLURM,
            None,
            [(0, None, 0.0, None, "t4"), (1, None, 0.0, None, "t4"), (2, None, 0.0, None, "t4")],
            id="no agent polled: Slurm's report as it is",
        ),
        pytest.param(
            SLURM,
            HostReport("node01", False, error="connection refused"),
            [(0, None, 0.0, None, "t4"), (1, None, 0.0, None, "t4"), (2, None, 0.0, None, "t4")],
            id="agent silent: no utilization, nothing else changes",
        ),
        pytest.param(
            SLURM,
            HostReport("node01", True, gpus=(agent_card(2, 55.0), agent_card(5, 1.0))),
            [
                (0, None, 0.0, None, "t4"),
                (1, None, 0.0, None, "t4"),
                (2, 55.0, 3.0, "GPU-2", "Tesla T4"),
            ],
            id="only the cards both know: one Slurm lacks is ignored",
        ),
        pytest.param(
            SLURM,
            HostReport("node01", True, gpus=(agent_card(0, None), agent_card(1, 5.0))),
            [
                (0, None, 3.0, "GPU-0", "Tesla T4"),
                (1, 5.0, 3.0, "GPU-1", "Tesla T4"),
                (2, None, 0.0, None, "t4"),
            ],
            id="a card NVML cannot measure stays without utilization",
        ),
    ],
)
def test_the_agents_readings_are_laid_over_slurms_cards(
    slurm: HostReport, agent: HostReport | None, expected: list[object]
) -> None:
    merged = with_utilization(slurm, agent)
    assert used(merged) == expected
    # Slurm stays the truth for holders, taken cards, types and sizes, health and runs.
    assert slurms_own(merged) == slurms_own(slurm)
    assert (merged.ok, merged.unhealthy, merged.jobs, merged.error) == (
        slurm.ok,
        slurm.unhealthy,
        slurm.jobs,
        slurm.error,
    )


def test_the_processes_come_from_the_agent() -> None:
    merged = with_utilization(SLURM, AGENT)
    assert [g.processes for g in merged.gpus] == [{4000: 3.0}, {4001: 3.0}, {4002: 3.0}]


@pytest.mark.parametrize(
    "slurm",
    [
        HostReport("node01", False, error="slurmctld_unreachable: …", patient=True),
        replace(SLURM, unhealthy="Slurm node DRAIN: maintenance"),
    ],
    ids=["slurmctld away", "node drained"],
)
def test_an_agent_changes_neither_a_failed_read_nor_a_nodes_health(slurm: HostReport) -> None:
    merged = with_utilization(slurm, AGENT)
    assert (merged.ok, merged.patient, merged.unhealthy) == (
        slurm.ok,
        slurm.patient,
        slurm.unhealthy,
    )
    if not slurm.ok:
        assert merged == slurm  # nothing to lay the readings over


def test_a_node_agents_own_jobs_are_never_taken_for_runs() -> None:
    agent = replace(AGENT, jobs={"9-1": AgentJobState("9-1", "exited", 0)})
    assert with_utilization(SLURM, agent).jobs == {"7-1": RUN}


# --- the pool poller: which hosts' agents are polled, alongside the Slurm read -----------


def policy_with(utilization: str) -> PolicyConfig:
    raw = load_policy(BUNDLED_POLICY).model_dump(mode="json", exclude_unset=True)
    raw["pools"] = {
        "cluster": {
            "executor": "slurm",
            "hosts": ["node01"],
            "slurm": {
                "partition": "gpu",
                "gres": {"T4-16GB": "t4"},
                "log_path": "/logs/{job_id}",
                "utilization": utilization,
            },
        }
    }
    return PolicyConfig.model_validate(raw)


def pools_with(
    policy: PolicyConfig, agents: object = None, slurm: object = None, *, dispatch: object = None
) -> Pools:
    """The cycle's pools over a test's agents' poll (and dispatcher) and Slurm reader."""
    executor = AgentsExecutor(agents, dispatch)  # type: ignore[arg-type]
    return Pools(policy, executor, kinds={"slurm": slurm_kind(slurm)})  # type: ignore[arg-type]


class FakeSlurm:
    """A Slurm read that waits (a while) for the agents' poll to have begun: it proves the
    two run at once."""

    def __init__(self, began: threading.Event) -> None:
        self.began, self.overlapped = began, False

    def read(
        self, policy: PolicyConfig, pool: object, targets: Sequence[Target]
    ) -> tuple[dict[str, HostReport], tuple[QueuedJob, ...] | None]:
        self.overlapped = self.began.wait(5)
        return {t.name: SLURM for t in targets}, ()


TARGETS = [Target("node01", "http://node01:8471"), Target("gpu-a", "http://gpu-a:8471")]


def test_with_utilization_agents_the_nodes_agents_are_polled_while_slurm_is_read() -> None:
    began = threading.Event()
    polled: list[list[str]] = []

    def agents(targets: Sequence[Target]) -> Mapping[str, HostReport]:
        polled.append([t.name for t in targets])
        if [t.name for t in targets] == ["node01"]:
            began.set()
            return {"node01": AGENT}
        return {t.name: HostReport(t.name, True) for t in targets}

    slurm = FakeSlurm(began)
    poller = pools_with(policy_with("agents"), agents, slurm)
    try:
        reports = poller(TARGETS)
    finally:
        poller.close()
    assert slurm.overlapped
    assert sorted(polled) == [["gpu-a"], ["node01"]]  # the agent host's round is its own
    assert used(reports["node01"])[0] == (0, 97.0, 3.0, "GPU-0", "Tesla T4")
    assert reports["gpu-a"] == HostReport("gpu-a", True)


def test_without_utilization_no_nodes_agent_is_polled() -> None:
    polled: list[list[str]] = []

    def agents(targets: Sequence[Target]) -> Mapping[str, HostReport]:
        polled.append([t.name for t in targets])
        return {t.name: HostReport(t.name, True) for t in targets}

    began = threading.Event()
    began.set()
    poller = pools_with(policy_with("none"), agents, FakeSlurm(began))
    reports = poller(TARGETS)
    poller.close()
    assert polled == [["gpu-a"]]
    assert reports["node01"] == SLURM


def test_a_failed_poll_of_the_nodes_agents_leaves_slurms_reports(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def agents(targets: Sequence[Target]) -> Mapping[str, HostReport]:
        if [t.name for t in targets] == ["node01"]:
            raise RuntimeError("the poller broke")
        return {t.name: HostReport(t.name, True) for t in targets}

    began = threading.Event()
    began.set()
    poller = pools_with(policy_with("agents"), agents, FakeSlurm(began))
    reports = poller(TARGETS)
    poller.close()
    assert reports["node01"] == SLURM and reports["gpu-a"].ok
    assert "the poller broke" in caplog.text


def test_a_silent_nodes_agent_is_logged_once_then_again_when_it_answers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answers = [HostReport("node01", False, error="refused")] * 2 + [AGENT]

    def agents(targets: Sequence[Target]) -> Mapping[str, HostReport]:
        return {"node01": answers.pop(0)}

    began = threading.Event()
    began.set()
    caplog.set_level("INFO", logger="scheduler.slurm.executor")
    poller = pools_with(policy_with("agents"), agents, FakeSlurm(began))
    try:
        seen = [poller(TARGETS[:1])["node01"] for _ in range(3)]
    finally:
        poller.close()
    assert [r.gpus[0].utilization_pct for r in seen] == [None, None, 97.0]
    assert all(r.ok and r.unhealthy is None for r in seen)
    said = [r.getMessage() for r in caplog.records if r.name == "scheduler.slurm.executor"]
    assert len(said) == 2
    assert "does not answer" in said[0] and "refused" in said[0]
    assert "answers again" in said[1]


def test_the_utilization_setting_is_checked() -> None:
    with pytest.raises(ValueError, match="utilization"):
        policy_with("nvml")
    assert policy_with("none").pools["cluster"].options.utilization == "none"  # type: ignore[union-attr]


def test_an_agent_that_never_answers_costs_the_poll_only_its_timeout() -> None:
    # It takes the connection and says nothing: only the poll's timeout ends the wait.
    mute = socket.socket()
    mute.bind(("127.0.0.1", 0))
    mute.listen()
    url = f"http://127.0.0.1:{mute.getsockname()[1]}"
    began = threading.Event()
    began.set()
    agents = Poller("token", timeout=0.5)
    poller = pools_with(policy_with("agents"), agents, FakeSlurm(began))
    try:
        start = time.monotonic()
        report = poller([Target("node01", url)])["node01"]
        took = time.monotonic() - start
    finally:
        poller.close()  # the agents' poller with it
        mute.close()
    assert report == SLURM  # Slurm's read as it was: the node up, its run on
    assert took < 3.0, took


class RecordingAgents:
    """The agents' dispatcher, recording the revocations it is asked to send."""

    def __init__(self) -> None:
        self.revoked: list[tuple[str, str, str]] = []

    def revoke(self, host: str, url: str, token: str) -> bool:
        self.revoked.append((host, url, token))
        return True


def test_a_revoked_token_is_sent_to_a_slurm_nodes_agent_only_where_one_reports() -> None:
    agents = RecordingAgents()
    with_agents = pools_with(policy_with("agents"), dispatch=agents)
    assert with_agents.revoke("node01", "https://node01:8471", "old-token")
    assert with_agents.revoke("gpu-a", "https://gpu-a:8471", "old-a")  # an agent host, as ever
    assert agents.revoked == [
        ("node01", "https://node01:8471", "old-token"),
        ("gpu-a", "https://gpu-a:8471", "old-a"),
    ]
    agents.revoked.clear()
    without = pools_with(policy_with("none"), dispatch=agents)
    assert without.revoke("node01", "https://node01:8471", "old-token")  # nothing holds it
    assert agents.revoked == []
