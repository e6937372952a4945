"""What the shared-card tests of hosts read and set: the policy's sharing hosts, the cards'
open parts and booked thousandths."""

from __future__ import annotations

from sqlmodel import Session, select

from scheduler.app import Paika
from scheduler.config import Sharing
from storage.models import Gpu
from storage.queries import cluster as cluster_queries


def share_hosts(paika: Paika, hosts: dict[str, str]) -> None:
    """Let these hosts share cards, each in its mode (mps, advisory)."""
    paika.policy = paika.policy.model_copy(update={"sharing": Sharing(hosts=hosts)})


def open_parts(paika: Paika) -> dict[int, list[tuple[int, int]]]:
    """GPU id → (job id, part) of its open allocations."""
    with Session(paika.engine) as session:
        found: dict[int, list[tuple[int, int]]] = {}
        for gpu, job_id, part in cluster_queries.open_parts(session=session):
            found.setdefault(gpu, []).append((job_id, part))
        return found


def booked(paika: Paika) -> dict[int, int]:
    """GPU id → the thousandths of it booked."""
    with Session(paika.engine) as session:
        return {gpu.id or 0: gpu.booked_milli for gpu in session.exec(select(Gpu)).all()}
