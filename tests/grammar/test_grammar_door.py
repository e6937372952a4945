"""The grammar refuses at the door whatever the agent, the database or the policy would refuse.

Each rule here exists because a value once passed parse() and failed later: inside the
scheduling cycle (image), as a generic database error (lengths, ids), or as an overflow in
date arithmetic (dates).
"""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.said import problem
from scheduler.agent.protocol import IMAGE_RE
from scheduler.grammar import SPEC, SUBCOMMANDS, Key, ParseError, ValueKind, parse
from scheduler.grammar.values import convert
from storage import limits

SUBMIT_OK = "submit name=x hours=1 priority=core data=ready cmd=x"


def _error(text: str) -> ParseError:
    with pytest.raises(ParseError) as caught:
        parse(text)
    return caught.value


def _submit_key(name: str) -> Key:
    key = SPEC[("submit",)].key(name)
    assert key is not None
    return key


# ---------------------------------------------------------------- image


def test_image_with_a_space_is_refused_naming_image_with_an_example() -> None:
    error = _error(f'{SUBMIT_OK} image="ubuntu latest"')
    assert error.key == "image"
    assert "container image" in problem("en", error)
    assert error.example is not None and error.example.startswith("image=")
    assert IMAGE_RE.fullmatch(error.example.removeprefix("image="))


@pytest.mark.parametrize(
    "image",
    [
        "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
        "nvcr.io/nvidia/pytorch:24.05-py3",
        "ubuntu@sha256:" + "a" * 64,
        "x" * limits.IMAGE,
    ],
)
def test_image_references_the_agent_accepts_pass(image: str) -> None:
    assert parse(f"{SUBMIT_OK} image={image}").args["image"] == image


@pytest.mark.parametrize(
    "image", ["-v/:/host", "ubuntu latest", "ubuntu;rm", "x" * (limits.IMAGE + 1), "é"]
)
def test_image_references_the_agent_or_the_column_refuse_are_refused(image: str) -> None:
    with pytest.raises(ParseError) as caught:
        convert(_submit_key("image"), image)
    assert caught.value.key == "image"


@settings(max_examples=300, deadline=None, database=None)
@given(st.text(alphabet=st.sampled_from("aZ9._/:@+- -é\\"), min_size=1, max_size=12))
def test_grammar_and_agent_agree_on_images(image: str) -> None:
    try:
        convert(_submit_key("image"), image)
    except ParseError:
        accepted = False
    else:
        accepted = True
    assert accepted == bool(IMAGE_RE.fullmatch(image))


# ---------------------------------------------------------------- lengths of stored text


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (f"admin team add vision channel=#{'c' * limits.CHANNEL}", "channel"),
        (f"admin host add gpu-01 url=http://h/{'p' * limits.HOST_URL}", "url"),
        (f"admin member add U{'A' * limits.SLACK_ID} team=vision", "user"),
        (f"admin member add <@U{'A' * limits.SLACK_ID}|al> team=vision", "user"),
        (f"admin member role <@W{'A' * limits.SLACK_ID}> role=admin", "user"),
        (f"admin quota add team=v hours=1 expires=2030-01-01 owner=<@U{'A' * 40}>", "owner"),
        (f"{SUBMIT_OK} type={'t' * (limits.GPU_TYPE + 1)}", "type"),
        (f"submit name=x hours=1 cmd=x data=/{'d' * limits.DATA_LOCATION}", "data"),
        (f"ready 4 location=/{'d' * limits.DATA_LOCATION}", "location"),
        (f"status {'j' * (limits.JOB_NAME + 1)}", "job"),
    ],
)
def test_values_longer_than_their_column_are_refused_naming_the_key(text: str, key: str) -> None:
    assert _error(text).key == key


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        (f"admin team add v channel=#{'c' * (limits.CHANNEL - 1)}", "channel", "#" + "c" * 99),
        ("admin member add <@U012AB3CD|alice> team=vision", "user", "U012AB3CD"),
        (f"admin member add <@U{'A' * 31}> team=vision", "user", "U" + "A" * 31),
        (f"admin member add W{'A' * 31} team=vision", "user", "W" + "A" * 31),
        (f"admin host add h url=http://h/{'p' * 291}", "url", "http://h/" + "p" * 291),
    ],
)
def test_values_that_fit_their_column_pass(text: str, key: str, value: str) -> None:
    assert parse(text).args[key] == value


def test_too_long_channel_says_how_long_it_may_be() -> None:
    message = problem("en", _error(f"admin team add vision channel=#{'c' * 200}"))
    assert message.startswith(
        f"channel must be a Slack channel (type # and pick it; at most {limits.CHANNEL} characters)"
    )


# ---------------------------------------------------------------- record numbers


@pytest.mark.parametrize(
    "text",
    [
        f"status {limits.ROW_ID_MAX + 1}",
        f"approve #{limits.ROW_ID_MAX + 1}",
        f"admin quota renew {10**14} expires=2030-01-01",
    ],
)
def test_record_numbers_larger_than_the_database_holds_are_refused(text: str) -> None:
    error = _error(text)
    assert error.key in {"job", "request", "id"}
    assert str(limits.ROW_ID_MAX) in problem("en", error)


