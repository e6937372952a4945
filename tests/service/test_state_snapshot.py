"""Queue-and-cluster snapshots (scheduler/archive/state.py) on every backend: a document
read back gives the same rows, a restore into an empty database gives the same queue under
the same job numbers, and a database that holds anything is refused untouched."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from paika_test_servers import fresh_engine
from sqlalchemy import Engine, func
from sqlmodel import Session, select

from scheduler.app import Paika
from scheduler.archive import state
from scheduler.clock import ManualClock
from scheduler.errors import Conflict, Problem, UserError
from scheduler.policy.plan import Wait, WaitCode
from scheduler.policy.reasons import ReasonCode, because
from scheduler.service import jobs
from scheduler.settings import Settings
from storage.models import (
    Allocation,
    Gpu,
    Host,
    Job,
    JobDependency,
    JobEvent,
    JobState,
    LedgerEntry,
    MaintenanceWindow,
    Quota,
    Team,
    TeamReservation,
    TemplateVersion,
)
from storage.queries import share_apart

SUBMIT = 'submit name={name} gpus={gpus} hours={hours} priority={priority} data={data} cmd="python {name}.py"'


def ok(paika: Paika, user: str, text_: str) -> object:
    reply = paika.run(text_, user)
    assert reply.ok, reply.text
    return reply.result


@pytest.fixture
def world(paika: Paika) -> Paika:
    """vision and nlp with people, a quota part used, a template, a Unix account, two hosts
    (one A100 host with a running job on two of its cards), and five waiting jobs."""
    now = paika.clock.now()
    for user, team, role in [
        ("UALICE", "vision", "approver"),
        ("UBOB", "vision", "member"),
        ("UNICK", "nlp", "member"),
    ]:
        ok(paika, "UADMIN", f"admin member add <@{user}> team={team} role={role}")
    ok(
        paika,
        "UADMIN",
        "admin quota add team=vision type=A100-80GB hours=300 expires=2027-06-30 owner=<@UALICE>",
    )
    ok(paika, "UADMIN", "admin quota add team=nlp hours=50 expires=2026-12-31 owner=<@UNICK>")
    ok(paika, "UADMIN", "admin account set <@UALICE> account=alice")
    ok(paika, "UALICE", 'template save bert gpus=2 type=A100-80GB data=ready cmd="python bert.py"')
    with Session(paika.engine) as session:
        vision = session.exec(select(Team).where(Team.name == "vision")).one()
        a100 = Host(name="gpu-a", url="https://gpu-a:8470", state="up", added_at=now)
        t4 = Host(name="gpu-t", url="https://gpu-t:8470", state="up", added_at=now, draining=True)
        session.add_all([a100, t4])
        session.flush()
        cards = [
            Gpu(host_id=a100.id or 0, index=i, uuid=f"GPU-a{i}", gpu_type="A100-80GB",
                memory_gib=80, utilization_pct=50.0)
            for i in range(4)
        ] + [Gpu(host_id=t4.id or 0, index=0, gpu_type="T4-16GB", memory_gib=16, healthy=False)]  # fmt: skip
        session.add_all(cards)
        session.flush()
        # A finished run charged 40 GPU-hours to vision's quota.
        done = Job(name="old", owner="UBOB", team_id=vision.id or 0, est_gpu_hours=40,
                   command="python old.py", state=JobState.SUCCEEDED,
                   submitted_at=now - timedelta(days=2), started_at=now - timedelta(days=2),
                   ended_at=now - timedelta(days=1))  # fmt: skip
        running = Job(name="big", owner="UALICE", team_id=vision.id or 0, gpus=2,
                      est_gpu_hours=64, command="python big.py", state=JobState.RUNNING,
                      submitted_at=now - timedelta(hours=3), started_at=now - timedelta(hours=2),
                      confirmed_at=now - timedelta(hours=2), attempts=1, account="alice",
                      spec={"name": "big", "gpus": 2})  # fmt: skip
        session.add_all([done, running])
        session.flush()
        quota = session.exec(select(Quota).where(Quota.team_id == vision.id)).one()
        session.add(
            LedgerEntry(
                job_id=done.id or 0,
                team_id=vision.id or 0,
                quota_id=quota.id,
                gpu_type="A100-80GB",
                gpu_hours=40,
                cost=88,
                started_at=now - timedelta(days=2),
                ended_at=now - timedelta(days=1),
                recorded_at=now - timedelta(days=1),
            )  # fmt: skip
        )
        session.add_all(
            Allocation(
                job_id=running.id or 0,
                gpu_id=card.id or 0,
                active_gpu_id=card.id,
                started_at=now - timedelta(hours=2),
            )  # fmt: skip
            for card in cards[:2]
        )
        session.commit()
    for name, user, gpus, hours, priority, data in [
        ("wide", "UALICE", 4, 40, "normal", "ready"),
        ("small", "UBOB", 1, 2, "normal", "ready"),
        ("tiny", "UNICK", 1, 1, "idle", "ready"),
        ("later", "UNICK", 1, 3, "normal", "s3://bucket/later"),
        ("urgent", "UADMIN", 2, 8, "core", "ready"),
    ]:
        team = " team=vision" if user == "UADMIN" else ""
        ok(paika, user, SUBMIT.format(name=name, gpus=gpus, hours=hours, priority=priority,
                                      data=data) + team)  # fmt: skip
    return paika


def waits_of(paika: Paika) -> dict[int, Wait]:
    with paika.context("UADMIN") as ctx:
        return jobs.current_waits(ctx)


def document(paika: Paika, *, config_version: int | None = 7) -> dict[str, Any]:
    waits = waits_of(paika)
    with Session(paika.engine) as session:
        return state.build_document(session, paika.policy, waits, paika.clock.now(), config_version)


@pytest.fixture
def fresh(engine: Engine, tmp_path: Path) -> Iterator[Engine]:
    """A second, empty, migrated database on the same backend (a new install)."""
    with fresh_engine(engine.dialect.name, tmp_path) as new:
        yield new


def start_on(engine: Engine, clock: ManualClock) -> Paika:
    settings = Settings(
        database_url=engine.url.render_as_string(hide_password=False),
        admins=("UADMIN",),
        config=None,
    )
    return Paika.start(settings, clock=clock)


def test_a_document_says_the_queue_and_the_cluster(world: Paika) -> None:
    doc = document(world)
    assert doc["schema"] == state.SCHEMA and doc["config_version"] == 7
    names = {job["name"]: job for job in state.records(doc, "jobs")}
    # Every job not yet ended, none that ended.
    assert sorted(names) == ["big", "later", "small", "tiny", "urgent", "wide"]
    assert names["big"]["state"] == "running" and names["big"]["account"] == "alice"
    assert names["big"]["spec"] == {"name": "big", "gpus": 2}
    waits = state.waits_of(doc)
    assert waits == waits_of(world) and names["big"]["id"] not in waits
    assert waits[names["later"]["id"]].code is WaitCode.WAITING_FOR_DATA
    assert waits[names["urgent"]["id"]].position == 1
    quotas = state.records(doc, "quotas")
    assert sorted(q["used_hours"] for q in quotas) == [0.0, 40.0]
    hosts = state.records(doc, "hosts")
    assert [h["name"] for h in hosts] == ["gpu-a", "gpu-t"]
    assert not any("token" in key and key != "token_revoked_at" for key in hosts[0])
    assert len(state.records(doc, "allocations")) == 2
    assert [t["name"] for t in state.records(doc, "templates")] == ["bert"]
    assert [a["account"] for a in state.records(doc, "accounts")] == ["alice"]
    assert names["big"]["submitted_at"].startswith("2026-11-02T06:00:00")


def test_a_wait_the_job_has_moved_on_from_since_the_cycle_is_not_kept(world: Paika) -> None:
    """The waits are the last cycle's; a job whose data was marked ready since is queued, and
    the snapshot does not also say it waits for its data (a restore would disagree)."""
    waits = waits_of(world)
    ok(world, "UNICK", "ready later")
    with Session(world.engine) as session:
        doc = state.build_document(session, world.policy, waits, world.clock.now(), 7)
    later = next(j for j in state.records(doc, "jobs") if j["name"] == "later")
    assert later["state"] == "queued" and later["id"] not in state.waits_of(doc)
    assert len(state.waits_of(doc)) == len(waits) - 1


def test_encode_is_deterministic_and_decode_gives_the_document_back(world: Paika) -> None:
    doc = document(world)
    data = state.encode(doc)
    assert data == state.encode(json.loads(json.dumps(doc)))
    assert data[:2] == b"\x1f\x8b" and state.decode(data) == doc


def test_decode_refuses_a_newer_schema_and_what_is_not_a_snapshot() -> None:
    newer = gzip.compress(json.dumps({"schema": state.SCHEMA + 1}).encode())
    with pytest.raises(UserError) as found:
        state.decode(newer, key="snapshots/x.json.gz")
    assert found.value.problem is Problem.SNAPSHOT_SCHEMA_NEWER
    assert found.value.values["found"] == state.SCHEMA + 1
    for junk in (b"not gzip", gzip.compress(b"[1, 2]"), gzip.compress(b"{")):
        with pytest.raises(UserError) as found:
            state.decode(junk)
        assert found.value.problem is Problem.SNAPSHOT_UNREADABLE


def test_the_digest_is_the_same_for_the_same_state_and_moves_when_it_changes(
    world: Paika, clock: ManualClock
) -> None:
    before = document(world)
    clock.advance(timedelta(minutes=3))
    again = document(world)
    assert again["taken_at"] != before["taken_at"]
    assert state.content_digest(again) == state.content_digest(before)
    ok(world, "UNICK", "ready later")
    assert state.content_digest(document(world)) != state.content_digest(before)
    assert state.content_digest(document(world, config_version=8)) != state.content_digest(before)


def test_restore_gives_the_same_queue_under_the_same_numbers(
    world: Paika, fresh: Engine, clock: ManualClock
) -> None:
    doc = state.decode(state.encode(document(world)))
    done = state.restore(fresh, doc, clock.now())
    assert (done.jobs, done.running, done.allocations, done.quotas) == (6, 1, 2, 2)
    restored = start_on(fresh, clock)
    # The same rows, read back from the new install, with the policy's own reasons there.
    assert document(restored) == doc
    assert waits_of(restored) == waits_of(world)
    with Session(fresh) as session:
        versions = session.exec(select(TemplateVersion)).all()
        assert [(v.name, v.version) for v in versions] == [("bert", 1)]
        # Quotas keep what was used of them (the ledger stayed behind).
        assert session.exec(select(func.sum(Quota.carried_hours))).one() == 40
    listing = ok(restored, "UALICE", "quota team=vision")
    # 40 carried over, and 4 GPU-hours the running job has used so far (2 GPUs for 2 h).
    assert [(v.state.used_hours, v.state.left_hours) for v in listing.quotas] == [(44, 256)]  # type: ignore[attr-defined]
    # A job submitted after the restore gets a number above every restored one (PostgreSQL's
    # sequences do not follow ids written by hand).
    result = ok(restored, "UBOB", SUBMIT.format(name="next", gpus=1, hours=1,
                                                priority="normal", data="ready"))  # fmt: skip
    highest = max(job["id"] for job in state.records(doc, "jobs"))
    assert result.view.job.id > highest  # type: ignore[attr-defined]
    ok(restored, "UADMIN", "admin quota add team=nlp hours=5 expires=2027-01-31 owner=<@UNICK>")
    restored.engine.dispose()


def test_a_waiting_job_whose_command_the_archive_masked_comes_back_cancelled_not_run(
    world: Paika, fresh: Engine, clock: ManualClock
) -> None:
    """The archive masks secrets in commands by default: a restore that queued the masked
    command would run `--token ***`. Such a waiting job comes back cancelled, its history
    saying why; a waiting job whose command held no secret and a running one come back as
    they were."""
    ok(world, "UBOB", SUBMIT.format(name="secret", gpus=1, hours=1, priority="normal",
                                    data="ready").replace(".py", ".py --token hunter2-abc"))  # fmt: skip
    with Session(world.engine) as session:  # the running job's reason, as its start wrote it
        big = session.exec(select(Job).where(Job.name == "big")).one()
        why = because(ReasonCode.MATCH_CHEAPER_NOT_SOON, gpu_type="T4-16GB", minutes=30.0)
        big.state_reason, big.state_reason_code = why.english(), why.code.value
        big.state_reason_values = why.stored_values()
        session.add(big)
        session.commit()
    doc = state.decode(state.encode(document(world)))
    with Session(world.engine) as session:
        secret = session.exec(select(Job).where(Job.name == "secret")).one()
        reasons = {
            job.name: (job.state_reason, job.state_reason_code, job.state_reason_values)
            for job in session.exec(select(Job))
        }
    assert doc["commands_changed"] == [secret.id]
    done = state.restore(fresh, doc, clock.now())
    assert done.without_command == (secret.id,)
    with Session(fresh) as session:
        back = {job.name: job for job in session.exec(select(Job))}
        history = session.exec(select(JobEvent).where(JobEvent.job_id == secret.id)).all()
    assert back["secret"].state == JobState.CANCELLED
    assert "hunter2" not in back["secret"].command
    assert [(e.from_state, e.to_state) for e in history] == [("queued", "cancelled")]
    assert "submit it again" in (history[0].reason or "")
    # Its reason is a code its readers are told in their language; the others' are as taken.
    restored = ReasonCode.RESTORED_WITHOUT_COMMAND.value
    assert back["secret"].state_reason_code == history[0].reason_code == restored
    assert reasons["big"][1:] == (why.code.value, why.stored_values())
    for name in ("small", "big"):
        job = back[name]
        assert (job.state_reason, job.state_reason_code, job.state_reason_values) == reasons[name]
    assert back["small"].state == JobState.QUEUED and back["big"].state == JobState.RUNNING
    # A snapshot of an install that keeps commands in full changes none.
    full = world.policy.model_copy(
        update={"archive": world.policy.archive.model_copy(update={"commands": "full"})}
    )
    with Session(world.engine) as session:
        kept = state.build_document(session, full, waits_of(world), clock.now(), 7)
    assert kept["commands_changed"] == []


def test_restore_refuses_a_database_that_holds_jobs_and_writes_nothing(
    world: Paika, clock: ManualClock
) -> None:
    doc = document(world)
    with Session(world.engine) as session:
        counts = [
            session.exec(select(func.count()).select_from(m)).one() for m in (Job, Team, Host)
        ]
    with pytest.raises(Conflict) as found:
        state.restore(world.engine, doc, clock.now())
    assert found.value.problem is Problem.RESTORE_NOT_EMPTY
    assert found.value.values["tables"][0] == "jobs"  # type: ignore[index]
    with Session(world.engine) as session:
        assert [session.exec(select(func.count()).select_from(m)).one()
                for m in (Job, Team, Host)] == counts  # fmt: skip


def test_restore_refuses_a_new_install_that_already_has_teams(
    world: Paika, fresh: Engine, clock: ManualClock
) -> None:
    doc = document(world)
    start_on(fresh, clock).engine.dispose()  # a first start creates the policy file's teams
    with pytest.raises(Conflict) as found:
        state.restore(fresh, doc, clock.now())
    assert found.value.values["tables"] == ("teams",)
    with Session(fresh) as session:
        assert session.exec(select(func.count()).select_from(Job)).one() == 0


def test_moments_people_type() -> None:
    from zoneinfo import ZoneInfo

    from scheduler.archive.state_view import parse_moment

    zone = ZoneInfo("Asia/Shanghai")
    assert parse_moment("latest", zone) is None
    assert parse_moment("2026-12-01T10:00", zone) == datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
    assert parse_moment("2026-12-01 10:00", zone) == datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
    assert parse_moment("2026-12-01T10:00Z", zone) == datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    assert parse_moment("2026-12-01t10:00z", zone) == datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    assert parse_moment("2026-12-01T10:00+01:00", zone) == datetime(2026, 12, 1, 9, tzinfo=UTC)
    assert parse_moment("2026-12-01", zone) == datetime(2026, 12, 1, tzinfo=zone)
    for bad in ("yesterday", "2026-13-01T10:00", "10:00", "2026-12-01T25:00"):
        with pytest.raises(UserError) as found:
            parse_moment(bad, zone)
        assert found.value.problem is Problem.BAD_MOMENT
        assert found.value.values == {"given": bad, "example": "2026-12-01T10:00"}


def _copy(doc: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(doc))  # type: ignore[no-any-return]


def _put(doc: dict[str, Any], name: str, rows: list[dict[str, Any]]) -> None:
    """Write a table of dicts back into a document, in its columns."""
    columns = doc[name]["columns"]
    doc[name]["rows"] = [[row.get(c) for c in columns] for row in rows]


def test_diff_says_what_changed_between_two_snapshots(world: Paika) -> None:
    from scheduler.archive.state_diff import Appeared, Change, DiffField, DiffKind, diff

    before = _copy(document(world))
    assert diff(before, before).empty
    after = _copy(before)
    after["taken_at"] = "2026-11-02T10:00:00+00:00"
    jobs_ = state.records(after, "jobs")
    by_name = {job["name"]: job for job in jobs_}
    small, tiny, wide = by_name["small"], by_name["tiny"], by_name["wide"]
    waits = {row["job_id"]: row for row in state.records(after, "waits")}
    etas = {row["job_id"]: row for row in state.records(after, "etas")}
    # small started on gpu-a/2; tiny ended; wide's class changed, and only its place moved.
    small["state"] = "running"
    del waits[small["id"]]
    allocations = state.records(after, "allocations")
    allocations.append({"id": 99, "job_id": small["id"], "gpu_id": 3,
                        "started_at": "2026-11-02T09:30:00"})  # fmt: skip
    _put(after, "allocations", allocations)
    jobs_.remove(tiny)
    wide["priority"] = "core"
    waits[wide["id"]]["position"] += 1
    etas[wide["id"]]["eta"] = (etas[wide["id"]]["eta"] or 0) + 600
    jobs_.append({**small, "id": 50, "name": "new", "state": "queued"})
    waits[50] = {"job_id": 50, "code": "waiting_for_data", "position": 9, "higher": 0,
                 "earlier": 0, "costlier": "", "left_hours": 0, "needs_hours": 0, "gpus": 0,
                 "keeps_headroom": False}  # fmt: skip
    _put(after, "jobs", jobs_)
    _put(after, "waits", list(waits.values()))
    _put(after, "etas", list(etas.values()))
    hosts = state.records(after, "hosts")
    hosts[1]["state"] = "down"
    _put(after, "hosts", hosts)
    gpus = state.records(after, "gpus")
    gpus[4]["healthy"] = True
    _put(after, "gpus", gpus)
    quotas = state.records(after, "quotas")
    quotas[0]["gpu_hours"] = 400.0
    nlp = quotas.pop()
    _put(after, "quotas", quotas)
    found = diff(before, after)
    assert found.added == (Appeared(DiffKind.JOB, "#50 new"),)
    assert found.removed == (
        Appeared(DiffKind.JOB, f"#{tiny['id']} tiny"),
        Appeared(DiffKind.QUOTA, f"#{nlp['id']} nlp"),
    )
    ref = f"#{small['id']} small"
    by = {(c.subject, c.field): c for c in found.changed}
    assert by[(ref, DiffField.STATE)] == Change(
        DiffKind.JOB, ref, DiffField.STATE, "queued", "running"
    )
    assert by[(ref, DiffField.PLACEMENT)].new == "gpu-a/2"
    assert by[(ref, DiffField.REASON)].new is None
    assert by[(f"#{wide['id']} wide", DiffField.PRIORITY)].new == "core"
    assert (f"#{wide['id']} wide", DiffField.REASON) not in by  # a moved place is no new reason
    assert by[("gpu-t", DiffField.STATE)].new == "down"
    assert by[("gpu-t/0", DiffField.HEALTHY)].new is True
    vision = quotas[0]
    assert by[(f"#{vision['id']} vision", DiffField.GPU_HOURS)].new == 400.0
    assert len(found.changed) == 7

    from bot.console import render
    from bot.console_state import restored  # noqa: F401  (registers the snapshot's words)

    zone = world.policy.zone
    text = render(found, zone, "en")
    assert "+ job #50 new" in text and f"- job #{tiny['id']} tiny" in text
    assert f"~ job {ref}: state queued → running" in text
    assert "~ host gpu-t: state up → down" in text and "healthy no → yes" in text
    assert "why it waits waiting for its data" not in text
    assert "任务" in render(found, zone, "zh")
    assert "Nothing changed" in render(diff(before, before), zone, "en")


def test_show_draws_the_board_and_the_queue_as_they_were(world: Paika) -> None:
    from bot.console import render
    from bot.console_state import restored  # noqa: F401  (registers the snapshot's words)
    from scheduler.archive.state_view import snapshot_view

    doc = _copy(document(world))
    view = snapshot_view(doc, world.policy)
    assert [v.job.name for v in view.queue.running] == ["big"]
    live = waits_of(world)
    order = sorted(live.values(), key=lambda w: w.position)
    assert [v.job.id for v in view.queue.waiting] == [w.job_id for w in order]
    assert [v.wait for v in view.queue.waiting] == order
    now_board = ok(world, "UALICE", "board")
    # A snapshot keeps no utilization readings (they change at every poll).
    unread = tuple(
        replace(host, cards=tuple(replace(card, utilization_pct=None) for card in host.cards))
        for host in now_board.hosts  # type: ignore[attr-defined]
    )
    assert view.board.hosts == unread
    assert view.board.types == now_board.types  # type: ignore[attr-defined]
    assert view.board.waiting_by_class == now_board.waiting_by_class  # type: ignore[attr-defined]
    text = render(view, world.policy.zone, "en")
    assert "policy config version 7" in text and "gpu-a" in text and "urgent" in text
    assert text.index("urgent") < text.index("small")
    assert "策略配置版本 7" in render(view, world.policy.zone, "zh")


def test_jobs_kept_apart_stay_apart_after_a_restore(
    world: Paika, fresh: Engine, clock: ManualClock
) -> None:
    with Session(world.engine) as session:
        waiting = session.exec(
            select(Job).where(Job.state == JobState.QUEUED).order_by(Job.id)  # type: ignore[arg-type]
        ).all()
        first, second = waiting[0].id or 0, waiting[1].id or 0
        share_apart.keep_apart(
            session=session,
            jobs=(second, first),
            at=clock.now(),
            reason_code="share_slowed",
            reason_values={"slowed": first, "by": second},
        )
        session.commit()
    doc = state.decode(state.encode(document(world)))
    assert [row["job_a"] for row in state.records(doc, "share_apart")] == [first]
    state.restore(fresh, doc, clock.now())
    with Session(fresh) as session:
        assert share_apart.apart_from(session=session, job_ids=[first]) == {
            first: frozenset({second})
        }
    # An older snapshot, without the table, restores with none.
    older = _copy(doc)
    del older["share_apart"]
    assert state.records(older, "share_apart") == []


def test_waits_for_jobs_and_planned_maintenance_survive_a_restore(
    world: Paika, fresh: Engine, clock: ManualClock
) -> None:
    with Session(world.engine) as session:
        waiting = session.exec(
            select(Job).where(Job.state == JobState.QUEUED).order_by(Job.id)  # type: ignore[arg-type]
        ).all()
        upstream = waiting[0].id or 0
    ok(
        world,
        "UBOB",
        f'submit name=after-it gpus=1 hours=1 priority=normal data=ready cmd="true" '
        f"after=#{upstream}",
    )
    starts = (clock.now() + timedelta(days=1)).astimezone(world.policy.zone)
    ends = starts + timedelta(hours=4)
    ok(
        world,
        "UADMIN",
        f"admin maintenance add host=gpu-a from={starts:%Y-%m-%dT%H:%M} "
        f'until={ends:%Y-%m-%dT%H:%M} reason="driver 570"',
    )
    ok(
        world,
        "UADMIN",
        f"admin reserve add gpus=2 type=A100-80GB from={starts:%Y-%m-%dT%H:%M} "
        f'until={ends:%Y-%m-%dT%H:%M} team=nlp reason="deadline"',
    )
    doc = state.decode(state.encode(document(world)))
    # A dependency on a job the snapshot does not hold (it had ended) comes back held.
    rows = state.records(doc, "dependencies")
    _put(doc, "dependencies", [*rows, {**rows[0], "upstream_id": 10**6}])
    state.restore(fresh, doc, clock.now())
    with Session(fresh) as session:
        deps = session.exec(select(JobDependency)).all()
        windows = session.exec(select(MaintenanceWindow)).all()
    assert sorted((d.upstream_id, d.state) for d in deps) == [
        (upstream, "waiting"),
        (10**6, "broken"),
    ]
    assert [(w.host, w.reason) for w in windows] == [("gpu-a", "driver 570")]
    with Session(fresh) as session:
        booked = session.exec(select(TeamReservation)).all()
    assert [(b.gpu_type, b.gpus, b.reason) for b in booked] == [("A100-80GB", 2, "deadline")]
    # An older snapshot, without the tables, restores with none.
    older = _copy(doc)
    del older["dependencies"], older["maintenance"], older["reservations"]
    assert state.records(older, "dependencies") == state.records(older, "maintenance") == []
    assert state.records(older, "reservations") == []
