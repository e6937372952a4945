"""help_text(): generated from the spec, so every command and key shows up in it."""

from __future__ import annotations

import pytest

from scheduler.grammar import SUBCOMMANDS, ParseError, Subcommand, help_text
from scheduler.grammar.values import describe, example_arg


def test_overview_lists_every_command_with_its_summary() -> None:
    overview = help_text()
    for command in SUBCOMMANDS:
        assert f"{command.heading} " in overview
        assert command.summary in overview


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
        assert key.help in text
        assert f"Value: {describe(key)}. Example: {example_arg(key)}" in text
        assert ("required" if key.required else "optional") in text
        if key.shown_default is not None:
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
    assert str(caught.value) == message
