"""What a failed start tells the cycle: whether the run surely did not start."""

from __future__ import annotations

from scheduler.agent.errors import AgentError, AnswerLost
from scheduler.dispatch import StartOrder, _start_error

ORDER = StartOrder(job_id=7, attempt=1, host="gpu-a", url="http://gpu-a:8470",
                   gpu_indices=(0,), command="python t.py")  # fmt: skip


def test_a_start_refused_for_a_low_disk_surely_did_not_start() -> None:
    """507 is the agent's "my disk is nearly full, nothing launched": the job goes back in
    line at once, not resent to that host as a start that may have happened."""
    error = _start_error(ORDER, AgentError(507, "this host's disk is nearly full"))
    assert error.known and error.reached and not error.bad_order and error.refusal is None


def test_a_server_error_or_a_lost_answer_may_have_started_it() -> None:
    assert not _start_error(ORDER, AgentError(500, "cannot start the job")).known
    assert not _start_error(ORDER, AnswerLost("http://gpu-a:8470", "read timeout")).known
