"""The paika core: settings, policy, database and clock wired together once, at the entry point."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from scheduler.clock import Clock, SystemClock
from scheduler.commands import HANDLERS, help_reply
from scheduler.config import PolicyConfig, load_policy
from scheduler.errors import Conflict, PermissionDenied, UserError
from scheduler.grammar import parse
from scheduler.service import jobs
from scheduler.service.context import Context, resolve_actor, track_writes
from scheduler.service.waits import WaitsBoard
from scheduler.settings import Settings
from scheduler.textreply import Notice, render
from storage.db import lost_race, make_engine, session_scope, upgrade
from storage.models import Team
from storage.queries import audit
from storage.queries import org as org_queries

log = logging.getLogger(__name__)
RACE_RETRIES = 3  # a command that lost a race to a change of the same job is run again


@dataclass(frozen=True)
class Reply:
    """What a command answers: the service result (for Block Kit) and its plain text."""

    ok: bool
    text: str
    result: object | None = None
    error: UserError | None = None  # what went wrong, when not ok (a client may render it itself)


@dataclass
class Paika:
    """Everything a command needs, built once per process."""

    settings: Settings
    policy: PolicyConfig
    engine: Engine
    clock: Clock
    # Every waiting job's reason and ETA, shared by this process's commands.
    waits_board: WaitsBoard = field(default_factory=WaitsBoard)

    @classmethod
    def start(cls, settings: Settings, clock: Clock | None = None) -> Paika:
        """Load the policy (failing on a bad file), bring the schema up to date, sync teams."""
        policy = load_policy(settings.policy_path())
        engine = make_engine(settings.resolved_database_url())
        upgrade(engine)
        paika = cls(settings, policy, engine, clock or SystemClock())
        paika.sync_teams()
        return paika

    @property
    def admins(self) -> frozenset[str]:
        """Admins named outside the database: `PAIKA_ADMINS` and the policy file."""
        return frozenset(self.settings.admins) | frozenset(self.policy.admins)

    def sync_teams(self) -> None:
        """Create the teams the policy file names that the database lacks (never deletes)."""
        with session_scope(self.engine) as session:
            now = self.clock.now()
            for name, team in self.policy.teams.items():
                if org_queries.team_by_name(session=session, name=name) is None:
                    session.add(Team(name=name, channel=team.channel, created_at=now))

    def run(self, text: str, user_id: str) -> Reply:
        """Parse and carry out one `/gpu` command as `user_id`; user errors become replies."""
        try:
            command = parse(text)
        except UserError as exc:  # ParseError is one
            return Reply(False, str(exc), error=exc)
        if command.path == ("help",):
            return self._reply(help_reply(tuple(command.args.get("topic", ()))))  # type: ignore[arg-type]
        return self.perform(command.path, command.args, user_id)

    def perform(self, path: tuple[str, ...], args: dict[str, Any], user_id: str) -> Reply:
        """Carry out an already parsed command (text or Slack modal); user errors become replies.

        A command that lost a race (the cycle or another user changed the same job between
        its read and its write) was rolled back whole; it is run again on the fresh state,
        so the user is told what really happened.
        """
        try:
            for _ in range(RACE_RETRIES):
                try:
                    return self._reply(self.execute(path, args, user_id))
                except Exception as exc:
                    if not lost_race(exc):
                        raise
                    log.info("%s by %s raced another change; running it again", path, user_id)
            error = Conflict(
                "The job kept changing while paika carried out your command, so nothing was changed.",
                "Look at it with /gpu status and try again.",
            )
            return Reply(False, str(error), error=error)
        except PermissionDenied as exc:
            self._audit_refusal(path, args, user_id, exc)
            return Reply(False, str(exc), error=exc)
        except UserError as exc:
            return Reply(False, str(exc), error=exc)
        except DBAPIError as exc:
            # The transaction was rolled back, so nothing half-done remains; say so plainly.
            log.exception("database error running %s for %s", " ".join(path), user_id)
            return Reply(
                False,
                "paika's database did not complete this command, so nothing was changed "
                f"({type(exc.orig).__name__}). Try again in a minute; if it keeps failing, tell an admin.",
            )

    def _audit_refusal(
        self, path: tuple[str, ...], args: dict[str, Any], user_id: str, exc: PermissionDenied
    ) -> None:
        """A refused privileged command leaves a trace too (in its own transaction: the
        command's own was rolled back)."""
        try:
            with session_scope(self.engine) as session:
                audit.record(
                    session=session,
                    at=self.clock.now(),
                    actor=user_id,
                    action="refused." + ".".join(path),
                    target_kind="command",
                    target_id=" ".join(path),
                    detail={"why": exc.message, "keys": sorted(args)},
                )
        except DBAPIError:
            log.exception("could not audit a refused %s by %s", " ".join(path), user_id)

    def execute(self, path: tuple[str, ...], args: dict[str, Any], user_id: str) -> object:
        """Run one parsed command in its own transaction; any error rolls it all back.

        A command that changed a job answers with its reason and ETA as of after its commit,
        from the shared board: in a burst, many answers share one run of the policy.
        """
        with self.context(user_id, defer_waits=True) as ctx:
            result = HANDLERS[path](ctx, args)
            deferred = bool(ctx.reuse.get("deferred"))
        if not deferred:
            return result
        with self.context(user_id) as ctx:
            return jobs.with_current_waits(ctx, result)

    @contextmanager
    def context(self, user_id: str, *, defer_waits: bool = False) -> Iterator[Context]:
        """One unit of work as `user_id`, now: committed on success, rolled back on error."""
        with session_scope(self.engine) as session:
            track_writes(session)
            actor = resolve_actor(session, user_id, self.admins)
            yield Context(
                session,
                self.clock.now(),
                self.policy,
                actor,
                waits_board=self.waits_board,
                defer_waits=defer_waits,
            )

    def _reply(self, result: object) -> Reply:
        return Reply(True, render(result, self.policy.zone), result)


__all__ = ["Notice", "Paika", "Reply"]
