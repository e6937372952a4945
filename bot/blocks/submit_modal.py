"""The submit modal, and reading it back into the same arguments `/gpu submit` parses to.

Every field is converted by the grammar's own converter, so a job submitted from the
modal is the job the same values typed after `/gpu submit` would make, and a bad value
gets the same explanation, shown under its field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from bot.blocks.common import (
    INPUT_ERROR_TEXT,
    MODAL_BUTTON,
    MODAL_TITLE,
    PLACEHOLDER_TEXT,
    SELECT_OPTIONS,
    Block,
    fit,
    option,
    plain,
)
from bot.blocks.ids import (
    SUBMIT_AFTER,
    SUBMIT_BLOCK_OF_KEY,
    SUBMIT_CALLBACK,
    SUBMIT_CHECKPOINT,
    SUBMIT_CMD,
    SUBMIT_COUNT,
    SUBMIT_DATA,
    SUBMIT_GPUS,
    SUBMIT_GRACE,
    SUBMIT_HOURS,
    SUBMIT_IMAGE,
    SUBMIT_LOCATION,
    SUBMIT_MAX_RUNNING,
    SUBMIT_MEM,
    SUBMIT_NAME,
    SUBMIT_PREEMPTIBLE,
    SUBMIT_PRIORITY,
    SUBMIT_PROJECT,
    SUBMIT_ROUND,
    SUBMIT_SHARE,
    SUBMIT_SWEEP,
    SUBMIT_TEAM,
    SUBMIT_TEMPLATE,
    SUBMIT_TYPE,
)
from bot.i18n import t, term
from bot.said import problem_sentence
from bot.usage import key_help
from scheduler.grammar import Key, ParseError, subcommand
from scheduler.grammar.spec import PRIORITIES
from scheduler.grammar.values import DataSpec, convert

SUBMIT_PATH = ("submit",)
DATA_READY = "ready"
DATA_PENDING = "pending"  # the grammar's word for "not on the GPU hosts yet"
DEFAULT_PRIORITY = "normal"

StateValues = Mapping[str, Mapping[str, Mapping[str, Any]]]


def submit_keys() -> dict[str, Key]:
    """The grammar's submit keys by name."""
    return {key.name: key for key in subcommand(SUBMIT_PATH).keys}


def submit_modal(
    lang: str,
    gpu_types: Sequence[str],
    teams: Sequence[str],
    templates: Sequence[str],
    private_metadata: str = "",
) -> dict[str, Any]:
    """The modal `/gpu submit` (and the Home tab's button) opens."""
    keys = submit_keys()
    # With templates to choose from, the fields a template fills cannot be required by
    # Slack; read_submission checks them once it knows whether a template was chosen.
    required = not templates
    blocks: list[Block] = []
    if templates:
        blocks.append(
            _select(
                SUBMIT_TEMPLATE,
                t(lang, "modal.label.template"),
                templates,
                hint=t(lang, "modal.hint.template"),
                lang=lang,
            )
        )
    blocks += [
        _text(
            SUBMIT_NAME,
            t(lang, "modal.label.name"),
            keys["name"],
            hint=key_help(lang, keys["name"]),
            optional=False,
        ),
        _text(
            SUBMIT_GPUS,
            t(lang, "modal.label.gpus"),
            keys["gpus"],
            hint=key_help(lang, keys["gpus"]),
            placeholder=t(lang, "modal.default", value=keys["gpus"].default),
        ),
    ]
    if gpu_types:
        blocks.append(
            _select(
                SUBMIT_TYPE,
                t(lang, "modal.label.type"),
                gpu_types,
                hint=key_help(lang, keys["type"]),
                lang=lang,
                multi=True,
            )
        )
    blocks += [
        _text(
            SUBMIT_MEM, t(lang, "modal.label.mem"), keys["mem"], hint=key_help(lang, keys["mem"])
        ),
        _share(lang, keys["share"]),
        _text(
            SUBMIT_HOURS,
            t(lang, "modal.label.hours"),
            keys["hours"],
            hint=key_help(lang, keys["hours"]),
            optional=not required,
        ),
        _priority(lang),
        _data(lang, optional=not required),
        _text(
            SUBMIT_LOCATION,
            t(lang, "modal.label.location"),
            keys["data"],
            hint=t(lang, "modal.hint.location"),
            placeholder="/mnt/nas/imagenet",
        ),
        _text(
            SUBMIT_CMD,
            t(lang, "modal.label.cmd"),
            keys["cmd"],
            hint=key_help(lang, keys["cmd"]),
            optional=not required,
            multiline=True,
        ),
        _text(
            SUBMIT_IMAGE,
            t(lang, "modal.label.image"),
            keys["image"],
            hint=key_help(lang, keys["image"]),
        ),
    ]
    blocks += [
        _preemptible(lang, keys["preemptible"]),
        _text(
            SUBMIT_GRACE,
            t(lang, "modal.label.grace"),
            keys["grace"],
            hint=key_help(lang, keys["grace"]),
        ),
        _text(
            SUBMIT_CHECKPOINT,
            t(lang, "modal.label.checkpoint"),
            keys["checkpoint"],
            hint=key_help(lang, keys["checkpoint"]),
        ),
    ]
    blocks += [
        _text(
            SUBMIT_AFTER,
            t(lang, "modal.label.after"),
            keys["after"],
            hint=key_help(lang, keys["after"]),
            placeholder="#12,#13",
        ),
        _text(
            SUBMIT_COUNT,
            t(lang, "modal.label.count"),
            keys["count"],
            hint=key_help(lang, keys["count"]),
        ),
        _text(
            SUBMIT_SWEEP,
            t(lang, "modal.label.sweep"),
            keys["sweep"],
            hint=key_help(lang, keys["sweep"]),
            placeholder="lr=1e-4,3e-4 bs=32,64",
        ),
        _text(
            SUBMIT_MAX_RUNNING,
            t(lang, "modal.label.max_running"),
            keys["max_running"],
            hint=key_help(lang, keys["max_running"]),
        ),
        _text(
            SUBMIT_PROJECT,
            t(lang, "modal.label.project"),
            keys["project"],
            hint=key_help(lang, keys["project"]),
        ),
        _text(
            SUBMIT_ROUND,
            t(lang, "modal.label.round"),
            keys["round"],
            hint=key_help(lang, keys["round"]),
        ),
    ]
    if teams:
        blocks.append(
            _select(
                SUBMIT_TEAM,
                t(lang, "modal.label.team"),
                teams,
                hint=key_help(lang, keys["team"]),
                lang=lang,
            )
        )
    return {
        "type": "modal",
        "callback_id": SUBMIT_CALLBACK,
        "title": plain(t(lang, "modal.title"), MODAL_TITLE),
        "submit": plain(t(lang, "modal.submit"), MODAL_BUTTON),
        "close": plain(t(lang, "modal.close"), MODAL_BUTTON),
        "private_metadata": private_metadata,
        "blocks": blocks,
    }


