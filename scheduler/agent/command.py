"""`paika agent`: run the host agent; `paika agent init`: a small private CA for the agents.

PAIKA_AGENT_TOKEN_FILE=/etc/paika/agent.token paika agent \
    --tls-cert /etc/paika/tls/gpu-01.pem --tls-key /etc/paika/tls/gpu-01-key.pem   # NVML, TLS
PAIKA_AGENT_TOKEN=… paika agent --simulate 4xA100-80GB,2xT4-16GB --port 8471     # loopback
PAIKA_AGENT_TOKEN=… paika agent --host 0.0.0.0 --insecure                         # plain HTTP
paika agent --simulate 2xT4 --insecure-no-token --allow-root-jobs   # loopback only, no auth
PAIKA_AGENT_TOKEN_FILE=… paika agent --report-only --tls-cert … --tls-key …  # a Slurm node

Without TLS the agent listens on loopback only, unless --insecure says plain HTTP on the
network is meant: a token sent in clear over a LAN can be read by anyone on it.

Idle or slow clients cannot take the agent off the air (scheduler/agent/bounded.py): a client
has --head-timeout-s for its request line and headers (and TLS handshake) and --body-timeout-s
for its body, and at most --max-connections are open; at the cap the longest-idle connection
makes room. The soft limit on open files is raised to the hard one at start.

SIGTERM (systemd's stop) stops serving, then releases the state dir and the agent's cgroup
as a clean exit does (jobs keep running), and exits 0.

The token file (0600, the agent's user's) is preferred to PAIKA_AGENT_TOKEN: a variable is
easier to leak (shells' history, `ps e`, child processes). As root the agent runs each job
as the account it names, never as root unless --allow-root-jobs.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import signal
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer
import uvicorn

from scheduler.agent.app import TokenFile, TokenSource, TokenUnavailable, build_app
from scheduler.agent.bounded import (
    BACKLOG,
    BODY_TIMEOUT_S,
    HEAD_TIMEOUT_S,
    Bounds,
    Guard,
    file_limit,
    protocol_for,
    tls_context,
)
from scheduler.agent.errors import AgentError
from scheduler.agent.gpus import GpuReader
from scheduler.agent.isolation import RunAs
from scheduler.agent.jobs import (
    DISK_RESERVE_BYTES,
    KEEP_ENDED_S,
    LOG_MAX_BYTES,
    LOGS_MAX_AGE_S,
    LOGS_MAX_TOTAL_BYTES,
    MIB,
    RESERVE_FILE_MAX,
    TOKEN_ENV,
    JobStore,
)
from scheduler.agent.observe import LogSettingError, configure_logging
from scheduler.agent.protocol import DEFAULT_PORT, LOOPBACK
from scheduler.agent.simulated import EXAMPLE_MIG, EXAMPLE_SPEC, SimulatedReader

log = logging.getLogger(__name__)
TOKEN_FILE_ENV = "PAIKA_AGENT_TOKEN_FILE"
ALL_INTERFACES = "0.0.0.0"
AGENT_UMASK = 0o077  # what the agent writes is its own: state, logs, records
FORMAT_ENV = "PAIKA_LOG_FORMAT"  # text (default) or json: one JSON object a line
LEVEL_ENV = "PAIKA_LOG_LEVEL"  # DEBUG, INFO (default), WARNING, ERROR

agent_app = typer.Typer(
    help="The GPU host agent, and its TLS set-up.", add_completion=False, no_args_is_help=False
)


def agent_token() -> TokenSource | str | None:
    """This host's token: the file named by PAIKA_AGENT_TOKEN_FILE (read again when it
    changes, so a rotation needs no restart), else PAIKA_AGENT_TOKEN, else None."""
    path = os.environ.get(TOKEN_FILE_ENV, "").strip()
    if path:
        return TokenFile(Path(path))
    return os.environ.get(TOKEN_ENV, "").strip() or None


def is_loopback(address: str) -> bool:
    """Whether listening on `address` keeps the agent to this machine."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface


def warn_root_jobs(allow_root_jobs: bool) -> None:
    """Say it loudly when an agent running as root may run jobs as root."""
    if allow_root_jobs and os.geteuid() == 0:
        log.warning(
            "--allow-root-jobs: jobs that name no account run as root on this host; "
            "use it only on a single-user host or a test rig"
        )


