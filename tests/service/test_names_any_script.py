"""Names in any script: a Chinese team names its team, jobs, templates, projects and rounds in
Chinese, at the columns' full length, on every backend; names that would read differently
from what is stored are refused, naming the character and why."""

from __future__ import annotations

import unicodedata

import pytest
from sqlmodel import Session, select

from scheduler.app import Paika, Reply
from storage import limits
from storage.models import Job, Team, Template

SUBMIT = 'submit name={name} hours=4 priority=normal data=ready cmd="python train.py"'


def gpu(paika: Paika, text: str, user: str = "UALICE") -> Reply:
    reply = paika.run(text, user)
    assert reply.ok, reply.text
    return reply


def refused(paika: Paika, text: str, user: str = "UALICE") -> str:
    reply = paika.run(text, user)
    assert not reply.ok, reply.text
    return reply.text


@pytest.fixture
def speech(paika: Paika) -> Paika:
    """Team 语音组, made by an admin, with UALICE in it."""
    assert "语音组" in gpu(paika, "admin team add 语音组", "UADMIN").text
    gpu(paika, "admin member add <@UALICE> team=语音组", "UADMIN")
    return paika


def test_a_team_job_project_and_round_named_in_chinese_are_stored_and_found(
    speech: Paika,
) -> None:
    gpu(speech, SUBMIT.format(name="医疗对话-sft") + " project=医疗 round=第一轮")
    with Session(speech.engine) as session:
        job = session.exec(select(Job).where(Job.name == "医疗对话-sft")).one()
        team = session.exec(select(Team).where(Team.id == job.team_id)).one()
    assert (team.name, job.project, job.round) == ("语音组", "医疗", "第一轮")
    status = gpu(speech, "status 医疗对话-sft").text
    assert "医疗对话-sft" in status and "project=医疗" in status
    gpu(speech, "cancel 医疗对话-sft")


def test_names_as_long_as_their_columns_round_trip_in_four_byte_characters(speech: Paika) -> None:
    # 𠀀 (U+20000, CJK Extension B) is four bytes in UTF-8: MariaDB's utf8mb4 must hold it.
    name = "𠀀" * (limits.JOB_NAME - 1) + "1"
    template = "模" * limits.TEMPLATE_NAME
    gpu(speech, SUBMIT.format(name=name) + " project=" + "项" * limits.PROJECT)
    gpu(speech, f"template save {template} gpus=1 hours=2")
    with Session(speech.engine) as session:
        job = session.exec(select(Job).where(Job.name == name)).one()
        saved = session.exec(select(Template).where(Template.name == template)).one()
    assert (job.name, job.project, saved.name) == (name, "项" * limits.PROJECT, template)
    assert template in gpu(speech, f"template show {template}").text
    too_long = refused(speech, SUBMIT.format(name="𠀀" * (limits.JOB_NAME + 1)))
    assert f"at most {limits.JOB_NAME} characters" in too_long
    assert f"got {limits.JOB_NAME + 1} characters" in too_long


def test_a_name_is_kept_nfc_so_both_ways_of_typing_it_find_it(speech: Paika) -> None:
    decomposed = "cafe\u0301-run"  # e + combining acute, as some keyboards send it
    composed = unicodedata.normalize("NFC", decomposed)
    assert composed != decomposed
    gpu(speech, SUBMIT.format(name=decomposed))
    with Session(speech.engine) as session:
        assert [j.name for j in session.exec(select(Job)).all()] == [composed]
    assert composed in gpu(speech, f"status {decomposed}").text
    assert composed in gpu(speech, f"status {composed}").text


