"""Host names as the digest picture's rows say them: one distinct, readable label per host
that fits the room left of the timeline, whatever the names' length or script.

Each way below is tried for every host at once, and the first under which every label fits
and no two hosts could be read as one another wins, so the rows read alike:

1. the names whole;
2. without their domain ("gpu-07.cluster.example" → "gpu-07…");
3. without what every host's name shares, at its start ("…rack3-node-01", "…01") and end
   ("east…" for east-gpu-node-0001 and west-gpu-node-0001), cut at a separator so that
   what is left reads as a word or number of the name;
4. each name shortened around an ellipsis, keeping the characters that tell it apart
   ("…2-slot07", "gpu…07");
5. numbered in their order ("H1", "H2", …), for a legend to name them.

A name with characters the picture's fonts cannot draw (a Chinese host name where no CJK font
is installed) is said as its DNS ASCII form (IDNA: 训练-01 → xn---01-…), not as empty boxes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

ELLIPSIS = "…"
# What separates the words and numbers of a host name; shared parts are cut after one.
SEPARATORS = frozenset("-_.")

# fits(host, label): whether `label` fits the room on `host`'s rows.
Fits = Callable[[str, str], bool]


# The ways, by how much of the names they keep (see the module's docstring).
WHOLE, WITHOUT_DOMAIN, WITHOUT_SHARED, ABBREVIATED, NUMBERED = range(5)


@dataclass(frozen=True)
class HostLabels:
    """Each host's label, and the way they were made (NUMBERED: a legend must name them)."""

    labels: Mapping[str, str]
    way: int = WHOLE

    @property
    def numbered(self) -> bool:
        return self.way == NUMBERED

    @property
    def shortened(self) -> dict[str, str]:
        """The hosts whose label is not their name: label → name."""
        return {label: host for host, label in self.labels.items() if label != host}


def host_labels(
    hosts: Sequence[str],
    fits: Fits,
    drawable: Callable[[str], bool] = lambda text: True,
    *,
    balanced: bool = False,
) -> HostLabels:
    """A label for each of `hosts` (distinct names), by the first way (see the module) that
    fits every one and keeps them apart; numbered when none does. `balanced`: a name cut
    around an ellipsis keeps as much of its start as of its end (a GPU type: "A100…80GB"),
    where a host keeps its end first (its number)."""
    names = {host: host if drawable(host) else ascii_name(host) for host in hosts}
    ways: tuple[Callable[[Mapping[str, str], Fits], dict[str, str] | None], ...] = (
        _whole,
        _without_domain,
        _without_shared,
        lambda found, fit: _abbreviated(found, fit, balanced),
    )
    for way, make in enumerate(ways):
        labels = make(names, fits)
        if labels is not None:
            return HostLabels(labels, way)
    return HostLabels({host: f"H{n}" for n, host in enumerate(hosts, 1)}, NUMBERED)


def ascii_name(host: str) -> str:
    """The host's name in ASCII as DNS knows it: each label with other characters in its
    IDNA (punycode) form, so that two names stay two."""
    return ".".join(
        label if label.isascii() else "xn--" + label.encode("punycode").decode("ascii")
        for label in host.split(".")
    )


def _whole(names: Mapping[str, str], fits: Fits) -> dict[str, str] | None:
    labels = dict(names)
    return labels if all(fits(host, label) for host, label in labels.items()) else None


def _without_domain(names: Mapping[str, str], fits: Fits) -> dict[str, str] | None:
    if not any(_first(name) != name for name in names.values()):
        return None  # no domain to leave out: the same as whole
    labels = {
        host: _first(name) + ELLIPSIS if _first(name) != name else name
        for host, name in names.items()
    }
    return _if_apart(labels, names, fits)


def _without_shared(names: Mapping[str, str], fits: Fits) -> dict[str, str] | None:
    """The names without the start and end they all share, keeping as much of the start as
    fits: the same cut for every host, at a separator."""
    if len(names) < 2:
        return None
    bases = _bases(names)
    cuts, end = _shared(list(bases.values()))
    for cut in cuts:  # the longest labels first
        labels = {host: _cut(base, cut, end) for host, base in bases.items()}
        if labels != dict(names) and (found := _if_apart(labels, names, fits)) is not None:
            return found
    return None


