"""One run of a paika job as an sbatch submission: its exact placement, limits and script.

The script goes to sbatch on stdin: the job's environment as `export` lines, then its
command, which runs through a shell on the node only (never on the scheduler's machine).
`--export=NONE`: nothing of the scheduler's own environment (its tokens) reaches the job.
A job with a container image gets the pool's container options (`SlurmPool.container`)
before paika's own, so that where sbatch takes the last of an option twice, paika's wins.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class BatchJob:
    """An sbatch submission, placed exactly: paika chose the node, GPU type and count."""

    name: str  # --job-name: how paika finds the run again (scancel --name, squeue --name)
    comment: str
    partition: str
    node: str
    gres: str  # e.g. "gpu:a100:2"
    time_minutes: int
    output: str
    uid: str  # the Unix account it runs as (sbatch takes --uid from root only)
    gid: int  # that account's own group, else the job would keep root's
    command: str
    env: Mapping[str, str] = field(default_factory=dict)
    workdir: str | None = None
    # The site's way to run the job's image (e.g. "--container-image=pytorch:2.3"); () without.
    container: tuple[str, ...] = ()

    def arguments(self) -> list[str]:
        """sbatch's argument list (no shell ever reads it)."""
        args = [
            "sbatch",
            "--parsable",
            *self.container,
            "--export=NONE",
            "--no-requeue",  # a run Slurm loses is paika's to start again, not Slurm's
            f"--partition={self.partition}",
            f"--nodelist={self.node}",
            "--nodes=1",
            f"--gres={self.gres}",
            f"--time={self.time_minutes}",
            f"--job-name={self.name}",
            f"--comment={self.comment}",
            f"--output={self.output}",
            f"--uid={self.uid}",
            f"--gid={self.gid}",
        ]
        if self.workdir:
            args.append(f"--chdir={self.workdir}")
        return args

    def script(self) -> str:
        """The batch script: the run's environment, then its command."""
        exports = [f"export {key}={shlex.quote(value)}" for key, value in sorted(self.env.items())]
        return "\n".join(["#!/bin/bash", *exports, self.command, ""])
