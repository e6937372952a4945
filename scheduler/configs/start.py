"""Which config version is in force when paika starts.

The policy file (PAIKA_CONFIG, else the bundled example) is recorded as version 1 when no
version is stored; a file that differs from the one recorded at the last start becomes a new
version (the operator changed it on purpose); the same file as before leaves the newest
stored version in force, so a `/gpu config set` made since is not undone by a restart.
"""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path

from sqlalchemy import Engine

from scheduler.config import PolicyConfig, load_policy, policy_from_text
from scheduler.configs import edit
from scheduler.configs.live import LivePolicy
from scheduler.errors import ConfigError
from storage.db import lost_race, session_scope
from storage.queries import config as config_queries

log = logging.getLogger(__name__)

# Two instances starting at once race for the same version number; the loser looks again.
START_TRIES = 5
FIRST_START = "first start"
FILE_CHANGED = "PAIKA_CONFIG changed since the last start"


def policy_at_start(engine: Engine, path: Path, author: str, now: datetime) -> LivePolicy:
    """The policy in force and its version, recording the file when it is new; ConfigError
    when the file is invalid (nothing is recorded then)."""
    policy = load_policy(path)
    text = path.read_text(encoding="utf-8")
    digest = edit.sha256(text)
    for _ in range(START_TRIES):
        try:
            return _settle(engine, policy, text, digest, author, now)
        except Exception as exc:  # VersionTaken, or a deadlock's victim: look again
            if not lost_race(exc):
                raise
            log.info("another instance stored a config version at the same time; looking again")
    raise ConfigError(str(path), "-", "other instances kept storing config versions; start again")


def _settle(
    engine: Engine, policy: PolicyConfig, text: str, digest: str, author: str, now: datetime
) -> LivePolicy:
    with session_scope(engine) as session:
        newest = config_queries.newest(session=session)
        last_file = config_queries.newest_from_file(session=session)
        if newest is not None and last_file is not None and last_file.sha256 == digest:
            return _stored(newest.version, newest.content, policy, last_file.version)
        version = 1 if newest is None else newest.version + 1
        before = None if newest is None else _effective_or_document(newest.content)
        after = edit.effective(policy)
        config_queries.add_version(
            session=session,
            version=version,
            content=text,
            sha256=digest,
            author=author,
            at=now,
            reason=FIRST_START if newest is None else FILE_CHANGED,
            source="file",
            detail=None if before is None else edit.as_detail(edit.changes(before, after)),
        )
    log.info("the policy file is config version %d", version)
    return LivePolicy(policy, version)


def _stored(version: int, content: str, file_policy: PolicyConfig, file_version: int) -> LivePolicy:
    """The newest stored version, in force; should it no longer validate, the file's own."""
    try:
        return LivePolicy(policy_from_text(content, f"config version {version}"), version)
    except ConfigError as exc:
        log.error(
            "config version %d does not validate (%s); the policy file's version %d is in force",
            version,
            exc,
            file_version,
        )
        return LivePolicy(file_policy, file_version)


def _effective_or_document(content: str) -> dict[str, object] | None:
    """What a stored version holds, defaults included when it still validates."""
    try:
        return edit.effective(policy_from_text(content, "stored"))
    except ConfigError:
        return None
