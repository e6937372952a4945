"""The archive keeps commands as the policy's `archive.commands` says: masked by default
(what looks like a secret replaced by ***), full, or none. The store keeps every version of
every object for good: before, a token in a command stayed there after its rotation."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_archiver import archive, later, open_archiver, run

from scheduler.app import Paika
from scheduler.archive.archiver import Archiver
from scheduler.archive.masking import kept_command, kept_fields, mask_secrets
from scheduler.config import Archive
from storage.objects import keys
from storage.objects.local import LocalStore

CASES = [
    # options whose names say they hold a secret, with a value after = or a blank
    ("python t.py --password hunter2 --lr 3e-4", "python t.py --password *** --lr 3e-4"),
    ("python t.py --password=hunter2", "python t.py --password=***"),
    (
        "python t.py --api-key=sk_live_1 --max-tokens 512",
        "python t.py --api-key=*** --max-tokens 512",
    ),
    ("t --db-pass 'two words' --x 1", "t --db-pass *** --x 1"),
    ('t --hf-token "a\\"b" next', "t --hf-token *** next"),
    ("t --clientSecret abc", "t --clientSecret ***"),
    # variables
    ("TOKEN=abc123 python t.py", "TOKEN=*** python t.py"),
    (
        "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG && aws s3 ls",
        "export AWS_SECRET_ACCESS_KEY=*** && aws s3 ls",
    ),
    ("AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE aws s3 ls", "AWS_ACCESS_KEY_ID=*** aws s3 ls"),
    ('WANDB_API_KEY="0123 4567" python t.py', "WANDB_API_KEY=*** python t.py"),
    ("dbPassword=x; apiKey=y", "dbPassword=***; apiKey=***"),
    # URLs with a user and password
    ("git clone https://bob:s3cret@git.lab/x.git", "git clone https://***@git.lab/x.git"),
    (
        "psql postgresql://app:pw@db:5432/x -c 'select 1'",
        "psql postgresql://***@db:5432/x -c 'select 1'",
    ),
    # bearer tokens, long tokens after a word that names one, tokens by their shape
    ('curl -H "Authorization: Bearer eyJhbGciOi.x.y" u', 'curl -H "Authorization: Bearer ***" u'),
    ("wandb login 0123456789abcdef0123456789abcdef01234567", "wandb login ***"),
    ("echo token: ZXhhbXBsZS1iYXNlNjQtdG9rZW4tdmFsdWU=", "echo token: ***"),
    ("gh auth status; ghp_0123456789abcdefghijABCDEFGHIJ012345", "gh auth status; ***"),
    ("pip install x && hf_abcdefghijklmnopqrstuvwxyz01234567", "pip install x && ***"),
    # left as written: nothing secret, or where a secret is kept rather than the secret
    ("python t.py --token-file /run/secrets/hf --num-passes 3 --author bob", None),
    ("python t.py --max-tokens 512 --tokenizer gpt2 --bypass-cache", None),
    ("python t.py --verbose --password-file /x && echo $(pwd)", None),
    ("git checkout 3f2a9c0e1b4d5f6a7b8c9d0e1f2a3b4c5d6e7f80 && python t.py", None),
    ("python train.py --use-auth\npython eval.py", None),
    ("", None),
]


@pytest.mark.parametrize(("command", "masked"), CASES)
def test_masking(command: str, masked: str | None) -> None:
    assert mask_secrets(command) == (command if masked is None else masked)


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_masking_never_raises_and_is_idempotent(text: str) -> None:
    once = mask_secrets(text)
    assert mask_secrets(once) == once


WORDS = st.sampled_from(
    [
        "--password",
        "TOKEN=",
        "--api-key=",
        "https://u:p@h/",
        "Bearer",
        "login",
        "x",
        "'",
        '"',
        " ",
        "\n",
        "=",
        "-",
        "AKIA",
        "hf_",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(WORDS, st.text(max_size=8)), max_size=12).map("".join))
def test_masking_commands_made_of_secret_words_is_idempotent(text: str) -> None:
    once = mask_secrets(text)
    assert mask_secrets(once) == once


def test_full_keeps_none_drops_masked_masks() -> None:
    command = "TOKEN=abc python t.py"
    assert kept_command(command, "full") == command
    assert kept_command(command, "none") is None
    assert kept_command(command, "masked") == "TOKEN=*** python t.py"
    fields = {"cmd": command, "gpus": 1}
    assert kept_fields(fields, "none") == {"gpus": 1}
    assert kept_fields(fields, "masked") == {"cmd": "TOKEN=*** python t.py", "gpus": 1}
    assert fields["cmd"] == command  # the row's own is not changed
    assert Archive().commands == "masked"


SECRET = "hunter2-" + "x" * 8
SUBMIT = f'submit name=one gpus=1 hours=1 priority=normal data=ready cmd="python t.py --password {SECRET}"'
TEMPLATE = f'template save bert gpus=1 hours=2 priority=normal data=ready cmd="HF_TOKEN={SECRET} python t.py"'


@pytest.fixture
def archived(paika: Paika, tmp_path: Path) -> Iterator[tuple[Paika, Archiver, LocalStore]]:
    run(paika, "UADMIN", "admin member add <@UALICE> team=vision")
    store = LocalStore(tmp_path / "objects")
    archiver = open_archiver(paika, tmp_path, store)
    yield paika, archiver, store
    archiver.spool.close()


def _everything(store: LocalStore) -> str:
    texts = []
    for folder in ("templates/", "specs/", "snapshots/"):
        for key in store.keys(folder):
            data = store.get(key)
            texts.append((gzip.decompress(data) if key.startswith("snapshots/") else data).decode())
    return "\n".join(texts)


@pytest.mark.parametrize("kept", ["masked", "full", "none"])
def test_the_archive_keeps_commands_as_the_policy_says(
    archived: tuple[Paika, Archiver, LocalStore], kept: str
) -> None:
    paika, archiver, store = archived
    paika.policy = paika.policy.model_copy(update={"archive": Archive(commands=kept)})  # type: ignore[arg-type]
    run(paika, "UALICE", TEMPLATE)
    run(paika, "UALICE", SUBMIT)
    later(paika, 120)
    assert archive(archiver, paika) >= 3
    spec = json.loads(store.get(keys.spec(1)))
    template = json.loads(store.get(keys.template("vision", "bert")))
    [snapshot] = store.keys(keys.SNAPSHOTS)
    document = json.loads(gzip.decompress(store.get(snapshot)))
    jobs = [
        dict(zip(document["jobs"]["columns"], row, strict=True)) for row in document["jobs"]["rows"]
    ]
    if kept == "full":
        assert SECRET in spec["command"] and SECRET in template["fields"]["cmd"]
        assert SECRET in jobs[0]["command"]
        return
    assert SECRET not in _everything(store)
    if kept == "masked":
        assert spec["command"] == "python t.py --password ***"
        assert spec["spec"]["cmd"] == "python t.py --password ***"
        assert template["fields"]["cmd"] == "HF_TOKEN=*** python t.py"
        assert jobs[0]["command"] == "python t.py --password ***"
    else:
        assert spec["command"] is None and "cmd" not in spec["spec"]
        assert "cmd" not in template["fields"] and jobs[0]["command"] == ""
    # The database keeps the command as submitted: the job runs it.
    assert SECRET in paika.run("status 1", "UALICE").text
