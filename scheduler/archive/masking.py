"""What the archive keeps of a job's command: the policy's `archive.commands` says.

    full     the command as submitted
    masked   the command with what looks like a secret replaced by *** (the default)
    none     no command at all

The object store keeps what it is given for good (every version of every object), so a
token in a command would outlive its rotation there. Masked are the values of options and
variables whose names say they hold a secret (`--password X`, `--api-key=X`, `TOKEN=…`,
`AWS_SECRET_ACCESS_KEY=…`, `HF_TOKEN=…`), a URL's user and password (`https://user:pass@…`),
a bearer token, a long token after a word that names one (`wandb login 0123…`), and tokens
whose shape gives them away (AWS key ids, GitHub, Hugging Face, Slack, OpenAI-style keys).
The rest of the command stays as written, so the archive still says what ran.

Pure: text in, text out; no I/O. Masking never raises and is idempotent (masking a masked
command changes nothing).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

CommandsKept = Literal["masked", "full", "none"]
MASK = "***"

# A name (of an option or a variable) holds a secret when one of its words is one of these,
# or two words in a row make one of the pairs (words: split at -, _ and camelCase).
_SECRET_WORDS = frozenset(
    {"password", "passwd", "pwd", "pass", "passphrase", "secret", "token", "auth"}
    | {"apikey", "credential", "credentials", "signature"}
)
_SECRET_PAIRS = frozenset(
    {("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key")}
    | {("session", "key"), ("auth", "key"), ("client", "secret"), ("sas", "key")}
)
# … unless it names where a secret is kept, not the secret.
_WHERE_WORDS = frozenset({"file", "path", "dir", "url", "uri", "endpoint", "type", "name"})
_NAME_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
# A shell word as a value: quoted, or up to a blank or a shell operator; never an option.
_VALUE = r"""(?!-)(?:'[^']*'|"(?:[^"\\]|\\.)*"|[^\s'";&|()<>]+)"""

_URL_CREDENTIALS = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)[^\s/@'\"]+@")
_OPTION = re.compile(rf"(?<![\w-])(--?[A-Za-z][A-Za-z0-9_-]*)(=|[ \t]+)({_VALUE})")
_ASSIGNMENT = re.compile(rf"(?<![\w-])([A-Za-z_][A-Za-z0-9_]*)=({_VALUE})")
_BEARER = re.compile(r"(\bBearer[ \t]+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
_AFTER_SECRET_WORD = re.compile(
    r"(\b(?:token|password|passwd|secret|api[_-]?key|apikey|login)\b['\"]?[ \t]*[:= \t][ \t]*"
    r"['\"]?)[A-Za-z0-9+/_=.-]{20,}(?=[\s'\";&|()<>]|$)",
    re.IGNORECASE,
)
_SHAPED = re.compile(
    r"\b(?:(?:AKIA|ASIA)[A-Z0-9]{16}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"
    r"|hf_[A-Za-z0-9]{30,}|xox[abpr]-[A-Za-z0-9-]{10,}|sk-[A-Za-z0-9_-]{20,}"
    r"|glpat-[A-Za-z0-9_-]{20,})\b"
)


def secret_name(name: str) -> bool:
    """Whether an option's or a variable's name says its value is a secret."""
    words = [w.lower() for w in _NAME_WORD.findall(name)]
    if not words or words[-1] in _WHERE_WORDS:
        return False
    return any(w in _SECRET_WORDS for w in words) or any(
        pair in _SECRET_PAIRS for pair in zip(words, words[1:], strict=False)
    )


def _option(match: re.Match[str]) -> str:
    name, between = match[1], match[2]
    return f"{name}{between}{MASK}" if secret_name(name) else match[0]


def _assignment(match: re.Match[str]) -> str:
    return f"{match[1]}={MASK}" if secret_name(match[1]) else match[0]


def mask_secrets(text: str) -> str:
    """`text` with what looks like a secret replaced by *** (see the module's docstring).
    The rules run again until nothing changes (one rule's *** can complete another's
    match), so masking a masked text changes nothing; each change takes away at least one
    character that is not a *, so this ends."""
    while True:
        masked = _mask_once(text)
        if masked == text:
            return masked
        text = masked


def _mask_once(text: str) -> str:
    text = _URL_CREDENTIALS.sub(lambda m: f"{m[1]}{MASK}@", text)
    text = _OPTION.sub(_option, text)
    text = _ASSIGNMENT.sub(_assignment, text)
    text = _BEARER.sub(lambda m: f"{m[1]}{MASK}", text)
    text = _AFTER_SECRET_WORD.sub(lambda m: f"{m[1]}{MASK}", text)
    return _SHAPED.sub(MASK, text)


def kept_command(text: str | None, kept: CommandsKept) -> str | None:
    """What the archive keeps of a command: as is, masked, or nothing (None)."""
    if text is None or kept == "full":
        return text
    return None if kept == "none" else mask_secrets(text)


def kept_fields(fields: Mapping[str, Any] | None, kept: CommandsKept) -> dict[str, Any] | None:
    """A job's spec or a template's fields as the archive keeps them: its `cmd` as
    `kept_command` says (left out for none)."""
    if fields is None:
        return None
    out = dict(fields)
    if isinstance(out.get("cmd"), str):
        cmd = kept_command(out["cmd"], kept)
        if cmd is None:
            del out["cmd"]
        else:
            out["cmd"] = cmd
    return out
