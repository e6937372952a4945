"""The console's announcer: each notice of the outbox printed as the catalogue says it in
English, when no Slack workspace is set (`paika up` without a bot token, `paika demo`)."""

from __future__ import annotations

import sys
from typing import TextIO

from bot.i18n import t
from bot.notice_words import sentence, users
from scheduler.door import Announcement


class ConsoleAnnouncer:
    """Implements scheduler.notices.outbox.Announcer by printing one line a notice."""

    def __init__(self, stream: TextIO | None = None, lang: str = "en") -> None:
        self.stream = stream or sys.stdout
        self.lang = lang

    def announce(self, announcement: Announcement) -> bool:
        print(line(announcement, self.lang), file=self.stream, flush=True)
        return True


def line(announcement: Announcement, lang: str = "en") -> str:
    """`[12:00:05] job_started: job #3 bert started on gpu-a (2× A100) → <@UALICE>`."""
    to = (
        t(lang, "notice.console_to", users=users(announcement.to_users))
        if announcement.to_users
        else ""
    )
    said = sentence(lang, announcement)
    return f"[{announcement.at:%H:%M:%S}] {announcement.kind}: {said}{to}"
