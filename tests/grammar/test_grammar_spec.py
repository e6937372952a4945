"""The spec itself: examples that parse, defaults that convert, consistent definitions."""

from __future__ import annotations

import pytest

from scheduler.grammar import SPEC, SUBCOMMANDS, Subcommand, defaults, parse, subcommand

# What Slack sends when someone types @alice and picks her from the autocomplete.
SLACK_ALICE = "<@U012AB3CD|alice>"


@pytest.mark.parametrize("command", SUBCOMMANDS, ids=lambda command: " ".join(command.path))
def test_example_line_parses_to_its_own_command(command: Subcommand) -> None:
    text = command.example.removeprefix("/gpu ").replace("@alice", SLACK_ALICE)
    assert parse(text).path == command.path


@pytest.mark.parametrize("command", SUBCOMMANDS, ids=lambda command: " ".join(command.path))
def test_definitions_are_consistent(command: Subcommand) -> None:
    names = [key.name for key in command.keys]
    assert len(names) == len(set(names))
    assert command.admin == (command.path[0] in ("admin", "config"))  # config: admins only
    assert all(key.positional for key in command.keys[: len(command.positionals)])
    assert all(not key.rest for key in command.positionals[:-1])
    assert all(key.choices for key in command.keys if key.kind == "choice")
    assert command.template_key is None or command.key(command.template_key) is not None
    assert SPEC[command.path] is command is subcommand(command.path)


def test_defaults_are_typed_and_cover_only_keys_with_defaults() -> None:
    assert defaults(("submit",)) == {"gpus": 1, "preemptible": "no", "share": "no"}
    assert defaults(("queue",)) == {"scope": "all"}
    assert defaults(("admin", "member", "add")) == {"role": "member"}
    assert defaults(("admin", "quota", "add")) == {"type": None}
    assert defaults(("template", "save")) == {}
    for command in SUBCOMMANDS:
        assert set(defaults(command.path)) == {
            key.name for key in command.keys if key.default is not None
        }


def test_template_save_takes_submit_keys_except_name_template_again_and_the_jobs_waited_for() -> (
    None
):
    submit, save = SPEC[("submit",)], SPEC[("template", "save")]
    stored = {key.name for key in save.keys if not key.positional}
    # One submission's, never a template's.
    own = {"name", "template", "again", "after", "afterany", "count", "sweep", "max_running"}
    # …and the one key a template has of its own: the next step of a pipeline.
    assert stored == ({key.name for key in submit.keys} - own) | {"then"}
    assert [key.name for key in save.keys if key.required] == ["name"]
