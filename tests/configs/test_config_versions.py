"""The policy config under version control, on SQLite, PostgreSQL and MariaDB: which version
is in force at start, /gpu config show|set|history|diff|rollback, and who may use them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import TypeVar

import pytest
import yaml
from sqlalchemy import Engine
from sqlmodel import Session, col, select

from bot.console import render
from bot.digest.text import render_text
from scheduler.app import Paika, Reply
from scheduler.clock import ManualClock
from scheduler.configs.start import policy_at_start
from scheduler.digest import Digest, digest_now
from scheduler.digest.codec import decode, encode
from scheduler.settings import BUNDLED_POLICY, Settings
from storage.models import AuditEvent, ConfigVersion

ADMIN = "UADMIN"
T = TypeVar("T")


STARTED: list[Paika] = []


def start(engine: Engine, clock: ManualClock, config: Path | None = None) -> Paika:
    """A paika started on the test database, as `paika up` or `paika cmd` starts one."""
    settings = Settings(
        database_url=engine.url.render_as_string(hide_password=False),
        admins=(ADMIN,),
        config=config,
    )
    paika = Paika.start(settings, clock=clock, words=render)
    STARTED.append(paika)
    return paika


def at_once(*calls: Callable[[], T]) -> list[T | Exception]:
    """Run the calls in threads let go together; each one's result, or what it raised."""
    gate = threading.Barrier(len(calls))
    results: list[T | Exception] = []

    def run(call: Callable[[], T]) -> None:
        gate.wait()
        try:
            results.append(call())
        except Exception as exc:  # shown by the caller's assertion
            results.append(exc)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


@pytest.fixture(autouse=True)
def _let_go() -> Iterator[None]:
    """Every paika a test started lets its connections go."""
    yield
    while STARTED:
        STARTED.pop().engine.dispose()


def ok(paika: Paika, text: str, user: str = ADMIN) -> str:
    reply = paika.run(text, user)
    assert reply.ok, reply.text
    return reply.text


def refused(paika: Paika, text: str, user: str = ADMIN) -> Reply:
    reply = paika.run(text, user)
    assert not reply.ok, reply.text
    return reply


def versions(engine: Engine) -> list[ConfigVersion]:
    with Session(engine) as session:
        return list(session.exec(select(ConfigVersion).order_by(col(ConfigVersion.version))))


def stored(engine: Engine, version: int) -> dict[str, object]:
    row = next(v for v in versions(engine) if v.version == version)
    loaded = yaml.safe_load(row.content)
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture
def core(engine: Engine, clock: ManualClock) -> Paika:
    return start(engine, clock)


def edited_policy(path: Path, cycle_seconds: int) -> Path:
    text = BUNDLED_POLICY.read_text(encoding="utf-8")
    path.write_text(
        text.replace("cycle_seconds: 10 ", f"cycle_seconds: {cycle_seconds} "), encoding="utf-8"
    )
    return path


# --- Which version is in force at start ------------------------------------------------------


def test_the_first_start_records_the_file_as_version_1(core: Paika, engine: Engine) -> None:
    (first,) = versions(engine)
    assert (first.version, first.source, first.author, first.reason) == (
        1,
        "file",
        "bundled",
        "first start",
    )
    assert first.content == BUNDLED_POLICY.read_text(encoding="utf-8")
    assert core.live.version == 1
    assert "Config version 1" in ok(core, "config show")


def test_a_restart_with_the_same_file_keeps_what_was_set_since(
    core: Paika, engine: Engine, clock: ManualClock
) -> None:
    again = start(engine, clock)
    assert [v.version for v in versions(engine)] == [1] and again.live.version == 1
    ok(core, 'config set scheduler.cycle_seconds=5 reason="faster cycle"')
    restarted = start(engine, clock)
    assert [v.version for v in versions(engine)] == [1, 2]
    assert restarted.live.version == 2 and restarted.policy.scheduler.cycle_seconds == 5


def test_a_changed_file_at_start_is_recorded_as_a_new_version(
    core: Paika, engine: Engine, clock: ManualClock, policy_file: Path
) -> None:
    ok(core, 'config set scheduler.backfill=greedy reason="try greedy"')
    restarted = start(engine, clock, edited_policy(policy_file, 20))
    latest = versions(engine)[-1]
    assert (latest.version, latest.source, latest.author) == (3, "file", "PAIKA_CONFIG")
    assert latest.reason == "PAIKA_CONFIG changed since the last start"
    assert restarted.policy.scheduler.cycle_seconds == 20
    assert restarted.policy.scheduler.backfill == "easy"  # the file is in force, as recorded
    changed = {row["key"] for row in (latest.detail or {})["changes"]}
    assert {"scheduler.cycle_seconds", "scheduler.backfill"} <= changed
    # the same file again: nothing new is recorded
    start(engine, clock, policy_file)
    assert len(versions(engine)) == 3


