"""What a trace does not say, drawn deterministically from a seed.

Every attribute has its own random stream, `random.Random(f"{seed}/{name}")`, and every
stream draws for every job in submit order, whether the draw is used or not. So adding an
attribute, or a trace that gives one attribute itself, never changes the other draws, and the
first N jobs (`--limit N`) get the same draws as in the full run.

- priority class: a job whose trace gives `core` or `idle` keeps it (openb's BE pods are idle);
  a trace-given `normal` from a CSV is kept too. Every other job becomes `core` with
  probability `core_share` (default 0.1) and `normal` otherwise.
- data readiness: with probability `not_ready_share` (default 0.3) a job's data is not ready at
  submit; it becomes ready after a delay drawn from an exponential distribution with mean
  `ready_delay_mean_s` (30 min), capped at `ready_delay_cap_s` (6 h).
- estimate: est GPU-hours = true GPU-hours × exp(N(0, σ)), σ = `estimate_noise` (default 0.5).
  The factor is clipped to [1/10, 10] and the estimate to at least one minute on the job's GPUs.
  A trace-given estimate (CSV `est_hours`) is used as it is.
- team: in per-queue runs (Philly per VC) the team is the queue; in pooled runs every job
  gets one of `teams` (8) teams, `team-1` … `team-8`, uniformly.
- preemptible: with probability `preemptible_share` (default 0) a normal- or idle-class job
  declares that it checkpoints and resumes: it writes a checkpoint every `checkpoint_s`
  (30 min) of its work, takes `restart_s` (5 min) to resume after a stop, and exits within
  `preempt_grace_s` (1 min) of SIGTERM. A stopped job loses the work since its last checkpoint
  and pays the restart again; both are charged (see engine.py).
- user: a trace-given user is kept; otherwise one of `users_per_queue` (50) users of the
  job's queue, e.g. `6214e9-u07` (Philly has no users at all).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.simulate.traces import TraceJob

HOUR = 3600.0
ESTIMATE_FACTOR_RANGE = (0.1, 10.0)
MIN_ESTIMATE_S = 60.0


@dataclass(frozen=True, slots=True)
class DrawConfig:
    """The knobs of the draws."""

    seed: int = 1
    core_share: float = 0.1
    not_ready_share: float = 0.3
    estimate_noise: float = 0.5
    ready_delay_mean_s: float = 1800.0
    ready_delay_cap_s: float = 6 * HOUR
    teams: int = 8
    users_per_queue: int = 50
    preemptible_share: float = 0.0
    checkpoint_s: float = 1800.0
    restart_s: float = 300.0
    preempt_grace_s: float = 60.0

    def __post_init__(self) -> None:
        for name in ("checkpoint_s", "restart_s", "preempt_grace_s"):
            if getattr(self, name) < 0 or (name == "checkpoint_s" and self.checkpoint_s <= 0):
                raise ValueError(f"{name} must be positive, not {getattr(self, name)}")
        for name in ("core_share", "not_ready_share", "preemptible_share"):
            share = getattr(self, name)
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, not {share}")
        if self.estimate_noise < 0:
            raise ValueError(f"estimate_noise must be >= 0, not {self.estimate_noise}")


@dataclass(frozen=True, slots=True)
class Drawn:
    """The drawn (or trace-given) attributes of one job."""

    priority: str
    ready_delay: float  # seconds after submit until its data is ready (0: ready at submit)
    est_gpu_hours: float
    team: str
    user: str
    preemptible: bool = False


def _stream(seed: int, name: str) -> random.Random:
    return random.Random(f"{seed}/{name}")


def draw(jobs: Sequence[TraceJob], config: DrawConfig, *, pooled: bool) -> list[Drawn]:
    """One `Drawn` per job, in the order of `jobs`."""
    priority_rng = _stream(config.seed, "priority")
    ready_rng = _stream(config.seed, "ready")
    estimate_rng = _stream(config.seed, "estimate")
    team_rng = _stream(config.seed, "team")
    user_rng = _stream(config.seed, "user")
    preemptible_rng = _stream(config.seed, "preemptible")
    low, high = ESTIMATE_FACTOR_RANGE
    result: list[Drawn] = []
    for job in jobs:
        core = priority_rng.random() < config.core_share
        priority = job.priority or ("core" if core else "normal")

        not_ready = ready_rng.random() < config.not_ready_share
        delay = min(
            ready_rng.expovariate(1.0 / config.ready_delay_mean_s), config.ready_delay_cap_s
        )

        factor = min(max(math.exp(estimate_rng.gauss(0.0, config.estimate_noise)), low), high)
        true_gpu_hours = job.duration * job.gpus / HOUR
        floor = MIN_ESTIMATE_S * job.gpus / HOUR
        estimate = job.est_hours if job.est_hours else max(true_gpu_hours * factor, floor)

        team_number = team_rng.randrange(config.teams) + 1
        user_number = user_rng.randrange(config.users_per_queue) + 1
        declares = preemptible_rng.random() < config.preemptible_share
        result.append(
            Drawn(
                priority=priority,
                ready_delay=delay if not_ready else 0.0,
                est_gpu_hours=estimate,
                team=f"team-{team_number}" if pooled else job.queue,
                user=job.user or f"{job.queue}-u{user_number:02d}",
                preemptible=declares and priority != "core",
            )
        )
    return result
