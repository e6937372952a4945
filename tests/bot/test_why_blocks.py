"""`/gpu why` in Block Kit: within Slack's limits, the latest steps kept, what people typed
escaped; the same words as the console."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from bot.blocks.common import MESSAGE_BLOCKS, text_size
from bot.blocks.replies import reply
from bot.blocks.why import STORY_SHOWN
from bot.console import render
from scheduler.service.records import JobRecord
from scheduler.service.why import Step, StoryStep, WhyResult

ZONE = ZoneInfo("Asia/Shanghai")
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def _result(steps: int) -> WhyResult:
    job = JobRecord(
        7, "bert-ft", "UALICE", 1, "normal", 1, None, None, None, 2.0, True, None, "", None,
        None, None, "queued", None, T0, None, None, None, None,
    )  # fmt: skip
    told = [StoryStep(T0, Step.SUBMITTED, to_state="queued", actor="UALICE")]
    told += [
        StoryStep(
            T0 + timedelta(minutes=i),
            Step.CHANGED,
            to_state="queued",
            actor="UBOB",
            reason=f"<!channel> step {i}",
        )
        for i in range(1, steps)
    ]
    return WhyResult(job, "vision", T0 + timedelta(hours=9), False, tuple(told))


def test_a_long_story_keeps_its_latest_steps_within_slacks_limits() -> None:
    result = _result(200)
    message = reply(result, "en", ZONE, T0)
    text = "\n".join(block["text"]["text"] for block in message.blocks if "text" in block)
    assert len(message.blocks) <= MESSAGE_BLOCKS and text_size(message.blocks) <= 13_000
    assert f"… {200 - STORY_SHOWN} earlier changes" in text
    assert "step 199" in text and "step 100)" not in text
    assert "<!channel>" not in text and "&lt;!channel&gt; step 199" in text
    console = render(result, ZONE, "en")
    assert console.count("\n") == 200 and "<!channel> step 1)" in console


def test_an_empty_story_says_so_in_both_languages() -> None:
    result = _result(1)
    empty = WhyResult(result.job, result.team, result.until, True, ())
    assert "Nothing recorded for it yet." in render(empty, ZONE, "en")
    assert "尚无任何记录。" in render(empty, ZONE, "zh")
