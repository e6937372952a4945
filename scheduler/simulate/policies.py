"""The policies a simulation can compare, as knobs of the one real policy.

- `fifo`: plain first come, first served; nobody passes a blocked job.
- `fifo-hold`: fifo on the naive platform: a job takes its GPUs at once, data ready or not,
  and holds them idle until its data is ready (those GPU-hours are counted).
- `sjf`: an oracle that knows every job's exact run time; shortest first, greedy backfill.
- `easy`: FIFO order with EASY backfill on the users' (noisy) estimates, as Slurm does.
- `slurm`: what Slurm users really run: priority/multifactor with the weights of Slurm's
  documentation example (age 1000 over 14 days, fair share 10000 with a 14-day decay, job
  size 1000 favouring large jobs; snapshot.Multifactor) and EASY backfill on the noisy
  estimates; the priority classes as partitions with their own PriorityTier, no preemption,
  type-blind placement.
- `paika`: the policy's own defaults (`Knobs()`), classes respected, noisy estimates.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType

from scheduler.policy.snapshot import Backfill, Knobs, TypeChoice, WithinClass

NO_HEADROOM: MappingProxyType[str, float] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class PolicySetup:
    """Knobs, plus how the platform around the policy behaves."""

    name: str
    knobs: Knobs
    hold_gpus_for_data: bool = False  # the naive platform: jobs take GPUs before data is ready
    oracle_estimates: bool = False  # estimates are the exact run times
    # How fast recorded usage decays for fair share; None: the simulator's default.
    fair_share_half_life_hours: float | None = None


_FIFO = Knobs(
    respect_classes=False,
    within_class=WithinClass.SUBMIT_ORDER,
    backfill=Backfill.NONE,
    starve_after_hours=None,
    starve_after_drains=None,  # no backstop: the baselines are what they are
    aging_drains=None,
    fair_share_weight=0.0,
    max_aging_factor=1.0,
    idle_preemption=False,
    preemptible_preemption=False,  # the baselines never preempt
    core_reservations=False,  # EASY keeps one place a pool, whatever the class
    spread_reservations=False,
    headroom=NO_HEADROOM,
    type_choice=TypeChoice.FIRST_FIT,
)

POLICIES: dict[str, PolicySetup] = {
    "fifo": PolicySetup("fifo", _FIFO),
    "fifo-hold": PolicySetup("fifo-hold", _FIFO, hold_gpus_for_data=True),
    "sjf": PolicySetup(
        "sjf",
        replace(_FIFO, within_class=WithinClass.SHORTEST_FIRST, backfill=Backfill.GREEDY),
        oracle_estimates=True,
    ),
    "easy": PolicySetup("easy", replace(_FIFO, backfill=Backfill.EASY)),
    "slurm": PolicySetup(
        "slurm",
        replace(
            _FIFO,
            respect_classes=True,
            within_class=WithinClass.MULTIFACTOR,
            backfill=Backfill.EASY,
        ),
        fair_share_half_life_hours=14 * 24.0,
    ),
    "paika": PolicySetup("paika", Knobs()),
}


def policy_setup(name: str, *, type_choice: TypeChoice | None = None) -> PolicySetup:
    """The named policy, optionally with another way of choosing GPU types."""
    try:
        setup = POLICIES[name]
    except KeyError:
        known = ", ".join(POLICIES)
        raise ValueError(f"unknown policy {name!r} (known: {known})") from None
    if type_choice is not None:
        setup = replace(setup, knobs=replace(setup.knobs, type_choice=type_choice))
    return setup
