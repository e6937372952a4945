"""The SQL tables. Importing this package registers every table on `SQLModel.metadata`."""

from storage.models.accounting import LedgerEntry, Quota
from storage.models.audit import AuditEvent
from storage.models.cluster import (
    Allocation,
    Gpu,
    GpuSample,
    Host,
    HostState,
    Lease,
    MaintenanceWindow,
    TeamReservation,
)
from storage.models.jobs import (
    ACTIVE_STATES,
    ON_HOST_STATES,
    TERMINAL_STATES,
    BumpRequest,
    BumpState,
    DependencyKind,
    DependencyState,
    Job,
    JobDependency,
    JobEvent,
    JobOutput,
    JobState,
    Match,
    OutputKind,
    OutputSource,
    StartHold,
    Template,
)
from storage.models.memory import ArchiveMark, ConfigVersion, Decision, TemplateVersion
from storage.models.notices import Notice
from storage.models.org import AccountSubject, Member, Role, Team, UnixAccount, UserPref
from storage.models.profiles import JobProfile
from storage.models.requests import SeenRequest
from storage.models.slack import SlackDelivery

__all__ = [
    "ACTIVE_STATES",
    "ON_HOST_STATES",
    "TERMINAL_STATES",
    "Notice",
    "Allocation",
    "AuditEvent",
    "BumpRequest",
    "BumpState",
    "Gpu",
    "GpuSample",
    "Host",
    "HostState",
    "DependencyKind",
    "DependencyState",
    "Job",
    "JobDependency",
    "JobEvent",
    "JobState",
    "JobOutput",
    "JobProfile",
    "OutputKind",
    "OutputSource",
    "Lease",
    "MaintenanceWindow",
    "TeamReservation",
    "LedgerEntry",
    "Match",
    "Member",
    "Quota",
    "Role",
    "SeenRequest",
    "SlackDelivery",
    "StartHold",
    "Team",
    "Template",
    "UserPref",
    "AccountSubject",
    "ArchiveMark",
    "ConfigVersion",
    "Decision",
    "TemplateVersion",
    "UnixAccount",
]
