"""Every /gpu subcommand and its keys. The parser and the help text are both read from here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from types import MappingProxyType

from scheduler.grammar.values import ValueKind
from scheduler.policy.priority_classes import CLASS_NAMES, PriorityClass
from storage import limits

# What a user may type for priority= (and a bump's to=), in rank order.
PRIORITIES = CLASS_NAMES
ROLES = ("member", "approver", "admin")
LANGUAGES = ("en", "zh")
YES_NO = ("yes", "no")
# What a memory size may end with, in any case: all mean GiB, as the catalog counts a card.
MEMORY_UNITS = ("GiB", "GB", "G")
# The most jobs one job may wait for (after= and afterany= each).
MAX_UPSTREAM = 16
MAINTENANCE_REASON = 500  # maintenance_windows.reason
MAX_ARRAY = 1000  # the most jobs one count= or sweep= makes
SWEEP_LIMIT = 500  # the sweep's text
# Free text stored in unbounded TEXT columns; a value that lands in a String column takes its
# length from storage.limits instead (tests/storage/test_limits.py checks every key).
TEXT_LIMIT = 500
CMD_LIMIT = 2000
# Every number has both bounds, so nothing huge reaches sums of hours or cost.
JOB_HOURS_MIN = 0.01
JOB_HOURS_MAX = 100_000
# What one row of `/gpu report` is (scheduler.service.report.Grouping).
REPORT_GROUPINGS = ("team", "user", "project", "round", "type", "array")
QUOTA_HOURS_MAX = 10_000_000  # about 1,100 GPU-years: more than any one grant


class DefaultWord(StrEnum):
    """A default that is not a value but depends on who asks; help names it in words."""

    YOUR_TEAM = "your_team"
    ALL_TEAMS = "all_teams"


class Section(StrEnum):
    """The part of the help overview a command is listed under."""

    JOBS = "jobs"
    QUOTA = "quota"
    TEMPLATES = "templates"
    OTHER = "other"
    ADMIN = "admin"


@dataclass(frozen=True)
class Key:
    """One key a subcommand accepts, as key=value or, when positional, as a bare word."""

    name: str
    kind: ValueKind
    example: str  # the value only; see example_arg for "name=value"
    # Which of the name's meanings this key has, where one name means different things in
    # different commands (the team that pays, the team to show …); with the name it picks
    # the key's help in the catalogue (see `help_code`).
    about: str | None = None
    required: bool = False
    default: str | None = None  # typed form; defaults() converts it, help shows it
    default_shown: str | None = None  # shown instead when the service works the default out
    default_word: DefaultWord | None = None  # the same, when the default is not a value
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
    # Other names the key is typed as (people coming from other tools write gpu_mem=);
    # the value is kept under `name`, and giving two of the names is refused.
    aliases: tuple[str, ...] = ()
    # Unit words a number may end with, in any case, all meaning the key's own unit
    # (20GB, 20gib and 20G are 20 GiB); the bare number means the same.
    units: tuple[str, ...] = ()

    def answers_to(self, typed: str) -> bool:
        """Whether `typed` names this key: its name or one of its aliases."""
        return typed == self.name or typed in self.aliases

    @property
    def help_code(self) -> str:
        """The catalogue key of this key's help."""
        return ".".join(("grammar.key", self.name, *((self.about,) if self.about else ())))

    @property
    def shown_default(self) -> str | None:
        """The default as help shows it, when it is a value (see `default_word` otherwise)."""
        return self.default_shown or self.default

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
    keys: tuple[Key, ...]
    example: str
    section: Section
    admin: bool = False
    # When this key is given, required keys may come from a saved template, so the parser
    # leaves the check to the caller (check_required after merging).
    template_key: str | None = None
    # The same for this key: an earlier job whose spec fills the keys not given (issue 14).
    repeat_key: str | None = None

    def fills_later(self, values: Mapping[str, object]) -> bool:
        """Whether a saved template or an earlier job fills the required keys not given."""
        return any(
            key is not None and key in values for key in (self.template_key, self.repeat_key)
        )

    # Keys not declared here are taken too (at least one), as {key as typed: FreeValue}
    # under this argument: `config set` names any value of the policy by its dotted key.
    free_keys: str | None = None

    @property
    def summary_code(self) -> str:
        """The catalogue key of the one line that says what the command does."""
        return ".".join(("grammar.summary", *self.path))

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
        free = ("<key>=<value> …",) if self.free_keys else ()
        return " ".join((self.heading, *free, *(key.placeholder for key in ordered)))

    def key(self, name: str) -> Key | None:
        """The key called `name` (or typed as one of its aliases), or None."""
        return next((key for key in self.keys if key.answers_to(name)), None)