def block_for_key(key: str | None) -> str:
    """The block that shows an error about grammar key `key`; the name block for any other."""
    return SUBMIT_BLOCK_OF_KEY.get(key or "", SUBMIT_NAME)


def read_submission(
    state_values: StateValues, lang: str = "en"
) -> tuple[dict[str, Any], dict[str, str]]:
    """`view.state.values` as the parsed `args` of `/gpu submit`, and an error per bad block.

    The errors map block ids to short messages, ready for `response_action: "errors"`.
    """
    keys = submit_keys()
    args: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for name, block in SUBMIT_BLOCK_OF_KEY.items():
        if name == "data":
            continue
        raw = _given(state_values, block)
        if raw is None:
            continue
        key = keys[name]
        try:
            args[name] = convert(key, raw, key.example)
        except ParseError as exc:
            errors[block] = _inline(lang, problem_sentence(lang, exc), key.example)
    _read_data(state_values, keys["data"], lang, args, errors)
    if "template" not in args and SUBMIT_TEMPLATE not in errors:
        for key in keys.values():
            block = SUBMIT_BLOCK_OF_KEY.get(key.name, "")
            if key.required and key.name not in args and block not in errors:
                if key.name == "data" and SUBMIT_LOCATION in errors:
                    continue  # the location's own error already says what is wrong
                errors[block] = _inline(lang, t(lang, "modal.required"), key.example)
    return args, errors


def _read_data(
    state_values: StateValues,
    key: Key,
    lang: str,
    args: dict[str, Any],
    errors: dict[str, str],
) -> None:
    """The readiness radio and the location box, as the one `data` value the grammar reads."""
    readiness = _given(state_values, SUBMIT_DATA)
    location = _given(state_values, SUBMIT_LOCATION)
    if location is None:
        if readiness is not None:
            try:
                args["data"] = convert(key, readiness)
            except ParseError as exc:  # a choice the modal never offered
                errors[SUBMIT_DATA] = _inline(lang, problem_sentence(lang, exc), key.example)
        return
    example = "/mnt/nas/imagenet"
    try:
        spec = convert(key, location, example)
    except ParseError as exc:
        errors[SUBMIT_LOCATION] = _inline(lang, problem_sentence(lang, exc), example)
        return
    if isinstance(spec, DataSpec) and spec.after is not None:
        args["data"] = spec  # another job makes it (after:#12): ready once that one succeeds
        return
    if not isinstance(spec, DataSpec) or spec.location is None:  # "ready" typed as a place
        errors[SUBMIT_LOCATION] = _inline(lang, t(lang, "modal.bad_location"), example)
        return
    # The text command cannot say "ready, and it is here"; the form can, so keep both.
    args["data"] = replace(spec, ready=True) if readiness == DATA_READY else spec


