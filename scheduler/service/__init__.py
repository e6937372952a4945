"""The operations behind the `/gpu` grammar, shared by Slack and the CLI.

Each operation takes a `Context` (session, clock, policy, acting user), checks the actor's
role, changes the tables, writes an audit event, and returns what the user should see.
"""

from scheduler.service.context import Actor, Context

__all__ = ["Actor", "Context"]
