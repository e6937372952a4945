"""`paika simulate`: replay a GPU-cluster trace through the real policy with simulated time."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from scheduler.simulate.calendar import CALENDAR_MODES, WeeklyPlan
from scheduler.simulate.draw import DrawConfig
from scheduler.simulate.engine import PolicyViolation, ProgressFn
from scheduler.simulate.policies import POLICIES, policy_setup
from scheduler.simulate.run import ClusterOverride, Sharing, resolve_cluster, simulate
from scheduler.simulate.shares import SHARING_MODES, ProfileError
from scheduler.simulate.traces import FORMATS, TraceError, read_trace


def simulate_command(
    trace: Annotated[Path, typer.Option("--trace", help="The trace file.")],
    fmt: Annotated[str, typer.Option("--format", help="philly, openb or csv.")],
    policy: Annotated[
        str, typer.Option(help="fifo, fifo-hold, sjf, easy, slurm or paika.")
    ] = "paika",
    core_share: Annotated[float, typer.Option(help="Share of jobs drawn as core.")] = 0.1,
    not_ready_share: Annotated[
        float, typer.Option(help="Share of jobs whose data is ready only after a delay.")
    ] = 0.3,
    estimate_noise: Annotated[
        float, typer.Option(help="σ of the log-normal estimate error.")
    ] = 0.5,
    seed: Annotated[int, typer.Option(help="Seed of every draw.")] = 1,
    preemptible_share: Annotated[
        float,
        typer.Option(help="Share of normal and idle jobs that checkpoint and may be preempted."),
    ] = 0.0,
    checkpoint_minutes: Annotated[
        float, typer.Option(help="A preemptible job checkpoints every this many minutes of work.")
    ] = 30.0,
    restart_minutes: Annotated[
        float, typer.Option(help="What resuming from a checkpoint costs, in minutes.")
    ] = 5.0,
    nodes: Annotated[
        int | None, typer.Option(help="Replace the cluster: N nodes (pools all queues).")
    ] = None,
    gpus_per_node: Annotated[int | None, typer.Option(help="GPUs per node with --nodes.")] = None,
    gpu_type: Annotated[
        str | None, typer.Option(help="GPU type name of a one-type cluster (V100-16GB).")
    ] = None,
    per_vc: Annotated[
        bool, typer.Option("--per-vc", help="Philly: each VC on its own cluster, summed up.")
    ] = False,
    limit: Annotated[int | None, typer.Option(help="Replay only the first N jobs.")] = None,
    sharing: Annotated[
        str,
        typer.Option(
            help="none (whole cards), memory (one-GPU jobs that ask for part of a "
            "card share cards, the hosts keep them apart with MPS) or ideal (as memory, "
            "but every such job is light: no pair refused, nobody slowed; a bound)."
        ),
    ] = "none",
    profiles: Annotated[
        Path | None,
        typer.Option(
            help="Lucid's single_job_profiles.csv, for --sharing memory (default: "
            "lucid-profiles/ beside the trace's folder)."
        ),
    ] = None,
    maintenance: Annotated[
        str,
        typer.Option(
            help="none, plan (one window a week per host; paika starts nothing there that "
            "would run into it), drain (the baseline: the host takes nothing new from the "
            "window's notice) or ignore (the same windows measured, not kept)."
        ),
    ] = "none",
    maintenance_hours: Annotated[
        float, typer.Option(help="How long each host's weekly window is, in hours.")
    ] = 4.0,
    maintenance_lead_hours: Annotated[
        float, typer.Option(help="How long before its start a window is known, in hours.")
    ] = 24.0,
    booking_gpus: Annotated[
        int,
        typer.Option(
            help="Cards of the cluster's most common type booked once a week for the team "
            "with the most GPU-hours (0: none)."
        ),
    ] = 0,
    booking_hours: Annotated[float, typer.Option(help="How long each booking is.")] = 12.0,
    booking_lead_hours: Annotated[
        float, typer.Option(help="How long before its start a booking is known, in hours.")
    ] = 72.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON summary.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Replay a GPU-cluster trace through the real scheduling policy, with simulated time.

    Policies: fifo (first come, first served), fifo-hold (fifo where a job takes its GPUs at
    submit and holds them idle until its data is ready), sjf (oracle: exact run times, shortest
    first, greedy backfill), easy (FIFO with EASY backfill on noisy estimates), slurm (Slurm's
    multifactor priority with its documentation's example weights: age, fair share, job size;
    classes as partition tiers; EASY backfill), paika (the policy's defaults: classes,
    shortest-first with aging and fair share, EASY backfill, cheapest card type, preemption of
    idle and preemptible work).

    What a trace lacks is drawn from --seed, one random stream per attribute, so all policies see
    the same draws: --core-share of the jobs are core (a trace-given core or idle class is kept;
    openb BE pods are idle); --not-ready-share of the jobs have data that is ready only after a
    delay drawn from an exponential distribution with a mean of 30 min, capped at 6 h; the estimate
    is true GPU-hours × exp(N(0, --estimate-noise)), the factor clipped to [0.1, 10] (sjf sees exact
    run times); users: one of 50 per queue (Philly has none); teams: the queue (VC) in --per-vc
    runs, else one of 8 teams; --preemptible-share of the normal and idle jobs checkpoint every
    --checkpoint-minutes and may be preempted: a stop loses the work since the last checkpoint and
    a resume costs --restart-minutes, both charged and counted as lost GPU-hours.

    With --sharing memory every simulated host shares cards: a one-GPU job that asks for part of
    a card (openb's gpu_milli below 1000, or the CSV column gpu_milli) declares that part of the
    smallest card type it may use as its memory, and gets a fingerprint drawn from the published
    single-job profiles nearest in memory; in a trace without gpu_milli (Philly) every one-GPU
    job draws a profile, whose memory it declares. Jobs on one card slow each other down by the
    policy's expected slowdown while they overlap. The JSON adds gpu_hours_held, the mean wait
    per class (waits: shared, one_card, multi_card, core) and the slowdowns suffered. With
    --sharing ideal the same jobs share by the same memory, but each is light (its SMs and
    memory controller idle): no pair is refused for bandwidth or slowdown and nobody slows:
    the most sharing could buy on the trace, a bound rather than a forecast.

    With --maintenance plan, drain or ignore every host has one window of --maintenance-hours
    a week (host i on night i mod 7 at 22:00 from the trace's first submit), known
    --maintenance-lead-hours before it starts: plan is paika's (nothing is started there that
    would still run at the window's start by its estimate), drain the baseline of draining the
    host when the window is known, ignore the counterfactual (the windows are measured, not
    kept). At the start what still runs there is stopped and queued again (a job that
    checkpoints loses the work since its checkpoint, an idle one keeps its progress, any other
    loses its run). --booking-gpus books that many cards each week (day 5, 08:00, for
    --booking-hours) for the busiest team. The JSON's calendar says, over the windows, the
    GPU-hours of the notices, how many held jobs, the work thrown away, and how many bookings
    found their cards free (or held by the team) at their start.

    Formats: philly (Pollux's philly.csv; VC sizes from philly_vc_nodes.csv next to it, 8 GPUs per
    node), openb (Alibaba 2023 pod list; typed nodes from openb_node_list_gpu_node.csv next to it;
    a fractional GPU counts as one whole GPU), csv (submit_time,duration,gpus[,queue,gpu_type,
    priority,user,est_hours]; needs --nodes and --gpus-per-node).
    """
    if fmt not in FORMATS:
        _fail(f"unknown --format {fmt!r}; use one of: {', '.join(FORMATS)}")
    if policy not in POLICIES:
        _fail(f"unknown --policy {policy!r}; use one of: {', '.join(POLICIES)}")
    if limit is not None and limit <= 0:
        _fail("--limit must be a positive number of jobs")
    if sharing not in SHARING_MODES:
        _fail(f"unknown --sharing {sharing!r}; use one of: {', '.join(SHARING_MODES)}")
    if profiles is not None and sharing == "none":
        _fail("--profiles gives jobs fingerprints for sharing; add --sharing memory")
    shares = Sharing(sharing, profiles)
    if maintenance != "none" and maintenance not in CALENDAR_MODES:
        _fail(
            f"unknown --maintenance {maintenance!r}; use one of: none, {', '.join(CALENDAR_MODES)}"
        )
    if booking_gpus and maintenance == "none":
        _fail("--booking-gpus books cards in the weekly calendar; add --maintenance plan")
    try:
        calendar = (
            WeeklyPlan(
                maintenance,
                maintenance_hours,
                maintenance_lead_hours,
                booking_gpus,
                booking_hours,
                booking_lead_hours,
            )
            if maintenance != "none"
            else None
        )
        draws = DrawConfig(
            seed,
            core_share,
            not_ready_share,
            estimate_noise,
            preemptible_share=preemptible_share,
            checkpoint_s=checkpoint_minutes * 60,
            restart_s=restart_minutes * 60,
        )
        loaded = read_trace(trace, fmt).limited(limit)
        loaded = resolve_cluster(
            loaded, ClusterOverride(nodes, gpus_per_node, gpu_type), per_vc=per_vc
        )
    except (TraceError, ValueError) as exc:
        _fail(str(exc))
    show_progress = not quiet and sys.stderr.isatty()
    try:
        if show_progress:
            summary = _with_progress(
                lambda report: _run(loaded, policy, draws, per_vc, report, shares, calendar)
            )
        else:
            summary = _run(loaded, policy, draws, per_vc, None, shares, calendar)
    except ProfileError as exc:
        _fail(f"{exc}; give Lucid's single_job_profiles.csv with --profiles FILE")
    except PolicyViolation as exc:
        typer.echo(f"paika simulate: the policy returned an impossible plan: {exc}", err=True)
        raise typer.Exit(1) from exc
    found = summary["sharing"]
    if found["profiles_found"] is False and (sharing == "memory" or not found["share_jobs"]):
        typer.echo(
            "paika simulate: no single-job profiles beside the trace, so no job has a "
            "fingerprint: jobs whose trace gives gpu_milli share by memory only beside jobs "
            "known to be light (none), and a trace without gpu_milli has no share jobs; give "
            "Lucid's single_job_profiles.csv with --profiles FILE",
            err=True,
        )
    if as_json:
        typer.echo(json.dumps(summary, sort_keys=False))
    else:
        typer.echo(render(summary))


