"""Which catalog type a MIG instance is: a type that says MIG in its name, or one whose
nvml_names name it (exactly, or with * and ?); never a whole card's type."""

from __future__ import annotations

import pytest

from scheduler.config import GpuType, PolicyConfig, load_policy
from scheduler.settings import BUNDLED_POLICY

A100_3G = "NVIDIA A100-SXM4-80GB MIG 3g.40gb"


@pytest.fixture
def policy() -> PolicyConfig:
    bundled = load_policy(BUNDLED_POLICY)
    types = {
        **bundled.gpu_types,
        "A100": GpuType(memory_gib=80, price_per_gpu_hour=2.2),
        "A100-MIG-3g.40gb": GpuType(memory_gib=40, price_per_gpu_hour=0.9),
        "H100-MIG-1g.10gb": GpuType(memory_gib=10, price_per_gpu_hour=0.4),
        "slice-small": GpuType(
            memory_gib=20, price_per_gpu_hour=0.5, nvml_names=("*a100* MIG 2g.20gb",)
        ),
    }
    return bundled.model_copy(update={"gpu_types": types})


def test_an_instance_is_the_type_that_names_its_profile(policy: PolicyConfig) -> None:
    assert policy.type_for_card(A100_3G, 39.5) == "A100-MIG-3g.40gb"
    assert policy.type_for_card("NVIDIA A100-PCIE-80GB MIG 2g.20gb", 19.5) == "slice-small"
    # An H100's 1g.10gb is not an A100's, and a profile nobody named is no type.
    assert policy.type_for_card("NVIDIA A100-SXM4-80GB MIG 1g.10gb", 9.5) is None
    assert policy.type_for_card("NVIDIA H100 80GB HBM3 MIG 1g.10gb", 9.75) == "H100-MIG-1g.10gb"


def test_an_instance_is_never_a_whole_cards_type(policy: PolicyConfig) -> None:
    # "A100" and "A100-40GB" would match the instance's name and memory by their parts.
    without = policy.model_copy(
        update={"gpu_types": {k: v for k, v in policy.gpu_types.items() if "MIG" not in k}}
    )
    assert without.type_for_card(A100_3G, 39.5) is None
    # Whole cards keep their types.
    assert policy.type_for_card("NVIDIA A100-SXM4-80GB", 80) == "A100-80GB"
    assert policy.type_for_card("NVIDIA A100-SXM4-40GB", 40) == "A100-40GB"


def test_an_exact_alias_still_names_one_card(policy: PolicyConfig) -> None:
    types = {"mine": GpuType(memory_gib=40, price_per_gpu_hour=1, nvml_names=(A100_3G.lower(),))}
    exact = policy.model_copy(update={"gpu_types": types})
    assert exact.type_for_card(A100_3G, 39.5) == "mine"
    assert exact.type_for_card(A100_3G + "+me", 39.5) is None
