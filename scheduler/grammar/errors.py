"""The one error the /gpu grammar raises: what could not be understood, as a code with the
values it names, the key at fault and a correct example of the command."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

from scheduler.errors import UserError, Value

if TYPE_CHECKING:
    from scheduler.grammar.kinds import Expected


class Mistake(StrEnum):
    """What the grammar could not understand; each value is the catalogue key that says it."""

    NO_COMMAND = "grammar.no_command"
    KEY_BEFORE_COMMAND = "grammar.key_before_command"
    UNKNOWN_COMMAND = "grammar.unknown_command"
    UNKNOWN_COMMAND_MEANT = "grammar.unknown_command_meant"
    UNKNOWN_IN_GROUP = "grammar.unknown_in_group"
    UNKNOWN_IN_GROUP_MEANT = "grammar.unknown_in_group_meant"
    UNKNOWN_AFTER_COMMAND = "grammar.unknown_after_command"
    GROUP_NEEDS_A_WORD = "grammar.group_needs_a_word"
    WORDS_AFTER_COMMAND = "grammar.words_after_command"
    MISSING_KEYS = "grammar.missing_keys"
    TAKES_NO_KEYS = "grammar.takes_no_keys"
    UNKNOWN_KEY = "grammar.unknown_key"
    UNKNOWN_KEY_MEANT = "grammar.unknown_key_meant"
    GIVEN_TWICE = "grammar.given_twice"
    TAKES_NO_WORDS = "grammar.takes_no_words"
    TAKES_NO_WORDS_USE_KEYS = "grammar.takes_no_words_use_keys"
    TOO_MANY_WORDS = "grammar.too_many_words"
    TOO_MANY_WORDS_USE_KEYS = "grammar.too_many_words_use_keys"
    UNTERMINATED_QUOTE = "grammar.unterminated_quote"
    UNSTORABLE_IN_COMMAND = "grammar.unstorable_in_command"
    UNSTORABLE_IN_VALUE = "grammar.unstorable_in_value"
    EMPTY_VALUE = "grammar.empty_value"
    BAD_VALUE = "grammar.bad_value"
    VALUE_TOO_LONG = "grammar.value_too_long"
    ID_TOO_LARGE = "grammar.id_too_large"
    NAME_CHAR = "grammar.name_char"  # a name holds a character no name may (grammar.names)
    # Commands that take free keys (config set).
    NO_SETTINGS = "grammar.no_settings"
    # One key typed under two of its names (mem= and gpu_mem=).
    SAME_KEY_TWO_NAMES = "grammar.same_key_two_names"
    # What share=yes asks of the rest of a submission (scheduler.grammar.sharing).
    SHARE_ONE_CARD = "grammar.share_one_card"
    SHARE_NEEDS_MEMORY = "grammar.share_needs_memory"
    SHARE_NOT_CORE = "grammar.share_not_core"


class ParseError(UserError):
    """A /gpu command that cannot be understood: the mistake and the values it names, the key
    at fault (the submit modal shows the error under that key's field), a correct example,
    and, for a value of the wrong form, what a valid one looks like."""

    def __init__(
        self,
        mistake: Mistake,
        /,
        *,
        key: str | None = None,
        example: str | None = None,
        expected: Expected | None = None,
        **values: Value,
    ) -> None:
        self.key = key
        self.example = example
        self.expected = expected
        # The sentence names the key at fault as `name`.
        named = values if key is None else {"name": key, **values}
        super().__init__(mistake, **named)
