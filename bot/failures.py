"""Where a listener's crash ends: the log gets the trace, the user plain words and no trace.

Bolt routes errors of acknowledging listeners to `app.error`; work done after the ack
(lazy listeners) runs on Bolt's threads, where an error would only be logged, so that
work runs inside `reported(…)`, which tells the user the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from bot.blocks.replies import error as error_message
from bot.i18n import t
from bot.services import BotServices

log = logging.getLogger(__name__)


def tell_user(
    services: BotServices, failure: Exception, body: dict[str, Any], respond: Any
) -> None:
    """Log `failure` with its trace; say to the user, if Slack gave a way back, that it failed."""
    log.error("Slack request failed: %s", failure, exc_info=failure)
    if respond is None or not (body.get("response_url") or body.get("response_urls")):
        return
    user = (body.get("user") or {}).get("id") or body.get("user_id")
    try:
        lang = services.language(user) if isinstance(user, str) else "en"
    except Exception:  # the database may be what failed
        lang = "en"
    message = error_message(t(lang, "error.internal"), lang, None)
    try:
        respond(
            text=message.text,
            blocks=message.blocks,
            response_type="ephemeral",
            replace_original=False,
        )
    except Exception:  # the user cannot be told; the log above has it
        log.warning("could not tell the user about the failure", exc_info=True)


@contextmanager
def reported(services: BotServices, body: dict[str, Any], respond: Any) -> Iterator[None]:
    """Run work after the ack; a crash is reported as `app.error` would report it."""
    try:
        yield
    except Exception as failure:
        tell_user(services, failure, body, respond)


def error_handler(services: BotServices) -> Callable[..., None]:
    """The app's one `app.error` handler."""

    def handler(error: Exception, body: dict[str, Any], respond: Any = None) -> None:
        tell_user(services, error, body, respond)

    return handler
