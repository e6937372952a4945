"""/gpu help: read from the spec, so every command and key shows up in it, and said in
English as the console prints it (bot.usage)."""

from __future__ import annotations

import pytest

from bot.i18n import t
from bot.said import problem
from bot.usage import expected_words, help_lines
from scheduler.grammar import SUBCOMMANDS, Help, Key, ParseError, Subcommand, help_for
from scheduler.grammar.values import example_arg, expected


def help_text(path: tuple[str, ...] = ()) -> str:
    return "\n".join(help_lines("en", help_for(path)))


def describe(key: Key) -> str:
    return expected_words("en", expected(key))


def test_overview_lists_every_command_with_its_summary() -> None:
    overview = help_text()
    for command in SUBCOMMANDS:
        assert f"{command.heading} " in overview
        assert t("en", command.summary_code) in overview


def test_overview_groups_jobs_before_admin() -> None:
    overview = help_text()
    assert overview.index("\nJobs\n") < overview.index("/gpu submit")
    assert overview.index("\nAdmin (admins only)\n") < overview.index("/gpu admin team add")


@pytest.mark.parametrize("command", SUBCOMMANDS, ids=lambda command: " ".join(command.path))
def test_command_help_shows_every_key_of_the_spec(command: Subcommand) -> None:
    text = help_text(command.path)
    assert f"Usage: {command.usage}" in text
    assert text.endswith(f"Example: {command.example}")
    for key in command.keys:
        assert f"  {key.placeholder if key.positional else key.name} (" in text
        assert t("en", key.help_code) in text
        assert f"Value: {describe(key)}. Example: {example_arg(key)}" in text
        assert ("required" if key.required else "optional") in text
        if key.shown_default is not None and key.default_word is None:
            assert f"default: {key.shown_default}" in text


def test_submit_help_shows_defaults_and_template_rule() -> None:
    text = help_text(("submit",))
    assert "  gpus (optional, default: 1)\n" in text
    assert "  team (optional, default: your team)\n" in text
    assert "With template=…, keys you leave out come from that saved template" in text


def test_group_help_lists_only_that_group() -> None:
    assert help_text(("admin", "quota")) == (
        "/gpu admin quota commands. Type /gpu help admin quota <command> for its keys.\n"
        "\n"
        "  /gpu admin quota add          Grant a team GPU-hours until a date.\n"
        "  /gpu admin quota renew <id>   Extend a grant to a new date.\n"
        "  /gpu admin quota adjust <id>  Set a grant's total GPU-hours.\n"
        "  /gpu admin quota list         List quota grants."
    )


def test_help_path_is_case_insensitive() -> None:
    assert help_text(("Admin", "QUOTA", "add")) == help_text(("admin", "quota", "add"))


def test_help_is_data_the_bot_says() -> None:
    shown = help_for(("admin", "quota"))
    assert shown == Help(("admin", "quota"), shown.commands)
    assert [command.path[-1] for command in shown.commands] == ["add", "renew", "adjust", "list"]
    one = help_for(("status",))
    assert one.command is not None and one.commands == (one.command,)
    assert help_for().topic == () and help_for().commands == SUBCOMMANDS


def test_help_in_chinese_says_every_summary_and_key_in_chinese() -> None:
    overview = "\n".join(help_lines("zh", help_for()))
    assert "任务" in overview and "管理（仅管理员）" in overview
    submit = "\n".join(help_lines("zh", help_for(("submit",))))
    assert "gpus（可选，默认：1）" in submit
    assert "team（可选，默认：你的团队）" in submit
    assert "取值：整数，范围 1 到 64。示例：gpus=2" in submit
    for line in submit.splitlines():
        # Every line but the example and the usage is said in Chinese.
        if line.strip() and not line.startswith(("示例：", "用法：")):
            assert any("\u4e00" <= char <= "\u9fff" for char in line), line


@pytest.mark.parametrize(
    ("path", "message"),
    [
        pytest.param(
            ("admin", "quota", "ad"),
            'Unknown command "admin quota ad". Did you mean "admin quota add"? '
            "admin quota commands: add, renew, adjust, list. Try /gpu help admin quota.",
            id="unknown-in-group",
        ),
        pytest.param(
            ("submit", "gpus"),
            'Unknown command "submit gpus". Try /gpu help submit.',
            id="word-after-command",
        ),
    ],
)
def test_unknown_help_path_is_a_parse_error(path: tuple[str, ...], message: str) -> None:
    with pytest.raises(ParseError) as caught:
        help_text(path)
    assert problem("en", caught.value) == message
