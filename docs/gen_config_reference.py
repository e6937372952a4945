"""Write the configuration reference from the schema itself, so that it cannot drift.

    python docs/gen_config_reference.py           # rewrite the two pages
    python docs/gen_config_reference.py --check   # exit 1 when a committed page differs

Two pages come out of it:

- `docs/reference/config.md`: every key of the policy file, walked from the pydantic model
  `scheduler.config.PolicyConfig` and the models it nests (`SchedulerKnobs`, `Hosts`,
  `Ordering`, `Pool`, `SlurmPool`, …): its type and bounds, its default and what it means.
- `docs/reference/settings.md`: every process setting of `scheduler.settings.Settings`
  (pydantic-settings, prefix `PAIKA_`), and the few variables read outside it.

What a key means is taken, first found wins, from: the field's own `description`; the
table `MEANING` below (only for keys whose comments are missing or say too little on
their own); the comment on that key in the example policy file
(`scheduler/examples/policy.yml`); the comments beside and above the field in the model's
source. A section's prose is its model's docstring.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import html
import inspect
import io
import re
import sys
import textwrap
import tokenize
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere: the packages are beside docs/
    sys.path.insert(0, str(ROOT))

import annotated_types  # noqa: E402
from pydantic import AliasChoices, BaseModel, SecretStr  # noqa: E402
from pydantic.fields import FieldInfo  # noqa: E402
from pydantic_core import PydanticUndefined  # noqa: E402

from scheduler import config as config_module  # noqa: E402
from scheduler import settings as settings_module  # noqa: E402
from scheduler.agent import command as agent_command  # noqa: E402
from scheduler.agent import jobs as agent_jobs  # noqa: E402

CONFIG_PAGE = ROOT / "docs" / "reference" / "config.md"
SETTINGS_PAGE = ROOT / "docs" / "reference" / "settings.md"
EXAMPLE = ROOT / "scheduler" / "examples" / "policy.yml"
GENERATOR = "docs/gen_config_reference.py"

# The name a map's key stands under in a dotted key (`gpu_types.<type>.memory_gib`).
PLACEHOLDERS = {
    "gpu_types": "<type>",
    "teams": "<team>",
    "pools": "<pool>",
    "priority_classes": "<class>",
}

# What a key means, where neither the schema's description nor the comments say it whole.
MEANING: dict[str, str] = {
    "gpu_types": "The GPU catalog: one entry per card type. Jobs are matched to the cheapest "
    "type that fits them.",
    "gpu_types.<type>.memory_gib": "Memory of one card, in GiB.",
    "gpu_types.<type>.speed": "Relative throughput; the reference card is 1.0.",
    "gpu_types.<type>.price_per_gpu_hour": "What one GPU-hour costs; used for matching and "
    "the ledger.",
    "teams": "Teams (also managed with `/gpu admin team add`). Teams named here are created "
    "at start if missing, never deleted. A name is letters and digits of any language, `.`, "
    "`_` and `-` (at most 64, e.g. `语音组`), by the rules of `/gpu admin team add`.",
    "teams.<team>.channel": "The channel that receives the team's notices (and its bump "
    "requests when `slack.approvals_channel` is not set).",
    "admins": "Slack user ids that are admins from the first start (`PAIKA_ADMINS` adds more).",
    "priority_classes": "Per priority class (core > normal > idle): whether a member needs an "
    "approver's yes. A member who submits `core` is queued as `normal` with a bump request to "
    "`core`.",
    "priority_classes.<class>.approval_required": "A member needs an approver's yes to run at "
    "this class.",
    "limits.max_gpus_per_job": "The most GPUs one job may ask for, checked at submit.",
    "limits.max_hours_per_job": "The most GPU-hours one job may estimate, checked at submit; an "
    "*Extend* of a run past its estimate stays within it too.",
    "scheduler.cycle_seconds": "How often the scheduling cycle runs (it polls every agent "
    "first). Read when `paika up` starts: a change takes a restart.",
    "scheduler.backfill": "`easy`: later jobs may start if they do not delay the first blocked "
    "job's reservation; `greedy`: whenever they fit; `none`: no backfill.",
    "scheduler.ordering.within_class": "How jobs of one class are ordered: `shortest_first` (by "
    "expected GPU-hours, with aging and fair share) or `submit_order`.",
    "scheduler.hosts.sample_seconds": "How often each GPU's utilization is kept as a sample "
    "(rounded up to whole cycles).",
    "scheduler.hosts.sample_retention_hours": "How long samples are kept (idle detection and "
    "charts).",
    "scheduler.hosts.max_attempts": "A job whose host was given up on is requeued as a new "
    "attempt unless it has been started this many times; then it fails.",
    "scheduler.ordering.aging_drains": "A job's wait boosts it; the boost doubles every this "
    "many drain times (the queue's own time scale). null: `aging_hours` instead.",
    "scheduler.ordering.starve_after_drains": "Starvation backstop: past this many drain times "
    "a job goes ahead of its class in submit order, gets GPUs reserved, and preemptible work "
    "yields to it. null: no drain-time backstop.",
    "scheduler.ordering.fair_share_half_life_hours": "Half-life of the recent usage that fair "
    "share weighs.",
    "scheduler.matching.costlier_after_minutes": "The most a job waits for the cheapest "
    "adequate type before it may take a costlier one (with `costlier_after_runs`, whichever "
    "is shorter).",
    "scheduler.admission.max_backlog_hours": "Queued work beyond this many hours of the whole "
    "cluster's capacity triggers `action` on non-core submissions.",
    "scheduler.admission.action": "What a deep backlog does to a non-core submission: `warn` "
    "(it is queued with a warning) or `defer`.",
    "scheduler.preemption.preemptible": "Whether jobs submitted with `preemptible=yes` may be "
    "stopped for other work (false: never).",
    "scheduler.preemption.idle_grace_minutes": "An idle-class job blocking core work gets this "
    "long to checkpoint.",
    "slack.default_language": "`en` or `zh`, for users who chose none (`/gpu lang`) and whose "
    "Slack locale is neither.",
    "alerts.quota_used_pct": "Warn the quota's owner (and the channel) when this share of its "
    "GPU-hours is used.",
    "accounts.required": "true: a job whose owner maps to no account is refused at submit, "
    "with the command an admin runs to fix it.",
    "digest.enabled": "Post the daily readiness board.",
    "digest.time": "When the digest is posted every day, in the policy's `timezone`.",
    "reclaim.enabled": "Ask about, then act on, GPUs a running job holds but does not use.",
    "reclaim.action": "Per priority class, what happens when nobody answers within "
    "`grace_minutes`: `release` (stop the job and free its GPUs), `requeue` (stop it and "
    "queue it again) or `keep` (only ask).",
    "estimates.hard_limit": "Per class: past estimate × this factor the run is stopped "
    "(reason `estimate_limit`); a class not named: never. Each factor is greater than 1.",
    "containers.mounts": "Host directories bound into every container job.",
    "containers.mounts[].source": "The host directory.",
    "containers.mounts[].target": "Where it appears inside the container.",
    "containers.mounts[].read_only": "Mounted read-only unless set to false.",
    "containers.ipc": "`host`: share the host's IPC namespace (NCCL over shared memory); "
    "null: the runtime's default.",
    "containers.shm_size": "Size of `/dev/shm` in the container (docker's default is 64m); "
    "null: the runtime's default.",
    "containers.network": "`host`: the host's network (multi-node NCCL); `none`: no network; "
    "null: the runtime's default.",
    "accounts.users": "Slack user id → Unix account, e.g. `{U012AB3CD: alice}`.",
    "accounts.teams": "Team → a shared Unix account for members without their own.",
    "pools": "Which executor starts the jobs of which hosts. Hosts no pool names are run by "
    "their paika agents.",
    "pools.<pool>.executor": "`agents` (paika's own agents, the default) or `slurm`.",
    "pools.<pool>.hosts": "The pool's hosts (for Slurm: its node names); a host is in one "
    "pool at most.",
    "pools.<pool>.slurm": "How the pool's jobs go to Slurm; required with `executor: slurm`, "
    "refused otherwise.",
    "pools.<pool>.slurm.partition": "The Slurm partition runs are submitted to.",
    "pools.<pool>.slurm.gres": "paika GPU type → Slurm GPU type (`--gres=gpu:<type>:<n>`); "
    "every paika type named must be in `gpu_types`.",
    "pools.<pool>.slurm.min_time_minutes": "Never a shorter `--time` than this.",
    "pools.<pool>.slurm.log_path": "Each run's output (`--output`): an absolute path; "
    "`{job_id}`, `{attempt}`, `{name}` and `{account}` are paika's fields, Slurm's own `%j`, "
    "`%u` … stay. `{name}` is ASCII: other characters become `_`, and a name in another "
    "script is written as IDNA writes one (`语音组` → `xn--tn0am3y3lj`).",
    "pools.<pool>.slurm.job_name_prefix": "Slurm job names are `<prefix><job>.<attempt>.<node>`.",
    "pools.<pool>.slurm.workdir": "`--chdir` of each run; null: Slurm's default.",
    "pools.<pool>.slurm.conf": "`SLURM_CONF` for this cluster; null: the clients' default.",
    "pools.<pool>.slurm.command_timeout_seconds": "How long one Slurm command (sbatch, squeue, "
    "sinfo, scancel, sacct) may take.",
    "pools.<pool>.slurm.pending_timeout_seconds": "A run Slurm still holds PENDING this long "
    "after its submission (another job took its cards, a reservation holds its node) is "
    "cancelled and queued again as a new attempt. From 60 s to 604,800 s (7 days).",
    "pools.<pool>.slurm.container.option": "The sbatch long option that runs the batch script "
    "in an image: pyxis's `--container-image`, or Slurm's own `--container` (which takes an "
    "absolute OCI bundle path). Not an option paika sets itself, nor `--wrap`, `--hold`, "
    "`--array`, `--requeue`, `--export-file`.",
    "pools.<pool>.slurm.container.value": "The option's value made from the image: "
    "`{image}` (as submitted) or `{enroot_image}` (its registry host ended by `#`, as "
    "enroot reads it).",
    "pools.<pool>.slurm.container.options": "Further sbatch long options the site's way wants "
    "(e.g. `--container-mounts=/data:/data:ro`), each `--name` or `--name=value`, at most 16.",
}

# Whatever the model accepts that is not a key of its own, said under the section's table.
NOTES: dict[str, str] = {
    "scheduler.hosts": "An older name is still read: `lost_after_seconds` means "
    "`unknown_after_seconds`.",
    "scheduler": "Every name under `headroom` must be a type of `gpu_types`, and each amount 0 "
    "or more.",
    "pools": "A host may be in one pool only, and every GPU type a pool's `slurm.gres` names "
    "must be in `gpu_types`.",
}

# Process settings: what each means, in the words operators read (the README's table).
SETTING_MEANING: dict[str, str] = {
    "data_dir": "Where the default SQLite file, the local object store (`objects/`) and the "
    "spool (`spool/`) live.",
    "database_url": "SQLAlchemy URL. `postgresql://…` uses psycopg 3 and `mysql://…` PyMySQL "
    "(install the `postgres` / `mysql` extra).",
    "config": "The policy file.",
    "admins": "Comma-separated Slack user ids that are admins from the first start.",
    "agent_token": "The shared bearer token, for hosts without a token of their own "
    "(`paika agent` and `paika up`).",
    "agent_secret_file": "On the scheduler: the secret each host's token derives from (0600; "
    "`paika agent-secret` makes it). Unset: hosts are added without a token of their own.",
    "agent_ca_file": "The CA bundle `https://` agents' certificates are checked against "
    "(`paika agent init` makes one).",
    "slack_bot_token": "The bot token; unset: no Slack.",
    "slack_signing_secret": "Needed in HTTP mode.",
    "slack_app_token": "Set: Socket Mode; unset: HTTP mode.",
    "slack_api_url": "Another base URL for Slack's Web API (a proxy; the fake Slack of "
    "`tests/fake_slack/`).",
    "http_host": "Where HTTP mode listens, and `/metrics` and `/healthz` in every mode.",
    "http_port": "The port of `PAIKA_HTTP_HOST`.",
    "report_url": "paika up's address as the GPU hosts reach it: told to every run, where "
    "`paika report` sends its outputs.",
    "log_format": "`json`: one JSON object a line (`paika up` and `paika agent`); an unknown "
    "value stops the process at start with the choices.",
    "log_level": "`DEBUG`, `INFO`, `WARNING` or `ERROR`; at `INFO` `paika up` logs what "
    "changed, and each cycle's polls and HTTP requests only at `DEBUG`; an unknown value stops "
    "the process at start with the choices.",
    "object_store": "The team's memory: `s3://bucket/prefix`, or a folder.",
    "s3_endpoint_url": "The S3-compatible service.",
    "s3_region": "Its region.",
    "s3_addressing_style": "`path`, `virtual` or `auto`.",
    "s3_signature_version": "e.g. `s3v4`.",
    "spool_max_mb": "The bound of the local spool that holds writes while the store is down.",
    "store_down_alert_minutes": "How long the store may not answer before the channel hears it.",
}

# What an unset setting resolves to, where that is not the field's own default.
SETTING_UNSET: dict[str, str] = {
    "database_url": "`sqlite:///paika-data/paika.db` (under `PAIKA_DATA_DIR`)",
    "config": "the bundled `scheduler/examples/policy.yml`",
    "agent_ca_file": "the system's CAs",
    "slack_api_url": "Slack's",
    "report_url": "`http://PAIKA_HTTP_HOST:PAIKA_HTTP_PORT`",
    "object_store": "`PAIKA_DATA_DIR/objects`",
    "s3_endpoint_url": "AWS's",
    "s3_region": "AWS's",
    "s3_addressing_style": "boto3's",
    "s3_signature_version": "boto3's",
}

# Variables read outside Settings: by the agent on a GPU host (it stands alone and does not
# load Settings), and by boto3.
OUTSIDE = (
    (
        agent_command.TOKEN_FILE_ENV,
        "none",
        "On a GPU host: the file holding that host's own token (0600; read again when it "
        "changes); wins over `PAIKA_AGENT_TOKEN`.",
    ),
    (
        agent_jobs.TOKEN_ENV,
        "none",
        "On a GPU host: the shared token, for an agent without a token file.",
    ),
    (
        agent_command.FORMAT_ENV,
        "`text`",
        "The agent's log format (`json`: one JSON object a line).",
    ),
    (
        agent_command.LEVEL_ENV,
        "`INFO`",
        "The agent's log level.",
    ),
    (
        agent_jobs.SIM_UTILIZATION_ENV,
        "none",
        "In the `env` of a start sent to a simulated agent (`--simulate`): the utilization "
        "(0–100) the job's GPUs report, e.g. to play an idle job.",
    ),
    (
        agent_jobs.SIM_MEMORY_ENV,
        "none",
        "In the `env` of a start sent to a simulated agent: the GPU memory (MiB) the job "
        "reports using.",
    ),
    (
        agent_jobs.SIM_MEMORY_BUSY_ENV,
        "none",
        "In the `env` of a start sent to a simulated agent: the memory controller's busy % "
        "(0–100) the job's GPUs report (NVML's `utilization.memory`).",
    ),
    (
        agent_jobs.SIM_PCIE_ENV,
        "none",
        "In the `env` of a start sent to a simulated agent: the PCIe traffic (MB/s, both "
        "ways) the job's GPUs report.",
    ),
    (
        "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE",
        "boto3's chain",
        "The object store's credentials come only from boto3's own chain (these, or an "
        "instance role) and are never logged.",
    ),
)


# --- Walking the schema --------------------------------------------------------------------


@dataclass(frozen=True)
class Key:
    """One key of the policy file, as the page lists it."""

    path: str  # dotted, with <placeholders> for map keys and [] for list items
    kind: str  # its type, in words
    bounds: str  # its bounds in words ("" if none)
    default: str
    meaning: str


@dataclass(frozen=True)
class Section:
    """A model of the schema: a heading, its docstring and the keys it holds."""

    path: str
    model: type[BaseModel]
    keys: tuple[Key, ...]


def _unwrap(tp: Any) -> tuple[Any, list[Any]]:
    """The type inside Annotated, and its metadata."""
    if typing.get_origin(tp) is typing.Annotated:
        base, *meta = typing.get_args(tp)
        return base, meta
    return tp, []


def _without_none(tp: Any) -> tuple[Any, bool]:
    """(the type without None, whether None was allowed)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        optional = len(args) < len(typing.get_args(tp))
        rest = args[0] if len(args) == 1 else typing.Union[tuple(args)]  # noqa: UP007
        return rest, optional
    return tp, False


