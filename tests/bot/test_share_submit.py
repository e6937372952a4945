"""Asking for a shared card as people do it (issue 31): `share=yes` typed, ticked in the submit
modal, kept by a template and by `again=`, stored on the job; /gpu status and /gpu queue say
the job shares a card; a bump to core says it takes a whole card from then on."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from conftest import APPROVER, MEMBER, Bot
from fake_slack import SIGNING_SECRET, signing
from sqlmodel import Session, select

from bot.blocks import ids
from bot.blocks.notices import bump_decision_dm
from bot.blocks.replies import reply
from bot.blocks.submit_modal import read_submission, submit_modal
from bot.console import render
from scheduler.door import DecisionResult
from scheduler.grammar import parse
from storage.models import Job

SUBMIT = 'submit name={name} hours=2 priority=normal data=ready cmd="python eval.py" {extra}'
ZONE = ZoneInfo("UTC")
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _state(share: bool, **fields: str) -> dict[str, dict[str, dict[str, Any]]]:
    given = {ids.SUBMIT_NAME: "eval", ids.SUBMIT_HOURS: "2", ids.SUBMIT_CMD: "python eval.py"}
    given |= {getattr(ids, f"SUBMIT_{name.upper()}"): value for name, value in fields.items()}
    values: dict[str, dict[str, dict[str, Any]]] = {
        block: {block: signing.text_input(value)} for block, value in given.items()
    }
    values[ids.SUBMIT_PRIORITY] = {ids.SUBMIT_PRIORITY: signing.static_select("normal")}
    values[ids.SUBMIT_DATA] = {ids.SUBMIT_DATA: signing.radio_buttons("ready")}
    values[ids.SUBMIT_SHARE] = {ids.SUBMIT_SHARE: signing.checkboxes(["yes"] if share else [])}
    return values


def _job(bot: Bot, name: str) -> Job:
    with Session(bot.paika.engine) as session:
        return session.exec(select(Job).where(Job.name == name)).one()


def _jobs(bot: Bot) -> list[Job]:
    with Session(bot.paika.engine) as session:
        return list(session.exec(select(Job)).all())


def test_the_modal_has_a_box_to_tick_under_the_memory() -> None:
    view = submit_modal("en", ["A100-80GB"], ["vision"], [])
    order = [block["block_id"] for block in view["blocks"]]
    assert order.index(ids.SUBMIT_SHARE) == order.index(ids.SUBMIT_MEM) + 1
    box = view["blocks"][order.index(ids.SUBMIT_SHARE)]
    assert box["element"]["type"] == "checkboxes" and box["optional"] is True
    assert [o["value"] for o in box["element"]["options"]] == ["yes"]
    assert box["label"]["text"] == "Share a card"
    assert box["hint"]["text"].startswith("yes: this one-card job accepts a card shared")
    zh = {b["block_id"]: b for b in submit_modal("zh", [], [], [])["blocks"]}
    assert zh[ids.SUBMIT_SHARE]["label"]["text"] == "共享一张卡"


def test_the_ticked_box_reads_as_the_typed_command() -> None:
    args, errors = read_submission(_state(True, mem="20GB"))
    assert errors == {}
    typed = parse(SUBMIT.format(name="eval", extra="share=yes gpu_mem=20GB"))
    assert args == typed.args and args["share"] == "yes" and args["mem"] == 20.0
    unticked, _ = read_submission(_state(False, mem="20"))
    assert "share" not in unticked


def test_a_modal_submission_stores_the_share_or_shows_what_to_change(team_bot: Bot) -> None:
    def submit(**fields: str) -> dict[str, object]:
        values = _state(True, **fields)
        signed = signing.view_submission(SIGNING_SECRET, MEMBER, ids.SUBMIT_CALLBACK, values)
        response = team_bot.send(signed)
        assert response.status_code == 200, response.text
        return response.json() if response.text else {}

    # Ticked without the memory it uses: the refusal is under the memory field.
    errors = submit()["errors"]
    assert isinstance(errors, dict) and list(errors) == [ids.SUBMIT_MEM]
    assert "mem=20" in errors[ids.SUBMIT_MEM]
    errors = submit(mem="20", gpus="2")["errors"]
    assert isinstance(errors, dict) and list(errors) == [ids.SUBMIT_GPUS]
    assert _jobs(team_bot) == []
    assert submit(mem="20GB") == {}
    job = _job(team_bot, "eval")
    assert (job.share, job.gpus, job.min_memory_gib) == (True, 1, 20.0)


def test_a_typed_submission_stores_it_and_again_repeats_it(team_bot: Bot) -> None:
    paika = team_bot.paika
    assert paika.run(SUBMIT.format(name="eval", extra="share=yes gpu_mem=20GB"), MEMBER).ok
    job = _job(team_bot, "eval")
    assert (job.share, job.gpus, job.min_memory_gib) == (True, 1, 20.0)
    assert job.spec is not None and (job.spec["share"], job.spec["mem"]) == ("yes", 20.0)
    assert paika.run(SUBMIT.format(name="whole", extra="mem=20"), MEMBER).ok
    assert _job(team_bot, "whole").share is False
    assert paika.run(f"submit again={job.id} name=eval-2", MEMBER).ok
    again = _job(team_bot, "eval-2")
    assert (again.share, again.min_memory_gib) == (True, 20.0)
    # Repeated with more cards, it is refused: the earlier job's share=yes clashes.
    refused = paika.run(f"submit again={job.id} name=eval-3 gpus=2", MEMBER)
    assert not refused.ok and refused.text.startswith("A shared job uses one card, but gpus=2.")


def test_a_template_keeps_it_and_the_merge_is_checked(team_bot: Bot) -> None:
    paika = team_bot.paika
    assert paika.run("template save eval share=yes gpu_mem=24G", MEMBER).ok
    shown = paika.run("template show eval", MEMBER)
    assert "share=yes" in shown.text and "mem=24" in shown.text
    assert paika.run(SUBMIT.format(name="from-template", extra="template=eval"), MEMBER).ok
    job = _job(team_bot, "from-template")
    assert (job.share, job.min_memory_gib) == (True, 24.0)
    # A template that says share=yes but not how much memory: the submission must say it.
    assert paika.run("template save bare share=yes", MEMBER).ok
    refused = paika.run(SUBMIT.format(name="x", extra="template=bare"), MEMBER)
    assert not refused.ok and "say how much GPU memory it uses, e.g. mem=20" in refused.text
    assert paika.run(SUBMIT.format(name="y", extra="template=bare mem=8"), MEMBER).ok
    assert _job(team_bot, "y").share is True
    # share=no for one job overrides the template's yes.
    assert paika.run(SUBMIT.format(name="z", extra="template=eval share=no"), MEMBER).ok
    assert _job(team_bot, "z").share is False


def test_status_and_queue_say_the_job_shares_a_card(team_bot: Bot) -> None:
    paika = team_bot.paika
    assert paika.run(SUBMIT.format(name="eval", extra="share=yes mem=20"), MEMBER).ok
    assert paika.run(SUBMIT.format(name="whole", extra="mem=20"), MEMBER).ok
    queue = paika.run("queue", MEMBER)
    shared = next(line for line in queue.text.splitlines() if "eval" in line)
    whole = next(line for line in queue.text.splitlines() if "whole" in line)
    assert "1×GPU shared, uses 20 GiB" in shared
    assert "≥20 GiB" in whole and "shared" not in whole
    status = paika.run("status eval", MEMBER)
    assert "shared, uses 20 GiB" in status.text
    assert "共享卡，占用显存 20 GiB" in render(status.result, ZONE, "zh")
    assert "共享卡，占用显存 20 GiB" in render(queue.result, ZONE, "zh")
    blocks = str(reply(queue.result, "en", ZONE, NOW).blocks)
    assert "shared, uses 20 GiB" in blocks
    assert "共享卡，占用显存 20 GiB" in str(reply(status.result, "zh", ZONE, NOW).blocks)


def test_an_approved_bump_to_core_says_it_takes_a_whole_card(team_bot: Bot) -> None:
    paika = team_bot.paika
    assert paika.run(SUBMIT.format(name="eval", extra="share=yes mem=20"), MEMBER).ok
    asked = paika.run('bump eval to=core reason="paper deadline"', MEMBER)
    assert asked.ok and "whole card" not in asked.text
    request = asked.result.request.id  # type: ignore[attr-defined]
    approved = paika.run(f"approve {request}", APPROVER)
    assert approved.ok
    assert approved.text.splitlines()[-1] == (
        "It shares no card now: as a core job it takes a whole card."
    )
    result = approved.result
    assert isinstance(result, DecisionResult)
    assert "它不再共享卡：作为核心任务，它将独占一整张卡。" in render(result, ZONE, "zh")
    assert "takes a whole card" in str(reply(result, "en", ZONE, NOW).blocks)
    assert "takes a whole card" in bump_decision_dm(result, "en").blocks[0]["text"]["text"]
    # As core work it no longer shows as shared.
    status = paika.run("status eval", MEMBER)
    assert "shared" not in status.text and "≥20 GiB" in status.text
    # A whole-card job bumped to core hears nothing of cards.
    assert paika.run(SUBMIT.format(name="whole", extra="mem=20"), MEMBER).ok
    asked = paika.run('bump whole to=core reason="paper deadline"', MEMBER)
    approved = paika.run(f"approve {asked.result.request.id}", APPROVER)  # type: ignore[attr-defined]
    assert approved.ok and "whole card" not in approved.text


def test_an_approver_bumping_a_shared_job_to_core_hears_it_at_once(team_bot: Bot) -> None:
    paika = team_bot.paika
    assert paika.run(SUBMIT.format(name="eval", extra="share=yes mem=20"), MEMBER).ok
    applied = paika.run('bump eval to=core reason="paper deadline"', APPROVER)
    assert applied.ok and "as a core job it takes a whole card" in applied.text
    assert "takes a whole card" in str(reply(applied.result, "en", ZONE, NOW).blocks)
