"""Words the board and the digest share about the queue (no Slack here: the console says them
too)."""

from __future__ import annotations

from bot.i18n import t


def none_next_up(lang: str, waiting: int, for_data: int) -> str:
    """Why "next up" is empty. It leaves out the jobs that cannot start (their data, their
    quota, no host for them), so "nothing is waiting" is said only when nothing is, and
    "every job waits for its data" only when that is all that holds them."""
    if not waiting:
        return t(lang, "board.nothing_waiting")
    return t(lang, "board.none_can_start" if waiting == for_data else "board.none_can_start_held")