def _job() -> Key:
    return Key(
        "job",
        ValueKind.JOB_REF,
        "42",
        required=True,
        positional=True,
        max_length=limits.JOB_NAME,
    )


def _request() -> Key:
    return Key("request", ValueKind.ID, "7", required=True, positional=True)


def _reason(required: bool, about: str) -> Key:
    return Key("reason", ValueKind.TEXT, "paper deadline on Friday", about, required=required)


def _team(about: str, *, required: bool = False, default_word: DefaultWord | None = None) -> Key:
    return Key(
        "team",
        ValueKind.LABEL,
        "vision",
        about,
        required=required,
        default_word=default_word,
        max_length=limits.TEAM_NAME,
    )


def _user(name: str, *, positional: bool) -> Key:
    return Key(
        name,
        ValueKind.USER,
        "@alice",
        required=True,
        positional=positional,
        max_length=limits.SLACK_ID,
    )


def _someone() -> Key:
    """The person an account mapping is for (or give team= instead)."""
    return Key("user", ValueKind.USER, "@alice", positional=True, max_length=limits.SLACK_ID)


def _account() -> Key:
    return Key("account", ValueKind.NAME, "alice", required=True, max_length=limits.UNIX_ACCOUNT)


def _named(about: str, example: str, max_length: int, kind: ValueKind = ValueKind.LABEL) -> Key:
    return Key(
        "name",
        kind,
        example,
        about,
        required=True,
        positional=True,
        max_length=max_length,
    )


def _template_name() -> Key:
    return _named("template", "bert-base", limits.TEMPLATE_NAME)


def _team_name() -> Key:
    return _named("team", "vision", limits.TEAM_NAME)


def _priority(name: str) -> Key:
    return Key(
        name, ValueKind.CHOICE, PriorityClass.NORMAL.value, required=True, choices=PRIORITIES
    )


def _expires() -> Key:
    return Key("expires", ValueKind.DATE, "2025-12-31", required=True)


def _quota_id() -> Key:
    return Key("id", ValueKind.ID, "3", required=True, positional=True)


def _host() -> Key:
    # A host's name stays ASCII: it names the host in Slurm job names and in logs.
    return _named("host", "gpu-01", limits.HOST_NAME, ValueKind.NAME)


def _role(*, required: bool) -> Key:
    default = None if required else "member"
    return Key(
        "role",
        ValueKind.CHOICE,
        "approver",
        required=required,
        default=default,
        choices=ROLES,
    )


