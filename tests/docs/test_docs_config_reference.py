"""The configuration reference lists exactly the keys paika accepts, and is what the
generator makes today.

The schema is walked here on its own (not with the generator's code): every field of
`PolicyConfig` and of every model it nests, a map's or a list's items as `*`. The generated
page is read back from its tables, its `<name>` placeholders and `[]` made `*` too."""

from __future__ import annotations

import importlib.util
import re
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import AliasChoices, BaseModel
from pydantic.fields import FieldInfo

from scheduler.config import POOL_SECTIONS, PolicyConfig, Pool
from scheduler.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "docs" / "gen_config_reference.py"
CONFIG_PAGE = ROOT / "docs" / "reference" / "config.md"
SETTINGS_PAGE = ROOT / "docs" / "reference" / "settings.md"
ROW = re.compile(r"^\| `([^`]+)` \|")


def _nested(annotation: Any) -> Iterator[tuple[type[BaseModel], bool]]:
    """The models inside a field's type, each with whether it stands for many (map, list)."""
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation, False
        return
    if origin is typing.Annotated:
        yield from _nested(typing.get_args(annotation)[0])
        return
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            yield from _nested(arg)
        return
    if origin in (dict, tuple, list):
        args = typing.get_args(annotation)
        values = args[1:] if origin is dict else args[:1]
        for arg in values:
            for model, _ in _nested(arg):
                yield model, True


def schema_keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Every dotted key the model accepts, `*` for a map's key or a list's item."""
    keys = set()
    fields: dict[str, Any] = dict(model.model_fields)
    if model is Pool:  # a pool's settings are the section named after its executor
        del fields["options"]
        for executor, section in POOL_SECTIONS.items():
            if section is not None:
                fields[executor] = FieldInfo(annotation=section | None, default=None)
    for name, field in fields.items():
        here = f"{prefix}{name}"
        keys.add(here)
        for inner, many in _nested(field.annotation):
            keys |= schema_keys(inner, f"{here}.*." if many else f"{here}.")
    return keys


def page_keys(page: Path) -> set[str]:
    """The keys a generated page lists in its tables' first column, normalised."""
    keys = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if match:
            key = re.sub(r"<[^>]+>", "*", match[1]).replace("[]", ".*")
            keys.add(key)
    return keys


def test_the_walk_sees_nested_sections() -> None:
    """The independent walk reaches maps, lists and optional sections (else the comparison
    below would prove little)."""
    keys = schema_keys(PolicyConfig)
    assert "gpu_types.*.memory_gib" in keys
    assert "containers.mounts.*.read_only" in keys
    assert "pools.*.slurm.container.option" in keys
    assert "scheduler.hosts.give_up_after_hours" in keys


def test_config_reference_lists_every_key_and_no_other() -> None:
    listed = page_keys(CONFIG_PAGE)
    accepted = schema_keys(PolicyConfig)
    missing = sorted(accepted - listed)
    unknown = sorted(listed - accepted)
    assert not missing and not unknown, (
        f"docs/reference/config.md is out of step with scheduler/config.py: missing {missing}, "
        f"not in the schema {unknown}; run: python docs/gen_config_reference.py"
    )


def test_settings_reference_lists_every_setting() -> None:
    prefix = Settings.model_config.get("env_prefix", "")
    expected = set()
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        expected.add(
            str(alias.choices[0]) if isinstance(alias, AliasChoices) else f"{prefix}{name}".upper()
        )
    listed = page_keys(SETTINGS_PAGE)
    assert expected <= listed, f"not in docs/reference/settings.md: {sorted(expected - listed)}"


@pytest.fixture(scope="module")
def generator() -> types.ModuleType:
    """docs/gen_config_reference.py, imported as a module (no bytecode left in docs/)."""
    spec = importlib.util.spec_from_file_location("paika_docs_generator", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    writes, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = writes
    return module


def test_committed_pages_are_the_generators_output(generator: types.ModuleType) -> None:
    for page, make in generator.PAGES.items():
        assert page.read_text(encoding="utf-8") == make(), (
            f"{page.relative_to(ROOT)} differs from what the schema gives; "
            "run: python docs/gen_config_reference.py"
        )


def test_check_mode_agrees(generator: types.ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert generator.main(["--check"]) == 0, capsys.readouterr().err
