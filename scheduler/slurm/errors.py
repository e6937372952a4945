"""What went wrong with a Slurm command, as a code the scheduler acts on and the admin reads.

    PaikaError
     └── SlurmError     a Slurm command failed: its `code`, the command and its stderr

The code decides what happens to the job (`scheduler/slurm/dispatcher.py`); the stderr is
kept for the admin, who knows the cluster's own words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum

from scheduler.errors import PaikaError


class SlurmProblem(StrEnum):
    """Why a Slurm command failed (the value is the code stored and told)."""

    UNREACHABLE = "slurmctld_unreachable"  # nothing was asked of the cluster
    TIMED_OUT = "timed_out"  # no answer in time: the command may have taken effect
    INVALID_PARTITION = "invalid_partition"
    INVALID_GRES = "invalid_gres"
    UNKNOWN_USER = "unknown_user"
    UNMAPPED_USER = "unmapped_user"  # paika's own refusal: no Unix account for the owner
    IMAGE = "image_unsupported"  # paika's own refusal: the pool sets no slurm.container
    BAD_IMAGE = "bad_image"  # paika's own refusal: an image reference it never passes on
    UNKNOWN_OPTION = "unknown_option"  # sbatch knows no such option (the pool's container)
    OTHER = "other"


class SlurmError(PaikaError):
    """A Slurm command failed; `stderr` holds its own words (for the admin's alert)."""

    def __init__(self, code: SlurmProblem, command: Sequence[str], stderr: str) -> None:
        self.code, self.command, self.stderr = code, tuple(command), stderr.strip()
        super().__init__(f"{code.value}: {' '.join(self.command[:1])}: {self.stderr}")


# What each Slurm client says, as seen from Slurm 22.05 (first match wins).
_SAID: tuple[tuple[re.Pattern[str], SlurmProblem], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), code)
    for pattern, code in (
        (
            r"unable to contact slurm controller|slurm_load_\w+ error|connection refused",
            SlurmProblem.UNREACHABLE,
        ),
        (r"invalid partition", SlurmProblem.INVALID_PARTITION),
        (
            r"invalid generic resource|invalid gres|requested node configuration is not available",
            SlurmProblem.INVALID_GRES,
        ),
        # Only the pool's container options can be unknown (a plugin such as pyxis missing).
        (r"unrecognized option", SlurmProblem.UNKNOWN_OPTION),
        (
            r"invalid --uid|invalid --gid|invalid user id|invalid group id",
            SlurmProblem.UNKNOWN_USER,
        ),
    )
)


def classify(stderr: str) -> SlurmProblem:
    """The code for a failed command's stderr."""
    return next((code for pattern, code in _SAID if pattern.search(stderr)), SlurmProblem.OTHER)
