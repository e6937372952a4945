"""`/gpu logs`: a job's output tail. The lines are the job's own text: in Slack they go in a
code block, escaped, so nothing in them becomes a mention, a link or formatting; a long
tail goes up as a text file instead (the reply says so), which Slack shows as it is."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bot.blocks.common import SECTION_TEXT, Message, code_block, context, header, mrkdwn_escape
from bot.i18n import counted, t
from scheduler.door import LogsResult

if TYPE_CHECKING:
    from slack_sdk import WebClient

log = logging.getLogger(__name__)

# A tail longer than this (lines or characters) is uploaded as a file rather than shown in
# the reply: a code block holds one section's text, and a screenful reads best inline.
INLINE_LINES = 40
INLINE_CHARS = SECTION_TEXT - 400


def logs_header(lang: str, result: LogsResult) -> str:
    job = result.job
    return counted(
        lang,
        "logs.header",
        len(result.lines),
        id=job.id,
        name=job.name,
        host=result.host,
        attempt=result.attempt,
        n=len(result.lines),
    )


def logs_notes(lang: str, result: LogsResult) -> list[str]:
    """What a reader should know beside the lines: whose output on a run of several hosts,
    or that there is none yet."""
    notes = []
    if len(result.hosts) > 1:
        notes.append(t(lang, "logs.rank_zero", hosts=", ".join(result.hosts), host=result.host))
    if not result.lines:
        notes.append(t(lang, "logs.empty"))
    return notes


def is_long(result: LogsResult) -> bool:
    """Whether the tail goes up as a file rather than in the reply."""
    return len(result.lines) > INLINE_LINES or len(result.text) > INLINE_CHARS


def logs_message(result: LogsResult, lang: str) -> Message:
    """The reply: the header, the notes, and the tail as a code block (or word of the file)."""
    title = logs_header(lang, result)
    blocks = [header(title)]
    notes = logs_notes(lang, result)
    if is_long(result):
        notes.append(t(lang, "logs.uploaded"))
    elif result.lines:
        blocks.append(
            {"type": "section", "text": {"type": "mrkdwn", "text": code_block(result.text)}}
        )
    if notes:
        blocks.append(context(*(mrkdwn_escape(note) for note in notes)))
    return Message(mrkdwn_escape(title), blocks)


def upload_logs(client: WebClient, channel: str, result: LogsResult, lang: str) -> bool:
    """The whole tail as a text file in `channel` (a DM's id); False when Slack refused it."""
    # Slack's library loads where Slack is used: the console renders these logs too.
    from slack_sdk.errors import SlackClientError

    job = result.job
    try:
        client.files_upload_v2(
            channel=channel,
            content=result.text,
            filename=f"job-{job.id}-run-{result.attempt}.log",
            title=t(lang, "logs.file_title", id=job.id, name=job.name, host=result.host),
        )
    except SlackClientError as exc:
        log.warning("could not upload the output of job #%s: %s", job.id, exc)
        return False
    return True
