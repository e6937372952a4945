"""The board in Block Kit: cards by type, a grid per host, the queue and what starts next.

Shared by `/gpu board` (a message, 50 blocks) and the App Home (part of a 100-block view):
the caller says how many blocks the board may use, and hosts beyond that are counted in
one closing line instead of being dropped without a word.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from zoneinfo import ZoneInfo

from bot.blocks.common import (
    MESSAGE_BLOCKS,
    MESSAGE_CHARS,
    Block,
    code,
    context,
    divider,
    header,
    listing,
    mention,
    mrkdwn_escape,
    section,
    text_size,
)
from bot.blocks.job import needs, priority, ref, why_and_when
from bot.board_words import maintenance_note, none_next_up, shared_card
from bot.config_words import in_force
from bot.doctor_words import finding_line
from bot.i18n import counted, t, term, when
from bot.said import say
from scheduler.door import BoardResult, CardState, CardView, HostView, PriorityClass

CARD_EMOJI: dict[CardState, str] = {
    CardState.FREE: "🟩",
    CardState.BUSY: "🟦",
    CardState.IDLE_HELD: "🟨",
    CardState.DOWN: "⬛",
    CardState.FOREIGN: "🟫",
    CardState.DRAINING: "⬜",
    CardState.UNLISTED: "❔",
}
NEXT_UP_SHOWN = 5
# Header, type counts, queue, divider, legend, and the line for hosts left out.
LEAST_BUDGET = 7

# The bookings the board names (a context block holds 3,000 characters).
BOOKINGS_SHOWN = 10


def board_blocks(
    board: BoardResult,
    lang: str,
    zone: ZoneInfo,
    now: datetime,
    *,
    budget: int = MESSAGE_BLOCKS,
    chars: int = MESSAGE_CHARS,
) -> list[Block]:
    """The whole board in at most `budget` blocks and about `chars` characters of text."""
    if budget < LEAST_BUDGET:
        raise ValueError(f"the board needs at least {LEAST_BUDGET} blocks, got {budget}")
    top = [
        header(t(lang, "board.header", at=when(lang, board.at, zone))),
        section(_types(board, lang, zone)),
        section(_queue(board, lang, zone, now)),
    ]
    if board.bookings:
        booked = "\n".join(mrkdwn_escape(say(lang, b)) for b in board.bookings[:BOOKINGS_SHOWN])
        top.append(context(f":calendar: *{t(lang, 'board.bookings')}*\n{booked}"))
    top.append(divider())
    marks = [f"{CARD_EMOJI[s]} {term(lang, 'card', s.value)}" for s in CardState]
    version = in_force(lang, board.config_version)
    legend = context(*marks, *([version] if version else []))
    if not board.hosts:
        return [*top, section(t(lang, "board.no_hosts")), *([context(version)] if version else [])]
    room = budget - len(top) - 1
    lines = [host_line(lang, host, zone) for host in board.hosts]
    hosts = listing(
        lines,
        room,
        lambda shown: _more_hosts(lang, board.hosts[shown:]),
        chars=chars - text_size([*top, legend]),
    )
    return [*top, *hosts, legend]


def host_line(lang: str, host: HostView, zone: ZoneInfo) -> str:
    """One host: its name and state, one square per card, then the jobs on its cards."""
    squares = "".join(CARD_EMOJI[card.state] for card in host.cards)
    line = f"{code(host.name)} {squares}"
    notes = []
    if host.state != "up":
        notes.append(term(lang, "host_state", host.state))
    if host.draining:
        notes.append(t(lang, "board.draining"))
    if (window := maintenance_note(lang, host, zone)) is not None:
        notes.append(window)
    if host.insecure:
        notes.append(t(lang, "board.insecure"))
    if notes:
        line += " _" + ", ".join(notes) + "_"
    jobs = _jobs_on(lang, host.cards)
    return f"{line}  {jobs}" if jobs else line


def _jobs_on(lang: str, cards: Sequence[CardView]) -> str:
    """The jobs on a host's cards: "gpu0-3 #12 bert-ft @owner", idle ones marked; a shared
    card on its own, with each job on it and its memory of the card's."""
    groups: dict[int | str, list[CardView]] = {}
    for card in cards:
        if card.shared:
            groups[f"shared {card.index}"] = [card]
        elif card.job_id is not None:
            groups.setdefault(card.job_id, []).append(card)
    parts = []
    for held in groups.values():
        first = held[0]
        if first.shared:
            text = f"gpu{first.index} " + shared_card(
                lang, first, lambda on: ref(on.job_id, on.job_name), mention
            )
        else:
            text = f"gpu{_ranges([card.index for card in held])} {ref(first.job_id, first.job_name or '')}"
            text += f" {mention(first.owner)}" if first.owner else ""
        if all(card.state is CardState.IDLE_HELD for card in held):
            text += t(lang, "board.idle_job")
        parts.append(text)
    return " · ".join(parts)