def test_an_invalid_file_at_start_stores_nothing(
    engine: Engine, clock: ManualClock, policy_file: Path
) -> None:
    policy_file.write_text("gpu_types: {}\n", encoding="utf-8")
    with pytest.raises(Exception, match="gpu_types"):
        start(engine, clock, policy_file)
    assert versions(engine) == []


def test_two_instances_starting_at_once_record_one_version(
    engine: Engine, clock: ManualClock, policy_file: Path
) -> None:
    if engine.dialect.name == "sqlite":
        pytest.skip("SQLite serialises writers; the race needs a server (PostgreSQL, MariaDB)")
    edited_policy(policy_file, 15)
    for _ in range(2):  # the empty store, then the same file from a second pair of starts
        found = at_once(
            *[lambda: policy_at_start(engine, policy_file, "PAIKA_CONFIG", clock.now())] * 4
        )
        assert [getattr(live, "version", live) for live in found] == [1, 1, 1, 1]
    assert [v.version for v in versions(engine)] == [1]


# --- /gpu config set ---------------------------------------------------------------------------


def test_set_parses_values_as_yaml_and_stores_a_new_version(core: Paika, engine: Engine) -> None:
    text = ok(
        core,
        "config set scheduler.cycle_seconds=5 priority_classes.core.approval_required=false "
        "alerts.quota_used_pct=[70,95] digest.time=10:30 scheduler.headroom.T4-16GB=1 "
        'reason="sweep week"',
    )
    assert "Stored config version 2" in text and "scheduler.cycle_seconds: 10.0 → 5.0" in text
    policy = core.policy  # in force here at once
    assert core.live.version == 2
    assert policy.scheduler.cycle_seconds == 5
    assert policy.approval_required("core") is False
    assert policy.alerts.quota_used_pct == (70, 95)
    assert policy.digest.time == "10:30"
    assert policy.scheduler.headroom == {"A100-80GB": 1, "T4-16GB": 1}
    latest = versions(engine)[-1]
    assert (latest.source, latest.author, latest.reason) == ("set", ADMIN, "sweep week")
    assert stored(engine, 2)["digest"] == {"enabled": True, "time": "10:30"} | {
        k: v
        for k, v in stored(engine, 1)["digest"].items()
        if k not in ("enabled", "time")  # type: ignore[union-attr]
    }


def test_a_bad_value_is_refused_naming_the_key_and_nothing_is_stored(
    core: Paika, engine: Engine
) -> None:
    reply = refused(core, 'config set scheduler.cycle_seconds=-5 reason="oops"')
    assert "scheduler.cycle_seconds" in reply.text and "greater than 0" in reply.text
    assert "Nothing was stored" in reply.text
    assert 'config set scheduler.cycle_seconds=10.0 reason="…"' in reply.text  # the example
    headroom = refused(core, 'config set scheduler.headroom.B200=1 reason="new cards"')
    assert "scheduler.headroom.B200" in headroom.text and "unknown GPU type" in headroom.text
    assert len(versions(engine)) == 1


def test_an_unknown_key_is_refused_naming_it(core: Paika, engine: Engine) -> None:
    for key in ("scheduler.cycle_secs", "timezone.zone", "nonsense"):
        reply = refused(core, f'config set {key}=5 reason="typo"')
        assert f"{key} is not a key of the policy file" in reply.text, reply.text
    assert len(versions(engine)) == 1


def test_a_set_that_changes_nothing_is_refused(core: Paika, engine: Engine) -> None:
    reply = refused(core, 'config set scheduler.cycle_seconds=10 reason="same"')
    assert "already has scheduler.cycle_seconds so" in reply.text
    assert len(versions(engine)) == 1


def test_set_needs_a_reason_and_at_least_one_key(core: Paika) -> None:
    assert "reason" in refused(core, "config set scheduler.cycle_seconds=5").text
    assert "needs at least one key=value" in refused(core, 'config set reason="why"').text


def test_non_admins_are_refused_and_their_attempt_is_audited(core: Paika, engine: Engine) -> None:
    for text in (
        'config set scheduler.cycle_seconds=5 reason="mine"',
        'config rollback 1 reason="mine"',
        "config show",
        "config history",
    ):
        assert "Only admins can" in refused(core, text, "UALICE").text
    assert len(versions(engine)) == 1
    with Session(engine) as session:
        actions = [
            (e.actor, e.action)
            for e in session.exec(select(AuditEvent).where(AuditEvent.actor == "UALICE"))
        ]
    assert ("UALICE", "refused.config.set") in actions
    assert ("UALICE", "refused.config.rollback") in actions