def _fail(message: str) -> typer.Exit:
    typer.echo(f"paika agent: {message}", err=True)
    return typer.Exit(2)


def _check_tls(cert: Path | None, key: Path | None) -> bool:
    """Whether TLS is on; a half-given pair or files that do not load stop the agent here."""
    if cert is None and key is None:
        return False
    if cert is None or key is None:
        raise _fail("give both --tls-cert and --tls-key (make them with: paika agent init)")
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise _fail(f"cannot load the TLS certificate {cert} with key {key}: {exc}") from exc
    if key.stat().st_mode & 0o077:
        raise _fail(f"the TLS key {key} can be read by others; run: chmod 600 {key}")
    return True


@agent_app.callback(invoke_without_command=True)
def agent(
    ctx: typer.Context,
    simulate: Annotated[
        str | None,
        typer.Option(
            "--simulate",
            help=(
                f'Simulated GPUs instead of NVML, e.g. "{EXAMPLE_SPEC}"; a card split by MIG: '
                f'"{EXAMPLE_MIG}". Their load follows the jobs.'
            ),
        ),
    ] = None,
    port: Annotated[int, typer.Option("--port", help="TCP port to listen on.")] = DEFAULT_PORT,
    host: Annotated[
        str | None,
        typer.Option(
            "--host",
            help="Address to listen on. Default: all interfaces (0.0.0.0) with TLS, "
            f"{LOOPBACK} without.",
        ),
    ] = None,
    tls_cert: Annotated[
        Path | None,
        typer.Option("--tls-cert", help="Serve TLS with this certificate (PEM; paika agent init)."),
    ] = None,
    tls_key: Annotated[
        Path | None, typer.Option("--tls-key", help="The private key of --tls-cert (PEM, 0600).")
    ] = None,
    insecure: Annotated[
        bool,
        typer.Option(
            "--insecure",
            help="Allow plain HTTP on a non-loopback address: the token and jobs travel in clear.",
        ),
    ] = False,
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
    allow_root_jobs: Annotated[
        bool,
        typer.Option(
            "--allow-root-jobs",
            help="Let an agent running as root run jobs as root (jobs that name no account). "
            "Only for single-user hosts and test rigs; by default such jobs are refused.",
        ),
    ] = False,
    report_only: Annotated[
        bool,
        typer.Option(
            "--report-only",
            help="Only report this host's GPUs (utilization, memory, processes); refuse every "
            "job start. For the nodes of a Slurm pool with utilization: agents.",
        ),
    ] = False,
    head_timeout_s: Annotated[
        float,
        typer.Option(
            "--head-timeout-s",
            min=0.1,
            help="Seconds a client has to send its request line and headers (and finish its "
            "TLS handshake) before it gets 408 and is closed.",
        ),
    ] = HEAD_TIMEOUT_S,
    body_timeout_s: Annotated[
        float,
        typer.Option(
            "--body-timeout-s",
            min=0.1,
            help="Seconds a client has to send a request's body once its headers are in.",
        ),
    ] = BODY_TIMEOUT_S,
    max_connections: Annotated[
        int | None,
        typer.Option(
            "--max-connections",
            min=1,
            help="Open connections at most (default: 1000, or less to stay 256 under the "
            "limit on open files). At the cap the longest-idle one is closed to make room; "
            "with every one busy, a new one gets 503.",
        ),
    ] = None,
    allow_system_accounts: Annotated[
        bool,
        typer.Option(
            "--allow-system-accounts",
            help="Let an agent running as root run jobs as system accounts (uid under 1000, "
            "or nobody); by default such jobs are refused.",
        ),
    ] = False,
    allow_group: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-group",
            help="Run jobs of accounts in this privileged group all the same (docker, wheel, "
            "sudo, adm, root, lxd, libvirt, disk are refused by default); repeat for more.",
        ),
    ] = None,
    container_cap_add: Annotated[
        list[str] | None,
        typer.Option(
            "--container-cap-add",
            help="A Linux capability container jobs keep (they drop all and take no new "
            "privileges), e.g. IPC_LOCK; repeat for more.",
        ),
    ] = None,
    log_max_mib: Annotated[
        float,
        typer.Option(
            "--log-max-mib",
            min=0.01,
            help="A job's log keeps at most this many MiB: its end, the older output dropped.",
        ),
    ] = LOG_MAX_BYTES / MIB,
    disk_reserve_mib: Annotated[
        float,
        typer.Option(
            "--disk-reserve-mib",
            min=0.0,
            help="Free MiB of the state dir's disk that job logs never take (the agent's own "
            "records need it). Under twice this the host takes no new job and reports its "
            "disk low.",
        ),
    ] = DISK_RESERVE_BYTES / MIB,
    keep_ended_s: Annotated[
        float,
        typer.Option(
            "--keep-ended-s",
            min=0.0,
            help="Seconds an ended run is kept after the scheduler has recorded its end.",
        ),
    ] = KEEP_ENDED_S,
    logs_max_age_days: Annotated[
        float,
        typer.Option(
            "--logs-max-age-days",
            min=0.0,
            help="Logs of runs the agent has forgotten are removed after this many days.",
        ),
    ] = LOGS_MAX_AGE_S / 86400,
    logs_max_total_mib: Annotated[
        float,
        typer.Option(
            "--logs-max-total-mib",
            min=0.0,
            help="Logs of runs the agent has forgotten take at most this many MiB together "
            "(the oldest go first).",
        ),
    ] = LOGS_MAX_TOTAL_BYTES / MIB,
) -> None:
    """Run the GPU host agent: reports this host's GPUs and runs jobs for the scheduler.

    The token the scheduler uses comes from the file PAIKA_AGENT_TOKEN_FILE names (preferred;
    mode 600) or from PAIKA_AGENT_TOKEN. Run as root, the agent starts each job as its
    owner's Unix account; run as another user, it runs jobs only as that user."""
    if ctx.invoked_subcommand is not None:
        return
    os.umask(AGENT_UMASK)
    token = agent_token()
    if token is None and not insecure_no_token:
        raise _fail(
            f"set {TOKEN_FILE_ENV} (or {TOKEN_ENV}) to this host's token from "
            "'/gpu admin host add' (or pass --insecure-no-token for a local experiment)."
        )
    if isinstance(token, TokenFile):
        try:
            token.check()
        except TokenUnavailable as exc:
            raise _fail(f"{TOKEN_FILE_ENV}: {exc.reason}") from exc
    tls = _check_tls(tls_cert, tls_key)
    host = host or (ALL_INTERFACES if tls else LOOPBACK)
    if token is not None and not tls and not insecure and not is_loopback(host):
        raise _fail(
            f"refusing to listen on {host} without TLS: the token would cross the network in "
            "clear. Give --tls-cert and --tls-key (make them with: paika agent init), listen on "
            f"{LOOPBACK}, or pass --insecure to accept plain HTTP."
        )
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
        raise _fail(str(exc)) from exc
    warn_root_jobs(allow_root_jobs)
    try:
        run_as = RunAs.for_this_process(
            allow_root_jobs=allow_root_jobs,
            allow_system_accounts=allow_system_accounts,
            allowed_groups=tuple(allow_group or ()),
            container_caps=tuple(container_cap_add or ()),
        )
    except ValueError as exc:
        raise _fail(f"--container-cap-add: {exc}") from exc
    try:
        store = JobStore(
            state_dir,
            container_runtime=container_runtime,
            default_grace_s=grace_s,
            allow_root_jobs=allow_root_jobs,
            run_as=run_as,
            log_max_bytes=int(log_max_mib * MIB),
            disk_reserve_bytes=int(disk_reserve_mib * MIB),
            reserve_file_bytes=RESERVE_FILE_MAX,
            keep_ended_s=keep_ended_s,
            logs_max_age_s=logs_max_age_days * 86400,
            logs_max_total_bytes=int(logs_max_total_mib * MIB),
            simulated_gpus=simulate is not None,
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
        app = build_app(
            reader,
            store,
            token,
            host=host_name,
            simulated=simulate is not None,
            tls=tls,
            report_only=report_only,
        )
    except AgentError as exc:
        store.close()
        typer.echo(f"paika agent: {exc.message}", err=True)
        raise typer.Exit(2) from exc
    kinds = ", ".join(sorted({g.name for g in gpus})) or "no GPUs"
    # Logged, not echoed: with PAIKA_LOG_FORMAT=json every line the agent writes is JSON.
    log.info(
        "paika agent on %s: %d GPU(s) (%s)%s%s; state in %s; listening on %s://%s:%s/v1/",
        host_name,
        len(gpus),
        kinds,
        " [simulated]" if simulate is not None else "",
        " [report-only: starts no job]" if report_only else "",
        store.state_dir,
        "https" if tls else "http",
        host,
        port,
    )
    if not tls and not is_loopback(host):
        log.warning("--insecure: plain HTTP on the network")
    bounds = Bounds.for_this_process(head_timeout_s, body_timeout_s, max_connections)
    log.info(
        "connections: at most %d open (open files: %d), %g s for a request head, %g s for a body",
        bounds.max_connections,
        file_limit(),
        bounds.head_timeout_s,
        bounds.body_timeout_s,
    )
    guard = Guard(bounds, tls_context(str(tls_cert), str(tls_key)) if tls else None)
    with stopped_by_sigterm() as stopped:
        try:
            uvicorn.run(
                app,
                host=host,
                port=port,
                log_level=logging.getLevelName(logging.getLogger().level).lower(),
                # None: uvicorn's loggers go through the root's handler, in its format (JSON too).
                log_config=None,
                # uvicorn's h11 protocol with time limits and a cap; it also does the TLS, so
                # that handshakes are timed and capped like requests (bounded.py).
                http=protocol_for(guard),
                backlog=BACKLOG,
                ws="none",
                lifespan="off",
            )
        finally:
            store.close()
    if stopped:
        log.info("paika agent stopped (SIGTERM): state dir released; running jobs go on")


class Terminated(Exception):
    """SIGTERM arrived: stop serving and clean up as at any exit."""


@contextmanager
def stopped_by_sigterm() -> Iterator[list[int]]:
    """SIGTERM ends the block with a clean exit (the list it yields then holds the signal),
    where Python's default would end the process before any cleanup.

    uvicorn catches SIGTERM while it serves, shuts down, puts back the handler it found
    and raises the signal again: the handler set here turns that into `Terminated`, which
    unwinds through the `finally:` blocks. A second SIGTERM during the cleanup is ignored."""
    got: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield got  # signals reach the main thread only: nothing to set (tests)
        return

    def terminated(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield got
    except Terminated:
        got.append(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous)


@agent_app.command("init")
def init(
    hosts: Annotated[
        list[str],
        typer.Option(
            "--host",
            help="A host to make a certificate for: the name in its agent URL (repeat for more; "
            "an IP address works too).",
        ),
    ],
    directory: Annotated[
        Path, typer.Option("--dir", help="Where the CA and the host files are written.")
    ] = Path("paika-tls"),
    days: Annotated[
        int, typer.Option("--days", min=1, max=3650, help="How long host certificates last.")
    ] = 825,
) -> None:
    """Make a small private CA (once) and a certificate and key for each --host."""
    from scheduler.agent.tls import TlsSetupError, make_host, make_or_load_ca

    try:
        ca = make_or_load_ca(directory)
        made = [make_host(ca, directory, name, days=days) for name in hosts]
    except TlsSetupError as exc:
        raise _fail(str(exc)) from exc
    typer.echo(f"CA certificate: {ca.cert_path} (give it to the scheduler as PAIKA_AGENT_CA_FILE)")
    typer.echo(f"CA key: {ca.key_path} (keep it here, 0600; it signs new host certificates)")
    for files in made:
        typer.echo(
            f"{files.name}: copy its certificate and key to that host and install them where "
            "paika-agent.service (paika deploy units) reads them:"
        )
        for line in install_commands(files.name, files.cert_path, files.key_path):
            typer.echo(f"  {line}")
        typer.echo(f"  then register it as url=https://{files.name}:{DEFAULT_PORT}")


# Where paika-agent.service (scheduler/deploy) reads the host's certificate and key: the same
# names on every host, so one unit file serves them all.
INSTALLED_CERT = "/etc/paika/tls/agent.pem"
INSTALLED_KEY = "/etc/paika/tls/agent-key.pem"


def install_commands(host: str, cert: Path, key: Path) -> list[str]:
    """The commands that put `host`'s certificate and key where the shipped agent unit reads
    them (--tls-cert INSTALLED_CERT --tls-key INSTALLED_KEY): copied over, then installed
    under their fixed names, the key readable by root only."""
    return [
        f"scp {cert} {key} {host}:",
        f"ssh {host} sudo install -D -m 644 {cert.name} {INSTALLED_CERT}",
        f"ssh {host} sudo install -D -m 600 {key.name} {INSTALLED_KEY}",
        f"ssh {host} rm {cert.name} {key.name}",
    ]
