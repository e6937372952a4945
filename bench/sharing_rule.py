"""The sharing rule against Lucid's published profiles: does it tell harmful pairs from safe ones?

Lucid (ASPLOS'23) profiled 66 single-GPU training configurations and labelled each by how much
it slows beside others (0 little, 1 moderate, 2 over 15 %). Every pair of them is judged here,
a configuration with itself included (two copies of one job), by `scheduler.policy.colocation`
on an 80 GB card, and compared with a ground truth drawn from the labels:

- Lucid's own (the headline): its scheduler pairs two jobs only when their labels add up to
  2 or less (`simulation/policy/lucid.py` in S-Lab-System-Group/Lucid), so a pair is harmful
  when the sum exceeds 2: a heavy job beside a moderate or a heavy one.
- A stricter one, for comparison: harmful when either label is 2, or both are 1.

Prints the number of pairs, how many are harmful, the accuracy, the share of harmful pairs the
rule admits and the share of safe pairs it refuses, for each ground truth, then one JSON line.

`--search` also asks how much better a rule of the same form could do on these profiles: it
tries every heavy threshold of memory-controller busy from 20 to 44 %, every moderate
threshold of SM busy from 15 to 64 % and of memory-controller busy from 5 to 39 % (or none),
and prints the best agreement with Lucid's pairing any of them reaches (the ceiling of a
two-threshold rule on SM and memory-controller busy) and, kept honest, the agreement of
thresholds chosen without each model's own profiles on those profiles' pairs (leave one model
out: the thresholds are picked on the other models, then judged on pairs that hold the model).

Lucid also published what it measured: 1,388 pairs of these configurations run side by side on
one GPU, each one's speed divided by its speed alone (`simulation/data/colocate_info.csv` in
S-Lab-System-Group/Lucid). Given that file (`--colocated`), the rule is judged against the
slowdowns themselves as well: a pair is harmful when the slower of the two runs below 0.85 of
its speed alone (over 15 % slower, Lucid's own mark), and the rule decides from the two
configurations' single-job fingerprints. Lucid's labels are judged on the same pairs for
comparison, and `--search` gives the best agreement the same thresholds reach on them (and
leaving one model out).

    .venv/bin/python bench/sharing_rule.py [--profiles CSV] [--colocated CSV] [--search]

The profiles are read from ../shared/traces/lucid-profiles/single_job_profiles.csv beside the
repository unless --profiles names them; without them it says so and exits 0. The measured
pairs are read from colocate_info.csv beside the profiles unless --colocated names them;
without them that part is left out.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path

from scheduler.policy.colocation import (
    BANDWIDTH_HEAVY,
    BANDWIDTH_MODERATE,
    COMPUTE_MODERATE,
    Fingerprint,
    pair,
)

PROFILES = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "traces"
    / "lucid-profiles"
    / "single_job_profiles.csv"
)
# Lucid's mark of a harmful pair: the slower job runs below 0.85 of its speed alone.
HARMFUL_SPEED = 0.85


@dataclass(frozen=True)
class Profile:
    name: str
    fingerprint: Fingerprint
    label: int  # Lucid's: 0 packs with little slowdown, 1 moderate, 2 should not share


@dataclass(frozen=True)
class Measured:
    """Two profiled configurations run side by side on one GPU, and whether it hurt."""

    a: int  # the index of each configuration in the profiles
    b: int
    harmful: bool  # the slower of the two ran below HARMFUL_SPEED of its speed alone


@dataclass(frozen=True)
class Figures:
    pairs: int
    harmful: int
    accuracy: float
    harmful_admitted: float  # of the harmful pairs, the share the rule lets share
    safe_refused: float  # of the safe pairs, the share the rule refuses


def load(path: Path) -> list[Profile]:
    with path.open(newline="") as handle:
        return [
            Profile(
                name=f"{row['model']}/{row['dataset']}/bs{row['batchsize']}/amp{row['amp']}",
                fingerprint=Fingerprint(
                    gpu_util=float(row["gpu_util"]),
                    gmem_util=float(row["gmem_util"]),
                    gmem_mib=float(row["gmem"]),
                ),
                label=int(row["label"]),
            )
            for row in csv.DictReader(handle)
        ]


def _key(name: str) -> tuple[str, ...]:
    return tuple(name.split("/"))


def load_measured(path: Path, profiles: list[Profile]) -> list[Measured]:
    """Lucid's measured pairs whose two configurations are both among `profiles`."""
    index = {_key(p.name): i for i, p in enumerate(profiles)}

    def at(row: dict[str, str], n: str) -> int | None:
        name = (
            f"{row['model' + n]}/{row['dataset' + n]}/bs{row['batchsize' + n]}/amp{row['amp' + n]}"
        )
        return index.get(_key(name))

    pairs = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            a, b = at(row, "1"), at(row, "2")
            if a is None or b is None:
                continue
            slower = min(float(row["speed1"]), float(row["speed2"]))
            pairs.append(Measured(a, b, slower < HARMFUL_SPEED))
    return pairs


