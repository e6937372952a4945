"""parse(): valid command text gives exactly this ParsedCommand."""

from __future__ import annotations

from datetime import date

import pytest

from scheduler.grammar import DataSpec, JobRef, Metric, ParsedCommand, parse

VALID = [
    pytest.param("", ("help",), {}, id="empty-is-help"),
    pytest.param("  \n\t ", ("help",), {}, id="blank-is-help"),
    pytest.param(
        "submit name=bert-ft gpus=2 type=A100-80GB hours=12 priority=normal data=ready "
        'cmd="python train.py --lr 3e-4"',
        ("submit",),
        {
            "name": "bert-ft",
            "gpus": 2,
            "type": ("A100-80GB",),
            "hours": 12.0,
            "priority": "normal",
            "data": DataSpec(ready=True),
            "cmd": "python train.py --lr 3e-4",
        },
        id="submit-full",
    ),
    pytest.param(
        "SUBMIT Name=x HOURS=1.5 Priority=CORE data=s3://bucket/imagenet cmd=run.sh "
        "type=A100-80GB,H100,A100-80GB mem=40 speed=0.5 team=vision image=pytorch:24",
        ("submit",),
        {
            "name": "x",
            "hours": 1.5,
            "priority": "core",
            "data": DataSpec(ready=False, location="s3://bucket/imagenet"),
            "cmd": "run.sh",
            "type": ("A100-80GB", "H100"),
            "mem": 40.0,
            "speed": 0.5,
            "team": "vision",
            "image": "pytorch:24",
        },
        id="submit-case-insensitive-type-and-mem",
    ),
    pytest.param(
        "submit name=x hours=2 priority=idle data=pending cmd=“python train.py --tag ‘a b’”",
        ("submit",),
        {
            "name": "x",
            "hours": 2.0,
            "priority": "idle",
            "data": DataSpec(ready=False),
            "cmd": "python train.py --tag ‘a b’",
        },
        id="smart-double-quotes",
    ),
    pytest.param(
        "submit name=x hours=2 priority=idle data=/mnt/nas/ds1 cmd='echo \\'hi\\''",
        ("submit",),
        {
            "name": "x",
            "hours": 2.0,
            "priority": "idle",
            "data": DataSpec(ready=False, location="/mnt/nas/ds1"),
            "cmd": "echo 'hi'",
        },
        id="single-quotes-with-escapes",
    ),
    pytest.param(
        "submit name=x hours=1 priority=core data=ready "
        'cmd="python <http://train.py|train.py> &amp;&amp; cat &lt;in&gt; \\"q\\""',
        ("submit",),
        {
            "name": "x",
            "hours": 1.0,
            "priority": "core",
            "data": DataSpec(ready=True),
            "cmd": 'python train.py && cat <in> "q"',
        },
        id="slack-escapes-and-autolink-in-cmd",
    ),
    pytest.param(
        "submit template=bert-base name=run3",
        ("submit",),
        {"template": "bert-base", "name": "run3"},
        id="submit-template-defers-required",
    ),
    pytest.param("ready 42", ("ready",), {"job": JobRef(id=42)}, id="ready-id"),
    pytest.param("ready #42", ("ready",), {"job": JobRef(id=42)}, id="ready-hash-id"),
    pytest.param(
        "Ready job=bert-ft",
        ("ready",),
        {"job": JobRef(name="bert-ft")},
        id="ready-positional-as-key",
    ),
    pytest.param(
        "ready 42 location=<https://x.y/z|https://x.y/z>",
        ("ready",),
        {"job": JobRef(id=42), "location": "https://x.y/z"},
        id="ready-slack-link",
    ),
    pytest.param("queue", ("queue",), {}, id="queue-no-defaults-filled"),
    pytest.param("queue MINE", ("queue",), {"scope": "mine"}, id="queue-scope"),
    pytest.param("status 7", ("status",), {"job": JobRef(id=7)}, id="status"),
    pytest.param(
        "cancel 42 reason=“it’s the wrong lr”",
        ("cancel",),
        {"job": JobRef(id=42), "reason": "it’s the wrong lr"},
        id="cancel-smart-quotes-apostrophe",
    ),
    pytest.param(
        "cancel 42 reason=it's",
        ("cancel",),
        {"job": JobRef(id=42), "reason": "it's"},
        id="apostrophe-inside-word-is-literal",
    ),
    pytest.param(
        'bump 42 to=Core reason="deadline"',
        ("bump",),
        {"job": JobRef(id=42), "to": "core", "reason": "deadline"},
        id="bump",
    ),
    pytest.param("approve #7", ("approve",), {"request": 7}, id="approve-hash"),
    pytest.param(
        "deny 7 reason='full this week'",
        ("deny",),
        {"request": 7, "reason": "full this week"},
        id="deny",
    ),
    pytest.param(
        "done 42 output=<s3://ckpt/final> metric=loss:0.31 metric=top1:76.2",
        ("done",),
        {
            "job": JobRef(id=42),
            "output": "s3://ckpt/final",
            "metric": (Metric("loss", 0.31), Metric("top1", 76.2)),
        },
        id="done-repeatable-metric",
    ),
    pytest.param(
        "done 42 metric=val/loss:1e-3",
        ("done",),
        {"job": JobRef(id=42), "metric": (Metric("val/loss", 0.001),)},
        id="done-single-metric-is-tuple",
    ),
    pytest.param("quota team=vision", ("quota",), {"team": "vision"}, id="quota"),
    pytest.param(
        "template save bert-base gpus=4 priority=normal",
        ("template", "save"),
        {"name": "bert-base", "gpus": 4, "priority": "normal"},
        id="template-save-nothing-required",
    ),
    pytest.param("Template LIST", ("template", "list"), {}, id="template-list"),
    pytest.param("template show bert", ("template", "show"), {"name": "bert"}, id="template-show"),
    pytest.param("help", ("help",), {}, id="help"),
    pytest.param("help Admin quota", ("help",), {"topic": ("admin", "quota")}, id="help-topic"),
    pytest.param(
        "admin team add vision channel=<#C0123ABC|vision-gpu>",
        ("admin", "team", "add"),
        {"name": "vision", "channel": "C0123ABC"},  # its id: renaming it breaks nothing
        id="team-add-slack-channel",
    ),
    pytest.param(
        "admin team add vision channel=#vision-gpu",
        ("admin", "team", "add"),
        {"name": "vision", "channel": "#vision-gpu"},
        id="team-add-typed-channel-name",
    ),
    pytest.param(
        "admin member add <@U012AB3CD|alice> team=vision role=Approver",
        ("admin", "member", "add"),
        {"user": "U012AB3CD", "team": "vision", "role": "approver"},
        id="member-add-slack-mention",
    ),
    pytest.param(
        "admin member remove <@W012AB3CD>",
        ("admin", "member", "remove"),
        {"user": "W012AB3CD"},
        id="member-remove-mention-no-label",
    ),
    pytest.param(
        "admin member role @U012AB3CD role=admin",
        ("admin", "member", "role"),
        {"user": "U012AB3CD", "role": "admin"},
        id="member-role-at-id",
    ),
    pytest.param("admin member list", ("admin", "member", "list"), {}, id="member-list"),
    pytest.param(
        "admin quota add team=vision type=ANY hours=5000 expires=2025-12-31 owner=U012AB3CD "
        'note="Q4 grant &amp; extras"',
        ("admin", "quota", "add"),
        {
            "team": "vision",
            "type": None,
            "hours": 5000.0,
            "expires": date(2025, 12, 31),
            "owner": "U012AB3CD",
            "note": "Q4 grant & extras",
        },
        id="quota-add-any-type",
    ),
    pytest.param(
        "admin quota add team=vision type=H100 hours=10 expires=2026-01-31 owner=<@U0AB|bo>",
        ("admin", "quota", "add"),
        {
            "team": "vision",
            "type": "H100",
            "hours": 10.0,
            "expires": date(2026, 1, 31),
            "owner": "U0AB",
        },
        id="quota-add-one-type",
    ),
    pytest.param(
        "admin quota renew #3 expires=2026-06-30",
        ("admin", "quota", "renew"),
        {"id": 3, "expires": date(2026, 6, 30)},
        id="quota-renew",
    ),
    pytest.param(
        'admin quota adjust 3 hours=0 reason="returned"',
        ("admin", "quota", "adjust"),
        {"id": 3, "hours": 0.0, "reason": "returned"},
        id="quota-adjust-to-zero",
    ),
    pytest.param(
        "admin host add gpu-01 url=<http://gpu-01.lab:8700>",
        ("admin", "host", "add"),
        {"name": "gpu-01", "url": "http://gpu-01.lab:8700"},
        id="host-add-slack-link",
    ),
    pytest.param(
        "admin host drain gpu-01", ("admin", "host", "drain"), {"name": "gpu-01"}, id="host-drain"
    ),
]


@pytest.mark.parametrize(("text", "path", "args"), VALID)
def test_valid_command_parses_exactly(
    text: str, path: tuple[str, ...], args: dict[str, object]
) -> None:
    assert parse(text) == ParsedCommand(path, args)
