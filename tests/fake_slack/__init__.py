"""An offline Slack: signed requests and a local stand-in for the Web API.

For the tests, the benchmarks and trying paika without a workspace. ``signing`` builds the
requests Slack sends to the app (slash commands, clicks, modal submissions, events), signed
with a signing secret; ``slack_server.FakeSlack`` serves the Web API, response URLs and file
uploads on a loopback port and records what the bot sent; ``socket_mode`` is the local
WebSocket that ``FakeSlack(socket_mode=True)`` hands out. Everything listens on 127.0.0.1;
nothing here reaches the internet. For example ``from fake_slack import BOT_TOKEN, signing``
and ``from fake_slack.slack_server import FakeSlack``.

The identifiers below describe the one workspace the fake serves. They are shared by the
fake Web API (``auth.test`` answers with them) and by the request builders, so that what a
signed request claims and what the Web API says about the bot agree, as they do in Slack.
"""

from __future__ import annotations

TEAM_ID = "T0PAIKA01"
TEAM_DOMAIN = "paika-test"
ENTERPRISE_ID: str | None = None
APP_ID = "A0PAIKA01"
BOT_ID = "B0PAIKA01"
BOT_USER_ID = "U0PAIKABOT"
BOT_NAME = "paika"

BOT_TOKEN = "xoxb-1111111111-2222222222-paikatestbottoken"
APP_TOKEN = "xapp-1-A0PAIKA01-3333333333-paikatestapptoken"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
# Slack's deprecated verification token, still sent in every payload.
VERIFICATION_TOKEN = "paikaVerificationToken01"

USER_ID = "U012AB3CD"
USER_NAME = "alice"
CHANNEL_ID = "C0GPUQUEUE"
CHANNEL_NAME = "gpu-queue"

__all__ = [
    "APP_ID",
    "APP_TOKEN",
    "BOT_ID",
    "BOT_NAME",
    "BOT_TOKEN",
    "BOT_USER_ID",
    "CHANNEL_ID",
    "CHANNEL_NAME",
    "ENTERPRISE_ID",
    "SIGNING_SECRET",
    "TEAM_DOMAIN",
    "TEAM_ID",
    "USER_ID",
    "USER_NAME",
    "VERIFICATION_TOKEN",
]
