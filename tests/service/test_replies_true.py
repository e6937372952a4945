"""Replies a new team found false, as they typed the commands (issue 29): each says what is so."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from sqlmodel import Session, select

from bot.blocks.replies import reply
from bot.i18n import t
from scheduler import checkup
from scheduler.app import Paika, Reply
from scheduler.checkup import Finding, Severity
from storage.models import Allocation, BumpRequest, BumpState, Gpu, Host, Job, JobState

SUBMIT = 'submit name={name} gpus={gpus} hours=2 priority=normal data=ready cmd="python t.py"'


def gpu(paika: Paika, user: str, text: str) -> Reply:
    reply = paika.run(text, user)
    assert reply.ok, reply.text
    return reply


@pytest.fixture
def team(paika: Paika) -> Paika:
    for user in ("UALICE", "UBOB"):
        gpu(paika, "UADMIN", f"admin member add <@{user}> team=vision")
    gpu(paika, "UADMIN", "admin member add <@UVERA> team=vision role=approver")
    return paika


def _start(paika: Paika, name: str, host: str, indices: Sequence[int]) -> None:
    """The job as the cycle leaves it once its start is confirmed: running on those cards."""
    now = paika.clock.now()
    with Session(paika.engine) as session:
        job = session.exec(select(Job).where(Job.name == name)).one()
        host_id = session.exec(select(Host.id).where(Host.name == host)).one()
        cards = session.exec(select(Gpu).where(Gpu.host_id == host_id)).all()
        job.state, job.started_at = JobState.RUNNING, now
        session.add(job)
        session.add_all(
            Allocation(job_id=job.id or 0, gpu_id=c.id or 0, active_gpu_id=c.id, started_at=now)
            for c in cards
            if c.index in indices
        )
        session.commit()


def _host(paika: Paika, name: str, cards: Sequence[tuple[str, float]], **fields: object) -> None:
    with Session(paika.engine) as session:
        host = Host(name=name, url=f"https://{name}:8470", added_at=paika.clock.now(), **fields)  # type: ignore[arg-type]
        session.add(host)
        session.flush()
        session.add_all(
            Gpu(host_id=host.id or 0, index=i, gpu_type=kind, memory_gib=mem)
            for i, (kind, mem) in enumerate(cards)
        )
        session.commit()


T4 = ("T4-16GB", 16.0)
A100 = ("A100-80GB", 80.0)


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"state": "down"}, "gpu-a (down)"),
        ({"state": "up", "draining": True}, "gpu-a (draining)"),
    ],
)
def test_a_job_whose_only_host_is_down_or_draining_waits_for_it(
    team: Paika, fields: dict[str, object], said: str
) -> None:
    _host(team, "gpu-t", [T4, T4], state="up")
    _host(team, "gpu-a", [A100, A100], **fields)
    gpu(team, "UALICE", SUBMIT.format(name="big", gpus=1) + " type=A100-80GB")
    text = gpu(team, "UALICE", "status big").text
    assert "no host can ever fit" not in text.lower()
    assert said in text and "waits for them" in text


def test_a_job_for_a_host_not_yet_seen_waits_for_it(team: Paika) -> None:
    _host(team, "gpu-t", [T4], state="up")
    gpu(team, "UADMIN", "admin host add gpu-new url=https://gpu-new:8470")
    gpu(team, "UALICE", SUBMIT.format(name="big", gpus=1) + " type=A100-80GB")
    text = gpu(team, "UALICE", "status big").text
    assert "no host can ever fit" not in text.lower()
    assert "gpu-new (not yet seen" in text


def test_never_fits_is_said_when_no_registered_host_could_fit(team: Paika) -> None:
    _host(team, "gpu-t", [T4, T4], state="up")
    _host(team, "gpu-a", [A100, A100], state="down")
    gpu(team, "UALICE", SUBMIT.format(name="huge", gpus=4) + " type=A100-80GB")
    text = gpu(team, "UALICE", "status huge").text
    assert "no host can ever fit this job" in text.lower()


def test_approving_a_bump_for_a_job_that_started_says_it_is_moot(team: Paika) -> None:
    _host(team, "gpu-a", [A100, A100, A100, A100], state="up")
    reply = gpu(team, "UALICE", SUBMIT.format(name="urgent", gpus=1).replace("normal", "core"))
    assert "bump request #" in reply.text
    _start(team, "urgent", "gpu-a", [0])
    with Session(team.engine) as session:
        request = session.exec(select(BumpRequest)).one()
    text = gpu(team, "UVERA", f"approve {request.id}").text
    assert "approved" not in text.lower(), text
    assert "already running" in text and "as normal" in text and "moot" in text
    with Session(team.engine) as session:
        closed = session.exec(select(BumpRequest)).one()
        job = session.exec(select(Job).where(Job.name == "urgent")).one()
    assert closed.state == BumpState.WITHDRAWN and job.priority == "normal"
    again = gpu(team, "UVERA", f"approve {request.id}").text
    assert "already withdrawn" in again and "nothing changed" in again


def test_a_running_job_s_status_names_the_host_and_cards_it_runs_on(team: Paika) -> None:
    _host(team, "gpu-t", [T4, T4], state="up")
    _host(team, "gpu-a", [A100, A100, A100, A100], state="up")
    gpu(team, "UALICE", SUBMIT.format(name="run", gpus=2))  # a T4 would do: cheapest fit
    _start(team, "run", "gpu-a", [1, 2])
    answer = gpu(team, "UALICE", "status run")
    assert "runs on: gpu-a (2× A100-80GB)" in answer.text, answer.text
    slack = json.dumps(
        ensure_ascii=False, obj=reply(answer.result, "en", ZoneInfo("UTC"), team.clock.now()).blocks
    )
    assert "Likely card type" not in slack and "T4-16GB" not in slack
    assert "Runs on" in slack and "gpu-a (2× A100-80GB)" in slack


def test_next_up_is_in_expected_start_order_numbered_without_gaps_and_without_quota_blocked(
    team: Paika,
) -> None:
    gpu(team, "UADMIN", "admin member add <@UNICK> team=nlp")
    gpu(team, "UADMIN", "admin quota add team=nlp hours=1 expires=2027-06-30 owner=<@UNICK>")
    _host(team, "gpu-a", [A100], state="up")
    _host(team, "gpu-t", [T4], state="up")
    long = SUBMIT.format(name="long", gpus=1).replace("hours=2", "hours=10")
    gpu(team, "UBOB", long + " type=A100-80GB")
    gpu(team, "UBOB", SUBMIT.format(name="short", gpus=1).replace("hours=2", "hours=1"))
    _start(team, "long", "gpu-a", [0])  # the A100 frees in about 10 h
    _start(team, "short", "gpu-t", [0])  # the T4 in about 1 h
    core = SUBMIT.format(name="big-core", gpus=1).replace("normal", "core")
    gpu(team, "UVERA", core + " type=A100-80GB")  # first in the queue, starts in about 10 h
    staged = SUBMIT.format(name="staged", gpus=1).replace("normal", "core")
    gpu(team, "UVERA", staged.replace("data=ready", "data=pending"))  # cannot start: no data
    gpu(team, "UNICK", SUBMIT.format(name="over-quota", gpus=1))  # 2 h asked, 1 h left
    gpu(team, "UALICE", SUBMIT.format(name="any-card", gpus=1))  # takes the T4 in about 1 h
    answer = gpu(team, "UALICE", "board")
    names = [view.job.name for view in answer.result.next_up]  # type: ignore[attr-defined]
    assert names == ["any-card", "big-core"], names
    lines = answer.text.split("Next up:")[1].strip().splitlines()
    assert lines[0].lstrip().startswith("1. #6 any-card"), lines
    assert lines[1].lstrip().startswith("2. #3 big-core"), lines
    assert "over-quota" not in answer.text.split("Next up:")[1]


def test_the_chinese_ready_label_means_ready_and_waiting_not_can_run_now() -> None:
    from bot.i18n import t

    for key in ("digest.ready", "digest.ready_none"):
        zh = t("zh", key, n=149)
        assert "立即" not in zh and "数据已就绪" in zh and "等待" in zh, zh


def test_quota_used_counts_what_running_jobs_have_used_so_far_as_the_report_does(
    team: Paika,
) -> None:
    gpu(team, "UADMIN", "admin quota add team=vision hours=10 expires=2027-06-30 owner=<@UVERA>")
    _host(team, "gpu-a", [A100, A100], state="up")
    gpu(team, "UALICE", SUBMIT.format(name="train", gpus=2).replace("hours=2", "hours=8"))
    _start(team, "train", "gpu-a", [0, 1])
    team.clock.advance(timedelta(minutes=45))  # 2 GPUs × 0.75 h = 1.5 GPU-hours so far
    text = gpu(team, "UALICE", "quota").text
    assert "1.5 of 10 GPU-hours used, 8.5 left" in text, text
    report = gpu(team, "UALICE", "report team=vision").text
    assert "1.5" in report, report


def test_cards_of_a_model_no_gpu_type_matches_are_not_shown_free(team: Paika) -> None:
    # An H800 host under a catalogue without H800: its cards were counted free, yet no job
    # could ask for them and nothing said so.
    _host(team, "gpu-h", [("NVIDIA H800", 80.0)] * 2, state="up")
    _host(team, "gpu-t", [T4], state="up")
    board = gpu(team, "UADMIN", "board")
    text = board.text
    assert "NVIDIA H800 is no GPU type of the policy" in text, text
    assert "paika doctor prints the line" in text
    h800 = next(s for s in board.result.types if s.gpu_type == "NVIDIA H800")  # type: ignore[attr-defined]
    assert (h800.free, h800.down, h800.listed) == (0, 2, False)
    t4 = next(s for s in board.result.types if s.gpu_type == "T4-16GB")  # type: ignore[attr-defined]
    assert (t4.free, t4.listed) == (1, True)
    zh = reply(board.result, "zh", ZoneInfo("UTC"), team.clock.now()).blocks
    slack = json.dumps(zh, ensure_ascii=False)
    assert "NVIDIA H800 不是策略中的卡型" in slack and "❔" in slack
    hosts = gpu(team, "UADMIN", "admin host list").text
    assert (
        "gpu-h · https://gpu-h:8470 · up · cards of a model no GPU type matches: 2× NVIDIA H800"
        in hosts
    )
    assert (
        "gpu-t · https://gpu-t:8470 · up" in hosts
        and "gpu-t · https://gpu-t:8470 · up ·" not in hosts
    )
    # Asking for those cards by their model says why there is no such type, not only "unknown".
    said = team.run(SUBMIT.format(name="h", gpus=1) + " type=H800", "UALICE")
    assert not said.ok and "H800 cards are on gpu-h, but the policy has no GPU type" in said.text
    other = team.run(SUBMIT.format(name="h", gpus=1) + " type=H200", "UALICE")
    assert not other.ok and 'Unknown GPU type "H200"' in other.text


def test_the_board_shows_admins_what_paika_doctor_last_found(team: Paika) -> None:
    found = [
        Finding(
            "policy.unpriced",
            Severity.WARN,
            {"path": "/etc/paika/policy.yml", "gpu_types": ["H800-80GB"]},
        ),
        Finding("agents.no_token", Severity.BLOCK),
        Finding("database.ok", Severity.OK, {"url": "sqlite://", "revision": "x"}),
    ]
    checkup.remember(found, team.clock.now())
    try:
        admin = gpu(team, "UADMIN", "board")
        member = gpu(team, "UALICE", "board")
    finally:
        checkup.forget()
    assert member.result.checkup is None  # type: ignore[attr-defined]
    kept = admin.result.checkup  # type: ignore[attr-defined]
    assert [f.code for f in kept.findings] == ["policy.unpriced", "agents.no_token"]
    slack = json.dumps(reply(admin.result, "en", ZoneInfo("UTC"), team.clock.now()).blocks)
    assert "what paika doctor found" in slack and "H800-80GB" in slack and "No agent token" in slack
    members = json.dumps(reply(member.result, "en", ZoneInfo("UTC"), team.clock.now()).blocks)
    assert "paika doctor found" not in members


def test_the_board_does_not_say_nothing_waits_when_jobs_wait_for_their_hosts(team: Paika) -> None:
    _host(team, "gpu-a", [A100, A100], state="down")
    gpu(team, "UALICE", SUBMIT.format(name="big", gpus=1) + " type=A100-80GB")
    board = gpu(team, "UALICE", "board")
    assert board.result.next_up == ()  # type: ignore[attr-defined]
    held = t("en", "board.none_can_start_held")
    assert held in board.text and t("en", "board.nothing_waiting") not in board.text
    slack = json.dumps(reply(board.result, "en", ZoneInfo("UTC"), team.clock.now()).blocks)
    assert json.dumps(held)[1:-1] in slack
