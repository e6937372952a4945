"""Block Kit builders: every output is valid Slack, within Slack's limits, escaped, and
says what it left out. Results are built from the real dataclasses, rows in memory."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import date, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from paika_test_time import T0
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from bot.blocks import ids
from bot.blocks.board import board_blocks
from bot.blocks.bump import bump_decided, bump_request
from bot.blocks.common import (
    BUTTON_TEXT,
    CONTEXT_ELEMENTS,
    HEADER_TEXT,
    ID_LENGTH,
    MESSAGE_BLOCKS,
    SECTION_TEXT,
    VALUE_LENGTH,
    VIEW_BLOCKS,
    Message,
    code_block,
    escape_keeping_mentions,
    fit,
    listing,
    mrkdwn_escape,
    slack_len,
)
from bot.blocks.home import home_view
from bot.blocks.notices import bump_decision_dm, job_event
from bot.blocks.replies import error, reply
from bot.console import render
from scheduler.grammar import help_for
from scheduler.notices.events import Event, EventCode, EventKind, announcement_of
from scheduler.notices.kinds import EVENT_KINDS
from scheduler.notices.outbox import Announcement
from scheduler.policy.admission import Admission, Verdict
from scheduler.policy.plan import Wait, WaitCode
from scheduler.policy.quota import QuotaState
from scheduler.results import Listing, Said, SaidCode
from scheduler.service.board import BoardResult, CardState, CardView, HostView, TypeSummary
from scheduler.service.bumps import BumpResult, DecisionResult
from scheduler.service.jobs import (
    ChangeNote,
    ChangeResult,
    JobView,
    QueueResult,
    StatusResult,
    SubmitResult,
)
from scheduler.service.prefs import LanguageChoice
from scheduler.service.quotas import QuotaListing, QuotaView
from scheduler.service.records import BumpRecord, EventRecord, JobRecord, LedgerRecord, QuotaRecord
from scheduler.service.report import JobOutcome, ReportResult, UsageRow
from storage.models import BumpRequest, Job, JobEvent, LedgerEntry, Quota

ZONE = ZoneInfo("Asia/Shanghai")
NOW = T0
HOUR = 3600.0
OWNER = "U0OWNER01"
APPROVER = "U0APPROV1"
EVIL = "<!channel> <@U123> <https://evil.example|click>"


# --- builders ------------------------------------------------------------------------------


def job(job_id: int = 12, name: str = "bert-ft", **fields: Any) -> JobRecord:
    values: dict[str, Any] = {
        "id": job_id,
        "name": name,
        "owner": OWNER,
        "team_id": 1,
        "priority": "normal",
        "gpus": 2,
        "gpu_types": ["A100-80GB"],
        "est_gpu_hours": 12.0,
        "data_ready": True,
        "command": "python train.py --lr 3e-4",
        "state": "queued",
        "submitted_at": NOW - timedelta(hours=1),
    }
    values.update(fields)
    return JobRecord.of(Job(**values))


def wait(
    job_id: int = 12,
    position: int = 3,
    code: WaitCode = WaitCode.BEHIND_HIGHER_PRIORITY,
    eta_in: float | None = 3 * HOUR,
    **fields: Any,
) -> Wait:
    values: dict[str, Any] = {
        "gpu_type": "A100-80GB",
        "higher": 2,
        "earlier": 0,
    }
    values.update(fields)
    eta = None if eta_in is None else NOW.timestamp() + eta_in
    return Wait(job_id, code, position, eta, **values)


def view(row: JobRecord | None = None, waits: Wait | None = None, team: str = "vision") -> JobView:
    row = row or job()
    return JobView(row, team, waits, "A100-80GB")


def waiting_view(job_id: int, position: int, **fields: Any) -> JobView:
    return view(job(job_id, f"job-{job_id}", **fields), wait(job_id, position))


def bump(state: str = "pending", **fields: Any) -> BumpRecord:
    values: dict[str, Any] = {
        "id": 7,
        "job_id": 12,
        "requested_by": "U0ASKER01",
        "from_priority": "normal",
        "to_priority": "core",
        "reason": "paper deadline on Friday",
        "created_at": NOW - timedelta(minutes=5),
        "state": state,
    }
    values.update(fields)
    if state != "pending":
        values.setdefault("decided_by", APPROVER)
        values.setdefault("decided_at", NOW)
    return BumpRecord.of(BumpRequest(**values))


def quota(quota_id: int = 3, days_left: int = 59, used: float = 120.0) -> QuotaView:
    row = Quota(
        id=quota_id,
        team_id=1,
        gpu_type="A100-80GB",
        gpu_hours=500.0,
        expires_on=NOW.date() + timedelta(days=days_left),
        owner=OWNER,
        created_by=APPROVER,
        created_at=NOW,
    )
    state = QuotaState(quota_id, "A100-80GB", 500.0, used, row.expires_on)
    return QuotaView(QuotaRecord.of(row), "vision", state, days_left)


def card(host: str, index: int, state: CardState, job_id: int | None = None) -> CardView:
    held = job_id is not None
    return CardView(
        host,
        index,
        "A100-80GB",
        80.0,
        state,
        utilization_pct=90.0 if held else None,
        job_id=job_id,
        job_name=f"job-{job_id}" if held else None,
        owner=OWNER if held else None,
        priority="normal" if held else None,
        since=NOW - timedelta(hours=2) if held else None,
    )


def board(hosts: int = 3, gpus: int = 8, next_up: int = 3) -> BoardResult:
    """A board whose hosts have one 1-GPU job per card, with every card state in it."""
    cycle = [CardState.BUSY, CardState.BUSY, CardState.IDLE_HELD, CardState.FREE]
    rows = []
    job_id = 100
    for h in range(hosts):
        name = f"gpu-{h:03d}"
        cards = []
        for i in range(gpus):
            state = cycle[(h + i) % len(cycle)]
            if h == 1 and i == gpus - 1:
                state = CardState.DOWN
            if h == 2 and i == gpus - 1:
                state = CardState.FOREIGN
            held = state in (CardState.BUSY, CardState.IDLE_HELD)
            job_id += held
            cards.append(card(name, i, state, job_id if held else None))
        rows.append(HostView(name, "down" if h == 1 else "up", h == 2, tuple(cards)))
    total = hosts * gpus
    free = sum(c.state is CardState.FREE for host in rows for c in host.cards)
    busy = sum(c.state is CardState.BUSY for host in rows for c in host.cards)
    idle = sum(c.state is CardState.IDLE_HELD for host in rows for c in host.cards)
    summary = TypeSummary("A100-80GB", total, free, busy, idle, total - free - busy - idle)
    return BoardResult(
        NOW,
        tuple(rows),
        (summary,),
        running=busy + idle,
        waiting_by_class={"core": 1, "normal": 12, "idle": 4},
        waiting_for_data=2,
        next_up=tuple(waiting_view(900 + i, i + 1) for i in range(next_up)),
    )


def queue(waiting: int, running: int = 3) -> QueueResult:
    return QueueResult(
        "all",
        running=[
            view(job(500 + i, f"run-{i}", state="running", started_at=NOW - timedelta(hours=i)))
            for i in range(running)
        ],
        waiting=[
            waiting_view(1000 + i, i + 1, data_ready=i % 3 != 0, state="queued")
            for i in range(waiting)
        ],
    )


def status() -> StatusResult:
    row = job(
        state="failed",
        state_reason="exited with 1",
        started_at=NOW - timedelta(hours=3),
        ended_at=NOW - timedelta(hours=1),
        output="s3://ckpt/bert-ft/final",
        metrics={"f1": 91.2, "loss": 0.31},
        image="nvcr.io/nvidia/pytorch:24.05-py3",
        data_location="/mnt/nas/squad",
        command="python train.py " + "--flag & " * 300,  # escaping makes it grow
        template="bert-base",
        template_version=3,
    )
    history = [
        EventRecord.of(
            JobEvent(job_id=12, at=NOW - timedelta(minutes=60 - i), to_state=s, actor="paika")
        )
        for i, s in enumerate(["queued", "running", "preempted", "queued"] * 6 + ["failed"])
    ]
    ledger = [
        LedgerRecord.of(
            LedgerEntry(
                job_id=12,
                team_id=1,
                gpu_type="A100-80GB",
                gpu_hours=2.5,
                cost=10.0,
                started_at=NOW - timedelta(hours=3),
                ended_at=NOW - timedelta(hours=1),
                recorded_at=NOW,
            )
        )
    ]
    spec = {
        "name": "bert-ft",
        "type": ["A100-80GB", "H100-80GB"],
        "cmd": row.command,
        "template": "bert-base",
        "template_version": 3,
    }
    return StatusResult(view(row), history, [bump("approved")], ledger, spec=spec)


def report(jobs: int = 40) -> ReportResult:
    outcomes = tuple(
        JobOutcome(
            i,
            f"job-{i}",
            "vision",
            OWNER,
            "succeeded",
            100.0 - i,
            400.0 - i,
            "s3://ckpt" if i % 2 else None,
            {"top1": 76.2} if i % 3 else {},
        )
        for i in range(1, jobs + 1)
    )
    rows = (
        UsageRow("vision", "A100-80GB", 700.0, 2800.0, 30),
        UsageRow("nlp", "T4-16GB", 50.0, 25.0, 10),
    )
    return ReportResult(NOW - timedelta(days=7), NOW, None, rows, outcomes, 750.0, 2825.0)


def event(kind: EventKind, name: str = "bert-ft") -> Announcement:
    if kind in (EventKind.HOST_DOWN, EventKind.HOST_UP):
        code = EventCode.HOST_DOWN if kind is EventKind.HOST_DOWN else EventCode.HOST_BACK
        return announcement_of(
            Event(kind, NOW, code, host="gpu-01", detail={"error": "connection refused"})
        )
    where = {"hosts": ["gpu-01"], "gpus": 2, "gpu_type": "A100-80GB"}
    return announcement_of(
        Event(kind, NOW, EventCode.STARTED, 12, name=name, owner=OWNER, detail=where)
    )


# --- checks --------------------------------------------------------------------------------


def walk(node: object) -> Iterator[dict[str, Any]]:
    """Every dict inside a block tree."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from walk(item)


