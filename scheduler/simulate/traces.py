"""Trace readers: Microsoft Philly (Pollux's flat table), Alibaba openb 2023, and plain CSV.

Every reader returns a `Trace`: its jobs sorted by submit time (seconds from the first
submit), the cluster the trace describes, the GPU catalog for its types, and a count of the
rows it dropped and why.

Formats
-------
philly
    `philly_jobs_pollux.csv` (`timestamp,duration,num_gpus,gpu_time,cluster`; not sorted).
    The queue is the virtual cluster (VC, column `cluster`). The cluster comes from
    `philly_vc_nodes.csv` next to the trace: per VC, its node count × 8 GPUs, one GPU type.
    Without `--nodes` the pooled cluster is all VCs' nodes together; per-VC mode gives every VC
    its own cluster (jobs of VCs missing from the node file are dropped there and counted).
openb
    `openb_pod_list_*.csv` with `openb_node_list_gpu_node.csv` from the same folder (typed
    nodes; the `model` column is the GPU type). Rules:

    - pods with `num_gpu` 0 are skipped (CPU-only);
    - a fractional GPU (`gpu_milli` < 1000) counts as one whole GPU unless the replay shares
      cards (`--sharing memory`, see shares.py): the job keeps its `gpu_milli` either way;
    - `gpu_spec` "A|B" → the job may run on type A or B; empty → any type;
    - duration = `deletion_time` − `scheduled_time`; pods never scheduled are dropped;
    - `qos` BE → priority class `idle`; LS, Guaranteed and Burstable → `normal`. They are left
      unset here (None) so that the `--core-share` draw can make some of them `core`; the trace
      never says `core` itself.
csv
    Header row with `submit_time,duration,gpus` (seconds, seconds, count) and optional
    `queue,gpu_type,priority,user,est_hours,gpu_milli` columns. `gpu_type` may list
    alternatives as "A|B"; `priority` is core, normal or idle; `est_hours` is the user's
    estimate in GPU-hours (GPUs × wall-clock hours, as in `/gpu submit hours=`); `gpu_milli`
    is the part of one card a one-GPU job asks for, in thousandths (below 1000: a fraction, as
    in openb). There is no node list: give the cluster with `--nodes N --gpus-per-node G
    [--gpu-type T]`.

`--nodes N --gpus-per-node G [--gpu-type T]` replaces the trace's cluster for any format and
pools all queues into that one cluster.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from scheduler.policy.matching import CardType
from scheduler.policy.priority_classes import CLASS_NAMES

FORMATS = ("philly", "openb", "csv")
DEFAULT_GPU_TYPE = "V100-16GB"
PHILLY_GPUS_PER_NODE = 8
PHILLY_NODE_FILE = "philly_vc_nodes.csv"
OPENB_NODE_FILE = "openb_node_list_gpu_node.csv"

# The openb catalog. Alibaba does not publish memory, speed or price for its cards, and G1–G3
# are undisclosed internal codes, so everything below is ASSUMED, chosen to be plausible:
# speed is relative to a V100 (1.0), the price ladder is T4 < P100 < A10 < V100M16 < V100M32
# < G1 < G2 < G3, and G1–G3 are taken to be successive data-centre generations
# (A100-40GB-like, A100-80GB-like, H800-like).
OPENB_CATALOG: tuple[CardType, ...] = (
    CardType("T4", memory_gib=16, speed=0.35, price_per_gpu_hour=0.35),
    CardType("P100", memory_gib=16, speed=0.6, price_per_gpu_hour=0.50),
    CardType("A10", memory_gib=24, speed=0.8, price_per_gpu_hour=0.75),
    CardType("V100M16", memory_gib=16, speed=1.0, price_per_gpu_hour=1.00),
    CardType("V100M32", memory_gib=32, speed=1.0, price_per_gpu_hour=1.20),
    CardType("G1", memory_gib=40, speed=1.6, price_per_gpu_hour=1.60),
    CardType("G2", memory_gib=80, speed=1.8, price_per_gpu_hour=2.20),
    CardType("G3", memory_gib=80, speed=3.0, price_per_gpu_hour=4.50),
)


class TraceError(ValueError):
    """The trace file is missing, unreadable or not in the stated format."""


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of a trace, times in seconds from the trace's first submit."""

    id: int
    submit: float
    duration: float
    gpus: int
    queue: str
    gpu_types: tuple[str, ...] | None = None  # None: any type
    priority: str | None = None  # None: the trace does not say
    user: str | None = None
    est_hours: float | None = None  # the user's estimate, GPU-hours
    # The part of one card a one-GPU job asks for, in thousandths (below 1000: a fraction);
    # None: the trace does not say (it holds whole cards).
    gpu_milli: int | None = None


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """`count` nodes of `gpus_per_node` GPUs of one type, in host order."""

    count: int
    gpus_per_node: int
    gpu_type: str


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """A cluster as node groups, in host order (first fit walks hosts in this order)."""

    groups: tuple[NodeGroup, ...]

    @property
    def gpus(self) -> int:
        return sum(group.count * group.gpus_per_node for group in self.groups)

    @property
    def nodes(self) -> int:
        return sum(group.count for group in self.groups)

    def gpus_by_type(self) -> dict[str, int]:
        totals: Counter[str] = Counter()
        for group in self.groups:
            totals[group.gpu_type] += group.count * group.gpus_per_node
        return dict(totals)

    @classmethod
    def uniform(cls, nodes: int, gpus_per_node: int, gpu_type: str) -> ClusterSpec:
        return cls((NodeGroup(nodes, gpus_per_node, gpu_type),))


