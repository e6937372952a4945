"""The policy file: GPU catalog, teams, priority classes and the scheduler's knobs.

Loaded once at start; a bad file fails there, naming the file, the key and what is wrong.
"""

from __future__ import annotations

import fnmatch
import math
import re
import string
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializeAsAny,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from scheduler.agent.errors import BadRequest
from scheduler.agent.protocol import IMAGE_RE, ContainerOptions, is_account_name
from scheduler.errors import ConfigError
from scheduler.grammar import names
from scheduler.policy.matching import CardType
from scheduler.policy.priority_classes import PriorityClass
from scheduler.policy.snapshot import Backfill, Knobs, WithinClass

# libyaml's parser when PyYAML was built with it: the same documents, read ten times faster
# (a policy file or the catalogue is read at every command's start).
SAFE_LOADER: type[yaml.SafeLoader | yaml.CSafeLoader] = getattr(
    yaml, "CSafeLoader", yaml.SafeLoader
)

NamePattern = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]


_UNFIT = {
    names.Unfit.CONTROL: "a control character",
    names.Unfit.FORMAT: "an invisible formatting character (a bidi override, a zero-width space)",
    names.Unfit.PRIVATE_USE: "a private-use character",
    names.Unfit.UNASSIGNED: "a code point Unicode has not assigned",
    names.Unfit.SPACE: "a space",
    names.Unfit.SYMBOL: "a symbol other than . _ -",
    names.Unfit.FIRST: "a name starts with a letter or digit",
}


def _team_name(name: str) -> str:
    """A team's name as /gpu admin team add takes it: any script, NFC, at most 64."""
    if (bad := names.bad_char(name)) is not None:
        raise ValueError(
            f"{name!r}: {bad.code} (character {bad.at}) may not be in a team name: "
            f"{_UNFIT[bad.why]}; use letters and digits of any language, . _ -"
        )
    kept = names.normal(name)
    if len(kept) > 64:
        raise ValueError(f"{name!r} is {len(kept)} characters long; a team name has at most 64")
    return kept