def _model_in(tp: Any) -> tuple[type[BaseModel] | None, str]:
    """The model a field nests and how: ("", a section), ("map", values), ("list", items)."""
    tp, _ = _without_none(_unwrap(tp)[0])
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp, ""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is dict and len(args) == 2:
        value = _unwrap(args[1])[0]
        if isinstance(value, type) and issubclass(value, BaseModel):
            return value, "map"
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = _unwrap(args[0])[0]
        if isinstance(item, type) and issubclass(item, BaseModel):
            return item, "list"
    return None, ""


def _words(tp: Any) -> str:
    """A type in words, with Markdown code for literal values."""
    tp, meta = _unwrap(tp)
    tp, optional = _without_none(tp)
    said = _plain_words(tp, meta)
    return f"{said} or null" if optional else said


def _plain_words(tp: Any, meta: list[Any]) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    pattern = _pattern(meta)
    if origin is typing.Literal:
        values = [f"`{v}`" for v in args]
        return "one of " + (
            ", ".join(values[:-1]) + " or " + values[-1] if len(values) > 1 else values[0]
        )
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_words(a) for a in args)
    if origin is tuple:
        item = args[0] if args else Any
        return f"list of {_words(item)}"
    if origin is dict:
        return f"map of {_key_words(args[0])} to {_words(args[1])}"
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return "section"
    names = {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        Path: "path",
        SecretStr: "string (secret)",
    }
    word = names.get(tp, getattr(tp, "__name__", str(tp)))
    return f"{word} matching {_code(pattern)}" if pattern else word