def harmful_lucid(a: int, b: int) -> bool:
    """Lucid pairs two jobs only while their labels add up to 2 or less."""
    return a + b > 2


def harmful_strict(a: int, b: int) -> bool:
    return a == 2 or b == 2 or (a == 1 and b == 1)


def judge(profiles: list[Profile], harmful: Callable[[int, int], bool]) -> Figures:
    right = harmful_total = harmful_admitted = safe_refused = total = 0
    for i, a in enumerate(profiles):
        for b in profiles[i:]:
            total += 1
            bad = harmful(a.label, b.label)
            shares = pair(a.fingerprint, b.fingerprint).share
            harmful_total += bad
            harmful_admitted += bad and shares
            safe_refused += not bad and not shares
            right += bad != shares
    safe_total = total - harmful_total
    return Figures(
        pairs=total,
        harmful=harmful_total,
        accuracy=right / total,
        harmful_admitted=harmful_admitted / harmful_total if harmful_total else 0.0,
        safe_refused=safe_refused / safe_total if safe_total else 0.0,
    )


@dataclass(frozen=True)
class Thresholds:
    heavy_gmem: float  # memory-controller busy % from which a job is heavy (label 2)
    moderate_gpu: float  # SM busy % from which a lighter job is moderate (label 1)
    moderate_gmem: float  # memory-controller busy % from which a lighter job is moderate


POLICY = Thresholds(BANDWIDTH_HEAVY, COMPUTE_MODERATE, BANDWIDTH_MODERATE)


def label_of(f: Fingerprint, t: Thresholds) -> int:
    """The label a two-threshold rule gives; the pair rule then refuses a sum above 2."""
    if f.gmem_util >= t.heavy_gmem:
        return 2
    return int(f.gpu_util >= t.moderate_gpu or f.gmem_util >= t.moderate_gmem)


def judge_measured(
    profiles: list[Profile], pairs: list[Measured], shares: Callable[[Profile, Profile], bool]
) -> Figures:
    """How often `shares` agrees with what Lucid measured on each pair."""
    harmful_total = sum(p.harmful for p in pairs)
    verdicts = [(p.harmful, shares(profiles[p.a], profiles[p.b])) for p in pairs]
    total = len(pairs)
    safe_total = total - harmful_total
    return Figures(
        pairs=total,
        harmful=harmful_total,
        accuracy=sum(bad != ok for bad, ok in verdicts) / total if total else 0.0,
        harmful_admitted=(
            sum(bad and ok for bad, ok in verdicts) / harmful_total if harmful_total else 0.0
        ),
        safe_refused=(
            sum(not bad and not ok for bad, ok in verdicts) / safe_total if safe_total else 0.0
        ),
    )


