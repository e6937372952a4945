"""Who may share a GPU: two jobs' fingerprints in, a verdict and the slowdown expected out.

A fingerprint is how one job uses one card when it runs alone: SM busy % (NVML's
`utilization.gpu`), memory-controller busy % (NVML's `utilization.memory`, the stand-in for
memory bandwidth), its peak GPU memory and, when known, its PCIe traffic.

The model follows Lucid (Hu et al., ASPLOS'23; S-Lab-System-Group/Lucid). Lucid profiles each
training job alone and co-located with others and gives it a share score, its label:
`simulation/analyzer/analyzer.py` labels a job 2 when its mean normalised speed beside other
jobs is below 0.85 (a slowdown over 15 %), 1 below 0.95 (5-15 %) and 0 otherwise; its
scheduler (`simulation/policy/lucid.py`, `job_pair_picker_time_aware`) puts two jobs on one
card only when their memory fits and their scores add up to 2 or less. So a job that slows
others a lot (2) may sit beside one that barely uses the card (0), two middling jobs (1 + 1)
may share, and a heavy job is never put beside a middling or a heavy one.

paika cannot co-locate every job to learn its label, so it estimates the score from the
fingerprint alone, with the thresholds that best recover Lucid's labels on its 66 published
single-job profiles (`single_data.csv`):

- HEAVY bandwidth, score 2: memory-controller busy >= 31 %. This one threshold agrees with
  Lucid's "> 15 % slowdown" label on 92 % of the profiles; it is the only threshold the pair
  rule needs for "heavy".
- MODERATE, score 1: SM busy >= 25 %, or memory-controller busy >= 15 %. Among the profiles,
  no threshold of SM busy from 15 % to 75 % separates label 0 from label 1 better than 25 %.
- LIGHT: the rest; such a job's score is its SM-busy share (below 0.25), so what little it
  uses still counts, and no light job reaches a middling one.

The expected slowdown of the slower of two jobs is SLOWDOWN_PER_SCORE * score_a * score_b:
interference needs both a job that presses and one that feels it, so a light job beside
anything costs little. With 0.1, two heavy jobs expect 40 % (Lucid's measured pair of
MobileNetV3 and ResNet-18 at batch 128: 43 %), heavy beside middling 20 %, two middling 10 %,
heavy beside light at most 5 %: refused at the default 15 %, exactly where Lucid's sum-of-scores
rule refuses. On all 2,211 pairs of the 66 profiles the rule agrees with Lucid's own pairing
on 88 % of pairs and admits 4 % of the harmful ones (`bench/sharing_rule.py`); no other
thresholds of this form do better on them (its `--search`: 88.4 % is the ceiling).
Against the slowdowns Lucid measured on 1,388 pairs (over 15 % is harmful) it is right on 84.5 %
and admits 13.2 % of the harmful ones, where Lucid's own labels admit 30.4 %; the best
thresholds of this form for those pairs reach 85.8 %.

Two jobs that both press memory bandwidth hard are never stacked whatever the slowdown
allowed, nor two that both press PCIe hard (the card's own bandwidth and the host link are
shared by everything on the card; 显存与带宽错开用).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

# Memory-controller busy % at and above which a job presses memory bandwidth HEAVY: the
# threshold that agrees with Lucid's "> 15 % slowdown" label on 92 % of its 66 profiles.
BANDWIDTH_HEAVY = 31.0
# Memory-controller busy % at and above which a job presses bandwidth MODERATE: half the heavy
# mark; in Lucid's profiles every job above it also keeps the SMs 25 % busy or more, so it
# names the pressure without moving the pair rule.
BANDWIDTH_MODERATE = 15.0
# SM busy % at and above which a job counts as middling (Lucid's label 1): the threshold of
# SM busy that best separates Lucid's labels 0 and 1 among its 66 profiles.
COMPUTE_MODERATE = 25.0
# PCIe tx+rx MB/s at and above which a job presses the host link HEAVY, and MODERATE. Lucid's
# profiles carry no PCIe figures: these are a quarter and a sixteenth of a PCIe 4.0 x16 link's
# ~32,000 MB/s each way (about half and an eighth of a PCIe 3.0 x16's), where a data loader
# that streams batches from host memory already competes with its neighbour's.
PCIE_HEAVY_MBPS = 8000.0
PCIE_MODERATE_MBPS = 2000.0
# Lucid's share scores: heavy 2, middling 1 (a light job's score is its SM-busy share).
HEAVY_SCORE = 2.0
MODERATE_SCORE = 1.0
# Expected slowdown of the slower job per unit of the product of the two scores: 2 x 2 gives
# 40 % (Lucid measured 43 % for its heaviest pair of MobileNetV3 and ResNet-18), 2 x 1 gives
# 20 %, above the 15 % where Lucid's label 2 starts, 1 x 1 gives 10 %, inside label 1's 5-15 %.
SLOWDOWN_PER_SCORE = 0.1
# The defaults of pair(): an 80 GB card, 1 GiB kept free for the CUDA contexts and the
# allocators' slack of two processes, and Lucid's 15 % as the most slowdown a share may cost.
CARD_MIB = 81920.0
RESERVE_MIB = 1024.0
MAX_SLOWDOWN = 0.15

# The fields parse() reads, in the order the text form gives them.
FIELDS = ("gpu_util", "gmem_util", "gmem_mb", "pcie_mbps")
REQUIRED = FIELDS[:3]
FORM = "gpu_util=57.8,gmem_util=20.2,gmem_mb=2458[,pcie_mbps=1200]"


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """How one job uses one card when it runs alone (its recent runs' typical figures)."""

    gpu_util: float  # SM busy %, 0..100 (NVML utilization.gpu)
    gmem_util: float  # memory-controller busy %, 0..100 (NVML utilization.memory): bandwidth
    gmem_mib: float  # GPU memory used at its peak, MiB
    pcie_mbps: float | None = None  # PCIe tx+rx MB/s when known


class Pressure(StrEnum):
    """How hard a job presses a resource."""

    LIGHT = "light"
    MODERATE = "moderate"
    HEAVY = "heavy"


@dataclass(frozen=True, slots=True)
class PairVerdict:
    share: bool  # may the two run on one card
    slowdown: float  # expected fractional slowdown of the slower of the two (0.12 = 12 %)
    why: str  # a short code: "ok", "memory", "bandwidth", "pcie", "compute"


class FingerprintError(ValueError):
    """A fingerprint's text that cannot be read: which field, what is wrong with it (a code:
    "missing", "unknown", "repeated", "not_a_number", "out_of_range", "malformed") and the
    value given; the message says the same in English with the form expected."""

    def __init__(self, field: str, problem: str, value: str = "") -> None:
        self.field = field
        self.problem = problem
        self.value = value
        what = {
            "missing": "is missing",
            "unknown": "is not a field of a fingerprint",
            "repeated": "is given twice",
            "not_a_number": f"is not a number: {value!r}",
            "out_of_range": f"is out of range: {value!r}",
            "malformed": f"is not name=value: {value!r}",
        }.get(problem, problem)
        super().__init__(f"{field} {what}; write a fingerprint as {FORM}")


def bandwidth(f: Fingerprint) -> Pressure:
    """How hard the job presses the card's memory bandwidth (memory-controller busy %)."""
    if f.gmem_util >= BANDWIDTH_HEAVY:
        return Pressure.HEAVY
    if f.gmem_util >= BANDWIDTH_MODERATE:
        return Pressure.MODERATE
    return Pressure.LIGHT


def pcie(f: Fingerprint) -> Pressure:
    """How hard the job presses the host's PCIe link; LIGHT when its traffic is not known."""
    if f.pcie_mbps is None:
        return Pressure.LIGHT
    if f.pcie_mbps >= PCIE_HEAVY_MBPS:
        return Pressure.HEAVY
    if f.pcie_mbps >= PCIE_MODERATE_MBPS:
        return Pressure.MODERATE
    return Pressure.LIGHT


def _score(f: Fingerprint) -> float:
    """Lucid's share score estimated from the fingerprint: 2 heavy, 1 middling, and a light
    job's SM-busy share (below 0.25). Never falls as either utilisation rises."""
    if bandwidth(f) is Pressure.HEAVY:
        return HEAVY_SCORE
    if f.gpu_util >= COMPUTE_MODERATE or bandwidth(f) is Pressure.MODERATE:
        return MODERATE_SCORE
    return max(f.gpu_util, 0.0) / 100.0


def expected_slowdown(a: Fingerprint, b: Fingerprint) -> float:
    """The fractional slowdown expected of the slower of two jobs sharing one card."""
    # The product first: floating point multiplies two numbers the same either way round.
    return SLOWDOWN_PER_SCORE * (_score(a) * _score(b))


def pair(
    a: Fingerprint,
    b: Fingerprint,
    *,
    card_mib: float = CARD_MIB,
    reserve_mib: float = RESERVE_MIB,
    max_slowdown: float = MAX_SLOWDOWN,
) -> PairVerdict:
    """May `a` and `b` run on one card of `card_mib`, keeping `reserve_mib` free and costing the
    slower of them at most `max_slowdown`? The first rule that refuses names the reason."""
    slowdown = expected_slowdown(a, b)
    if a.gmem_mib + b.gmem_mib + reserve_mib > card_mib:
        return PairVerdict(False, slowdown, "memory")
    if bandwidth(a) is Pressure.HEAVY and bandwidth(b) is Pressure.HEAVY:
        return PairVerdict(False, slowdown, "bandwidth")
    if pcie(a) is Pressure.HEAVY and pcie(b) is Pressure.HEAVY:
        return PairVerdict(False, slowdown, "pcie")
    if slowdown > max_slowdown:
        return PairVerdict(False, slowdown, "compute")
    return PairVerdict(True, slowdown, "ok")


def parse(text: str) -> Fingerprint:
    """A fingerprint from its text form, "gpu_util=57.8,gmem_util=20.2,gmem_mb=2458" with an
    optional ",pcie_mbps=1200". Raises FingerprintError (a ValueError) naming the bad field."""
    given: dict[str, float] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        name, sep, raw = part.partition("=")
        name, raw = name.strip(), raw.strip()
        if not sep or not name:
            raise FingerprintError(name or "fingerprint", "malformed", part.strip())
        if name not in FIELDS:
            raise FingerprintError(name, "unknown", raw)
        if name in given:
            raise FingerprintError(name, "repeated", raw)
        try:
            value = float(raw)
        except ValueError:
            raise FingerprintError(name, "not_a_number", raw) from None
        percent = name in ("gpu_util", "gmem_util")
        if not math.isfinite(value) or value < 0 or (percent and value > 100):
            raise FingerprintError(name, "out_of_range", raw)
        given[name] = value
    for name in REQUIRED:
        if name not in given:
            raise FingerprintError(name, "missing")
    return Fingerprint(
        gpu_util=given["gpu_util"],
        gmem_util=given["gmem_util"],
        gmem_mib=given["gmem_mb"],
        pcie_mbps=given.get("pcie_mbps"),
    )
