"""What `share=yes` asks of the rest of a submission (issue 31): one card, the GPU memory
the job uses (mem=, which the policy fits beside the card's other work), and a class that
shares (a core job keeps whole cards).

The parser checks what was typed; the submit command checks again once a template or an
earlier job (again=) has filled in the keys not typed, since either may bring the clash.
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.grammar.errors import Mistake, ParseError
from scheduler.policy.priority_classes import PriorityClass

# The keys a shared job gives, as each refusal's example.
SHARE_EXAMPLE = "gpus=1 mem=20 share=yes"


def shares(values: Mapping[str, object]) -> bool:
    """Whether the submission asks for a shared card."""
    return values.get("share") == "yes"


def check_share(values: Mapping[str, object], *, complete: bool) -> None:
    """Raise the ParseError that says what to change when `share=yes` cannot hold with the
    other values; `complete`: every key is known now, so a missing mem= is missing (a
    template may still bring it otherwise)."""
    if not shares(values):
        return
    gpus = values.get("gpus", 1)
    if isinstance(gpus, int) and gpus > 1:
        raise ParseError(Mistake.SHARE_ONE_CARD, key="gpus", example=SHARE_EXAMPLE, gpus=gpus)
    if values.get("priority") == PriorityClass.CORE:
        raise ParseError(Mistake.SHARE_NOT_CORE, key="priority", example=SHARE_EXAMPLE)
    if complete and values.get("mem") is None:
        raise ParseError(Mistake.SHARE_NEEDS_MEMORY, key="mem", example=SHARE_EXAMPLE)