@pytest.mark.parametrize(
    ("typed", "code", "at", "why"),
    [
        ("医疗\u202esft", "U+202E", 3, "an invisible formatting character"),  # bidi override
        ("医\u200b疗", "U+200B", 2, "an invisible formatting character"),  # zero-width space
        ("医\u200d疗", "U+200D", 2, "an invisible formatting character"),  # zero-width joiner
        ("医疗\ue000", "U+E000", 3, "a private-use character"),
        ("医疗\U000e0080", "U+E0080", 3, "a code point Unicode has not assigned"),
        ("医疗\x1b[31m", "U+001B", 3, "a control character"),
        ("医疗🚀", "U+1F680", 3, "a symbol or punctuation mark"),
        ("-医疗", "U+002D", 1, "a name starts with a letter or digit"),
    ],
)
def test_a_name_with_a_character_that_misleads_is_refused_naming_it(
    speech: Paika, typed: str, code: str, at: int, why: str
) -> None:
    with Session(speech.engine) as session:
        teams = {t.name for t in session.exec(select(Team)).all()}
    said = refused(speech, SUBMIT.format(name=f'"{typed}"'))
    assert f"name cannot hold {code} (character {at}): {why}" in said
    assert "Retype it without that character" in said and "Example: name=bert-ft" in said
    team = refused(speech, f'admin team add "{typed}"', "UADMIN")
    assert f"name cannot hold {code} (character {at})" in team
    with Session(speech.engine) as session:
        assert session.exec(select(Job)).all() == []
        assert {t.name for t in session.exec(select(Team)).all()} == teams


def test_names_that_differ_only_by_an_accent_or_a_rare_character_are_two_teams(
    paika: Paika,
) -> None:
    # MariaDB's default collation would take each pair for one name (migration 0013).
    for name in ("équipe", "equipe", "𠀀组", "𠀁组"):
        assert f"Added team {name}" in gpu(paika, f"admin team add {name}", "UADMIN").text
    assert "already exists" in refused(paika, "admin team add Equipe", "UADMIN")  # no case
    gpu(paika, "admin member add <@UALICE> team=𠀁组", "UADMIN")
    gpu(paika, SUBMIT.format(name="café-1") + " project=𠀀")
    gpu(paika, SUBMIT.format(name="cafe-1") + " project=𠀁")
    with Session(paika.engine) as session:
        jobs = {j.name: j.project for j in session.exec(select(Job)).all()}
        teams = {t.name for t in session.exec(select(Team)).all()}
    assert jobs == {"café-1": "𠀀", "cafe-1": "𠀁"}
    assert {"équipe", "equipe", "𠀀组", "𠀁组"} <= teams
    assert "café-1" in gpu(paika, "status café-1").text
    assert "cafe-1" in gpu(paika, "status cafe-1").text


def test_names_are_found_whatever_their_case_in_any_script(paika: Paika) -> None:
    # SQL's lower() folds only ASCII on SQLite (and under PostgreSQL's C locale): a team
    # stored as "Équipe" must still be found as typed, and as "équipe" or "ÉQUIPE".
    assert "Added team Équipe" in gpu(paika, "admin team add Équipe", "UADMIN").text
    assert "already exists" in refused(paika, "admin team add ÉQUIPE", "UADMIN")
    gpu(paika, "admin member add <@UALICE> team=équipe", "UADMIN")
    gpu(paika, "admin member add <@UBOB> team=Équipe", "UADMIN")
    gpu(paika, "template save Δέλτα gpus=1 hours=2")
    gpu(paika, "template save ΔΈΛΤΑ gpus=2 hours=2")  # the same template, a second version
    history = gpu(paika, "template history δέλτα").text
    assert "v1" in history and "v2" in history
    gpu(paika, SUBMIT.format(name="t-1") + " template=δέλτα")
    with Session(paika.engine) as session:
        teams = {t.name for t in session.exec(select(Team)).all()}
        templates = [t.name for t in session.exec(select(Template)).all()]
        job = session.exec(select(Job).where(Job.name == "t-1")).one()
    assert "Équipe" in teams and "équipe" not in teams and "ÉQUIPE" not in teams
    assert templates == ["Δέλτα"] and job.template == "Δέλτα" and job.template_version == 2