def check_limits(blocks: list[dict[str, Any]]) -> None:
    for block in blocks:
        if block["type"] == "section" and "text" in block:
            assert slack_len(block["text"]["text"]) <= SECTION_TEXT
        if block["type"] == "header":
            assert len(block["text"]["text"]) <= HEADER_TEXT
        if block["type"] == "context":
            assert len(block["elements"]) <= CONTEXT_ELEMENTS
    for node in walk(blocks):
        for key in ("action_id", "block_id", "callback_id"):
            if key in node:
                assert len(node[key]) <= ID_LENGTH
        if node.get("type") == "button":
            assert len(node["text"]["text"]) <= BUTTON_TEXT
            assert len(node.get("value", "")) <= VALUE_LENGTH


def check_message(message: Message) -> None:
    assert message.text.strip()
    assert 1 <= len(message.blocks) <= MESSAGE_BLOCKS
    for block in Block.parse_all(message.blocks):
        assert block is not None
        block.validate_json()
    check_limits(message.blocks)
    json.dumps(message.blocks)  # plain data, ready to post


def check_view(view: dict[str, Any]) -> None:
    assert len(view["blocks"]) <= VIEW_BLOCKS
    View(**view).validate_json()
    check_limits(view["blocks"])


def mrkdwn_texts(message: Message) -> list[str]:
    """Everything Slack parses for mentions and links: the text and every mrkdwn object."""
    return [message.text] + [
        node["text"] for node in walk(message.blocks) if node.get("type") == "mrkdwn"
    ]


