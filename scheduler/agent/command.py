"""`paika agent`: run the host agent.

PAIKA_AGENT_TOKEN_FILE=/etc/paika/agent-token paika agent   # real GPUs through NVML
PAIKA_AGENT_TOKEN=… paika agent --simulate 4xA100-80GB,2xT4-16GB --port 8471
paika agent --simulate 2xT4 --insecure-no-token --allow-root-jobs   # loopback only, no auth

The token file (0600, the agent's user's) is preferred to PAIKA_AGENT_TOKEN: a variable is
easier to leak (shells' history, `ps e`, child processes). As root the agent runs each job
as the account it names, never as root unless --allow-root-jobs.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import Annotated

import typer
import uvicorn

from scheduler.agent.app import build_app
from scheduler.agent.errors import AgentError
from scheduler.agent.gpus import GpuReader
from scheduler.agent.jobs import TOKEN_ENV, JobStore
from scheduler.agent.observe import LogSettingError, configure_logging
from scheduler.agent.protocol import DEFAULT_PORT, LOOPBACK
from scheduler.agent.simulated import EXAMPLE_SPEC, SimulatedReader

log = logging.getLogger(__name__)
FORMAT_ENV = "PAIKA_LOG_FORMAT"  # text (default) or json: one JSON object a line
LEVEL_ENV = "PAIKA_LOG_LEVEL"  # DEBUG, INFO (default), WARNING, ERROR

TOKEN_FILE_ENV = "PAIKA_AGENT_TOKEN_FILE"
AGENT_UMASK = 0o077  # what the agent writes is its own: state, logs, records


def read_token() -> str | None:
    """The agent token: from the file PAIKA_AGENT_TOKEN_FILE names (preferred), else from
    PAIKA_AGENT_TOKEN; None when neither is set. AgentError for a file others could read."""
    named = os.environ.get(TOKEN_FILE_ENV, "").strip()
    if not named:
        return os.environ.get(TOKEN_ENV, "").strip() or None
    path = Path(named)
    try:
        info = path.stat()
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise AgentError(None, f"{TOKEN_FILE_ENV}: cannot read {path}: {exc}") from exc
    if info.st_mode & 0o077:
        raise AgentError(
            None,
            f"{TOKEN_FILE_ENV}: {path} can be read or changed by others (mode "
            f"{info.st_mode & 0o777:o}); run: chmod 600 {path}",
        )
    if info.st_uid != os.geteuid():
        raise AgentError(
            None,
            f"{TOKEN_FILE_ENV}: {path} belongs to uid {info.st_uid}, not to the agent's user "
            f"(uid {os.geteuid()}); chown it to the agent's user",
        )
    if not token:
        raise AgentError(None, f"{TOKEN_FILE_ENV}: {path} is empty; write the agent token in it")
    return token


def warn_root_jobs(allow_root_jobs: bool) -> None:
    """Say it loudly when an agent running as root may run jobs as root."""
    if allow_root_jobs and os.geteuid() == 0:
        logging.getLogger(__name__).warning(
            "--allow-root-jobs: jobs that name no account run as root on this host; "
            "use it only on a single-user host or a test rig"
        )


def agent(
    simulate: Annotated[
        str | None,
        typer.Option(
            "--simulate",
            help=f'Simulated GPUs instead of NVML, e.g. "{EXAMPLE_SPEC}". Their load follows the jobs.',
        ),
    ] = None,
    port: Annotated[int, typer.Option("--port", help="TCP port to listen on.")] = DEFAULT_PORT,
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on (0.0.0.0: all interfaces).")
    ] = "0.0.0.0",
    state_dir: Annotated[
        Path,
        typer.Option(
            "--state-dir",
            help="Where the agent keeps its job table, job logs and exit codes; keep it across restarts.",
        ),
    ] = Path("paika-agent"),
    grace_s: Annotated[
        float,
        typer.Option(
            "--grace-s",
            min=0.0,
            help="Default seconds between SIGTERM and SIGKILL when stopping a job.",
        ),
    ] = 30.0,
    container_runtime: Annotated[
        str,
        typer.Option(
            "--container-runtime", help="Runs jobs that name an image: docker, podman, or a path."
        ),
    ] = "docker",
    insecure_no_token: Annotated[
        bool,
        typer.Option(
            "--insecure-no-token",
            help=f"Run without a token (no authentication); listens on {LOOPBACK} only. For local experiments.",
        ),
    ] = False,
    allow_root_jobs: Annotated[
        bool,
        typer.Option(
            "--allow-root-jobs",
            help="Let an agent running as root run jobs as root (jobs that name no account). "
            "Only for single-user hosts and test rigs; by default such jobs are refused.",
        ),
    ] = False,
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            help="Host name the agent reports (default: this machine's); simulated GPU UUIDs derive from it.",
        ),
    ] = None,
) -> None:
    """Run the GPU host agent: reports this host's GPUs and runs jobs for the scheduler.

    The token the scheduler uses comes from the file PAIKA_AGENT_TOKEN_FILE names (preferred;
    mode 600) or from PAIKA_AGENT_TOKEN. Run as root, the agent starts each job as its
    owner's Unix account; run as another user, it runs jobs only as that user."""
    os.umask(AGENT_UMASK)
    try:
        token = read_token()
    except AgentError as exc:
        typer.echo(f"paika agent: {exc.message}", err=True)
        raise typer.Exit(2) from exc
    if token is None and not insecure_no_token:
        typer.echo(
            f"paika agent: put the token the scheduler uses in a file (chmod 600) and set "
            f"{TOKEN_FILE_ENV} to its path, or set {TOKEN_ENV} (or pass --insecure-no-token "
            "for a local experiment).",
            err=True,
        )
        raise typer.Exit(2)
    if token is None:
        if host != LOOPBACK:
            typer.echo(
                f"paika agent: --insecure-no-token: listening on {LOOPBACK}, not {host}.", err=True
            )
        host = LOOPBACK
        typer.echo(
            "paika agent: WARNING: NO TOKEN, NO AUTHENTICATION. Anyone on this machine can start "
            "and stop jobs through this agent. Set PAIKA_AGENT_TOKEN for real use.",
            err=True,
        )
    host_name = name or socket.gethostname()
    try:
        configure_logging(
            os.environ.get(FORMAT_ENV, "text"),
            os.environ.get(LEVEL_ENV, "INFO"),
            fields={"host": host_name},
        )
    except LogSettingError as exc:
        typer.echo(f"paika agent: {exc}", err=True)
        raise typer.Exit(2) from exc
    warn_root_jobs(allow_root_jobs)
    try:
        store = JobStore(
            state_dir,
            container_runtime=container_runtime,
            default_grace_s=grace_s,
            allow_root_jobs=allow_root_jobs,
        )
    except AgentError as exc:
        typer.echo(f"paika agent: {exc.message}", err=True)
        raise typer.Exit(2) from exc
    try:
        reader: GpuReader
        if simulate is not None:
            reader = SimulatedReader(simulate, host=host_name, loads=store)
        else:
            from scheduler.agent.nvml import NvmlReader  # not loaded for simulated GPUs

            reader = NvmlReader()
        gpus = reader.read()  # fail now, not at the scheduler's first poll
        app = build_app(reader, store, token, host=host_name, simulated=simulate is not None)
    except AgentError as exc:
        store.close()
        typer.echo(f"paika agent: {exc.message}", err=True)
        raise typer.Exit(2) from exc
    kinds = ", ".join(sorted({g.name for g in gpus})) or "no GPUs"
    # Logged, not echoed: with PAIKA_LOG_FORMAT=json every line the agent writes is JSON.
    log.info(
        "paika agent on %s: %d GPU(s) (%s)%s; state in %s; listening on http://%s:%s/v1/",
        host_name,
        len(gpus),
        kinds,
        " [simulated]" if simulate is not None else "",
        store.state_dir,
        host,
        port,
    )
    try:
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_level=logging.getLevelName(logging.getLogger().level).lower(),
            # None: uvicorn's loggers go through the root's handler, in its format (JSON too).
            log_config=None,
            http="h11",
            ws="none",
            lifespan="off",
        )
    finally:
        store.close()