TeamName = Annotated[str, AfterValidator(_team_name)]
SlackUserId = Annotated[str, Field(pattern=r"^[UW][A-Z0-9]{2,}$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GpuType(_Strict):
    """One card type of the catalog."""

    memory_gib: float = Field(gt=0, le=4096)
    # Names NVML reports for this type (e.g. "NVIDIA A100-SXM4-80GB"); when empty, a card
    # matches if every part of the type's name (split at '-') appears in its NVML name.
    nvml_names: tuple[str, ...] = ()
    speed: float = Field(default=1.0, gt=0, le=100, description="relative to the reference card")
    price_per_gpu_hour: float = Field(ge=0, le=10_000)


class Team(_Strict):
    """A team; `channel` is where its notices go."""

    channel: str | None = None


class PriorityClassPolicy(_Strict):
    """Per class: must a member get an approver's yes to use it?"""

    approval_required: bool = False


class Limits(_Strict):
    """Upper bounds on one job, checked at submit."""

    max_gpus_per_job: int = Field(default=64, ge=1, le=1024)
    max_hours_per_job: float = Field(default=10_000, gt=0)


class Ordering(_Strict):
    """How jobs are ordered within one priority class."""

    within_class: Literal["shortest_first", "submit_order"] = "shortest_first"
    # Scale-free (the defaults): in units of the queue's drain time, the time the cluster's
    # GPUs need to work off the jobs ready and waiting; the backstop counts each GPU from when
    # it frees (policy/ranking.py). null: the absolute aging_hours / no drain-time backstop.
    aging_drains: float | None = Field(default=0.25, gt=0)
    starve_after_drains: float | None = Field(default=6, gt=0)
    aging_hours: float = Field(default=24, gt=0, description="wait after which aging doubles")
    # None (the default): aging never stops, so every wait is bounded (see policy/ranking.py).
    max_aging_factor: float | None = Field(default=None, ge=1)
    # An absolute backstop besides the drain-time one (whichever comes first); None: none.
    starve_after_hours: float | None = Field(default=None, gt=0)
    fair_share_weight: float = Field(default=0.5, ge=0, le=10)
    fair_share_half_life_hours: float = Field(default=72, gt=0)


class Matching(_Strict):
    """When a job may be put on a costlier card than the cheapest adequate one."""

    # A share of the job's own run time (None: the minutes alone), at most the minutes.
    costlier_after_runs: float | None = Field(default=0.25, ge=0)
    costlier_after_minutes: float = Field(default=60, ge=0)


class Admission(_Strict):
    """What to do with non-core submissions when the backlog is deep."""

    max_backlog_hours: float = Field(default=48, gt=0)
    action: Literal["warn", "defer"] = "warn"


class Preemption(_Strict):
    """Which running jobs paika may stop and requeue for other work, and how.

    Idle-class jobs blocking core work get `idle_grace_minutes` to checkpoint. Jobs that
    declared they checkpoint and resume (`preemptible=yes`) may be stopped (`preemptible`
    on): for a core job, or for much shorter work (`shorter_factor`; null: only core work
    preempts), never more than `max_per_job` times, never within `min_run_minutes` of their
    last start; each gets its own grace, else `default_grace_minutes`. `checkpoint_root`: a
    path every host shares; a preemptible job without `checkpoint=` keeps its checkpoint in
    `<root>/job-<id>` (null: in a folder its host's agent provides).
    """

    idle_grace_minutes: float = Field(default=10, ge=0)
    preemptible: bool = True
    max_per_job: int = Field(default=3, ge=0, le=100)
    min_run_minutes: float = Field(default=30, ge=0, le=7 * 24 * 60)
    shorter_factor: float | None = Field(default=8, ge=1, le=1000)
    default_grace_minutes: float = Field(default=5, ge=0.5, le=120)
    checkpoint_root: str | None = Field(default=None, min_length=1, max_length=400)

    @field_validator("checkpoint_root")
    @classmethod
    def _absolute_root(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError(f"{value!r} is not an absolute path (a folder every host shares)")
        return value

    def checkpoint_of(self, job_id: int, given: str | None) -> str | None:
        """Where a preemptible job keeps its checkpoint: what it gave, else the shared
        root's folder for it; None: its host's agent provides a folder."""
        if given:
            return given
        if self.checkpoint_root is None:
            return None
        return f"{self.checkpoint_root.rstrip('/')}/job-{job_id}"

    def grace_of(self, own: float | None) -> float:
        """A preemptible job's grace in seconds: its own, else the policy's default."""
        return own if own is not None else self.default_grace_minutes * 60


def _default_classes() -> dict[PriorityClass, PriorityClassPolicy]:
    return {
        PriorityClass.CORE: PriorityClassPolicy(approval_required=True),
        PriorityClass.NORMAL: PriorityClassPolicy(),
        PriorityClass.IDLE: PriorityClassPolicy(),
    }


class Hosts(_Strict):
    """How GPU hosts are polled, when they count as down, and what an outage does to jobs.

    A host that stops answering does not end its jobs: after `unknown_after_seconds` they
    are shown as unknown (their GPUs stay held, the owner is told); when the agent answers
    again paika takes its word. Only after `give_up_after_hours` is such a job requeued as a
    new attempt (failed once it has been started `max_attempts` times).
    """

    poll_timeout_seconds: float = Field(default=3, gt=0, le=60)
    down_after_failed_polls: int = Field(default=3, ge=1, le=100)
    unknown_after_seconds: float = Field(default=120, ge=0, le=86_400)
    give_up_after_hours: float = Field(default=24, gt=0, le=24 * 90)
    max_attempts: int = Field(default=3, ge=1, le=100)
    sample_retention_hours: float = Field(default=48, gt=0)
    sample_seconds: float = Field(default=60, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _renamed_keys(cls, data: Any) -> Any:
        # `lost_after_seconds` (before jobs had an unknown state) means the same wait.
        if isinstance(data, dict) and "lost_after_seconds" in data:
            data = dict(data)
            data.setdefault("unknown_after_seconds", data.pop("lost_after_seconds"))
        return data


SharingMode = Literal["mps", "advisory"]
EVERY_HOST = "*"


class Sharing(_Strict):
    """Which hosts let jobs that ask for it (`share=yes`) share a card, and on what terms.

    `hosts`: a host's name (or "*" for every host) → how its agent keeps the jobs on one card
    apart: `mps` (NVIDIA's Multi-Process Service, run by the agent for shared cards only: each
    job's memory limit and share of the card's SMs are enforced by the driver; MPS serves one
    Unix account at a time, so only jobs of one account share an MPS card) or `advisory`
    (each job is told its memory, PAIKA_GPU_MEMORY_MIB, for its framework to cap itself). A
    host not named shares no card.
    `reserve_gib`: memory kept free on a shared card beyond what its jobs declared;
    `max_slowdown`: the most slowdown a share may cost the slower job (the co-location rule's
    estimate); `max_jobs_per_card`: how many jobs one card takes at most.
    `feedback_minutes`: how long a job on a shared card may run slowed beside another (its SM
    busy % below (1 - `max_slowdown`) of what its earlier runs showed alone) before the
    opportunistic one of the two is stopped and queued again, and the pair kept apart.
    """

    hosts: dict[str, SharingMode] = Field(default_factory=dict)
    reserve_gib: float = Field(default=2, ge=0, le=256)
    max_slowdown: float = Field(default=0.15, gt=0, le=1)
    max_jobs_per_card: int = Field(default=2, ge=2, le=16)
    feedback_minutes: float = Field(default=5, gt=0, le=1440)

    @field_validator("hosts")
    @classmethod
    def _host_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if name != EVERY_HOST and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", name):
                raise ValueError(f"{name!r} is not a host name (or {EVERY_HOST!r} for every host)")
        return value

    def mode_of(self, host: str) -> str:
        """How `host` keeps jobs on one card apart; "" when it shares no card."""
        return self.hosts.get(host) or self.hosts.get(EVERY_HOST) or ""


class SchedulerKnobs(_Strict):
    """The scheduler's tunables."""

    cycle_seconds: float = Field(default=10, gt=0, le=3600)
    hosts: Hosts = Hosts()
    ordering: Ordering = Ordering()
    backfill: Literal["easy", "greedy", "none"] = "easy"
    matching: Matching = Matching()
    # Per GPU type: whole GPUs (>= 1) or a share of the type's GPUs (< 1) kept for core work.
    headroom: dict[str, float] = Field(default_factory=dict)
    admission: Admission = Admission()
    preemption: Preemption = Preemption()


class Slack(_Strict):
    """Where the Slack bot posts, and the language it speaks to users who chose none."""

    # Channel (id like C0123ABCD, or #name) that gets bump requests with Approve/Deny buttons;
    # when unset, a request goes to its team's channel, else to each approver by DM.
    approvals_channel: str | None = None
    default_language: Literal["en", "zh"] = "en"
    # Channel for the daily digest, host alerts and quota warnings; None: none are posted.
    channel: str | None = None


class Digest(_Strict):
    """The daily readiness board posted to the channel."""

    enabled: bool = True
    time: str = Field(default="09:30", pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")  # policy zone
    # Missed while paika was down: still posted if it is this late or less, else skipped.
    late_minutes: float = Field(default=180, ge=0)


class Alerts(_Strict):
    """When quota owners are warned: days before expiry, and shares of the hours used."""

    quota_days_before: tuple[int, ...] = (14, 7, 3, 1)
    quota_used_pct: tuple[float, ...] = (80, 90, 100)

    @field_validator("quota_days_before", "quota_used_pct")
    @classmethod
    def _positive(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if any(v <= 0 for v in value):
            raise ValueError("every threshold must be greater than 0")
        return tuple(sorted(set(value)))


ReclaimAction = Literal["release", "requeue", "keep"]


def _default_reclaim() -> dict[PriorityClass, ReclaimAction]:
    return {
        PriorityClass.CORE: "requeue",
        PriorityClass.NORMAL: "requeue",
        PriorityClass.IDLE: "release",
    }


class Reclaim(_Strict):
    """GPUs held by a running job but idle: ask the owner, then act."""

    enabled: bool = True
    # A held GPU below this utilization is idle (the board shows it as idle-but-held).
    idle_utilization_pct: float = Field(default=5, ge=0, le=100)
    idle_minutes: float = Field(default=60, gt=0)  # idle this long (every sample) → ask
    grace_minutes: float = Field(default=30, ge=0)  # no answer this long → act
    # release: stop the job and free its GPUs; requeue: stop it and queue it again; keep: only ask.
    action: dict[PriorityClass, ReclaimAction] = Field(default_factory=_default_reclaim)


class Estimates(_Strict):
    """What happens to a run that outlasts its estimate (wall time per GPU: GPU-hours ÷ GPUs).

    Past estimate × `overrun_factor` its owner is told once (and may extend or stop it);
    past estimate × `hard_limit[class]`, where the class has one, it is stopped.
    """

    overrun_factor: float | None = Field(default=1.5, gt=1, le=100)  # None: no notice
    hard_limit: dict[PriorityClass, float] = Field(default_factory=dict)

    @field_validator("hard_limit")
    @classmethod
    def _limits_above_one(cls, value: dict[str, float]) -> dict[str, float]:
        if any(factor <= 1 for factor in value.values()):
            raise ValueError("every hard limit is a factor of the estimate greater than 1")
        return value


class ContainerMount(_Strict):
    """A host directory bound into every container job (read-only unless said otherwise)."""

    source: str
    target: str
    read_only: bool = True


class Containers(_Strict):
    """What every container job (`image=`) gets on the hosts: the site's data mounts, IPC,
    shared memory and network. The hosts' agents check the same rules again."""

    mounts: tuple[ContainerMount, ...] = ()
    ipc: Literal["host"] | None = None
    shm_size: str | None = None
    network: Literal["host", "none"] | None = None

    def options(self) -> ContainerOptions:
        """The options as the agents take them; BadRequest naming the field if unsafe."""
        return ContainerOptions(**self.model_dump())


class Accounts(_Strict):
    """Which Unix account GPU hosts run each person's jobs as (`/gpu admin account` sets the
    same in the database, and wins). A person's own mapping wins over their team's."""

    # true: a job whose owner maps to no account is refused at submit, with what to do.
    required: bool = False
    users: dict[str, str] = Field(default_factory=dict)  # Slack user id -> account
    teams: dict[str, str] = Field(default_factory=dict)  # team name -> shared account

    @field_validator("users", "teams")
    @classmethod
    def _accounts_are_user_names(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [name for name in value.values() if not is_account_name(name)]
        if bad:
            raise ValueError(
                f"not a Unix user name: {', '.join(map(repr, bad))} (letters, digits, . _ -; "
                "at most 32 characters, not starting with - and not all digits)"
            )
        return value


class Archive(_Strict):
    """What the object store keeps for good of the jobs' commands (job specs, template
    versions, the queue's snapshots): `masked` (what looks like a secret replaced by
    `***`), `full` (as submitted) or `none` (no command). The database keeps each command
    as submitted: that is what runs."""

    commands: Literal["masked", "full", "none"] = "masked"


LOG_FIELDS = frozenset({"job_id", "attempt", "name", "account"})
# The sbatch options paika sets itself on a Slurm pool's runs (without their leading "--";
# scheduler/slurm/batch.py writes exactly these): a pool's container options may not name
# one, nor an abbreviation of one (sbatch takes a unique prefix).
SBATCH_OWN_OPTIONS = frozenset(
    {"parsable", "export", "no-requeue", "partition", "nodelist", "nodes", "gres", "time",
     "job-name", "comment", "output", "uid", "gid", "chdir"}
)  # fmt: skip
# sbatch options that change what or whether paika's run runs: never a container option.
_NOT_CONTAINER_OPTIONS = SBATCH_OWN_OPTIONS | {"wrap", "hold", "array", "requeue", "export-file"}
_SBATCH_OPTION = re.compile(r"--([A-Za-z][A-Za-z0-9-]{0,63})")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# A container value's fields: the image as submitted, or in enroot's form (pyxis).
IMAGE_FIELDS = frozenset({"image", "enroot_image"})


def _sbatch_option(name: str) -> str:
    """`name` if it is an sbatch long option paika leaves to the site; ValueError if not."""
    match = _SBATCH_OPTION.fullmatch(name)
    if match is None:
        raise ValueError(f"{name!r} is not an sbatch long option (--name)")
    taken = sorted(own for own in _NOT_CONTAINER_OPTIONS if own.startswith(match[1]))
    if taken:
        raise ValueError(f"{name!r} would set sbatch's --{taken[0]}, which paika sets itself")
    return name


class SlurmContainer(_Strict):
    """How the site's Slurm runs a job's container image: the sbatch option that takes it
    (pyxis's --container-image, or Slurm's own --container with an OCI bundle's path), its
    value made from the image (`{image}`, or `{enroot_image}` for pyxis), and any further
    options the site's way wants (e.g. pyxis's --container-mounts=…). sbatch gets them as
    arguments: no shell reads them."""

    option: str
    value: str = Field(default="{image}", max_length=400)
    options: tuple[str, ...] = Field(default=(), max_length=16)  # each --name or --name=value

    @field_validator("option")
    @classmethod
    def _option_is_sbatchs(cls, value: str) -> str:
        return _sbatch_option(value)

    @field_validator("value")
    @classmethod
    def _value_names_the_image(cls, value: str) -> str:
        try:
            fields = [(n, c, f) for _, n, f, c in string.Formatter().parse(value) if n is not None]
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a valid template: {exc}") from None
        for name, conversion, spec in fields:
            if name not in IMAGE_FIELDS or conversion or spec:
                raise ValueError(f"{value!r}: its fields are a plain {{image}} or {{enroot_image}}")
        if not fields:
            raise ValueError(f"{value!r} does not name the job's {{image}} (or {{enroot_image}})")
        if _CONTROL.search(value) or value.startswith("-"):
            raise ValueError(f"{value!r} starts with '-' or holds a control character")
        return value

    @field_validator("options")
    @classmethod
    def _options_are_the_sites(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for option in value:
            name, _, given = option.partition("=")
            _sbatch_option(name)
            if _CONTROL.search(given) or len(option) > 400:
                raise ValueError(f"{option!r}: a value of at most 400 characters, one line")
        return value

    @model_validator(mode="after")
    def _oci_bundles_are_paths(self) -> SlurmContainer:
        # Slurm's --container takes an OCI bundle's absolute path (sbatch(1)); sbatch itself
        # takes any text and the job would fail on the node.
        if self.option == "--container" and not self.value.startswith("/"):
            raise ValueError(f"--container takes an absolute bundle path: {self.value!r}")
        return self

    def arguments(self, image: str) -> tuple[str, ...]:
        """sbatch's arguments that run `image`; ValueError for an image it cannot take."""
        # The agents' own rule (what /gpu submit image= accepts), and no '..' step: the value
        # may make a path of it.
        if not IMAGE_RE.fullmatch(image) or ".." in image.split("/"):
            raise ValueError(f"{image!r} is not a container image reference")
        value = self.value.format(image=image, enroot_image=_enroot_form(image))
        return (f"{self.option}={value}", *self.options)


def _enroot_form(image: str) -> str:
    """An image reference as enroot (pyxis) reads it: a registry host ends with '#', not '/'
    (`nvcr.io/nvidia/pytorch:24.05-py3` is `nvcr.io#nvidia/pytorch:24.05-py3`). The first
    part names a registry as Docker decides it: it holds a '.' or ':', or is localhost."""
    first, slash, rest = image.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return f"{first}#{rest}"
    return image


# Bounds of a Slurm pool's pending_timeout_seconds.
PENDING_TIMEOUT = (60, 7 * 24 * 3600)


class PoolOptions(_Strict):
    """An executor's settings for one pool: the pool's section named after the executor."""

    def policy_problem(self, policy: PolicyConfig) -> tuple[str, str] | None:
        """What in these settings the rest of the policy contradicts (a GPU type it does not
        know…): (the key below the section, the problem); None when nothing."""
        return None

    def sharing_mode(self) -> str:
        """How the executor keeps share=yes jobs on one card apart on the pool's hosts ("":
        it shares no card). paika's own agents follow the policy's `sharing.hosts` instead."""
        return ""


# How many parts a Slurm pool's card is cut into (SlurmShares.per_gpu): 1 would be the whole
# card; Slurm's own examples use 100 for MPS (a percent each) and a few to 64 for shards.
SHARES_PER_GPU = (2, 1000)
SLURM_SHARE_MODES = ("shard", "mps")


class SlurmShares(_Strict):
    """How a Slurm pool's nodes let jobs share a card: through the site's own sharing GRES,
    which its gres.conf declares on each node, per card. `mode`: `shard` (Slurm's gres/shard:
    `Name=shard Count=<per_gpu>` for each GPU; nothing keeps the jobs apart but their own caps)
    or `mps` (Slurm's gres/mps: `Name=mps Count=<per_gpu>` for each GPU, usually 100; the
    site's MPS daemon limits each job's SMs). `per_gpu`: how many of them one card has, the
    units a share=yes job's part of the card is asked in. `typed`: whether gres.conf gives them
    the card's type (`Type=a100`, as a node with two card types needs, so that a share lands on
    the type paika chose); false: they are asked for untyped (`--gres=shard:<n>`)."""

    # Which sharing GRES: shard (Slurm's gres/shard: the jobs cap themselves) or mps (gres/mps).
    mode: Literal["shard", "mps"]
    # Shards (or MPS units) per card, as gres.conf's Count= for each card: from 2 to 1000.
    per_gpu: int
    # Whether gres.conf gives them the card's type (Type=a100); false: --gres=shard:<n>.
    typed: bool = True

    @field_validator("mode", mode="before")
    @classmethod
    def _known_mode(cls, value: object) -> object:
        if value not in SLURM_SHARE_MODES:
            raise ValueError(
                f"unknown mode {value!r}: shard (Slurm's gres/shard) or mps (Slurm's gres/mps)"
            )
        return value

    @field_validator("per_gpu", mode="before")
    @classmethod
    def _per_gpu_bounds(cls, value: object) -> object:
        low, high = SHARES_PER_GPU
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(
                f"{value!r} is out of bounds: a whole number of shards (or MPS units) per card"
                f" from {low} to {high}, as the nodes' gres.conf declares (Count=)"
            )
        return value


class SlurmPool(PoolOptions):
    """How a pool's jobs go to Slurm: its partition, each paika GPU type's GRES name there,
    the --time margin over the estimate and where each run's output goes; `shares`: how its
    nodes let share=yes jobs share a card (None: the pool shares none)."""

    partition: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")
    gres: dict[str, NamePattern] = Field(min_length=1)  # paika GPU type -> Slurm GPU type
    # --time: the run's estimated wall time (GPU-hours / GPUs) times this margin.
    time_margin: float = Field(default=1.5, ge=1, le=100)
    min_time_minutes: int = Field(default=10, ge=1, le=7 * 24 * 60)
    # {job_id}, {attempt}, {name} and {account} are paika's; Slurm's own %j, %u … stay.
    log_path: str = Field(min_length=2, max_length=400)
    job_name_prefix: str = Field(default="paika-", pattern=r"^[A-Za-z0-9._-]{1,32}$")
    workdir: str | None = Field(default=None, min_length=1, max_length=400)
    # How this cluster runs a job's container image (None: image jobs are refused here).
    container: SlurmContainer | None = None
    conf: str | None = Field(default=None, min_length=1, max_length=400)  # SLURM_CONF
    command_timeout_seconds: float = Field(default=30, gt=0, le=600)
    # A run Slurm still holds PENDING this long after its submission (another job took its
    # cards, a reservation holds its node) is cancelled and queued again as a new attempt.
    pending_timeout_seconds: int = 600
    # Where the cards' utilization comes from: Slurm reports none. "agents": each node's
    # paika agent, run report-only there (`paika agent --report-only`), at the URL the host
    # was added with; "none": no utilization (idle reclaim and the board's idle cards then
    # have nothing to go by on this pool).
    utilization: Literal["none", "agents"] = "none"
    # How the nodes let share=yes jobs share a card, through the site's shards or MPS (None:
    # the pool shares none).
    shares: SlurmShares | None = None

    def sharing_mode(self) -> str:
        """Through the site's own sharing GRES, when the pool declares them: "slurm-shard"
        or "slurm-mps" (not the agents' "mps": Slurm and the site's daemon keep the jobs
        apart, not paika's agent; the policy only asks whether a host shares)."""
        return "" if self.shares is None else f"slurm-{self.shares.mode}"

    def policy_problem(self, policy: PolicyConfig) -> tuple[str, str] | None:
        for gpu_type in self.gres:
            if gpu_type not in policy.gpu_types:
                known = ", ".join(policy.gpu_types)
                return f"gres.{gpu_type}", f"unknown GPU type {gpu_type!r} (known: {known})"
        return None

    @field_validator("pending_timeout_seconds")
    @classmethod
    def _pending_bounds(cls, value: int) -> int:
        if not PENDING_TIMEOUT[0] <= value <= PENDING_TIMEOUT[1]:
            low, high = PENDING_TIMEOUT
            raise ValueError(
                f"{value} s is out of bounds: from {low} s (Slurm needs a moment to start a run)"
                f" to {high} s (7 days)"
            )
        return value

    @field_validator("log_path")
    @classmethod
    def _log_template(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"{value!r} is not an absolute path")
        try:
            names = {name for _, name, _, _ in string.Formatter().parse(value) if name is not None}
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a valid template: {exc}") from None
        unknown = names - LOG_FIELDS
        if unknown:
            raise ValueError(
                f"unknown field {{{sorted(unknown)[0]}}} (known: {', '.join(sorted(LOG_FIELDS))})"
            )
        return value


# The executors' sections of a pool, by executor: a pool of `executor: slurm` has a `slurm:`
# section read by SlurmPool (None: the executor takes no settings). The built-in executors
# are named here so a policy file is checked without loading them; another executor adds
# its own section when it is registered (scheduler.executors.register).
POOL_SECTIONS: dict[str, type[PoolOptions] | None] = {"agents": None, "slurm": SlurmPool}


class Pool(_Strict):
    """A set of hosts and the executor that starts jobs on them: paika's own agents (the
    default), or a Slurm cluster (the hosts are its node names). The executor's settings
    are the pool's section named after it (`slurm:` for `executor: slurm`)."""

    # Each executor's section is read by its own model (POOL_SECTIONS; another executor
    # registered with scheduler.executors brings its own).

    executor: str = "agents"
    hosts: tuple[NamePattern, ...] = Field(min_length=1)
    # The executor's section, as its model read it (None: the executor takes no settings).
    options: SerializeAsAny[PoolOptions] | None = None

    @model_validator(mode="before")
    @classmethod
    def _executors_section(cls, data: Any) -> Any:
        """Read the section named after the executor with the executor's own model; any
        other key is a mistake said at its place (PoolSectionError's `at`)."""
        if not isinstance(data, dict):
            return data
        name = data.get("executor", "agents")
        if not isinstance(name, str) or name not in POOL_SECTIONS:
            raise _section_error("executor", f"unknown executor {name!r}: {_known_executors()}")
        model = POOL_SECTIONS[name]
        read: dict[str, Any] = {k: v for k, v in data.items() if k in ("executor", "hosts")}
        for key, section in data.items():
            if key in read:
                continue
            if key != name:
                if key in POOL_SECTIONS:
                    raise _section_error("", f"a {key}: section is only for executor: {key}")
                raise _section_error(key, _plain("", "extra_forbidden"), unknown=True)
            if model is None:
                raise _section_error(key, f"executor {name} takes no settings", unknown=True)
            try:
                read["options"] = model.model_validate(section)
            except ValidationError as exc:
                first = exc.errors()[0]
                at = ".".join([name, *(str(part) for part in first["loc"])])
                problem = _plain(first["msg"], first["type"])
                raise _section_error(
                    at, problem, unknown=first["type"] == "extra_forbidden"
                ) from None
        if model is not None and "options" not in read:
            needed = [n for n, field in model.model_fields.items() if field.is_required()]
            if not needed:  # every setting has its default: the section may be left out
                read["options"] = model()
            else:
                raise _section_error(
                    "", f"executor {name} needs a {name}: section ({', '.join(needed)})"
                )
        return read

    @model_serializer(mode="wrap")
    def _as_written(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Dumped as the policy file writes it: the section under the executor's name."""
        data: dict[str, Any] = handler(self)
        options = data.pop("options", None)
        if options is not None:
            data[self.executor] = options
        return data


def _section_error(at: str, problem: str, *, unknown: bool = False) -> PydanticCustomError:
    """A mistake in a pool, `at` its key below the pool's (policy_from_document joins them)."""
    where = f"{at}: " if at else ""
    return PydanticCustomError(
        "pool_section",
        "{where}{problem}",
        {"where": where, "at": at, "problem": problem, "unknown": unknown},
    )


def _known_executors() -> str:
    names = [repr(name) for name in POOL_SECTIONS]
    return (
        f"should be {' or '.join(names)}"
        if len(names) < 3
        else (f"should be {', '.join(names[:-1])} or {names[-1]}")
    )


class PolicyConfig(_Strict):
    """The whole policy file."""

    timezone: str = "Asia/Shanghai"
    gpu_types: dict[NamePattern, GpuType] = Field(min_length=1)
    teams: dict[TeamName, Team] = Field(default_factory=dict)
    admins: tuple[SlackUserId, ...] = ()
    priority_classes: dict[PriorityClass, PriorityClassPolicy] = Field(
        default_factory=_default_classes
    )
    limits: Limits = Limits()
    scheduler: SchedulerKnobs = SchedulerKnobs()
    slack: Slack = Slack()
    _card_types: dict[tuple[int, str, float], str | None] = PrivateAttr(default_factory=dict)
    digest: Digest = Digest()
    alerts: Alerts = Alerts()
    reclaim: Reclaim = Reclaim()
    estimates: Estimates = Estimates()
    containers: Containers = Containers()
    accounts: Accounts = Accounts()
    archive: Archive = Archive()
    pools: dict[NamePattern, Pool] = Field(default_factory=dict)
    sharing: Sharing = Sharing()

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r} (example: Asia/Shanghai, UTC)") from exc
        return value

    def sample_period_seconds(self) -> float:
        """Seconds between two kept samples of a GPU: the first cycle at least `sample_seconds`
        after the last sample, so the pace in whole cycles. The one formula: the cycle samples
        at this pace, and the board's idle marks, the digest's idle hours and picture, the
        ledger's idle hours and the idle alerts all read samples by it. (1e-9: 1.1 s ÷ 0.1 s
        is 11.000000000000002 in floating point, and 11 cycles, not 12.)"""
        knobs = self.scheduler
        cycles = math.ceil(knobs.hosts.sample_seconds / knobs.cycle_seconds - 1e-9)
        return max(1, cycles) * knobs.cycle_seconds

    @property
    def zone(self) -> ZoneInfo:
        """The time zone users read times in."""
        return ZoneInfo(self.timezone)

    @model_validator(mode="after")
    def _headroom_names_known_types(self) -> PolicyConfig:
        for name, amount in self.scheduler.headroom.items():
            if name not in self.gpu_types:
                known = ", ".join(self.gpu_types)
                raise ValueError(
                    f"scheduler.headroom.{name}|unknown GPU type {name!r} (known: {known})"
                )
            if amount < 0:
                raise ValueError(f"scheduler.headroom.{name}|must be 0 or more")
        return self

    @model_validator(mode="after")
    def _container_options_are_safe(self) -> PolicyConfig:
        try:
            self.containers.options()
        except BadRequest as exc:
            where, _, problem = exc.message.partition(": ")
            raise ValueError(f"containers.{where.removeprefix('container.')}|{problem}") from None
        return self

    @model_validator(mode="after")
    def _pools_are_apart_and_typed(self) -> PolicyConfig:
        owner: dict[str, str] = {}
        for name, pool in self.pools.items():
            for host in pool.hosts:
                if host in owner:
                    raise ValueError(
                        f"pools.{name}.hosts|host {host!r} is already in pool {owner[host]!r}"
                    )
                owner[host] = name
            found = pool.options.policy_problem(self) if pool.options is not None else None
            if found is not None:
                at, problem = found
                raise ValueError(f"pools.{name}.{pool.executor}.{at}|{problem}")
        return self

    def pool_of(self, host: str) -> tuple[str, Pool] | None:
        """The pool a host belongs to (None: no pool names it; its agent runs its jobs)."""
        return next(((n, p) for n, p in self.pools.items() if host in p.hosts), None)

    def knobs(self) -> Knobs:
        """The policy's tunables as the pure policy code takes them."""
        knobs = self.scheduler
        return Knobs(
            within_class=WithinClass(knobs.ordering.within_class),
            aging_hours=knobs.ordering.aging_hours,
            aging_drains=knobs.ordering.aging_drains,
            starve_after_drains=knobs.ordering.starve_after_drains,
            max_aging_factor=knobs.ordering.max_aging_factor,
            starve_after_hours=knobs.ordering.starve_after_hours,
            fair_share_weight=knobs.ordering.fair_share_weight,
            backfill=Backfill(knobs.backfill),
            costlier_after_runs=knobs.matching.costlier_after_runs,
            costlier_after_s=knobs.matching.costlier_after_minutes * 60,
            headroom=dict(knobs.headroom),
            idle_grace_s=knobs.preemption.idle_grace_minutes * 60,
            preemptible_preemption=knobs.preemption.preemptible,
            preempt_max_per_job=knobs.preemption.max_per_job,
            preempt_min_run_s=knobs.preemption.min_run_minutes * 60,
            shorter_factor=knobs.preemption.shorter_factor,
            share_reserve_gib=self.sharing.reserve_gib,
            share_max_slowdown=self.sharing.max_slowdown,
            share_max_jobs=self.sharing.max_jobs_per_card,
        )

    def catalog(self) -> tuple[CardType, ...]:
        """The GPU catalog as the policy code takes it."""
        return tuple(
            CardType(name, spec.memory_gib, spec.speed, spec.price_per_gpu_hour)
            for name, spec in self.gpu_types.items()
        )

    def approval_required(self, priority: str) -> bool:
        """Whether a member needs an approver to run at this priority class."""
        policy = self.priority_classes.get(priority)  # type: ignore[call-overload]  # any str
        return bool(policy and policy.approval_required)

    def type_for_card(self, nvml_name: str, memory_gib: float) -> str | None:
        """The catalog type of a card as NVML names it, or None if no entry matches."""
        # Asked for every GPU on every poll; a cluster has only a few kinds of card.
        # (The catalog's identity is part of the key: model_copy shares this cache.)
        key = (id(self.gpu_types), nvml_name, memory_gib)
        if key not in self._card_types:
            self._card_types[key] = self._match_card(nvml_name, memory_gib)
        return self._card_types[key]

    def _match_card(self, nvml_name: str, memory_gib: float) -> str | None:
        name = nvml_name.upper()
        for type_name, spec in self.gpu_types.items():
            if any(_alias_matches(alias, name) for alias in spec.nvml_names):
                return type_name
        # A MIG instance ("NVIDIA A100-SXM4-80GB MIG 3g.40gb") is a card of its own profile:
        # by the parts of their names it matches only types that say MIG (A100-MIG-3g.40gb),
        # never the whole card's (A100, or A100-40GB for an instance of 40 GB).
        mig = _is_mig(name)
        for type_name, spec in self.gpu_types.items():
            if (
                not spec.nvml_names
                and _type_is_mig(type_name) == mig
                and _name_matches(type_name, name, memory_gib)
            ):
                return type_name
        return None

    def gpu_type(self, name: str) -> GpuType | None:
        """The catalog entry for a type name, matched case-insensitively."""
        for known, spec in self.gpu_types.items():
            if known.lower() == name.lower():
                return spec
        return None

    def canonical_type(self, name: str) -> str | None:
        """The catalog's spelling of a type name, or None if unknown."""
        return next((known for known in self.gpu_types if known.lower() == name.lower()), None)


_GLOB = re.compile(r"[*?\[]")
_MIG_WORD = re.compile(r"(?<![A-Z0-9])MIG(?![A-Z0-9])")


def _alias_matches(alias: str, nvml_name: str) -> bool:
    """An alias names a card exactly, or with * and ? ("*MIG 3g.40gb*": every card's 3g.40gb
    instance); case does not count."""
    pattern = alias.upper()
    if _GLOB.search(pattern):
        return fnmatch.fnmatchcase(nvml_name, pattern)
    return pattern == nvml_name


def _is_mig(nvml_name: str) -> bool:
    """Whether NVML's (upper-cased) name is a MIG instance's: "… MIG 3G.40GB"."""
    return _MIG_WORD.search(nvml_name) is not None


def _type_is_mig(type_name: str) -> bool:
    return "MIG" in type_name.upper().split("-")


def _name_matches(type_name: str, nvml_name: str, memory_gib: float) -> bool:
    """Each part of the type's name is a whole word of the NVML name; '80GB' parts are
    checked against the memory the card reports instead (NVML names often omit it)."""
    for part in (p for p in type_name.upper().split("-") if p):
        size = re.fullmatch(r"(\d+(?:\.\d+)?)GB", part)
        if size:
            declared = float(size.group(1))
            if not 0.85 * declared <= memory_gib <= 1.1 * declared:
                return False
        elif not re.search(rf"(?<![A-Z0-9]){re.escape(part)}(?![A-Z0-9])", nvml_name):
            return False
    return True


def load_policy(path: Path) -> PolicyConfig:
    """Read and validate the policy file, or raise ConfigError naming file, key and problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(
            str(path), "-", "file not found; set PAIKA_CONFIG to a policy file"
        ) from exc
    return policy_from_text(text, str(path))


def policy_from_text(text: str, where: str) -> PolicyConfig:
    """Validate a policy document (a file's text, or a stored config version), or raise
    ConfigError naming `where`, the key and the problem."""
    return policy_from_document(document_from_text(text, where), where)


def document_from_text(text: str, where: str) -> dict[str, Any]:
    """The policy document as YAML reads it (a mapping), or ConfigError."""
    try:
        raw = yaml.load(text, Loader=SAFE_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        place = f"line {mark.line + 1}" if mark is not None else "-"
        raise ConfigError(where, place, f"not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(where, "-", "the file must be a mapping of keys (gpu_types: …)")
    return raw


def policy_from_document(raw: dict[str, Any], where: str) -> PolicyConfig:
    """Validate a parsed policy document, or raise ConfigError naming the key at fault;
    an unknown key's error has kind "unknown" (config set names it apart)."""
    try:
        return PolicyConfig.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"])
        problem = _plain(first["msg"], first["type"])
        unknown = first["type"] == "extra_forbidden"
        if first["type"] == "pool_section":  # a pool's mistake, at its key below the pool
            said = first.get("ctx") or {}
            key = ".".join(part for part in (key, said["at"]) if part)
            problem, unknown = said["problem"], said["unknown"]
        if not key and "|" in problem:  # whole-file checks name their key themselves
            key, problem = problem.split("|", 1)
        error = ConfigError(where, key or "-", problem)
        error.unknown = unknown
        raise error from exc


def _plain(message: str, kind: str) -> str:
    if kind == "extra_forbidden":
        return "unknown key (check its spelling against the example policy file)"
    if kind == "missing":
        return "required key is missing"
    return message.removeprefix("Value error, ")
