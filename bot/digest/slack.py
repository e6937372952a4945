"""Posting the daily digest to Slack: the Block Kit board, then its picture as a file.

The picture is drawn before anything is posted, so a drawing problem posts nothing. The
file goes to the channel id Slack answered the message with: files.completeUploadExternal
takes only an id, while the policy may name the channel as #name.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, MutableMapping
from zoneinfo import ZoneInfo

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.blocks.digest import digest_blocks, picture_words
from bot.digest.picture import font_note, render_png
from scheduler.door import Digest

log = logging.getLogger(__name__)

MESSAGE = "message"  # progress: the channel id the board was posted to
PICTURE = "picture"  # progress: the uploaded file's id


def post_digest(
    client: WebClient,
    channel: str,
    digest: Digest,
    lang: str,
    zone: ZoneInfo,
    *,
    progress: MutableMapping[str, str] | None = None,
) -> bool:
    """Post the digest's board and upload its picture to `channel`; True only if both got through.

    A Slack error is logged and answers False, so the outbox tries again later. Pass the
    same `progress` mapping to a retry of the same digest and it skips the steps that
    already got through (the board is not posted twice when only the upload failed).
    """
    done: MutableMapping[str, str] = {} if progress is None else progress
    png = render_png(digest, lang)
    title, comment, alt = picture_words(digest, lang)
    if (note := font_note(lang)) is not None:  # drawn in English: say why, and the fix
        comment = f"{comment}\n{note}"
    try:
        if MESSAGE not in done:
            names = display_names(client, _people(digest))
            message = digest_blocks(digest, lang, zone, names=names)
            answer = client.chat_postMessage(
                channel=channel, text=message.text, blocks=message.blocks, unfurl_links=False
            )
            done[MESSAGE] = str(answer.get("channel") or channel)
        if PICTURE not in done:
            uploaded = client.files_upload_v2(
                channel=done[MESSAGE],
                file=png,
                filename=f"paika-board-{digest.day.isoformat()}.png",
                title=title,
                alt_txt=alt,
                initial_comment=comment,
            )
            done[PICTURE] = str((uploaded.get("file") or {}).get("id") or "")
    except SlackClientError as exc:
        log.warning("could not post the digest of %s to %s: %s", digest.day, channel, _why(exc))
        return False
    return True


def display_names(client: WebClient, user_ids: Iterable[str]) -> dict[str, str]:
    """Each user's display name (else real name) from users.info; users it cannot look up
    are left out, and the digest shows their id instead."""
    names = {}
    for user_id in sorted(set(user_ids)):
        if user_id[:1] not in ("U", "W"):
            continue
        try:
            user = client.users_info(user=user_id).get("user") or {}
        except SlackClientError as exc:
            log.info("no name for %s: %s", user_id, _why(exc))
            continue
        profile = user.get("profile") or {}
        name = profile.get("display_name") or profile.get("real_name") or user.get("real_name")
        if name:
            names[user_id] = str(name)
    return names


def _people(digest: Digest) -> set[str]:
    """Everyone the digest names."""
    return (
        {line.owner for line in digest.waiting_data}
        | {line.owner for line in digest.next_up}
        | {job.owner for job in digest.idle.jobs}
        | {warning.owner for warning in digest.quota_warnings}
    )


def _why(exc: SlackClientError) -> str:
    if isinstance(exc, SlackApiError):
        return str(exc.response.get("error", exc))
    return str(exc)
