"""Planned maintenance and booked cards in a replay: the weekly calendar and what it cost.

A calendar gives every host one maintenance window a week (staggered over the nights of the
week, so a seventh of the hosts go down on each) and, if asked, one booking a week of some
cards of the cluster's most common type for one team. Each window and booking is known
`lead` seconds before it starts, as an admin would plan it.

Three ways to live with a window (`mode`):
- "plan", paika's: from the moment the window is known the policy sees the host's
  `closes_at` and starts nothing there that would still run when it opens (its estimate with
  the maintenance margin); inside the window the host takes nothing.
- "drain", the baseline a team without paika has (`admin host drain` at the start of the
  notice): from the moment the window is known the host takes nothing new, and its running
  jobs finish.
- "ignore", the counterfactual: the windows and bookings are measured but not kept, so the
  replay says what each host would have done in each notice had there been no window.
With plan or drain, at the window's start what still runs on the host is stopped and queued again: a
job that checkpoints goes back to its last checkpoint, an idle-class job keeps its progress
(the engine's model of idle work), any other job loses its run. The host takes jobs again
when the window ends.

What a window's notice cost: the host's GPU time in the notice (from when the window is
known to its start) that held no job (`idle`), and the work of runs begun in the notice that
its start threw away (`thrown`; a run begun before the window was known is counted apart, as
unforeseen: neither mode could have saved it). Against the counterfactual, the GPU-hours
draining lost are what the host would have held in the notices with no window less what it
held doing useful work: busy(ignore) − (busy(mode) − thrown(mode)). Idle time alone
overstates it: a host in its notice on a cluster with free cards elsewhere loses nothing. Comparing the two
modes says how much of what draining at the start of the notice loses the plan keeps busy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.policy.snapshot import TeamWindow
from scheduler.simulate.traces import ClusterSpec

HOUR_S = 3600.0
DAY_S = 24 * HOUR_S
WEEK_S = 7 * DAY_S
WINDOW_HOUR = 22  # a window opens at 22:00 of its night (hours after the trace's first day)
BOOKING_DAY, BOOKING_HOUR = 4, 8  # a booking opens on the fifth day of each week, at 08:00

CALENDAR_MODES = ("plan", "drain", "ignore")


@dataclass(frozen=True, slots=True)
class HostWindow:
    """A maintenance window of the cluster's `host`-th host (in the replay's host order)."""

    host: int
    starts: float
    ends: float
    known_from: float


@dataclass(frozen=True, slots=True)
class Booking:
    """Cards booked for a team (the policy's TeamWindow), in the snapshot from `known_from`."""

    window: TeamWindow
    known_from: float


@dataclass(frozen=True, slots=True)
class Calendar:
    mode: str
    windows: tuple[HostWindow, ...] = ()
    bookings: tuple[Booking, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in CALENDAR_MODES:
            raise ValueError(
                f"unknown maintenance mode {self.mode!r}; use one of: {', '.join(CALENDAR_MODES)}"
            )


@dataclass(frozen=True, slots=True)
class WeeklyPlan:
    """`--maintenance plan|drain` with its hours: a window of `hours` per host per week known
    `lead_hours` ahead; `booking_gpus` cards booked weekly for `booking_hours`, known
    `booking_lead_hours` ahead (0 cards: no booking)."""

    mode: str
    hours: float = 4.0
    lead_hours: float = 24.0
    booking_gpus: int = 0
    booking_hours: float = 12.0
    booking_lead_hours: float = 72.0

    def __post_init__(self) -> None:
        if self.mode not in CALENDAR_MODES:
            raise ValueError(
                f"unknown maintenance mode {self.mode!r}; use one of: {', '.join(CALENDAR_MODES)}"
            )
        if not 0 < self.hours < 24:
            raise ValueError("--maintenance-hours must be above 0 and below 24")
        if self.lead_hours < 0 or self.lead_hours + self.hours > WEEK_S / HOUR_S:
            raise ValueError("--maintenance-lead-hours plus the window must fit in a week")
        if self.booking_gpus < 0:
            raise ValueError("--booking-gpus must be 0 or more")
        if not 0 < self.booking_hours <= 24 * 6:
            raise ValueError("--booking-hours must be above 0 and at most six days")
        if self.booking_lead_hours < 0:
            raise ValueError("--booking-lead-hours must be 0 or more")


def weekly_calendar(
    plan: WeeklyPlan, cluster: ClusterSpec, first: float, last: float, team: str
) -> Calendar:
    """One window per host per week from the week of `first` while it starts before `last`,
    host i on night i mod 7; and a weekly booking of `plan.booking_gpus` cards of the
    cluster's most common type (at most all of them) for `team`."""
    hosts = sum(group.count for group in cluster.groups)
    windows: list[HostWindow] = []
    length, lead = plan.hours * HOUR_S, plan.lead_hours * HOUR_S
    week = 0
    while first + week * WEEK_S < last:
        for host in range(hosts):
            starts = first + week * WEEK_S + (host % 7) * DAY_S + WINDOW_HOUR * HOUR_S
            if starts < last:
                windows.append(HostWindow(host, starts, starts + length, starts - lead))
        week += 1
    windows.sort(key=lambda window: (window.starts, window.host))
    bookings: list[Booking] = []
    if plan.booking_gpus:
        by_type = cluster.gpus_by_type()
        gpu_type = Counter(by_type).most_common(1)[0][0]
        gpus = min(plan.booking_gpus, by_type[gpu_type])
        week = 0
        while True:
            starts = first + week * WEEK_S + BOOKING_DAY * DAY_S + BOOKING_HOUR * HOUR_S
            if starts >= last:
                break
            ends = starts + plan.booking_hours * HOUR_S
            window = TeamWindow(week + 1, gpu_type, gpus, team, starts, ends)
            bookings.append(Booking(window, starts - plan.booking_lead_hours * HOUR_S))
            week += 1
    return Calendar(plan.mode, tuple(windows), tuple(bookings))


def busiest_team(teams: Sequence[tuple[str, float]]) -> str:
    """The team with the most GPU-hours among (team, GPU-hours) pairs: whom a booking is for."""
    hours: dict[str, float] = {}
    for team, gpu_hours in teams:
        hours[team] = hours.get(team, 0.0) + gpu_hours
    return min(hours, key=lambda team: (-hours[team], team)) if hours else "team"


@dataclass
class WindowFigures:
    """What one window cost: its host's GPU time in the notice, how much of it held jobs,
    and the work its start threw away (GPU-seconds), with the jobs it stopped."""

    host: int
    starts: float
    notice_gpu_s: float = 0.0
    busy_gpu_s: float = 0.0
    thrown_gpu_s: float = 0.0  # by runs begun in the notice
    unforeseen_gpu_s: float = 0.0  # by runs begun before the window was known
    stopped: int = 0

    @property
    def unused_gpu_s(self) -> float:
        """The notice's GPU time that did no useful work: idle, plus the work of runs begun in
        it that the start threw away (runs begun before it was known are lost whatever is
        done)."""
        return self.notice_gpu_s - self.busy_gpu_s + self.thrown_gpu_s


@dataclass
class BookingFigures:
    """One booking at its start: the cards it books, and the cards of its type free (on hosts
    that take jobs) or already held by its team then."""

    id: int
    gpus: int
    available: int = 0

    @property
    def honoured(self) -> bool:
        return self.available >= self.gpus


def calendar_summary(
    mode: str, windows: Sequence[WindowFigures], bookings: Sequence[BookingFigures]
) -> dict[str, object]:
    """The calendar's figures of one or more replays, in GPU-hours."""
    notice = sum(w.notice_gpu_s for w in windows)
    busy = sum(w.busy_gpu_s for w in windows)
    thrown = sum(w.thrown_gpu_s for w in windows)
    unforeseen = sum(w.unforeseen_gpu_s for w in windows)
    return {
        "mode": mode,
        "windows": len(windows),
        "notice_gpu_hours": notice / HOUR_S,
        "busy_gpu_hours": busy / HOUR_S,
        "idle_gpu_hours": (notice - busy) / HOUR_S,
        "thrown_gpu_hours": thrown / HOUR_S,
        "unused_gpu_hours": (notice - busy + thrown) / HOUR_S,
        "unforeseen_gpu_hours": unforeseen / HOUR_S,
        "stopped_jobs": sum(w.stopped for w in windows),
        "bookings": len(bookings),
        "bookings_honoured": sum(1 for b in bookings if b.honoured),
        "booked_cards_short": sum(max(0, b.gpus - b.available) for b in bookings),
    }
