"""The scheduling policy: pure functions of a snapshot and `now`.

Nothing here does I/O, reads the clock, or knows Slack or SQL; a test enforces it.
"""