def _key_words(tp: Any) -> str:
    base, meta = _unwrap(tp)
    if isinstance(base, type) and issubclass(base, Enum):
        # The policy's per-class maps are keyed by scheduler.policy.priority_classes.PriorityClass.
        return "class (" + ", ".join(f"`{v.value}`" for v in base) + ")"
    pattern = _pattern([*meta, *(getattr(m, "metadata", []) for m in meta)])
    return f"name matching {_code(pattern)}" if pattern else "name"


def _pattern(meta: list[Any]) -> str | None:
    for item in meta:
        if isinstance(item, list):
            found = _pattern(item)
            if found:
                return found
        if isinstance(item, FieldInfo):
            found = _pattern(list(item.metadata))
            if found:
                return found
        pattern = getattr(item, "pattern", None)
        if isinstance(pattern, str):
            return pattern
    return None


def _code(text: str) -> str:
    """Inline code that survives a Markdown table on GitHub and in MkDocs alike."""
    if "|" in text or "`" in text:
        return "<code>" + html.escape(text).replace("|", "&#124;") + "</code>"
    return f"`{text}`"


_BOUNDS = (
    (annotated_types.Gt, "gt", "> {}"),
    (annotated_types.Ge, "ge", "≥ {}"),
    (annotated_types.Lt, "lt", "< {}"),
    (annotated_types.Le, "le", "≤ {}"),
    (annotated_types.MinLen, "min_length", "at least {} {}"),
    (annotated_types.MaxLen, "max_length", "at most {} {}"),
)


