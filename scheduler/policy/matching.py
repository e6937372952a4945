"""Which GPU types of the catalog can run a job, cheapest first."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class CardType:
    """One catalog entry as the policy sees it."""

    name: str
    memory_gib: float
    speed: float
    price_per_gpu_hour: float


@dataclass(frozen=True)
class CardNeeds:
    """What a job asks of each of its GPUs."""

    allowed_types: tuple[str, ...] | None = None  # None: any type
    min_memory_gib: float | None = None
    min_speed: float | None = None

    def admits(self, card: CardType) -> bool:
        """Whether one card of this type is adequate for the job."""
        if self.allowed_types is not None and card.name not in self.allowed_types:
            return False
        if self.min_memory_gib is not None and card.memory_gib < self.min_memory_gib:
            return False
        return self.min_speed is None or card.speed >= self.min_speed


def fitting_types(catalog: Iterable[CardType], needs: CardNeeds) -> list[CardType]:
    """Adequate types, cheapest first, then least memory wasted, then name."""
    fitting = [card for card in catalog if needs.admits(card)]
    return sorted(fitting, key=lambda card: (card.price_per_gpu_hour, card.memory_gib, card.name))


def cheapest_fit(catalog: Sequence[CardType], needs: CardNeeds) -> CardType | None:
    """The type a job will most likely get when every type is free."""
    fitting = fitting_types(catalog, needs)
    return fitting[0] if fitting else None
