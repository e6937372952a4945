"""Which jobs of a replay share cards (`--sharing memory`): their memory and fingerprints.

A trace rarely says how a job uses a card, so this module gives each one-GPU job what the
policy needs to let it share (`Pending.share`, the memory it declares, and a fingerprint):

- a job whose trace gives `gpu_milli` below 1000 (openb; the CSV column) asks for that part of
  one card: its memory is gpu_milli ÷ 1000 × the memory of the smallest card type it may run
  on in the cluster (the card it was sized for), and its fingerprint is one of the `NEAREST`
  published profiles closest to that memory, drawn uniformly; the fingerprint keeps the job's
  own memory and the profile's SM and memory-controller busy %;
- in a trace that gives no `gpu_milli` at all (Philly), every one-GPU job draws one profile
  uniformly: the profile's memory (its `gmem`, MB) is what the job declares and the profile's
  figures are its fingerprint. A job whose drawn memory does not fit its smallest card type
  with the policy's reserve holds whole cards;
- jobs of more than one GPU hold whole cards.

`--sharing ideal` draws the same jobs and memory, but every fingerprint is light (its SM and
memory controller idle, `LIGHT`): the policy refuses no pair for bandwidth or slowdown, and
no job slows another. Nothing real shares that well; it is the most sharing could buy on the
trace by memory alone (`bench/sharing.py --ceiling`), the bound a better pairing rule or
better isolation could approach, not a forecast.

The profiles are Lucid's 66 single-job profiles (`lucid-profiles/single_job_profiles.csv`, see
the traces' README). Without them a trace with `gpu_milli` still shares by memory, but no job
has a fingerprint, and the policy puts an unknown job only beside jobs known to be light, so no
two share a card; a trace without `gpu_milli` gets no share jobs.

Every job draws from one stream, `random.Random(f"{seed}/profile")`, twice in submit order
whether the draw is used or not, as draw.py's streams do: the first N jobs (`--limit N`) get the
same profiles as in the full run.
"""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scheduler.policy.colocation import Fingerprint
from scheduler.policy.matching import CardNeeds, CardType
from scheduler.simulate.traces import TraceJob

SHARING_MODES = ("none", "memory", "ideal")
PROFILE_FILE = "single_job_profiles.csv"
PROFILE_FOLDER = "lucid-profiles"
# An openb job's fingerprint comes from one of the profiles this close in memory: near enough
# that memory and bandwidth go together, wide enough that jobs of one size are not all alike.
NEAREST = 3
MIB_PER_GIB = 1024.0
WHOLE = 1000  # thousandths of a card
# `--sharing ideal`'s fingerprint figures: a job that keeps neither the SMs nor the memory
# controller busy, so colocation's score is 0 beside anything and no pair is refused.
LIGHT = (0.0, 0.0)


class ProfileError(ValueError):
    """The profiles file is unreadable or not Lucid's columns."""


@dataclass(frozen=True, slots=True)
class Profile:
    """One published single-job profile: how the job used one card alone."""

    name: str
    gpu_util: float  # SM busy %
    gmem_util: float  # memory-controller busy %
    gmem_mib: float  # memory used, MB as published (taken as MiB)


@dataclass(frozen=True, slots=True)
class ShareDraw:
    """What one job brings to a shared card."""

    fraction: bool = False  # it asks for part of one card (the "shared" class of the waits)
    share_gib: float | None = None  # the memory it declares when it may share; None: whole cards
    fingerprint: Fingerprint | None = None


WHOLE_CARDS = ShareDraw()


def default_profiles(trace: Path) -> Path:
    """Where the profiles lie beside a trace of the public traces' folder."""
    return trace.resolve().parent.parent / PROFILE_FOLDER / PROFILE_FILE


