"""The one door the faces (Slack, the console, the `paika` commands) take into the core.

A face builds a `Paika` and hands it text or a parsed command; it gets back a `Reply` whose
result is one of the records below, and draws it. What only Slack asks beyond commands (the
App Home, the submit modal's menus, who decides an approval, where its message was posted,
which requests were already seen, the language a person chose) goes through `SlackDoor`,
beside `Paika` in scheduler.app, on a command's path: the service's clock and policy, one
unit of work, the actor.

Why a module of its own rather than scheduler.app: app holds how a command runs; this module
holds what a face may see, and the "faces-door" contract in pyproject.toml lets bot/ import
only this door, scheduler.results, scheduler.grammar and scheduler.errors. The core's modules
stay free to move behind it. A record a face draws is added here, in its group of `__all__`,
with where it lives in `_WHERE`.

Each name is loaded when a face first takes it, not when the door is imported: the words of
a policy's wait (bot.i18n) are wanted on paths that never touch the database, such as
`paika cmd` answered by the running service through its socket, and must not load the
database's libraries with them (tests/bot/test_console_socket.py); nor may the door load
Slack's, the agents' HTTP client, Alembic or S3's for the console
(tests/test_console_imports.py). For the type checker and the import contracts the names
are imported below as usual.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scheduler.alerts.idle import RELEASE, STILL_USING, STILL_USING_QUIET, IdleAnswer
    from scheduler.alerts.overrun import ENDED as RUN_ENDED
    from scheduler.alerts.overrun import EXTEND, STOP, OverrunAnswer
    from scheduler.alerts.quota import QuotaAck
    from scheduler.app import (
        Answer,
        HomeData,
        Paika,
        Reply,
        SlackDoor,
        SubmitChoices,
        Words,
        wordless,
    )
    from scheduler.archive.state import RestoreResult
    from scheduler.archive.state_diff import Change as StateChange
    from scheduler.archive.state_diff import DiffField, DiffKind, StateDiff
    from scheduler.archive.state_diff import Value as StateValue
    from scheduler.archive.state_view import SnapshotView
    from scheduler.checkup import Finding, Severity
    from scheduler.checkup import blocks as findings_block
    from scheduler.config import PolicyConfig
    from scheduler.configs.edit import Change as ConfigChange
    from scheduler.configs.results import (
        ConfigChanged,
        ConfigDiff,
        ConfigHistory,
        ConfigShown,
        VersionInfo,
    )
    from scheduler.digest.model import (
        DayUsage,
        Digest,
        GpuRow,
        JobLine,
        Planned,
        QuotaWarning,
        SegmentKind,
    )
    from scheduler.digest.timeline import MAX_ROWS as TIMELINE_MAX_ROWS
    from scheduler.fingerprints import CardUse
    from scheduler.notices.events import Event, EventCode, EventKind, event_of, is_event
    from scheduler.notices.kinds import EVENT_KINDS, NoticeKind
    from scheduler.notices.outbox import Announcement
    from scheduler.outputs import Report, describe, from_words
    from scheduler.policy.admission import Verdict
    from scheduler.policy.plan import PreemptCode, Wait, WaitCode
    from scheduler.policy.reasons import Reason, reason_of
    from scheduler.service.board import (
        BoardResult,
        CardJob,
        CardState,
        CardView,
        HostView,
        TypeSummary,
    )
    from scheduler.service.bumps import BumpResult, DecisionResult
    from scheduler.service.estimates import EstimatesReport
    from scheduler.service.jobs import (
        ArrayMember,
        ArrayStatus,
        ArraySummary,
        ChangeResult,
        JobView,
        PreemptedRecord,
        QueueResult,
        StatusResult,
        SubmitResult,
    )
    from scheduler.service.logs import LogsResult
    from scheduler.service.matches import MatchesReport, MatchReview, Weighed
    from scheduler.service.prefs import LanguageChoice
    from scheduler.service.priority import PriorityResult
    from scheduler.service.quotas import QuotaListing, QuotaView
    from scheduler.service.records import BumpRecord, BumpState, JobRecord, JobState, PriorityClass
    from scheduler.service.report import JOB_LIMIT as REPORT_JOB_LIMIT
    from scheduler.service.report import JobOutcome, ReportAsk, ReportResult, UsageRow
    from scheduler.service.slack import ApprovalRequest
    from scheduler.service.specs import TEMPLATE_VERSION
    from scheduler.service.templates import TemplateHistory, TemplateVersionView
    from scheduler.service.why import Step, StoryStep, WhyResult
    from scheduler.settings import Settings
    from scheduler.snapshots import EstimateRecord

# Where each name lives (module.attribute), grouped as __all__ is; a test holds the two and
# the imports above to the same names.
_WHERE: dict[str, str] = {
    # The core, how a command answers, and what a face asks beyond commands.
    "Answer": "scheduler.app.Answer",
    "HomeData": "scheduler.app.HomeData",
    "Paika": "scheduler.app.Paika",
    "Reply": "scheduler.app.Reply",
    "Settings": "scheduler.settings.Settings",
    "SlackDoor": "scheduler.app.SlackDoor",
    "SubmitChoices": "scheduler.app.SubmitChoices",
    "Words": "scheduler.app.Words",
    "wordless": "scheduler.app.wordless",
    # The policy the faces read (its zone, Slack's channels, the default language).
    "PolicyConfig": "scheduler.config.PolicyConfig",
    # The alerts' buttons: what Paika's answer_* take and give.
    "EXTEND": "scheduler.alerts.overrun.EXTEND",
    "IdleAnswer": "scheduler.alerts.idle.IdleAnswer",
    "OverrunAnswer": "scheduler.alerts.overrun.OverrunAnswer",
    "QuotaAck": "scheduler.alerts.quota.QuotaAck",
    "RELEASE": "scheduler.alerts.idle.RELEASE",
    "RUN_ENDED": "scheduler.alerts.overrun.ENDED",
    "STILL_USING": "scheduler.alerts.idle.STILL_USING",
    "STILL_USING_QUIET": "scheduler.alerts.idle.STILL_USING_QUIET",
    "STOP": "scheduler.alerts.overrun.STOP",
    # Jobs, bumps and the board: the records and views commands answer with.
    "ApprovalRequest": "scheduler.service.slack.ApprovalRequest",
    "BoardResult": "scheduler.service.board.BoardResult",
    "BumpRecord": "scheduler.service.records.BumpRecord",
    "BumpResult": "scheduler.service.bumps.BumpResult",
    "BumpState": "scheduler.service.records.BumpState",
    "CardJob": "scheduler.service.board.CardJob",
    "CardState": "scheduler.service.board.CardState",
    "CardUse": "scheduler.fingerprints.CardUse",
    "CardView": "scheduler.service.board.CardView",
    "ChangeResult": "scheduler.service.jobs.ChangeResult",
    "DecisionResult": "scheduler.service.bumps.DecisionResult",
    "HostView": "scheduler.service.board.HostView",
    "JobRecord": "scheduler.service.records.JobRecord",
    "JobState": "scheduler.service.records.JobState",
    "JobView": "scheduler.service.jobs.JobView",
    "LanguageChoice": "scheduler.service.prefs.LanguageChoice",
    "LogsResult": "scheduler.service.logs.LogsResult",
    "PreemptedRecord": "scheduler.service.jobs.PreemptedRecord",
    "PriorityClass": "scheduler.service.records.PriorityClass",
    "PriorityResult": "scheduler.service.priority.PriorityResult",
    "QueueResult": "scheduler.service.jobs.QueueResult",
    "StatusResult": "scheduler.service.jobs.StatusResult",
    "ArrayMember": "scheduler.service.jobs.ArrayMember",
    "ArrayStatus": "scheduler.service.jobs.ArrayStatus",
    "ArraySummary": "scheduler.service.jobs.ArraySummary",
    "SubmitResult": "scheduler.service.jobs.SubmitResult",
    "TypeSummary": "scheduler.service.board.TypeSummary",
    # Why a job waits, was preempted or was admitted so: the policy's words and reasons.
    "PreemptCode": "scheduler.policy.plan.PreemptCode",
    "Reason": "scheduler.policy.reasons.Reason",
    "Step": "scheduler.service.why.Step",
    "StoryStep": "scheduler.service.why.StoryStep",
    "Verdict": "scheduler.policy.admission.Verdict",
    "Wait": "scheduler.policy.plan.Wait",
    "WaitCode": "scheduler.policy.plan.WaitCode",
    "WhyResult": "scheduler.service.why.WhyResult",
    "reason_of": "scheduler.policy.reasons.reason_of",
    # Quotas, estimates, matches, templates and the usage report.
    "EstimateRecord": "scheduler.snapshots.EstimateRecord",
    "EstimatesReport": "scheduler.service.estimates.EstimatesReport",
    "JobOutcome": "scheduler.service.report.JobOutcome",
    "MatchReview": "scheduler.service.matches.MatchReview",
    "MatchesReport": "scheduler.service.matches.MatchesReport",
    "QuotaListing": "scheduler.service.quotas.QuotaListing",
    "QuotaView": "scheduler.service.quotas.QuotaView",
    "REPORT_JOB_LIMIT": "scheduler.service.report.JOB_LIMIT",
    "ReportAsk": "scheduler.service.report.ReportAsk",
    "ReportResult": "scheduler.service.report.ReportResult",
    "TEMPLATE_VERSION": "scheduler.service.specs.TEMPLATE_VERSION",
    "TemplateHistory": "scheduler.service.templates.TemplateHistory",
    "TemplateVersionView": "scheduler.service.templates.TemplateVersionView",
    "UsageRow": "scheduler.service.report.UsageRow",
    "Weighed": "scheduler.service.matches.Weighed",
    # The policy's versions.
    "ConfigChange": "scheduler.configs.edit.Change",
    "ConfigChanged": "scheduler.configs.results.ConfigChanged",
    "ConfigDiff": "scheduler.configs.results.ConfigDiff",
    "ConfigHistory": "scheduler.configs.results.ConfigHistory",
    "ConfigShown": "scheduler.configs.results.ConfigShown",
    "VersionInfo": "scheduler.configs.results.VersionInfo",
    # Notices the courier hands a face, and their kinds.
    "Announcement": "scheduler.notices.outbox.Announcement",
    "EVENT_KINDS": "scheduler.notices.kinds.EVENT_KINDS",
    "Event": "scheduler.notices.events.Event",
    "EventCode": "scheduler.notices.events.EventCode",
    "EventKind": "scheduler.notices.events.EventKind",
    "NoticeKind": "scheduler.notices.kinds.NoticeKind",
    "event_of": "scheduler.notices.events.event_of",
    "is_event": "scheduler.notices.events.is_event",
    # The daily digest.
    "DayUsage": "scheduler.digest.model.DayUsage",
    "Digest": "scheduler.digest.model.Digest",
    "GpuRow": "scheduler.digest.model.GpuRow",
    "JobLine": "scheduler.digest.model.JobLine",
    "Planned": "scheduler.digest.model.Planned",
    "QuotaWarning": "scheduler.digest.model.QuotaWarning",
    "SegmentKind": "scheduler.digest.model.SegmentKind",
    "TIMELINE_MAX_ROWS": "scheduler.digest.timeline.MAX_ROWS",
    # The state's history in the object store.
    "DiffField": "scheduler.archive.state_diff.DiffField",
    "DiffKind": "scheduler.archive.state_diff.DiffKind",
    "RestoreResult": "scheduler.archive.state.RestoreResult",
    "SnapshotView": "scheduler.archive.state_view.SnapshotView",
    "StateChange": "scheduler.archive.state_diff.Change",
    "StateDiff": "scheduler.archive.state_diff.StateDiff",
    "StateValue": "scheduler.archive.state_diff.Value",
    # `paika doctor`'s findings.
    "Finding": "scheduler.checkup.Finding",
    "Severity": "scheduler.checkup.Severity",
    "findings_block": "scheduler.checkup.blocks",
    # A job's own report.
    "Report": "scheduler.outputs.Report",
    "describe": "scheduler.outputs.describe",
    "from_words": "scheduler.outputs.from_words",
}


if not TYPE_CHECKING:  # a name the door does not offer stays an error for the type checker

    def __getattr__(name: str) -> Any:
        """Load an offered name from where it lives, once."""
        try:
            module, _, attribute = _WHERE[name].rpartition(".")
        except KeyError:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module), attribute)
        globals()[name] = value
        return value


__all__ = [
    # The core, how a command answers, and what a face asks beyond commands.
    "Answer",
    "HomeData",
    "Paika",
    "Reply",
    "Settings",
    "SlackDoor",
    "SubmitChoices",
    "Words",
    "wordless",
    # The policy the faces read (its zone, Slack's channels, the default language).
    "PolicyConfig",
    # The alerts' buttons: what Paika's answer_* take and give.
    "EXTEND",
    "IdleAnswer",
    "OverrunAnswer",
    "QuotaAck",
    "RELEASE",
    "RUN_ENDED",
    "STILL_USING",
    "STILL_USING_QUIET",
    "STOP",
    # Jobs, bumps and the board: the records and views commands answer with.
    "ApprovalRequest",
    "BoardResult",
    "BumpRecord",
    "BumpResult",
    "BumpState",
    "CardJob",
    "ArrayMember",
    "ArrayStatus",
    "ArraySummary",
    "CardState",
    "CardUse",
    "CardView",
    "ChangeResult",
    "DecisionResult",
    "HostView",
    "JobRecord",
    "JobState",
    "JobView",
    "LanguageChoice",
    "LogsResult",
    "PreemptedRecord",
    "PriorityClass",
    "PriorityResult",
    "QueueResult",
    "StatusResult",
    "SubmitResult",
    "TypeSummary",
    # Why a job waits, was preempted or was admitted so: the policy's words and reasons.
    "PreemptCode",
    "Reason",
    "Step",
    "StoryStep",
    "Verdict",
    "Wait",
    "WaitCode",
    "WhyResult",
    "reason_of",
    # Quotas, estimates, matches, templates and the usage report.
    "EstimateRecord",
    "EstimatesReport",
    "JobOutcome",
    "MatchReview",
    "MatchesReport",
    "QuotaListing",
    "QuotaView",
    "REPORT_JOB_LIMIT",
    "ReportAsk",
    "ReportResult",
    "TEMPLATE_VERSION",
    "TemplateHistory",
    "TemplateVersionView",
    "UsageRow",
    "Weighed",
    # The policy's versions.
    "ConfigChange",
    "ConfigChanged",
    "ConfigDiff",
    "ConfigHistory",
    "ConfigShown",
    "VersionInfo",
    # Notices the courier hands a face, and their kinds.
    "Announcement",
    "EVENT_KINDS",
    "Event",
    "EventCode",
    "EventKind",
    "NoticeKind",
    "event_of",
    "is_event",
    # The daily digest.
    "DayUsage",
    "Digest",
    "GpuRow",
    "JobLine",
    "Planned",
    "QuotaWarning",
    "SegmentKind",
    "TIMELINE_MAX_ROWS",
    # The state's history in the object store.
    "DiffField",
    "DiffKind",
    "RestoreResult",
    "SnapshotView",
    "StateChange",
    "StateDiff",
    "StateValue",
    # `paika doctor`'s findings.
    "Finding",
    "Severity",
    "findings_block",
    # A job's own report.
    "Report",
    "describe",
    "from_words",
]