def _run(
    trace: Any,
    policy: str,
    draws: DrawConfig,
    per_vc: bool,
    report: ProgressFn | None,
    sharing: Sharing,
    calendar: WeeklyPlan | None = None,
) -> dict[str, Any]:
    return simulate(
        trace,
        policy_setup(policy),
        draws,
        per_vc=per_vc,
        progress=report,
        sharing=sharing,
        calendar=calendar,
    )


def _with_progress(work: Any) -> dict[str, Any]:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task("replaying", total=None)

        def report(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        result: dict[str, Any] = work(report)
        return result


def _fail(message: str) -> NoReturn:
    typer.echo(f"paika simulate: {message}", err=True)
    raise typer.Exit(2)


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}{unit}"
    return f"{value:,}{unit}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def render(summary: dict[str, Any]) -> str:
    """The summary as a readable table."""
    trace = summary["trace"]
    lines = [
        f"paika simulate · {trace['file']} ({trace['format']}) · policy {summary['policy']}",
        f"cluster: {summary['gpus']:,} GPUs on {summary['nodes']:,} nodes in "
        f"{summary['clusters']} cluster(s) · jobs {summary['jobs']:,} "
        f"(never fit {summary['never_fits']}, never started {summary['never_started']}, "
        f"dropped {sum(trace['dropped'].values())})",
        "",
        f"{'class':<8}{'jobs':>9}{'mean wait':>14}{'median':>14}{'p99':>14}{'max':>14}"
        f"{'mean JCT':>15}",
    ]
    rows = [("all", summary), *summary["by_class"].items()]
    for name, figures in rows:
        delay = figures["wait_s"]  # the first wait plus any after a preemption
        lines.append(
            f"{name:<8}{figures['jobs']:>9,}{_fmt(delay['mean'], 's'):>14}"
            f"{_fmt(delay['median'], 's'):>14}{_fmt(delay['p99'], 's'):>14}"
            f"{_fmt(delay['max'], 's'):>14}{_fmt(figures['jct_s']['mean'], 's'):>15}"
        )
    passes = summary["scheduling"]
    lines += [
        "",
        f"makespan {_fmt(summary['makespan_s'], 's')} · utilization "
        f"{summary['utilization']:.1%} · GPU-hours {_fmt(summary['gpu_hours'])}",
        f"held idle waiting for data {_fmt(summary['held_idle_gpu_hours'])} GPU-h · on a "
        f"costlier type {_fmt(summary['costlier_gpu_hours'])} GPU-h · cost "
        f"{_fmt(summary['cost'])} · preemptions {summary['preemptions']} (lost "
        f"{_fmt(summary['lost_gpu_hours'])} GPU-h)",
        f"GPU-hours held (a shared card once) {_fmt(summary['gpu_hours_held'])} · sharing "
        f"{summary['sharing']['mode']}: {summary['slowdowns']['shared_jobs']:,} jobs on shared "
        f"cards, {summary['slowdowns']['with_neighbour']:,} beside another, slowdown mean "
        f"{_pct(summary['slowdowns']['mean'])} p95 {_pct(summary['slowdowns']['p95'])}",
        "mean wait by kind: "
        + " · ".join(f"{kind} {_fmt(value, 's')}" for kind, value in summary["waits"].items()),
        f"scheduling passes {passes['calls']:,} (skipped {passes['skipped']:,}) · mean "
        f"{passes['mean_s'] * 1000:.2f} ms · max {passes['max_s'] * 1000:.1f} ms · wall "
        f"{summary['wall_s']:.1f} s",
    ]
    calendar = summary.get("calendar")
    if calendar is not None:
        lines.append(
            f"maintenance {calendar['mode']}: {calendar['windows']:,} windows · notice "
            f"{_fmt(calendar['notice_gpu_hours'])} GPU-h, busy {_fmt(calendar['busy_gpu_hours'])}"
            f" · thrown away {_fmt(calendar['thrown_gpu_hours'])} GPU-h begun in the notice, "
            f"{_fmt(calendar['unforeseen_gpu_hours'])} before it "
            f"({calendar['stopped_jobs']:,} jobs stopped) · idle or thrown away "
            f"{_fmt(calendar['unused_gpu_hours'])} GPU-h"
        )
        if calendar["bookings"]:
            lines.append(
                f"bookings: {calendar['bookings_honoured']} of {calendar['bookings']} found "
                f"their cards free at the start ({calendar['booked_cards_short']} cards short)"
            )
    return "\n".join(lines)
