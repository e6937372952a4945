"""/gpu config: show, set, history, diff and rollback the policy config's versions.

Every command is an admin's and is audited. A set applies its values to the newest version's
document, validates the result with the real policy model and stores it as newest + 1; a
writer that lost the race for that number is run again on the fresh version (VersionTaken),
so no change is lost. Nothing is stored unless the whole new document validates.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.config import PolicyConfig, document_from_text, policy_from_document
from scheduler.configs import edit
from scheduler.configs.results import (
    ConfigChanged,
    ConfigDiff,
    ConfigHistory,
    ConfigShown,
    VersionInfo,
)
from scheduler.errors import Action, ConfigError, Conflict, NotFound, Problem, UserError
from scheduler.grammar.values import FreeValue
from scheduler.service.context import Context
from storage.models import ConfigVersion
from storage.queries import config as config_queries

SET_EXAMPLE = '/gpu config set {key}={value} reason="…"'


def show(ctx: Context, key: str | None) -> ConfigShown:
    """The version in force, or one of its values."""
    ctx.require_admin(Action.READ_CONFIG)
    row = _newest(ctx)
    ctx.audit("config.show", "config", row.version, version=row.version, keys=[key] if key else [])
    if key is None:
        return ConfigShown(_info(row), row.content)
    value = edit.value_at(edit.effective(_policy(row)), key)
    if not edit.has_value(value):
        raise NotFound(Problem.CONFIG_KEY_NOT_FOUND, setting=key, version=row.version)
    return ConfigShown(_info(row), row.content, key, edit.shown(value))


def set_values(ctx: Context, given: Mapping[str, FreeValue], reason: str) -> ConfigChanged:
    """Store a new version with `given` dotted keys set; refused, storing nothing, when a key
    is unknown, a value does not validate, or nothing would change."""
    ctx.require_admin(Action.CHANGE_CONFIG)
    row = _newest(ctx)
    before = _policy(row)
    document = document_from_text(row.content, f"config version {row.version}")
    values = {key: edit.parse_value(value.text, value.quoted) for key, value in given.items()}
    try:
        changed = edit.with_values(document, values)
    except edit.NotAMapping as exc:
        raise UserError(
            Problem.CONFIG_UNKNOWN_KEY, setting=_given_key(exc.key, values), example=_example(None)
        ) from None
    after = _validated(changed, values, before)
    found = edit.changes(edit.effective(before), edit.effective(after))
    if not found:
        raise Conflict(Problem.CONFIG_UNCHANGED, settings=tuple(values), version=row.version)
    text = edit.document_text(changed)
    return _store(ctx, row.version, text, reason, "set", edit.as_detail(found), found)


def history(ctx: Context, limit: int) -> ConfigHistory:
    """The newest `limit` versions, newest first."""
    ctx.require_admin(Action.READ_CONFIG)
    rows = config_queries.history(session=ctx.session, limit=limit)
    total = config_queries.count(session=ctx.session)
    ctx.audit("config.history", "config", rows[0].version if rows else 0, limit=limit)
    return ConfigHistory(tuple(_info(row) for row in rows), total)


def diff(ctx: Context, first: int, second: int) -> ConfigDiff:
    """What changed from one version to another, key by key."""
    ctx.require_admin(Action.READ_CONFIG)
    old, new = _version(ctx, first), _version(ctx, second)
    ctx.audit("config.diff", "config", second, versions=[first, second])
    return ConfigDiff(first, second, edit.changes(_values(old), _values(new)))


def rollback(ctx: Context, version: int, reason: str) -> ConfigChanged:
    """Store version `version`'s content again as a new version, in force at once."""
    ctx.require_admin(Action.CHANGE_CONFIG)
    target, newest = _version(ctx, version), _newest(ctx)
    found = edit.changes(_values(newest), _values(target))
    if target.version == newest.version or not found:
        raise Conflict(Problem.CONFIG_ALREADY_IN_FORCE, version=version, current=newest.version)
    _policy(target)  # a version that no longer validates is refused, naming the key
    detail = {**edit.as_detail(found), "rolled_back_to": version}
    return _store(ctx, newest.version, target.content, reason, "rollback", detail, found, version)


