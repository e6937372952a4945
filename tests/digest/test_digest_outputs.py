"""The digest's "yesterday" links spend to outputs: the runs that finished by outcome with
what they cost, and per project its GPU-hours, cost, runs finished and best metrics; the
figures checked against sums worked out here from the runs themselves, said in en and zh."""

from __future__ import annotations

import pytest
from paika_test_slack import text_of
from sqlmodel import Session
from world import HostSpec, Run, at, build, people

from bot.blocks.digest import digest_blocks
from bot.digest.text import render_text
from scheduler.app import Paika
from scheduler.digest import digest_now
from scheduler.digest.model import BestMetric, Digest, FinishedRuns
from scheduler.digest.outputs import lower_is_better
from storage.models import Job, JobOutput, JobState, OutputKind, OutputSource

# T0 is 17:00 in Asia/Shanghai: "yesterday" runs from -41 h to -17 h.
A100, T4 = 2.2, 0.35  # the bundled catalogue's prices per GPU-hour
HOSTS = (HostSpec("gpu-01", "A100-80GB", 4, 80), HostSpec("gpu-02", "T4-16GB", 2, 16))
RUNS = (
    Run("pre1", "UALICE", "vision", "gpu-01", (0,), -40, -36),  # 4 A100-h, all yesterday
    Run("pre2", "UBOB", "vision", "gpu-01", (1, 2), -38, -30),  # 16 A100-h; it fails
    Run("live", "UALICE", "vision", "gpu-01", (3,), -20, None),  # running: 3 h yesterday
    Run("cls", "UNICK", "nlp", "gpu-02", (0,), -45, -35),  # 10 T4-h, 6 of them yesterday
    Run("old", "USARA", "speech", "gpu-02", (1,), -60, -50),  # ended the day before
    Run("today", "UNICK", "nlp", "gpu-02", (0,), -10, -5),  # ran and ended today
)
PROJECTS = {"pre1": "llm-pretrain", "pre2": "llm-pretrain", "live": "llm-pretrain"}
PROJECTS |= {"old": "asr", "today": "later"}


@pytest.fixture
def day(paika: Paika) -> tuple[Paika, dict[str, int]]:
    people(paika)
    ids = build(paika, HOSTS, RUNS, samples_from_h=-2)
    now = paika.clock.now()
    with Session(paika.engine) as session:
        jobs = {name: session.get(Job, job_id) for name, job_id in ids.items()}
        for name, job in jobs.items():
            assert job is not None
            job.project = PROJECTS.get(name)
            session.add(job)
        pre2 = jobs["pre2"]
        assert pre2 is not None
        pre2.state = JobState.FAILED
        pre2.metrics = {"top1": 76.2}  # the latest values it holds (`/gpu done metric=…`)
        cancelled = Job(
            name="never",
            owner="UNICK",
            team_id=jobs["cls"].team_id,  # type: ignore[union-attr]
            gpus=1,
            est_gpu_hours=1,
            command="python train.py",
            state=JobState.CANCELLED,
            submitted_at=at(now, -30),
            ended_at=at(now, -29),
        )
        session.add(cancelled)
        session.flush()
        ids["never"] = cancelled.id or 0
        reported = [
            ("pre1", -37, "top1", 75.0),
            ("pre1", -36.5, "loss", 1.9),
            ("pre2", -31, "loss", 1.7),
            ("live", -18, "top1", 74.0),
            ("live", -18, "loss", 1.5),
            ("cls", -35, "acc", 0.91),
            ("old", -20, "wer", 7.5),  # an ended job's late evaluation, reported yesterday
            ("today", -6, "top1", 99.0),  # today: not yesterday's
            ("old", -55, "wer", 3.0),  # before yesterday, by a job that did not end then
        ]
        for name, hours, metric, value in reported:
            session.add(
                JobOutput(
                    job_id=ids[name],
                    attempt=1,
                    at=at(now, hours),
                    source=OutputSource.JOB,
                    kind=OutputKind.METRIC,
                    name=metric,
                    value=value,
                )
            )
        session.add(  # an artefact is not a metric
            JobOutput(
                job_id=ids["pre1"],
                attempt=1,
                at=at(now, -36),
                source=OutputSource.JOB,
                kind=OutputKind.ARTEFACT,
                name="ckpt",
                text="s3://ckpt/pre1",
            )
        )
        session.commit()
    return paika, ids


