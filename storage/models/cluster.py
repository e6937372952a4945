"""The hardware: hosts, their GPUs, and which job holds which GPU."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import CheckConstraint, String, UniqueConstraint
from sqlmodel import Field, SQLModel

from storage.limits import GPU_TYPE, HOST_NAME, HOST_URL, LAST_ERROR
from storage.models.base import REASON_CODE, at_field, json_field, number_field


class HostState(StrEnum):
    """A host's health as its agent's polls show it."""

    UNKNOWN = "unknown"
    UP = "up"
    DEGRADED = "degraded"
    DOWN = "down"


class Host(SQLModel, table=True):
    """A GPU host with an agent at `url`; a draining host takes no new jobs."""

    __tablename__ = "hosts"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_type=String(HOST_NAME), unique=True)
    url: str = Field(sa_type=String(HOST_URL))
    state: str = Field(sa_type=String(16), default=HostState.UNKNOWN)
    draining: bool = False
    added_at: datetime = at_field()
    last_seen_at: datetime | None = at_field(nullable=True)
    failed_polls: int = 0  # consecutive; the host is down after `down_after_failed_polls`
    state_since: datetime | None = at_field(nullable=True)
    agent_version: str | None = Field(default=None, sa_type=String(32))
    # Why the last poll failed (cleared when the agent answers); `untrusted` when it failed on
    # trust (a certificate that does not verify, a token refused or revoked): no job starts there.
    last_error: str | None = Field(default=None, sa_type=String(LAST_ERROR))
    untrusted: bool = False
    # The host's own agent token. The scheduler derives it from its secret, the host name, the
    # generation and a salt (public: a host removed and added again under its old name gets a
    # new token); only its SHA-256 is kept, to tell a token issued under another secret.
    # Generation 0: no token of its own (the shared PAIKA_AGENT_TOKEN).
    token_generation: int = 0
    token_salt: str | None = Field(default=None, sa_type=String(32))
    token_sha256: str | None = Field(default=None, sa_type=String(64))
    token_issued_at: datetime | None = at_field(nullable=True)  # its first token
    token_rotated_at: datetime | None = at_field(nullable=True)  # its latest new one
    token_revoked_at: datetime | None = at_field(nullable=True)  # set: the host is not used
    # When the host's agent was told to refuse the revoked token (None: not yet).
    token_revocation_sent_at: datetime | None = at_field(nullable=True)
    token_changed_by: str | None = Field(default=None, sa_type=String(32))


# A card's units: an allocation holds a part of one card in thousandths (a memory share is
# its memory over the card's, rounded up); the whole card is all of them.
WHOLE_CARD = 1000


class Gpu(SQLModel, table=True):
    """One card on a host, as its agent reports it."""

    __tablename__ = "gpus"
    __table_args__ = (
        UniqueConstraint("host_id", "index", name="uq_gpus_host_index"),
        CheckConstraint(f"booked_milli >= 0 AND booked_milli <= {WHOLE_CARD}", name="booked_milli"),
    )

    id: int | None = Field(default=None, primary_key=True)
    host_id: int = Field(foreign_key="hosts.id", index=True)
    index: int
    uuid: str | None = Field(default=None, sa_type=String(64))
    name: str | None = Field(default=None, sa_type=String(100))  # as NVML reports it
    gpu_type: str = Field(sa_type=String(GPU_TYPE))  # the catalog type it matches
    memory_gib: float = number_field()
    healthy: bool = True
    # Memory used by processes paika did not start; such a GPU is not booked.
    foreign_memory_gib: float = number_field(default=0.0)
    utilization_pct: float | None = number_field(nullable=True)
    memory_used_gib: float = number_field(default=0.0)
    last_seen_at: datetime | None = at_field(nullable=True)
    # The sum of its open allocations' parts (storage.queries.cluster books and frees them in
    # the transaction that opens or ends an allocation): the database refuses a booking that
    # would pass the whole card, whoever races for it.
    booked_milli: int = Field(default=0, sa_column_kwargs={"server_default": "0"})


class GpuSample(SQLModel, table=True):
    """One poll's reading of one GPU, kept for idle detection and charts."""

    __tablename__ = "gpu_samples"

    id: int | None = Field(default=None, primary_key=True)
    gpu_id: int = Field(foreign_key="gpus.id", index=True)
    at: datetime = at_field(index=True)
    utilization_pct: float | None = number_field(nullable=True)
    memory_used_gib: float = number_field(default=0.0)
    job_id: int | None = Field(default=None, index=True)


