"""The one error the /gpu grammar raises: what could not be understood, with the key at
fault and a correct example of the command."""

from __future__ import annotations

from enum import StrEnum

from scheduler.errors import UserError


class Mistake(StrEnum):
    """What the grammar could not understand; each value is the catalogue key that says it."""

    SAID = "grammar.said"  # an English sentence still written by the grammar itself


class ParseError(UserError):
    """A /gpu command that cannot be understood, with the key at fault and a correct example."""

    def __init__(self, message: str, *, key: str | None = None, example: str | None = None) -> None:
        self.key = key
        self.example = example
        self.message = message
        super().__init__(Mistake.SAID, text=message)

    @property
    def hint(self) -> str | None:
        return None if self.example is None else f"Example: {self.example}"

    def __str__(self) -> str:
        return self.message if self.example is None else f"{self.message}\n{self.hint}"
