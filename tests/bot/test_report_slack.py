"""`/gpu report` through the real Bolt app and a fake Slack: grouped by project, its page
buttons, and `file=csv` reaching the channel as a file; the submit modal's project and round."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from typing import Any

import pytest
from conftest import ADMIN, MEMBER, Bot, settled, text_of
from fake_slack import CHANNEL_ID, SIGNING_SECRET, signing
from sqlmodel import Session, select

from bot.blocks import ids
from bot.blocks.submit_modal import read_submission, submit_modal
from bot.console import render
from bot.replying import message_for
from scheduler.grammar import parse
from scheduler.service.report import ReportResult
from storage.models import Job, JobState, LedgerEntry, Team

PROJECTS = ("llm-pretrain", "asr")
JOBS = 25  # more than one page of 20


@pytest.fixture
def spent(team_bot: Bot) -> Bot:
    """25 finished runs of two projects in the last week, one failed, each with a metric."""
    paika = team_bot.paika
    now = paika.clock.now()
    with Session(paika.engine) as session:
        vision = session.exec(select(Team).where(Team.name == "vision")).one()
        for i in range(JOBS):
            job = Job(
                name=f"run-{i}",
                owner=MEMBER,
                team_id=vision.id or 0,
                est_gpu_hours=4,
                command="python train.py",
                state=JobState.FAILED if i == 0 else JobState.SUCCEEDED,
                project=PROJECTS[i % 2],
                round=str(1 + i % 3),
                submitted_at=now - timedelta(days=3),
                metrics={"top1": 0.5 + i / 100},
            )
            session.add(job)
            session.flush()
            hours = 1.0 + i
            session.add(
                LedgerEntry(
                    job_id=job.id or 0,
                    team_id=job.team_id,
                    gpu_type="A100-80GB",
                    gpu_hours=hours,
                    cost=hours * 2.2,
                    started_at=now - timedelta(days=2),
                    ended_at=now - timedelta(days=1),
                    recorded_at=now - timedelta(days=1),
                )
            )
        session.commit()
    return team_bot


def _page_buttons(message: dict[str, Any]) -> dict[str, str]:
    """The page buttons of a report message: action id → the words each carries."""
    return {
        element["action_id"]: element["value"]
        for block in message.get("blocks") or []
        if block.get("block_id") == ids.REPORT_PAGES
        for element in block["elements"]
    }


def _click(bot: Bot, action_id: str, value: str, name: str) -> dict[str, Any]:
    signed = signing.block_action(
        SIGNING_SECRET,
        MEMBER,
        action_id,
        value,
        block_id=ids.REPORT_PAGES,
        response_url=bot.slack.response_url(name),
    )
    assert bot.send(signed).status_code == 200
    return bot.slack.wait_for_response(name)[0]


def test_the_report_by_project_reads_in_slack(spent: Bot) -> None:
    answer = spent.answer("report by=project days=7")
    words = text_of(answer)
    assert "By project" in words and "llm-pretrain" in words and "asr" in words
    assert "best top1" in words and "wasted" in words and "per finished run" in words
    by_user = text_of(spent.answer(f"report by=user user=<@{MEMBER}> days=7", name="u"))
    assert f"*<@{MEMBER}>*" in by_user and f"Only user=<@{MEMBER}>" in by_user
    spent.slack.assert_nothing_invalid()


def test_the_page_buttons_turn_the_pages_in_place(spent: Bot) -> None:
    first = spent.answer("report by=project days=7")
    assert "page 1 of 2" in text_of(first)
    buttons = _page_buttons(first)
    assert list(buttons) == [ids.REPORT_NEXT]
    assert buttons[ids.REPORT_NEXT] == "report by=project days=7 page=2"
    second = _click(spent, ids.REPORT_NEXT, buttons[ids.REPORT_NEXT], "next")
    assert second.get("replace_original") is True
    assert "page 2 of 2" in text_of(second) and "*#1* run-0" in text_of(second)
    back = _page_buttons(second)
    assert list(back) == [ids.REPORT_PREVIOUS]
    again = _click(spent, ids.REPORT_PREVIOUS, back[ids.REPORT_PREVIOUS], "previous")
    assert "page 1 of 2" in text_of(again)
    spent.slack.assert_nothing_invalid()


def test_a_page_button_runs_only_a_report(spent: Bot) -> None:
    answer = _click(spent, ids.REPORT_NEXT, "cancel 1", "forged")
    assert answer.get("replace_original") is False
    with Session(spent.paika.engine) as session:
        assert session.get(Job, 1) is not None
        assert session.get(Job, 1).state == JobState.FAILED  # type: ignore[union-attr]


def test_file_csv_posts_the_whole_report_to_the_channel(spent: Bot) -> None:
    answer = spent.answer("report by=project days=7 file=csv")
    assert "The whole report goes to this channel as a csv file." in text_of(answer)
    assert settled(lambda: any(upload.completed for upload in spent.slack.uploads()))
    (upload,) = spent.slack.uploads()
    assert upload.filename.startswith("paika-report-") and upload.filename.endswith(".csv")
    assert spent.slack.last("files.completeUploadExternal").args["channel_id"] == CHANNEL_ID
    assert upload.content is not None
    rows = list(csv.DictReader(io.StringIO(upload.content.decode())))
    assert sum(1 for row in rows if row["kind"] == "job") == JOBS  # every job, not a page
    groups = {row["group"]: row for row in rows if row["kind"] == "group"}
    assert set(groups) == set(PROJECTS)
    (total,) = [row for row in rows if row["kind"] == "total"]
    assert float(total["gpu_hours"]) == pytest.approx(sum(1.0 + i for i in range(JOBS)))
    assert float(total["wasted"]) == pytest.approx(2.2)
    spent.slack.assert_nothing_invalid()


def test_on_the_console_file_csv_says_how_to_get_the_file(spent: Bot) -> None:
    reply = spent.paika.run("report by=project days=7 file=csv", ADMIN)
    assert "The whole report as a file: paika report by=project days=7 --format csv" in reply.text


# --- the submit modal ------------------------------------------------------------------------


def _state(**fields: str) -> dict[str, dict[str, dict[str, Any]]]:
    given = {
        ids.SUBMIT_NAME: "bert-ft",
        ids.SUBMIT_HOURS: "12",
        ids.SUBMIT_CMD: "python train.py",
    } | {getattr(ids, f"SUBMIT_{name.upper()}"): value for name, value in fields.items()}
    values: dict[str, dict[str, dict[str, Any]]] = {
        block: {block: {"type": "plain_text_input", "value": value}}
        for block, value in given.items()
    }
    values[ids.SUBMIT_PRIORITY] = {
        ids.SUBMIT_PRIORITY: {"type": "static_select", "selected_option": {"value": "normal"}}
    }
    values[ids.SUBMIT_DATA] = {
        ids.SUBMIT_DATA: {"type": "radio_buttons", "selected_option": {"value": "ready"}}
    }
    return values


def test_the_modal_asks_for_a_project_and_a_round() -> None:
    view = submit_modal("en", ["A100-80GB"], ["vision"], [])
    blocks = {block["block_id"]: block for block in view["blocks"]}
    assert blocks[ids.SUBMIT_PROJECT]["label"]["text"] == "Project"
    assert blocks[ids.SUBMIT_ROUND]["optional"] is True
    assert submit_modal("zh", [], [], [])["blocks"][-1]["label"]["text"] == "轮次"


def test_the_modals_project_and_round_read_as_the_text_command() -> None:
    args, errors = read_submission(_state(project="llm-pretrain", round="3"))
    assert errors == {}
    typed = parse(
        'submit name=bert-ft hours=12 priority=normal data=ready cmd="python train.py" '
        "project=llm-pretrain round=3"
    )
    assert args == typed.args
    _, errors = read_submission(_state(project="llm pretrain"))
    assert list(errors) == [ids.SUBMIT_PROJECT]
    assert "project cannot hold U+0020 (character 4): a space" in errors[ids.SUBMIT_PROJECT]


def test_a_job_submitted_from_the_modal_keeps_its_project(team_bot: Bot) -> None:
    args, errors = read_submission(_state(project="llm-pretrain", round="v2"))
    assert errors == {}
    assert team_bot.services.perform(("submit",), args, MEMBER).ok
    with Session(team_bot.paika.engine) as session:
        job = session.exec(select(Job)).one()
    assert (job.project, job.round) == ("llm-pretrain", "v2")


def test_the_report_reads_in_chinese(spent: Bot) -> None:
    reply = spent.paika.run("report by=round project=llm-pretrain days=7", ADMIN)
    assert reply.ok and isinstance(reply.result, ReportResult)
    console = render(reply.result, spent.paika.policy.zone, "zh")
    assert "按轮次" in console and "最好 top1" in console and "比上一轮提升" in console
    message = message_for(reply, "zh", spent.paika.policy.zone, spent.paika.clock.now())
    words = text_of({"text": message.text, "blocks": message.blocks})
    assert "按轮次" in words and "每次完成" in words and "下一页" not in words
