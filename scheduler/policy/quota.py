"""Which quota pays for a stretch of GPU time, and how much of each is left."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date


@dataclass(frozen=True)
class QuotaState:
    """A quota as the policy sees it: what was granted, what is used, until when."""

    id: int
    gpu_type: str | None  # None: any type
    gpu_hours: float
    used_hours: float
    expires_on: date

    @property
    def left_hours(self) -> float:
        return max(0.0, self.gpu_hours - self.used_hours)

    def covers(self, gpu_type: str, today: date) -> bool:
        """Whether this quota may pay for `gpu_type` today."""
        return self.expires_on >= today and self.gpu_type in (None, gpu_type)


def charge_to(quotas: Iterable[QuotaState], gpu_type: str, today: date) -> QuotaState | None:
    """The quota to charge: a type-specific one before `any`, the soonest expiring first.

    Quotas with hours left come first, so spending never piles onto an exhausted quota
    while another still has room.
    """
    usable = [quota for quota in quotas if quota.covers(gpu_type, today)]
    usable.sort(key=lambda q: (q.left_hours <= 0, q.gpu_type is None, q.expires_on, q.id))
    return usable[0] if usable else None


@dataclass(frozen=True, slots=True)
class QuotaCheck:
    """The quota a job would be charged to, or why none can pay."""

    quota: QuotaState | None
    problem: str | None = None  # 'none_live', 'exhausted' or 'expires'
    left_hours: float = 0.0  # exhausted: the most GPU-hours any live quota has left


def check_quota(
    quotas: tuple[QuotaState, ...] | None,
    ends: dict[int, float] | None,
    *,
    gpu_type: str,
    gpu_hours: float,
    now: float,
    run_end: float,
    spent: dict[int, float],
) -> QuotaCheck:
    """May a job of `gpu_hours` run on `gpu_type` until `run_end` under its team's quotas?

    A team without quotas is not limited. `spent` holds hours promised earlier in this pass.
    """
    if quotas is None:
        return QuotaCheck(None)
    ends = ends or {}
    live = [
        q for q in quotas if q.gpu_type in (None, gpu_type) and ends.get(q.id, float("inf")) > now
    ]
    if not live:
        return QuotaCheck(None, "none_live")
    live.sort(key=lambda q: (q.gpu_type is None, ends.get(q.id, float("inf")), q.id))
    enough = [q for q in live if q.left_hours - spent.get(q.id, 0.0) >= gpu_hours]
    if not enough:
        left = max(q.left_hours - spent.get(q.id, 0.0) for q in live)
        return QuotaCheck(None, "exhausted", left)
    lasting = [q for q in enough if ends.get(q.id, float("inf")) >= run_end]
    if not lasting:
        return QuotaCheck(None, "expires")
    return QuotaCheck(lasting[0])
