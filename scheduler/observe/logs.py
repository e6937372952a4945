"""What `paika up` logs at its default level (INFO): what changed — jobs started, ended,
requeued or refused, hosts going silent and answering again, config versions, doctor's
findings, errors — and nothing that comes with every cycle, poll or HTTP request. Those lines
(at 8 hosts and a 10 s cycle, 86,000 a day) are still there at PAIKA_LOG_LEVEL=DEBUG.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

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
    fold_repeats()


# APScheduler's warnings that come with every tick while the cycle runs longer than its
# interval (a slow database, a long Slurm read, a loaded machine): "Execution of job ...
# skipped: maximum number of running instances reached" and "Run time of job ... was missed
# by ...". Each is said once a FOLD_EVERY_S, the next one saying how many were held back.
FOLDED = ("apscheduler.scheduler", "apscheduler.executors.default")
FOLD_EVERY_S = 60.0


class Fold(logging.Filter):
    """Lets one record of each message through every `every_s` seconds; the first one after
    says how many like it were held back meanwhile. Warnings and errors alike: a condition
    that lasts is said once a minute, not once a tick."""

    def __init__(self, every_s: float = FOLD_EVERY_S, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.every_s, self.clock = every_s, clock
        self._seen: dict[tuple[str, int], tuple[float, int]] = {}  # (message, level) → said, held
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        key = (str(record.msg), record.levelno)
        now = self.clock()
        with self._lock:
            said, held = self._seen.get(key, (None, 0))
            if said is not None and now - said < self.every_s:
                self._seen[key] = (said, held + 1)
                return False
            self._seen[key] = (now, 0)
        if held and isinstance(record.args, tuple):
            record.msg = f"{record.msg} (and %d more like it in the last %d s)"
            record.args = (*record.args, held, round(now - (said or now)))
        return True


def fold_repeats() -> None:
    """Fold APScheduler's per-tick warnings (FOLDED) unless the root logger is at DEBUG."""
    if logging.getLogger().getEffectiveLevel() <= logging.DEBUG:
        return
    for name in FOLDED:
        logger = logging.getLogger(name)
        if not any(isinstance(f, Fold) for f in logger.filters):
            logger.addFilter(Fold())