def _bounds(field: FieldInfo) -> str:
    said = []
    base = _without_none(_unwrap(field.annotation)[0])[0]
    unit = (
        "characters" if base is str else "entries" if typing.get_origin(base) is dict else "items"
    )
    for item in field.metadata:
        for kind, attribute, words in _BOUNDS:
            if isinstance(item, kind):
                value = getattr(item, attribute)
                if kind is annotated_types.MinLen and value == 1:
                    said.append("not empty")
                else:
                    said.append(words.format(_number(value), unit))
        pattern = _pattern([item])
        if pattern and not isinstance(item, FieldInfo):
            said.append(f"matching {_code(pattern)}")
    return ", ".join(said)


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}" if isinstance(value, int) and abs(value) >= 10_000 else str(value)


def _yaml(value: Any) -> str:
    """A default as it would be written in the policy file."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_yaml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_yaml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, Path):
        return value.as_posix()
    return str(value)


def _default(field: FieldInfo, nested: str) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
    if nested == "" and isinstance(value, BaseModel):
        return "its keys' defaults"
    return _code(_yaml(value))


def _fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """A model's keys as the policy file writes them: a pool names one of the executors
    paika has built in, and its settings are the section named after that executor."""
    fields = dict(model.model_fields)
    if model is config_module.Pool:
        del fields["options"]
        names = tuple(config_module.POOL_SECTIONS)
        fields["executor"] = FieldInfo(annotation=typing.Literal[names], default="agents")
        for name, section in config_module.POOL_SECTIONS.items():
            if section is not None:
                fields[name] = FieldInfo(annotation=section | None, default=None)
    return fields


def walk(model: type[BaseModel], path: str = "") -> Iterator[Section]:
    """Every section of the schema, depth first, each with its keys."""
    keys = []
    nested_sections = []
    for name, field in _fields(model).items():
        here = f"{path}.{name}" if path else name
        inner, how = _model_in(field.annotation)
        kind = _words(field.annotation)
        if inner is not None:
            below = {
                "": here,
                "map": f"{here}.{PLACEHOLDERS.get(name, '<name>')}",
                "list": f"{here}[]",
            }[how]
            nested_sections.append((inner, below))
        keys.append(
            Key(
                here,
                kind,
                _bounds(field),
                _default(field, how),
                _meaning(model, name, here, field, inner),
            )
        )
    yield Section(path, model, tuple(keys))
    for inner, below in nested_sections:
        yield from walk(inner, below)


# --- Where the meanings come from ----------------------------------------------------------


def _meaning(model: type[BaseModel], name: str, path: str, field: FieldInfo, inner: Any) -> str:
    for found in (
        field.description,
        MEANING.get(path),
        EXAMPLE_COMMENTS.get(path),
        _source_comments(model).get(name),
        _first_sentence(inner.__doc__) if inner is not None and inner.__doc__ else None,
    ):
        if found:
            return _sentence(found)
    return "—"


def _sentence(text: str) -> str:
    text = " ".join(text.split()).strip(" .")
    text = re.sub(r"^\.\.\.\s*|\s*\.\.\.$", "", text)
    if text.split(" ", 1)[0] not in ("paika", "e.g.", "true:", "false:"):
        text = text[:1].upper() + text[1:]
    return text + "."


def _first_sentence(doc: str) -> str:
    text = " ".join(inspect.cleandoc(doc).split())
    end = re.search(r"(?<=\.)\s", text)
    return text if end is None else text[: end.start()]


_SOURCE_CACHE: dict[type, dict[str, str]] = {}


def _source_comments(model: type[BaseModel]) -> dict[str, str]:
    """Each field's comments in the model's source: the block right above it and any on
    its own lines."""
    if model in _SOURCE_CACHE:
        return _SOURCE_CACHE[model]
    source = textwrap.dedent(inspect.getsource(model))
    lines = source.splitlines()
    comments: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string.lstrip("#").strip()
    found: dict[str, str] = {}
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    for node in body.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above: list[str] = []
        row = node.lineno - 1
        while row >= 1 and lines[row - 1].strip().startswith("#"):
            above.insert(0, comments.get(row, ""))
            row -= 1
        beside = [
            comments[r]
            for r in range(node.lineno, (node.end_lineno or node.lineno) + 1)
            if r in comments and not lines[r - 1].strip().startswith("#")
        ]
        text = " ".join(part for part in (*above, *beside) if part)
        if text:
            found[node.target.id] = text
    _SOURCE_CACHE[model] = found
    return found


def _example_comments(text: str) -> dict[str, str]:
    """Each key's comment in the example policy file: the one on its line and the comment
    lines continuing it (indented past the key); else the comment block right above it."""
    found: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    above: list[str] = []
    last: str | None = None
    key_line = re.compile(r"^(\s*)([A-Za-z_][A-Za-z0-9_-]*):(.*)$")
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            above, last = [], None
            continue
        if stripped.startswith("#"):
            indent = len(line) - len(line.lstrip())
            words = stripped.lstrip("#").strip()
            if last is not None and stack and indent > stack[-1][0] + 2:
                found[last] = f"{found[last]} {words}"
            else:
                above.append(words)
                last = None
            continue
        match = key_line.match(line)
        if match is None:
            above, last = [], None
            continue
        indent, key, rest = len(match[1]), match[2], match[3]
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, key))
        path = ".".join(k for _, k in stack)
        comment = _trailing_comment(rest)
        if comment:
            found[path] = comment
            last = path
        elif above:
            found[path] = " ".join(above)
            last = None
        else:
            last = None
        above = []
    return found


def _trailing_comment(rest: str) -> str | None:
    quote = None
    for i, char in enumerate(rest):
        if quote:
            if char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char == "#" and (i == 0 or rest[i - 1].isspace()):
            return rest[i + 1 :].strip()
    return None


EXAMPLE_COMMENTS = _example_comments(EXAMPLE.read_text(encoding="utf-8"))


# --- The pages -----------------------------------------------------------------------------

HEADER = """<!-- Generated by {generator} from {source}: do not edit by hand.
     Rewrite it with `python {generator}`; `--check` fails when it is out of date. -->
