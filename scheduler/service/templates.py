"""Job templates: a team's saved submit fields (the seed's 固化排程模板)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from scheduler.errors import NotFound, PermissionDenied, Problem, UserError
from scheduler.grammar.values import Duration
from scheduler.service.context import Context
from scheduler.service.lookup import team_by_name
from scheduler.service.specs import plain
from storage.models import Team, Template, TemplateVersion
from storage.queries import jobs as job_queries
from storage.queries import templates as template_queries


class SaveOutcome(StrEnum):
    """What a save did: made the template (version 1, or the next after a delete), made a
    new version of it, or nothing, because the fields were already those."""

    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class TemplateVersionView:
    """One saved version of a template: who saved it, when, its fields, and which keys it
    changed against the version before it (every key for the first)."""

    name: str
    version: int
    author: str
    at: datetime
    fields: Mapping[str, Any]
    changed: tuple[str, ...]
    first: bool  # no version before it


@dataclass(frozen=True)
class TemplateHistory:
    """A template's versions, newest first; `latest` is the version in use (None once the
    template was deleted: its versions stay), `more` how many older ones were left out."""

    name: str
    team: str
    versions: tuple[TemplateVersionView, ...]
    latest: int | None
    more: int


def pipeline_of(ctx: Context, first: Template, team_id: int | None = None) -> list[Template]:
    """The templates a pipeline's first one leads to, following `then=` (the first one
    not included); refused when the chain comes back to a template it passed, or is longer
    than MAX_STEPS."""
    steps: list[Template] = []
    seen = [first.name]
    name = (first.fields or {}).get("then")
    while name:
        if name in seen:
            raise UserError(Problem.PIPELINE_LOOP, steps=(*seen, name))
        if len(seen) >= MAX_STEPS:
            raise UserError(Problem.PIPELINE_TOO_LONG, most=MAX_STEPS)
        step = get(ctx, str(name), team_id)
        steps.append(step)
        seen.append(step.name)
        name = (step.fields or {}).get("then")
    return steps


def save(ctx: Context, name: str, fields: Mapping[str, Any]) -> tuple[Template, SaveOutcome]:
    """Create or replace a template of the actor's team, keeping every version.

    A save that changes the fields writes version N + 1 and moves the template on only if
    it is still at N (see storage.queries.templates): two saves at once cannot both be N + 1,
    and the one that lost is run again by the command's race retry. Saving the same fields
    again makes no version.
    """
    team = ctx.require_team()
    team_id = team.id or 0
    stored = to_json(fields)
    _no_loop(ctx, name, stored.get("then"), team_id)
    template = job_queries.template_named(session=ctx.session, team_id=team_id, name=name)
    if template is None:
        version = template_queries.last_version(session=ctx.session, team_id=team_id, name=name)
        template = Template(
            team_id=team_id,
            name=name,
            fields=stored,
            version=version + 1,
            created_by=ctx.actor.user_id,
            created_at=ctx.now,
            updated_at=ctx.now,
        )
        ctx.session.add(template)
        ctx.session.flush()
        outcome = SaveOutcome.CREATED
    else:
        _require_editor(ctx, template)
        if template.fields == stored:
            return template, SaveOutcome.UNCHANGED
        read = template.version
        template_queries.advance(
            session=ctx.session,
            template=template,
            read_version=read,
            version=read + 1,
            fields=stored,
            at=ctx.now,
        )
        outcome = SaveOutcome.UPDATED
    template_queries.add_version(
        session=ctx.session,
        team_id=team_id,
        name=template.name,
        version=template.version,
        fields=stored,
        author=ctx.actor.user_id,
        at=ctx.now,
    )
    ctx.audit(
        "template.save",
        "template",
        template.id,
        name=template.name,
        fields=stored,
        created=outcome is SaveOutcome.CREATED,
        version=template.version,
    )
    return template, outcome


def history(
    ctx: Context, name: str, team: str | None = None, limit: int | None = None
) -> TemplateHistory:
    """A template's versions, newest first, each with the keys it changed; its team's
    members (and admins) may read it, also after the template was deleted."""
    found = _readable_team(ctx, team)
    team_id = found.id or 0
    # Every version (a template has tens, not thousands): the oldest shown needs the one
    # before it to say what it changed, and the reply says how many were left out.
    rows = template_queries.versions(session=ctx.session, team_id=team_id, name=name)
    if not rows:
        raise _not_found(ctx, name, team_id)
    shown = rows if limit is None else rows[:limit]
    views = tuple(
        _view(row, rows[i + 1] if i + 1 < len(rows) else None) for i, row in enumerate(shown)
    )
    live = job_queries.template_named(session=ctx.session, team_id=team_id, name=name)
    return TemplateHistory(
        name=live.name if live is not None else rows[0].name,
        team=found.name,
        versions=views,
        latest=live.version if live is not None else None,
        more=len(rows) - len(views),
    )


def version_of(ctx: Context, name: str, number: int) -> TemplateVersionView:
    """One saved version of a template of the actor's team."""
    team_id = ctx.require_team().id or 0
    row = template_queries.version(session=ctx.session, team_id=team_id, name=name, number=number)
    if row is None:
        rows = template_queries.versions(session=ctx.session, team_id=team_id, name=name)
        if not rows:
            raise _not_found(ctx, name, team_id)
        raise NotFound(
            Problem.TEMPLATE_VERSION_NOT_FOUND,
            name=rows[0].name,
            version=number,
            versions=tuple(str(r.version) for r in reversed(rows)),
        )
    before = template_queries.version(
        session=ctx.session, team_id=team_id, name=name, number=number - 1
    )
    return _view(row, before)


