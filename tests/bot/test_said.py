"""Template and admin answers, and the language confirmation, are said from the catalogue:
in Chinese to someone who chose it, in English on the console, each by a renderer of its own."""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from conftest import ADMIN, MEMBER, Bot, text_of

from bot.blocks.replies import reply
from bot.console import render
from bot.said import listed, problem, say, template_fields
from scheduler.app import Paika
from scheduler.commands import HANDLERS
from scheduler.errors import Action, PermissionDenied, Problem
from scheduler.results import Listing, Said, SaidCode
from scheduler.service.prefs import LanguageChoice

CHINESE = re.compile(r"[\u4e00-\u9fff]")
ZONE = ZoneInfo("Asia/Shanghai")
NOW = datetime(2026, 11, 2, 9, 0, tzinfo=ZoneInfo("UTC"))

# Every template and admin command that answers in words, in an order that works.
SETUP = [
    "admin team add robotics channel=#robots",
    "admin team list",
    "admin member add <@UNEW0001> team=robotics",
    "admin member add <@UNEW0001> team=robotics role=approver",
    "admin member role <@UNEW0001> role=member",
    "admin member list",
    "admin member remove <@UNEW0001>",
    "admin team remove robotics",
    "admin host list",
    "admin host add gpu-01 url=http://127.0.0.1:8470/",
    "admin host drain gpu-01",
    "admin host list",
    "admin host resume gpu-01",
    "admin host remove gpu-01",
]
TEMPLATES = [
    "template list",
    'template save sweep gpus=2 hours=4 cmd="python sweep.py"',
    "template save sweep gpus=1 hours=4",
    "template list",
    "template show sweep",
    "template delete sweep",
]


def _said_in_chinese(bot: Bot, user: str, commands: list[str]) -> list[str]:
    """What Slack shows `user`, who chose Chinese, for each command in turn."""
    bot.answer("lang zh", user=user, name="lang")
    return [text_of(bot.answer(text, user=user, name=f"c{i}")) for i, text in enumerate(commands)]


def test_admin_answers_are_in_chinese_for_an_admin_who_chose_it(team_bot: Bot) -> None:
    said = _said_in_chinese(team_bot, ADMIN, SETUP)
    for text, words in zip(SETUP, said, strict=True):
        if text != "admin team list":  # names and channels only: nothing to translate
            assert CHINESE.search(words), (text, words)
        assert not re.search(r"Added|Moved|Removed|Draining|is now|takes new|No hosts", words)
    (
        team_added,
        teams,
        member_added,
        member_moved,
        role,
        members,
        member_removed,
        team_removed,
        no_hosts,
        host_added,
        draining,
        hosts,
        resumed,
        host_removed,
    ) = said
    assert "已添加团队 robotics，通知将发到 #robots。" in team_added
    assert "robotics · #robots" in teams
    assert "已将 <@UNEW0001> 加入团队 robotics，角色为成员。" in member_added
    assert "已将 <@UNEW0001> 调到团队 robotics，角色为审批人。" in member_moved
    assert "<@UNEW0001> 的角色现在是成员。" in role
    assert "<@UNEW0001> · robotics · 成员" in members
    assert "已移除 <@UNEW0001>。" in member_removed
    assert "已删除团队 robotics。" in team_removed
    assert (
        "还没有主机。可用 /gpu admin host add &lt;名称&gt; url=http://host:8470 添加。" in no_hosts
    )
    assert "已添加主机 gpu-01（http://127.0.0.1:8470）。" in host_added
    assert "正在排空 gpu-01" in draining
    assert "gpu-01 · http://127.0.0.1:8470 · 未知 · 排空中" in hosts
    assert "gpu-01 重新接收新任务。" in resumed
    assert "已删除主机 gpu-01。" in host_removed
    team_bot.slack.assert_nothing_invalid()


