"""parse(): invalid command text gives exactly this message, so every message gets reviewed."""

from __future__ import annotations

import pytest

from bot.said import problem
from scheduler.errors import UserError
from scheduler.grammar import Mistake, ParseError, ValueKind, check_required, parse
from scheduler.grammar.values import Duration, Expected

COMMANDS = (
    "Commands: submit, ready, release, queue, board, status, why, cancel, bump, approve, deny, done, quota, "
    "report, template, lang, help, admin, config, match, logs, priority."
)
SUBMIT_EXAMPLE = (
    "Example: /gpu submit name=bert-ft gpus=2 type=A100-80GB hours=12 priority=normal "
    'data=ready cmd="python train.py --lr 3e-4"'
)
SUBMIT_OK = "submit name=x hours=1 priority=core data=ready cmd=x"

INVALID = [
    pytest.param(
        "sumbit",
        f'Unknown command "sumbit". Did you mean "submit"? {COMMANDS} Try /gpu help.',
        id="unknown-command-suggests",
    ),
    pytest.param(
        "frobnicate 42",
        f'Unknown command "frobnicate". {COMMANDS} Try /gpu help.',
        id="unknown-command-no-suggestion",
    ),
    pytest.param(
        "host list",
        f'Unknown command "host". Did you mean "admin host"? {COMMANDS} Try /gpu help.',
        id="group-word-without-admin",
    ),
    pytest.param(
        "admin",
        "/gpu admin needs one more word: team, member, quota, host, maintenance, reserve, account. Try /gpu help admin.",
        id="admin-alone",
    ),
    pytest.param(
        "admin quota team=vision",
        "/gpu admin quota needs one more word: add, renew, adjust, list. "
        "Try /gpu help admin quota.",
        id="admin-quota-alone",
    ),
    pytest.param(
        "admin quota ad team=vision",
        'Unknown command "admin quota ad". Did you mean "admin quota add"? '
        "admin quota commands: add, renew, adjust, list. Try /gpu help admin quota.",
        id="admin-quota-unknown-word",
    ),
    pytest.param(
        "name=x",
        f'Start with a command, not "name=x". {COMMANDS} Try /gpu help.',
        id="key-before-command",
    ),
    pytest.param(
        "submit gpu=2",
        'Unknown key "gpu" for /gpu submit. Did you mean "gpus"? Valid keys: name, gpus, type, '
        "mem, speed, hours, priority, data, team, cmd, image, template, again, project, round, "
        "preemptible, grace, checkpoint, share, after, afterany, count, sweep, max_running.",
        id="unknown-key-suggests",
    ),
    pytest.param(
        "status 42 colour=red",
        'Unknown key "colour" for /gpu status. Valid keys: job.',
        id="unknown-key-no-suggestion",
    ),
    pytest.param(
        "template list sort=name",
        '/gpu template list takes no keys, got "sort=name".\nExample: /gpu template list',
        id="key-for-command-without-keys",
    ),
    pytest.param(
        "submit name=bert-ft",
        f"/gpu submit is missing hours, priority, data and cmd.\n{SUBMIT_EXAMPLE}",
        id="missing-required",
    ),
    pytest.param(
        "status",
        "/gpu status is missing job.\nExample: /gpu status 42",
        id="missing-positional",
    ),
    pytest.param(
        f"{SUBMIT_OK} gpus=two",
        'gpus must be a whole number from 1 to 64, got "two".\nExample: gpus=2',
        id="wrong-type",
    ),
    pytest.param(
        f"{SUBMIT_OK} gpus=65",
        'gpus must be a whole number from 1 to 64, got "65".\nExample: gpus=2',
        id="out-of-range-int",
    ),
    pytest.param(
        "admin quota add team=vision hours=0 expires=2027-06-30",
        'hours must be a number greater than 0 and at most 10000000, got "0".\nExample: hours=5000',
        id="out-of-range-exclusive-minimum",
    ),
    pytest.param(
        "submit hours=1e-320",
        'hours must be a number from 0.01 to 100000, got "1e-320".\nExample: hours=24',
        id="an-estimate-too-small-to-mean-anything",
    ),
    pytest.param(
        "submit hours=inf",
        'hours must be a number from 0.01 to 100000, got "inf".\nExample: hours=24',
        id="infinite-number",
    ),
    pytest.param(
        "submit priority=urgent",
        'priority must be one of core, normal, idle, got "urgent".\nExample: priority=normal',
        id="bad-choice",
    ),
    pytest.param(
        "submit data=reddy",
        "data must be ready, pending, after:#12 (ready when job #12 succeeds), or the path or URL the data is being copied to (at most "
        '500 characters), got "reddy".\nExample: data=ready',
        id="data-typo-is-not-a-location",
    ),
    pytest.param(
        "submit type=any",
        "type must be GPU type names separated by commas (leave it out to allow any type), "
        'got "any".\nExample: type=A100-80GB,H100',
        id="any-is-not-a-gpu-type",
    ),
    pytest.param(
        "submit name=bert/ft",
        "name cannot hold U+002F (character 5): a symbol or punctuation mark other than '.', "
        "'_' or '-'. Retype it without that character; it must be a name of letters and digits "
        "in any language, '.', '_' or '-' (at most 64 characters, starting with a letter or "
        "digit).\nExample: name=bert-ft",
        id="bad-name",
    ),
    pytest.param(
        "admin team add 语音\u202e组",
        "name cannot hold U+202E (character 3): an invisible formatting character, such as a "
        "text-direction override or a zero-width space, that makes a name read differently "
        "from what is stored. Retype it without that character; it must be a name of letters "
        "and digits in any language, '.', '_' or '-' (at most 64 characters, starting with a "
        "letter or digit).\nExample: /gpu admin team add vision channel=#vision-gpu",
        id="bidi-override-in-a-name",
    ),
    pytest.param(
        "admin host add gpu-é url=http://gpu-01.lab:8700",
        "name must be a name of letters, digits, '.', '_' or '-' (at most 64, starting with a "
        'letter or digit), got "gpu-é".'
        "\nExample: /gpu admin host add gpu-01 url=http://gpu-01.lab:8700",
        id="a-host-name-stays-ascii",
    ),
    pytest.param(
        "submit cmd=" + "x" * 2001,
        "cmd must be text of at most 2000 characters, got 2001 characters."
        '\nExample: cmd="python train.py --lr 3e-4"',
        id="text-too-long",
    ),
    pytest.param(
        'submit cmd=""',
        'cmd needs a value.\nExample: cmd="python train.py --lr 3e-4"',
        id="empty-value",
    ),
    pytest.param(
        "submit gpus=1 GPUS=2",
        'gpus is given twice: "gpus=1" and "GPUS=2". Give it once.',
        id="duplicate-key",
    ),
    pytest.param(
        "ready job=42 43",
        'job is given twice: "job=42" and "43". Give it once.',
        id="duplicate-positional",
    ),
    pytest.param(
        'submit cmd="python train.py',
        'Unterminated quote: the " at character 12 ("python train.py) is never closed. '
        'Close it with ", and write \\" for a quote inside the value.'
        '\nExample: cmd="python train.py --lr 3e-4"',
        id="unterminated-quote",
    ),
    pytest.param(
        "cancel 42 reason=“wrong learning rate for the whole run",
        "Unterminated quote: the “ at character 18 (“wrong learning rate for…) is never closed. "
        "Close it with ”, and write \\“ for a quote inside the value."
        '\nExample: cmd="python train.py --lr 3e-4"',
        id="unterminated-smart-quote",
    ),
    pytest.param(
        "cancel 42 wrong lr",
        'Unexpected "wrong": /gpu cancel takes only <job>. Give other values as key=value, in '
        "quotes if they contain spaces. Usage: /gpu cancel <job> [reason=…]."
        '\nExample: /gpu cancel 42 reason="wrong learning rate"',
        id="too-many-positionals",
    ),
    pytest.param(
        "status 42 43",
        'Unexpected "43": /gpu status takes only <job>. Usage: /gpu status <job>.'
        "\nExample: /gpu status 42",
        id="too-many-positionals-no-keys",
    ),
    pytest.param(
        "admin host list gpu-01",
        '/gpu admin host list takes no words after it, got "gpu-01". '
        "Usage: /gpu admin host list.\nExample: /gpu admin host list",
        id="positional-for-command-without-positionals",
    ),
    pytest.param(
        "submit bert-ft",
        '/gpu submit takes no words after it, got "bert-ft". Give other values as key=value, '
        "in quotes if they contain spaces. Usage: /gpu submit name=… hours=… "
        "priority=core|normal|idle data=… cmd=… [gpus=…] [type=…] [mem=…] [speed=…] [team=…] "
        "[image=…] [template=…] [again=…] [project=…] [round=…] [preemptible=yes|no] "
        f"[grace=…] [checkpoint=…] [share=yes|no] [after=…] [afterany=…] [count=…] [sweep=…] [max_running=…].\n{SUBMIT_EXAMPLE}",
        id="word-for-command-that-takes-only-keys",
    ),
    pytest.param(
        "admin quota renew 3 expires=2025-02-30",
        "expires must be a date written YYYY-MM-DD from 2000-01-01 to 2199-12-31, got "
        '"2025-02-30".\nExample: expires=2025-12-31',
        id="impossible-date",
    ),
    pytest.param(
        "admin quota renew 3 expires=30/06/2025",
        "expires must be a date written YYYY-MM-DD from 2000-01-01 to 2199-12-31, got "
        '"30/06/2025".\nExample: expires=2025-12-31',
        id="bad-date-format",
    ),
    pytest.param(
        "admin quota renew 3 expires=9999-12-31",
        "expires must be a date written YYYY-MM-DD from 2000-01-01 to 2199-12-31, got "
        '"9999-12-31".\nExample: expires=2025-12-31',
        id="date-after-the-window",
    ),
    pytest.param(
        "report since=0001-01-01",
        "since must be a date written YYYY-MM-DD from 2000-01-01 to 2199-12-31, got "
        '"0001-01-01".\nExample: since=2026-11-01',
        id="date-before-the-window",
    ),
    pytest.param(
        f'{SUBMIT_OK} image="ubuntu latest"',
        "image must be a container image reference of letters, digits and ._/:@+- (at most "
        '300), got "ubuntu latest".\nExample: image=nvcr.io/nvidia/pytorch:24.05-py3',
        id="image-with-a-space",
    ),
    pytest.param(
        "admin team add vision channel=#" + "c" * 100,
        "channel must be a Slack channel (type # and pick it; at most 100 characters), got "
        "101 characters.\nExample: channel=#vision-gpu",
        id="channel-longer-than-its-column",
    ),
    pytest.param(
        "admin team add vision channel=#Vision GPU",
        'channel must be a Slack channel (type # and pick it; at most 100 characters), got "#Vision".'
        "\nExample: channel=#vision-gpu",
        id="channel-not-a-channel-name",
    ),
    pytest.param(
        "admin host add gpu-01 url=http://gpu-01/" + "p" * 300,
        "url must be a URL starting with http:// or https:// (at most 300 characters), got 314 "
        "characters.\nExample: url=http://gpu-01.lab:8700",
        id="url-longer-than-its-column",
    ),
    pytest.param(
        "admin member add <@U" + "A" * 32 + "> team=vision",
        "user must be a Slack user mention (type @ and pick the person), got "
        f'"<@U{"A" * 32}>".'
        "\nExample: /gpu admin member add @alice team=vision role=approver",
        id="slack-id-longer-than-its-column",
    ),
    pytest.param(
        "status 2147483648",
        'job must be a job id like 42 or #42, one job of an array like #40.3, or a job name, got "2147483648", more than the '
        "largest record number (2147483647).\nExample: /gpu status 42",
        id="record-number-too-large",
    ),
    pytest.param(
        "admin quota add team=vision hours=1e300",
        'hours must be a number greater than 0 and at most 10000000, got "1e300".'
        "\nExample: hours=5000",
        id="quota-hours-too-large",
    ),
    pytest.param(
        "done 42 metric=loss:nan",
        'metric must be name:number, like loss:0.31, got "loss:nan".\nExample: metric=loss:0.31',
        id="metric-not-a-number",
    ),
    pytest.param(
        "status 4\x002",
        "The text contains a character that cannot be stored: an invisible NUL character "
        "(U+0000) at character 9. Retype the command without it.",
        id="nul-character",
    ),
    pytest.param(
        'cancel 42 reason="broken \ud83d"',
        "The text contains a character that cannot be stored: half of a broken emoji or symbol "
        "(U+D83D) at character 26. Retype the command without it.",
        id="lone-surrogate",
    ),
    pytest.param(
        "admin member add @alice team=vision",
        'user must be a Slack user mention (type @ and pick the person), got "@alice".'
        "\nExample: /gpu admin member add @alice team=vision role=approver",
        id="bad-user-positional",
    ),
    pytest.param(
        "admin quota add owner=alice",
        'owner must be a Slack user mention (type @ and pick the person), got "alice".'
        "\nExample: owner=@alice",
        id="bad-user-key",
    ),
    pytest.param(
        "done 42 metric=loss",
        'metric must be name:number, like loss:0.31, got "loss".\nExample: metric=loss:0.31',
        id="metric-without-value",
    ),
    pytest.param(
        "done 42 metric=loss:low",
        'metric must be name:number, like loss:0.31, got "loss:low".\nExample: metric=loss:0.31',
        id="metric-non-numeric",
    ),
    pytest.param(
        "approve #0",
        'request must be a number like 7 or #7, got "#0".\nExample: /gpu approve 7',
        id="bad-request-id",
    ),
    pytest.param(
        "admin host add gpu-01 url=gpu-01:8700",
        "url must be a URL starting with http:// or https:// (at most 300 characters), got "
        '"gpu-01:8700".'
        "\nExample: url=http://gpu-01.lab:8700",
        id="bad-url",
    ),
    pytest.param(
        "submit preemptible=maybe",
        'preemptible must be one of yes, no, got "maybe".\nExample: preemptible=yes',
        id="preemptible-yes-or-no",
    ),
    pytest.param(
        "submit preemptible=yes grace=10s",
        "grace must be minutes (5) or a length with its unit (90s, 5m, 1h), from 30s to 2h, "
        'got "10s".\nExample: grace=5m',
        id="grace-too-short",
    ),
    pytest.param(
        "submit preemptible=yes grace=121",
        "grace must be minutes (5) or a length with its unit (90s, 5m, 1h), from 30s to 2h, "
        'got "121".\nExample: grace=5m',
        id="grace-minutes-too-long",
    ),
    pytest.param(
        "submit preemptible=yes grace=soon",
        "grace must be minutes (5) or a length with its unit (90s, 5m, 1h), from 30s to 2h, "
        'got "soon".\nExample: grace=5m',
        id="grace-not-a-length",
    ),
    pytest.param(
        "submit preemptible=yes checkpoint=ckpt/run",
        "checkpoint must be an absolute path (/mnt/nas/ckpt/run) or a URL (s3://bucket/run), "
        'at most 500 characters, without spaces, got "ckpt/run".'
        "\nExample: checkpoint=/mnt/nas/ckpt/bert-ft",
        id="checkpoint-relative",
    ),
    pytest.param(
        "help sumbit",
        f'Unknown command "sumbit". Did you mean "submit"? {COMMANDS} Try /gpu help.',
        id="help-unknown-topic",
    ),
]


