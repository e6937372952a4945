"""The message catalogue stays complete and true: both languages for every key, every key
the code asks for exists, every key is asked for, and waits are said in Chinese too."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from paika_test_time import T0

import bot
from bot.blocks.ids import SUBMIT_BLOCK_OF_KEY
from bot.blocks.submit_modal import submit_modal
from bot.digest.picture import CHART_WORDS
from bot.i18n import (
    LANGUAGES,
    catalogue,
    day,
    eta,
    in_about,
    language,
    placeholders,
    t,
    term,
    wait_words,
    when,
)
from scheduler.archive.state_diff import DiffField, DiffKind
from scheduler.configs.results import SOURCES
from scheduler.dispatch import RefusalCode
from scheduler.errors import Action, Problem
from scheduler.grammar import SUBCOMMANDS, ValueKind, subcommand
from scheduler.grammar.errors import Mistake
from scheduler.grammar.names import Unfit
from scheduler.grammar.spec import PRIORITIES, DefaultWord, Section
from scheduler.hosts.reconcile import ENDING_STOPS, REQUEUED_STOPS
from scheduler.notices.events import EventCode, LostWhy
from scheduler.notices.kinds import EVENT_KINDS, NoticeKind
from scheduler.policy.colocation import Pressure
from scheduler.policy.plan import HostOut, PreemptCode, Wait, WaitCode
from scheduler.policy.reasons import ReasonCode
from scheduler.results import SaidCode
from scheduler.service.board import CardState
from scheduler.service.jobs import ChangeNote
from scheduler.slurm.errors import SlurmProblem
from scheduler.slurm.reconcile import ENDINGS_TOLD
from storage.models import BumpState, HostState, JobState, Role

BOT = Path(bot.__file__).parent
ZONE = ZoneInfo("Asia/Shanghai")
# t(lang, "key") and t(lang, 'key'), across line breaks.
T_CALL = re.compile(r"""\bt\(\s*[A-Za-z_][\w.]*\s*,\s*(["'])([^"'{}]+)\1""")
# Any quoted dotted name: keys are also written in tables and passed through helpers.
QUOTED_KEY = re.compile(r"""(["'])([a-z_]+(?:\.[a-z0-9_]+)+)\1""")

# Keys the code looks up by a computed name (f"state.{job.state}", term(lang, "state", …)):
# the prefix and every value that fills it. Each value must have a key, and these keys
# count as used.
COMPUTED: dict[str, tuple[str, ...]] = {
    "priority.": PRIORITIES,
    "state.": tuple(JobState),
    "bump_state.": tuple(BumpState),
    "host_state.": tuple(HostState),
    "card.": tuple(CardState),
    "queue.scope.": ("mine", "team", "all"),
    "event.": tuple(sorted(EVENT_KINDS)),
    "wait.": tuple(WaitCode),
    "wait.host.": tuple(HostOut),
    "role.": tuple(Role),
    "host.health.": tuple(HostState),
    "lang.saved.": LANGUAGES,
    "pressure.": tuple(Pressure),
    "notice.event.": tuple(EventCode),
    "notice.event.why.": tuple(LostWhy),
    "notice.event.refusal.": tuple(RefusalCode),
    "notice.event.dispatch.": tuple(SlurmProblem),
    "notice.event.killed_how.": ENDINGS_TOLD,
    "notice.event.preempt_for.": tuple(PreemptCode),
    "notice.event.stop.": tuple(REQUEUED_STOPS) + tuple(ENDING_STOPS),
    "reason.": tuple(ReasonCode),
    "reason.stop.": tuple(REQUEUED_STOPS) + tuple(ENDING_STOPS),
    "notice.idle.then.": ("release", "requeue", "keep"),
    # the notice ahead of a host's maintenance: its lead, with or without a checkpoint
    "notice.maintenance.": ("day", "day.resumes", "hour", "hour.resumes"),
    "notice.": (NoticeKind.STORE_DOWN, NoticeKind.STORE_BACK),
    "digest.chart.": CHART_WORDS,
    "": tuple(SaidCode) + tuple(ChangeNote) + tuple(Problem) + tuple(Mistake),  # their keys
    "action.": tuple(Action),
    # the hint after "it cannot become …", for the states a job never leaves
    "problem.cannot_become.": (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED),
    # the grammar's help: each command's summary and each key's help, by their codes
    "grammar.summary.": tuple(".".join(command.path) for command in SUBCOMMANDS),
    "grammar.key.": tuple(
        {key.help_code.removeprefix("grammar.key."): None for c in SUBCOMMANDS for key in c.keys}
    ),
    "grammar.value.": tuple(ValueKind),
    "grammar.range.": ("between", "between_above", "above", "at_least", "at_most"),
    "grammar.section.": tuple(Section),
    "grammar.default.": tuple(DefaultWord),
    # what storable.py names a character it refuses, and why names.py refuses one in a name
    "grammar.char.": ("nul", "surrogate", *Unfit),
    "config.source.": SOURCES,  # where a config version came from
    # what `paika state diff` names: the kind of thing that changed, and which part of it
    "snapshot.kind.": tuple(DiffKind),
    "snapshot.field.": tuple(DiffField),
}

# Modal hints that are the grammar's own help text for the same key.
GRAMMAR_HINTS = ("name", "gpus", "type", "mem", "hours", "cmd", "image", "team")


def sources() -> dict[Path, str]:
    return {path: path.read_text(encoding="utf-8") for path in sorted(BOT.rglob("*.py"))}


def test_every_key_has_both_languages_with_the_same_placeholders() -> None:
    for key, texts in catalogue().items():
        assert set(texts) == set(LANGUAGES), key
        for lang in LANGUAGES:
            assert texts[lang].strip(), f"{key} is empty in {lang}"
        assert placeholders(texts["en"]) == placeholders(texts["zh"]), key


def test_every_key_the_code_asks_for_exists() -> None:
    missing = [
        f"{path.relative_to(BOT.parent)}: {match[2]}"
        for path, text in sources().items()
        for match in T_CALL.finditer(text)
        if match[2] not in catalogue()
    ]
    assert not missing, missing


def test_every_computed_key_exists_for_every_value() -> None:
    missing = [
        prefix + value
        for prefix, values in COMPUTED.items()
        for value in values
        if prefix + value not in catalogue()
    ]
    assert not missing, missing


def test_every_key_is_used_somewhere_under_bot() -> None:
    quoted = {match[2] for text in sources().values() for match in QUOTED_KEY.finditer(text)}
    computed = {prefix + value for prefix, values in COMPUTED.items() for value in values}
    used = quoted | computed
    # A singular is used wherever its plural is: counted() picks it by the count.
    singulars = {key for key in catalogue() if key.endswith(".one") and key[:-4] in used}
    unused = sorted(set(catalogue()) - used - singulars)
    assert not unused, (
        f"keys no code uses (remove them, or list their prefix in COMPUTED): {unused}"
    )


@pytest.mark.parametrize("code", list(WaitCode))
def test_every_wait_code_is_said_in_both_languages(code: WaitCode) -> None:
    now = T0.timestamp()
    wait = Wait(
        12,
        code,
        4,
        now + 2 * 3600,
        "A100-80GB",
        higher=3,
        earlier=5,
        costlier="H100",
        free_at=now + 3600,
        left_hours=2.5,
        needs_hours=8,
        gpus=16,
    )
    en, zh = wait_words("en", wait, now), wait_words("zh", wait, now)
    assert en and not re.search(r"[\u4e00-\u9fff]", en), en
    assert re.search(r"[\u4e00-\u9fff]", zh), zh
    assert "{" not in en + zh


def test_wait_words_in_chinese_use_the_numbers_behind_the_words() -> None:
    now = T0.timestamp()

    def zh(code: WaitCode, eta_in: float | None = 7200, **fields: Any) -> str:
        moment = None if eta_in is None else now + eta_in
        return wait_words("zh", Wait(1, code, 1, moment, "A100-80GB", **fields), now)

    assert (
        zh(WaitCode.BEHIND_HIGHER_PRIORITY, higher=3) == "排在 3 个更高优先级任务之后（A100-80GB）"
    )
    assert zh(WaitCode.BEHIND_EARLIER, earlier=2) == "排在队列中前面的 2 个任务之后（A100-80GB）"
    assert zh(WaitCode.NO_TYPE_FREE) == "暂无空闲的 A100-80GB，约 2.0 小时后空出"
    assert zh(WaitCode.NO_TYPE_FREE, eta_in=0) == "下一个使用 A100-80GB"
    assert "H100" in zh(WaitCode.WAITING_FOR_CHEAPER_TYPE, costlier="H100")
    assert (
        zh(WaitCode.QUOTA_EXHAUSTED, eta_in=None, left_hours=3, needs_hours=8)
        == "配额已用尽：剩余 3.0 卡时，任务需要 8 卡时"
    )
    no_type = Wait(1, WaitCode.NO_TYPE_FREE, 1, None, None)
    assert "合适的卡型" in wait_words("zh", no_type, now)


def test_languages_and_fallbacks() -> None:
    assert language("zh-CN") == "zh" and language("en_US") == "en"
    assert language("fr") == "en" and language(None, "zh") == "zh"
    assert t("fr", "home.refresh") == t("en", "home.refresh") == "Refresh"
    assert t("zh", "home.refresh") == "刷新"
    with pytest.raises(KeyError):
        t("en", "no.such.key")
    assert term("zh", "state", "running") == "运行中"
    assert term("zh", "state", "hibernating") == "hibernating"  # a value newer than the catalogue


def test_times() -> None:
    assert when("en", datetime(2026, 11, 2, 9, 0, tzinfo=UTC), ZONE) == "2026-11-02 17:00 CST"
    assert when("zh", None, ZONE) == "-"
    assert when("en", datetime(2026, 11, 2, 9, 0), ZONE) == "2026-11-02 17:00 CST"  # naive = UTC
    assert day("en", date(2026, 12, 31)) == "2026-12-31"
    assert in_about("en", 30) == "any moment now"
    assert in_about("en", 600) == "in about 10 min"
    assert in_about("zh", 5400) == "约 1.5 小时后"
    assert in_about("en", 3 * 86400) == "in about 3 days"
    now = T0.timestamp()
    assert eta("en", None, ZONE, now) == "not estimated yet"
    assert eta("en", now + 600, ZONE, now) == "2026-11-02 17:10 CST (in about 10 min)"
    assert eta("zh", now - 5, ZONE, now) == "下一个调度周期"
    assert T0 + timedelta(minutes=10) == datetime(2026, 11, 2, 9, 10, tzinfo=UTC)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_modal_hints_are_the_grammars_help_where_it_describes_the_same_field(lang: str) -> None:
    keys = {key.name: key for key in subcommand(("submit",)).keys}
    modal = submit_modal(lang, ["A100-80GB"], ["vision"], [])
    hints = {block["block_id"]: block["hint"]["text"] for block in modal["blocks"]}
    for name in GRAMMAR_HINTS:
        assert hints[SUBMIT_BLOCK_OF_KEY[name]] == t(lang, keys[name].help_code), name


def _problem_calls() -> list[tuple[str, str, set[str]]]:
    """Every `SomeError(Problem.X, name=…)` under scheduler/: where, which problem, what it names."""
    import ast

    import scheduler

    calls = []
    for path in sorted(Path(scheduler.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            first = node.args[0]
            if (
                isinstance(first, ast.Attribute)
                and isinstance(first.value, ast.Name)
                and first.value.id == "Problem"
            ):
                where = f"{path.name}:{node.lineno}"
                calls.append((where, first.attr, {k.arg for k in node.keywords if k.arg}))
    return calls


def test_every_problem_raised_names_exactly_what_its_sentence_says() -> None:
    calls = _problem_calls()
    assert len(calls) > 40, "the scan should find the services' raises"
    wrong = [
        (where, name, sorted(given), sorted(placeholders(catalogue()[Problem[name].value]["en"])))
        for where, name, given in calls
        if given != placeholders(catalogue()[Problem[name].value]["en"])
    ]
    assert not wrong, wrong


def _mistake_calls() -> list[tuple[str, str, set[str]]]:
    """Every `ParseError(Mistake.X, …)` under scheduler/grammar: where, which mistake, and
    what it names (the key at fault is named `name`; `expected` is said from its data)."""
    import ast

    import scheduler.grammar

    calls = []
    for path in sorted(Path(scheduler.grammar.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            first = node.args[0]
            if isinstance(first, ast.Attribute) and getattr(first.value, "id", "") == "Mistake":
                named = {k.arg for k in node.keywords if k.arg} - {"example"}
                if "key" in named:
                    named = (named - {"key"}) | {"name"}
                calls.append((f"{path.name}:{node.lineno}", first.attr, named))
    return calls


def test_every_mistake_raised_names_exactly_what_its_sentence_says() -> None:
    calls = _mistake_calls()
    assert len(calls) > 15, "the scan should find the grammar's raises"
    raised = {name for _, name, _ in calls}
    wrong = [
        (where, name, sorted(given), sorted(placeholders(catalogue()[Mistake[name].value]["en"])))
        for where, name, given in calls
        if given != placeholders(catalogue()[Mistake[name].value]["en"])
    ]
    assert not wrong, wrong
    # parser.py picks one of these by whether the command also takes key=value keys; the
    # scan sees the variable, tests/grammar/test_grammar_errors.py sees each sentence.
    chosen = {
        "TAKES_NO_WORDS",
        "TAKES_NO_WORDS_USE_KEYS",
        "TOO_MANY_WORDS",
        "TOO_MANY_WORDS_USE_KEYS",
    }
    assert raised | chosen == {mistake.name for mistake in Mistake}, "a mistake nobody raises"


def test_no_catalogue_key_is_written_twice() -> None:
    """YAML keeps the last of two equal keys silently: a key written twice (a merge that kept
    both sides) could change a message without anyone seeing it."""
    import yaml

    from bot.i18n import CATALOGUE_PATH

    twice: list[str] = []

    class _Loader(yaml.SafeLoader):
        pass

    def mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
        keys = [loader.construct_object(key) for key, _ in node.value]
        twice.extend(sorted({key for key in keys if keys.count(key) > 1}))
        return yaml.SafeLoader.construct_mapping(loader, node)

    _Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    yaml.load(CATALOGUE_PATH.read_text(encoding="utf-8"), _Loader)  # noqa: S506 (safe loader)
    assert twice == []
