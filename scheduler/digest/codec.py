"""Frozen dataclasses to JSON-able values and back, driven by their type hints.

The digest is built by the scheduler, kept in the alerts table's JSON column, and drawn
by the bot later, possibly by another process after a restart; this is how it travels.
Only the shapes the digest uses are supported: dataclasses, str/int/float/bool, None,
datetime (ISO 8601 with its offset), date, tuple[X, ...], dict[str, X] and X | None.
"""

from __future__ import annotations

import dataclasses
import types
from datetime import date, datetime
from functools import cache
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

T = TypeVar("T")


def encode(value: Any) -> Any:
    """A dataclass (or any supported value) as plain JSON-able data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, tuple | list):
        return [encode(item) for item in value]
    if isinstance(value, dict):
        return {str(key): encode(item) for key, item in value.items()}
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"cannot encode {type(value).__name__}")


def decode(kind: type[T], data: Any) -> T:
    """`data` (as `encode` wrote it) back as a `kind`; unknown keys are ignored."""
    return _decode(kind, data)  # type: ignore[no-any-return]


@cache
def _hints(kind: type) -> dict[str, Any]:
    return get_type_hints(kind)


def _decode(hint: Any, data: Any) -> Any:
    origin = get_origin(hint)
    if origin is Union or origin is types.UnionType:
        options = [arg for arg in get_args(hint) if arg is not type(None)]
        if data is None:
            return None
        return _decode(options[0], data)
    if origin is tuple:
        args = get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], item) for item in data)
        return tuple(_decode(arg, item) for arg, item in zip(args, data, strict=True))
    if origin is dict:
        _, value_hint = get_args(hint)
        return {str(key): _decode(value_hint, item) for key, item in data.items()}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(data, dict):
            raise ValueError(f"{hint.__name__} needs an object, got {type(data).__name__}")
        hints = _hints(hint)
        return hint(
            **{
                f.name: _decode(hints[f.name], data[f.name])
                for f in dataclasses.fields(hint)
                if f.name in data
            }
        )
    if hint is datetime:
        return datetime.fromisoformat(data)
    if hint is date:
        return date.fromisoformat(data)
    if hint is float:
        return float(data)
    if hint in (int, str, bool):
        if not isinstance(data, hint):
            raise ValueError(f"expected {hint.__name__}, got {data!r}")
        return data
    if hint is Any:
        return data
    raise TypeError(f"cannot decode {hint!r}")
