"""Asking for a shared card as typed (issue 31): `share=yes`, the memory it uses as `mem=` or
`gpu_mem=` with a unit, and the refusals that say what to change, in English and Chinese."""

from __future__ import annotations

import pytest

from bot.said import problem
from bot.usage import help_lines
from scheduler.grammar import Mistake, ParseError, help_for, parse
from scheduler.grammar.sharing import check_share

SUBMIT = "submit name=eval hours=2 priority={priority} data=ready cmd=x {extra}"


def _submit(extra: str, priority: str = "normal") -> dict[str, object]:
    return parse(SUBMIT.format(priority=priority, extra=extra)).args


def _refusal(extra: str, priority: str = "normal") -> ParseError:
    with pytest.raises(ParseError) as caught:
        _submit(extra, priority)
    return caught.value


def test_share_yes_with_its_memory_parses() -> None:
    args = _submit("share=yes mem=20")
    assert (args["share"], args["mem"]) == ("yes", 20.0)
    assert "share" not in _submit("mem=20")  # left out, the default (no) fills it later
    assert _submit("share=NO")["share"] == "no"


@pytest.mark.parametrize("typed", ["gpu_mem=20GB", "gpu_mem=20gb", "gpu_mem=20GiB", "mem=20G"])
def test_gpu_mem_is_mem_and_a_unit_means_gib(typed: str) -> None:
    args = _submit(f"share=yes {typed}")
    assert args["mem"] == 20.0 and "gpu_mem" not in args


def test_a_unit_is_not_taken_where_it_means_nothing() -> None:
    error = _refusal("gpu_mem=20TB")
    assert (error.problem, error.key) == (Mistake.BAD_VALUE, "gpu_mem")
    assert problem("en", error).startswith("gpu_mem must be a number from 1 to 1024; GiB, GB, G ")
    assert _refusal("speed=2GB").key == "speed"  # only memory takes a unit
    assert _refusal("gpu_mem=GB").problem is Mistake.BAD_VALUE


def test_mem_and_gpu_mem_together_are_refused_naming_both() -> None:
    error = _refusal("mem=20 gpu_mem=20GB")
    assert (error.problem, error.key) == (Mistake.SAME_KEY_TWO_NAMES, "mem")
    assert problem("en", error).splitlines()[0] == (
        'mem is given twice, under two of its names: "mem=20" and "gpu_mem=20GB". '
        "Give only one of them."
    )
    assert problem("zh", error).splitlines()[0] == (
        "mem 以两个名称给了两次：“mem=20”和“gpu_mem=20GB”。请只给其中一个。"
    )
    # The same name twice is the plain "given twice".
    assert _refusal("gpu_mem=20 gpu_mem=30").problem is Mistake.GIVEN_TWICE


REFUSALS = [
    pytest.param(
        "share=yes gpus=2 mem=20",
        "normal",
        "gpus",
        "A shared job uses one card, but gpus=2. Give gpus=1, or drop share=yes to take 2 "
        "whole cards.",
        "共享卡的任务只用一张卡，但 gpus=2。请改为 gpus=1，或去掉 share=yes 以独占 2 张整卡。",
        id="more-than-one-card",
    ),
    pytest.param(
        "share=yes",
        "idle",
        "mem",
        "share=yes needs the GPU memory the job uses, so paika knows what fits beside it: say "
        "how much GPU memory it uses, e.g. mem=20 (GiB; gpu_mem=20GB works too).",
        "share=yes 需要说明任务占用多少显存，paika 才知道卡上还能放下什么：请说明它占用多少显存，"
        "例如 mem=20（单位 GiB；也可写 gpu_mem=20GB）。",
        id="no-memory",
    ),
    pytest.param(
        "share=yes mem=20",
        "core",
        "priority",
        "Core jobs keep whole cards: drop share=yes, or use priority=normal to share a card.",
        "核心任务独占整卡：请去掉 share=yes，或改用 priority=normal 来共享一张卡。",
        id="core",
    ),
]


@pytest.mark.parametrize(("extra", "priority", "key", "en", "zh"), REFUSALS)
def test_each_refusal_says_what_to_change(
    extra: str, priority: str, key: str, en: str, zh: str
) -> None:
    error = _refusal(extra, priority)
    assert error.key == key  # the submit modal shows it under that field
    assert problem("en", error) == f"{en}\nExample: gpus=1 mem=20 share=yes"
    assert problem("zh", error) == f"{zh}\n示例：gpus=1 mem=20 share=yes"


def test_what_a_template_may_still_bring_is_not_refused_yet() -> None:
    # The template may hold mem=; a clash with what is typed is refused at once.
    assert _submit("template=eval share=yes")["share"] == "yes"
    with pytest.raises(ParseError) as caught:
        _submit("template=eval share=yes gpus=4")
    assert caught.value.problem is Mistake.SHARE_ONE_CARD
    saved = parse("template save eval share=yes").args
    assert saved == {"name": "eval", "share": "yes"}
    with pytest.raises(ParseError) as caught:
        parse("template save eval share=yes priority=core")
    assert caught.value.problem is Mistake.SHARE_NOT_CORE
    # Once everything is known (after merging), the missing memory is refused.
    with pytest.raises(ParseError) as caught:
        check_share({"share": "yes", "gpus": 1, "priority": "normal"}, complete=True)
    assert caught.value.problem is Mistake.SHARE_NEEDS_MEMORY
    check_share({"share": "no", "gpus": 8, "priority": "core"}, complete=True)


@pytest.mark.parametrize(
    ("lang", "alias", "unit"),
    [
        ("en", "also written gpu_mem=", "GiB, GB, G after it mean the same"),
        ("zh", "也可写作 gpu_mem=", "其后可加 GiB、GB、G，含义相同"),
    ],
)
def test_help_names_the_alias_the_units_and_share(lang: str, alias: str, unit: str) -> None:
    text = "\n".join(help_lines(lang, help_for(("submit",))))
    assert alias in text and unit in text
    assert "share=yes" in text and "[share=yes|no]" in text
