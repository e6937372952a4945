"""Counts are said with the right form of their noun: "1 job", "2 jobs" (English has two
forms; Chinese one, so its `.one` sentence is the same as the other)."""

from __future__ import annotations

import dataclasses
import re
from datetime import date, timedelta
from zoneinfo import ZoneInfo

from paika_test_time import T0
from test_digest_slack import make_digest

from bot.blocks.digest import digest_blocks
from bot.console_state import restored
from bot.digest.text import render_text
from bot.i18n import catalogue, counted, placeholders, t, wait_words
from bot.notice_words import notification
from scheduler.archive.state import RestoreResult
from scheduler.digest.model import DayUsage, Digest, UsageLine
from scheduler.policy.plan import Wait, WaitCode

# "{n} jobs", "{running} jobs running", "… and {n} more hosts", "({n} days ago)" …: a count
# right before a plural noun (with at most one word between) reads wrong when it is 1.
COUNTED_NOUN = re.compile(
    r"\{(\w+)\}\)? (?:\w+ )?(jobs|GPUs|hosts|days|quotas|rows|lines|changes|versions"
    r"|snapshots|teams|allocations|writes)\b"
)


# Placeholders before such a noun that are not counts, and sentences whose count is never 1
# (one is said in words of its own: "expires tomorrow"; a day and a half is "36.0 h").
NOT_COUNTS = frozenset({"gpu_type", "tables"})
NEVER_ONE = {
    "time.days": "duration says hours below 48",
    "quota.expired": "expiry_words says 'expired yesterday'",
    "quota.expires": "expiry_words says 'expires tomorrow'",
    "alert.quota_expiry.in_days": "'tomorrow' has its own key",
    # An array holds two jobs or more (count= starts at 2, a sweep of one point is refused).
    "array.submitted": "an array holds two jobs or more",
    "array.submitted_limited": "an array holds two jobs or more",
    "array.summary": "an array holds two jobs or more",
    "array.summary_limited": "an array holds two jobs or more",
    "problem.array_needs_approval": "an array holds two jobs or more",
    "problem.sweep_too_big": "said only past 1,000 points",
}


def test_every_sentence_that_counts_a_noun_has_its_singular() -> None:
    missing = [
        key
        for key, texts in catalogue().items()
        if not key.endswith(".one")
        and key not in NEVER_ONE
        and any(m[1] not in NOT_COUNTS for m in COUNTED_NOUN.finditer(texts["en"]))
        and f"{key}.one" not in catalogue()
    ]
    assert not missing, f"say these with counted() and give each a .one form: {missing}"


def test_a_singular_names_no_value_its_plural_does_not_and_reads_singular() -> None:
    for key, texts in catalogue().items():
        if not key.endswith(".one"):
            continue
        plural = catalogue()[key.removesuffix(".one")]
        for lang in ("en", "zh"):
            assert placeholders(texts[lang]) <= placeholders(plural[lang]), key
        assert texts["en"] != plural["en"], key


def test_counted_picks_the_form_by_the_count() -> None:
    assert counted("en", "quota.more", 1, n=1) == "… and 1 more quota"
    assert counted("en", "quota.more", 2, n=2) == "… and 2 more quotas"
    assert counted("en", "quota.more", 0, n=0) == "… and 0 more quotas"
    assert counted("zh", "quota.more", 1, n=1) == t("zh", "quota.more", n=1)


def test_a_job_that_needs_one_gpu_is_said_with_one_gpu() -> None:
    wait = Wait(9, WaitCode.NEVER_FITS, 1, None, gpus=1)
    assert "(1 GPU of an allowed type)" in wait_words("en", wait, T0.timestamp())


def _digest_with_one_of_each() -> Digest:
    digest = make_digest()  # the digest the Slack tests draw
    return dataclasses.replace(
        digest,
        running=1,
        hosts=1,
        yesterday=DayUsage(
            date(2026, 11, 1),
            T0 - timedelta(hours=41),
            T0 - timedelta(hours=17),
            (UsageLine("vision", "A100-80GB", 2.0, 4.4, 1),),
            2.0,
            4.4,
            1,
        ),
    )


def test_the_digest_says_one_job_and_one_host() -> None:
    digest = _digest_with_one_of_each()
    words = str(digest_blocks(digest, "en", ZoneInfo("Asia/Shanghai")).blocks)
    words += notification(digest, "en")
    words += render_text(digest, ZoneInfo("Asia/Shanghai"))
    assert not re.search(r"\b1 (jobs|hosts|GPUs)\b", words), words
    assert "1 job running" in words and "on 1 host" in words
    assert "cost 4.40, 1 job" in words and "· cost 4.40 · 1 job" in words


def _restored(n: int) -> str:
    result = RestoreResult(T0, None, n, n, n, n, n, n, n)
    return restored("en", result, "sqlite:///paika.db", ZoneInfo("UTC"))


def test_a_restored_snapshot_counts_in_the_singular_where_it_holds_one() -> None:
    said = _restored(1)
    assert "1 team, 1 quota, 1 host with 1 GPU, 1 job under their old numbers" in said
    assert "(1 running on 1 GPU)" in said
    assert "2 teams, 2 quotas, 2 hosts with 2 GPUs, 2 jobs" in _restored(2)
    assert "1 个团队、1 个配额、1 台主机共 1 张卡、1 个任务" in restored(
        "zh", RestoreResult(T0, None, 1, 1, 1, 1, 1, 1, 1), "db", ZoneInfo("UTC")
    )


def test_a_restore_names_the_waiting_jobs_it_brought_back_cancelled() -> None:
    result = RestoreResult(T0, None, 1, 1, 1, 1, 3, 0, 0, without_command=(12, 15))
    said = restored("en", result, "sqlite:///paika.db", ZoneInfo("UTC"))
    assert "2 jobs waiting (#12, #15) came back cancelled" in said
    assert "submit them again" in said
    zh = restored("zh", result, "db", ZoneInfo("UTC"))
    assert "#12, #15" in zh and "重新提交" in zh