class Lease(SQLModel, table=True):
    """A named lease: who holds it until when (the scheduler's leader lock on SQLite)."""

    __tablename__ = "leases"

    name: str = Field(sa_type=String(64), primary_key=True)
    holder: str = Field(sa_type=String(100))
    expires_at: datetime = at_field()


class Allocation(SQLModel, table=True):
    """A job holding a part of a GPU (`share_milli` thousandths; the whole card: WHOLE_CARD)
    from `started_at` until `ended_at`.

    `active_gpu_id` equals `gpu_id` while the allocation is open and is NULL once it ends.
    Opening and ending one books and frees its part on the card's row (`Gpu.booked_milli`),
    whose check lets the database itself refuse a card booked past whole: a second whole-card
    holder, or shares that add up to more than the card.
    """

    __tablename__ = "allocations"
    __table_args__ = (
        CheckConstraint(f"share_milli >= 1 AND share_milli <= {WHOLE_CARD}", name="share_milli"),
        CheckConstraint(
            "(ended_at IS NULL AND active_gpu_id IS NOT NULL AND active_gpu_id = gpu_id)"
            " OR (ended_at IS NOT NULL AND active_gpu_id IS NULL)",
            name="open_iff_active",
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="jobs.id", index=True)
    gpu_id: int = Field(foreign_key="gpus.id", index=True)
    active_gpu_id: int | None = Field(default=None)
    share_milli: int = Field(default=WHOLE_CARD, sa_column_kwargs={"server_default": "1000"})
    started_at: datetime = at_field()
    ended_at: datetime | None = at_field(nullable=True)


class ShareApart(SQLModel, table=True):
    """Two jobs never to share a card again: on one, one of them ran too slowly beside the
    other (scheduler/share_watch.py), and one was stopped and queued again. One row per pair,
    the lower job id first; why as a reason's code and the values it names (which job was
    slowed, by how much, which was stopped)."""

    __tablename__ = "share_apart"
    __table_args__ = (
        UniqueConstraint("job_a", "job_b", name="uq_share_apart_pair"),
        CheckConstraint("job_a < job_b", name="pair_ordered"),
    )

    id: int | None = Field(default=None, primary_key=True)
    job_a: int = Field(foreign_key="jobs.id", index=True)
    job_b: int = Field(foreign_key="jobs.id", index=True)
    at: datetime = at_field()
    reason_code: str = Field(sa_type=String(REASON_CODE))
    reason_values: dict[str, Any] | None = json_field()


class MaintenanceWindow(SQLModel, table=True):
    """A host's planned maintenance (`/gpu admin maintenance add`): from `starts_at` to
    `ends_at` the host takes no job; before it, no job is started there that would still run
    when it opens; at its start what still runs there is stopped with its grace and queued
    again (`stopped_at`: when paika asked); after it the host takes jobs again by itself.
    The host by name (no key: removing the host leaves the record)."""

    __tablename__ = "maintenance_windows"
    __table_args__ = (CheckConstraint("starts_at < ends_at", name="starts_before_it_ends"),)

    id: int | None = Field(default=None, primary_key=True)
    host: str = Field(sa_type=String(HOST_NAME), index=True)
    starts_at: datetime = at_field(index=True)
    ends_at: datetime = at_field(index=True)
    reason: str = Field(sa_type=String(500))
    created_by: str = Field(sa_type=String(32))
    created_at: datetime = at_field()
    cancelled_at: datetime | None = at_field(nullable=True)
    cancelled_by: str | None = Field(default=None, sa_type=String(32))
    stopped_at: datetime | None = at_field(nullable=True)


class TeamReservation(SQLModel, table=True):
    """Cards booked ahead for a team (`/gpu admin reserve add`): `gpus` cards of `gpu_type`
    from `starts_at` to `ends_at`. Before it no other team's job is started on them that
    would still run when it opens; inside it other teams leave that many free for the team
    (scheduler/policy/capacity.py, `reserved_against`). Cancelled rows are kept."""

    __tablename__ = "team_reservations"
    __table_args__ = (CheckConstraint("starts_at < ends_at", name="starts_before_it_ends"),)

    id: int | None = Field(default=None, primary_key=True)
    team_id: int = Field(foreign_key="teams.id", index=True)
    gpu_type: str = Field(sa_type=String(GPU_TYPE))
    gpus: int
    starts_at: datetime = at_field(index=True)
    ends_at: datetime = at_field(index=True)
    reason: str = Field(sa_type=String(500))
    created_by: str = Field(sa_type=String(32))
    created_at: datetime = at_field()
    cancelled_at: datetime | None = at_field(nullable=True)
    cancelled_by: str | None = Field(default=None, sa_type=String(32))
