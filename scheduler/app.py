"""The paika core: settings, policy, database and clock wired together once, at the entry point."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from zoneinfo import ZoneInfo

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from scheduler.clock import Clock, SystemClock
from scheduler.commands import HANDLERS, help_reply
from scheduler.config import PolicyConfig
from scheduler.configs.live import LivePolicy
from scheduler.configs.start import policy_at_start
from scheduler.errors import Conflict, PermissionDenied, Problem, UserError
from scheduler.grammar import parse
from scheduler.service import estimates, jobs, quotas, slack, templates
from scheduler.service.board import BoardResult, board
from scheduler.service.context import Context, resolve_actor, track_writes
from scheduler.service.jobs import JobView
from scheduler.service.lookup import submit_team_names
from scheduler.service.quotas import QuotaView
from scheduler.service.slack import ApprovalRequest
from scheduler.service.waits import WaitsBoard
from scheduler.settings import Settings
from scheduler.snapshots import EstimateRecord
from storage.db import lost_race, make_engine, session_scope, upgrade
from storage.models import Team
from storage.queries import audit
from storage.queries import org as org_queries

if TYPE_CHECKING:
    from scheduler.alerts.idle import IdleAnswer
    from scheduler.alerts.overrun import OverrunAnswer
    from scheduler.alerts.quota import QuotaAck


class _AlertAnswer(Protocol):
    """What every alert answer says of the click: a known alert, allowed, and whether it
    changed anything (the first answer wins)."""

    @property
    def known(self) -> bool: ...
    @property
    def allowed(self) -> bool: ...
    @property
    def changed(self) -> bool: ...


A = TypeVar("A", bound=_AlertAnswer)

log = logging.getLogger(__name__)
RACE_RETRIES = 3  # a command that lost a race to a change of the same job is run again
# Commands that read what the policy worked out (reasons, ETAs, the queue) and change nothing.
READS_THE_PLAN = frozenset({("queue",), ("board",), ("status",)})
T = TypeVar("T")


@dataclass(frozen=True)
class Reply:
    """What a command answers: the service result (for Block Kit) and its plain text."""

    ok: bool
    text: str
    result: object | None = None
    error: UserError | None = None  # what went wrong, when not ok (a client may render it itself)


# How a face turns a result into plain text (bot.console.render); the core has no words.
Words = Callable[[object, ZoneInfo], str]


def wordless(result: object, zone: ZoneInfo) -> str:
    """A core given no face (a benchmark, a simulation) names a result by its kind only,
    and an error by its code and values."""
    return str(result) if isinstance(result, UserError) else type(result).__name__


@dataclass(frozen=True)
class Answer:
    """A command's answer once its change is made (Paika.begin_run, Paika.begin): known
    already (an error, or a result with nothing left to work out), or read when called."""

    known: Reply | None = None
    read: Callable[[], Reply] | None = None

    def __call__(self) -> Reply:
        if self.known is not None:
            return self.known
        assert self.read is not None
        return self.read()

    @property
    def refused(self) -> Reply | None:
        """The error, when the command was refused or failed (nothing was changed)."""
        return self.known if self.known is not None and not self.known.ok else None


@dataclass
class Paika:
    """Everything a command needs, built once per process."""

    settings: Settings
    # The policy in force, following the stored config versions (scheduler/configs/).
    # A PolicyConfig given here is held fixed (never looks for versions).
    live: LivePolicy
    engine: Engine
    clock: Clock
    # Every waiting job's reason and ETA, shared by this process's commands.
    waits_board: WaitsBoard = field(default_factory=WaitsBoard)
    # Called after a command changed something: it may have written notices to the outbox
    # (`paika up` wakes its courier, so approvers are asked at once).
    on_change: Callable[[], None] = field(default=lambda: None)
    # A reply's plain text comes from the face that runs this core (bot.cli passes the
    # console's words): the scheduler decides, it does not speak.
    words: Words = wordless

    def __post_init__(self) -> None:
        if isinstance(self.live, PolicyConfig):
            self.live = LivePolicy.fixed(self.live)

    @property
    def policy(self) -> PolicyConfig:
        """The policy in force (commands look for a new version as they start)."""
        return self.live.current

    @policy.setter
    def policy(self, policy: PolicyConfig) -> None:
        # The demo and tests adjust timings in memory; a newer stored version replaces it.
        self.live.pin(policy)

    @classmethod
    def start(
        cls, settings: Settings, clock: Clock | None = None, words: Words = wordless
    ) -> Paika:
        """Bring the schema up to date, settle which config version is in force (failing on
        a bad policy file), sync teams."""
        engine = make_engine(settings.resolved_database_url())
        upgrade(engine)
        clock = clock or SystemClock()
        author = "bundled" if settings.config is None else "PAIKA_CONFIG"
        try:
            live = policy_at_start(engine, settings.policy_path(), author, clock.now())
        except BaseException:  # a bad policy file: nothing is kept open
            engine.dispose()
            raise
        paika = cls(settings, live, engine, clock, words=words)
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
        return self.begin_run(text, user_id)()

    def perform(self, path: tuple[str, ...], args: dict[str, Any], user_id: str) -> Reply:
        """Carry out an already parsed command (text or Slack modal); user errors become replies."""
        return self.begin(path, args, user_id)()

    def begin_run(self, text: str, user_id: str) -> Answer:
        """`run` in two steps, for a bot answering a burst of commands: the command's change
        is made now, and the returned call reads its answer.

        Answers read after every change of a burst see one state, so their reasons and ETAs
        come from one run of the policy (scheduler.service.waits) instead of one per
        command. Commands that only read what the policy worked out (queue, board, status)
        do all their work when the answer is read.
        """
        try:
            command = parse(text)
        except UserError as exc:  # ParseError is one
            return _answered(self._refusal(exc))
        if command.path == ("help",):
            return _answered(self._reply(help_reply(tuple(command.args.get("topic", ())))))  # type: ignore[arg-type]
        if command.path in READS_THE_PLAN:
            return Answer(read=partial(self.perform, command.path, command.args, user_id))
        return self.begin(command.path, command.args, user_id)

    def begin(self, path: tuple[str, ...], args: dict[str, Any], user_id: str) -> Answer:
        """Make the command's change now (committed, or rolled back whole); the returned call
        reads its answer, with the job's reason and ETA as of when it is called.

        A command that lost a race (the cycle or another user changed the same job between
        its read and its write) was rolled back whole; it is run again on the fresh state,
        so the user is told what really happened.
        """
        outcome = self._guarded(path, args, user_id, lambda: self._change(path, args, user_id))
        if isinstance(outcome, Reply):
            return _answered(outcome)
        result, deferred = outcome
        if path[0] == "config":  # a new version is in force here at once, not within 2 s
            self.live.refresh(self.engine)
        self.on_change()
        if not deferred:
            return _answered(self._reply(result))

        def read() -> Reply:
            with self.context(user_id) as ctx:
                return self._reply(jobs.with_current_waits(ctx, result))

        return Answer(read=partial(self._guarded, path, args, user_id, read))

    def _change(
        self, path: tuple[str, ...], args: dict[str, Any], user_id: str
    ) -> tuple[object, bool]:
        """The command's own transaction, run again if it lost a race: its result, and
        whether its job's reason and ETA are left to be read after the commit."""
        for _ in range(RACE_RETRIES):
            try:
                with self.context(user_id, defer_waits=True) as ctx:
                    result = HANDLERS[path](ctx, args)
                    return result, bool(ctx.reuse.get("deferred"))
            except Exception as exc:
                if not lost_race(exc):
                    raise
                log.info("%s by %s raced another change; running it again", path, user_id)
        raise Conflict(Problem.KEPT_CHANGING)

    def _guarded(
        self,
        path: tuple[str, ...],
        args: dict[str, Any],
        user_id: str,
        work: Callable[[], T],
    ) -> T | Reply:
        """`work`, with user errors and database failures turned into replies."""
        try:
            return work()
        except PermissionDenied as exc:
            self._audit_refusal(path, args, user_id, exc)
            return self._refusal(exc)
        except UserError as exc:  # Conflict is one
            return self._refusal(exc)
        except DBAPIError as exc:
            # The transaction was rolled back, so nothing half-done remains; say so plainly.
            log.exception("database error running %s for %s", " ".join(path), user_id)
            return self._refusal(UserError(Problem.DATABASE, kind=type(exc.orig).__name__))

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
                    detail={
                        "why": exc.problem.value,
                        "values": dict(exc.values),
                        "keys": sorted(args),
                    },
                )
        except DBAPIError:
            log.exception("could not audit a refused %s by %s", " ".join(path), user_id)

    @contextmanager
    def context(self, user_id: str, *, defer_waits: bool = False) -> Iterator[Context]:
        """One unit of work as `user_id`, now: committed on success, rolled back on error."""
        self.live.refresh_if_due(self.engine)
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
                agent_secret_file=self.settings.agent_secret_file,
                agent_token=self.settings.agent_token,
                agent_ca_file=self.settings.agent_ca_file,
            )

    def _reply(self, result: object) -> Reply:
        return Reply(True, self.words(result, self.policy.zone), result)

    # ---- answers to alerts' buttons: the same door as commands (the clock, the refusal's
    # audit, the courier woken for what the answer sends), not the alerts' modules directly.

    def acknowledge_quota_alert(self, key: str | None, user_id: str) -> QuotaAck:
        """The quota's owner or an admin acknowledges a quota alert (None: no alert named)."""
        from scheduler.alerts import quota

        if key is None:
            return quota.QuotaAck(known=False)
        found = quota.acknowledge(self.engine, self.admins, key, user_id, self.clock.now())
        return self._answered_alert("quota", key, user_id, found)

    def answer_idle_alert(self, key: str | None, answer: str, user_id: str) -> IdleAnswer:
        """Still using, or release: the job's owner, an approver of its team or an admin."""
        from scheduler.alerts import idle

        if key is None:
            return idle.IdleAnswer(known=False)
        found = idle.answer_idle(
            self.engine, self.policy, self.admins, key, answer, user_id, self.clock.now()
        )
        return self._answered_alert("idle", key, user_id, found)

    def answer_overrun_alert(self, key: str | None, answer: str, user_id: str) -> OverrunAnswer:
        """Extend or stop a run past its estimate: its owner, an approver or an admin."""
        from scheduler.alerts import overrun

        if key is None:
            return overrun.OverrunAnswer(known=False)
        found = overrun.answer_overrun(
            self.engine, self.policy, self.admins, key, answer, user_id, self.clock.now()
        )
        return self._answered_alert("overrun", key, user_id, found)

    def _answered_alert(self, kind: str, key: str, user_id: str, found: A) -> A:
        if found.known and not found.allowed:
            self._audit_refused_answer(kind, key, user_id)
        if found.changed:
            self.on_change()  # a release or a stop sends notices: the courier goes now
        return found

    def _audit_refused_answer(self, kind: str, key: str, user_id: str) -> None:
        """A click on someone else's alert leaves a trace, as a refused command does."""
        try:
            with session_scope(self.engine) as session:
                audit.record(
                    session=session,
                    at=self.clock.now(),
                    actor=user_id,
                    action=f"refused.alert.{kind}",
                    target_kind="alert",
                    target_id=key,
                    detail={"why": "not_owner_or_approver"},
                )
        except DBAPIError:
            log.exception("could not audit a refused %s alert answer by %s", kind, user_id)

    def _refusal(self, error: UserError) -> Reply:
        return Reply(False, self.words(error, self.policy.zone), error=error)


