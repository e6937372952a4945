"""Template keys for names in any script: ASCII keys every backend holds, at the longest
names the columns take, and ASCII names keep the keys an older install wrote."""

from __future__ import annotations

from urllib.parse import unquote

import pytest

from storage import limits
from storage.objects import keys
from storage.objects.base import ObjectStore
from storage.objects.local import SUFFIX

LONGEST_TEAM = "语" * limits.TEAM_NAME
LONGEST_TEMPLATE = "𠀀" * limits.TEMPLATE_NAME  # four bytes each, twelve characters encoded


def test_ascii_names_keep_the_keys_an_older_install_wrote() -> None:
    assert keys.template("vision", "bert-base") == "templates/vision/bert-base.json"
    longest = "a" * limits.TEMPLATE_NAME
    assert keys.template("ml", longest) == f"templates/ml/{longest}.json"


def test_a_short_chinese_name_is_its_percent_encoded_utf8() -> None:
    key = keys.template("语音组", "医疗对话-sft")
    assert key.isascii()
    assert unquote(key) == "templates/语音组/医疗对话-sft.json"


def test_the_longest_names_fit_a_file_name_and_stay_apart() -> None:
    key = keys.template(LONGEST_TEAM, LONGEST_TEMPLATE)
    team_part, name_part = key.removeprefix("templates/").removesuffix(".json").split("/")
    assert key.isascii()
    # A local store's folder for the object is the segment, ".json" and its suffix.
    assert len((name_part + ".json" + SUFFIX).encode()) <= 255
    assert len(team_part.encode()) <= 255 and len(key.encode()) <= 1024
    # The head of the name is still readable, and two long names alike but for the end differ.
    assert unquote(name_part).startswith("𠀀" * 10)
    other = keys.template(LONGEST_TEAM, "𠀀" * (limits.TEMPLATE_NAME - 1) + "1")
    assert other != key


@pytest.mark.parametrize(
    ("team", "name"),
    [("语音组", "医疗对话-sft"), (LONGEST_TEAM, LONGEST_TEMPLATE), ("vision", "模" * 64)],
    ids=["short", "longest-both", "longest-name"],
)
def test_a_template_under_a_chinese_name_reads_back_on_every_backend(
    store: ObjectStore, team: str, name: str
) -> None:
    key = keys.template(team, name)
    store.put(key, b'{"gpus": 1}', {"paika-author": "张伟"})
    assert store.get(key) == b'{"gpus": 1}'
    assert store.keys(f"templates/{key.split('/')[1]}/") == [key]
