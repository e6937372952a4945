"""What `paika up` logs at its default level (INFO): what changed — jobs started, ended,
requeued or refused, hosts going silent and answering again, config versions, doctor's
findings, errors — and nothing that comes with every cycle, poll or HTTP request. Those lines
(at 8 hosts and a 10 s cycle, 86,000 a day) are still there at PAIKA_LOG_LEVEL=DEBUG.
"""

from __future__ import annotations

import logging

# Libraries' loggers that write a line at INFO for every cycle or request; below DEBUG they
# keep their warnings and errors only.
CHATTER = (
    # "Running job ..." and "... executed successfully" for each cycle and each courier run;
    # "Added job", "Scheduler started" when paika up starts.
    "apscheduler",
    # "HTTP Request: GET .../v1/status" for each host at each poll, and each start or stop.
    "httpx",
    "httpcore",
    # "setup plugin ..." when the migrations are read (doctor's schema check at start).
    "alembic.runtime.plugins",
)


def quiet_chatter() -> None:
    """Keep the CHATTER loggers to warnings unless the root logger (configured from
    PAIKA_LOG_LEVEL) is at DEBUG, where everything is written."""
    debugging = logging.getLogger().getEffectiveLevel() <= logging.DEBUG
    for name in CHATTER:
        logging.getLogger(name).setLevel(logging.NOTSET if debugging else logging.WARNING)
