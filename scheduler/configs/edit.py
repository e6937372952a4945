"""Editing and comparing policy documents by dotted key (pure: no I/O).

A document is the policy YAML as parsed (nested mappings); a dotted key such as
`scheduler.cycle_seconds` or `scheduler.headroom.A100-80GB` names one value in it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from scheduler.config import SAFE_LOADER, PolicyConfig

# YAML 1.1 reads 10:30 as a number in base 60; in a policy every such value is a time of day.
_CLOCK_TIME = re.compile(r"^\d{1,2}(:\d{2})+$")
_MISSING = object()


@dataclass(frozen=True)
class Change:
    """One value that differs between two versions, each side shown as JSON (None: absent)."""

    key: str
    old: str | None
    new: str | None


class NotAMapping(Exception):
    """A dotted key goes through a value that is not a mapping (`timezone.x`)."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(key)


def parse_value(text: str, quoted: bool) -> object:
    """A value typed after `key=`, read as YAML (5, true, [0.8, 0.9], {a: 1}); quoted text and
    times of day stay text."""
    if quoted or _CLOCK_TIME.match(text):
        return text
    try:
        return yaml.load(text, Loader=SAFE_LOADER)
    except yaml.YAMLError:
        return text  # not YAML: the policy's own check says what is wrong with it


def with_values(document: Mapping[str, Any], values: Mapping[str, object]) -> dict[str, Any]:
    """A copy of `document` with each dotted key set; NotAMapping when a key cannot be."""
    result = copy.deepcopy(dict(document))
    for key, value in values.items():
        parts = key.split(".")
        node = result
        for depth, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise NotAMapping(".".join(parts[: depth + 1]))
            node = child
        node[parts[-1]] = value
    return result


def effective(policy: PolicyConfig) -> dict[str, Any]:
    """Every value in force, defaults included, as plain JSON values."""
    return policy.model_dump(mode="json")


def flatten(document: Mapping[str, Any], prefix: str = "") -> dict[str, object]:
    """Each leaf of a document under its dotted key (lists are leaves)."""
    flat: dict[str, object] = {}
    for name, value in document.items():
        key = f"{prefix}{name}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, key + "."))
        else:
            flat[key] = value
    return flat


def value_at(document: Mapping[str, Any], key: str) -> object:
    """The value under a dotted key, or the module's missing marker (see `has_value`)."""
    node: object = document
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def has_value(value: object) -> bool:
    """Whether `value_at` found something."""
    return value is not _MISSING


def shown(value: object) -> str:
    """A value as one line of JSON (what /gpu config shows and history records)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> tuple[Change, ...]:
    """Every dotted key whose value differs, in key order."""
    old, new = flatten(before), flatten(after)
    return tuple(
        Change(
            key,
            shown(old[key]) if key in old else None,
            shown(new[key]) if key in new else None,
        )
        for key in sorted(old.keys() | new.keys())
        if old.get(key, _MISSING) != new.get(key, _MISSING)
    )


def as_detail(found: tuple[Change, ...]) -> dict[str, Any]:
    """What a version records about what it changed."""
    return {"changes": [{"key": c.key, "old": c.old, "new": c.new} for c in found]}


def from_detail(detail: Mapping[str, Any] | None) -> tuple[Change, ...]:
    """The changes a version recorded (none for a rollback, which names its source)."""
    rows = (detail or {}).get("changes") or ()
    return tuple(Change(row["key"], row.get("old"), row.get("new")) for row in rows)


def document_text(document: Mapping[str, Any]) -> str:
    """A document as the YAML text a version stores."""
    return yaml.safe_dump(dict(document), sort_keys=False, allow_unicode=True)


def sha256(text: str) -> str:
    """The content's digest (a start compares the file's with the last one recorded)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
