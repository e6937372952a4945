"""Replies a new team found false, as they typed the commands (issue 29): each says what is so."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from sqlmodel import Session

from scheduler.app import Paika, Reply
from storage.models import Gpu, Host

SUBMIT = 'submit name={name} gpus={gpus} hours=2 priority=normal data=ready cmd="python t.py"'


def gpu(paika: Paika, user: str, text: str) -> Reply:
    reply = paika.run(text, user)
    assert reply.ok, reply.text
    return reply


@pytest.fixture
def team(paika: Paika) -> Paika:
    for user in ("UALICE", "UBOB"):
        gpu(paika, "UADMIN", f"admin member add <@{user}> team=vision")
    return paika


def _host(paika: Paika, name: str, cards: Sequence[tuple[str, float]], **fields: object) -> None:
    with Session(paika.engine) as session:
        host = Host(name=name, url=f"https://{name}:8470", added_at=paika.clock.now(), **fields)  # type: ignore[arg-type]
        session.add(host)
        session.flush()
        session.add_all(
            Gpu(host_id=host.id or 0, index=i, gpu_type=kind, memory_gib=mem)
            for i, (kind, mem) in enumerate(cards)
        )
        session.commit()


T4 = ("T4-16GB", 16.0)
A100 = ("A100-80GB", 80.0)


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"state": "down"}, "gpu-a (down)"),
        ({"state": "up", "draining": True}, "gpu-a (draining)"),
    ],
)
def test_a_job_whose_only_host_is_down_or_draining_waits_for_it(
    team: Paika, fields: dict[str, object], said: str
) -> None:
    _host(team, "gpu-t", [T4, T4], state="up")
    _host(team, "gpu-a", [A100, A100], **fields)
    gpu(team, "UALICE", SUBMIT.format(name="big", gpus=1) + " type=A100-80GB")
    text = gpu(team, "UALICE", "status big").text
    assert "no host can ever fit" not in text.lower()
    assert said in text and "waits for them" in text


def test_a_job_for_a_host_not_yet_seen_waits_for_it(team: Paika) -> None:
    _host(team, "gpu-t", [T4], state="up")
    gpu(team, "UADMIN", "admin host add gpu-new url=https://gpu-new:8470")
    gpu(team, "UALICE", SUBMIT.format(name="big", gpus=1) + " type=A100-80GB")
    text = gpu(team, "UALICE", "status big").text
    assert "no host can ever fit" not in text.lower()
    assert "gpu-new (not yet seen" in text


def test_never_fits_is_said_when_no_registered_host_could_fit(team: Paika) -> None:
    _host(team, "gpu-t", [T4, T4], state="up")
    _host(team, "gpu-a", [A100, A100], state="down")
    gpu(team, "UALICE", SUBMIT.format(name="huge", gpus=4) + " type=A100-80GB")
    text = gpu(team, "UALICE", "status huge").text
    assert "no host can ever fit this job" in text.lower()