def test_the_largest_record_number_passes() -> None:
    assert parse(f"approve {limits.ROW_ID_MAX}").args["request"] == limits.ROW_ID_MAX


# ---------------------------------------------------------------- dates


def _date_keys() -> list[tuple[str, Key]]:
    return [
        (" ".join(command.path), key)
        for command in SUBCOMMANDS
        for key in command.keys
        if key.kind is ValueKind.DATE
    ]


@pytest.mark.parametrize(("command", "key"), _date_keys(), ids=lambda item: str(item))
@pytest.mark.parametrize("day", ["0001-01-01", "1999-12-31", "2200-01-01", "9999-12-31"])
def test_dates_outside_the_window_are_refused_with_the_bounds(
    command: str, key: Key, day: str
) -> None:
    with pytest.raises(ParseError) as caught:
        convert(key, day)
    message = problem("en", caught.value)
    assert caught.value.key == key.name
    assert message.startswith(f"{key.name} must be a date")
    assert "2000-01-01" in message and "2199-12-31" in message
    assert f"Example: {key.name}=" in message


@pytest.mark.parametrize(("command", "key"), _date_keys(), ids=lambda item: str(item))
def test_dates_at_the_edges_of_the_window_pass(command: str, key: Key) -> None:
    assert convert(key, "2000-01-01") == limits.EARLIEST_DATE == date(2000, 1, 1)
    assert convert(key, "2199-12-31") == limits.LATEST_DATE == date(2199, 12, 31)


def test_report_since_year_one_is_a_parse_error() -> None:
    assert _error("report since=0001-01-01").key == "since"


def test_quota_expiring_in_year_9999_is_a_parse_error() -> None:
    text = "admin quota add team=vision hours=10 expires=9999-12-31 owner=<@U012AB3CD>"
    assert _error(text).key == "expires"


# ---------------------------------------------------------------- numbers


def _number_keys() -> list[tuple[str, Key]]:
    return [
        (" ".join(command.path), key)
        for command in SUBCOMMANDS
        for key in command.keys
        if key.kind in (ValueKind.INT, ValueKind.FLOAT)
    ]


@pytest.mark.parametrize(("command", "key"), _number_keys(), ids=lambda item: str(item))
def test_every_number_key_has_a_finite_range(command: str, key: Key) -> None:
    assert key.minimum is not None and key.maximum is not None
    assert key.minimum < key.maximum < 1e12


@pytest.mark.parametrize(("command", "key"), _number_keys(), ids=lambda item: str(item))
@pytest.mark.parametrize(
    "raw", ["nan", "NaN", "inf", "-inf", "Infinity", "1e999", "-1e999", "1e308", "0x10", "1_0"]
)
def test_numbers_must_be_finite_and_in_range(command: str, key: Key, raw: str) -> None:
    with pytest.raises(ParseError) as caught:
        convert(key, raw)
    assert caught.value.key == key.name
    assert problem("en", caught.value).startswith(f"{key.name} must be a")
    assert f"Example: {key.name}=" in problem("en", caught.value)


@pytest.mark.parametrize("raw", ["loss:nan", "loss:inf", "loss:1e999", "loss:-1e999"])
def test_metric_values_must_be_finite(raw: str) -> None:
    assert _error(f"done 42 metric={raw}").key == "metric"


def test_quota_hours_have_an_upper_bound() -> None:
    text = "admin quota add team=vision hours=1e300 expires=2030-01-01 owner=<@U012AB3CD>"
    assert _error(text).key == "hours"
    assert _error("admin quota adjust 3 hours=1e300 reason=x").key == "hours"
    assert _error("admin quota renew 3 hours=1e300 expires=2030-01-01").key == "hours"


# ---------------------------------------------------------------- characters that cannot be stored


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("status 4\x002", 9),
        ('cancel 42 reason="ok \ud800"', 22),
        ("\udfffsubmit", 1),
        ("submit name=a\x00", 14),
        ('cancel 42 reason="' + "x" * 10_000 + '\udc80"', 10_019),
    ],
)
def test_unstorable_characters_are_refused_before_tokenizing(text: str, where: int) -> None:
    message = problem("en", _error(text))
    assert message.startswith("The text contains a character that cannot be stored")
    assert f"at character {where}" in message
    assert "Retype" in message


def test_unterminated_quote_after_an_unstorable_character_reports_the_character() -> None:
    # The character check runs first, so the reply names the real problem.
    assert "cannot be stored" in problem("en", _error('cancel 42 reason="\x00'))


@pytest.mark.parametrize("raw", ["a\x00b", "\ud83d", "ok\udfff"])
def test_converted_values_are_checked_too(raw: str) -> None:
    # The submit modal converts its fields without tokenizing them.
    with pytest.raises(ParseError) as caught:
        convert(_submit_key("cmd"), raw)
    assert caught.value.key == "cmd"
    assert problem("en", caught.value).startswith("cmd contains a character that cannot be stored")


def test_emoji_and_chinese_are_storable() -> None:
    assert parse('cancel 42 reason="数据有误 🚀"').args["reason"] == "数据有误 🚀"