@pytest.mark.parametrize(("text", "message"), INVALID)
def test_invalid_command_explains_exactly(text: str, message: str) -> None:
    with pytest.raises(ParseError) as caught:
        parse(text)
    assert problem("en", caught.value) == message


def test_error_names_the_key_and_its_example() -> None:
    with pytest.raises(ParseError) as caught:
        parse("submit gpus=two")
    assert (caught.value.key, caught.value.example) == ("gpus", "gpus=2")


def test_parse_error_is_a_user_error_with_a_code_and_the_values_it_names() -> None:
    with pytest.raises(UserError) as caught:
        parse("status")
    error = caught.value
    assert isinstance(error, ParseError)
    assert error.problem is Mistake.MISSING_KEYS
    assert dict(error.values) == {"command": "/gpu status", "missing": ("job",)}
    assert error.example == "/gpu status 42"
    assert problem("zh", error) == "/gpu status 缺少 job。\n示例：/gpu status 42"


def test_a_bad_value_carries_what_a_valid_one_looks_like_as_data() -> None:
    with pytest.raises(ParseError) as caught:
        parse("submit gpus=65")
    error = caught.value
    assert (error.problem, error.key, dict(error.values)) == (
        Mistake.BAD_VALUE,
        "gpus",
        {"name": "gpus", "got": "65"},
    )
    assert error.expected == Expected(ValueKind.INT, minimum=1, maximum=64)
    assert problem("zh", error) == "gpus 须为整数，范围 1 到 64，却收到“65”。\n示例：gpus=2"