def shown(message: Message) -> str:
    return "\n".join(
        [message.text]
        + [node["text"] for node in walk(message.blocks) if isinstance(node.get("text"), str)]
    )


# --- every builder, in both languages --------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[str], Message]


def _reply(result: object) -> Callable[[str], Message]:
    return lambda lang: reply(result, lang, ZONE, NOW)


def _event(kind: EventKind) -> Callable[[str], Message]:
    return lambda lang: job_event(event(kind), lang, ZONE)


CASES = [
    Case("submit", _reply(SubmitResult(view(waits=wait()), None))),
    Case(
        "submit with bump, data pending and a backlog warning",
        _reply(
            SubmitResult(
                view(job(data_ready=False, data_location="s3://data/squad"), wait()),
                bump(),
                Admission(Verdict.WARN, 80.0, 48.0),
            )
        ),
    ),
    Case("change", _reply(ChangeResult(view(waits=wait()), True, ChangeNote.CANCELLED))),
    Case("change, nothing changed", _reply(ChangeResult(view(), False, ChangeNote.ALREADY_READY))),
    Case("status", _reply(status())),
    Case("queue", _reply(queue(5))),
    Case("queue, empty", _reply(QueueResult("mine"))),
    Case("queue of 500", _reply(queue(500, running=40))),
    Case("bump applied", _reply(BumpResult(view(waits=wait()), None, True))),
    Case("bump pending", _reply(BumpResult(view(), bump(), False))),
    Case("decision", _reply(DecisionResult(bump("approved"), view(job(priority="core")), True))),
    Case("decision unchanged", _reply(DecisionResult(bump("denied"), view(), False))),
    Case("quotas", _reply(QuotaListing([quota(), quota(4, days_left=10)]))),
    Case("quotas, none", _reply(QuotaListing([], SaidCode.QUOTA_NONE_FOR_TEAM))),
    Case("quotas, many", _reply(QuotaListing([quota(i) for i in range(400)]))),
    Case("help", _reply(help_for())),
    Case("help for a group", _reply(help_for(("admin",)))),
    Case("help for submit", _reply(help_for(("submit",)))),
    Case(
        "said",
        _reply(
            Said(SaidCode.MEMBER_ADDED, {"user": "U0NEW0001", "team": "vision", "role": "admin"})
        ),
    ),
    Case("listing, none", _reply(Listing([], SaidCode.TEMPLATE_NONE))),
    Case(
        "listing of 500 hosts",
        _reply(
            Listing(
                [
                    Said(
                        SaidCode.HOST_ROW_DRAINING,
                        {
                            "name": f"gpu-{i:03}",
                            "url": f"http://10.0.0.{i % 250}:8470",
                            "state": "up",
                        },
                    )
                    for i in range(500)
                ],
                SaidCode.HOST_NONE,
            )
        ),
    ),
    Case("language", _reply(LanguageChoice("U0NEW0001", "zh"))),
    Case("board", _reply(board())),
    Case("board, no hosts", _reply(BoardResult(NOW, (), (), 0, {}, 0, ()))),
    Case("board of 256 hosts", _reply(board(256, 8))),
    Case("report", _reply(report())),
    Case("report, empty", _reply(ReportResult(NOW, NOW, "vision", (), (), 0.0, 0.0))),
    Case("error", lambda lang: error("hours must be a number.", lang, "hours=24")),
    Case("bump request", lambda lang: bump_request(bump(), view(waits=wait()), lang)),
    Case("bump approved", lambda lang: bump_decided(bump("approved"), view(), lang, ZONE)),
    Case(
        "bump denied",
        lambda lang: bump_decided(bump("denied", decision_reason="full"), view(), lang, ZONE),
    ),
    Case("bump withdrawn", lambda lang: bump_decided(bump("withdrawn"), view(), lang, ZONE)),
    Case(
        "bump decision dm",
        lambda lang: bump_decision_dm(DecisionResult(bump("approved"), view(), True), lang),
    ),
    Case(
        "bump denial dm",
        lambda lang: bump_decision_dm(
            DecisionResult(bump("denied", decision_reason="no room"), view(), True), lang
        ),
    ),
    *(Case(f"event {kind.value}", _event(kind)) for kind in sorted(EVENT_KINDS)),
]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_every_builder_gives_valid_slack_within_limits(case: Case, lang: str) -> None:
    check_message(case.build(lang))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_home_tab_is_a_valid_view_within_100_blocks(lang: str) -> None:
    mine = [view(waits=wait()), view(job(13, "gpt", state="running", started_at=NOW))]
    home = home_view(OWNER, mine, board(256, 8), [quota(), quota(4, 10)], lang, ZONE, NOW)
    assert home["type"] == "home"
    check_view(home)


