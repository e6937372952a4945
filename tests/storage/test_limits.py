"""Every column a /gpu key writes holds exactly what the grammar lets through.

The grammar reads its per-key limits from storage/limits.py; these tests read the column
lengths from the SQLModel metadata itself, so a model that drifts from the constants (or
a key that drifts from its column) fails here instead of as a database error on
PostgreSQL or MariaDB. Note: storage/models/jobs.py still spells its lengths as literals;
this is what keeps them equal to the constants.
"""

from __future__ import annotations

import pytest
from sqlalchemy import Column, String

from scheduler.grammar import SPEC, SUBCOMMANDS, Key, ValueKind
from storage import limits
from storage.models.base import metadata

# (command, key) → (the limit the key must have, the columns its value ends up in).
# Template keys land in the jobs table when the template is used, so they map like submit's.
_SUBMIT = {
    "name": (limits.JOB_NAME, ["jobs.name"]),
    "type": (limits.GPU_TYPE, ["gpus.gpu_type", "matches.chosen_type"]),
    "priority": (limits.PRIORITY, ["jobs.priority"]),
    "data": (limits.DATA_LOCATION, ["jobs.data_location"]),
    "team": (limits.TEAM_NAME, ["teams.name"]),
    "image": (limits.IMAGE, ["jobs.image"]),
    "template": (limits.TEMPLATE_NAME, ["jobs.template", "templates.name"]),
    "again": (limits.JOB_NAME, ["jobs.name"]),
    "project": (limits.PROJECT, ["jobs.project"]),
    "round": (limits.ROUND, ["jobs.round"]),
    "checkpoint": (limits.CHECKPOINT, ["jobs.checkpoint"]),
}
_JOB = (limits.JOB_NAME, ["jobs.name"])
_TEAM = (limits.TEAM_NAME, ["teams.name"])
_USER = (limits.SLACK_ID, ["members.slack_user_id"])
_HOST = (limits.HOST_NAME, ["hosts.name"])
_TEMPLATE = (limits.TEMPLATE_NAME, ["templates.name", "template_versions.name"])
_ROLE = (limits.ROLE, ["members.role"])

STRING_COLUMNS: dict[tuple[str, str], tuple[int, list[str]]] = {
    **{("submit", key): limit for key, limit in _SUBMIT.items()},
    **{
        ("template save", key): limit
        for key, limit in _SUBMIT.items()
        if key not in ("name", "template", "again")
    },
    ("template save", "name"): _TEMPLATE,
    ("template show", "name"): _TEMPLATE,
    ("template delete", "name"): _TEMPLATE,
    ("template history", "name"): _TEMPLATE,
    ("template history", "team"): _TEAM,
    ("ready", "job"): _JOB,
    ("release", "job"): _JOB,
    ("admin maintenance add", "host"): (limits.HOST_NAME, ["maintenance_windows.host"]),
    ("admin maintenance add", "reason"): (500, ["maintenance_windows.reason"]),
    ("admin reserve add", "type"): (limits.GPU_TYPE, ["team_reservations.gpu_type"]),
    ("admin reserve add", "team"): _TEAM,
    ("admin reserve add", "reason"): (500, ["team_reservations.reason"]),
    ("ready", "location"): (limits.DATA_LOCATION, ["jobs.data_location"]),
    ("status", "job"): _JOB,
    ("why", "job"): _JOB,
    ("logs", "job"): _JOB,
    ("priority", "job"): _JOB,
    ("cancel", "job"): _JOB,
    ("bump", "job"): _JOB,
    ("bump", "to"): (limits.PRIORITY, ["bump_requests.to_priority", "jobs.priority"]),
    ("done", "job"): _JOB,
    ("quota", "team"): _TEAM,
    ("report", "team"): _TEAM,
    # The report's filters are compared with these columns.
    ("report", "user"): (limits.SLACK_ID, ["jobs.owner"]),
    ("report", "project"): (limits.PROJECT, ["jobs.project"]),
    ("report", "round"): (limits.ROUND, ["jobs.round"]),
    ("report", "type"): (limits.GPU_TYPE, ["ledger_entries.gpu_type"]),
    ("report", "metric"): (limits.OUTPUT_NAME, ["job_outputs.name"]),
    ("lang", "language"): (limits.LANGUAGE, ["user_prefs.language"]),
    ("admin team add", "name"): _TEAM,
    ("admin team add", "channel"): (limits.CHANNEL, ["teams.channel"]),
    ("admin team remove", "name"): _TEAM,
    ("admin member add", "user"): _USER,
    ("admin member add", "team"): _TEAM,
    ("admin member add", "role"): _ROLE,
    ("admin member remove", "user"): _USER,
    ("admin member role", "user"): _USER,
    ("admin member role", "role"): _ROLE,
    ("admin member list", "team"): _TEAM,
    ("admin quota add", "team"): _TEAM,
    ("admin quota add", "type"): (limits.GPU_TYPE, ["quotas.gpu_type", "ledger_entries.gpu_type"]),
    ("admin quota add", "owner"): (limits.SLACK_ID, ["quotas.owner"]),
    ("admin quota list", "team"): _TEAM,
    ("admin host add", "name"): _HOST,
    ("admin host add", "url"): (limits.HOST_URL, ["hosts.url"]),
    ("admin host drain", "name"): _HOST,
    ("admin host resume", "name"): _HOST,
    ("admin host remove", "name"): _HOST,
    ("admin host rotate", "name"): _HOST,
    ("admin account set", "user"): _USER,
    ("admin account set", "team"): _TEAM,
    ("admin account set", "account"): (
        limits.UNIX_ACCOUNT,
        ["unix_accounts.account", "jobs.account"],
    ),
    ("admin account remove", "user"): _USER,
    ("admin account remove", "team"): _TEAM,
    ("admin host revoke", "name"): _HOST,
    ("match", "job"): _JOB,
    ("report matches", "team"): _TEAM,
    ("report estimates", "team"): _TEAM,
}