def _ranges(indexes: Sequence[int]) -> str:
    """Card indexes as runs: [0, 1, 2, 3, 6] → "0-3,6"."""
    runs: list[list[int]] = []
    for index in sorted(indexes):
        if runs and index == runs[-1][-1] + 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    return ",".join(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)


def _types(board: BoardResult, lang: str, zone: ZoneInfo) -> str:
    lines = [f"*{t(lang, 'board.by_type')}*"]
    for summary in board.types:
        lines.append(
            t(
                lang,
                "board.type_line",
                gpu_type=mrkdwn_escape(summary.gpu_type),
                total=summary.total,
                free=summary.free,
                busy=summary.busy,
                idle=summary.idle_held,
                down=summary.down,
            )
        )
        if summary.shared:
            lines[-1] = t(lang, "board.type_shared", line=lines[-1], n=summary.shared)
        if not summary.listed:
            lines.append(t(lang, "board.unlisted_type", gpu_type=mrkdwn_escape(summary.gpu_type)))
    if not board.types:
        lines.append(t(lang, "board.no_cards"))
    lines += _checkup(board, lang, zone)
    return "\n".join(lines)


CHECKUP_SHOWN = 4  # findings named on the board; the rest are counted
CHECKUP_CHARS = 400  # of each finding's words (paika doctor says them whole)


def _checkup(board: BoardResult, lang: str, zone: ZoneInfo) -> list[str]:
    """For admins: what paika doctor's checks found wrong when the service last ran them."""
    found = board.checkup
    if found is None or not found.findings:
        return []
    lines = ["", f"*{t(lang, 'board.checkup', at=when(lang, found.at, zone))}*"]
    for finding in found.findings[:CHECKUP_SHOWN]:
        words = finding_line(lang, finding)
        lines.append(
            mrkdwn_escape(words if len(words) <= CHECKUP_CHARS else words[:CHECKUP_CHARS] + "…")
        )
    if len(found.findings) > CHECKUP_SHOWN:
        lines.append(t(lang, "board.checkup_more", n=len(found.findings) - CHECKUP_SHOWN))
    return lines


def _queue(board: BoardResult, lang: str, zone: ZoneInfo, now: datetime) -> str:
    waiting = board.waiting_by_class
    lines = [
        t(
            lang,
            "board.queue",
            running=board.running,
            core=waiting.get(PriorityClass.CORE, 0),
            normal=waiting.get(PriorityClass.NORMAL, 0),
            idle=waiting.get(PriorityClass.IDLE, 0),
            data=board.waiting_for_data,
        )
    ]
    if not board.next_up:
        # "Next up" leaves out jobs that cannot start (data, quota, no host); saying
        # "nothing is waiting" then would contradict the counts above.
        lines.append(
            none_next_up(lang, sum(board.waiting_by_class.values()), board.waiting_for_data)
        )
        return "\n".join(lines)
    lines.append(f"*{t(lang, 'board.next_up')}*")
    for number, view in enumerate(board.next_up[:NEXT_UP_SHOWN], 1):
        job = view.job
        place = f"{number}."  # by when it should start, not its place in the queue
        why = f" — {why_and_when(lang, view.wait, zone, now)}" if view.wait else ""
        lines.append(
            f"{place} {ref(job.id, job.name)} {mention(job.owner)} · {priority(lang, job.priority)}"
            f" · {needs(lang, job)}{why}"
        )
    return "\n".join(lines)


def _more_hosts(lang: str, hosts: Sequence[HostView]) -> str:
    """What the hosts left out hold, so the reader knows the grid is not the whole cluster."""
    states = Counter(card.state for host in hosts for card in host.cards)
    return counted(
        lang,
        "board.more_hosts",
        len(hosts),
        n=len(hosts),
        cards=sum(states.values()),
        free=states[CardState.FREE],
    )
