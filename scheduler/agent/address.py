"""Where an agent listens: its default port, and the loopback address that an agent without
a token is confined to (`paika agent --insecure-no-token`)."""

from __future__ import annotations

DEFAULT_PORT = 8470
LOOPBACK = "127.0.0.1"