# Free text that lands in unbounded TEXT columns (or JSON): the grammar's own limit applies.
TEXT_COLUMNS: dict[tuple[str, str], list[str]] = {
    ("submit", "cmd"): ["jobs.command"],
    ("submit", "sweep"): ["jobs.array_values", "jobs.spec"],
    ("template save", "then"): ["templates.fields"],
    ("template save", "cmd"): ["jobs.command"],
    ("cancel", "reason"): ["job_events.reason", "jobs.state_reason"],
    ("bump", "reason"): ["bump_requests.reason"],
    ("deny", "reason"): ["bump_requests.decision_reason"],
    ("done", "output"): ["jobs.output"],
    ("admin quota add", "note"): ["quotas.note"],
    ("admin quota adjust", "reason"): ["audit_events.detail"],
    ("config show", "key"): ["audit_events.detail"],
    ("config set", "reason"): ["config_versions.reason", "audit_events.detail"],
    ("config rollback", "reason"): ["config_versions.reason", "audit_events.detail"],
}

# Keys whose text is never stored as a string: numbers, dates, choices only read, help words.
_NOT_STRING = {
    ValueKind.INT,
    ValueKind.ID,
    ValueKind.FLOAT,
    ValueKind.DATE,
    ValueKind.TIME,
    ValueKind.METRIC,
    ValueKind.DURATION,
    ValueKind.WORDS,
    ValueKind.JOB_IDS,  # job numbers, kept as job_dependencies.upstream_id (integers)
}
READ_ONLY_CHOICES = {
    ("queue", "scope"),
    ("report", "by"),
    ("report", "file"),
    # yes/no, kept as jobs.preemptible (a boolean).
    ("submit", "preemptible"),
    ("template save", "preemptible"),
    # yes/no, kept as jobs.share (a boolean).
    ("submit", "share"),
    ("template save", "share"),
    # yes/no, kept only as the audit record's "forced".
    ("admin account set", "force"),
}


def _column(name: str) -> Column[object]:
    table, column = name.split(".")
    return metadata.tables[table].c[column]


def _key(command: str, name: str) -> Key:
    key = SPEC[tuple(command.split())].key(name)
    assert key is not None, f"{command} has no key {name}"
    return key


def _string_keys() -> set[tuple[str, str]]:
    return {
        (" ".join(command.path), key.name)
        for command in SUBCOMMANDS
        for key in command.keys
        if key.kind not in _NOT_STRING
    }


def test_every_key_that_stores_text_is_mapped_to_its_columns() -> None:
    mapped = set(STRING_COLUMNS) | set(TEXT_COLUMNS) | READ_ONLY_CHOICES
    assert _string_keys() == mapped


@pytest.mark.parametrize(("where", "limit_and_columns"), STRING_COLUMNS.items(), ids=str)
def test_string_columns_have_exactly_the_length_in_limits(
    where: tuple[str, str], limit_and_columns: tuple[int, list[str]]
) -> None:
    limit, columns = limit_and_columns
    for name in columns:
        column_type = _column(name).type
        assert isinstance(column_type, String), name
        assert column_type.length == limit, name


@pytest.mark.parametrize(("where", "limit_and_columns"), STRING_COLUMNS.items(), ids=str)
def test_grammar_keys_take_no_more_than_their_column_holds(
    where: tuple[str, str], limit_and_columns: tuple[int, list[str]]
) -> None:
    limit, _ = limit_and_columns
    key = _key(*where)
    if key.kind is ValueKind.CHOICE:
        assert max(len(choice) for choice in key.choices) <= limit
    else:
        assert key.max_length == limit


@pytest.mark.parametrize(("where", "columns"), TEXT_COLUMNS.items(), ids=str)
def test_free_text_lands_in_unbounded_columns(where: tuple[str, str], columns: list[str]) -> None:
    _key(*where)
    for name in columns:
        column_type = _column(name).type
        assert getattr(column_type, "length", None) is None, name


def test_every_model_column_for_a_slack_user_uses_the_slack_id_length() -> None:
    user_columns = [
        column
        for table in metadata.tables.values()
        for column in table.columns
        if column.name
        in {"owner", "actor", "created_by", "requested_by", "decided_by", "answered_by"}
        or column.name == "slack_user_id"
    ]
    assert user_columns
    for column in user_columns:
        assert isinstance(column.type, String)
        assert column.type.length == limits.SLACK_ID, f"{column.table.name}.{column.name}"


def test_the_date_window_is_sane() -> None:
    assert limits.EARLIEST_DATE.isoformat() == "2000-01-01"
    assert limits.LATEST_DATE.isoformat() == "2199-12-31"
    assert limits.ROW_ID_MAX == 2**31 - 1


@pytest.mark.parametrize("command", ["submit", "template save"])
def test_grace_is_bounded_by_the_limits(command: str) -> None:
    """A preemptible job's grace: 30 s to 2 h, in seconds (jobs.preempt_grace_s)."""
    key = _key(command, "grace")
    assert (key.minimum, key.maximum) == (limits.GRACE_MIN_S, limits.GRACE_MAX_S) == (30, 7200)
    assert _column("jobs.preempt_grace_s").nullable