def test_template_answers_are_in_chinese_for_a_member_who_chose_it(team_bot: Bot) -> None:
    none, saved, updated, listed_, shown, deleted = _said_in_chinese(team_bot, MEMBER, TEMPLATES)
    assert "本团队还没有模板。" in none
    assert (
        '已保存模板“sweep”（v1）：gpus=2 hours=4.0 cmd="python sweep.py"\n'
        "用法：/gpu submit template=sweep name=&lt;任务名称&gt;"
    ) in saved
    assert "已更新模板“sweep”" in updated
    assert "sweep：gpus=1 hours=4.0" in listed_
    assert f"sweep v2（创建者 <@{MEMBER}>）：gpus=1 hours=4.0" in shown
    assert "已删除模板“sweep”。" in deleted
    for words in (none, saved, updated, shown, deleted):
        assert not re.search(r"Saved|Updated|Deleted|Use it|by <@|no templates", words), words


def test_the_language_is_confirmed_in_both_languages_whichever_was_chosen(team_bot: Bot) -> None:
    for code, lang, words in (("zh", "Chinese", "中文"), ("en", "English", "英文")):
        answer = text_of(team_bot.answer(f"lang {code}", name=code))
        assert f"Replies are now in {lang}." in answer and f"之后的回复将使用{words}。" in answer
        console = team_bot.paika.run(f"lang {code}", MEMBER).text
        assert console == f"Replies are now in {lang}.\n之后的回复将使用{words}。"


def test_the_console_says_the_same_answers_in_english(team_bot: Bot) -> None:
    team_bot.answer("lang zh", user=ADMIN, name="lang")  # a Slack choice, not the console's
    answers = [team_bot.paika.run(text, ADMIN) for text in SETUP]
    assert all(answer.ok for answer in answers)
    assert [answer.text for answer in answers][:3] == [
        "Added team robotics. Notices go to #robots.",
        "nlp · #nlp-gpu\nrobotics · #robots\nvision · #vision-gpu",
        "Added <@UNEW0001> to team robotics as member.",
    ]
    assert not any(CHINESE.search(answer.text) for answer in answers)


@pytest.mark.parametrize("words", SETUP + TEMPLATES + ["lang zh"])
def test_each_answer_has_a_renderer_of_its_own_in_both_faces(paika: Paika, words: str) -> None:
    for text in ["admin member add <@UMEMBER1> team=vision", *SETUP, *TEMPLATES]:
        if text == words:
            break
        user = ADMIN if text.startswith("admin") else "UMEMBER1"
        assert paika.run(text, user).ok, text
    user = ADMIN if words.startswith("admin") else "UMEMBER1"
    result = paika.run(words, user).result
    assert type(result) in (Said, Listing, LanguageChoice)
    assert type(result) in render.registry and type(result) in reply.registry


def test_no_template_or_admin_handler_writes_a_notice() -> None:
    """No handler answers with a sentence written in the scheduler (help included)."""
    writing_notices = [
        words
        for words, handler in HANDLERS.items()
        if words[0] in ("template", "admin", "lang") and "Notice" in handler.__code__.co_names
    ]
    assert writing_notices == []


def test_the_words_are_english_on_the_console_and_translated_in_slack() -> None:
    moved = Said(SaidCode.MEMBER_MOVED, {"user": "UBOB", "team": "vision", "role": "approver"})
    assert say("en", moved) == "Moved <@UBOB> to team vision as approver."
    assert say("zh", moved) == "已将 <@UBOB> 调到团队 vision，角色为审批人。"
    assert render(moved, ZONE) == say("en", moved)
    assert "审批人" in reply(moved, "zh", ZONE, NOW).text
    hosts = Listing([], SaidCode.HOST_NONE)
    assert listed("en", hosts) == [
        "No hosts yet. Add one with /gpu admin host add <name> url=http://host:8470"
    ]
    assert template_fields("zh", {}) == "（无字段）"
    assert template_fields("en", {"cmd": "python a.py", "gpus": 2}) == 'cmd="python a.py" gpus=2'


