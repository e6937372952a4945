"""/gpu config through Slack: signed slash commands into the real Bolt app, answers in Block
Kit, in the asker's language."""

from __future__ import annotations

from conftest import ADMIN, MEMBER, Bot, text_of


def test_an_admin_sets_and_reads_the_config_in_slack(bot: Bot) -> None:
    stored = text_of(bot.answer('config set scheduler.cycle_seconds=5 reason="faster"', ADMIN))
    assert "Stored config version 2" in stored and "scheduler.cycle_seconds: 10.0 → 5.0" in stored
    shown = bot.answer("config show", ADMIN, name="show")
    assert "Config version 2" in text_of(shown) and "```" in text_of(shown)  # the file, in code
    assert "config v2" in text_of(bot.answer("board", ADMIN, name="board"))
    bot.answer("lang zh", ADMIN, name="lang")
    history = text_of(bot.answer("config history", ADMIN, name="zh"))
    assert "配置版本 2" in history and "配置版本 1" in history


def test_a_member_is_told_only_admins_change_the_config(bot: Bot) -> None:
    refused = text_of(bot.answer('config set scheduler.cycle_seconds=5 reason="mine"', MEMBER))
    assert "Only admins can change the policy config" in refused
    assert bot.paika.live.version == 1