# --- what users notice -----------------------------------------------------------------------


def test_a_queue_of_500_waiting_jobs_fits_and_says_how_many_more() -> None:
    message = reply(queue(500), "en", ZONE, NOW)
    check_message(message)
    text = shown(message)
    listed = [n for n in range(1000, 1500) if f"*#{n}*" in text]
    left = 500 - len(listed)
    assert listed == list(range(1000, 1000 + len(listed)))  # queue order, no gaps
    waiting_for_data = sum(1 for i in range(len(listed), 500) if i % 3 == 0)
    assert f"… and {left} more, {waiting_for_data} waiting for data" in text
    assert "`/gpu queue mine`" in text


def test_a_queue_that_fits_has_no_summary() -> None:
    text = shown(reply(queue(5), "en", ZONE, NOW))
    assert "more" not in text
    assert all(f"*#{n}*" in text for n in range(1000, 1005))


def test_a_board_of_256_hosts_fits_a_message_and_says_what_it_left_out() -> None:
    big = board(256, 8)
    message = reply(big, "en", ZONE, NOW)
    check_message(message)
    text = shown(message)
    drawn = [h.name for h in big.hosts if f"`{h.name}`" in text]
    assert 0 < len(drawn) < 256
    assert f"… and {256 - len(drawn)} more hosts" in text
    assert "*A100-80GB* · 2048:" in text  # the type summary counts every card


