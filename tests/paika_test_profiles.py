"""An earlier, profiled run of a command, for tests of what sharing a card is decided by."""

from __future__ import annotations

from paika_test_time import T0
from sqlmodel import Session, select

from scheduler.app import Paika
from storage.models import Job, JobProfile, JobState, Team


def ran_before(
    paika: Paika,
    command: str,
    *,
    sm_pct: float,
    memory_busy_pct: float,
    memory_peak_mib: int,
    pcie_mbps: float | None = None,
    owner: str = "UALICE",
    team: str = "vision",
) -> None:
    """A finished job of `owner` in `team` that ran `command` once, profiled with these
    figures (alone on its card): what `command`'s next jobs' fingerprints come from."""
    with Session(paika.engine) as session:
        found = session.exec(select(Team).where(Team.name == team)).one()
        earlier = Job(
            name="earlier",
            owner=owner,
            team_id=found.id or 0,
            est_gpu_hours=1,
            command=command,
            state=JobState.SUCCEEDED,
            submitted_at=T0,
            attempts=1,
        )
        session.add(earlier)
        session.flush()
        session.add(
            JobProfile(
                job_id=earlier.id or 0,
                attempt=1,
                samples=12,
                sm_pct=sm_pct,
                memory_busy_pct=memory_busy_pct,
                memory_peak_mib=memory_peak_mib,
                pcie_mbps=pcie_mbps,
                updated_at=T0,
            )
        )
        session.commit()
