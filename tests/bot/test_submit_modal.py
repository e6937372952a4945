"""The submit modal: a valid Slack view, read back exactly as `/gpu submit` text parses,
with each bad field's error under that field."""

from __future__ import annotations

from typing import Any

import pytest
from slack_sdk.models.views import View

from bot.blocks import ids
from bot.blocks.common import INPUT_ERROR_TEXT, MODAL_TITLE
from bot.blocks.submit_modal import block_for_key, read_submission, submit_modal
from scheduler.grammar import DataSpec, parse

TYPES = ["T4-16GB", "A100-80GB", "H100"]
TEAMS = ["vision", "nlp"]
TEMPLATES = ["bert-base"]


# --- what Slack sends back in view.state.values ----------------------------------------------


def text(value: str | None) -> dict[str, Any]:
    return {"type": "plain_text_input", "value": value}


def select(value: str | None) -> dict[str, Any]:
    chosen = (
        None if value is None else {"text": {"type": "plain_text", "text": value}, "value": value}
    )
    return {"type": "static_select", "selected_option": chosen}


def multi(*values: str) -> dict[str, Any]:
    chosen = [{"text": {"type": "plain_text", "text": v}, "value": v} for v in values]
    return {"type": "multi_static_select", "selected_options": chosen}


def radio(value: str | None) -> dict[str, Any]:
    return select(value) | {"type": "radio_buttons"}


def state(**fields: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """Slack's state: every block of the modal, the given ones filled, the rest empty."""
    empty: dict[str, dict[str, Any]] = {
        ids.SUBMIT_TEMPLATE: select(None),
        ids.SUBMIT_NAME: text(None),
        ids.SUBMIT_GPUS: text(None),
        ids.SUBMIT_TYPE: multi(),
        ids.SUBMIT_MEM: text(None),
        ids.SUBMIT_HOURS: text(None),
        ids.SUBMIT_PRIORITY: select("normal"),
        ids.SUBMIT_DATA: radio(None),
        ids.SUBMIT_LOCATION: text(None),
        ids.SUBMIT_CMD: text(None),
        ids.SUBMIT_IMAGE: text(None),
        ids.SUBMIT_TEAM: select(None),
    }
    given = {getattr(ids, f"SUBMIT_{name.upper()}"): value for name, value in fields.items()}
    return {block: {block: element} for block, element in (empty | given).items()}


MINIMAL = {
    "name": text("bert-ft"),
    "hours": text("12"),
    "data": radio("ready"),
    "cmd": text("python train.py"),
}


# --- the view --------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize(
    ("types", "teams", "templates"),
    [
        (TYPES, TEAMS, TEMPLATES),
        (TYPES, [], []),
        ([], [], []),
        ([f"T{i}" for i in range(150)], TEAMS, []),
    ],
    ids=["all menus", "types only", "no menus", "150 types"],
)
def test_the_modal_is_a_valid_view(
    lang: str, types: list[str], teams: list[str], templates: list[str]
) -> None:
    view = submit_modal(lang, types, teams, templates, private_metadata="C0123ABCD")
    View(**view).validate_json()
    assert view["type"] == "modal" and view["callback_id"] == ids.SUBMIT_CALLBACK
    assert len(view["title"]["text"]) <= MODAL_TITLE
    assert view["private_metadata"] == "C0123ABCD"
    blocks = {block["block_id"]: block for block in view["blocks"]}
    assert (ids.SUBMIT_TYPE in blocks) == bool(types)
    assert (ids.SUBMIT_TEAM in blocks) == bool(teams)
    assert (ids.SUBMIT_TEMPLATE in blocks) == bool(templates)
    for block_id, block in blocks.items():
        assert block["element"]["action_id"] == block_id


def test_more_than_100_choices_are_listed_as_100_and_the_hint_says_so() -> None:
    view = submit_modal("en", [f"T{i}" for i in range(150)], [], [])
    block = next(b for b in view["blocks"] if b["block_id"] == ids.SUBMIT_TYPE)
    assert len(block["element"]["options"]) == 100
    assert "other 50" in block["hint"]["text"]


def test_required_fields_are_marked_required_unless_a_template_may_fill_them() -> None:
    def optional(templates: list[str]) -> dict[str, bool]:
        view = submit_modal("en", TYPES, TEAMS, templates)
        return {block["block_id"]: block["optional"] for block in view["blocks"]}

    plain = optional([])
    assert not plain[ids.SUBMIT_NAME] and not plain[ids.SUBMIT_HOURS] and not plain[ids.SUBMIT_CMD]
    assert plain[ids.SUBMIT_GPUS] and plain[ids.SUBMIT_IMAGE] and plain[ids.SUBMIT_LOCATION]
    templated = optional(TEMPLATES)
    assert not templated[ids.SUBMIT_NAME]
    assert templated[ids.SUBMIT_HOURS] and templated[ids.SUBMIT_CMD] and templated[ids.SUBMIT_DATA]


def test_priority_defaults_to_normal_and_the_labels_speak_chinese() -> None:
    view = submit_modal("zh", TYPES, TEAMS, [])
    block = next(b for b in view["blocks"] if b["block_id"] == ids.SUBMIT_PRIORITY)
    assert block["element"]["initial_option"]["value"] == "normal"
    assert [o["text"]["text"] for o in block["element"]["options"]] == ["核心", "普通", "闲时"]
    assert view["title"]["text"] == "提交 GPU 任务"


# --- reading it back -------------------------------------------------------------------------


