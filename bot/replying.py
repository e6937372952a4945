"""A command's outcome as a Slack message in the user's language."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from bot.blocks.replies import Message, error, reply
from bot.said import problem as problem_words
from bot.said import problem_sentence
from scheduler.door import Reply
from scheduler.grammar.errors import ParseError

# Words a user may add to a read-only command to post its answer in the channel.
SHARE_WORDS = ("share", "--share")
SHAREABLE = ("queue", "board", "status", "report", "quota")


def message_for(outcome: Reply, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    """The reply to show: the result's blocks, or the error with how to fix it."""
    if outcome.ok:
        return reply(outcome.result, lang, zone, now)
    problem = outcome.error
    if problem is None:
        return error(outcome.text, lang, None)
    if isinstance(problem, ParseError):
        # The example goes in a context block of its own, shown as code.
        return error(problem_sentence(lang, problem), lang, problem.example)
    return error(problem_words(lang, problem), lang, None)


def split_share(text: str) -> tuple[str, bool]:
    """`queue mine share` → ("queue mine", True) for read-only commands; anything else unchanged."""
    words = text.split()
    if len(words) >= 2 and words[-1].lower() in SHARE_WORDS and words[0].lower() in SHAREABLE:
        return " ".join(words[:-1]), True
    return text, False