@dataclass
class Trace:
    """A trace read from disk."""

    format: str
    path: Path
    jobs: list[TraceJob]
    catalog: tuple[CardType, ...]
    cluster: ClusterSpec | None  # the pooled cluster, or None where the trace has none
    queue_clusters: dict[str, ClusterSpec] = field(default_factory=dict)  # per queue (VC)
    dropped: dict[str, int] = field(default_factory=dict)  # reason → rows dropped

    def limited(self, limit: int | None) -> Trace:
        """The first `limit` jobs by submit time (all of them when None)."""
        if limit is None or limit >= len(self.jobs):
            return self
        return Trace(
            self.format,
            self.path,
            self.jobs[:limit],
            self.catalog,
            self.cluster,
            self.queue_clusters,
            dict(self.dropped),
        )

    def with_cluster(self, cluster: ClusterSpec, catalog: tuple[CardType, ...]) -> Trace:
        """The same jobs on another (pooled) cluster."""
        return Trace(self.format, self.path, self.jobs, catalog, cluster, {}, dict(self.dropped))


def single_type_catalog(gpu_type: str | None) -> tuple[CardType, ...]:
    """The catalog of a one-type cluster: a reference card (16 GiB, speed 1, price 1.0).

    A name from the openb table keeps that table's figures.
    """
    name = gpu_type or DEFAULT_GPU_TYPE
    for card in OPENB_CATALOG:
        if card.name == name:
            return (card,)
    return (CardType(name, memory_gib=16, speed=1.0, price_per_gpu_hour=1.0),)


def read_trace(path: Path, fmt: str) -> Trace:
    """Read a trace of format `fmt` (philly, openb or csv)."""
    if fmt not in FORMATS:
        raise TraceError(f"unknown trace format {fmt!r} (known: {', '.join(FORMATS)})")
    if not path.is_file():
        raise TraceError(f"trace file not found: {path}")
    if fmt == "philly":
        return read_philly(path)
    if fmt == "openb":
        return read_openb(path)
    return read_csv(path)


