"""What the cycle hands an executor, against real agents over HTTP: each start order names
its GPU type and estimated wall time (what Slurm's --gres and --time are made of), and an
executor's refusal code reaches the job's notice, said in the reader's words."""

from __future__ import annotations

from datetime import timedelta

import pytest
from agent_world import job, make_cycle, submit
from sqlmodel import Session, select

from bot.notice_words import event_sentence
from scheduler.app import Paika
from scheduler.dispatch import AgentDispatcher, DispatchError, StartOrder
from scheduler.notices.events import EventCode, EventKind, RecordingObserver
from storage.models import Job, JobState, Team

TOKEN = "test-token-0123456789"


class Recording(AgentDispatcher):
    """The agents' own dispatcher, keeping every order it was given."""

    def __init__(self) -> None:
        super().__init__(TOKEN, timeout=2.0)
        self.orders: list[StartOrder] = []

    def start(self, order: StartOrder) -> None:
        self.orders.append(order)
        super().start(order)


class RefusingUnmapped(AgentDispatcher):
    """Refuses every start as the Slurm executor refuses a job whose owner has no account."""

    def start(self, order: StartOrder) -> None:
        raise DispatchError(
            order.host,
            order.job_id,
            "unmapped_user: no Unix account is mapped to its owner",
            bad_order=True,
            reached=False,
            code="unmapped_user",
        )


def test_each_order_names_its_gpu_type_and_wall_time(world: Paika) -> None:
    dispatcher = Recording()
    cycle = make_cycle(world, RecordingObserver())
    cycle.dispatcher = dispatcher
    submit(world, "typed", "sleep 30", gpus=2, hours=3, extra="type=T4-16GB")
    cycle.run_once()
    (order,) = dispatcher.orders
    assert (order.host, order.gpu_type, order.wall_hours) == ("gpu-b", "T4-16GB", 1.5)


def test_the_wall_time_an_executor_is_given_is_the_one_the_policy_plans_with(
    world: Paika,
) -> None:
    """An owner whose runs take twice their estimates is planned at twice the estimate; the
    order (Slurm's --time) must say so too, or Slurm would end the run while the plan has it
    still going."""
    now = world.clock.now()
    with Session(world.engine) as session:
        team = session.exec(select(Team).where(Team.name == "vision")).one()
        for age in (30, 40, 50):
            ended = now - timedelta(hours=age)
            session.add(
                Job(name="done", owner="UALICE", team_id=team.id or 0, gpus=2, est_gpu_hours=4.0,
                    command="true", state=JobState.SUCCEEDED, priority="normal",
                    submitted_at=ended - timedelta(hours=5), started_at=ended - timedelta(hours=4),
                    ended_at=ended)
            )  # fmt: skip
        session.commit()
    dispatcher = Recording()
    cycle = make_cycle(world, RecordingObserver())
    cycle.dispatcher = dispatcher
    submit(world, "typed", "sleep 30", gpus=2, hours=3, extra="type=T4-16GB")
    cycle.run_once()
    (order,) = dispatcher.orders
    assert order.wall_hours == pytest.approx(3.0)  # 3 GPU-hours on 2 GPUs, times 2


def test_a_refusal_code_is_told_to_the_owner_in_their_words(world: Paika) -> None:
    notifier = RecordingObserver()
    cycle = make_cycle(world, notifier)
    cycle.dispatcher = RefusingUnmapped(TOKEN)
    submit(world, "nobody-runs-it", "sleep 30", extra="type=T4-16GB")
    cycle.run_once()
    assert job(world, "nobody-runs-it").state == JobState.FAILED
    (refused,) = [e for e in notifier.events if e.code is EventCode.START_REFUSED]
    assert refused.kind is EventKind.JOB_FAILED and refused.detail["dispatch"] == "unmapped_user"
    english, chinese = event_sentence("en", refused), event_sentence("zh", refused)
    assert "no Unix account is mapped to its owner or their team" in english
    assert "/gpu admin account set" in english and "没有映射 Unix 账号" in chinese