@dataclass(frozen=True)
class HomeData:
    """What one user's App Home shows."""

    my_jobs: Sequence[JobView]
    board: BoardResult
    quotas: Sequence[QuotaView]
    estimates: EstimateRecord | None = None  # how the user's runs compared with their estimates


@dataclass(frozen=True)
class SubmitChoices:
    """The options the submit modal offers this user."""

    gpu_types: Sequence[str]
    teams: Sequence[str]
    templates: Sequence[str]


@dataclass(frozen=True)
class SlackDoor:
    """What only the Slack face asks beyond commands, through the core as commands go.

    Reads run as the asking user in one unit of work on the service's clock and policy
    (`Paika.context`: the newest stored policy version, the actor's role). What Slack
    remembers of its own (requests seen, where an approval was posted) changes no job and
    sends no notice, so it neither wakes the courier nor leaves an audit record: those
    follow a command's change or refusal (`Paika.begin`, `Paika._guarded`).
    """

    paika: Paika

    def home(self, user_id: str) -> HomeData:
        """The user's jobs, the board and the user's team's quotas."""

        def read(ctx: Context) -> HomeData:
            with jobs.reusing_waits(ctx):  # the user's jobs and the board: one policy run
                mine = jobs.queue(ctx, "mine")
                drawn = board(ctx)
            try:
                team_quotas: Sequence[QuotaView] = quotas.show(ctx, None)
            except UserError:  # not in a team yet: no quotas to show
                team_quotas = ()
            mine_all = [*mine.running, *mine.waiting]
            return HomeData(mine_all, drawn, team_quotas, estimates.own(ctx))

        return self._as(user_id, read)

    def submit_choices(self, user_id: str) -> SubmitChoices:
        """Card types, the teams the user may submit for and the user's team's templates,
        for the modal's menus."""

        def read(ctx: Context) -> SubmitChoices:
            types = [card.name for card in jobs.catalog(ctx)]
            return SubmitChoices(types, submit_team_names(ctx), templates.names(ctx))

        return self._as(user_id, read)

    def approval(self, request_id: int) -> ApprovalRequest | None:
        """A bump request with its job and where its approvers are asked; None if gone."""
        admins = self.paika.admins
        return self._as("", lambda ctx: slack.approval(ctx, request_id, admins))

    def remember_approval_message(self, request_id: int, channel: str, ts: str) -> None:
        """Where the request's buttons were posted, so a later decision updates that message."""
        slack.remember_approval_message(self.paika.engine, request_id, channel, ts)

    def chosen_language(self, user_id: str) -> str:
        """The language `user_id` chose with `/gpu lang`, or "" if they never chose."""
        return slack.chosen_language(self.paika.engine, user_id)

    def first_delivery(self, event_id: str) -> bool:
        """True the first time an Events API delivery is seen, by any paika instance."""
        return slack.first_delivery(self.paika.engine, event_id, self.paika.clock.now())

    def first_sighting(self, request: str) -> bool:
        """True the first time a Slack request (its signature, or an envelope id) is seen,
        by any paika instance."""
        return slack.first_sighting(self.paika.engine, request, self.paika.clock.now())

    def purge_sightings(self) -> None:
        """Forget sightings too old for Slack to replay."""
        slack.purge_sightings(self.paika.engine, self.paika.clock.now())

    def _as(self, user_id: str, work: Callable[[Context], T]) -> T:
        with self.paika.context(user_id) as ctx:
            return work(ctx)


def _answered(reply: Reply) -> Answer:
    """An answer already known (an error, or a result with nothing left to read)."""
    return Answer(known=reply)


__all__ = [
    "Answer",
    "HomeData",
    "Paika",
    "Reply",
    "SlackDoor",
    "SubmitChoices",
    "Words",
    "wordless",
]