def test_the_board_fits_the_budget_the_home_tab_gives_it() -> None:
    for budget in (7, 20, 60):
        blocks = board_blocks(board(256, 8), "en", ZONE, NOW, budget=budget)
        assert len(blocks) <= budget
        assert "more hosts" in json.dumps(blocks, ensure_ascii=False)
    home = home_view(OWNER, [], board(256, 8), [], "en", ZONE, NOW)
    assert "more hosts" in json.dumps(home, ensure_ascii=False)


def test_a_board_whose_waiting_jobs_all_wait_for_data_says_none_can_start() -> None:
    # "Next up" names only jobs that can start; with none of those, the board must not
    # claim that nothing waits while the queue line above counts jobs waiting for data.
    only_data = replace(
        board(3, 4, next_up=0),
        waiting_by_class={"core": 0, "normal": 2, "idle": 0},
        waiting_for_data=2,
    )
    text = shown(reply(only_data, "en", ZONE, NOW))
    assert "Nothing can start yet: every waiting job waits for its data." in text
    assert "Nothing is waiting" not in text
    assert "暂无可开始的任务" in shown(reply(only_data, "zh", ZONE, NOW))
    empty = replace(
        only_data, waiting_by_class={"core": 0, "normal": 0, "idle": 0}, waiting_for_data=0
    )
    assert "Nothing is waiting." in shown(reply(empty, "en", ZONE, NOW))


