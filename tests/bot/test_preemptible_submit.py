"""Jobs that checkpoint and resume, as people submit them: `preemptible=`, `grace=` and
`checkpoint=` typed, in the submit modal (a box to tick, a grace, a place), in a template and
through `again=`; the errors say what to fix; `/gpu status` says what preemption cost."""

from __future__ import annotations

from typing import Any

from conftest import MEMBER, Bot
from sqlmodel import Session, select

from bot.blocks import ids
from bot.blocks.submit_modal import read_submission, submit_modal
from scheduler.grammar import parse
from scheduler.grammar.values import Duration
from storage.models import Job

SUBMIT = 'submit name={name} hours=12 priority=normal data=ready cmd="python train.py" {extra}'


def _state(**fields: str) -> dict[str, dict[str, dict[str, Any]]]:
    given = {ids.SUBMIT_NAME: "bert-ft", ids.SUBMIT_HOURS: "12", ids.SUBMIT_CMD: "python train.py"}
    given |= {getattr(ids, f"SUBMIT_{name.upper()}"): value for name, value in fields.items()}
    values: dict[str, dict[str, dict[str, Any]]] = {
        block: {block: {"type": "plain_text_input", "value": value}}
        for block, value in given.items()
        if block != ids.SUBMIT_PREEMPTIBLE
    }
    values[ids.SUBMIT_PRIORITY] = {
        ids.SUBMIT_PRIORITY: {"type": "static_select", "selected_option": {"value": "normal"}}
    }
    values[ids.SUBMIT_DATA] = {
        ids.SUBMIT_DATA: {"type": "radio_buttons", "selected_option": {"value": "ready"}}
    }
    ticked = [{"value": "yes"}] if fields.get("preemptible") else []
    values[ids.SUBMIT_PREEMPTIBLE] = {
        ids.SUBMIT_PREEMPTIBLE: {"type": "checkboxes", "selected_options": ticked}
    }
    return values


def _job(bot: Bot, name: str) -> Job:
    with Session(bot.paika.engine) as session:
        return session.exec(select(Job).where(Job.name == name)).one()


def test_the_modal_has_a_box_to_tick_a_grace_and_a_checkpoint_place() -> None:
    view = submit_modal("en", ["A100-80GB"], ["vision"], [])
    blocks = {block["block_id"]: block for block in view["blocks"]}
    box = blocks[ids.SUBMIT_PREEMPTIBLE]
    assert box["element"]["type"] == "checkboxes" and box["optional"] is True
    assert [o["value"] for o in box["element"]["options"]] == ["yes"]
    assert blocks[ids.SUBMIT_GRACE]["element"]["placeholder"]["text"] == "5m"
    assert blocks[ids.SUBMIT_CHECKPOINT]["label"]["text"] == "Checkpoint place"
    zh = {b["block_id"]: b for b in submit_modal("zh", [], [], [])["blocks"]}
    assert zh[ids.SUBMIT_PREEMPTIBLE]["label"]["text"] == "可抢占"


def test_the_modal_reads_as_the_text_command() -> None:
    args, errors = read_submission(
        _state(preemptible="yes", grace="90s", checkpoint="s3://ckpt/bert-ft")
    )
    assert errors == {}
    typed = parse(
        SUBMIT.format(
            name="bert-ft", extra="preemptible=yes grace=90s checkpoint=s3://ckpt/bert-ft"
        )
    )
    assert args == typed.args and args["grace"] == Duration(90)
    unticked, _ = read_submission(_state())
    assert "preemptible" not in unticked
    _, errors = read_submission(_state(preemptible="yes", grace="3h"))
    assert list(errors) == [ids.SUBMIT_GRACE]
    assert "grace must be minutes (5) or a length with its unit" in errors[ids.SUBMIT_GRACE]


def test_a_preemptible_job_keeps_its_grace_and_checkpoint(team_bot: Bot) -> None:
    paika = team_bot.paika
    extra = "preemptible=yes grace=2m checkpoint=/mnt/nas/ckpt/bert"
    assert paika.run(SUBMIT.format(name="resumable", extra=extra), MEMBER).ok
    job = _job(team_bot, "resumable")
    assert (job.preemptible, job.preempt_grace_s, job.checkpoint) == (
        True,
        120.0,
        "/mnt/nas/ckpt/bert",
    )
    assert job.spec is not None and job.spec["grace"] == "120s"
    assert paika.run(SUBMIT.format(name="plain", extra=""), MEMBER).ok
    plain = _job(team_bot, "plain")
    assert (plain.preemptible, plain.preempt_grace_s, plain.checkpoint) == (False, None, None)
    # Submitted again, it is the same job: its grace read back from its spec.
    assert paika.run(f"submit again={job.id} name=resumable-2", MEMBER).ok
    again = _job(team_bot, "resumable-2")
    assert (again.preemptible, again.preempt_grace_s, again.checkpoint) == (
        True,
        120.0,
        "/mnt/nas/ckpt/bert",
    )


def test_a_template_carries_it(team_bot: Bot) -> None:
    paika = team_bot.paika
    assert paika.run("template save long preemptible=yes grace=10", MEMBER).ok
    submitted = SUBMIT.format(name="from-template", extra="template=long")
    assert paika.run(submitted, MEMBER).ok
    job = _job(team_bot, "from-template")
    assert (job.preemptible, job.preempt_grace_s) == (True, 600.0)
    # The template says yes with a grace; saying no for one job leaves a grace that means
    # nothing, and the refusal says so.
    refused = paika.run(SUBMIT.format(name="n", extra="template=long preemptible=no"), MEMBER)
    assert not refused.ok and "grace=600s is only for a job that checkpoints" in refused.text


def test_grace_or_checkpoint_without_preemptible_is_refused_saying_what_to_add(
    team_bot: Bot,
) -> None:
    paika = team_bot.paika
    reply = paika.run(SUBMIT.format(name="x", extra="grace=5m"), MEMBER)
    assert not reply.ok
    assert reply.text == (
        "grace=300s is only for a job that checkpoints and resumes.\n"
        "Add preemptible=yes (paika may then stop it and requeue it), or leave grace= out."
    )
    reply = paika.run(SUBMIT.format(name="x", extra="preemptible=no checkpoint=/ckpt/x"), MEMBER)
    assert not reply.ok and reply.text.startswith("checkpoint=/ckpt/x is only for a job")
    with Session(paika.engine) as session:
        assert session.exec(select(Job)).all() == []
