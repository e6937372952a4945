"""Slurm's client commands, run as argument lists with a timeout, their output read into
models (`scheduler/slurm/models.py`) and their failures into `SlurmError` codes.

`conf` is the slurm.conf the clients read (SLURM_CONF); None: the clients' own default.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from typing import TypeVar

from pydantic import ValidationError

from scheduler.slurm.batch import BatchJob
from scheduler.slurm.errors import SlurmError, SlurmProblem, classify
from scheduler.slurm.models import (
    AccountedJob,
    AccountingReply,
    EndedRun,
    Node,
    NodeReply,
    QueuedJob,
    QueueReply,
)

R = TypeVar("R", QueueReply, NodeReply, AccountingReply)


class SlurmCommands:
    """The cluster's clients; every call either answers or raises SlurmError."""

    def __init__(self, conf: str | None = None, *, timeout: float = 30.0) -> None:
        # slurmctld's own MessageTimeout is 10 s by default: a shorter timeout here would
        # take a slow answer for none.
        self.conf, self.timeout = conf, timeout

    def submit(self, job: BatchJob) -> int:
        """Submit a batch job; its Slurm job id."""
        out = self._run(job.arguments(), stdin=job.script())
        first = out.strip().split(";")[0]  # --parsable: "<id>" or "<id>;<cluster>"
        if not first.isdigit():
            raise SlurmError(SlurmProblem.OTHER, ["sbatch"], f"unexpected answer: {out!r}")
        return int(first)

    def queue(self) -> tuple[QueuedJob, ...]:
        """Every job slurmctld knows (squeue --json ignores filters in 22.05)."""
        reply = self._json(["squeue", "--json"], QueueReply)
        return reply.jobs

    def ids_named(self, name: str) -> tuple[int, ...]:
        """The ids of the jobs named `name` slurmctld still knows, ended ones included; not
        a submission it refused after numbering it (a GRES no node has leaves a FAILED
        record with reason BadConstraints: it never ran)."""
        args = ["squeue", "--noheader", "--states=all", f"--name={name}", "--format=%i %T %r"]
        ids = []
        for line in self._run(args).splitlines():
            job_id, state, reason = (line.split() + ["", "", ""])[:3]
            if job_id.isdigit() and (state, reason) != ("FAILED", "BadConstraints"):
                ids.append(int(job_id))
        return tuple(ids)

    def nodes(self) -> tuple[Node, ...]:
        """Every node and its state."""
        return self._json(["sinfo", "--json"], NodeReply).nodes

    def signal(self, name: str, signal: str = "TERM") -> None:
        """Send `signal` to every job named `name`: the batch shell and its children too
        (--full; without it only job steps get it)."""
        self._run(["scancel", f"--signal={signal}", "--full", f"--name={name}"])

    def cancel(self, name: str, *, pending_only: bool = False) -> None:
        """Cancel every job named `name` (Slurm's own SIGTERM, KillWait, SIGKILL); with
        `pending_only`, only those still PENDING (one that started since is left alone)."""
        only = ["--state=PENDING"] if pending_only else []
        self._run(["scancel", *only, f"--name={name}"])

    def cancel_pending(self, job_id: int) -> None:
        """Cancel this job if it is still PENDING (scancel filters on its state: one that
        started in between is left alone, and so is one that already ended)."""
        self._run(["scancel", "--state=PENDING", str(job_id)])

    def accounting(self, job_ids: Sequence[int]) -> tuple[AccountedJob, ...]:
        """What slurmdbd recorded of these jobs."""
        ids = ",".join(str(i) for i in job_ids)
        return self._json(["sacct", "--json", f"--jobs={ids}"], AccountingReply).jobs

    def ended_runs(
        self, names: Sequence[str], *, since: str = "now-30days"
    ) -> tuple[EndedRun, ...]:
        """What slurmdbd recorded of the jobs with these exact names (every user's) started
        since `since`; none where the cluster keeps no accounting. Plain sacct, not its JSON:
        only the plain form has the right exit code in 22.05."""
        fields = "JobIDRaw,JobName,State,ExitCode,ElapsedRaw,NodeList,Submit,End"
        args = ["sacct", "-X", "--allusers", "--noheader", "--parsable2", f"--format={fields}"]
        args += [f"--starttime={since}", f"--name={','.join(names)}"]
        try:  # times as Unix seconds ("Unknown" while it is on)
            out = self._answer(args, env={"SLURM_TIME_FORMAT": "%s"})[0]
        except SlurmError as exc:
            if "accounting storage is disabled" in exc.stderr.lower():
                return ()
            raise
        runs = []
        for line in out.splitlines():
            parts = line.split("|")
            if len(parts) != 8 or not parts[0].isdigit() or not parts[4].isdigit():
                continue
            job_id, name, state, exit_code, elapsed, nodes, submitted, ended_at = parts
            state = state.split()[0] if state.strip() else state
            runs.append(
                EndedRun(
                    job_id=int(job_id),
                    name=name,
                    state=state,
                    exit_code=exit_code,
                    elapsed_seconds=int(elapsed),
                    nodes=nodes,
                    submitted=int(submitted) if submitted.isdigit() else None,
                    ended_at=int(ended_at) if ended_at.isdigit() else None,
                )
            )
        return tuple(runs)

    def _json(self, args: list[str], model: type[R]) -> R:
        out, stderr = self._answer(args)
        try:
            reply = model.model_validate_json(out)
        except ValidationError as exc:
            raise SlurmError(SlurmProblem.OTHER, args, f"unreadable JSON: {exc}") from exc
        # e.g. slurmctld unreachable: exit 0, no jobs, an error entry. sacct says "Nothing
        # found" as an error too: that is only an empty answer.
        errors = [e for e in reply.errors if e.get("description") != "Nothing found"]
        if errors:
            said = "; ".join(str(e.get("description") or e.get("error")) for e in errors)
            words = f"{stderr.strip()} ({said})".strip()
            code = classify(words)
            if code is SlurmProblem.OTHER:  # 22.05 says only "Unspecified error": ask why
                down = self._controller_down()
                code, words = (
                    (SlurmProblem.UNREACHABLE, f"{down}; {words}") if down else (code, words)
                )
            raise SlurmError(code, args, words)
        return reply

    def _controller_down(self) -> str | None:
        """What `scontrol ping` says when slurmctld does not answer it (None: it answers)."""
        try:
            self._answer(["scontrol", "ping"])
        except SlurmError as exc:
            return exc.stderr or "scontrol ping: slurmctld is DOWN"
        return None

    def _run(self, args: list[str], *, stdin: str | None = None) -> str:
        return self._answer(args, stdin=stdin)[0]

    def _answer(
        self, args: list[str], *, stdin: str | None = None, env: dict[str, str] | None = None
    ) -> tuple[str, str]:
        """The command's stdout and stderr, or SlurmError when it failed; `env`: more
        environment for this command."""
        env = {**os.environ, **(env or {})}
        if self.conf is not None:
            env["SLURM_CONF"] = self.conf
        try:
            done = subprocess.run(
                args,
                input=stdin,
                capture_output=True,
                text=True,
                timeout=self.timeout,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise SlurmError(
                SlurmProblem.TIMED_OUT, args, f"no answer in {self.timeout:g} s"
            ) from exc
        except OSError as exc:  # not installed here, not executable
            raise SlurmError(SlurmProblem.OTHER, args, str(exc)) from exc
        if done.returncode != 0:
            said = done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}"
            raise SlurmError(classify(said), args, said)
        return done.stdout, done.stderr
