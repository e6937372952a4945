"""`paika agent`: run the host agent.

PAIKA_AGENT_TOKEN=… paika agent                       # real GPUs through NVML
PAIKA_AGENT_TOKEN=… paika agent --simulate 4xA100-80GB,2xT4-16GB --port 8471
paika agent --simulate 2xT4 --insecure-no-token       # loopback only, no auth
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import Annotated

import typer
import uvicorn

from scheduler.agent.address import DEFAULT_PORT, LOOPBACK
from scheduler.agent.app import build_app
from scheduler.agent.errors import AgentError
from scheduler.agent.gpus import GpuReader
from scheduler.agent.jobs import TOKEN_ENV, JobStore
from scheduler.agent.nvml import NvmlReader
from scheduler.agent.observe import LogSettingError, configure_logging
from scheduler.agent.simulated import EXAMPLE_SPEC, SimulatedReader

log = logging.getLogger(__name__)
FORMAT_ENV = "PAIKA_LOG_FORMAT"  # text (default) or json: one JSON object a line
LEVEL_ENV = "PAIKA_LOG_LEVEL"  # DEBUG, INFO (default), WARNING, ERROR


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
            help=f"Run without {TOKEN_ENV} (no authentication); listens on {LOOPBACK} only. For local experiments.",
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
    """Run the GPU host agent: reports this host's GPUs and runs jobs for the scheduler."""
    token = os.environ.get(TOKEN_ENV, "").strip() or None
    if token is None and not insecure_no_token:
        typer.echo(
            f"paika agent: set {TOKEN_ENV} to the token the scheduler uses (or pass "
            "--insecure-no-token for a local experiment).",
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
    try:
        store = JobStore(state_dir, container_runtime=container_runtime, default_grace_s=grace_s)
    except AgentError as exc:
        typer.echo(f"paika agent: {exc.message}", err=True)
        raise typer.Exit(2) from exc
    try:
        reader: GpuReader
        if simulate is not None:
            reader = SimulatedReader(simulate, host=host_name, loads=store)
        else:
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