@pytest.mark.parametrize(
    "code",
    [
        SaidCode.HOST_ADDED_WITH_TOKEN,
        SaidCode.HOST_TOKEN_ROTATED,
        SaidCode.HOST_TOKEN_REVOKED,
        SaidCode.HOST_ROW_TROUBLE,
    ],
)
def test_the_token_answers_are_said_in_both_languages_with_the_install_command(
    code: SaidCode,
) -> None:
    values = {
        "name": "gpu-01",
        "url": "https://gpu-01:8470",
        "generation": 2,
        "token": "pk1_abc",
        "path": "/etc/paika/agent.token",
        "state": "degraded",
        "problem": "wrong agent token",
    }
    said = Said(code, values)
    english, chinese = say("en", said), say("zh", said)
    assert CHINESE.search(chinese) or code is SaidCode.HOST_ROW_TROUBLE
    assert "gpu-01" in english and "gpu-01" in chinese
    if code in (SaidCode.HOST_ADDED_WITH_TOKEN, SaidCode.HOST_TOKEN_ROTATED):
        install = "echo 'pk1_abc' > /etc/paika/agent.token.new) && mv"
        assert install in english and install in chinese
    assert render(said, ZONE) == english


# Refusals that name what the user tried to do to a job, as the owner reads them.
JOB_REFUSALS = {
    Action.MARK_DONE: (
        "Only the owner of job #7 (<@UOWNER>), an approver of team vision or an admin can"
        " mark it done.",
        "Job #7 belongs to team vision; only its members can mark it done.",
    ),
    Action.CANCEL: (
        "Only the owner of job #7 (<@UOWNER>), an approver of team vision or an admin can"
        " cancel it.",
        "Job #7 belongs to team vision; only its members can cancel it.",
    ),
    Action.MARK_READY: (
        "Only the owner of job #7 (<@UOWNER>), an approver of team vision or an admin can"
        " mark its data ready.",
        "Job #7 belongs to team vision; only its members can mark its data ready.",
    ),
    Action.BUMP: (
        "Only the owner of job #7 (<@UOWNER>), an approver of team vision or an admin can bump it.",
        "Job #7 belongs to team vision; only its members can bump it.",
    ),
}


@pytest.mark.parametrize("action", list(JOB_REFUSALS))
def test_a_refusal_names_what_was_asked_of_the_job_in_plain_words(action: Action) -> None:
    not_yours, other_team = JOB_REFUSALS[action]
    values = {"job_id": 7, "owner": "UOWNER", "team": "vision", "action": action}
    said = problem("en", PermissionDenied(Problem.NOT_YOURS, **values)).splitlines()
    assert said[0] == not_yours
    said = problem("en", PermissionDenied(Problem.OTHER_TEAMS_JOB, **values)).splitlines()
    assert said[0] == other_team
    zh = problem("zh", PermissionDenied(Problem.NOT_YOURS, **values))
    assert CHINESE.search(zh) and "#7" in zh and "mark" not in zh


# Drawn by one face only, and why: the console says an error as a reply, where Slack shows
# errors in blocks of their own (bot/replying.py); Slack draws a job's view alone inside a
# bump's reply that neither applied nor asked for anything (the console words that whole).
ONE_FACE_ONLY = {"UserError": "console", "JobView": "slack"}
# `paika state show|diff` are the operator's commands on the scheduler's machine, not /gpu's.
OPERATOR_ONLY = {"SnapshotView", "StateDiff"}
PAIKAS = ("bot", "scheduler", "storage")  # other tests register throw-away types of their own


def test_every_result_one_face_draws_the_other_draws_too() -> None:
    """A result type registered for the console and forgotten for Slack (or the other way)
    would answer in one face with a TypeError: the two registries name the same types."""
    import bot.console_state  # noqa: F401 (registers the operator's state commands' words)

    console = {k.__name__ for k in render.registry if k.__module__.startswith(PAIKAS)}
    slack = {k.__name__ for k in reply.registry if k.__module__.startswith(PAIKAS)}
    console -= OPERATOR_ONLY
    assert console - slack == {k for k, face in ONE_FACE_ONLY.items() if face == "console"}
    assert slack - console == {k for k, face in ONE_FACE_ONLY.items() if face == "slack"}