def _kinds(profiles: list[Profile], t: Thresholds) -> Counter[tuple[int, int]]:
    """How many profiles have each (Lucid's label, the rule's label)."""
    return Counter((p.label, label_of(p.fingerprint, t)) for p in profiles)


def _agreeing(
    left: Counter[tuple[int, int]], right: Counter[tuple[int, int]] | None = None
) -> tuple[int, int]:
    """Pairs on which the rule agrees with Lucid's pairing, and pairs in all: within `left`
    (each profile with itself too) or, given `right`, one profile of each."""
    right_pairs = total = 0
    kinds = sorted(left)
    for x, (a, a_est) in enumerate(kinds):
        others = sorted(right) if right is not None else kinds[x:]
        for b, b_est in others:
            if right is not None:
                n = left[(a, a_est)] * right[(b, b_est)]
            elif (a, a_est) == (b, b_est):
                n = left[(a, a_est)] * (left[(a, a_est)] + 1) // 2
            else:
                n = left[(a, a_est)] * left[(b, b_est)]
            total += n
            right_pairs += n * (harmful_lucid(a, b) == (a_est + b_est > 2))
    return right_pairs, total


def agreement(profiles: list[Profile], t: Thresholds) -> float:
    """Share of all pairs on which the rule's labels agree with Lucid's pairing."""
    right, total = _agreeing(_kinds(profiles, t))
    return right / total if total else 0.0


def _grid() -> list[Thresholds]:
    return [
        Thresholds(float(heavy), float(gpu), float(gmem))
        for heavy in range(20, 45)
        for gpu in range(15, 65)
        for gmem in [*range(5, 40), 101]
    ]


def best_of(profiles: list[Profile], grid: list[Thresholds]) -> tuple[float, Thresholds]:
    """The grid's best agreement on every pair of `profiles`, and its thresholds (the first
    found on a tie, so the search is reproducible)."""
    best = (-1.0, grid[0])
    for t in grid:
        got = agreement(profiles, t)
        if got > best[0]:
            best = (got, t)
    return best


def _model(p: Profile) -> str:
    return p.name.split("/")[0]


def _measured_right(pairs: list[Measured], labels: tuple[int, ...]) -> int:
    """Measured pairs on which a rule giving each profile `labels` is right."""
    return sum(p.harmful == (labels[p.a] + labels[p.b] > 2) for p in pairs)


def measured_search(
    profiles: list[Profile], pairs: list[Measured], grid: list[Thresholds]
) -> tuple[float, Thresholds, float]:
    """The grid's best agreement with the measured pairs and its thresholds, and the agreement
    of thresholds chosen without each model on the pairs that hold it (leave one model out).
    Thresholds that give every profile the same label are judged once."""
    labelled = sorted(
        ((tuple(label_of(p.fingerprint, t) for p in profiles), n) for n, t in enumerate(grid)),
    )
    # One grid index per distinct labelling, the first in grid order, so ties resolve as
    # best_of's do.
    firsts = [
        (labels, min(n for _, n in group)) for labels, group in groupby(labelled, lambda x: x[0])
    ]
    firsts.sort(key=lambda x: x[1])

    def best(among: list[Measured]) -> tuple[int, tuple[int, ...], int]:
        right, labels, n = max(
            ((_measured_right(among, labels), labels, -n) for labels, n in firsts),
            key=lambda x: (x[0], x[2]),
        )
        return right, labels, -n

    right, _, n = best(pairs)
    held_right = held_total = 0
    for model in sorted({_model(p) for p in profiles}):
        mine = {i for i, p in enumerate(profiles) if _model(p) == model}
        held = [p for p in pairs if p.a in mine or p.b in mine]
        _, labels, _ = best([p for p in pairs if p.a not in mine and p.b not in mine])
        held_right += _measured_right(held, labels)
        held_total += len(held)
    return (
        right / len(pairs) if pairs else 0.0,
        grid[n],
        held_right / held_total if held_total else 0.0,
    )


