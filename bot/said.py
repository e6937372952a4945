"""The sentences the scheduler hands over as codes and values (templates, admin changes,
the language chosen, what went wrong), said from the catalogue in a reader's language.

The console and Block Kit both say them through here, so the two renderings cannot drift
apart in their words; only their shape differs.
"""

from __future__ import annotations

from collections.abc import Mapping

from bot.i18n import LANGUAGES, has, language, t, term
from bot.usage import expected_words
from scheduler.door import LanguageChoice
from scheduler.errors import IllegalTransition, UserError
from scheduler.errors import Value as ProblemValue
from scheduler.grammar.errors import ParseError
from scheduler.results import Listing, Said, Value

# Stored values that have a name of their own in each language: the value's name in a
# sentence, and the catalogue group its names are in.
TERMS = {"role": "role", "state": "host.health"}
# The same for what a problem names (a job's states, a class, what the user tried to do).
PROBLEM_TERMS = {
    "current": "state",
    "wanted": "state",
    "priority": "priority",
    "action": "action",
    "char": "grammar.char",  # which character the grammar could not store
}
# Lists of rows a problem names, each row said by its own key.
PROBLEM_ROWS = {"sizes": "problem.gpu_size"}
LIST_SEPARATOR = {"en": ", ", "zh": "、"}
# Lists a problem names as "a, b and c": everything the person still has to give.
AND_LISTS = frozenset({"missing"})


def say(lang: str, said: Said) -> str:
    """One sentence in `lang`, its values filled in."""
    values = {name: _value(lang, name, value) for name, value in said.values.items()}
    return t(lang, said.code.value, **values)


def listed(lang: str, listing: Listing) -> list[str]:
    """A listing's rows, one sentence each, or what it says when there are none."""
    return [say(lang, row) for row in listing.rows] or [t(lang, listing.empty.value)]


def problem(lang: str, error: UserError) -> str:
    """What went wrong and how to fix it, in `lang` (a parse error's example on its own line)."""
    lines = [problem_sentence(lang, error)]
    if isinstance(error, ParseError) and error.example:
        lines.append(t(lang, "error.example", example=error.example))
    return "\n".join(lines)


def problem_sentence(lang: str, error: UserError) -> str:
    """What went wrong and how to fix it, without a parse error's example (Block Kit and the
    submit modal show the example apart)."""
    values = {name: _problem_value(lang, name, value) for name, value in error.values.items()}
    if isinstance(error, ParseError) and error.expected is not None:
        values["expected"] = expected_words(lang, error.expected)
    lines = [t(lang, error.problem.value, **values)]
    if isinstance(error, IllegalTransition) and has(f"{error.problem.value}.{error.current}"):
        lines.append(t(lang, f"{error.problem.value}.{error.current}"))
    return "\n".join(lines)


def _problem_value(lang: str, name: str, value: ProblemValue) -> object:
    if isinstance(value, tuple):
        row_key = PROBLEM_ROWS.get(name)
        items = [
            t(lang, row_key, **row) if row_key and isinstance(row, Mapping) else str(row)
            for row in value
        ]
        if name in AND_LISTS and len(items) > 1:
            return t(
                lang,
                "grammar.and",
                items=LIST_SEPARATOR[language(lang)].join(items[:-1]),
                last=items[-1],
            )
        return LIST_SEPARATOR[language(lang)].join(items) or t(lang, "list.none")
    group = PROBLEM_TERMS.get(name)
    return term(lang, group, str(value)) if group else value


def language_saved(choice: LanguageChoice) -> str:
    """The confirmation of a reply language, in every language paika speaks."""
    return "\n".join(t(lang, f"lang.saved.{choice.language}") for lang in LANGUAGES)


def _value(lang: str, name: str, value: Value) -> object:
    if isinstance(value, Mapping):
        return template_fields(lang, value)
    group = TERMS.get(name)
    return term(lang, group, str(value)) if group else value


def template_fields(lang: str, fields: Mapping[str, object]) -> str:
    """A template's fields (or a job's spec) as they are typed after `/gpu submit` (quoted
    when spaced; a list of GPU types comma-joined)."""
    return " ".join(
        f'{key}="{text}"' if " " in text else f"{key}={text}"
        for key, value in fields.items()
        for text in [",".join(map(str, value)) if isinstance(value, list) else str(value)]
    ) or t(lang, "template.no_fields")
