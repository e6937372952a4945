"""Posting the daily digest on the fake Slack: valid blocks that name owners without
pinging them, the picture uploaded through files_upload_v2's three steps to the channel id
Slack answered with, and False (then a clean retry) when a step fails."""

from __future__ import annotations

import dataclasses
import io
import json
import re
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from fake_slack import BOT_TOKEN, CHANNEL_ID
from fake_slack.slack_server import FakeSlack
from paika_test_time import T0
from PIL import Image
from slack_sdk import WebClient

from bot.blocks.common import MESSAGE_BLOCKS, MESSAGE_CHARS, SECTION_TEXT, text_size
from bot.blocks.digest import digest_blocks
from bot.digest import picture, slack
from bot.digest.slack import post_digest
from scheduler.digest.model import (
    DayUsage,
    Digest,
    GpuRow,
    IdleJob,
    IdleUsage,
    JobLine,
    Planned,
    QuotaWarning,
    Segment,
    SegmentKind,
    Timeline,
    TypeCount,
    TypeUtilization,
    UsageLine,
    WaitInfo,
)

ZONE = ZoneInfo("Asia/Shanghai")


def h(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def job(job_id: int, name: str, owner: str, *, data: bool = True, since: float = -2) -> JobLine:
    wait = (
        WaitInfo("no_type_free", job_id, h(3), "A100-80GB")
        if data
        else WaitInfo("waiting_for_data", job_id, None)
    )
    return JobLine(
        job_id,
        name,
        "vision",
        owner,
        "normal",
        "queued" if data else "waiting_data",
        2,
        "A100-80GB",
        16.0,
        h(since),
        None if data else "s3://datasets/coco",
        wait,
    )


def make_digest(waiting: int = 3) -> Digest:
    """A digest as the scheduler builds it (see tests/digest for how it is built)."""
    rows = tuple(
        GpuRow(
            "gpu-01",
            i,
            "A100-80GB",
            "busy" if i < 2 else "free",
            (
                Segment(h(-24), h(-6), SegmentKind.FREE),
                Segment(h(-6), h(-2), SegmentKind.JOB, 1, "bert"),
                Segment(h(-2), h(0), SegmentKind.IDLE, 1, "bert"),
            )
            if i < 2
            else (Segment(h(-24), h(0), SegmentKind.FREE),),
            1 if i < 2 else None,
            h(2) if i < 2 else None,
        )
        for i in range(4)
    )
    lines = [job(10 + i, f"sweep-{i}", "UALICE") for i in range(waiting)]
    for_data = [job(40 + i, f"copy-{i}", "UBOB", data=False, since=-30 + i) for i in range(waiting)]
    return Digest(
        day=date(2026, 11, 2),
        at=T0,
        timezone="Asia/Shanghai",
        hosts=1,
        types=(TypeCount("A100-80GB", 4, 2, 0, 2, 0),),
        running=1,
        waiting_by_class={"core": 0, "normal": 2 * waiting, "idle": 0},
        waiting_for_data=len(for_data),
        ready=tuple(lines[:10]),
        ready_total=len(lines),
        waiting_data=tuple(for_data[:10]),
        next_up=tuple(lines[:5]),  # the jobs that can start next: none waiting for data
        yesterday=DayUsage(
            date(2026, 11, 1),
            h(-41),
            h(-17),
            (UsageLine("vision", "A100-80GB", 46.0, 101.2, 1),),
            46.0,
            101.2,
            1,
        ),
        idle=IdleUsage(
            h(-41),
            h(-17),
            5.0,
            6.0,
            {"A100-80GB": 6.0},
            (IdleJob(1, "bert", "vision", "UCAROL", "A100-80GB", 6.0),),
            1,
        ),
        quota_warnings=(
            QuotaWarning(
                3, "vision", None, 200, 45, 155, date(2026, 11, 12), 10, "UDAVE", True, 22.5, None
            ),
        ),
        timeline=Timeline(
            h(-24),
            h(0),
            h(6),
            rows,
            0,
            (Planned(10, "sweep-0", "normal", "A100-80GB", 2, h(0), h(8), (2, 3)),),
        ),
        utilization=(TypeUtilization("A100-80GB", tuple([50.0] * 22 + [None, 3.0])),),
    )


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    yield from FakeSlack.serve()


@pytest.fixture
def client(fake: FakeSlack) -> WebClient:
    return WebClient(base_url=fake.api_url, token=BOT_TOKEN)


def text_of(blocks: list[dict[str, Any]]) -> str:
    return json.dumps(blocks, ensure_ascii=False)


def test_the_board_and_its_picture_go_to_the_channel(fake: FakeSlack, client: WebClient) -> None:
    fake.set_user("UBOB", profile={"display_name": "bob"})
    digest = make_digest()
    assert post_digest(client, CHANNEL_ID, digest, "en", ZONE)
    fake.assert_nothing_invalid()
    methods = [c.method for c in fake.calls() if c.method != "users.info"]
    assert methods == [
        "chat.postMessage",
        "files.getUploadURLExternal",
        "files.completeUploadExternal",
    ]
    posted = fake.last("chat.postMessage")
    blocks = posted.args["blocks"]
    assert posted.args["text"].startswith("Daily GPU board for 2026-11-02: 2 of 4 GPUs free")
    words = text_of(blocks)
    # Owners are named, never mentioned: a channel digest must not ping everyone in it.
    assert "<@" not in words and "<!" not in words
    assert "bob" in words and "udave" in words  # display names from users.info
    assert "Waiting for data (3)" in words and "waiting 1 d 6 h" in words
    assert "Idle but held yesterday" in words and "6.0 GPU-hours" in words
    (upload,) = fake.uploads()
    assert upload.completed
    assert upload.filename == "paika-board-2026-11-02.png"
    assert upload.title == "GPU board 2026-11-02"
    assert upload.content is not None
    assert Image.open(io.BytesIO(upload.content)).format == "PNG"
    complete = fake.last("files.completeUploadExternal")
    assert complete.args["channel_id"] == CHANNEL_ID
    assert "initial_comment" in complete.args


def test_the_upload_goes_to_the_id_slack_answered_with(fake: FakeSlack, client: WebClient) -> None:
    # Posting to a user lands in the DM with them, whose id (D…) Slack answers with.
    assert post_digest(client, "UADMIN1", make_digest(), "en", ZONE)
    assert fake.last("chat.postMessage").response["channel"] == "DUADMIN1"
    assert fake.last("files.completeUploadExternal").args["channel_id"] == "DUADMIN1"


def test_a_failed_upload_answers_false_and_the_retry_does_not_post_twice(
    fake: FakeSlack, client: WebClient
) -> None:
    fake.fail_next("files.completeUploadExternal", "internal_error")
    progress: dict[str, str] = {}
    digest = make_digest()
    assert not post_digest(client, CHANNEL_ID, digest, "en", ZONE, progress=progress)
    assert not any(upload.completed for upload in fake.uploads())
    assert post_digest(client, CHANNEL_ID, digest, "en", ZONE, progress=progress)
    assert len(fake.calls("chat.postMessage")) == 1
    assert [u.completed for u in fake.uploads()] == [False, True]


def test_a_failed_post_uploads_nothing(fake: FakeSlack, client: WebClient) -> None:
    fake.fail_next("chat.postMessage", "channel_not_found")
    assert not post_digest(client, "#nowhere", make_digest(), "en", ZONE)
    assert fake.uploads() == []


def test_in_chinese(fake: FakeSlack, client: WebClient) -> None:
    assert post_digest(client, CHANNEL_ID, make_digest(), "zh", ZONE)
    fake.assert_nothing_invalid()
    posted = fake.last("chat.postMessage")
    assert posted.args["blocks"][0]["text"]["text"] == "每日 GPU 看板 — 2026-11-02"
    assert "已等待 1 天 6 小时" in text_of(posted.args["blocks"])
    assert fake.uploads()[0].title == "GPU 看板 2026-11-02"


@pytest.mark.parametrize("font", [None, ("Noto Sans CJK SC", "/fonts/NotoSansCJK.ttc")])
def test_in_chinese_without_a_cjk_font_the_picture_says_why_it_is_in_english(
    fake: FakeSlack,
    client: WebClient,
    monkeypatch: pytest.MonkeyPatch,
    font: tuple[str, str] | None,
) -> None:
    # The font list is what is controlled here; drawing with a font that is not there is not.
    monkeypatch.setattr(picture, "_cjk", lambda: font)
    monkeypatch.setattr(slack, "render_png", lambda digest, lang: b"\x89PNG drawn")
    assert post_digest(client, CHANNEL_ID, make_digest(), "zh", ZONE)
    comment = fake.last("files.completeUploadExternal").args["initial_comment"]
    if font is None:
        assert "此图以英文绘制" in comment and "apt install fonts-noto-cjk" in comment
    else:
        assert "此图以英文绘制" not in comment and "apt install" not in comment


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_long_lists_are_summarised_within_slacks_limits(
    fake: FakeSlack, client: WebClient, lang: str
) -> None:
    long_name = "a-very-long-experiment-name-" + "x" * 36
    team = "t" * 64
    digest = make_digest(waiting=10)
    idle = digest.idle
    digest = dataclasses.replace(
        digest,
        types=tuple(TypeCount(f"TYPE-{n}-{'x' * 50}", 8, 1, 2, 3, 2) for n in range(40)),
        ready=tuple(dataclasses.replace(j, name=long_name, team=team) for j in digest.ready),
        waiting_data=tuple(
            dataclasses.replace(j, name=long_name, team=team, data_location="s3://" + "d" * 400)
            for j in digest.waiting_data
        ),
        next_up=tuple(dataclasses.replace(j, name=long_name) for j in digest.next_up),
        idle=dataclasses.replace(
            idle,
            jobs=tuple(dataclasses.replace(j, name=long_name, team=team) for j in idle.jobs) * 5,
            job_count=100,
        ),
        ready_total=400,
        waiting_for_data=250,
        waiting_by_class={"core": 0, "normal": 650, "idle": 0},
        quota_warnings=digest.quota_warnings * 40,
        yesterday=dataclasses.replace(
            digest.yesterday, rows=digest.yesterday.rows * 60, job_count=60
        ),
    )
    message = digest_blocks(digest, lang, ZONE)
    assert len(message.blocks) <= MESSAGE_BLOCKS
    assert text_size(message.blocks) <= MESSAGE_CHARS
    for block in message.blocks:
        if block["type"] == "section":
            assert len(block["text"]["text"]) <= SECTION_TEXT
    words = text_of(message.blocks)
    more = r"… and (\d+) more" if lang == "en" else r"……另有 (\d+) 条"
    left_out = [int(n) for n in re.findall(more, words)]
    # What is not named is counted: of 400 ready jobs and 250 waiting for data, the digest
    # names at most 10 each (fewer here, as the long names fill their share of the message).
    assert any(390 <= n < 400 for n in left_out), left_out
    assert any(240 <= n < 250 for n in left_out), left_out
    assert post_digest(client, CHANNEL_ID, digest, lang, ZONE)
    fake.assert_nothing_invalid()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_when_only_jobs_waiting_for_data_wait_the_digest_says_none_can_start(lang: str) -> None:
    digest = make_digest()
    only_data = dataclasses.replace(
        digest,
        ready=(),
        ready_total=0,
        next_up=(),
        waiting_by_class={"core": 0, "normal": digest.waiting_for_data, "idle": 0},
    )
    words = text_of(digest_blocks(only_data, lang, ZONE).blocks)
    none_can_start = {"en": "Nothing can start yet", "zh": "暂无可开始的任务"}[lang]
    assert none_can_start in words
    assert {"en": "Nothing is waiting", "zh": "没有排队中的任务"}[lang] not in words
    nothing = dataclasses.replace(
        only_data,
        waiting_data=(),
        waiting_for_data=0,
        waiting_by_class={"core": 0, "normal": 0, "idle": 0},
    )
    words = text_of(digest_blocks(nothing, lang, ZONE).blocks)
    assert {"en": "Nothing is waiting", "zh": "没有排队中的任务"}[lang] in words
    assert none_can_start not in words