SUBMIT_KEYS: tuple[Key, ...] = (
    Key(
        "name",
        ValueKind.LABEL,
        "bert-ft",
        "job",
        required=True,
        max_length=limits.JOB_NAME,
    ),
    Key("gpus", ValueKind.INT, "2", default="1", minimum=1, maximum=64),
    Key("type", ValueKind.GPU_TYPES, "A100-80GB,H100", max_length=limits.GPU_TYPE),
    # GiB per GPU: the least a card must have, or, with share=yes, what the job uses.
    Key(
        "mem",
        ValueKind.FLOAT,
        "40",
        minimum=1,
        maximum=1024,
        aliases=("gpu_mem",),
        units=MEMORY_UNITS,
    ),
    Key("speed", ValueKind.FLOAT, "1.5", minimum=0.01, maximum=100),
    Key(
        "hours",
        ValueKind.FLOAT,
        "24",
        required=True,
        # 36 GPU-seconds: the least estimate that means anything; a smaller one (1e-320 was
        # taken) makes the ratio of actual to estimated hours overflow.
        minimum=JOB_HOURS_MIN,
        maximum=JOB_HOURS_MAX,
    ),
    _priority("priority"),
    Key(
        "data",
        ValueKind.DATA,
        "ready",
        required=True,
        max_length=limits.DATA_LOCATION,
    ),
    _team("pays", default_word=DefaultWord.YOUR_TEAM),
    Key(
        "cmd",
        ValueKind.TEXT,
        "python train.py --lr 3e-4",
        required=True,
        max_length=CMD_LIMIT,
    ),
    Key(
        "image",
        ValueKind.IMAGE,
        "nvcr.io/nvidia/pytorch:24.05-py3",
        max_length=limits.IMAGE,
    ),
    Key("template", ValueKind.LABEL, "bert-base", max_length=limits.TEMPLATE_NAME),
    # A job to submit again: its spec fills the keys not given (issue 14).
    Key("again", ValueKind.JOB_REF, "42", max_length=limits.JOB_NAME),
    # What the job is part of, for the ledger's reports (issue 15).
    Key("project", ValueKind.LABEL, "llm-pretrain", max_length=limits.PROJECT),
    Key("round", ValueKind.LABEL, "3", max_length=limits.ROUND),
    # The job checkpoints and resumes: paika may stop it, with its grace, and requeue it
    # (issue 16); where it keeps its checkpoint.
    Key("preemptible", ValueKind.CHOICE, "yes", default="no", choices=YES_NO),
    Key(
        "grace",
        ValueKind.DURATION,
        "5m",
        minimum=limits.GRACE_MIN_S,
        maximum=limits.GRACE_MAX_S,
    ),
    Key("checkpoint", ValueKind.LOCATION, "/mnt/nas/ckpt/bert-ft", max_length=limits.CHECKPOINT),
    # A one-card job that accepts a card shared with other work, using the memory it
    # declares with mem= (issue 31; the rules are in scheduler.grammar.sharing).
    Key("share", ValueKind.CHOICE, "yes", default="no", choices=YES_NO),
    # Jobs this one waits for (issue 32): `after` until they succeed, `afterany` until they
    # end, whatever their outcome. Only jobs submitted before it, so the waits form no cycle.
    Key("after", ValueKind.JOB_IDS, "#12,#13", maximum=MAX_UPSTREAM),
    Key("afterany", ValueKind.JOB_IDS, "#12", maximum=MAX_UPSTREAM),
    # An array of jobs from one submit (issue 32): `count` copies told their place by
    # $PAIKA_ARRAY_INDEX, or one job per point of a `sweep` grid ("lr=1e-4,3e-4 bs=32,64",
    # each value in the command as {lr}); `max_running` of them at once (Slurm's %N).
    Key("count", ValueKind.INT, "20", minimum=2, maximum=MAX_ARRAY),
    Key("sweep", ValueKind.TEXT, "lr=1e-4,3e-4 bs=32,64", max_length=SWEEP_LIMIT),
    Key("max_running", ValueKind.INT, "4", minimum=1, maximum=MAX_ARRAY),
)

_TEMPLATE_KEYS = tuple(
    # A template stores only what was given, so nothing in it is required or defaulted.
    replace(key, required=False, default=None, default_shown=None, default_word=None)
    for key in SUBMIT_KEYS
    # Which jobs one waits for, and how many copies, belong to one submission, never to a
    # template.
    if key.name
    not in ("name", "template", "again", "after", "afterany", "count", "sweep", "max_running")
) + (
    # A pipeline (issue 32): the template of the step after this one. Submitting the first
    # template submits every step, each waiting for the one before (scheduler/commands.py).
    Key("then", ValueKind.LABEL, "train", "template", max_length=limits.TEMPLATE_NAME),
)

SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand(
        ("submit",),
        SUBMIT_KEYS,
        "/gpu submit name=bert-ft gpus=2 type=A100-80GB hours=12 priority=normal "
        'data=ready cmd="python train.py --lr 3e-4"',
        Section.JOBS,
        template_key="template",
        repeat_key="again",
    ),
    Subcommand(
        ("ready",),
        (
            _job(),
            Key(
                "location",
                ValueKind.TEXT,
                "/mnt/nas/imagenet",
                max_length=limits.DATA_LOCATION,
            ),
        ),
        "/gpu ready 42",
        Section.JOBS,
    ),
    # Go on without the jobs it waits for (after=, afterany=, data=after:), e.g. once one of
    # them failed (issue 32).
    Subcommand(("release",), (_job(),), "/gpu release 43", Section.JOBS),
    Subcommand(
        ("queue",),
        (
            Key(
                "scope",
                ValueKind.CHOICE,
                "mine",
                default="all",
                choices=("mine", "team", "all"),
                positional=True,
            ),
        ),
        "/gpu queue mine",
        Section.JOBS,
    ),
    Subcommand(("board",), (), "/gpu board", Section.JOBS),
    Subcommand(("status",), (_job(),), "/gpu status 42", Section.JOBS),
    Subcommand(
        ("why",),
        (_job(), Key("at", ValueKind.TIME, "2026-11-30T14:30")),
        "/gpu why 42",
        Section.JOBS,
    ),
    Subcommand(
        ("cancel",),
        (_job(), _reason(False, "owner")),
        '/gpu cancel 42 reason="wrong learning rate"',
        Section.JOBS,
    ),
    Subcommand(
        ("bump",),
        (_job(), _priority("to"), _reason(True, "approver")),
        '/gpu bump 42 to=core reason="paper deadline on Friday"',
        Section.JOBS,
    ),
    Subcommand(("approve",), (_request(),), "/gpu approve 7", Section.JOBS),
    Subcommand(
        ("deny",),
        (_request(), _reason(False, "asker")),
        '/gpu deny 7 reason="core slots are full this week"',
        Section.JOBS,
    ),
    Subcommand(
        ("done",),
        (
            _job(),
            Key("output", ValueKind.TEXT, "s3://ckpt/bert-ft/final"),
            Key("metric", ValueKind.METRIC, "loss:0.31", repeatable=True),
        ),
        "/gpu done 42 output=s3://ckpt/bert-ft/final metric=loss:0.31 metric=top1:76.2",
        Section.JOBS,
    ),
    Subcommand(
        ("quota",),
        (_team("shown", default_word=DefaultWord.YOUR_TEAM),),
        "/gpu quota team=vision",
        Section.QUOTA,
    ),
    Subcommand(
        ("report",),
        (
            Key("by", ValueKind.CHOICE, "project", "report", choices=REPORT_GROUPINGS),
            _team("only", default_word=DefaultWord.ALL_TEAMS),
            Key("user", ValueKind.USER, "@alice", "report", max_length=limits.SLACK_ID),
            Key("project", ValueKind.LABEL, "llm-pretrain", "report", max_length=limits.PROJECT),
            Key("round", ValueKind.LABEL, "3", "report", max_length=limits.ROUND),
            Key("type", ValueKind.NAME, "A100-80GB", "report", max_length=limits.GPU_TYPE),
            Key("days", ValueKind.INT, "30", default_shown="7", minimum=1, maximum=366),
            Key("since", ValueKind.DATE, "2026-11-01"),
            Key("until", ValueKind.DATE, "2026-11-30", "report"),
            Key("metric", ValueKind.NAME, "top1", "report", max_length=limits.OUTPUT_NAME),
            Key("page", ValueKind.INT, "2", "report", minimum=1, maximum=100_000),
            Key("file", ValueKind.CHOICE, "csv", "report", choices=("csv",)),
        ),
        "/gpu report by=round project=llm-pretrain days=90",
        Section.QUOTA,
    ),
    Subcommand(
        ("template", "save"),
        (_template_name(), *_TEMPLATE_KEYS),
        "/gpu template save bert-base gpus=2 type=A100-80GB priority=normal data=ready "
        'cmd="python train.py"',
        Section.TEMPLATES,
    ),
    Subcommand(("template", "list"), (), "/gpu template list", Section.TEMPLATES),
    Subcommand(
        ("template", "show"),
        (
            _template_name(),
            Key("version", ValueKind.INT, "2", "template", minimum=1, maximum=1_000_000),
        ),
        "/gpu template show bert-base version=2",
        Section.TEMPLATES,
    ),
    Subcommand(
        ("template", "delete"),
        (_template_name(),),
        "/gpu template delete bert-base",
        Section.TEMPLATES,
    ),
    Subcommand(
        ("template", "history"),
        (
            _template_name(),
            _team("templates"),
            Key("limit", ValueKind.INT, "5", "template", minimum=1, maximum=1000),
        ),
        "/gpu template history bert-base limit=5",
        Section.TEMPLATES,
    ),
    Subcommand(
        ("lang",),
        (
            Key(
                "language",
                ValueKind.CHOICE,
                "zh",
                required=True,
                choices=LANGUAGES,
                positional=True,
            ),
        ),
        "/gpu lang zh",
        Section.OTHER,
    ),
    Subcommand(
        ("help",),
        (Key("topic", ValueKind.WORDS, "submit", positional=True, rest=True),),
        "/gpu help submit",
        Section.OTHER,
    ),
    Subcommand(
        ("admin", "team", "add"),
        (
            _team_name(),
            Key("channel", ValueKind.CHANNEL, "#vision-gpu", max_length=limits.CHANNEL),
        ),
        "/gpu admin team add vision channel=#vision-gpu",
        Section.ADMIN,
        admin=True,
    ),
    Subcommand(("admin", "team", "list"), (), "/gpu admin team list", Section.ADMIN, admin=True),
    Subcommand(
        ("admin", "team", "remove"),
        (_team_name(),),
        "/gpu admin team remove vision",
        Section.ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "member", "add"),
        (
            _user("user", positional=True),
            _team("joined", required=True),
            _role(required=False),
        ),
        "/gpu admin member add @alice team=vision role=approver",
        Section.ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "member", "remove"),
        (_user("user", positional=True),),
        "/gpu admin member remove @alice",
        Section.ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "member", "role"),
        (_user("user", positional=True), _role(required=True)),
        "/gpu admin member role @alice role=approver",
        Section.ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "member", "list"),
        (_team("only"),),
        "/gpu admin member list team=vision",
        Section.ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "quota", "add"),
        (
            _team("granted", required=True),
            Key(
                "type",
                ValueKind.GPU_TYPE_OR_ANY,
                "A100-80GB",
                "quota",
                default="any",
                max_length=limits.GPU_TYPE,
            ),
            Key(
                "hours",
                ValueKind.FLOAT,
                "5000",
                "granted",
                required=True,
                minimum=0,
                above_minimum=True,
                maximum=QUOTA_HOURS_MAX,
            ),
            _expires(),
            _user("owner", positional=False),
            Key("note", ValueKind.TEXT, "Q4 grant"),
        ),
        "/gpu admin quota add team=vision type=A100-80GB hours=5000 expires=2025-12-31 "
        'owner=@alice note="Q4 grant"',
        Section.ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "quota", "renew"),
        (
            _quota_id(),
            _expires(),
            Key(
                "hours",
                ValueKind.FLOAT,
                "8000",
                "renewed",
                minimum=0,
                above_minimum=True,
                maximum=QUOTA_HOURS_MAX,
            ),
        ),
        "/gpu admin quota renew 3 expires=2026-06-30 hours=8000",
        Section.ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "quota", "adjust"),
        (
            _quota_id(),
            Key(
                "hours",
                ValueKind.FLOAT,
                "4000",
                "adjusted",
                required=True,
                minimum=0,
                maximum=QUOTA_HOURS_MAX,
            ),
            _reason(True, "log"),
        ),
        '/gpu admin quota adjust 3 hours=4000 reason="returned unused hours"',
        Section.ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "quota", "list"),
        (_team("only"),),
        "/gpu admin quota list team=vision",
        Section.ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "host", "add"),
        (
            _host(),
            Key(
                "url",
                ValueKind.URL,
                "http://gpu-01.lab:8700",
                required=True,
                max_length=limits.HOST_URL,
            ),
        ),
        "/gpu admin host add gpu-01 url=http://gpu-01.lab:8700",
        Section.ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "host", "drain"),
        (_host(),),
        "/gpu admin host drain gpu-01",
        Section.ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "host", "resume"),
        (_host(),),
        "/gpu admin host resume gpu-01",
        Section.ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "host", "remove"),
        (_host(),),
        "/gpu admin host remove gpu-01",
        Section.ADMIN,
        admin=True,
    ),
    Subcommand(("admin", "host", "list"), (), "/gpu admin host list", Section.ADMIN, admin=True),
    # A host's planned maintenance (issue 32): no job is started there that would still run
    # when it opens, what runs at its start is stopped with its grace and queued again, and
    # the host takes jobs again when it ends.
    Subcommand(
        ("admin", "maintenance", "add"),
        (
            Key(
                "host",
                ValueKind.NAME,
                "gpu-01",
                "maintenance",
                required=True,
                max_length=limits.HOST_NAME,
            ),
            Key("from", ValueKind.TIME, "2026-12-08T22:00", "maintenance", required=True),
            Key("until", ValueKind.TIME, "2026-12-09T02:00", "maintenance", required=True),
            Key(
                "reason",
                ValueKind.TEXT,
                "driver 570",
                "maintenance",
                required=True,
                max_length=MAINTENANCE_REASON,
            ),
        ),
        "/gpu admin maintenance add host=gpu-01 from=2026-12-08T22:00 until=2026-12-09T02:00 "
        'reason="driver 570"',
        Section.ADMIN,
        admin=True,
    ),
    # Cards booked ahead for a team (issue 32): before the window no other team's job is
    # started on them that would still run when it opens; inside it only the team uses them.
    Subcommand(
        ("admin", "reserve", "add"),
        (
            Key("gpus", ValueKind.INT, "16", "reserve", required=True, minimum=1, maximum=100_000),
            Key(
                "type",
                ValueKind.NAME,
                "A100-80GB",
                "reserve",
                required=True,
                max_length=limits.GPU_TYPE,
            ),
            Key("from", ValueKind.TIME, "2026-12-11T09:00", "reserve", required=True),
            Key("until", ValueKind.TIME, "2026-12-11T21:00", "reserve", required=True),
            _team("reserve", required=True),
            Key(
                "reason",
                ValueKind.TEXT,
                "paper deadline",
                "reserve",
                required=True,
                max_length=MAINTENANCE_REASON,
            ),
        ),
        "/gpu admin reserve add gpus=16 type=A100-80GB from=2026-12-11T09:00 "
        'until=2026-12-11T21:00 team=nlp reason="paper deadline"',
        Section.ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "reserve", "list"), (), "/gpu admin reserve list", Section.ADMIN, admin=True
    ),
    Subcommand(
        ("admin", "reserve", "cancel"),
        (Key("booking", ValueKind.ID, "2", required=True, positional=True),),
        "/gpu admin reserve cancel 2",
        Section.ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "maintenance", "list"),
        (),
        "/gpu admin maintenance list",
        Section.ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "maintenance", "cancel"),
        (Key("window", ValueKind.ID, "3", required=True, positional=True),),
        "/gpu admin maintenance cancel 3",
        Section.ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "account", "set"),
        (
            _someone(),
            _team("mapped"),
            _account(),
            # Map to an account named as a system account all the same (audited as forced).
            Key("force", ValueKind.CHOICE, "yes", "account", default="no", choices=YES_NO),
        ),
        "/gpu admin account set @alice account=alice",
        Section.ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "account", "remove"),
        (_someone(), _team("mapped")),
        "/gpu admin account remove team=vision",
        Section.ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "account", "list"), (), "/gpu admin account list", Section.ADMIN, admin=True
    ),
    Subcommand(
        ("admin", "host", "rotate"),
        (_host(),),
        "/gpu admin host rotate gpu-01",
        Section.ADMIN,
        admin=True,
    ),
    Subcommand(
        ("admin", "host", "revoke"),
        (_host(),),
        "/gpu admin host revoke gpu-01",
        Section.ADMIN,
        admin=True,
    ),
)

