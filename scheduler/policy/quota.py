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
