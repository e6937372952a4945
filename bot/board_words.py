"""Words the board and the digest share about the queue (no Slack here: the console says them
too)."""

from __future__ import annotations

from collections.abc import Callable
from zoneinfo import ZoneInfo

from bot.i18n import t, when
from scheduler.door import CardJob, CardView, HostView


def none_next_up(lang: str, waiting: int, for_data: int) -> str:
    """Why "next up" is empty. It leaves out the jobs that cannot start (their data, their
    quota, no host for them), so "nothing is waiting" is said only when nothing is, and
    "every job waits for its data" only when that is all that holds them."""
    if not waiting:
        return t(lang, "board.nothing_waiting")
    return t(lang, "board.none_can_start" if waiting == for_data else "board.none_can_start_held")


def shared_card(
    lang: str, card: CardView, job: Callable[[CardJob], str], owner: Callable[[str], str]
) -> str:
    """A shared card's jobs, each with its owner and its memory of the card's: "shared: #12
    eval @alice 20 of 80 GiB + #13 debug @bob 30 of 80 GiB". `job` and `owner` say a job and
    a person as the face does (Slack's bold ids and mentions, or the console's plain text)."""
    jobs = " + ".join(
        t(
            lang,
            "board.shared_job",
            job=job(on),
            owner=owner(on.owner),
            memory=on.memory_gib,
            total=card.memory_gib,
        )
        for on in card.jobs
    )
    return t(lang, "board.shared_card", jobs=jobs)


def maintenance_note(lang: str, host: HostView, zone: ZoneInfo) -> str | None:
    """A host's planned maintenance, under way or next: its note on the board."""
    window = host.maintenance
    if window is None:
        return None
    ends = when(lang, window.ends, zone)
    if window.under_way:
        return t(lang, "board.maintenance_now", ends=ends)
    return t(lang, "board.maintenance_next", starts=when(lang, window.starts, zone), ends=ends)
