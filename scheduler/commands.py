"""From a parsed `/gpu` command to a service call and its result (Slack and CLI share this)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from scheduler.grammar import check_required, defaults, help_text, subcommand
from scheduler.grammar.values import convert
from scheduler.results import Notice, QuotaListing
from scheduler.service import admin, board, bumps, jobs, prefs, quotas, report, templates
from scheduler.service.context import Context
from scheduler.service.lookup import team_by_name

Handler = Callable[[Context, Mapping[str, Any]], object]


def _submit(ctx: Context, args: Mapping[str, Any]) -> object:
    fields = dict(args)
    if "template" in fields:
        team_id = team_by_name(ctx, fields["team"]).id if "team" in fields else None
        saved = templates.get(ctx, fields["template"], team_id)
        fields = {**_from_template(saved.fields), **fields}
        fields["template"] = saved.name
    check_required(("submit",), fields)
    return jobs.submit(ctx, {**defaults(("submit",)), **fields})


def _from_template(stored: Mapping[str, Any]) -> dict[str, Any]:
    """Stored template fields back into parsed values, through the same converters."""
    keys = {key.name: key for key in subcommand(("submit",)).keys}
    return {name: convert(keys[name], str(value)) for name, value in stored.items() if name in keys}


def _job(args: Mapping[str, Any]) -> tuple[int | None, str | None]:
    ref = args["job"]
    return ref.id, ref.name


def _report(ctx: Context, args: Mapping[str, Any]) -> object:
    start, end = report.period(ctx, args.get("days"), args.get("since"))
    return report.report(ctx, args.get("team"), start, end)


def _quota_show(ctx: Context, args: Mapping[str, Any]) -> object:
    found = quotas.show(ctx, args.get("team"))
    return QuotaListing(
        found, "Your team has no quota yet. Admins grant them with /gpu admin quota add"
    )


def _template_save(ctx: Context, args: Mapping[str, Any]) -> object:
    fields = {key: value for key, value in args.items() if key != "name"}
    template, created = templates.save(ctx, args["name"], fields)
    verb = "Saved" if created else "Updated"
    return Notice(
        f'{verb} template "{template.name}": {_fields(template.fields)}\nUse it: /gpu submit template={template.name} name=<job name>'
    )


def _template_list(ctx: Context, args: Mapping[str, Any]) -> object:
    found = templates.listing(ctx)
    if not found:
        return Notice(
            "Your team has no templates yet. Save one with /gpu template save <name> gpus=… hours=…"
        )
    return Notice("\n".join(f"{t.name}: {_fields(t.fields)}" for t in found))


def _template_show(ctx: Context, args: Mapping[str, Any]) -> object:
    template = templates.get(ctx, args["name"])
    return Notice(f"{template.name} (by <@{template.created_by}>): {_fields(template.fields)}")


def _template_delete(ctx: Context, args: Mapping[str, Any]) -> object:
    template = templates.delete(ctx, args["name"])
    return Notice(f'Deleted template "{template.name}".')


def _fields(fields: Mapping[str, Any]) -> str:
    return (
        " ".join(
            f'{key}="{value}"' if " " in str(value) else f"{key}={value}"
            for key, value in fields.items()
        )
        or "(no fields)"
    )


def _team_add(ctx: Context, args: Mapping[str, Any]) -> object:
    team = admin.add_team(ctx, args["name"], args.get("channel"))
    return Notice(
        f"Added team {team.name}." + (f" Notices go to {team.channel}." if team.channel else "")
    )


def _team_list(ctx: Context, args: Mapping[str, Any]) -> object:
    teams = admin.list_teams(ctx)
    return Notice(
        "\n".join(f"{t.name}" + (f" · {t.channel}" if t.channel else "") for t in teams)
        or "No teams yet."
    )


def _team_remove(ctx: Context, args: Mapping[str, Any]) -> object:
    return Notice(f"Removed team {admin.remove_team(ctx, args['name']).name}.")


def _member_add(ctx: Context, args: Mapping[str, Any]) -> object:
    member, created = admin.add_member(ctx, args["user"], args["team"], args.get("role", "member"))
    verb = "Added" if created else "Moved"
    return Notice(f"{verb} <@{member.slack_user_id}> to team {args['team']} as {member.role}.")


def _member_remove(ctx: Context, args: Mapping[str, Any]) -> object:
    return Notice(f"Removed <@{admin.remove_member(ctx, args['user']).slack_user_id}>.")


def _member_role(ctx: Context, args: Mapping[str, Any]) -> object:
    member = admin.set_role(ctx, args["user"], args["role"])
    return Notice(f"<@{member.slack_user_id}> is now {member.role}.")


def _member_list(ctx: Context, args: Mapping[str, Any]) -> object:
    found = admin.list_members(ctx, args.get("team"))
    if not found:
        return Notice(
            "No members yet. Admins add them with /gpu admin member add <@user> team=<team>"
        )
    names = {t.id: t.name for t in admin.list_teams(ctx)}
    return Notice(
        "\n".join(
            f"<@{m.slack_user_id}> · {names.get(m.team_id, 'no team')} · {m.role}" for m in found
        )
    )


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
    return QuotaListing([view], "")


def _quota_renew(ctx: Context, args: Mapping[str, Any]) -> object:
    return QuotaListing([quotas.renew(ctx, args["id"], args["expires"], args.get("hours"))], "")


def _quota_adjust(ctx: Context, args: Mapping[str, Any]) -> object:
    return QuotaListing([quotas.adjust(ctx, args["id"], args["hours"], args["reason"])], "")


def _quota_list(ctx: Context, args: Mapping[str, Any]) -> object:
    return QuotaListing(quotas.listing(ctx, args.get("team")), "No quotas yet.")


def _host_add(ctx: Context, args: Mapping[str, Any]) -> object:
    host = admin.add_host(ctx, args["name"], args["url"])
    return Notice(f"Added host {host.name} ({host.url}). Its GPUs appear once its agent answers.")


def _host_drain(ctx: Context, args: Mapping[str, Any]) -> object:
    host = admin.set_draining(ctx, args["name"], True)
    return Notice(f"Draining {host.name}: running jobs go on, no new job starts there.")


def _host_resume(ctx: Context, args: Mapping[str, Any]) -> object:
    return Notice(f"{admin.set_draining(ctx, args['name'], False).name} takes new jobs again.")


def _host_remove(ctx: Context, args: Mapping[str, Any]) -> object:
    return Notice(f"Removed host {admin.remove_host(ctx, args['name']).name}.")


def _host_list(ctx: Context, args: Mapping[str, Any]) -> object:
    hosts = admin.list_hosts(ctx)
    lines = [
        f"{h.name} · {h.url} · {h.state}" + (" · draining" if h.draining else "") for h in hosts
    ]
    return Notice(
        "\n".join(lines)
        or "No hosts yet. Add one with /gpu admin host add <name> url=http://host:8470"
    )


HANDLERS: dict[tuple[str, ...], Handler] = {
    ("submit",): _submit,
    ("ready",): lambda ctx, a: jobs.mark_ready(ctx, *_job(a), a.get("location")),
    ("queue",): lambda ctx, a: jobs.queue(ctx, a.get("scope", "all")),
    ("board",): lambda ctx, a: board.board(ctx),
    ("status",): lambda ctx, a: jobs.status(ctx, *_job(a)),
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
    ("admin", "host", "resume"): _host_resume,
    ("admin", "host", "remove"): _host_remove,
    ("admin", "host", "list"): _host_list,
}


def help_reply(words: tuple[str, ...]) -> Notice:
    """`help [sub …]`, generated from the grammar's own definitions."""
    return Notice(help_text(words))