def test_changes_are_audited_with_author_version_and_keys(core: Paika, engine: Engine) -> None:
    ok(core, 'config set scheduler.cycle_seconds=5 reason="faster"')
    with Session(engine) as session:
        event = session.exec(select(AuditEvent).where(AuditEvent.action == "config.set")).one()
    assert (event.actor, event.target_id) == (ADMIN, "2")
    assert event.detail == {"version": 2, "keys": ["scheduler.cycle_seconds"], "reason": "faster"}


# --- show, history, diff, rollback -------------------------------------------------------------


def test_show_names_the_version_in_force_and_a_keys_value(core: Paika) -> None:
    ok(core, 'config set scheduler.backfill=greedy reason="more starts"')
    whole = ok(core, "config show")
    assert whole.startswith("Config version 2 — set by <@UADMIN>")
    assert "more starts" in whole and "backfill: greedy" in whole
    assert ok(core, "config show key=scheduler.backfill").endswith('scheduler.backfill = "greedy"')
    assert "ordering" in ok(core, "config show key=scheduler")
    missing = refused(core, "config show key=scheduler.nothing")
    assert "has no key scheduler.nothing" in missing.text


def test_history_diff_and_rollback(core: Paika, engine: Engine) -> None:
    ok(core, 'config set scheduler.cycle_seconds=5 reason="faster"')
    ok(core, 'config set scheduler.backfill=none reason="no backfill"')
    history = ok(core, "config history")
    assert history.index("Config version 3") < history.index("Config version 2")
    assert 'scheduler.backfill: "easy" → "none"' in history
    assert "Config version 1 — recorded from the bundled example policy file" in history
    assert ok(core, "config history limit=1").count("Config version ") == 1
    diff = ok(core, "config diff 1 3")
    assert "scheduler.cycle_seconds: 10.0 → 5.0" in diff and "scheduler.backfill" in diff
    assert "hold the same values" in ok(core, "config diff 2 2")
    assert "no config version 9; the newest is 3" in refused(core, "config diff 1 9").text

    rolled = ok(core, 'config rollback 1 reason="back to the file"')
    assert "Stored config version 4 with the content of version 1" in rolled
    latest = versions(engine)[-1]
    assert (latest.version, latest.source, latest.content) == (
        4,
        "rollback",
        versions(engine)[0].content,
    )
    assert (latest.detail or {})["rolled_back_to"] == 1
    assert core.policy.scheduler.cycle_seconds == 10 and core.live.version == 4
    assert "rolled back to version 1" in ok(core, "config history limit=1")
    assert "nothing to roll back" in refused(core, 'config rollback 4 reason="again"').text
    assert "nothing to roll back" in refused(core, 'config rollback 1 reason="again"').text
    assert "no config version 7" in refused(core, 'config rollback 7 reason="?"').text
    assert len(versions(engine)) == 4


def test_another_instance_follows_a_new_version_without_a_restart(
    core: Paika, engine: Engine, clock: ManualClock
) -> None:
    other = start(engine, clock)  # a second `paika up` on the same database
    ok(core, 'config set scheduler.cycle_seconds=7 reason="faster"')
    assert other.live.refresh(other.engine) is True
    assert other.policy.scheduler.cycle_seconds == 7 and other.live.version == 2
    assert other.live.refresh(other.engine) is False  # one cheap read when nothing is new


def test_board_names_the_config_version_in_force(core: Paika) -> None:
    assert "config v1" in ok(core, "board")
    ok(core, 'config set scheduler.cycle_seconds=5 reason="faster"')
    assert "config v2" in ok(core, "board")


def test_two_concurrent_sets_lose_no_change(
    core: Paika, engine: Engine, clock: ManualClock
) -> None:
    if engine.dialect.name == "sqlite":
        pytest.skip("SQLite serialises writers; the race needs a server (PostgreSQL, MariaDB)")
    other = start(engine, clock)
    rounds = 4
    for n in range(rounds):
        first = f'config set scheduler.headroom.T4-16GB={n + 1} reason="a"'
        second = f'config set limits.max_gpus_per_job={n + 2} reason="b"'
        replies = at_once(partial(core.run, first, ADMIN), partial(other.run, second, ADMIN))
        assert all(isinstance(r, Reply) and r.ok for r in replies), replies
    assert [v.version for v in versions(engine)] == list(range(1, 2 + 2 * rounds))
    newest = stored(engine, 1 + 2 * rounds)
    assert newest["scheduler"]["headroom"]["T4-16GB"] == rounds  # type: ignore[index]
    assert newest["limits"]["max_gpus_per_job"] == rounds + 1  # type: ignore[index]


def test_the_digest_names_the_config_version_it_was_made_under(core: Paika) -> None:
    ok(core, 'config set scheduler.cycle_seconds=5 reason="faster"')
    digest = digest_now(core)
    assert digest.config_version == 2
    assert "config v2" in render_text(digest, core.policy.zone)
    assert decode(Digest, encode(digest)).config_version == 2  # as it travels in the outbox