def _given(state_values: StateValues, block: str) -> str | None:
    """What the user entered in a block, as the text the grammar reads; None if nothing."""
    elements = state_values.get(block)
    if not elements:
        return None
    element = elements.get(block) or next(iter(elements.values()), None)
    if not element:
        return None
    if "selected_options" in element:
        chosen = [item["value"] for item in element.get("selected_options") or []]
        return ",".join(chosen) or None
    if "selected_option" in element:
        selected = element.get("selected_option")
        return str(selected["value"]) if selected else None
    value = element.get("value")
    if value is None or not str(value).strip():
        return None
    return str(value).strip()


def _inline(lang: str, message: str, example: str) -> str:
    """An inline error within Slack's 150 characters: what is wrong, then an example."""
    suffix = t(lang, "modal.example", example=example)
    if len(suffix) > INPUT_ERROR_TEXT // 2:
        suffix = ""
    return fit(message, INPUT_ERROR_TEXT - len(suffix)) + suffix


def _input(
    block_id: str, label: str, element: dict[str, Any], *, hint: str, optional: bool
) -> Block:
    element["action_id"] = block_id
    return {
        "type": "input",
        "block_id": block_id,
        "label": plain(label, 2000),
        "element": element,
        "hint": plain(hint, 2000),
        "optional": optional,
    }


def _text(
    block_id: str,
    label: str,
    key: Key,
    *,
    hint: str,
    optional: bool = True,
    multiline: bool = False,
    placeholder: str | None = None,
) -> Block:
    element: dict[str, Any] = {
        "type": "plain_text_input",
        "placeholder": plain(placeholder or key.example, PLACEHOLDER_TEXT),
        "max_length": key.max_length,
    }
    if multiline:
        element["multiline"] = True
    return _input(block_id, label, element, hint=hint, optional=optional)


def _select(
    block_id: str,
    label: str,
    names: Sequence[str],
    *,
    hint: str,
    lang: str,
    multi: bool = False,
) -> Block:
    shown = names[:SELECT_OPTIONS]
    if len(names) > len(shown):  # Slack lists at most 100; say how to reach the others
        hint += " " + t(lang, "modal.more_options", n=len(names) - len(shown))
    element: dict[str, Any] = {
        "type": "multi_static_select" if multi else "static_select",
        "placeholder": plain(t(lang, "modal.choose"), PLACEHOLDER_TEXT),
        "options": [option(name, name) for name in shown],
    }
    return _input(block_id, label, element, hint=hint, optional=True)


def _priority(lang: str) -> Block:
    choices = [option(term(lang, "priority", name), name) for name in PRIORITIES]
    element = {
        "type": "static_select",
        "options": choices,
        "initial_option": choices[PRIORITIES.index(DEFAULT_PRIORITY)],
    }
    return _input(
        SUBMIT_PRIORITY,
        t(lang, "modal.label.priority"),
        element,
        hint=t(lang, "modal.hint.priority"),
        optional=False,
    )


def _preemptible(lang: str, key: Key) -> Block:
    """One box to tick: the job checkpoints and resumes (`preemptible=yes`)."""
    element = {
        "type": "checkboxes",
        "options": [option(t(lang, "modal.preemptible.yes"), "yes")],
    }
    return _input(
        SUBMIT_PREEMPTIBLE,
        t(lang, "modal.label.preemptible"),
        element,
        hint=key_help(lang, key),
        optional=True,
    )


def _share(lang: str, key: Key) -> Block:
    """One box to tick, under the memory it uses: one card, shared (`share=yes`)."""
    element = {
        "type": "checkboxes",
        "options": [option(t(lang, "modal.share.yes"), "yes")],
    }
    return _input(
        SUBMIT_SHARE, t(lang, "modal.label.share"), element, hint=key_help(lang, key), optional=True
    )


def _data(lang: str, *, optional: bool) -> Block:
    element = {
        "type": "radio_buttons",
        "options": [
            option(t(lang, "modal.data.ready"), DATA_READY),
            option(t(lang, "modal.data.pending"), DATA_PENDING),
        ],
    }
    return _input(
        SUBMIT_DATA,
        t(lang, "modal.label.data"),
        element,
        hint=t(lang, "modal.hint.data"),
        optional=optional,
    )