def leave_one_model_out(profiles: list[Profile], grid: list[Thresholds]) -> float:
    """Agreement on each model's pairs (with itself and with the rest) of thresholds picked
    without that model, pooled over the models."""
    right = total = 0
    for model in sorted({_model(p) for p in profiles}):
        mine = [p for p in profiles if _model(p) == model]
        rest = [p for p in profiles if _model(p) != model]
        _, t = best_of(rest, grid)
        for got, n in (
            _agreeing(_kinds(mine, t)),
            _agreeing(_kinds(mine, t), _kinds(rest, t)),
        ):
            right += got
            total += n
    return right / total if total else 0.0


def _report(name: str, got: Figures) -> dict[str, object]:
    print(
        f"{name:>8}: {got.pairs} pairs, {got.harmful} harmful; accuracy {got.accuracy:.1%}, "
        f"harmful admitted {got.harmful_admitted:.1%}, safe refused {got.safe_refused:.1%}"
    )
    return {
        "pairs": got.pairs,
        "harmful": got.harmful,
        "accuracy": round(got.accuracy, 4),
        "harmful_admitted": round(got.harmful_admitted, 4),
        "safe_refused": round(got.safe_refused, 4),
    }


def _described(t: Thresholds) -> str:
    return (
        f"heavy at memory-controller {t.heavy_gmem:g} %, moderate at SM "
        f"{t.moderate_gpu:g} % or memory-controller {t.moderate_gmem:g} %"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", type=Path, default=PROFILES)
    parser.add_argument(
        "--colocated",
        type=Path,
        default=None,
        help="Lucid's measured pairs (colocate_info.csv; default: beside the profiles)",
    )
    parser.add_argument(
        "--search", action="store_true", help="also the best a rule of this form reaches"
    )
    args = parser.parse_args(argv)
    if not args.profiles.is_file():
        print(f"skipped: no profiles at {args.profiles} (give --profiles CSV)")
        return 0
    profiles = load(args.profiles)
    out: dict[str, object] = {"profiles": len(profiles)}
    for name, truth in (("lucid", harmful_lucid), ("strict", harmful_strict)):
        out[name] = _report(name, judge(profiles, truth))
    grid = _grid() if args.search else []
    if args.search:
        ceiling, found = best_of(profiles, grid)
        held_out = leave_one_model_out(profiles, grid)
        print(
            f"search: {len(grid)} threshold sets; best agreement {ceiling:.1%} "
            f"({_described(found)}); the policy's {agreement(profiles, POLICY):.1%}; "
            f"leave one model out {held_out:.1%}"
        )
        out["search"] = {
            "sets": len(grid),
            "ceiling": round(ceiling, 4),
            "policy": round(agreement(profiles, POLICY), 4),
            "leave_one_model_out": round(held_out, 4),
        }
    colocated = args.colocated or args.profiles.with_name("colocate_info.csv")
    if colocated.is_file():
        pairs = load_measured(colocated, profiles)
        measured: dict[str, object] = {
            "rule": _report(
                "measured",
                judge_measured(
                    profiles, pairs, lambda a, b: pair(a.fingerprint, b.fingerprint).share
                ),
            ),
            "lucid_labels": _report(
                "labels", judge_measured(profiles, pairs, lambda a, b: a.label + b.label <= 2)
            ),
        }
        if args.search:
            ceiling, found, held_out = measured_search(profiles, pairs, grid)
            print(
                f"measured search: best agreement {ceiling:.1%} ({_described(found)}); "
                f"leave one model out {held_out:.1%}"
            )
            measured["search"] = {
                "ceiling": round(ceiling, 4),
                "leave_one_model_out": round(held_out, 4),
            }
        out["measured"] = measured
    else:
        print(f"no measured pairs at {colocated} (give --colocated CSV)")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
