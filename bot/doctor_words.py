"""`paika doctor`'s findings in words (en, zh): one line each, marked ✓ (fine), ! (will
surprise the team) or ✗ (blocks), with what to do; and the same as JSON for machines."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.i18n import t
from scheduler.door import Finding, Severity, findings_block

# Every finding's catalogue key, by its code (written out: each key is found by a search).
KEYS = {
    "policy.missing": "doctor.policy.missing",
    "policy.invalid": "doctor.policy.invalid",
    "policy.bundled": "doctor.policy.bundled",
    "policy.file": "doctor.policy.file",
    "policy.unpriced": "doctor.policy.unpriced",
    "admins.none": "doctor.admins.none",
    "admins.set": "doctor.admins.set",
    "database.unreachable": "doctor.database.unreachable",
    "database.behind": "doctor.database.behind",
    "database.ok": "doctor.database.ok",
    "store.unreachable": "doctor.store.unreachable",
    "store.ok": "doctor.store.ok",
    "agents.no_token": "doctor.agents.no_token",
    "agents.secret_unusable": "doctor.agents.secret_unusable",
    "agents.ca_unusable": "doctor.agents.ca_unusable",
    "hosts.none": "doctor.hosts.none",
    "agent.ok": "doctor.agent.ok",
    "agent.unreachable": "doctor.agent.unreachable",
    "agent.untrusted": "doctor.agent.untrusted",
    "agent.clock_skew": "doctor.agent.clock_skew",
    "card.unknown": "doctor.card.unknown",
    "accounts.unmapped": "doctor.accounts.unmapped",
    "accounts.mapped": "doctor.accounts.mapped",
    "slack.off": "doctor.slack.off",
    "slack.no_signing_secret": "doctor.slack.no_signing_secret",
    "slack.auth_failed": "doctor.slack.auth_failed",
    "slack.unreachable": "doctor.slack.unreachable",
    "slack.ok": "doctor.slack.ok",
    "slack.no_channel": "doctor.slack.no_channel",
    "slack.channel_missing": "doctor.slack.channel_missing",
    "slack.not_member": "doctor.slack.not_member",
    "slack.channel_ok": "doctor.slack.channel_ok",
}
MARKS = {Severity.OK: "✓", Severity.WARN: "!", Severity.BLOCK: "✗"}


def _listed(lang: str, values: Sequence[object]) -> str:
    return ("、" if lang == "zh" else ", ").join(str(v) for v in values) or "-"


def _values(lang: str, finding: Finding) -> dict[str, Any]:
    """The finding's values as its sentence takes them: lists joined, absences named."""
    values = dict(finding.values)
    for name, value in finding.values.items():
        if isinstance(value, list | tuple):
            values[name] = _listed(lang, sorted(set(value), key=value.index))
    code = finding.code
    if code == "card.unknown":
        values["count"] = len(finding.values["hosts"])
    if code == "accounts.unmapped":
        values["first"] = finding.values["users"][0]
    if code == "database.behind" and not finding.values["current"]:
        values["current"] = t(lang, "doctor.empty")
    if code == "agent.untrusted" and not finding.values["ca_file"]:
        values["ca_file"] = t(lang, "doctor.system_cas")
    if code == "agent.ok":
        skew = finding.values["skew_s"]
        values["skew"] = (
            t(lang, "doctor.skew_unknown") if skew is None else t(lang, "doctor.skew", n=skew)
        )
    return values


def finding_line(lang: str, finding: Finding) -> str:
    """One finding as a marked line (a finding's words may run over several lines)."""
    return f"{MARKS[finding.severity]} {t(lang, KEYS[finding.code], **_values(lang, finding))}"


def report(lang: str, findings: Sequence[Finding]) -> str:
    """Every finding, then whether anything blocks paika."""
    lines = [finding_line(lang, f) for f in findings]
    warnings = sum(f.severity is Severity.WARN for f in findings)
    if findings_block(findings):
        blocking = sum(f.severity is Severity.BLOCK for f in findings)
        lines.append(t(lang, "doctor.summary.blocked", blocking=blocking, warnings=warnings))
    else:
        lines.append(t(lang, "doctor.summary.ok", warnings=warnings))
    return "\n".join(lines)


def as_json(lang: str, findings: Sequence[Finding]) -> dict[str, Any]:
    """For machines: whether anything blocks, and each finding with its words."""
    return {
        "ok": not findings_block(findings),
        "findings": [
            f.as_json() | {"text": t(lang, KEYS[f.code], **_values(lang, f))} for f in findings
        ],
    }