def test_check_required_passes_after_template_merge() -> None:
    parsed = parse("submit template=bert-base name=run3 gpus=4")
    template = {"hours": 12.0, "priority": "normal", "data": "ready", "cmd": "python t.py"}
    check_required(parsed.path, {**template, **parsed.args})


def test_check_required_reports_what_the_template_did_not_fill() -> None:
    parsed = parse("submit template=bert-base name=run3")
    with pytest.raises(ParseError) as caught:
        check_required(parsed.path, {"hours": 12.0, **parsed.args})
    assert (
        problem("en", caught.value)
        == f"/gpu submit is missing priority, data and cmd.\n{SUBMIT_EXAMPLE}"
    )


def test_check_required_rejects_unknown_path() -> None:
    with pytest.raises(ParseError):
        check_required(("sumbit",), {})


@pytest.mark.parametrize(
    ("typed", "seconds"),
    [("5", 300), ("1.5", 90), ("90s", 90), ("5m", 300), ("5min", 300), ("1h", 3600), ("2H", 7200)],
)
def test_grace_is_minutes_or_a_length_with_its_unit(typed: str, seconds: float) -> None:
    parsed = parse(f"template save t preemptible=yes grace={typed}")
    assert parsed.args["grace"] == Duration(seconds)
    # Stored with its unit, it reads back as the same length.
    again = parse(f"template save t grace={parsed.args['grace']}")
    assert again.args["grace"] == Duration(seconds)
