"""The bot under test: the real Bolt app served over HTTP, its Web API on a fake Slack."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_slack.slack_server import FakeSlack
from paika_test_slack import MEMBER, Bot, running_bot, settled, text_of

from scheduler.app import Paika
from scheduler.notices import approvals
from storage.db import make_engine, upgrade

__all__ = ["MEMBER", "Bot", "settled", "text_of"]  # what the bot tests import from here

ADMIN = "UADMIN"
APPROVER = "UAPPROVER"
OTHER = "UOTHER01"


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """slack_sdk sends even loopback traffic through a proxy named in the environment."""
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def backend_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bot scenarios run on SQLite: the database paths are covered by the service tests."""
    url = f"sqlite:///{Path(tmp_path_factory.mktemp('botdb')) / 'paika.db'}"
    upgrade(make_engine(url))
    yield url


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    yield from FakeSlack.serve(socket_mode=True)


@pytest.fixture
def bot(paika: Paika, slack: FakeSlack) -> Iterator[Bot]:
    # As in `paika up`, a command's approval notices go out at once through the outbox;
    # the tests deliver the other notices (alerts, job events) themselves.
    with running_bot(paika, slack, (approvals.REQUEST_KIND, approvals.DECISION_KIND)) as bot:
        yield bot


@pytest.fixture
def team_bot(bot: Bot) -> Bot:
    """The bot with a team: MEMBER and OTHER in vision, APPROVER approving for vision."""
    for text in (
        f"admin member add <@{MEMBER}> team=vision",
        f"admin member add <@{OTHER}> team=nlp",
        f"admin member add <@{APPROVER}> team=vision role=approver",
    ):
        assert bot.paika.run(text, ADMIN).ok
    return bot
