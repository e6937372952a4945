"""The digest's "Next up" says what the board says (issue 29): the jobs that can start, in the
order the policy expects them to start, numbered 1..n, without the jobs their data, their
quota or the hosts hold back; in the text, the Slack message and the picture alike."""

from __future__ import annotations

import re

import pytest
from world import HostSpec, Run, Waiting, build, people, submit

from bot.blocks.digest import digest_blocks
from bot.digest.text import render_text
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.digest import Digest, digest_now

HOSTS = (HostSpec("gpu-a", "A100-80GB", 2, 80), HostSpec("gpu-t", "T4-16GB", 1, 16))
RUNS = (
    Run("long", "UBOB", "vision", "gpu-a", (0, 1), -1, None, est_gpu_hours=22),  # A100s in ~10 h
    Run("short", "UBOB", "vision", "gpu-t", (0,), -1, None, est_gpu_hours=2),  # T4 in ~1 h
)
WAITING = (
    # First in the queue, on the A100: starts in about 10 h.
    Waiting("big-core", "UALICE", 1, 2, priority="core", type="A100-80GB", submitted_h=-0.9),
    Waiting("staged", "UALICE", 1, 2, priority="core", data="pending", submitted_h=-0.8),
    Waiting("over-quota", "UNICK", 1, 2, submitted_h=-0.7),  # 2 h asked, nlp has 1 h
    # Behind big-core in the queue, but takes the T4 in about 1 h.
    Waiting("any-card", "UALICE", 1, 1, priority="idle", submitted_h=-0.6),
)
QUOTAS = (("nlp", None, 1.0, 60),)


@pytest.fixture
def digest(paika: Paika, clock: ManualClock) -> Digest:
    people(paika)
    build(paika, HOSTS, RUNS, samples_from_h=-1.5, quotas=QUOTAS)
    submit(paika, clock, WAITING)
    return digest_now(paika)


def _next_up_lines(text: str, heading: str) -> list[str]:
    """The lines under `heading` (not its own line), up to the next blank line."""
    part = text.split(heading, 1)[1].split("\n\n", 1)[0]
    return [line.strip() for line in part.splitlines()[1:] if line.strip()]


def test_next_up_is_in_expected_start_order_numbered_without_gaps(digest: Digest) -> None:
    assert [line.name for line in digest.next_up] == ["any-card", "big-core"]
    # The queue has big-core first: the numbers are not queue places.
    positions = {line.name: line.wait.position for line in digest.ready if line.wait}
    assert positions["big-core"] < positions["any-card"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_text_numbers_next_up_1_to_n_and_leaves_out_blocked_jobs(
    digest: Digest, paika: Paika, lang: str
) -> None:
    text = render_text(digest, paika.policy.zone, lang)
    heading = "Next up" if lang == "en" else "即将开始"
    lines = _next_up_lines(text, heading)
    assert [re.match(r"(\d+)\. #\d+ (\S+)", line).groups() for line in lines] == [  # type: ignore[union-attr]
        ("1", "any-card"),
        ("2", "big-core"),
    ], lines
    assert "over-quota" not in "\n".join(lines) and "staged" not in "\n".join(lines)


def test_the_slack_message_says_the_same_next_up(digest: Digest, paika: Paika) -> None:
    blocks = digest_blocks(digest, "en", paika.policy.zone).blocks
    said = "\n".join(str(block.get("text", {}).get("text", "")) for block in blocks)
    lines = _next_up_lines(said, "*Next up*")
    assert [line.split(" ", 1)[0] for line in lines] == ["1.", "2."]
    assert "any-card" in lines[0] and "big-core" in lines[1]


def test_the_picture_plans_only_the_jobs_that_can_start(digest: Digest) -> None:
    planned = [run.name for run in digest.timeline.planned]
    assert planned == ["any-card"]  # big-core's ETA is past the 6 h drawn
    assert "over-quota" not in planned and "staged" not in planned


def test_when_only_blocked_jobs_wait_next_up_says_why_none_can_start(
    paika: Paika, clock: ManualClock
) -> None:
    people(paika)
    build(paika, HOSTS, RUNS, samples_from_h=-1.5, quotas=QUOTAS)
    submit(paika, clock, [w for w in WAITING if w.name == "over-quota"])
    digest = digest_now(paika)
    assert digest.next_up == () and digest.waiting == 1 and digest.waiting_for_data == 0
    for lang in ("en", "zh"):
        text = render_text(digest, paika.policy.zone, lang)
        # Not "nothing is waiting" (one is) nor "every job waits for its data" (none does).
        assert "Nothing is waiting" not in text and "没有排队中的任务" not in text, text
        assert "waits for its data." not in text and "都在等待数据就绪。" not in text, text
        said = {
            "en": "Next up: nothing can start yet: every waiting job waits for its data, its quota",
            "zh": "暂无可开始的任务：排队中的任务都在等待数据就绪、配额",
        }[lang]
        assert said in text, text
