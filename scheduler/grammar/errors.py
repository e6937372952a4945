"""The one error the /gpu grammar raises: a message written for the person who typed."""

from __future__ import annotations

from scheduler.errors import UserError


class ParseError(UserError):
    """A /gpu command that cannot be understood, with the key at fault and a correct example.

    The example becomes the UserError hint, so str() is the message, then "Example: …".
    """

    def __init__(self, message: str, *, key: str | None = None, example: str | None = None) -> None:
        self.key = key
        self.example = example
        super().__init__(message, None if example is None else f"Example: {example}")
