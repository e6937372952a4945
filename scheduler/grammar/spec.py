"""Every /gpu subcommand and its keys. The parser and the help text are both read from here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from scheduler.grammar.values import ValueKind
from storage import limits

PRIORITIES = ("core", "normal", "idle")
ROLES = ("member", "approver", "admin")
LANGUAGES = ("en", "zh")
# Free text stored in unbounded TEXT columns; a value that lands in a String column takes its
# length from storage.limits instead (tests/storage/test_limits.py checks every key).
TEXT_LIMIT = 500
CMD_LIMIT = 2000
# Every number has both bounds, so nothing huge reaches sums of hours or cost.
JOB_HOURS_MAX = 100_000
QUOTA_HOURS_MAX = 10_000_000  # about 1,100 GPU-years: more than any one grant


@dataclass(frozen=True)
class Key:
    """One key a subcommand accepts, as key=value or, when positional, as a bare word."""

    name: str
    kind: ValueKind
    help: str
    example: str  # the value only; see example_arg for "name=value"
    required: bool = False
    default: str | None = None  # typed form; defaults() converts it, help shows it
    default_help: str | None = None  # shown instead when the default is not a literal value
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    above_minimum: bool = False  # minimum itself is not allowed (hours must be > 0)
    # The most characters a value may have; for a list of GPU types, each name. Keys whose
    # value is stored in a String column use that column's length from storage.limits.
    max_length: int = TEXT_LIMIT
    repeatable: bool = False
    positional: bool = False  # filled by bare words, in the order keys are listed
    rest: bool = False  # positional that takes all remaining words

    @property
    def shown_default(self) -> str | None:
        """The default as help shows it."""
        return self.default_help or self.default

    @property
    def placeholder(self) -> str:
        """How the key appears in a usage line."""
        if self.positional and self.required:
            return f"<{self.name}>"
        if self.positional:
            return f"[{self.name} …]" if self.rest else f"[{self.name}]"
        value = "|".join(self.choices) if self.choices else "…"
        shown = f"{self.name}={value}"
        if self.repeatable:
            shown += " …"
        return shown if self.required else f"[{shown}]"


@dataclass(frozen=True)
class Subcommand:
    """One /gpu command: the words that select it, its keys and a complete example."""

    path: tuple[str, ...]
    summary: str
    keys: tuple[Key, ...]
    example: str
    section: str
    admin: bool = False
    # When this key is given, required keys may come from a saved template, so the parser
    # leaves the check to the caller (check_required after merging).
    template_key: str | None = None

    @property
    def invocation(self) -> str:
        """The command as typed, e.g. /gpu admin quota add."""
        return "/gpu " + " ".join(self.path)

    @property
    def positionals(self) -> tuple[Key, ...]:
        """Keys that bare words fill, in order."""
        return tuple(key for key in self.keys if key.positional)

    @property
    def heading(self) -> str:
        """The invocation with its positional words, e.g. /gpu ready <job>."""
        return " ".join((self.invocation, *(key.placeholder for key in self.positionals)))

    @property
    def usage(self) -> str:
        """The full usage line: positionals, then required keys, then optional ones."""
        keywords = [key for key in self.keys if not key.positional]
        ordered = [key for key in keywords if key.required] + [
            key for key in keywords if not key.required
        ]
        return " ".join((self.heading, *(key.placeholder for key in ordered)))

    def key(self, name: str) -> Key | None:
        """The key called `name`, or None."""
        return next((key for key in self.keys if key.name == name), None)


def _job() -> Key:
    return Key(
        "job",
        ValueKind.JOB_REF,
        "The job: its id (42 or #42) or its name.",
        "42",
        required=True,
        positional=True,
        max_length=limits.JOB_NAME,
    )


def _request() -> Key:
    return Key(
        "request",
        ValueKind.ID,
        "The request number from the approval message.",
        "7",
        required=True,
        positional=True,
    )


def _reason(required: bool, help_: str) -> Key:
    return Key("reason", ValueKind.TEXT, help_, "paper deadline on Friday", required=required)


def _team(help_: str, *, required: bool = False, default_help: str | None = None) -> Key:
    return Key(
        "team",
        ValueKind.NAME,
        help_,
        "vision",
        required=required,
        default_help=default_help,
        max_length=limits.TEAM_NAME,
    )


def _user(name: str, help_: str, *, positional: bool) -> Key:
    return Key(
        name,
        ValueKind.USER,
        help_,
        "@alice",
        required=True,
        positional=positional,
        max_length=limits.SLACK_ID,
    )


def _named(help_: str, example: str, max_length: int) -> Key:
    return Key(
        "name",
        ValueKind.NAME,
        help_,
        example,
        required=True,
        positional=True,
        max_length=max_length,
    )


def _template_name() -> Key:
    return _named("Template name.", "bert-base", limits.TEMPLATE_NAME)


def _team_name() -> Key:
    return _named("Team name.", "vision", limits.TEAM_NAME)


def _priority(name: str, help_: str) -> Key:
    return Key(name, ValueKind.CHOICE, help_, "normal", required=True, choices=PRIORITIES)


def _expires() -> Key:
    return Key(
        "expires", ValueKind.DATE, "Last day the hours can be used.", "2025-12-31", required=True
    )


def _quota_id() -> Key:
    return Key(
        "id",
        ValueKind.ID,
        "The quota grant's number from /gpu admin quota list.",
        "3",
        required=True,
        positional=True,
    )


def _host() -> Key:
    return _named("Host name, as registered.", "gpu-01", limits.HOST_NAME)


SUBMIT_KEYS: tuple[Key, ...] = (
    Key(
        "name",
        ValueKind.NAME,
        "Job name, shown in the queue and in reports.",
        "bert-ft",
        required=True,
        max_length=limits.JOB_NAME,
    ),
    Key(
        "gpus",
        ValueKind.INT,
        "Number of GPUs the job needs.",
        "2",
        default="1",
        minimum=1,
        maximum=64,
    ),
    Key(
        "type",
        ValueKind.GPU_TYPES,
        "GPU types the job may run on.",
        "A100-80GB,H100",
        max_length=limits.GPU_TYPE,
    ),
    Key(
        "mem",
        ValueKind.FLOAT,
        "Minimum memory per GPU, in GiB (may be combined with type).",
        "40",
        minimum=1,
        maximum=1024,
    ),
    Key("speed", ValueKind.FLOAT, "Minimum relative GPU speed.", "1.5", minimum=0.01, maximum=100),
    Key(
        "hours",
        ValueKind.FLOAT,
        "Estimated GPU-hours: GPUs × wall-clock hours.",
        "24",
        required=True,
        minimum=0,
        above_minimum=True,
        maximum=JOB_HOURS_MAX,
    ),
    _priority("priority", "Priority class: core, normal or idle."),
    Key(
        "data",
        ValueKind.DATA,
        "Is the data on the GPU hosts? ready, pending, or where it is being copied to.",
        "ready",
        required=True,
        max_length=limits.DATA_LOCATION,
    ),
    _team("Team whose quota pays for the job.", default_help="your team"),
    Key(
        "cmd",
        ValueKind.TEXT,
        "The command the GPU host runs.",
        "python train.py --lr 3e-4",
        required=True,
        max_length=CMD_LIMIT,
    ),
    Key(
        "image",
        ValueKind.IMAGE,
        "Container image to run the command in.",
        "nvcr.io/nvidia/pytorch:24.05-py3",
        max_length=limits.IMAGE,
    ),
    Key(
        "template",
        ValueKind.NAME,
        "Saved template to fill the other keys from; keys you give win.",
        "bert-base",
        max_length=limits.TEMPLATE_NAME,
    ),
)

_TEMPLATE_KEYS = tuple(
    # A template stores only what was given, so nothing in it is required or defaulted.
    replace(key, required=False, default=None, default_help=None)
    for key in SUBMIT_KEYS
    if key.name not in ("name", "template")
)

_JOBS, _QUOTA, _TEMPLATES, _OTHER, _ADMIN = "Jobs", "Quota", "Templates", "Other", "Admin"

SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand(
        ("submit",),
        "Queue a training job.",
        SUBMIT_KEYS,
        "/gpu submit name=bert-ft gpus=2 type=A100-80GB hours=12 priority=normal "
        'data=ready cmd="python train.py --lr 3e-4"',
        _JOBS,
        template_key="template",
    ),
    Subcommand(
        ("ready",),
        "Mark a job's data ready on the GPU hosts.",
        (
            _job(),
            Key(
                "location",
                ValueKind.TEXT,
                "Where the data is now, if it moved.",
                "/mnt/nas/imagenet",
                max_length=limits.DATA_LOCATION,
            ),
        ),
        "/gpu ready 42",
        _JOBS,
    ),
    Subcommand(
        ("queue",),
        "Show the queue.",
        (
            Key(
                "scope",
                ValueKind.CHOICE,
                "Whose jobs to show.",
                "mine",
                default="all",
                choices=("mine", "team", "all"),
                positional=True,
            ),
        ),
        "/gpu queue mine",
        _JOBS,
    ),
    Subcommand(
        ("board",),
        "Show every GPU and the queue in brief.",
        (),
        "/gpu board",
        _JOBS,
    ),
    Subcommand(("status",), "Show one job.", (_job(),), "/gpu status 42", _JOBS),
    Subcommand(
        ("cancel",),
        "Cancel a job.",
        (_job(), _reason(False, "Why, for the job's owner and the log.")),
        '/gpu cancel 42 reason="wrong learning rate"',
        _JOBS,
    ),
    Subcommand(
        ("bump",),
        "Ask to change a job's priority class.",
        (
            _job(),
            _priority("to", "The priority class to move to."),
            _reason(True, "Why, for the approver."),
        ),
        '/gpu bump 42 to=core reason="paper deadline on Friday"',
        _JOBS,
    ),
    Subcommand(("approve",), "Approve a request.", (_request(),), "/gpu approve 7", _JOBS),
    Subcommand(
        ("deny",),
        "Deny a request.",
        (_request(), _reason(False, "Why, for the person who asked.")),
        '/gpu deny 7 reason="core slots are full this week"',
        _JOBS,
    ),
    Subcommand(
        ("done",),
        "Record what a finished job produced.",
        (
            _job(),
            Key(
                "output",
                ValueKind.TEXT,
                "What the run produced, e.g. a checkpoint path or report link.",
                "s3://ckpt/bert-ft/final",
            ),
            Key(
                "metric",
                ValueKind.METRIC,
                "A result as name:number; give it once per metric.",
                "loss:0.31",
                repeatable=True,
            ),
        ),
        "/gpu done 42 output=s3://ckpt/bert-ft/final metric=loss:0.31 metric=top1:76.2",
        _JOBS,
    ),
    Subcommand(
        ("quota",),
        "Show a team's GPU-hour quota.",
        (_team("Team to show.", default_help="your team"),),
        "/gpu quota team=vision",
        _QUOTA,
    ),
    Subcommand(
        ("report",),
        "Show GPU-hours, cost and output by team and job.",
        (
            _team("Only this team.", default_help="all teams"),
            Key(
                "days",
                ValueKind.INT,
                "Report the last N days, up to now (not together with since).",
                "30",
                default_help="7",
                minimum=1,
                maximum=366,
            ),
            Key(
                "since",
                ValueKind.DATE,
                "Report from the start of this day (install's time zone) up to now "
                "(not together with days).",
                "2026-11-01",
            ),
        ),
        "/gpu report team=vision days=30",
        _QUOTA,
    ),
    Subcommand(
        ("template", "save"),
        "Save submit keys under a name for reuse.",
        (_template_name(), *_TEMPLATE_KEYS),
        "/gpu template save bert-base gpus=2 type=A100-80GB priority=normal data=ready "
        'cmd="python train.py"',
        _TEMPLATES,
    ),
    Subcommand(("template", "list"), "List saved templates.", (), "/gpu template list", _TEMPLATES),
    Subcommand(
        ("template", "show"),
        "Show a saved template.",
        (_template_name(),),
        "/gpu template show bert-base",
        _TEMPLATES,
    ),
    Subcommand(
        ("template", "delete"),
        "Delete a saved template.",
        (_template_name(),),
        "/gpu template delete bert-base",
        _TEMPLATES,
    ),
    Subcommand(
        ("lang",),
        "Choose the language of replies: en or zh (中文).",
        (
            Key(
                "language",
                ValueKind.CHOICE,
                "The language: en for English, zh for Chinese (中文).",
                "zh",
                required=True,
                choices=LANGUAGES,
                positional=True,
            ),
        ),
        "/gpu lang zh",
        _OTHER,
    ),
    Subcommand(
        ("help",),
        "Explain a command.",
        (
            Key(
                "topic",
                ValueKind.WORDS,
                "The command to explain.",
                "submit",
                positional=True,
                rest=True,
            ),
        ),
        "/gpu help submit",
        _OTHER,
    ),
    Subcommand(
        ("admin", "team", "add"),
        "Create a team.",
        (
            _team_name(),
            Key(
                "channel",
                ValueKind.TEXT,
                "Slack channel for the team's notices.",
                "#vision-gpu",
                max_length=limits.CHANNEL,
            ),
        ),
        "/gpu admin team add vision channel=#vision-gpu",
        _ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "team", "list"), "List teams.", (), "/gpu admin team list", _ADMIN, admin=True
    ),
    Subcommand(
        ("admin", "team", "remove"),
        "Remove a team.",
        (_team_name(),),
        "/gpu admin team remove vision",
        _ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "member", "add"),
        "Add a person to a team.",
        (
            _user("user", "The person: type @ and pick them.", positional=True),
            _team("Team to join.", required=True),
            Key(
                "role",
                ValueKind.CHOICE,
                "What they may do.",
                "approver",
                default="member",
                choices=ROLES,
            ),
        ),
        "/gpu admin member add @alice team=vision role=approver",
        _ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "member", "remove"),
        "Remove a person from their team.",
        (_user("user", "The person: type @ and pick them.", positional=True),),
        "/gpu admin member remove @alice",
        _ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "member", "role"),
        "Change a person's role.",
        (
            _user("user", "The person: type @ and pick them.", positional=True),
            Key(
                "role",
                ValueKind.CHOICE,
                "What they may do.",
                "approver",
                required=True,
                choices=ROLES,
            ),
        ),
        "/gpu admin member role @alice role=approver",
        _ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "member", "list"),
        "List people and their roles.",
        (_team("Only this team."),),
        "/gpu admin member list team=vision",
        _ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "quota", "add"),
        "Grant a team GPU-hours until a date.",
        (
            _team("Team that gets the hours.", required=True),
            Key(
                "type",
                ValueKind.GPU_TYPE_OR_ANY,
                "GPU type the hours are for.",
                "A100-80GB",
                default="any",
                max_length=limits.GPU_TYPE,
            ),
            Key(
                "hours",
                ValueKind.FLOAT,
                "GPU-hours granted.",
                "5000",
                required=True,
                minimum=0,
                above_minimum=True,
                maximum=QUOTA_HOURS_MAX,
            ),
            _expires(),
            _user(
                "owner", "Who gets the expiry reminders: type @ and pick them.", positional=False
            ),
            Key("note", ValueKind.TEXT, "Where the hours come from.", "Q4 grant"),
        ),
        "/gpu admin quota add team=vision type=A100-80GB hours=5000 expires=2025-12-31 "
        'owner=@alice note="Q4 grant"',
        _ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "quota", "renew"),
        "Extend a grant to a new date.",
        (
            _quota_id(),
            _expires(),
            Key(
                "hours",
                ValueKind.FLOAT,
                "New total GPU-hours, if it changes.",
                "8000",
                minimum=0,
                above_minimum=True,
                maximum=QUOTA_HOURS_MAX,
            ),
        ),
        "/gpu admin quota renew 3 expires=2026-06-30 hours=8000",
        _ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "quota", "adjust"),
        "Set a grant's total GPU-hours.",
        (
            _quota_id(),
            Key(
                "hours",
                ValueKind.FLOAT,
                "New total GPU-hours.",
                "4000",
                required=True,
                minimum=0,
                maximum=QUOTA_HOURS_MAX,
            ),
            _reason(True, "Why, for the log."),
        ),
        '/gpu admin quota adjust 3 hours=4000 reason="returned unused hours"',
        _ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "quota", "list"),
        "List quota grants.",
        (_team("Only this team."),),
        "/gpu admin quota list team=vision",
        _ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "host", "add"),
        "Register a GPU host.",
        (
            _host(),
            Key(
                "url",
                ValueKind.URL,
                "The host agent's base URL.",
                "http://gpu-01.lab:8700",
                required=True,
                max_length=limits.HOST_URL,
            ),
        ),
        "/gpu admin host add gpu-01 url=http://gpu-01.lab:8700",
        _ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "host", "drain"),
        "Stop starting jobs on a host.",
        (_host(),),
        "/gpu admin host drain gpu-01",
        _ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "host", "resume"),
        "Start jobs on a drained host again.",
        (_host(),),
        "/gpu admin host resume gpu-01",
        _ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "host", "remove"),
        "Unregister a host.",
        (_host(),),
        "/gpu admin host remove gpu-01",
        _ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "host", "list"), "List hosts.", (), "/gpu admin host list", _ADMIN, admin=True
    ),
    Subcommand(
        ("admin", "host", "rotate"),
        "Issue a host's agent a new token (shown once); the old one stops working.",
        (_host(),),
        "/gpu admin host rotate gpu-01",
        _ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "host", "revoke"),
        "Revoke a host's agent token: the host is not used until a new one is issued.",
        (_host(),),
        "/gpu admin host revoke gpu-01",
        _ADMIN,
        admin=True,
    ),
)

SPEC: Mapping[tuple[str, ...], Subcommand] = MappingProxyType(
    {command.path: command for command in SUBCOMMANDS}
)