def test_the_board_draws_one_square_per_card_and_names_the_jobs_on_them() -> None:
    text = shown(reply(board(3, 4), "en", ZONE, NOW))
    assert "`gpu-000` 🟦🟦🟨🟩" in text
    assert "gpu0 *#101* job-101 <@U0OWNER01>" in text
    assert "gpu2 *#103* job-103 <@U0OWNER01> (idle)" in text
    assert "`gpu-001` 🟦🟨🟩⬛ _down_" in text
    assert "`gpu-002` 🟨🟩🟦🟫 _draining_" in text
    for legend in ("🟩 free", "🟦 busy", "🟨 idle but held", "⬛ down", "🟫 used outside paika"):
        assert legend in text
    assert "1 core, 12 normal, 4 idle" in text


def test_jobs_on_neighbouring_cards_are_shown_as_a_range() -> None:
    cards = tuple(card("gpu-9", i, CardState.BUSY, 42) for i in range(4)) + (
        card("gpu-9", 4, CardState.FREE),
        card("gpu-9", 5, CardState.BUSY, 42),
    )
    result = BoardResult(NOW, (HostView("gpu-9", "up", False, cards),), (), 1, {}, 0, ())
    assert "gpu0-3,5 *#42* job-42 <@U0OWNER01>" in shown(reply(result, "en", ZONE, NOW))


@pytest.mark.parametrize("case", CASES[:2] + CASES[4:6], ids=lambda case: case.name)
def test_user_text_cannot_mention_or_link(case: Case) -> None:
    evil = job(name=EVIL, command=EVIL, data_location=EVIL, data_ready=False)
    results: list[object] = [
        SubmitResult(view(evil, wait()), bump(reason=EVIL)),
        StatusResult(view(evil, wait()), [], [bump(reason=EVIL)], []),
        QueueResult("all", [view(evil)], [view(evil, wait())]),
        ChangeResult(view(evil), True, ChangeNote.CANCELLED),
    ]
    messages = [reply(result, "en", ZONE, NOW) for result in results]
    messages += [
        bump_request(bump(reason=EVIL), view(evil), "en"),
        bump_decided(bump("denied", decision_reason=EVIL), view(evil), "en", ZONE),
        job_event(event(EventKind.JOB_FAILED, EVIL), "en", ZONE),
        Message(
            "", home_view(OWNER, [view(evil, wait())], board(1, 2), [], "en", ZONE, NOW)["blocks"]
        ),
    ]
    for message in messages:
        for text in mrkdwn_texts(message):
            assert "<!channel>" not in text
            assert "<@U123>" not in text
            assert "<https://" not in text
    assert "&lt;!channel&gt;" in shown(messages[0])


def test_escaping() -> None:
    assert mrkdwn_escape("a & <b>") == "a &amp; &lt;b&gt;"
    assert escape_keeping_mentions("Ask <@U0OWNER01> about <!here>") == (
        "Ask <@U0OWNER01> about &lt;!here&gt;"
    )
    long = code_block("&" * 2000)
    assert slack_len(long) <= SECTION_TEXT - 400 and long.endswith("…```")
    assert fit("🟩" * 10, 9) == "🟩🟩🟩🟩…"


def test_listing_summarises_what_does_not_fit() -> None:
    lines = [f"line {i} " + "x" * 90 for i in range(200)]
    blocks = listing(lines, 5, lambda shown: f"{200 - shown} more")
    assert len(blocks) == 5
    shown_lines = sum(block["text"]["text"].count("line ") for block in blocks[:-1])
    assert blocks[-1]["text"]["text"] == f"{200 - shown_lines} more"