SAME_AS_TEXT = [
    (
        "every field",
        {
            "template": select("bert-base"),
            "name": text("bert-ft"),
            "gpus": text("2"),
            "type": multi("A100-80GB", "H100"),
            "mem": text("40"),
            "hours": text("12.5"),
            "priority": select("core"),
            "data": radio("pending"),
            "location": text("/mnt/nas/squad"),
            "cmd": text("python train.py --lr 3e-4"),
            "image": text("nvcr.io/nvidia/pytorch:24.05-py3"),
            "team": select("vision"),
        },
        "submit template=bert-base name=bert-ft gpus=2 type=A100-80GB,H100 mem=40 hours=12.5 "
        'priority=core data=/mnt/nas/squad cmd="python train.py --lr 3e-4" '
        "image=nvcr.io/nvidia/pytorch:24.05-py3 team=vision",
    ),
    (
        "the required fields",
        MINIMAL,
        'submit name=bert-ft hours=12 priority=normal data=ready cmd="python train.py"',
    ),
    (
        "data not ready, no location",
        MINIMAL | {"data": radio("pending")},
        'submit name=bert-ft hours=12 priority=normal data=pending cmd="python train.py"',
    ),
    (
        "a location alone means not ready yet",
        MINIMAL | {"data": radio(None), "location": text("s3://bucket/squad")},
        'submit name=bert-ft hours=12 priority=normal data=s3://bucket/squad cmd="python train.py"',
    ),
    (
        "spaces around values",
        MINIMAL | {"name": text("  bert-ft "), "gpus": text(" 4 ")},
        'submit name=bert-ft gpus=4 hours=12 priority=normal data=ready cmd="python train.py"',
    ),
    (
        "a template fills the rest",
        {"template": select("bert-base"), "name": text("bert-ft")},
        "submit template=bert-base name=bert-ft priority=normal",
    ),
]


@pytest.mark.parametrize(
    ("fields", "typed"), [c[1:] for c in SAME_AS_TEXT], ids=[c[0] for c in SAME_AS_TEXT]
)
def test_a_valid_submission_reads_as_the_text_command_parses(
    fields: dict[str, dict[str, Any]], typed: str
) -> None:
    args, errors = read_submission(state(**fields))
    assert errors == {}
    command = parse(typed)
    assert command.path == ("submit",)
    assert args == command.args


def test_ready_data_keeps_its_location() -> None:
    args, errors = read_submission(state(**MINIMAL | {"location": text("/mnt/nas/squad")}))
    assert errors == {}
    assert args["data"] == DataSpec(ready=True, location="/mnt/nas/squad")


INVALID = [
    ("gpus", text("two"), ids.SUBMIT_GPUS, "gpus must be a whole number from 1 to 64"),
    ("gpus", text("0"), ids.SUBMIT_GPUS, "Example: 2"),
    ("name", text("bert ft!"), ids.SUBMIT_NAME, "name cannot hold U+0020 (character 5): a space"),
    ("mem", text("-1"), ids.SUBMIT_MEM, "mem must be a number from 1 to 1024"),
    ("hours", text("0"), ids.SUBMIT_HOURS, "hours must be a number from 0.01"),
    ("hours", text("1e999"), ids.SUBMIT_HOURS, "Example: 24"),
    ("cmd", text("x" * 2001), ids.SUBMIT_CMD, "cmd must be text of at most 2000 characters"),
    ("image", text("i" * 501), ids.SUBMIT_IMAGE, "got 501 characters"),
    ("location", text("reddy"), ids.SUBMIT_LOCATION, "Example: /mnt/nas/imagenet"),
    ("location", text("ready"), ids.SUBMIT_LOCATION, "path or URL"),
    ("team", select("Not a team!"), ids.SUBMIT_TEAM, "team cannot hold U+0020 (character 4)"),
    ("type", multi("A100 80GB"), ids.SUBMIT_TYPE, "type must be GPU type names"),
]


@pytest.mark.parametrize(
    ("field", "value", "block", "says"),
    INVALID,
    ids=[
        f"{field}={value.get('value') or value.get('selected_option') or value.get('selected_options')}"[
            :40
        ]
        for field, value, _, _ in INVALID
    ],
)
def test_each_invalid_field_gets_its_error_on_its_own_block(
    field: str, value: dict[str, Any], block: str, says: str
) -> None:
    _, errors = read_submission(state(**MINIMAL | {field: value}))
    assert list(errors) == [block]
    assert says in errors[block]
    assert len(errors[block]) <= INPUT_ERROR_TEXT


def test_missing_required_fields_get_an_error_each_unless_a_template_is_chosen() -> None:
    _, errors = read_submission(state())
    assert set(errors) == {ids.SUBMIT_NAME, ids.SUBMIT_HOURS, ids.SUBMIT_DATA, ids.SUBMIT_CMD}
    assert errors[ids.SUBMIT_HOURS] == "Required. Example: 24"
    args, errors = read_submission(state(template=select("bert-base"), name=text("x")))
    assert errors == {} and args["template"] == "bert-base"


def test_errors_in_chinese_and_within_slacks_limit() -> None:
    _, errors = read_submission(state(hours=text("x" * 300)), lang="zh")
    assert errors[ids.SUBMIT_CMD] == "必填项。例如：python train.py --lr 3e-4"
    assert errors[ids.SUBMIT_HOURS].endswith("例如：24") and len(errors[ids.SUBMIT_HOURS]) <= 150


def test_service_errors_land_on_the_block_of_their_key() -> None:
    assert block_for_key("hours") == ids.SUBMIT_HOURS
    assert block_for_key("data") == ids.SUBMIT_DATA
    assert block_for_key(None) == block_for_key("speed") == ids.SUBMIT_NAME