def _rows(path: Path, required: Iterable[str]) -> Iterator[tuple[int, dict[str, str]]]:
    """The rows of a CSV file as dicts, checking the header has the `required` columns."""
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise TraceError(f"cannot read {path}: {exc}") from exc
    with handle:
        reader = csv.DictReader(handle)
        header = [name.strip() for name in reader.fieldnames or []]
        missing = [name for name in required if name not in header]
        if missing:
            raise TraceError(
                f"{path.name}: missing column(s) {', '.join(missing)} (header: {','.join(header)})"
            )
        reader.fieldnames = header
        for line, row in enumerate(reader, start=2):
            yield line, {key: (value or "").strip() for key, value in row.items() if key}


def _number(path: Path, line: int, column: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise TraceError(f"{path.name}:{line}: {column} is not a number: {text!r}") from None


def _types(text: str) -> tuple[str, ...] | None:
    """ "A|B" → ("A", "B"), without repeats; empty → None (any type)."""
    names = [name.strip() for name in text.split("|") if name.strip()]
    return tuple(dict.fromkeys(names)) or None


def _milli(path: Path, line: int, text: str, gpus: int) -> int | None:
    """A one-GPU job's `gpu_milli` when it asks for a fraction of the card (1-999), else None."""
    if not text or gpus != 1:
        return None
    milli = int(_number(path, line, "gpu_milli", text))
    if milli < 0:
        raise TraceError(f"{path.name}:{line}: gpu_milli must not be negative: {text!r}")
    return milli if 0 < milli < 1000 else None


def _sorted(raw: list[TraceJob]) -> list[TraceJob]:
    """Jobs sorted by submit time, rebased so the first submit is 0, ids 1..n in that order."""
    raw.sort(key=lambda job: (job.submit, job.id))
    origin = raw[0].submit if raw else 0.0
    return [
        TraceJob(
            number,
            job.submit - origin,
            job.duration,
            job.gpus,
            job.queue,
            job.gpu_types,
            job.priority,
            job.user,
            job.est_hours,
            job.gpu_milli,
        )
        for number, job in enumerate(raw, start=1)
    ]


def read_philly(path: Path) -> Trace:
    """Pollux's flat Philly table, with the VC node counts from the file next to it."""
    raw: list[TraceJob] = []
    dropped: Counter[str] = Counter()
    for line, row in _rows(path, ("timestamp", "duration", "num_gpus", "cluster")):
        try:
            stamp = datetime.fromisoformat(row["timestamp"])
            submit = stamp.replace(tzinfo=stamp.tzinfo or UTC).timestamp()
        except ValueError:
            raise TraceError(f"{path.name}:{line}: bad timestamp {row['timestamp']!r}") from None
        duration = _number(path, line, "duration", row["duration"])
        gpus = int(_number(path, line, "num_gpus", row["num_gpus"]))
        if duration <= 0 or gpus <= 0:
            dropped["no_duration_or_gpus"] += 1
            continue
        raw.append(TraceJob(line, submit, duration, gpus, row["cluster"]))
    nodes_file = path.with_name(PHILLY_NODE_FILE)
    queue_clusters = read_philly_vcs(nodes_file) if nodes_file.is_file() else {}
    pooled = (
        ClusterSpec(tuple(group for spec in queue_clusters.values() for group in spec.groups))
        if queue_clusters
        else None
    )
    return Trace(
        "philly",
        path,
        _sorted(raw),
        single_type_catalog(None),
        pooled,
        queue_clusters,
        dict(dropped),
    )


def read_philly_vcs(path: Path, gpu_type: str = DEFAULT_GPU_TYPE) -> dict[str, ClusterSpec]:
    """`vc,node num` → a cluster of node count × 8 GPUs per VC."""
    clusters: dict[str, ClusterSpec] = {}
    for line, row in _rows(path, ("vc", "node num")):
        nodes = int(_number(path, line, "node num", row["node num"]))
        if nodes > 0:
            clusters[row["vc"]] = ClusterSpec.uniform(nodes, PHILLY_GPUS_PER_NODE, gpu_type)
    return clusters


def read_openb(path: Path) -> Trace:
    """An openb pod list with the typed GPU nodes from the same folder."""
    raw: list[TraceJob] = []
    dropped: Counter[str] = Counter()
    columns = ("num_gpu", "gpu_milli", "gpu_spec", "qos", "creation_time", "deletion_time")
    for line, row in _rows(path, (*columns, "scheduled_time")):
        gpus = int(_number(path, line, "num_gpu", row["num_gpu"] or "0"))
        if gpus <= 0:
            dropped["cpu_only"] += 1
            continue
        if not row["scheduled_time"]:
            dropped["never_scheduled"] += 1
            continue
        scheduled = _number(path, line, "scheduled_time", row["scheduled_time"])
        duration = _number(path, line, "deletion_time", row["deletion_time"]) - scheduled
        if duration <= 0:
            dropped["no_duration"] += 1
            continue
        submit = _number(path, line, "creation_time", row["creation_time"])
        priority = "idle" if row["qos"] == "BE" else None
        milli = _milli(path, line, row["gpu_milli"], gpus)
        raw.append(
            TraceJob(
                line,
                submit,
                duration,
                gpus,
                "openb",
                _types(row["gpu_spec"]),
                priority,
                gpu_milli=milli,
            )
        )
    nodes_file = path.with_name(OPENB_NODE_FILE)
    cluster = read_openb_nodes(nodes_file) if nodes_file.is_file() else None
    present = set(cluster.gpus_by_type()) if cluster else {card.name for card in OPENB_CATALOG}
    catalog = tuple(card for card in OPENB_CATALOG if card.name in present)
    unknown = present - {card.name for card in OPENB_CATALOG}
    if unknown:
        raise TraceError(f"{nodes_file.name}: GPU model(s) not in the openb catalog: {unknown}")
    return Trace("openb", path, _sorted(raw), catalog, cluster, {}, dict(dropped))


def read_openb_nodes(path: Path) -> ClusterSpec:
    """`sn,cpu_milli,memory_mib,gpu,model`: runs of like nodes, in file order."""
    groups: list[NodeGroup] = []
    for line, row in _rows(path, ("gpu", "model")):
        gpus = int(_number(path, line, "gpu", row["gpu"] or "0"))
        if gpus <= 0 or not row["model"]:
            continue
        last = groups[-1] if groups else None
        if last and last.gpus_per_node == gpus and last.gpu_type == row["model"]:
            groups[-1] = NodeGroup(last.count + 1, gpus, row["model"])
        else:
            groups.append(NodeGroup(1, gpus, row["model"]))
    if not groups:
        raise TraceError(f"{path.name}: no GPU nodes")
    return ClusterSpec(tuple(groups))


def read_csv(path: Path) -> Trace:
    """`submit_time,duration,gpus[,queue,gpu_type,priority,user,est_hours]`."""
    raw: list[TraceJob] = []
    dropped: Counter[str] = Counter()
    for line, row in _rows(path, ("submit_time", "duration", "gpus")):
        submit = _number(path, line, "submit_time", row["submit_time"])
        duration = _number(path, line, "duration", row["duration"])
        gpus = int(_number(path, line, "gpus", row["gpus"]))
        if duration <= 0 or gpus <= 0:
            dropped["no_duration_or_gpus"] += 1
            continue
        priority = row.get("priority", "").lower() or None
        if priority is not None and priority not in CLASS_NAMES:
            raise TraceError(f"{path.name}:{line}: priority must be core, normal or idle")
        est = row.get("est_hours", "")
        milli = _milli(path, line, row.get("gpu_milli", ""), gpus)
        raw.append(
            TraceJob(
                line,
                submit,
                duration,
                gpus,
                row.get("queue", "") or "default",
                _types(row.get("gpu_type", "")),
                priority,
                row.get("user", "") or None,
                _number(path, line, "est_hours", est) if est else None,
                milli,
            )
        )
    return Trace("csv", path, _sorted(raw), single_type_catalog(None), None, {}, dict(dropped))
