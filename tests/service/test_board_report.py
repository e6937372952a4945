"""`/gpu board`, `/gpu report` and `/gpu lang`, as users type them, on every backend."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta

import pytest
from sqlmodel import Session, select

from bot.console import render
from bot.i18n import wait_words
from scheduler.app import Paika, Reply
from scheduler.policy.plan import WaitCode
from scheduler.service.board import BoardResult, CardState, TypeSummary
from scheduler.service.prefs import language_of
from scheduler.service.report import JOB_LIMIT, ReportResult
from storage.models import Allocation, Gpu, Host, Job, JobState, LedgerEntry, Team

SUBMIT = 'submit name={name} gpus={gpus} hours=4 priority={priority} data={data} cmd="python train.py"{team}'


def gpu(paika: Paika, user: str, text: str) -> Reply:
    reply = paika.run(text, user)
    assert reply.ok, reply.text
    return reply


def refused(paika: Paika, user: str, text: str) -> str:
    reply = paika.run(text, user)
    assert not reply.ok, reply.text
    return reply.text


@pytest.fixture
def people(paika: Paika) -> Paika:
    """alice and bob in vision, nick in nlp."""
    for user, team in [("UALICE", "vision"), ("UBOB", "vision"), ("UNICK", "nlp")]:
        gpu(paika, "UADMIN", f"admin member add <@{user}> team={team}")
    return paika


def _team_id(session: Session, name: str) -> int:
    return session.exec(select(Team.id).where(Team.name == name)).one() or 0


def _running(session: Session, name: str, owner: str, team: str, started: datetime) -> Job:
    job = Job(
        name=name,
        owner=owner,
        team_id=_team_id(session, team),
        est_gpu_hours=100,
        command="python train.py",
        state=JobState.RUNNING,
        submitted_at=started,
        started_at=started,
    )
    session.add(job)
    session.flush()
    return job


def _host(
    session: Session, name: str, cards: Sequence[dict[str, object]], **fields: object
) -> list[Gpu]:
    host = Host(name=name, url=f"https://{name}:8470", added_at=fields.pop("at"), **fields)  # type: ignore[arg-type]
    session.add(host)
    session.flush()
    rows = [Gpu(host_id=host.id or 0, index=i, **card) for i, card in enumerate(cards)]  # type: ignore[arg-type]
    session.add_all(rows)
    session.flush()
    return rows


def _hold(session: Session, job: Job, cards: Sequence[Gpu], since: datetime) -> None:
    session.add_all(
        Allocation(job_id=job.id or 0, gpu_id=c.id or 0, active_gpu_id=c.id, started_at=since)
        for c in cards
    )


A100 = {"gpu_type": "A100-80GB", "memory_gib": 80}
T4 = {"gpu_type": "T4-16GB", "memory_gib": 16}


@pytest.fixture
def cluster(people: Paika) -> Paika:
    """gpu-01 up: 2 busy, 1 idle-held, 1 free with a little foreign memory;
    gpu-02 down; gpu-03 draining (one free, one used outside paika);
    gpu-04 degraded: a held card with no reading yet, an unhealthy card."""
    now = people.clock.now()
    with Session(people.engine) as session:
        one = _host(
            session,
            "gpu-01",
            [
                {**A100, "utilization_pct": 97.0},
                {**A100, "utilization_pct": 88.0},
                {**A100, "utilization_pct": 1.0},
                {**A100, "utilization_pct": 0.0, "foreign_memory_gib": 0.5},
            ],
            state="up",
            at=now,
        )
        _host(session, "gpu-02", [T4, T4], state="down", at=now)
        _host(
            session,
            "gpu-03",
            [T4, {**T4, "foreign_memory_gib": 9.0}],
            state="up",
            draining=True,
            at=now,
        )
        four = _host(
            session,
            "gpu-04",
            [A100, {**A100, "healthy": False}],
            state="degraded",
            at=now,
        )
        bert = _running(session, "bert", "UALICE", "vision", now - timedelta(hours=1))
        stalled = _running(session, "stalled", "UBOB", "vision", now - timedelta(hours=2))
        fresh = _running(session, "fresh", "UNICK", "nlp", now)
        _hold(session, bert, one[:2], bert.started_at or now)
        _hold(session, stalled, one[2:3], now)
        _hold(session, fresh, four[:1], now)
        session.commit()
    return people


def _board(paika: Paika, user: str = "UALICE") -> tuple[BoardResult, str]:
    reply = gpu(paika, user, "board")
    assert isinstance(reply.result, BoardResult)
    return reply.result, reply.text


def test_the_board_shows_each_card_as_the_scheduler_treats_it(cluster: Paika) -> None:
    board, text = _board(cluster)
    assert [host.name for host in board.hosts] == ["gpu-01", "gpu-02", "gpu-03", "gpu-04"]
    states = {
        host.name: [(card.index, card.state, card.job_id) for card in host.cards]
        for host in board.hosts
    }
    assert states == {
        "gpu-01": [
            (0, CardState.BUSY, 1),
            (1, CardState.BUSY, 1),
            (2, CardState.IDLE_HELD, 2),
            (3, CardState.FREE, None),  # 0.5 GiB foreign is within the policy's slack
        ],
        "gpu-02": [(0, CardState.DOWN, None), (1, CardState.DOWN, None)],
        "gpu-03": [(0, CardState.DRAINING, None), (1, CardState.FOREIGN, None)],
        # A degraded host is still scheduled on; no reading yet is not idle.
        "gpu-04": [(0, CardState.BUSY, 3), (1, CardState.DOWN, None)],
    }
    held = board.hosts[0].cards[0]
    assert (held.job_name, held.owner, held.priority, held.since) == (
        "bert",
        "UALICE",
        "normal",
        cluster.clock.now() - timedelta(hours=1),
    )
    # Cheapest type first; down, foreign and draining all count as unavailable.
    assert board.types == (
        TypeSummary("T4-16GB", total=4, free=0, busy=0, idle_held=0, down=4),
        TypeSummary("A100-80GB", total=6, free=1, busy=3, idle_held=1, down=1),
    )
    assert "A100-80GB: 6 GPUs · 1 free · 3 busy · 1 idle but held · 1 unavailable" in text
    assert (
        "gpu-01: gpu0-1 ▣ #1 bert (<@UALICE>) · gpu2 ◌ #2 stalled (<@UBOB>) idle but held"
        " · gpu3 □ free" in text
    )
    assert "gpu-02 (down): gpu0-1 ✕ down" in text
    assert "gpu-03 (draining): gpu0 ▭ draining · gpu1 ◆ used outside paika" in text
    assert "gpu-04 (degraded): gpu0 ▣ #3 fresh (<@UNICK>) · gpu1 ✕ down" in text


def test_the_board_counts_the_queue_and_names_the_next_jobs(cluster: Paika) -> None:
    for user, name, gpus, priority, data, team in [
        ("UALICE", "small", 1, "normal", "ready", ""),
        ("UALICE", "copying", 1, "normal", "pending", ""),
        ("UNICK", "filler", 1, "idle", "ready", ""),
        ("UADMIN", "urgent", 4, "core", "ready", " team=vision"),
        *[("UBOB", f"sweep-{i}", 2, "normal", "ready", "") for i in range(4)],
    ]:
        gpu(
            cluster,
            user,
            SUBMIT.format(name=name, gpus=gpus, priority=priority, data=data, team=team),
        )
    board, text = _board(cluster)
    assert board.running == 3
    assert board.waiting_by_class == {"core": 1, "normal": 6, "idle": 1}
    assert board.waiting_for_data == 1
    assert len(board.next_up) == 5
    assert board.next_up[0].job.name == "urgent"
    # The same order and reasons as /gpu queue, less the job still waiting for its data.
    queue = gpu(cluster, "UALICE", "queue").result
    can_start = [v for v in queue.waiting if v.job.state != JobState.WAITING_DATA]  # type: ignore[attr-defined]
    assert [v.job.id for v in board.next_up] == [v.job.id for v in can_start[:5]]
    assert "copying" not in [v.job.name for v in board.next_up]
    assert all(view.wait is not None for view in board.next_up)
    places = [v.wait.position for v in board.next_up]  # type: ignore[union-attr]
    assert places == sorted(places) and places[0] == 1
    assert (
        "Queue: 3 running · 8 waiting (1 core, 6 normal, 1 idle), 1 of them waiting for data"
        in text
    )
    assert "Next up:\n  1. #7 urgent · vision · core · 4×GPU — " in text


def test_next_up_names_the_jobs_that_can_start_not_those_waiting_for_their_data(
    cluster: Paika,
) -> None:
    # Submitted first and of the highest class, but its data is still being copied: it
    # heads the queue yet cannot start, so the next job to start is the one behind it.
    for user, name, priority, data, team in [
        ("UADMIN", "staged", "core", "pending", " team=vision"),
        ("UALICE", "copying", "normal", "pending", ""),
        ("UALICE", "small", "normal", "ready", ""),
        ("UNICK", "filler", "idle", "ready", ""),
    ]:
        gpu(
            cluster, user, SUBMIT.format(name=name, gpus=1, priority=priority, data=data, team=team)
        )
    board, text = _board(cluster)
    assert [v.job.name for v in board.next_up] == ["small", "filler"]
    assert board.waiting_for_data == 2
    assert "staged" not in text.split("Next up:")[1]
    queue = gpu(cluster, "UALICE", "queue").result
    assert [v.job.name for v in queue.waiting][0] == "staged"  # type: ignore[attr-defined]


def test_an_empty_install_says_how_to_add_hosts(paika: Paika) -> None:
    board, text = _board(paika, "UADMIN")
    assert board.hosts == () and board.types == () and board.next_up == ()
    assert "No GPU hosts are registered yet; an admin adds them with /gpu admin host add" in text
    assert "Queue: 0 running · 0 waiting" in text


def _ledger(
    session: Session,
    job: Job,
    gpu_type: str,
    started: datetime,
    ended: datetime,
    hours: float,
    cost: float,
) -> None:
    session.add(
        LedgerEntry(
            job_id=job.id or 0,
            team_id=job.team_id,
            gpu_type=gpu_type,
            gpu_hours=hours,
            cost=cost,
            started_at=started,
            ended_at=ended,
            recorded_at=ended,
        )
    )


def _finished(session: Session, name: str, owner: str, team: str, ended: datetime) -> Job:
    job = _running(session, name, owner, team, ended - timedelta(days=1))
    job.state, job.ended_at = JobState.SUCCEEDED, ended
    session.add(job)
    session.flush()
    return job


@pytest.fixture
def spent(people: Paika) -> Paika:
    """Over the last 7 days: a run crossing the period's start, one inside, one before it,
    and two still running (one since before the period)."""
    now = people.clock.now()
    day = timedelta(days=1)
    with Session(people.engine) as session:
        crossing = _finished(session, "crossing", "UALICE", "vision", now - 6 * day)
        crossing.output, crossing.metrics = "s3://ckpt/crossing", {"f1": 91.2}
        # 48 wall hours on one A100, 24 of them inside the period.
        _ledger(session, crossing, "A100-80GB", now - 8 * day, now - 6 * day, 48.0, 105.6)
        inside = _finished(session, "inside", "UNICK", "nlp", now - 2 * day)
        _ledger(session, inside, "T4-16GB", now - 3 * day, now - 2 * day, 10.0, 3.5)
        before = _finished(session, "before", "UALICE", "vision", now - 10 * day)
        _ledger(session, before, "A100-80GB", now - 20 * day, now - 10 * day, 240.0, 528.0)
        a100s = _host(session, "gpu-01", [A100, A100], state="up", at=now)
        t4s = _host(session, "gpu-02", [T4], state="up", at=now)
        running = _running(session, "long-run", "UBOB", "vision", now - timedelta(hours=3))
        _hold(session, running, a100s, now - timedelta(hours=3))
        ancient = _running(session, "ancient", "UNICK", "nlp", now - 10 * day)
        _hold(session, ancient, t4s, now - 10 * day)
        session.commit()
    return people


def _report(paika: Paika, text: str = "report") -> ReportResult:
    reply = gpu(paika, "UBOB", text)
    assert isinstance(reply.result, ReportResult)
    return reply.result


def test_the_report_prorates_at_the_edge_and_counts_open_allocations(spent: Paika) -> None:
    report = _report(spent)
    now = spent.clock.now()
    assert (report.start, report.end, report.team) == (now - timedelta(days=7), now, None)
    cells = {
        (r.team, r.gpu_type): (round(r.gpu_hours, 6), round(r.cost, 6), r.jobs) for r in report.rows
    }
    assert cells == {
        # half of "crossing" (24 h, 52.8) and 2 GPUs × 3 h of "long-run" at 2.20
        ("vision", "A100-80GB"): (30.0, 66.0, 2),
        # "inside" whole, and 7 days × 24 h of "ancient" at 0.35
        ("nlp", "T4-16GB"): (178.0, 62.3, 2),
    } and [(r.team, r.gpu_type) for r in report.rows] == [
        ("nlp", "T4-16GB"),
        ("vision", "A100-80GB"),
    ]
    assert round(report.total_gpu_hours, 6) == 208.0 and round(report.total_cost, 6) == 128.3
    assert [(j.name, round(j.cost, 6)) for j in report.jobs] == [
        ("ancient", 58.8),
        ("crossing", 52.8),
        ("long-run", 13.2),
        ("inside", 3.5),
    ]
    crossing = report.jobs[1]
    assert (crossing.team, crossing.owner, crossing.state, crossing.output, crossing.metrics) == (
        "vision",
        "UALICE",
        "succeeded",
        "s3://ckpt/crossing",
        {"f1": 91.2},
    )
    text = gpu(spent, "UBOB", "report").text
    assert "Total: 208.00 GPU-hours, cost 128.30, 4 jobs" in text
    assert (
        "#1 crossing · vision · <@UALICE> · succeeded · 24.00 GPU-h · cost 52.80 → s3://ckpt/crossing · f1=91.2"
        in text
    )
    assert (
        "long-run · vision · <@UBOB> · running · 6.00 GPU-h · cost 13.20 → no output recorded"
        in text
    )


def test_the_report_filters_by_team_and_period(spent: Paika) -> None:
    nlp = _report(spent, "report team=nlp")
    assert nlp.team == "nlp" and {j.name for j in nlp.jobs} == {"inside", "ancient"}
    assert round(nlp.total_cost, 6) == 62.3
    longer = _report(spent, "report team=vision days=30")
    assert {j.name for j in longer.jobs} == {"crossing", "before", "long-run"}
    assert round(longer.total_gpu_hours, 6) == 48 + 240 + 6
    # since= starts at midnight in the install's time zone (Asia/Shanghai, UTC+8).
    since = _report(spent, "report since=2026-10-30")
    assert since.start.isoformat() == "2026-10-29T16:00:00+00:00"
    assert {j.name for j in since.jobs} == {"inside", "ancient", "long-run"}


def test_the_report_refuses_days_with_since_and_unknown_teams(spent: Paika) -> None:
    assert refused(spent, "UBOB", "report days=3 since=2026-11-01") == (
        "Give days= or since=, not both: each sets where the report starts.\n"
        "Example: /gpu report days=30, or /gpu report since=2026-11-01"
    )
    assert 'There is no team "robotics"' in refused(spent, "UBOB", "report team=robotics")
    assert "is in the future" in refused(spent, "UBOB", "report since=2030-01-01")
    assert "days must be a whole number from 1 to 366" in refused(spent, "UBOB", "report days=0")


def test_the_report_lists_the_costliest_jobs_but_totals_all(people: Paika) -> None:
    now = people.clock.now()
    with Session(people.engine) as session:
        for i in range(JOB_LIMIT + 3):
            ended = now - timedelta(hours=1)
            job = _finished(session, f"run-{i}", "UALICE", "vision", ended)
            _ledger(session, job, "T4-16GB", ended - timedelta(hours=1), ended, 1.0, float(i))
        session.commit()
    report = _report(people)
    assert len(report.jobs) == JOB_LIMIT and report.job_count == JOB_LIMIT + 3
    assert report.jobs[0].name == f"run-{JOB_LIMIT + 2}"
    assert report.total_gpu_hours == JOB_LIMIT + 3
    assert "  … and 3 more" in gpu(people, "UBOB", "report").text


def test_an_empty_period_says_so(people: Paika) -> None:
    report = _report(people)
    assert report.rows == () and report.jobs == () and report.total_cost == 0
    assert "No GPU time was used in this period." in gpu(people, "UBOB", "report").text


def test_each_person_chooses_their_reply_language(people: Paika) -> None:
    reply = gpu(people, "UALICE", "lang zh")
    assert reply.text == "Replies are now in Chinese.\n之后的回复将使用中文。"
    # Anyone may choose, even someone paika does not know yet.
    assert "Replies are now in English." in gpu(people, "UNEWCOMER", "lang EN").text
    with Session(people.engine) as session:
        assert language_of(session, "UALICE", "en") == "zh"
        assert language_of(session, "UNEWCOMER", "zh") == "en"
        assert language_of(session, "UBOB", "en") == "en"  # never chose: the default
        assert language_of(session, "UBOB", "zh") == "zh"
    gpu(people, "UALICE", "lang en")
    with Session(people.engine) as session:
        assert language_of(session, "UALICE", "zh") == "en"


def test_an_unknown_language_is_refused_with_the_choices(people: Paika) -> None:
    assert refused(people, "UALICE", "lang fr") == (
        'language must be one of en, zh, got "fr".\nExample: /gpu lang zh'
    )
    assert "/gpu lang is missing language." in refused(people, "UALICE", "lang")
    with Session(people.engine) as session:
        assert language_of(session, "UALICE", "en") == "en"


def test_waits_carry_their_numbers_for_other_languages(cluster: Paika) -> None:
    for i in range(3):
        gpu(
            cluster,
            "UBOB",
            SUBMIT.format(name=f"wide-{i}", gpus=4, priority="normal", data="ready", team=""),
        )
    gpu(
        cluster,
        "UADMIN",
        SUBMIT.format(name="urgent", gpus=4, priority="core", data="ready", team=" team=vision"),
    )
    waits = {v.job.name: v.wait for v in gpu(cluster, "UALICE", "queue").result.waiting}  # type: ignore[attr-defined]
    behind = waits["wide-1"]
    assert behind is not None and behind.code is WaitCode.BEHIND_HIGHER_PRIORITY
    assert (behind.higher, behind.earlier) == (1, 1)
    assert wait_words("en", behind, behind.as_of) == (
        f"behind 1 job of higher priority for {behind.gpu_type}"
    )


# Two English words in a row: a sentence or label the console wrote itself.
ENGLISH = re.compile(r"\b[A-Za-z]{2,}(?: [A-Za-z]{2,})+\b")
# What a reply may quote as it was typed or stored: `/gpu` examples and the job's command.
QUOTED = re.compile(r"/gpu\b[^\n，。）]*|python train\.py")


def _in_chinese(paika: Paika, user: str, text: str) -> str:
    said = render(gpu(paika, user, text).result, paika.policy.zone, "zh")
    assert re.search(r"[\u4e00-\u9fff]", said), said
    assert not ENGLISH.findall(QUOTED.sub("", said)), said
    return said


def test_every_console_reply_reads_in_chinese(cluster: Paika) -> None:
    gpu(cluster, "UADMIN", "admin member add <@UVERA> team=vision role=approver")
    gpu(cluster, "UADMIN", "admin quota add team=vision hours=50 expires=2027-01-31 owner=<@UVERA>")
    submitted = _in_chinese(
        cluster,
        "UALICE",
        SUBMIT.format(name="copy", gpus=1, priority="normal", data="pending", team=""),
    )
    assert "任务 #4 copy 已为团队 vision 排队" in submitted and "排队位置：" in submitted
    gpu(
        cluster, "UBOB", SUBMIT.format(name="sweep", gpus=2, priority="idle", data="ready", team="")
    )
    assert "提优先级申请 #1" in _in_chinese(cluster, "UBOB", "bump #5 to=core reason=deadline")
    assert "已批准" in _in_chinese(cluster, "UVERA", "approve 1")
    assert "已于" in _in_chinese(cluster, "UVERA", "approve 1")  # decided before: unchanged
    status = _in_chinese(cluster, "UALICE", "status #4")
    assert "任务 #4 copy — 等待数据就绪" in status and "历史：" in status
    assert "运行中（3）：" in _in_chinese(cluster, "UALICE", "queue all")
    assert "已就绪" in _in_chinese(cluster, "UALICE", "ready #4")
    board = _in_chinese(cluster, "UALICE", "board")
    assert "图例：□ 空闲" in board and "gpu2 ◌ #2 stalled (<@UBOB>) 占用但闲置" in board
    # Used counts what running work has used so far: bert, 2 GPUs for an hour.
    assert "已用 2.0 / 50 卡时，剩余 48.0" in _in_chinese(cluster, "UALICE", "quota")


def test_the_report_reads_in_chinese(spent: Paika) -> None:
    report = _in_chinese(spent, "UBOB", "report")
    assert "合计：208.00 卡时，费用 128.30，4 个任务" in report
    assert "long-run · vision · <@UBOB> · 运行中 · 6.00 卡时 · 费用 13.20 → 未记录产出" in report
