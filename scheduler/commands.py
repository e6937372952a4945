"""From a parsed `/gpu` command to a service call and its result (Slack and CLI share this)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from scheduler.errors import Problem, UserError
from scheduler.grammar import Help, check_required, defaults, help_for, subcommand
from scheduler.grammar.sharing import check_share
from scheduler.grammar.spec import LOG_LINES_DEFAULT
from scheduler.grammar.values import DataSpec, convert
from scheduler.hosts.report import disk_low_values
from scheduler.results import Listing, Said, SaidCode, Value
from scheduler.service import (
    accounts,
    admin,
    board,
    bumps,
    configs,
    estimates,
    jobs,
    logs,
    maintenance,
    matches,
    prefs,
    priority,
    quotas,
    report,
    reservations,
    specs,
    templates,
    why,
)
from scheduler.service.context import Context
from scheduler.service.lookup import member_ref, team_by_name
from storage.models import Template

Handler = Callable[[Context, Mapping[str, Any]], object]


def _submit(ctx: Context, args: Mapping[str, Any]) -> object:
    given = {key: value for key, value in args.items() if key != "again"}
    # What fills the keys not given, the later winning: a job's spec to repeat (again=),
    # then a template's fields.
    fields: dict[str, Any] = {}
    version = None
    if "again" in args:
        earlier = specs.to_repeat(ctx, *_ref(args["again"]))
        fields = _from_stored(earlier)
        version = earlier.get(specs.TEMPLATE_VERSION) if "template" in earlier else None
    steps: list[Template] = []
    if "template" in given:
        team_id = team_by_name(ctx, given["team"]).id if "team" in given else None
        saved = templates.get(ctx, given["template"], team_id)
        fields = {**fields, **_from_stored(saved.fields)}
        given["template"] = saved.name
        version = saved.version
        steps = templates.pipeline_of(ctx, saved, team_id)
    fields = {**fields, **given}
    if steps and any(key in fields for key in ("count", "sweep")):
        raise UserError(Problem.PIPELINE_AND_ARRAY)
    first = _submit_one(ctx, fields, version)
    if not steps:
        return first
    # A pipeline: each step waits for the one before, whose success makes its data unless
    # its template says its data is ready; what the whole submit is part of goes to all.
    made = [(first.view.job.id or 0, first.view.job.name)]
    shared: dict[str, Any] = {k: fields[k] for k in ("team", "project", "round") if k in fields}
    for step in steps:
        prev = made[-1][0]
        step_fields: dict[str, Any] = {**_from_stored(step.fields), **shared}
        data = step_fields.get("data")
        if not (isinstance(data, DataSpec) and data.ready):
            step_fields["data"] = DataSpec(ready=False, after=prev)
        step_fields.update(name=f"{fields['name']}-{step.name}", template=step.name, after=(prev,))
        result = _submit_one(ctx, step_fields, step.version)
        made.append((result.view.job.id or 0, result.view.job.name))
    return replace(first, pipeline=tuple(made))


def _submit_one(ctx: Context, fields: dict[str, Any], version: int | None) -> jobs.SubmitResult:
    check_required(("submit",), fields)
    # A template or the earlier job may bring what clashes with share=yes, or lack its mem=.
    check_share(fields, complete=True)
    # The spec is what was asked for, before the grammar's defaults (the policy's to change).
    spec = specs.spec_of(fields, version)
    return jobs.submit(
        ctx, {**defaults(("submit",)), **fields}, spec=spec, template_version=version
    )


def _from_stored(stored: Mapping[str, Any]) -> dict[str, Any]:
    """Stored submit values (a template's fields, a job's spec) back into parsed values,
    through the same converters; a list of GPU types as it is typed, comma-joined."""
    keys = {key.name: key for key in subcommand(("submit",)).keys}
    return {
        name: convert(
            keys[name], ",".join(map(str, value)) if isinstance(value, list) else str(value)
        )
        for name, value in stored.items()
        if name in keys
    }


def _job(args: Mapping[str, Any]) -> tuple[int | None, str | None]:
    return _ref(args["job"])


def _ref(ref: Any) -> tuple[int | None, str | None]:
    """A job reference as the services take it: its id, or a name (one job of an array,
    #40.3, travels as its name: scheduler.service.lookup.member_ref)."""
    if ref.member is not None:
        return None, member_ref(ref.id, ref.member)
    return ref.id, ref.name


def _report(ctx: Context, args: Mapping[str, Any]) -> object:
    ask = report.ask_of(args)
    start, end = report.period(ctx, ask.days, ask.since, ask.until)
    return report.report(ctx, ask.team, start, end, ask=ask)


def _report_matches(ctx: Context, args: Mapping[str, Any]) -> object:
    start, end = report.period(ctx, args.get("days"), args.get("since"))
    return matches.costliest(ctx, args.get("team"), start, end, args.get("limit", 10))


def _status(ctx: Context, args: Mapping[str, Any]) -> object:
    found = jobs.status(ctx, *_job(args))
    if found.view.job.owner != ctx.actor.user_id:
        return found
    return replace(found, estimates=estimates.own(ctx))  # the asker's own job


def _quota_show(ctx: Context, args: Mapping[str, Any]) -> object:
    found = quotas.show(ctx, args.get("team"))
    return quotas.QuotaListing(found, SaidCode.QUOTA_NONE_FOR_TEAM)


_SAVED = {
    templates.SaveOutcome.CREATED: SaidCode.TEMPLATE_SAVED,
    templates.SaveOutcome.UPDATED: SaidCode.TEMPLATE_UPDATED,
    templates.SaveOutcome.UNCHANGED: SaidCode.TEMPLATE_UNCHANGED,
}


def _template_save(ctx: Context, args: Mapping[str, Any]) -> object:
    fields = {key: value for key, value in args.items() if key != "name"}
    template, outcome = templates.save(ctx, args["name"], fields)
    values: dict[str, Value] = {"name": template.name, "version": template.version}
    return Said(_SAVED[outcome], {**values, "fields": dict(template.fields)})


def _template_list(ctx: Context, args: Mapping[str, Any]) -> object:
    rows = [
        Said(SaidCode.TEMPLATE_ROW, {"name": t.name, "fields": dict(t.fields)})
        for t in templates.listing(ctx)
    ]
    return Listing(rows, SaidCode.TEMPLATE_NONE)


def _template_show(ctx: Context, args: Mapping[str, Any]) -> object:
    if "version" in args:
        return templates.version_of(ctx, args["name"], args["version"])
    template = templates.get(ctx, args["name"])
    values: dict[str, Value] = {
        "name": template.name,
        "version": template.version,
        "author": template.created_by,
    }
    return Said(SaidCode.TEMPLATE_SHOWN, {**values, "fields": dict(template.fields)})


def _template_history(ctx: Context, args: Mapping[str, Any]) -> object:
    return templates.history(ctx, args["name"], args.get("team"), args.get("limit"))


def _template_delete(ctx: Context, args: Mapping[str, Any]) -> object:
    return Said(SaidCode.TEMPLATE_DELETED, {"name": templates.delete(ctx, args["name"]).name})


def _team_add(ctx: Context, args: Mapping[str, Any]) -> object:
    team = admin.add_team(ctx, args["name"], args.get("channel"))
    if team.channel:
        return Said(SaidCode.TEAM_ADDED_WITH_CHANNEL, {"name": team.name, "channel": team.channel})
    return Said(SaidCode.TEAM_ADDED, {"name": team.name})


def _team_list(ctx: Context, args: Mapping[str, Any]) -> object:
    rows = [
        Said(SaidCode.TEAM_ROW_WITH_CHANNEL, {"name": t.name, "channel": t.channel})
        if t.channel
        else Said(SaidCode.TEAM_ROW, {"name": t.name})
        for t in admin.list_teams(ctx)
    ]
    return Listing(rows, SaidCode.TEAM_NONE)


def _team_remove(ctx: Context, args: Mapping[str, Any]) -> object:
    return Said(SaidCode.TEAM_REMOVED, {"name": admin.remove_team(ctx, args["name"]).name})


def _member_add(ctx: Context, args: Mapping[str, Any]) -> object:
    member, created = admin.add_member(ctx, args["user"], args["team"], args.get("role", "member"))
    code = SaidCode.MEMBER_ADDED if created else SaidCode.MEMBER_MOVED
    return Said(
        code, {"user": member.slack_user_id, "team": args["team"], "role": str(member.role)}
    )


def _member_remove(ctx: Context, args: Mapping[str, Any]) -> object:
    member = admin.remove_member(ctx, args["user"])
    return Said(SaidCode.MEMBER_REMOVED, {"user": member.slack_user_id})


def _member_role(ctx: Context, args: Mapping[str, Any]) -> object:
    member = admin.set_role(ctx, args["user"], args["role"])
    return Said(SaidCode.MEMBER_ROLE, {"user": member.slack_user_id, "role": str(member.role)})


def _member_list(ctx: Context, args: Mapping[str, Any]) -> object:
    found = admin.list_members(ctx, args.get("team"))
    names = {t.id: t.name for t in admin.list_teams(ctx)} if found else {}
    rows = [
        Said(
            SaidCode.MEMBER_ROW,
            {"user": m.slack_user_id, "team": names[m.team_id], "role": str(m.role)},
        )
        if m.team_id in names
        else Said(SaidCode.MEMBER_ROW_WITHOUT_TEAM, {"user": m.slack_user_id, "role": str(m.role)})
        for m in found
    ]
    return Listing(rows, SaidCode.MEMBER_NONE)


def _quota_add(ctx: Context, args: Mapping[str, Any]) -> object:
    view = quotas.add(
        ctx,
        args["team"],
        args.get("type"),
        args["hours"],
        args["expires"],
        args["owner"],
        args.get("note"),
    )
    return quotas.QuotaListing([view])


def _quota_renew(ctx: Context, args: Mapping[str, Any]) -> object:
    return quotas.QuotaListing([quotas.renew(ctx, args["id"], args["expires"], args.get("hours"))])


def _quota_adjust(ctx: Context, args: Mapping[str, Any]) -> object:
    return quotas.QuotaListing([quotas.adjust(ctx, args["id"], args["hours"], args["reason"])])


def _quota_list(ctx: Context, args: Mapping[str, Any]) -> object:
    return quotas.QuotaListing(quotas.listing(ctx, args.get("team")), SaidCode.QUOTA_NONE_AT_ALL)


def _host_add(ctx: Context, args: Mapping[str, Any]) -> object:
    host, issued = admin.add_host(ctx, args["name"], args["url"])
    if issued is None:
        return Said(SaidCode.HOST_ADDED, {"name": host.name, "url": host.url})
    return token_said(SaidCode.HOST_ADDED_WITH_TOKEN, issued)


def token_said(code: SaidCode, issued: admin.IssuedToken) -> Said:
    values: dict[str, Value] = {"name": issued.host, "url": issued.url, "token": issued.token}
    return Said(code, {**values, "generation": issued.generation, "path": issued.path})


def _host_rotate(ctx: Context, args: Mapping[str, Any]) -> object:
    return token_said(SaidCode.HOST_TOKEN_ROTATED, admin.rotate_token(ctx, args["name"]))


def _host_revoke(ctx: Context, args: Mapping[str, Any]) -> object:
    return Said(SaidCode.HOST_TOKEN_REVOKED, {"name": admin.revoke_token(ctx, args["name"]).name})


def _host_drain(ctx: Context, args: Mapping[str, Any]) -> object:
    host = admin.set_draining(ctx, args["name"], True)
    return Said(SaidCode.HOST_DRAINING, {"name": host.name})


def _host_resume(ctx: Context, args: Mapping[str, Any]) -> object:
    host = admin.set_draining(ctx, args["name"], False)
    return Said(SaidCode.HOST_RESUMED, {"name": host.name})


def _host_remove(ctx: Context, args: Mapping[str, Any]) -> object:
    return Said(SaidCode.HOST_REMOVED, {"name": admin.remove_host(ctx, args["name"]).name})


def _host_list(ctx: Context, args: Mapping[str, Any]) -> object:
    rows = [_host_row(h, admin.unlisted_models(ctx, h)) for h in admin.list_hosts(ctx)]
    return Listing(rows, SaidCode.HOST_NONE)


def _host_row(host: Any, unlisted: Mapping[str, int]) -> Said:
    values = {"name": host.name, "url": host.url, "state": str(host.state)}
    if unlisted and not host.last_error:  # "up" would hide that no job can use these cards
        models = ", ".join(f"{n}× {name}" for name, n in sorted(unlisted.items()))
        return Said(SaidCode.HOST_ROW_UNLISTED, {**values, "cards": models})
    if host.last_error:  # why its last poll failed: a certificate, a token, no answer
        low = disk_low_values(host.last_error)  # or why it takes no job: its disk is low
        if low is not None:
            return Said(SaidCode.HOST_ROW_DISK_LOW, {**values, **low})
        return Said(SaidCode.HOST_ROW_TROUBLE, {**values, "problem": host.last_error})
    return Said(SaidCode.HOST_ROW_DRAINING if host.draining else SaidCode.HOST_ROW, values)


HANDLERS: dict[tuple[str, ...], Handler] = {
    ("submit",): _submit,
    ("ready",): lambda ctx, a: jobs.mark_ready(ctx, *_job(a), a.get("location")),
    ("release",): lambda ctx, a: jobs.release(ctx, *_job(a)),
    ("queue",): lambda ctx, a: jobs.queue(ctx, a.get("scope", "all")),
    ("board",): lambda ctx, a: board.board(ctx),
    ("status",): _status,
    ("why",): lambda ctx, a: why.why(ctx, *_job(a), a.get("at")),
    ("cancel",): lambda ctx, a: jobs.cancel(ctx, *_job(a), a.get("reason")),
    ("done",): lambda ctx, a: jobs.done(ctx, *_job(a), a.get("output"), a.get("metric", ())),
    ("bump",): lambda ctx, a: bumps.bump(ctx, *_job(a), a["to"], a["reason"]),
    ("approve",): lambda ctx, a: bumps.decide(ctx, a["request"], True, None),
    ("deny",): lambda ctx, a: bumps.decide(ctx, a["request"], False, a.get("reason")),
    ("quota",): _quota_show,
    ("report",): _report,
    ("lang",): lambda ctx, a: prefs.set_language(ctx, a["language"]),
    ("template", "save"): _template_save,
    ("template", "list"): _template_list,
    ("template", "show"): _template_show,
    ("template", "delete"): _template_delete,
    ("template", "history"): _template_history,
    ("admin", "team", "add"): _team_add,
    ("admin", "team", "list"): _team_list,
    ("admin", "team", "remove"): _team_remove,
    ("admin", "member", "add"): _member_add,
    ("admin", "member", "remove"): _member_remove,
    ("admin", "member", "role"): _member_role,
    ("admin", "member", "list"): _member_list,
    ("admin", "quota", "add"): _quota_add,
    ("admin", "quota", "renew"): _quota_renew,
    ("admin", "quota", "adjust"): _quota_adjust,
    ("admin", "quota", "list"): _quota_list,
    ("admin", "host", "add"): _host_add,
    ("admin", "host", "drain"): _host_drain,
    ("admin", "reserve", "add"): lambda ctx, a: reservations.add(
        ctx, a["gpus"], a["type"], a["from"], a["until"], a["team"], a["reason"]
    ),
    ("admin", "reserve", "list"): lambda ctx, a: reservations.listing(ctx),
    ("admin", "reserve", "cancel"): lambda ctx, a: reservations.cancel(ctx, a["booking"]),
    ("admin", "maintenance", "add"): lambda ctx, a: maintenance.add(
        ctx, a["host"], a["from"], a["until"], a["reason"]
    ),
    ("admin", "maintenance", "list"): lambda ctx, a: maintenance.listing(ctx),
    ("admin", "maintenance", "cancel"): lambda ctx, a: maintenance.cancel(ctx, a["window"]),
    ("admin", "host", "resume"): _host_resume,
    ("admin", "host", "remove"): _host_remove,
    ("admin", "host", "list"): _host_list,
    ("admin", "host", "rotate"): _host_rotate,
    ("admin", "host", "revoke"): _host_revoke,
    ("admin", "account", "set"): lambda ctx, a: accounts.set_account(
        ctx, a.get("user"), a.get("team"), a["account"], force=a.get("force") == "yes"
    ),
    ("admin", "account", "remove"): lambda ctx, a: accounts.remove_account(
        ctx, a.get("user"), a.get("team")
    ),
    ("admin", "account", "list"): lambda ctx, a: accounts.list_accounts(ctx),
    # The policy config under version control.
    ("config", "show"): lambda ctx, a: configs.show(ctx, a.get("key")),
    ("config", "set"): lambda ctx, a: configs.set_values(ctx, a["settings"], a["reason"]),
    ("config", "history"): lambda ctx, a: configs.history(ctx, a.get("limit", 10)),
    ("config", "diff"): lambda ctx, a: configs.diff(ctx, a["v1"], a["v2"]),
    ("config", "rollback"): lambda ctx, a: configs.rollback(ctx, a["version"], a["reason"]),
    # A job's output and its place in the order (issue 15).
    ("logs",): lambda ctx, a: logs.logs(ctx, *_job(a), a.get("lines", LOG_LINES_DEFAULT)),
    ("priority",): lambda ctx, a: priority.priority(ctx, *_job(a)),
    ("match",): lambda ctx, a: matches.review(ctx, *_job(a)),
    ("report", "matches"): _report_matches,
    ("report", "estimates"): lambda ctx, a: estimates.report(ctx, a.get("team")),
}


def help_reply(words: tuple[str, ...]) -> Help:
    """`help [sub …]`, read from the grammar's own definitions."""
    return help_for(words)