@pytest.mark.parametrize(
    ("build", "words"),
    [
        (
            _reply(SubmitResult(view(waits=wait()), bump())),
            [
                "已排队",
                "普通",
                "排在 2 个更高优先级任务之后（A100-80GB）",
                "预计开始",
                "提优先级申请 #7",
            ],
        ),
        (_reply(queue(40)), ["队列", "排队中", "另有 10 个"]),
        (_reply(board()), ["GPU 看板", "空闲", "即将开始"]),
        (
            lambda lang: bump_request(bump(), view(), lang),
            ["提优先级申请 #7", "批准", "拒绝", "核心"],
        ),
        (lambda lang: job_event(event(EventKind.JOB_STARTED), lang, ZONE), ["任务 #12 已开始运行"]),
        (_reply(QuotaListing([quota(days_left=10)])), ["配额", "还剩 10 天", "卡时"]),
        (lambda lang: error("hours must be a number.", lang, "hours=24"), ["无法完成", "示例"]),
        (_reply(help_for()), ["/gpu 命令", "管理（仅管理员）", "提交一个训练任务到队列。"]),
        (
            _reply(help_for(("submit",))),
            ["用法：", "参数：", "gpus（可选，默认：1）", "取值：整数，范围 1 到 64", "示例："],
        ),
    ],
)
def test_chinese_replies_use_the_chinese_words(
    build: Callable[[str], Message], words: list[str]
) -> None:
    text = shown(build("zh"))
    for word in words:
        assert word in text


def test_bump_buttons_carry_the_request_id_and_deny_asks_first() -> None:
    message = bump_request(bump(id=4711), view(), "en")
    buttons = {
        node["action_id"]: node for node in walk(message.blocks) if node.get("type") == "button"
    }
    assert set(buttons) == {ids.BUMP_APPROVE, ids.BUMP_DENY}
    assert buttons[ids.BUMP_APPROVE]["value"] == buttons[ids.BUMP_DENY]["value"] == "4711"
    assert buttons[ids.BUMP_APPROVE]["style"] == "primary"
    assert buttons[ids.BUMP_DENY]["style"] == "danger" and "confirm" in buttons[ids.BUMP_DENY]
    text = shown(message)
    assert "<@U0ASKER01> asks to move job *#12* bert-ft" in text
    assert "from *normal* to *core*" in text and "paper deadline on Friday" in text


def test_a_decided_bump_has_no_buttons_and_says_who_decided() -> None:
    approved = bump_decided(bump("approved"), view(), "en", ZONE)
    assert not [node for node in walk(approved.blocks) if node.get("type") == "button"]
    assert "Approved by <@U0APPROV1> at 2026-11-02 17:00 CST" in shown(approved)
    denied = bump_decided(bump("denied", decision_reason="no room"), view(), "en", ZONE)
    assert "Denied by <@U0APPROV1>" in shown(denied) and "Reason: no room" in shown(denied)


def test_the_home_tab_shows_own_jobs_quotas_near_expiry_and_a_refresh_button() -> None:
    mine = [view(waits=wait()), view(job(13, "gpt", state="running", started_at=NOW))]
    home = home_view(OWNER, mine, board(), [quota(), quota(4, days_left=10)], "en", ZONE, NOW)
    text = json.dumps(home, ensure_ascii=False)
    assert ids.HOME_REFRESH in text and ids.HOME_SUBMIT in text
    assert "*#12* bert-ft · queued" in text and "place 3" in text
    assert "*#13* gpt · running" in text
    assert ":warning: *#4* vision" in text and "(in 10 days)" in text
    assert "expires 2026-12-31 (in 59 days)" in text
    assert ":warning: *#3*" not in text


def test_status_shows_history_cost_output_and_summarises_old_history() -> None:
    text = shown(reply(status(), "en", ZONE, NOW))
    assert "Used 2.50 GPU-hours, cost 10.00" in text
    assert "`s3://ckpt/bert-ft/final` · f1=91.2, loss=0.31" in text
    assert "… 10 earlier changes" in text
    assert "*Reason:* exited with 1" in text
    assert "Bump #7 normal → core: approved by <@U0APPROV1>" in text
    assert "--flag &amp;" in text


