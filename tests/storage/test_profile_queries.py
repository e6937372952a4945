"""Job profiles: one row per run kept up to date poll after poll, and a job's fingerprint from
its earlier runs (same template, else same owner and command; medians of the last five)."""

from __future__ import annotations

from datetime import timedelta

from paika_test_time import T0
from sqlalchemy import Engine
from sqlmodel import Session, select

from scheduler.fingerprints import fingerprint_for
from scheduler.policy.colocation import Fingerprint
from storage.models import Job, JobProfile, JobState, Team
from storage.queries.profiles import RunSample, add_sample, earlier_runs, typical_figures


def _team(session: Session) -> int:
    team = Team(name="vision", created_at=T0)
    session.add(team)
    session.flush()
    return team.id or 0


def _job(
    session: Session,
    team: int,
    *,
    owner: str = "UALICE",
    command: str = "python eval.py",
    template: str | None = None,
    state: JobState = JobState.SUCCEEDED,
    attempts: int = 1,
) -> Job:
    job = Job(
        name="j",
        owner=owner,
        team_id=team,
        est_gpu_hours=1,
        command=command,
        template=template,
        state=state,
        attempts=attempts,
        submitted_at=T0,
    )
    session.add(job)
    session.flush()
    return job


def _run(
    session: Session, job: Job, attempt: int, sm: float, busy: float, mib: int, at: int
) -> None:
    sample = RunSample(sm_pct=sm, memory_busy_pct=busy, memory_peak_mib=mib)
    add_sample(
        session=session,
        job_id=job.id or 0,
        attempt=attempt,
        sample=sample,
        at=T0 + timedelta(minutes=at),
    )


def test_each_poll_updates_the_runs_one_row(engine: Engine) -> None:
    with Session(engine) as session:
        job_id = _job(session, _team(session), state=JobState.RUNNING).id or 0
        samples = [
            RunSample(sm_pct=40, memory_busy_pct=10, memory_peak_mib=3000, pcie_mbps=100),
            RunSample(sm_pct=60, memory_busy_pct=30, memory_peak_mib=5000, pcie_mbps=None),
            RunSample(sm_pct=80, memory_busy_pct=20, memory_peak_mib=4000, pcie_mbps=300),
        ]
        for minute, sample in enumerate(samples):
            at = T0 + timedelta(minutes=minute)
            add_sample(session=session, job_id=job_id, attempt=1, sample=sample, at=at)
            session.commit()
    with Session(engine) as session:
        (row,) = session.exec(select(JobProfile)).all()
    assert (row.job_id, row.attempt, row.samples) == (job_id, 1, 3)
    assert (row.sm_pct, row.memory_busy_pct, row.memory_peak_mib) == (60.0, 20.0, 5000)
    # The sample without it counts as the mean so far: (100 + 100 + 300) / 3.
    assert row.pcie_mbps is not None and abs(row.pcie_mbps - 500 / 3) < 1e-9
    assert row.dram_bw_pct is None  # no sample had it
    assert row.updated_at == T0 + timedelta(minutes=2)


def test_a_jobs_fingerprint_is_the_median_of_its_last_five_like_runs(engine: Engine) -> None:
    with Session(engine) as session:
        team = _team(session)
        older = _job(session, team)
        _run(session, older, 1, sm=99, busy=99, mib=99_999, at=0)  # the sixth back: left out
        runs = [(10, 5, 1000), (20, 50, 2000), (30, 40, 8000), (40, 45, 3000), (90, 10, 4000)]
        for minute, (sm, busy, mib) in enumerate(runs, start=1):
            _run(session, _job(session, team), 1, sm, busy, mib, at=minute)
        _run(session, _job(session, team, command="python train.py"), 1, 5, 5, 5, at=9)
        _run(session, _job(session, team, owner="UBOB"), 1, 5, 5, 5, at=9)
        session.commit()
        fresh = _job(session, team, state=JobState.QUEUED, attempts=0)
        assert fingerprint_for(session, fresh) == Fingerprint(
            gpu_util=30.0, gmem_util=40.0, gmem_mib=3000.0, pcie_mbps=None
        )
        assert len(earlier_runs(session=session, job=fresh)) == 5


def test_a_template_speaks_before_the_owner_and_command(engine: Engine) -> None:
    with Session(engine) as session:
        team = _team(session)
        _run(session, _job(session, team, owner="UBOB", template="eval"), 1, 70, 35, 9000, at=1)
        _run(session, _job(session, team), 1, 10, 5, 1000, at=2)
        from_template = _job(session, team, template="eval", state=JobState.QUEUED)
        figures = typical_figures(session=session, job=from_template)
        assert figures is not None and (figures.gpu_util, figures.runs) == (70.0, 1)
        # A template none of whose runs was sampled yet: the owner's runs of the command.
        new_template = _job(session, team, template="fresh", state=JobState.QUEUED)
        figures = typical_figures(session=session, job=new_template)
        assert figures is not None and figures.gpu_util == 10.0


def test_no_earlier_run_no_fingerprint_and_the_current_run_is_not_an_earlier_one(
    engine: Engine,
) -> None:
    with Session(engine) as session:
        team = _team(session)
        running = _job(session, team, state=JobState.RUNNING, attempts=2)
        assert fingerprint_for(session, running) is None
        _run(session, running, 2, 50, 20, 2000, at=1)  # the run going now
        assert fingerprint_for(session, running) is None
        _run(session, running, 1, 30, 10, 1000, at=0)  # its first attempt
        assert fingerprint_for(session, running) == Fingerprint(30.0, 10.0, 1000.0, None)
        # A run whose card gave no memory-controller figure cannot make a fingerprint.
        unsure = _job(session, team, command="python other.py")
        add_sample(
            session=session,
            job_id=unsure.id or 0,
            attempt=1,
            sample=RunSample(sm_pct=50, memory_peak_mib=100),
            at=T0,
        )
        again = _job(session, team, command="python other.py", state=JobState.QUEUED)
        assert fingerprint_for(session, again) is None