def test_runs_finished_yesterday_by_outcome_with_their_whole_spend(
    day: tuple[Paika, dict[str, int]],
) -> None:
    paika, _ = day
    usage = digest_now(paika).yesterday
    # pre1 and cls succeeded (cls over its whole run, 10 T4-hours), pre2 failed, one job
    # was cancelled before it ran; "today" ended today, "old" the day before.
    assert usage.finished == (
        FinishedRuns("succeeded", 2, pytest.approx(4 + 10), pytest.approx(4 * A100 + 10 * T4)),  # type: ignore[arg-type]
        FinishedRuns("failed", 1, pytest.approx(16), pytest.approx(16 * A100)),  # type: ignore[arg-type]
        FinishedRuns("cancelled", 1, 0.0, 0.0),
    )


def test_each_projects_spend_runs_and_best_metrics(day: tuple[Paika, dict[str, int]]) -> None:
    paika, ids = day
    usage = digest_now(paika).yesterday
    lines = {line.project: line for line in usage.projects}
    assert [line.project for line in usage.projects] == ["llm-pretrain", None, "asr"]
    llm = lines["llm-pretrain"]
    assert (llm.gpu_hours, llm.cost) == (pytest.approx(4 + 16 + 3), pytest.approx(23 * A100))
    assert llm.finished == 2
    assert llm.best == (
        BestMetric("loss", 1.5, ids["live"], True),  # the smallest loss is the best
        BestMetric("top1", 76.2, ids["pre2"], False),  # from the job's own metrics
    )
    none = lines[None]
    assert (none.gpu_hours, none.cost, none.finished) == (
        pytest.approx(6),
        pytest.approx(6 * T4),
        2,
    )
    assert none.best == (BestMetric("acc", 0.91, ids["cls"], False),)
    asr = lines["asr"]
    assert (asr.gpu_hours, asr.finished) == (0.0, 0)
    assert asr.best == (BestMetric("wer", 7.5, ids["old"], True),)
    # The projects' spend adds up to the day's total, as /gpu report counts it.
    assert sum(line.gpu_hours for line in usage.projects) == pytest.approx(usage.total_gpu_hours)
    assert sum(line.cost for line in usage.projects) == pytest.approx(usage.total_cost)


def test_the_lines_read_in_english_and_chinese(day: tuple[Paika, dict[str, int]]) -> None:
    paika, ids = day
    digest = digest_now(paika)
    zone = paika.policy.zone
    text = render_text(digest, zone)
    assert (
        "  Runs finished: 2 succeeded (14.0 GPU-hours, cost 12.30), "
        "1 failed (16.0 GPU-hours, cost 35.20), 1 cancelled (0.0 GPU-hours, cost 0.00)"
    ) in text
    assert (
        f"  llm-pretrain: 23.0 GPU-hours, cost 50.60, 2 runs finished, "
        f"best loss 1.5 (#{ids['live']}), top1 76.2 (#{ids['pre2']})"
    ) in text
    assert "  no project: 6.0 GPU-hours, cost 2.10, 2 runs finished, best acc 0.91" in text
    assert f"  asr: 0.0 GPU-hours, cost 0.00, 0 runs finished, best wer 7.5 (#{ids['old']})" in text
    zh = _said(digest_blocks(digest, "zh", zone).blocks)
    assert "llm-pretrain：23.0 卡时，费用 50.60，结束 2 个运行，最佳 loss 1.5" in zh
    assert "无项目：6.0 卡时" in zh and "已完成 2 个（14.0 卡时，费用 12.30）" in zh
    en = _said(digest_blocks(digest, "en", zone).blocks)
    assert "llm-pretrain: 23.0 GPU-hours, cost 50.60, 2 runs finished" in en


def test_a_project_name_is_escaped_in_slack(day: tuple[Paika, dict[str, int]]) -> None:
    paika, ids = day
    with Session(paika.engine) as session:
        job = session.get(Job, ids["pre1"])
        assert job is not None
        job.project = "<!here>"
        session.add(job)
        session.commit()
    said = _said(digest_blocks(digest_now(paika), "en", paika.policy.zone).blocks)
    assert "&lt;!here&gt;: 4.0 GPU-hours" in said and "<!here>" not in said


def test_a_day_without_finished_runs_or_projects_reads_as_before(paika: Paika) -> None:
    digest: Digest = digest_now(paika)
    assert digest.yesterday.finished == () and digest.yesterday.projects == ()
    assert "no GPU time was used." in render_text(digest, paika.policy.zone)


def test_which_metrics_are_better_low() -> None:
    for name in ("loss", "val_loss", "eval-loss", "wer", "error_rate", "ppl", "fid"):
        assert lower_is_better(name), name
    for name in ("top1", "acc", "bleu", "f1", "glossary_hits", "errorless"):
        assert not lower_is_better(name), name


def _said(blocks: list[dict[str, object]]) -> str:
    return text_of({"blocks": blocks})
