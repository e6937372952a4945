"""`paika init` on hosts whose cards are split by MIG: one catalogue type per profile found,
named after it, matching its instances and not the whole cards, at the profile's share of the
card's speed."""

from __future__ import annotations

from scheduler.config import policy_from_text
from scheduler.starting_policy import CardKind, guessed_speed, starting_policy

A100_3G = "NVIDIA A100-SXM4-80GB MIG 3g.40gb"
A100_1G = "NVIDIA A100-SXM4-80GB MIG 1g.10gb"


def test_an_instance_is_as_fast_as_its_share_of_the_card() -> None:
    assert guessed_speed("NVIDIA A100-SXM4-80GB") == 1.0
    assert guessed_speed(A100_3G) == round(3 / 7, 2)
    assert guessed_speed("NVIDIA H100 80GB HBM3 MIG 1g.10gb") == round(2.2 / 7, 2)
    assert guessed_speed("NVIDIA Mystery MIG 2g.20gb") is None


def test_init_proposes_a_type_per_profile_that_matches_its_instances() -> None:
    kinds = [
        CardKind(A100_3G, 40, 2, ("gpu-m",)),
        CardKind(A100_1G, 10, 4, ("gpu-m",)),
        CardKind("NVIDIA A100-SXM4-80GB", 80, 8, ("gpu-a",)),
    ]
    policy = policy_from_text(starting_policy(kinds), "test")
    three = policy.type_for_card(A100_3G, 39.5)
    one = policy.type_for_card(A100_1G, 9.75)
    whole = policy.type_for_card("NVIDIA A100-SXM4-80GB", 80)
    assert len({three, one, whole}) == 3 and None not in (three, one, whole)
    assert three is not None and "3g.40gb" in three and "MIG" in three
    assert policy.gpu_types[three].memory_gib == 40
    assert policy.gpu_types[three].speed == round(3 / 7, 2)
