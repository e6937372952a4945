"""A job's fingerprint, as people read it: `/gpu status` and `/gpu match` say how its earlier
runs used a card alone (SM, memory bandwidth and how hard that presses, memory, PCIe) in the
reader's language; a job with no sampled earlier run says nothing of it."""

from __future__ import annotations

from paika_test_profiles import ran_before
from sqlmodel import Session, select

from bot.console import render
from scheduler.app import Paika, Reply
from storage.models import Job

COMMAND = "python eval.py --ckpt last"


def gpu(paika: Paika, user: str, text: str) -> Reply:
    reply = paika.run(text, user)
    assert reply.ok, reply.text
    return reply


def _ran_before(paika: Paika, *, pcie_mbps: float | None) -> None:
    ran_before(
        paika,
        COMMAND,
        sm_pct=57.8,
        memory_busy_pct=40.2,
        memory_peak_mib=2458,
        pcie_mbps=pcie_mbps,
    )


def _submit(paika: Paika) -> int:
    gpu(paika, "UADMIN", "admin member add <@UALICE> team=vision")
    gpu(
        paika,
        "UALICE",
        f'submit name=eval gpus=1 hours=1 priority=normal data=ready share=yes mem=8 cmd="{COMMAND}"',
    )
    with Session(paika.engine) as session:
        return session.exec(select(Job).where(Job.name == "eval")).one().id or 0


def test_status_and_match_say_how_earlier_runs_used_a_card(paika: Paika) -> None:
    job_id = _submit(paika)
    _ran_before(paika, pcie_mbps=9000.0)
    status = gpu(paika, "UALICE", f"status #{job_id}").text
    assert (
        "Alone on a card its earlier runs used SM 57.8%, memory bandwidth 40.2% (heavy), 2.4 GiB,"
        " PCIe 9000 MB/s (heavy)" in status
    )
    match = gpu(paika, "UALICE", f"match #{job_id}").text
    assert "memory bandwidth 40.2% (heavy)" in match
    said = render(gpu(paika, "UALICE", f"status #{job_id}").result, paika.policy.zone, "zh")
    assert (
        "此前单独占卡运行时：SM 57.8%，显存带宽 40.2%（重），显存 2.4 GiB，PCIe 9000 MB/s（重）"
        in said
    )


def test_a_job_with_no_sampled_run_says_nothing_of_it(paika: Paika) -> None:
    job_id = _submit(paika)
    assert "Alone on a card" not in gpu(paika, "UALICE", f"status #{job_id}").text
    assert "Alone on a card" not in gpu(paika, "UALICE", f"match #{job_id}").text