# The policy config under version control: every command is an admin's.
CONFIG_KEY_LIMIT = 200
CONFIG_HISTORY_MAX = 100
SUBCOMMANDS += (
    Subcommand(
        ("config", "show"),
        (Key("key", ValueKind.TEXT, "scheduler.cycle_seconds", max_length=CONFIG_KEY_LIMIT),),
        "/gpu config show key=scheduler.cycle_seconds",
        Section.ADMIN,
        admin=True,
    ),
    Subcommand(
        ("config", "set"),
        (_reason(True, "config"),),
        '/gpu config set scheduler.cycle_seconds=5 reason="a faster cycle for the sweep"',
        Section.ADMIN,
        admin=True,
        free_keys="settings",
    ),
    Subcommand(
        ("config", "history"),
        (Key("limit", ValueKind.INT, "20", default="10", minimum=1, maximum=CONFIG_HISTORY_MAX),),
        "/gpu config history limit=20",
        Section.ADMIN,
        admin=True,
    ),
    Subcommand(
        ("config", "diff"),
        (
            Key("v1", ValueKind.ID, "3", required=True, positional=True),
            Key("v2", ValueKind.ID, "5", required=True, positional=True),
        ),
        "/gpu config diff 3 5",
        Section.ADMIN,
        admin=True,
    ),
    Subcommand(
        ("config", "rollback"),
        (
            Key("version", ValueKind.ID, "3", required=True, positional=True),
            _reason(True, "config"),
        ),
        '/gpu config rollback 3 reason="version 4 starved the idle class"',
        Section.ADMIN,
        admin=True,
    ),
    # Match review and estimates (issue 15): which runs were on cards bigger than they
    # needed, and whose estimates are off.
    Subcommand(("match",), (_job(),), "/gpu match 42", Section.JOBS),
    Subcommand(
        ("report", "matches"),
        (
            _team("only", default_word=DefaultWord.ALL_TEAMS),
            Key("days", ValueKind.INT, "30", default_shown="7", minimum=1, maximum=366),
            Key("since", ValueKind.DATE, "2026-11-01"),
            Key("limit", ValueKind.INT, "20", "matches", default="10", minimum=1, maximum=100),
        ),
        "/gpu report matches days=30 limit=20",
        Section.QUOTA,
    ),
    Subcommand(
        ("report", "estimates"),
        (_team("only", default_word=DefaultWord.ALL_TEAMS),),
        "/gpu report estimates team=vision",
        Section.QUOTA,
    ),
)

# A job's output and its place in the order (issue 15): reads, for whoever may see them.
LOG_LINES_DEFAULT = 50
LOG_LINES_MAX = 1000
SUBCOMMANDS += (
    Subcommand(
        ("logs",),
        (
            _job(),
            Key(
                "lines",
                ValueKind.INT,
                "200",
                default=str(LOG_LINES_DEFAULT),
                minimum=1,
                maximum=LOG_LINES_MAX,
            ),
        ),
        "/gpu logs 42 lines=200",
        Section.JOBS,
    ),
    Subcommand(("priority",), (_job(),), "/gpu priority 42", Section.JOBS),
)

SPEC: Mapping[tuple[str, ...], Subcommand] = MappingProxyType(
    {command.path: command for command in SUBCOMMANDS}
)