def test_status_names_the_template_version_and_the_submission_as_given() -> None:
    text = shown(reply(status(), "en", ZONE, NOW))
    assert "*Template*\nbert-base v3" in text
    assert (
        "Submitted as: /gpu submit name=bert-ft type=A100-80GB,H100-80GB template=bert-base cmd="
        in text
    )
    assert "template_version" not in text
    chinese = shown(reply(status(), "zh", ZONE, NOW))
    assert "bert-base v3" in chinese and "提交时的参数：/gpu submit name=bert-ft" in chinese
    console = render(status(), ZONE)
    assert "template bert-base v3" in console
    assert "Submitted as: /gpu submit name=bert-ft" in console


def test_the_submit_reply_says_why_it_waits_and_what_to_do() -> None:
    result = SubmitResult(
        view(job(data_ready=False), wait()), bump(), Admission(Verdict.WARN, 80.0, 48.0)
    )
    text = shown(reply(result, "en", ZONE, NOW))
    assert "*Place in queue:* 3" in text
    assert "*Why it waits:* behind 2 jobs of higher priority for A100-80GB" in text
    assert "2026-11-02 20:00 CST (in about 3.0 h)" in text
    assert "bump request #7 to core is waiting for a decision" in text
    assert "`/gpu ready #12`" in text
    assert "about 80 hours" in text


def test_errors_keep_the_message_and_show_the_example() -> None:
    message = error("Only the owner (<@U0OWNER01>) can cancel it.\nAsk them.", "en", "hours=24")
    text = shown(message)
    assert "paika could not do that." in text
    assert "<@U0OWNER01>" in text and "Ask them." in text
    assert "Example: `hours=24`" in text


@dataclass(frozen=True)
class Unlisted:
    """A result no face has a form for."""

    words: str


def test_help_lists_every_command_and_every_key_it_is_about() -> None:
    overview = shown(reply(help_for(), "en", ZONE, NOW))
    for command in help_for().commands:
        assert f"`{mrkdwn_escape(command.heading)}`" in overview
    assert "*Admin (admins only)*" in overview
    submit = reply(help_for(("submit",)), "en", ZONE, NOW)
    assert submit.text == "/gpu submit: Queue a training job."
    text = shown(submit)
    for key in help_for(("submit",)).commands[0].keys:
        assert f"*{key.name} (" in text
    assert "*team (optional, default: your team)*" in text
    assert "Value: a whole number from 1 to 64. Example: gpus=2" in text


def test_a_result_without_a_form_is_a_bug_said_by_its_type_in_both_faces() -> None:
    """Every result has a Block Kit form and console words (tests/bot/test_said.py holds the
    two registries to the same types), so a result with neither is a bug, named as such,
    not words made up on the spot."""
    with pytest.raises(TypeError, match="Unlisted"):
        reply(Unlisted("plain <words>"), "en", ZONE, NOW)
    with pytest.raises(TypeError, match="Unlisted"):
        render(Unlisted("plain <words>"), ZONE)


def test_job_events_tell_the_owner_what_to_do_next() -> None:
    finished = shown(job_event(event(EventKind.JOB_FINISHED), "en", ZONE))
    assert "Job #12 finished" in finished and "/gpu done #12" in finished
    down = shown(job_event(event(EventKind.HOST_DOWN), "zh", ZONE))
    assert "主机 gpu-01 宕机" in down


def test_quota_expiry_words() -> None:
    def line(days: int) -> str:
        return shown(reply(QuotaListing([quota(days_left=days)]), "en", ZONE, NOW))

    assert "(tomorrow)" in line(1) and "(today)" in line(0)
    assert "(yesterday)" in line(-1) and "(3 days ago)" in line(-3)
    assert date(2026, 11, 2) + timedelta(days=59) == date(2026, 12, 31)
