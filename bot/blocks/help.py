"""`/gpu help` in Block Kit: the overview, a group's commands, or one command's keys, in
the reader's language. The words are `bot.usage`'s, which the console says too."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bot.blocks.common import (
    MESSAGE_BLOCKS,
    Block,
    Message,
    code,
    context,
    fit,
    header,
    listing,
    mrkdwn_escape,
    section,
)
from bot.i18n import counted, t
from bot.usage import (
    command_line,
    key_help,
    key_title,
    section_title,
    sections,
    summary,
    value_line,
)
from scheduler.grammar import Help, Subcommand

# The notification line of a help reply.
NOTE = 150


def help_message(shown: Help, lang: str) -> Message:
    """The help reply: what the topic is, then its commands or its keys."""
    if shown.command is not None:
        return _command(shown.command, lang)
    if not shown.topic:
        lead = t(lang, "grammar.help.overview")
        blocks = [section(mrkdwn_escape(lead))]
        for name, members in sections(shown.commands).items():
            title = f"*{mrkdwn_escape(section_title(lang, name, members))}*"
            lines = _table(lang, members)
            blocks += listing(lines, MESSAGE_BLOCKS, _more(lang, lines), heading=title)
        return Message(fit(lead, NOTE), blocks[:MESSAGE_BLOCKS])
    lead = t(lang, "grammar.help.group", group=" ".join(shown.topic))
    lines = _table(lang, shown.commands)
    blocks = [section(mrkdwn_escape(lead)), *listing(lines, MESSAGE_BLOCKS - 1, _more(lang, lines))]
    return Message(fit(lead, NOTE), blocks)


def _more(lang: str, lines: Sequence[str]) -> Callable[[int], str]:
    return lambda shown: counted(lang, "reply.more_lines", len(lines) - shown, n=len(lines) - shown)


def _table(lang: str, commands: Sequence[Subcommand]) -> list[str]:
    return [
        f"{code(command.heading)}  {mrkdwn_escape(summary(lang, command))}" for command in commands
    ]


def _command(command: Subcommand, lang: str) -> Message:
    blocks: list[Block] = [
        header(command.invocation),
        section(mrkdwn_escape(summary(lang, command))),
        context(t(lang, "grammar.help.usage", usage=code(command.usage))),
    ]
    if command.keys:
        blocks.append(section(f"*{mrkdwn_escape(t(lang, 'grammar.help.keys'))}*"))
    for key in command.keys:
        lines = (
            f"*{mrkdwn_escape(key_title(lang, key))}*",
            mrkdwn_escape(key_help(lang, key)),
            mrkdwn_escape(value_line(lang, key)),
        )
        blocks.append(section("\n".join(lines)))
    if command.template_key is not None:
        blocks.append(
            section(mrkdwn_escape(t(lang, "grammar.help.template", name=command.template_key)))
        )
    blocks.append(context(t(lang, "error.example", example=code(command.example))))
    return Message(fit(command_line(lang, command), NOTE), blocks[:MESSAGE_BLOCKS])
