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

    .venv/bin/python bench/sharing_rule.py [--profiles CSV]

The profiles are read from ../shared/traces/lucid-profiles/single_job_profiles.csv beside the
repository unless --profiles names them; without them it says so and exits 0.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scheduler.policy.colocation import Fingerprint, pair

PROFILES = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "traces"
    / "lucid-profiles"
    / "single_job_profiles.csv"
)


@dataclass(frozen=True)
class Profile:
    name: str
    fingerprint: Fingerprint
    label: int  # Lucid's: 0 packs with little slowdown, 1 moderate, 2 should not share


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", type=Path, default=PROFILES)
    args = parser.parse_args(argv)
    if not args.profiles.is_file():
        print(f"skipped: no profiles at {args.profiles} (give --profiles CSV)")
        return 0
    profiles = load(args.profiles)
    out: dict[str, object] = {"profiles": len(profiles)}
    for name, truth in (("lucid", harmful_lucid), ("strict", harmful_strict)):
        got = judge(profiles, truth)
        print(
            f"{name:>6}: {got.pairs} pairs, {got.harmful} harmful; accuracy {got.accuracy:.1%}, "
            f"harmful admitted {got.harmful_admitted:.1%}, safe refused {got.safe_refused:.1%}"
        )
        out[name] = {
            "pairs": got.pairs,
            "harmful": got.harmful,
            "accuracy": round(got.accuracy, 4),
            "harmful_admitted": round(got.harmful_admitted, 4),
            "safe_refused": round(got.safe_refused, 4),
        }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
