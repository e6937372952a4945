"""Job templates: a team's saved submit fields (the seed's 固化排程模板)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.errors import NotFound, PermissionDenied, Problem
from scheduler.service.context import Context
from storage.models import Template
from storage.queries import jobs as job_queries


def save(ctx: Context, name: str, fields: Mapping[str, Any]) -> tuple[Template, bool]:
    """Create or replace a template of the actor's team; True when it was new."""
    team = ctx.require_team()
    stored = to_json(fields)
    template = job_queries.template_named(session=ctx.session, team_id=team.id or 0, name=name)
    created = template is None
    if template is None:
        template = Template(
            team_id=team.id or 0,
            name=name,
            created_by=ctx.actor.user_id,
            created_at=ctx.now,
            updated_at=ctx.now,
        )
    else:
        _require_editor(ctx, template)
    template.fields = stored
    template.updated_at = ctx.now
    ctx.session.add(template)
    ctx.session.flush()
    ctx.audit("template.save", "template", template.id, name=name, fields=stored, created=created)
    return template, created


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


def to_json(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Parsed submit values as plain JSON (data and type lists become their text forms)."""
    stored: dict[str, Any] = {}
    for key, value in fields.items():
        if key == "data":
            stored[key] = "ready" if value.ready else (value.location or "pending")
        elif isinstance(value, tuple):
            stored[key] = ",".join(value)
        else:
            stored[key] = value
    return stored


def _require_editor(ctx: Context, template: Template) -> None:
    if template.created_by == ctx.actor.user_id or ctx.actor.is_approver_of(template.team_id):
        return
    raise PermissionDenied(
        Problem.TEMPLATE_NOT_YOURS, name=template.name, owner=template.created_by
    )