def load_profiles(path: Path) -> tuple[Profile, ...]:
    """Lucid's `model,dataset,batchsize,amp,…,gpu_util,gmem_util,gmem` rows."""
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise ProfileError(f"cannot read the profiles {path}: {exc}") from exc
    profiles: list[Profile] = []
    with handle:
        reader = csv.DictReader(handle)
        missing = {"gpu_util", "gmem_util", "gmem"} - set(reader.fieldnames or [])
        if missing:
            raise ProfileError(
                f"{path.name}: missing column(s) {', '.join(sorted(missing))}; expected Lucid's "
                "single_job_profiles.csv (gpu_util, gmem_util, gmem)"
            )
        for line, row in enumerate(reader, start=2):
            try:
                figures = [float(row[name]) for name in ("gpu_util", "gmem_util", "gmem")]
            except (TypeError, ValueError):
                raise ProfileError(
                    f"{path.name}:{line}: gpu_util, gmem_util or gmem is not a number"
                ) from None
            name = "/".join(row.get(key) or "" for key in ("model", "dataset", "batchsize", "amp"))
            profiles.append(Profile(name, *figures))
    if not profiles:
        raise ProfileError(f"{path.name}: no profiles")
    return tuple(profiles)


def smallest_card_gib(
    needs_types: tuple[str, ...] | None, catalog: Sequence[CardType], present: set[str]
) -> float | None:
    """The memory of the smallest card type present in the cluster that the job may run on."""
    needs = CardNeeds(allowed_types=needs_types)
    sizes = [c.memory_gib for c in catalog if c.name in present and needs.admits(c)]
    return min(sizes, default=None)


def draw_shares(
    jobs: Sequence[TraceJob],
    catalog: Sequence[CardType],
    present: set[str],
    profiles: Sequence[Profile],
    *,
    seed: int,
    reserve_gib: float,
    sharing: bool,
    light: bool = False,
) -> list[ShareDraw]:
    """One ShareDraw per job, in the order of `jobs`. With `sharing` False only the class of
    the trace's fractional jobs is kept (they hold whole cards, as the trace is replayed
    without sharing). With `light` every fingerprint is LIGHT (`--sharing ideal`): the same
    jobs share, by the same memory, and a job with gpu_milli needs no profile for it."""
    rng = random.Random(f"{seed}/profile")
    by_memory = sorted(profiles, key=lambda p: p.gmem_mib)
    traced = any(job.gpu_milli is not None for job in jobs)
    result: list[ShareDraw] = []
    for job in jobs:
        pick, spread = rng.random(), rng.random()
        if job.gpus != 1:
            result.append(WHOLE_CARDS)
            continue
        card_gib = smallest_card_gib(job.gpu_types, catalog, present)
        if traced:
            if job.gpu_milli is None or card_gib is None:
                result.append(WHOLE_CARDS)
                continue
            if not sharing:
                result.append(ShareDraw(fraction=True))
                continue
            memory = job.gpu_milli / WHOLE * card_gib
            found = _nearest(by_memory, memory * MIB_PER_GIB, spread)
            fingerprint = (
                Fingerprint(*LIGHT, memory * MIB_PER_GIB)
                if light
                else Fingerprint(found.gpu_util, found.gmem_util, memory * MIB_PER_GIB)
                if found is not None
                else None
            )
            result.append(ShareDraw(True, memory, fingerprint))
            continue
        if not sharing or not profiles or card_gib is None:
            result.append(WHOLE_CARDS)
            continue
        drawn = profiles[min(int(pick * len(profiles)), len(profiles) - 1)]
        memory = drawn.gmem_mib / MIB_PER_GIB
        if memory + reserve_gib > card_gib:
            result.append(WHOLE_CARDS)
            continue
        figures = LIGHT if light else (drawn.gpu_util, drawn.gmem_util)
        fingerprint = Fingerprint(*figures, drawn.gmem_mib)
        result.append(ShareDraw(True, memory, fingerprint))
    return result


def _nearest(by_memory: Sequence[Profile], mib: float, spread: float) -> Profile | None:
    """One of the NEAREST profiles closest to `mib` (by memory), chosen by `spread` in [0, 1)."""
    if not by_memory:
        return None
    ranked = sorted(by_memory, key=lambda p: (abs(p.gmem_mib - mib), p.gmem_mib, p.name))
    near = ranked[: min(NEAREST, len(ranked))]
    return near[min(math.floor(spread * len(near)), len(near) - 1)]
