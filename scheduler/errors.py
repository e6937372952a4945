"""The errors paika reports, and what the user can do about them.

    PaikaError
     ├── UserError            something the user can fix: a `problem` code and the values it names
     │    ├── ParseError      (scheduler.grammar) the command text does not parse
     │    ├── NotFound        a job, team, template, quota or host does not exist
     │    ├── PermissionDenied  the user's role does not allow the action
     │    ├── Conflict        the action clashes with the current state (duplicate name …)
     │    └── IllegalTransition  a job cannot move from its state to the one asked for
     └── ConfigError          the policy file is wrong: file, key and problem

A user error carries no sentence: its `problem` is a catalogue key of the faces
(`bot/messages.yml`), which say what was wrong and how to fix it in the reader's language,
filled in with `values` (names, ids, numbers, /gpu examples). Errors from other libraries are
converted at the boundary (`raise X(...) from exc`), so callers only ever see these types.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

# What a problem may name: a name, an id, a number, a list of names, or a list of rows
# of such plain values (each said by its own catalogue key).
Plain = str | int | float
Value = Plain | tuple[str, ...] | tuple[Mapping[str, Plain], ...]


class Problem(StrEnum):
    """What went wrong in a service; each value is the catalogue key that says it."""

    JOB_NOT_FOUND = "problem.job_not_found"
    JOB_NAME_NOT_FOUND = "problem.job_name_not_found"
    JOB_NAME_AMBIGUOUS = "problem.job_name_ambiguous"
    TEAM_NOT_FOUND = "problem.team_not_found"
    QUOTA_NOT_FOUND = "problem.quota_not_found"
    HOST_NOT_FOUND = "problem.host_not_found"
    MEMBER_NOT_FOUND = "problem.member_not_found"
    TEMPLATE_NOT_FOUND = "problem.template_not_found"
    BUMP_NOT_FOUND = "problem.bump_not_found"
    BUMP_JOB_GONE = "problem.bump_job_gone"
    ADMINS_ONLY = "problem.admins_only"
    NOT_IN_A_TEAM = "problem.not_in_a_team"
    TEAM_GONE = "problem.team_gone"
    OTHER_TEAMS_JOB = "problem.other_teams_job"
    NOT_YOURS = "problem.not_yours"
    SUBMIT_FOR_OTHER_TEAM = "problem.submit_for_other_team"
    NO_TEAM_FOR_JOB = "problem.no_team_for_job"
    OTHER_TEAMS_QUOTAS = "problem.other_teams_quotas"
    APPROVERS_DECIDE = "problem.approvers_decide"
    TEMPLATE_NOT_YOURS = "problem.template_not_yours"
    UNKNOWN_GPU_TYPE = "problem.unknown_gpu_type"
    GPU_TYPE_NOT_LISTED = "problem.gpu_type_not_listed"
    UNKNOWN_QUOTA_GPU_TYPE = "problem.unknown_quota_gpu_type"
    NO_TYPE_MEETS_NEEDS = "problem.no_type_meets_needs"
    TOO_MANY_GPUS = "problem.too_many_gpus"
    TOO_MANY_HOURS = "problem.too_many_hours"
    QUEUE_TOO_DEEP = "problem.queue_too_deep"
    DONE_WITHOUT_OUTPUT = "problem.done_without_output"
    DONE_BEFORE_RUN = "problem.done_before_run"
    BUMP_ALREADY_PENDING = "problem.bump_already_pending"
    BUMP_NOT_WAITING = "problem.bump_not_waiting"
    BUMP_SAME_CLASS = "problem.bump_same_class"
    EXPIRY_IN_PAST = "problem.expiry_in_past"
    REPORT_DAYS_AND_SINCE = "problem.report_days_and_since"
    REPORT_SINCE_FUTURE = "problem.report_since_future"
    REPORT_EMPTY_PERIOD = "problem.report_empty_period"
    REPORT_UNTIL_BEFORE_SINCE = "problem.report_until_before_since"
    REPORT_PAGE_PAST_END = "problem.report_page_past_end"
    UNKNOWN_LANGUAGE = "problem.unknown_language"
    TEAM_EXISTS = "problem.team_exists"
    TEAM_HAS_MEMBERS = "problem.team_has_members"
    TEAM_HAS_JOBS = "problem.team_has_jobs"
    HOST_EXISTS = "problem.host_exists"
    HOST_URL_CREDENTIALS = "problem.host_url_credentials"
    HOST_URL_LINK_LOCAL = "problem.host_url_link_local"
    ACCOUNT_SYSTEM = "problem.account_system"
    HOST_IN_USE = "problem.host_in_use"
    HOST_HAS_HISTORY = "problem.host_has_history"
    KEPT_CHANGING = "problem.kept_changing"
    CANNOT_BECOME = "problem.cannot_become"
    DATABASE = "problem.database"
    TOKEN_ALREADY_REVOKED = "problem.token_already_revoked"
    NO_AGENT_SECRET = "problem.no_agent_secret"
    AGENT_SECRET_UNUSABLE = "problem.agent_secret_unusable"
    NO_ACCOUNT = "problem.no_account"
    BAD_ACCOUNT_NAME = "problem.bad_account_name"
    ACCOUNT_FOR_WHOM = "problem.account_for_whom"
    NO_ACCOUNT_MAPPING = "problem.no_account_mapping"
    SNAPSHOT_UNREADABLE = "problem.snapshot_unreadable"
    SNAPSHOT_SCHEMA_NEWER = "problem.snapshot_schema_newer"
    NO_SNAPSHOT = "problem.no_snapshot"
    RESTORE_NOT_EMPTY = "problem.restore_not_empty"
    BAD_MOMENT = "problem.bad_moment"
    STORE_UNAVAILABLE = "problem.store_unavailable"
    # Template versions (issue 14)
    TEMPLATE_VERSION_NOT_FOUND = "problem.template_version_not_found"
    OTHER_TEAMS_TEMPLATES = "problem.other_teams_templates"
    NO_SPEC_TO_REPEAT = "problem.no_spec_to_repeat"
    # Jobs that wait for other jobs (issue 32): after=, afterany=, data=after:, /gpu release.
    UPSTREAM_NOT_FOUND = "problem.upstream_not_found"
    UPSTREAM_FAILED = "problem.upstream_failed"
    NOT_WAITING_FOR_JOBS = "problem.not_waiting_for_jobs"
    # Maintenance windows (issue 32).
    MAINTENANCE_BACKWARDS = "problem.maintenance_backwards"
    MAINTENANCE_OVER = "problem.maintenance_over"
    MAINTENANCE_OVERLAPS = "problem.maintenance_overlaps"
    MAINTENANCE_NOT_FOUND = "problem.maintenance_not_found"
    # Cards booked for a team (issue 32).
    BOOKING_UNKNOWN_TYPE = "problem.booking_unknown_type"
    BOOKING_TOO_MANY = "problem.booking_too_many"
    BOOKING_NOT_FOUND = "problem.booking_not_found"
    # Pipelines: templates chained by then= (issue 32).
    PIPELINE_LOOP = "problem.pipeline_loop"
    PIPELINE_TOO_LONG = "problem.pipeline_too_long"
    PIPELINE_AND_ARRAY = "problem.pipeline_and_array"
    # Arrays: count=, sweep=, max_running= (issue 32).
    ARRAY_COUNT_AND_SWEEP = "problem.array_count_and_sweep"
    ARRAY_MAX_RUNNING_ALONE = "problem.array_max_running_alone"
    ARRAY_NAME_TOO_LONG = "problem.array_name_too_long"
    ARRAY_NEEDS_APPROVAL = "problem.array_needs_approval"
    ARRAY_MEMBER_NOT_FOUND = "problem.array_member_not_found"
    SWEEP_MALFORMED = "problem.sweep_malformed"
    SWEEP_KEY_TWICE = "problem.sweep_key_twice"
    SWEEP_TOO_BIG = "problem.sweep_too_big"
    SWEEP_ONE_POINT = "problem.sweep_one_point"
    # grace= or checkpoint= for a job that did not say preemptible=yes.
    NEEDS_PREEMPTIBLE = "problem.needs_preemptible"
    # /gpu why
    WHY_BEFORE_SUBMIT = "problem.why_before_submit"
    # The policy config under version control (/gpu config …).
    CONFIG_NOTHING_STORED = "problem.config_nothing_stored"
    CONFIG_INVALID = "problem.config_invalid"
    CONFIG_UNKNOWN_KEY = "problem.config_unknown_key"
    CONFIG_UNCHANGED = "problem.config_unchanged"
    CONFIG_VERSION_NOT_FOUND = "problem.config_version_not_found"
    CONFIG_ALREADY_IN_FORCE = "problem.config_already_in_force"
    CONFIG_KEY_NOT_FOUND = "problem.config_key_not_found"
    # /gpu logs (issue 15)
    LOGS_NEVER_RAN = "problem.logs_never_ran"
    LOGS_HOST_NO_KEY = "problem.logs_host_no_key"
    LOGS_HOST_UNREACHABLE = "problem.logs_host_unreachable"
    LOGS_HOST_REFUSED = "problem.logs_host_refused"
    LOGS_NOT_KEPT = "problem.logs_not_kept"
    # The output is on a batch cluster's filesystem that this machine cannot read.
    LOGS_ON_CLUSTER = "problem.logs_on_cluster"
    # The host's executor keeps no output paika can read.
    LOGS_NOT_READABLE = "problem.logs_not_readable"
    # Outputs a job reports of itself (issue 15): `paika report`, its endpoint, its file.
    JOB_REPORT_EMPTY = "problem.job_report_empty"
    JOB_REPORT_TOO_MANY = "problem.job_report_too_many"
    JOB_REPORT_TOO_LARGE = "problem.job_report_too_large"
    JOB_REPORT_BAD_JSON = "problem.job_report_bad_json"
    JOB_REPORT_BAD_FIELD = "problem.job_report_bad_field"
    JOB_REPORT_TOKEN_REFUSED = "problem.job_report_token_refused"
    JOB_REPORT_RUN_ENDED = "problem.job_report_run_ended"
    JOB_REPORT_RATE_LIMITED = "problem.job_report_rate_limited"
    JOB_REPORT_NOT_IN_JOB = "problem.job_report_not_in_job"
    JOB_REPORT_UNREACHABLE = "problem.job_report_unreachable"
    JOB_REPORT_REFUSED = "problem.job_report_refused"
    JOB_REPORT_FILE_UNWRITABLE = "problem.job_report_file_unwritable"


class Action(StrEnum):
    """What a refused user asked to do, named in the refusal (catalogue group `action`)."""

    MARK_READY = "mark_ready"
    CANCEL = "cancel"
    MARK_DONE = "mark_done"
    BUMP = "bump"
    GRANT_QUOTAS = "grant_quotas"
    RENEW_QUOTAS = "renew_quotas"
    ADJUST_QUOTAS = "adjust_quotas"
    LIST_ALL_QUOTAS = "list_all_quotas"
    ADD_TEAMS = "add_teams"
    REMOVE_TEAMS = "remove_teams"
    ADD_MEMBERS = "add_members"
    REMOVE_MEMBERS = "remove_members"
    CHANGE_ROLES = "change_roles"
    ADD_HOSTS = "add_hosts"
    DRAIN_HOSTS = "drain_hosts"
    RESUME_HOSTS = "resume_hosts"
    REMOVE_HOSTS = "remove_hosts"
    LIST_MEMBERS = "list_members"
    LIST_HOSTS = "list_hosts"
    ISSUE_TOKENS = "issue_tokens"
    REVOKE_TOKENS = "revoke_tokens"
    MANAGE_ACCOUNTS = "manage_accounts"
    REPEAT = "repeat"  # submit again=<job> (issue 14)
    READ_CONFIG = "read_config"
    CHANGE_CONFIG = "change_config"
    READ_LOGS = "read_logs"  # /gpu logs (issue 15)
    RELEASE = "release"  # /gpu release: go on without the jobs it waits for (issue 32)
    PLAN_MAINTENANCE = "plan_maintenance"  # /gpu admin maintenance … (issue 32)
    BOOK_CARDS = "book_cards"  # /gpu admin reserve … (issue 32)


class PaikaError(Exception):
    """Base of every error paika raises on purpose."""


class UserError(PaikaError):
    """An error the user can fix: what was wrong as a code, with the values it names."""

    def __init__(self, problem: StrEnum, /, **values: Value) -> None:
        self.problem = problem
        self.values: Mapping[str, Value] = values
        super().__init__(str(self))

    def __str__(self) -> str:
        # For logs and audit records; people read the catalogue's sentence instead.
        named = ", ".join(f"{name}={value!r}" for name, value in self.values.items())
        return f"{self.problem.value}({named})"


class NotFound(UserError):
    """The thing a command names does not exist (or the user may not see it)."""


class PermissionDenied(UserError):
    """The user's role does not allow this action."""


class Conflict(UserError):
    """The action clashes with what is already there."""


class IllegalTransition(UserError):
    """A job cannot move from its current state to the one asked for."""

    def __init__(self, job_id: int, current: str, wanted: str) -> None:
        self.job_id = job_id
        self.current = current
        self.wanted = wanted
        super().__init__(Problem.CANNOT_BECOME, job_id=job_id, current=current, wanted=wanted)


class ConfigError(PaikaError):
    """The policy file is invalid; names the file, the key and what is wrong."""

    def __init__(self, path: str, key: str, problem: str) -> None:
        self.path = path
        self.key = key
        self.problem = problem
        self.unknown = False  # the key is not a key of the policy file at all
        super().__init__(f"{path}: {key}: {problem}")
