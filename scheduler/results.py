"""Results of commands that carry no service record of their own.

A `Notice` is still a sentence (admin changes, templates, help) written here in English;
its words are to move into the faces' catalogue like every other result's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.service.quotas import QuotaView


@dataclass(frozen=True)
class Notice:
    """A reply that is just words (admin changes, help)."""

    text: str


@dataclass(frozen=True)
class QuotaListing:
    """Quotas to show, with what to say when there are none."""

    quotas: Sequence[QuotaView]
    empty: str