def changed_keys(fields: Mapping[str, Any], before: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The keys whose value differs between two versions (added, changed or removed), in
    the order the newer one lists them, removed ones last."""
    if before is None:
        return tuple(fields)
    changed = [key for key, value in fields.items() if before.get(key, _ABSENT) != value]
    return (*changed, *(key for key in before if key not in fields))


_ABSENT = object()


def _view(row: TemplateVersion, before: TemplateVersion | None) -> TemplateVersionView:
    fields = dict(row.fields or {})
    earlier = dict(before.fields or {}) if before is not None else None
    return TemplateVersionView(
        name=row.name,
        version=row.version,
        author=row.author,
        at=row.at,
        fields=fields,
        changed=changed_keys(fields, earlier),
        first=before is None,
    )


def _readable_team(ctx: Context, team: str | None) -> Team:
    if team is None:
        return ctx.require_team()
    found = team_by_name(ctx, team)
    if not ctx.actor.in_team(found.id or 0):
        raise PermissionDenied(
            Problem.OTHER_TEAMS_TEMPLATES, own=ctx.actor.team_name or "-", team=found.name
        )
    return found


def _not_found(ctx: Context, name: str, team_id: int) -> NotFound:
    names = tuple(t.name for t in job_queries.templates(session=ctx.session, team_id=team_id))
    return NotFound(Problem.TEMPLATE_NOT_FOUND, name=name, templates=names)


def listing(ctx: Context) -> Sequence[Template]:
    """The actor's team's templates."""
    return job_queries.templates(session=ctx.session, team_id=ctx.require_team().id or 0)


def names(ctx: Context) -> list[str]:
    """The names of the actor's team's templates (none for someone in no team)."""
    if ctx.actor.team_id is None:
        return []
    return [template.name for template in listing(ctx)]


def get(ctx: Context, name: str, team_id: int | None = None) -> Template:
    """A template of the actor's team (or of `team_id`) by name."""
    team_id = team_id if team_id is not None else ctx.require_team().id or 0
    template = job_queries.template_named(session=ctx.session, team_id=team_id, name=name)
    if template is None:
        names = tuple(t.name for t in job_queries.templates(session=ctx.session, team_id=team_id))
        raise NotFound(Problem.TEMPLATE_NOT_FOUND, name=name, templates=names)
    return template


def delete(ctx: Context, name: str) -> Template:
    """Delete a template: its author, the team's approvers or an admin."""
    template = get(ctx, name)
    _require_editor(ctx, template)
    ctx.session.delete(template)
    ctx.audit("template.delete", "template", template.id, name=template.name)
    return template


# The most steps one pipeline submits.
MAX_STEPS = 10


def _no_loop(ctx: Context, name: str, then: object, team_id: int) -> None:
    """Refuse a `then=` whose chain of saved templates comes back to `name`."""
    seen = [name]
    while isinstance(then, str) and then:
        if then in seen:
            raise UserError(Problem.PIPELINE_LOOP, steps=(*seen, then))
        seen.append(then)
        nxt = job_queries.template_named(session=ctx.session, team_id=team_id, name=then)
        then = (nxt.fields or {}).get("then") if nxt is not None else None


def to_json(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Parsed submit values as plain JSON (data and type lists become their text forms)."""
    stored: dict[str, Any] = {}
    for key, value in fields.items():
        if key == "data":
            stored[key] = plain(value)  # ready, pending, after:#12 or the place
        elif isinstance(value, tuple):
            stored[key] = ",".join(value)
        elif isinstance(value, Duration):  # with its unit, so it reads back the same
            stored[key] = str(value)
        else:
            stored[key] = value
    return stored


def _require_editor(ctx: Context, template: Template) -> None:
    if template.created_by == ctx.actor.user_id or ctx.actor.is_approver_of(template.team_id):
        return
    raise PermissionDenied(
        Problem.TEMPLATE_NOT_YOURS, name=template.name, owner=template.created_by
    )
