"""The digest and the board count a GPU type's cards with one type, the board's TypeSummary;
digests stored before it (their counts had no `listed`) still read back."""

from __future__ import annotations

import json
from dataclasses import replace

from scheduler.app import Paika
from scheduler.digest import Digest, digest_now
from scheduler.digest.model import TypeCount
from scheduler.service.board import TypeSummary

# A type's counts as a digest stored them before the board's type was the digest's too.
STORED_BEFORE = {
    "gpu_type": "A100-80GB",
    "total": 4,
    "free": 1,
    "busy": 2,
    "idle_held": 1,
    "down": 0,
}


def test_the_digest_counts_cards_with_the_boards_type() -> None:
    assert TypeCount is TypeSummary


def test_a_digest_stored_before_reads_back_with_its_types_listed(paika: Paika) -> None:
    stored = json.loads(json.dumps(digest_now(paika).to_json()))
    digest = Digest.from_json({**stored, "types": [STORED_BEFORE]})
    assert digest.types == (TypeSummary("A100-80GB", 4, 1, 2, 1, 0, listed=True),)
    assert (digest.total_gpus, digest.free_gpus) == (4, 1)


def test_a_type_no_catalogue_entry_names_stays_unlisted_in_the_stored_digest(
    paika: Paika,
) -> None:
    unlisted = TypeSummary("NVIDIA L40S", 2, 2, 0, 0, 0, listed=False)
    digest = replace(digest_now(paika), types=(unlisted,))
    stored = json.loads(json.dumps(digest.to_json()))
    assert stored["types"] == [
        {
            "gpu_type": "NVIDIA L40S",
            "total": 2,
            "free": 2,
            "busy": 0,
            "idle_held": 0,
            "down": 0,
            "listed": False,
            "shared": 0,
        }
    ]
    assert Digest.from_json(stored) == digest