def _abbreviated(names: Mapping[str, str], fits: Fits, balanced: bool) -> dict[str, str] | None:
    """Each name (without what all share) cut around an ellipsis, as long as fits, keeping
    its end where that tells it apart, else its start and end."""
    bases = _bases(names)
    cuts, end = _shared(list(bases.values())) if len(names) > 1 else ([0], 0)
    start = cuts[-1]
    labels = {}
    for host, base in bases.items():
        others = [name for other, name in names.items() if other != host]
        found = _longest_unmistaken(host, base, start, end, others, fits, balanced)
        if found is None:
            return None
        labels[host] = found
    return _if_apart(labels, names, fits)


def _longest_unmistaken(
    host: str,
    base: str,
    start: int,
    end: int,
    others: Sequence[str],
    fits: Fits,
    balanced: bool,
) -> str | None:
    """The longest shortening of `base` (its start and end cut off as `_cut` does) that no
    other name could be read as and that fits: of each length, its end alone first (half
    its start and half its end, `balanced`), then with more of its start. One measure per
    length (a shorter one fits where this does not)."""
    core = base[start : len(base) - end]
    for keep in range(len(core), 0, -1):
        heads = list(range(keep + 1))
        if balanced:
            heads.sort(key=lambda head: abs(2 * head - keep))
        for head in [0] if keep == len(core) else heads:
            tail = core[len(core) - (keep - head) :] if keep > head else ""
            middle = core if keep == len(core) else core[:head] + ELLIPSIS + tail
            label = _marked(middle, start, end)
            if any(_reads_as(label, other) for other in others):
                continue
            if fits(host, label):
                return label
            break
    return None


def _bases(names: Mapping[str, str]) -> dict[str, str]:
    """The names without their domain where that leaves them apart, else whole."""
    firsts = {host: _first(name) for host, name in names.items()}
    return firsts if len(set(firsts.values())) == len(firsts) else dict(names)


def _first(name: str) -> str:
    return name.split(".", 1)[0] or name


def _shared(bases: Sequence[str]) -> tuple[list[int], int]:
    """Where the names may be cut at their start (0 first: nothing cut; each a place after a
    separator within the start all share), and how much of their end all share (from a
    separator on). Every name keeps at least one character between the two."""
    shortest = min(len(base) for base in bases)
    start = os.path.commonprefix(list(bases))
    end = os.path.commonprefix([base[::-1] for base in bases])[::-1]
    end_at = next((i for i, char in enumerate(end) if char in SEPARATORS), None)
    end_len = len(end) - end_at if end_at is not None else 0
    cuts = [0] + [i + 1 for i, char in enumerate(start) if char in SEPARATORS]
    cuts = [cut for cut in cuts if cut + end_len < shortest]
    return cuts, end_len


def _cut(base: str, start: int, end: int) -> str:
    return _marked(base[start : len(base) - end], start, end)


def _marked(middle: str, start: int, end: int) -> str:
    """`middle` with an ellipsis for what was cut before and after it (never two in a row)."""
    label = (ELLIPSIS if start else "") + middle + (ELLIPSIS if end else "")
    return label.replace(ELLIPSIS * 2, ELLIPSIS)


def _if_apart(
    labels: dict[str, str], names: Mapping[str, str], fits: Fits
) -> dict[str, str] | None:
    """`labels` when every one fits and none could be read as another host, else None."""
    if len(set(labels.values())) < len(labels):
        return None
    for host, label in labels.items():
        if not fits(host, label):
            return None
        if any(_reads_as(label, name) for other, name in names.items() if other != host):
            return None
    return labels


def _reads_as(label: str, name: str) -> bool:
    """Whether `label` could be read as `name`, whole or without its domain: each ellipsis
    standing for one or more characters left out."""
    if ELLIPSIS not in label:
        return label in (name, _first(name))
    pattern = ".+".join(re.escape(part) for part in label.split(ELLIPSIS))
    return any(
        re.fullmatch(pattern, whole, flags=re.DOTALL) is not None for whole in (name, _first(name))
    )
