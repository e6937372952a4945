"""The schema: migrations equal the models, and the database itself guards allocations: a
card is never booked past whole, by whole-card holders or by shares."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from paika_test_time import T0
from sqlalchemy import Engine, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlmodel import Session, col

from storage.db import HEAD_REVISION, MIGRATIONS, current_revision, head_revision, upgrade
from storage.models import Allocation, Gpu, Host, Job, JobState, Team
from storage.models.base import metadata
from storage.models.cluster import WHOLE_CARD
from storage.queries import cluster as cluster_queries


def _gpu_and_jobs(engine: Engine, jobs: int = 2) -> tuple[int, list[int]]:
    with Session(engine) as session:
        team = Team(name="vision", created_at=T0)
        host = Host(name="gpu-01", url="http://127.0.0.1:8470", added_at=T0)
        session.add_all([team, host])
        session.flush()
        gpu = Gpu(host_id=host.id, index=0, gpu_type="A100-80GB", memory_gib=80)
        session.add(gpu)
        rows = [
            Job(
                name=f"j{i}",
                owner="U1",
                team_id=team.id,
                est_gpu_hours=1,
                command="true",
                state=JobState.QUEUED,
                submitted_at=T0,
            )
            for i in range(jobs)
        ]
        session.add_all(rows)
        session.commit()
        return gpu.id or 0, [row.id or 0 for row in rows]


def _open(session: Session, gpu_id: int, job_id: int, share_milli: int = WHOLE_CARD) -> Allocation:
    return cluster_queries.open_allocation(
        session=session, job_id=job_id, gpu_id=gpu_id, at=T0, share_milli=share_milli
    )


def _booked(engine: Engine, gpu_id: int) -> int:
    with Session(engine) as session:
        gpu = session.get(Gpu, gpu_id)
        assert gpu is not None
        return gpu.booked_milli


def test_migrations_produce_exactly_the_models(engine: Engine) -> None:
    assert current_revision(engine) == head_revision()
    with engine.connect() as conn:
        diff = compare_metadata(
            MigrationContext.configure(conn, opts={"compare_type": True}), metadata
        )
    assert diff == []


def test_the_head_revision_paika_checks_without_alembic_is_alembics_head(engine: Engine) -> None:
    # storage.db tells an up-to-date database apart without loading Alembic, by the newest
    # script's name: each script is NNNN_what.py with revision NNNN, revising the one before.
    assert head_revision() == HEAD_REVISION
    scripts = ScriptDirectory(str(MIGRATIONS))
    for number, path in enumerate(sorted((MIGRATIONS / "versions").glob("*.py")), start=1):
        script = scripts.get_revision(path.name.partition("_")[0])
        assert script is not None and script.revision == f"{number:04d}", path.name
        assert script.down_revision == (f"{number - 1:04d}" if number > 1 else None), path.name
    with engine.connect() as conn:
        assert current_revision(engine) == MigrationContext.configure(conn).get_current_revision()
    upgrade(engine)  # up to date: nothing to do, and nothing changes
    assert current_revision(engine) == HEAD_REVISION


def test_a_gpu_cannot_have_two_whole_card_holders(engine: Engine) -> None:
    gpu, (first, second) = _gpu_and_jobs(engine)
    with Session(engine) as session:
        _open(session, gpu, first)
        session.commit()
    with Session(engine) as session, pytest.raises(IntegrityError):
        _open(session, gpu, second)
        session.commit()
    assert _booked(engine, gpu) == WHOLE_CARD


def test_shares_of_a_card_fit_until_the_card_is_full(engine: Engine) -> None:
    gpu, (first, second, third) = _gpu_and_jobs(engine, jobs=3)
    with Session(engine) as session:
        _open(session, gpu, first, 400)
        _open(session, gpu, second, 600)
        session.commit()
    assert _booked(engine, gpu) == WHOLE_CARD
    with Session(engine) as session, pytest.raises(IntegrityError):
        _open(session, gpu, third, 1)
        session.commit()
    with Session(engine) as session:
        assert cluster_queries.overbooked_gpus(session=session) == []


def test_a_whole_card_holder_refuses_a_share_and_a_share_refuses_a_whole_holder(
    engine: Engine,
) -> None:
    gpu, (first, second) = _gpu_and_jobs(engine)
    with Session(engine) as session:
        _open(session, gpu, first, 250)
        session.commit()
    with Session(engine) as session, pytest.raises(IntegrityError):
        _open(session, gpu, second)
        session.commit()
    assert _booked(engine, gpu) == 250


def test_the_database_refuses_a_card_booked_past_whole_whoever_writes_it(engine: Engine) -> None:
    gpu, _ = _gpu_and_jobs(engine)
    # PyMySQL reports a failed CHECK as OperationalError (MariaDB error 4025).
    with Session(engine) as session, pytest.raises((IntegrityError, OperationalError)):
        session.execute(update(Gpu).where(col(Gpu.id) == gpu).values(booked_milli=WHOLE_CARD + 1))
        session.commit()


def test_an_ended_allocation_frees_its_part_of_the_card(engine: Engine) -> None:
    gpu, (first, second) = _gpu_and_jobs(engine)
    with Session(engine) as session:
        held = _open(session, gpu, first)
        session.commit()
        cluster_queries.end_allocation(session=session, allocation=held, at=T0 + timedelta(hours=1))
        session.commit()
        assert held.ended_at == T0 + timedelta(hours=1) and held.active_gpu_id is None
    assert _booked(engine, gpu) == 0
    with Session(engine) as session:
        again = session.get(Allocation, held.id)
        assert again is not None
        cluster_queries.end_allocation(session=session, allocation=again, at=T0)  # ended: kept
        _open(session, gpu, second)
        session.commit()
    assert _booked(engine, gpu) == WHOLE_CARD


def test_a_restore_books_each_card_as_its_open_allocations_say(engine: Engine) -> None:
    gpu, (first, second) = _gpu_and_jobs(engine)
    with Session(engine) as session:
        for job, milli in ((first, 300), (second, 200)):
            session.add(
                Allocation(
                    job_id=job, gpu_id=gpu, active_gpu_id=gpu, share_milli=milli, started_at=T0
                )
            )
        session.commit()
        assert [tuple(row) for row in cluster_queries.overbooked_gpus(session=session)] == [
            (gpu, 500)
        ]
        cluster_queries.rebook_cards(session=session)
        session.commit()
        assert cluster_queries.overbooked_gpus(session=session) == []
    assert _booked(engine, gpu) == 500


def test_an_open_allocation_must_claim_its_gpu(engine: Engine) -> None:
    gpu, (first, _) = _gpu_and_jobs(engine)
    # PyMySQL reports a failed CHECK as OperationalError (MariaDB error 4025).
    with Session(engine) as session, pytest.raises((IntegrityError, OperationalError)):
        session.add(Allocation(job_id=first, gpu_id=gpu, active_gpu_id=None, started_at=T0))
        session.commit()


def test_timestamps_keep_utc_and_microseconds(engine: Engine) -> None:
    moment = T0 + timedelta(microseconds=123456)
    with Session(engine) as session:
        team = Team(name="nlp", created_at=moment)
        session.add(team)
        session.commit()
        team_id = team.id
    with Session(engine) as session:
        assert session.get(Team, team_id).created_at == moment  # type: ignore[union-attr]


@pytest.mark.parametrize("share_milli", [WHOLE_CARD, 600])
def test_concurrent_transactions_cannot_double_book_a_gpu(engine: Engine, share_milli: int) -> None:
    """Two schedulers allocating the same GPU at the same moment (the whole card, or shares
    that do not fit together): exactly one wins."""
    if engine.dialect.name == "sqlite":
        pytest.skip("SQLite serialises writers; the race needs a server (PostgreSQL, MariaDB)")
    gpu, jobs = _gpu_and_jobs(engine)
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def allocate(job_id: int) -> None:
        with Session(engine) as session:
            session.connection()  # begin the transaction before the race
            barrier.wait()
            try:
                _open(session, gpu, job_id, share_milli)
                session.commit()
                outcomes.append("won")
            except IntegrityError:
                session.rollback()
                outcomes.append("refused")

    threads = [threading.Thread(target=allocate, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(outcomes) == ["refused", "won"]


def test_numbers_keep_double_precision_on_every_backend(engine: Engine) -> None:
    """MySQL's FLOAT is single precision: 12.3456789 GPU-hours came back as 12.3457."""
    _, (job_id, _) = _gpu_and_jobs(engine)
    with Session(engine) as session:
        job = session.get(Job, job_id)
        assert job is not None
        job.est_gpu_hours = 12.3456789
        session.add(job)
        session.commit()
    with Session(engine) as session:
        again = session.get(Job, job_id)
        assert again is not None and again.est_gpu_hours == 12.3456789