"""


def _cell(text: str) -> str:
    return (
        text.replace("\n", " ").replace("|", "\\|")
        if "`" not in text and "<code>" not in text
        else text.replace("\n", " ")
    )


def config_page() -> str:
    out = [
        HEADER.format(generator=GENERATOR, source="`scheduler.config.PolicyConfig`"),
        "# Policy file reference",
        "",
        "Every key of the policy file (YAML; `PAIKA_CONFIG` names it, else the bundled "
        "`scheduler/examples/policy.yml`, which shows most of them in use). This page is "
        "generated from the schema paika validates the file with, the pydantic model "
        "`PolicyConfig` in `scheduler/config.py` and the models it nests, so it lists exactly "
        "the keys paika accepts.",
        "",
        "A wrong key or value stops paika at start with the file, the key and what is wrong; "
        "`/gpu config set` refuses it the same way and stores nothing (see "
        "[The policy file and its versions](../operate/policy.md)). In a dotted key, "
        "`<type>`, `<team>`, `<pool>` and `<class>` stand for a name you choose (or a "
        "priority class), and `[]` for each item of a list. `null` is YAML's empty value.",
        "",
    ]
    for section in walk(config_module.PolicyConfig):
        title = f"`{section.path}`" if section.path else "Top level"
        out += [f"## {title}", ""]
        doc = inspect.cleandoc(section.model.__doc__ or "")
        if doc:
            out += [" ".join(paragraph.split()) + "\n" for paragraph in doc.split("\n\n")]
        out += ["| key | type | default | meaning |", "|---|---|---|---|"]
        for key in section.keys:
            kind = f"{key.kind}, {key.bounds}" if key.bounds else key.kind
            out.append(f"| `{key.path}` | {_cell(kind)} | {key.default} | {_cell(key.meaning)} |")
        out.append("")
        if section.path in NOTES:
            out += [NOTES[section.path], ""]
    return "\n".join(out).rstrip() + "\n"


def _env_name(name: str, field: FieldInfo) -> str:
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    if isinstance(alias, str):
        return alias
    prefix = settings_module.Settings.model_config.get("env_prefix", "")
    return f"{prefix}{name}".upper()


def settings_page() -> str:
    out = [
        HEADER.format(generator=GENERATOR, source="`scheduler.settings.Settings`"),
        "# Environment settings reference",
        "",
        "Process settings come from the environment, read once at start by `Settings` "
        "(pydantic-settings, prefix `PAIKA_`) in `scheduler/settings.py`; Slack's keep "
        "Slack's own names. This page is generated from that class.",
        "",
        "| variable | type | default | meaning |",
        "|---|---|---|---|",
    ]
    model = settings_module.Settings
    comments = _source_comments(model)
    for name, field in model.model_fields.items():
        env = _env_name(name, field)
        bounds = _bounds(field)
        kind = _words(field.annotation)
        kind = f"{kind}, {bounds}" if bounds else kind
        if name in SETTING_UNSET:
            default = SETTING_UNSET[name]
        elif field.default is None or field.default == ():
            default = "none"
        else:
            default = _code(_yaml(field.default))
        meaning = field.description or SETTING_MEANING.get(name) or comments.get(name) or "—"
        out.append(f"| `{env}` | {_cell(kind)} | {default} | {_cell(_sentence(meaning))} |")
    out += [
        "",
        "## Read outside `Settings`",
        "",
        "The GPU host agent stands alone and does not load `Settings`; it reads these itself. "
        "boto3 reads its own.",
        "",
        "| variable | default | meaning |",
        "|---|---|---|",
    ]
    for env, default, meaning in OUTSIDE:
        names = ", ".join(f"`{n.strip()}`" for n in env.split(","))
        out.append(f"| {names} | {default} | {meaning} |")
    out += [
        "",
        "What every job finds in its own environment (`PAIKA_JOB_ID`, `PAIKA_JOB_TOKEN`, "
        "`PAIKA_REPORT_URL`, …) is in the user's guide, "
        "[Outputs reported by the job](../user-guide.md#outputs-reported-by-the-job).",
    ]
    return "\n".join(out).rstrip() + "\n"


PAGES = {CONFIG_PAGE: config_page, SETTINGS_PAGE: settings_page}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is out of date")
    args = parser.parse_args(argv)
    stale = []
    for page, make in PAGES.items():
        text = make()
        current = page.read_text(encoding="utf-8") if page.exists() else ""
        if text == current:
            continue
        if args.check:
            stale.append(page)
            diff = difflib.unified_diff(
                current.splitlines(), text.splitlines(), str(page), "generated", lineterm=""
            )
            print("\n".join(list(diff)[:40]), file=sys.stderr)
        else:
            page.parent.mkdir(parents=True, exist_ok=True)
            page.write_text(text, encoding="utf-8")
            print(f"wrote {page.relative_to(ROOT)}")
    if stale:
        names = ", ".join(str(p.relative_to(ROOT)) for p in stale)
        print(f"out of date: {names}; run: python {GENERATOR}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
