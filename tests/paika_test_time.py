"""The moment tests start from (a Monday morning, UTC)."""

from datetime import UTC, datetime

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