def _store(
    ctx: Context,
    read: int,
    content: str,
    reason: str,
    source: str,
    detail: dict[str, Any],
    found: tuple[edit.Change, ...],
    rolled_back_to: int | None = None,
) -> ConfigChanged:
    # The change was made to version `read`, so it is stored as the next one and only so:
    # VersionTaken when another admin stored that number first, and the command runs again
    # on their version (a later number would silently drop their change).
    version = read + 1
    config_queries.add_version(
        session=ctx.session,
        version=version,
        content=content,
        sha256=edit.sha256(content),
        author=ctx.actor.user_id,
        at=ctx.now,
        reason=reason,
        source=source,
        detail=detail,
    )
    keys = [change.key for change in found]
    ctx.audit(f"config.{source}", "config", version, version=version, keys=keys, reason=reason)
    info = VersionInfo(version, ctx.actor.user_id, ctx.now, reason, source, found, rolled_back_to)
    return ConfigChanged(info)


def _validated(
    document: dict[str, Any], values: Mapping[str, object], before: PolicyConfig
) -> PolicyConfig:
    """The edited document as a policy, or the refusal naming the key and the problem."""
    try:
        return policy_from_document(document, "config set")
    except ConfigError as exc:
        key = _given_key(exc.key, values)
        if exc.unknown:
            raise UserError(
                Problem.CONFIG_UNKNOWN_KEY, setting=key, example=_example(None)
            ) from None
        raise UserError(
            Problem.CONFIG_INVALID,
            setting=key,
            problem=exc.problem,
            example=_example(key, edit.value_at(edit.effective(before), key)),
        ) from None


def _given_key(found: str, values: Mapping[str, object]) -> str:
    """The key as the admin typed it that the validator's complaint is about."""
    for key in values:
        if key.startswith(found + "."):  # it names a value inside one that is not a mapping
            return key
    return found


def _example(key: str | None, current: object = None) -> str:
    """A correct command: the key with its value in force, when it has one."""
    if key is None or not edit.has_value(current) or isinstance(current, dict):
        return SET_EXAMPLE.format(key="scheduler.cycle_seconds", value=10)
    return SET_EXAMPLE.format(key=key, value=edit.shown(current).replace(" ", ""))


def _newest(ctx: Context) -> ConfigVersion:
    row = config_queries.newest(session=ctx.session)
    if row is None:
        raise NotFound(Problem.CONFIG_NOTHING_STORED)
    return row


def _version(ctx: Context, version: int) -> ConfigVersion:
    row = config_queries.by_number(session=ctx.session, version=version)
    if row is None:
        newest = config_queries.newest_number(session=ctx.session) or 0
        raise NotFound(Problem.CONFIG_VERSION_NOT_FOUND, version=version, newest=newest)
    return row


def _policy(row: ConfigVersion) -> PolicyConfig:
    """A stored version as a policy; one that no longer validates is named with its key."""
    try:
        return policy_from_document(
            document_from_text(row.content, f"config version {row.version}"),
            f"config version {row.version}",
        )
    except ConfigError as exc:
        raise UserError(
            Problem.CONFIG_INVALID, setting=exc.key, problem=exc.problem, example=_example(None)
        ) from None


def _values(row: ConfigVersion) -> dict[str, Any]:
    """A version's values, defaults included; its bare document if it no longer validates."""
    try:
        return edit.effective(_policy(row))
    except UserError:
        try:
            return document_from_text(row.content, f"config version {row.version}")
        except ConfigError:
            return {}


def _info(row: ConfigVersion) -> VersionInfo:
    detail = row.detail or {}
    return VersionInfo(
        row.version,
        row.author,
        row.at,
        row.reason,
        row.source,
        edit.from_detail(detail),
        detail.get("rolled_back_to"),
    )
