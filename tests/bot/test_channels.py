"""Channels by id: a #name is looked up once with conversations.list and posting goes to the
id, so a rename does not break posting; what each configured channel resolved to is logged."""

from __future__ import annotations

import logging

import pytest
from fake_slack import BOT_TOKEN
from fake_slack.slack_server import FakeSlack
from slack_sdk import WebClient

from bot.channels import ChannelDirectory

OPS = "C0OPS00001"


def _directory(slack: FakeSlack) -> ChannelDirectory:
    return ChannelDirectory(WebClient(base_url=slack.api_url, token=BOT_TOKEN))


def test_a_name_resolves_to_its_id_once_and_survives_a_rename(slack: FakeSlack) -> None:
    slack.set_channel(OPS, "gpu-ops")
    directory = _directory(slack)
    assert directory.id_of("#gpu-ops") == OPS
    assert directory.id_of("gpu-ops") == OPS
    slack.set_channel(OPS, "gpu-ops-renamed")  # renamed in Slack after paika looked it up
    assert directory.id_of("#gpu-ops") == OPS
    # ids and mentions are taken as they are, with no call to Slack
    assert directory.id_of("C0TEAM0001") == "C0TEAM0001"
    assert directory.id_of("<#C0TEAM0002|vision>") == "C0TEAM0002"
    assert len([c for c in slack.calls() if c.method == "conversations.list"]) == 1


def test_the_lookup_reads_every_page(slack: FakeSlack) -> None:
    for n in range(450):
        slack.set_channel(f"C{n:09d}", f"team-{n}")
    assert _directory(slack).id_of("#team-449") == "C000000449"
    assert len([c for c in slack.calls() if c.method == "conversations.list"]) == 3


def test_slack_down_is_not_remembered(slack: FakeSlack) -> None:
    slack.set_channel(OPS, "gpu-ops")
    slack.fail_next("conversations.list", "internal_error")
    directory = _directory(slack)
    assert directory.id_of("#gpu-ops") == "#gpu-ops"  # posted by name this once
    assert directory.id_of("#gpu-ops") == OPS  # asked again, and found


def test_the_start_check_says_what_each_channel_is_or_why_not(
    slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    slack.set_channel(OPS, "gpu-ops")
    slack.set_channel("C0LOCKED01", "private-ops", member=False)
    with caplog.at_level(logging.INFO, logger="bot.channels"):
        _directory(slack).check(["#gpu-ops", "#private-ops", "#nowhere", OPS])
    said = "\n".join(record.getMessage() for record in caplog.records)
    assert f"Slack channel #gpu-ops is {OPS}" in said
    assert "#private-ops is C0LOCKED01 but the bot is not in it" in said and "/invite" in said
    assert "#nowhere: no channel of that name is visible to the bot" in said
    assert said.count("Slack channel") == 3  # the id needs no lookup
