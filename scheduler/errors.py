"""The errors paika reports, and what the user can do about them.

    PaikaError
     ├── UserError            something the user can fix; `message` says what, `hint` how
     │    ├── ParseError      (scheduler.grammar) the command text does not parse
     │    ├── NotFound        a job, team, template, quota or host does not exist
     │    ├── PermissionDenied  the user's role does not allow the action
     │    ├── Conflict        the action clashes with the current state (duplicate name …)
     │    └── IllegalTransition  a job cannot move from its state to the one asked for
     └── ConfigError          the policy file is wrong: file, key and problem

Errors from other libraries are converted at the boundary (`raise X(...) from exc`), so
callers only ever see these types.
"""

from __future__ import annotations


class PaikaError(Exception):
    """Base of every error paika raises on purpose."""


class UserError(PaikaError):
    """An error the user can fix: `message` says what was wrong, `hint` how to fix it."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(str(self))

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n{self.hint}"


class NotFound(UserError):
    """The thing a command names does not exist (or the user may not see it)."""


class PermissionDenied(UserError):
    """The user's role does not allow this action."""


class Conflict(UserError):
    """The action clashes with what is already there."""


class IllegalTransition(UserError):
    """A job cannot move from its current state to the one asked for."""

    def __init__(self, job_id: int, current: str, wanted: str, hint: str | None = None) -> None:
        self.job_id = job_id
        self.current = current
        self.wanted = wanted
        super().__init__(f"Job #{job_id} is {current}; it cannot become {wanted}.", hint)


class ConfigError(PaikaError):
    """The policy file is invalid; names the file, the key and what is wrong."""

    def __init__(self, path: str, key: str, problem: str) -> None:
        self.path = path
        self.key = key
        self.problem = problem
        super().__init__(f"{path}: {key}: {problem}")
