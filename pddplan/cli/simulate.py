"""``pddplan simulate`` and the ``--verify`` step of ``pddplan solve``: the discrete-event
simulator on a plan, with a progress bar on long runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

import pddplan
from pddplan.cli.common import (
    PLOT_SUFFIXES,
    EngineOpt,
    FleetOpt,
    JsonOpt,
    PerfQuantileOpt,
    PlanOpt,
    QuietOpt,
    ScenarioArg,
    SeedOpt,
    VariantOpt,
    emit,
    err,
    load_deployment,
    note,
    progress,
    user_errors,
    warn,
)

RequestsOpt = Annotated[
    int | None,
    typer.Option(
        "--requests",
        help="Serve exactly this many sampled requests, warm-up included (default: run "
        "until the TTFT percentiles are known to --precision). A fixed run too short for "
        "steady state is marked so, never confirmed.",
    ),
]
PrecisionOpt = Annotated[
    float,
    typer.Option(
        "--precision",
        help="Run until the 95% intervals of TTFT P90 and P99 are within this share (0 to 1).",
    ),
]
TimeCapOpt = Annotated[
    float | None,
    typer.Option(
        "--time-cap-s",
        help="A wall-clock safety stop, off by default: a run it ends is 'stopped at the time "
        "limit, not a verdict' (exit code 3), since how far it got depends on the machine.",
    ),
]
MaxRequestsOpt = Annotated[
    int,
    typer.Option(
        "--max-requests",
        help="Stop a run after this many served requests, warm-up included, if the TTFT "
        "percentiles are not known to --precision before: counted, so the same seed gives "
        "the same output on any machine.",
    ),
]
TIME_LIMIT_EXIT = 3
"""The exit code of a simulation the wall-clock safety stop ended: not a verdict."""
VerifyRequestsOpt = Annotated[
    int | None,
    typer.Option(
        "--verify-requests",
        help="Requests per --verify simulation (default: until its verdict is decided).",
    ),
]
VerifyTimeCapOpt = Annotated[
    float | None,
    typer.Option(
        "--verify-time-cap-s",
        help="A wall-clock safety stop per --verify simulation, off by default (a run it ends "
        "is not a verdict: exit code 3).",
    ),
]


def simulate(
    scenario: ScenarioArg,
    plan: PlanOpt = None,
    fleet: FleetOpt = None,
    requests: RequestsOpt = None,
    precision: PrecisionOpt = 0.05,
    max_requests: MaxRequestsOpt = 120_000,  # steady.MAX_REQUESTS (a test holds them equal)
    time_cap_s: TimeCapOpt = None,
    trace: Annotated[
        Path | None,
        typer.Option(help="Replay a Mooncake JSONL trace (its timestamps, lengths, block hashes)."),
    ] = None,
    skip_bad: Annotated[
        bool, typer.Option("--skip-bad", help="Skip malformed trace lines instead of stopping.")
    ] = False,
    rate_rps: Annotated[
        float | None,
        typer.Option(
            "--rate-rps",
            min=0.0,
            help="Arrival rate of sampled requests (default: the plan's SLA capacity).",
        ),
    ] = None,
    p_cache_tokens: Annotated[
        int | None,
        typer.Option(
            "--p-cache-tokens",
            min=1,
            help="Prefill-side prefix cache per datacenter, in tokens (default: unbounded).",
        ),
    ] = None,
    setup_rtts: Annotated[
        float,
        typer.Option(
            "--setup-rtts",
            min=0.0,
            help="Round trips of connection set-up each WAN transfer pays (0: warm connections).",
        ),
    ] = 0.0,
    seed: SeedOpt = 0,
    variant: VariantOpt = None,
    engine: EngineOpt = None,
    perf_quantile: PerfQuantileOpt = None,
    tranche: Annotated[
        int | None,
        typer.Option(
            "--tranche",
            help="A scenario with a horizon: the tranche whose day to replay (1 = the first; "
            "default: the last, the busiest).",
        ),
    ] = None,
    hour_s: Annotated[
        float,
        typer.Option(
            "--hour-seconds",
            help="A scenario with a horizon: simulated seconds each hour of the day lasts "
            "(3600: the real day; less compresses it, each hour at its own rate).",
        ),
    ] = 3600.0,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Also draw the TTFT distribution against the SLA (P90 and P99 marked) and "
            "the slowest requests' TTFT by segment, as an image (.png, .svg or .pdf).",
        ),
    ] = None,
    quiet: QuietOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Simulate a plan request by request at steady state and compare with the analytic model.

    Sampled multi-turn sessions (Poisson arrivals, the scenario's lengths and hit targets)
    or a trace go through prefill queues and chunked passes, prefix caches, the WAN link,
    relay and main decode with continuous batching, and handoffs, exactly as the plan's
    router sets them. The run starts warm (sessions open, caches full), drops its warm-up,
    and runs until TTFT P90 and P99 are known within --precision, or --max-requests: the
    same seed gives the same output on any machine. Prints
    the verdict on the SLA first (confirmed, missed or inconclusive, from the 95%
    intervals), then TTFT and TPOT percentiles, goodput, utilizations and the analytic
    prediction beside each.

    On a scenario with a horizon, replays one day of the plan over time instead (--plan: the
    file solve --out wrote for it; without one, it is planned first): each hour at its own
    rate, run by its period's deployment, instances joining and leaving where it changes,
    and the SLA judged hour by hour.

    Example: [bold]pddplan simulate scenarios/pdd-h100-h200.yaml --plan plan.json[/bold]
    """
    from pddplan.report import simulation, views

    if pddplan.load_scenario(scenario).scenario.horizon is not None:
        given = {
            "--fleet": fleet is not None, "--requests": requests is not None,
            "--trace": trace is not None, "--rate-rps": rate_rps is not None,
            "--p-cache-tokens": p_cache_tokens is not None, "--setup-rtts": setup_rtts != 0.0,
            "--variant": variant is not None, "--plot": plot is not None,
        }  # fmt: skip
        refused = [name for name, set_ in given.items() if set_]
        if refused:
            raise pddplan.InputError(
                f"{refused[0]}: {scenario} has a horizon: simulate replays a day of its plan "
                "over time (with --plan, --tranche, --hour-seconds, --seed, --engine)"
            )
        _replay_day(scenario, plan, tranche, hour_s, seed, engine, perf_quantile, quiet, json_out)
        return
    for name, set_ in (("--tranche", tranche is not None), ("--hour-seconds", hour_s != 3600.0)):
        if set_:
            raise pddplan.InputError(
                f"{name}: for a scenario with a horizon (a day of its plan over time); "
                f"{scenario} has none"
            )
    if plot is not None and plot.suffix.lower() not in PLOT_SUFFIXES:
        raise pddplan.InputError(
            f"--plot: '{plot}' has no image suffix; use one of {', '.join(PLOT_SUFFIXES)}"
        )
    problem, deployment = load_deployment(scenario, fleet, plan, variant, engine, perf_quantile)
    with progress("simulate", "requests", quiet=quiet) as tick:
        result = pddplan.simulate(
            problem,
            deployment,
            requests=requests,
            precision=precision,
            max_requests=max_requests,
            time_cap_s=time_cap_s,
            rate_rps=rate_rps,
            trace=trace,
            skip_bad=skip_bad,
            seed=seed,
            p_cache_tokens=p_cache_tokens,
            setup_rtts=setup_rtts,
            progress=tick,
        )
    view = views.simulation_view(result)
    emit(json_out, lambda: view, lambda: simulation.simulation_report(view))
    if plot is not None:
        from pddplan.report.plots import plot_simulation

        try:
            plot_simulation(result, plot)
        except OSError as e:
            raise pddplan.InputError(f"--plot: cannot write {plot}: {e.strerror}") from None
        note(f"wrote {plot}")
    if result.stopped:
        raise typer.Exit(code=TIME_LIMIT_EXIT)


def _replay_day(
    scenario: Path,
    plan: Path | None,
    tranche: int | None,
    hour_s: float,
    seed: int,
    engine: str | None,
    perf_quantile: float | None,
    quiet: bool,
    json_out: bool,
) -> None:
    """``simulate`` on a scenario with a horizon: one day of its plan over time
    (``pddplan.replay_day``), the plan read from ``plan`` or made first."""
    from pddplan.cli.common import status_line
    from pddplan.report import simulation, views

    problem = pddplan.with_engine(pddplan.load_scenario(scenario), engine, perf_quantile)
    schedule: Any = None
    if plan is not None:
        read = pddplan.read_plan(plan)
        if not read.over_horizon:
            raise pddplan.InputError(
                f"{plan}: not a plan over time (`pddplan solve --out` writes one for a "
                "scenario with a horizon: section)"
            )
        different = pddplan.check_plan_scenario(read, problem.scenario, scenario)
        if different is not None:
            warn(f"{different}: replaying its schedule on {scenario} as it is now")
        schedule = read.data
    with status_line("simulate", quiet=quiet) as show:
        show(
            "replaying a day of the schedule ..."
            if plan is not None
            else "planning the horizon, then replaying a day of it (--plan replays a saved plan) ..."
        )
        result = pddplan.replay_day(problem, schedule, tranche=tranche, hour_s=hour_s, seed=seed)
    view = views.day_view(result)
    emit(json_out, lambda: view, lambda: simulation.day_report(view))
    if not result.holds:
        raise typer.Exit(code=1)


def verify_plan(
    problem: pddplan.Problem,
    first: pddplan.PlanResult,
    requests: int | None,
    time_cap_s: float | None,
    seed: int,
    quiet: bool = False,
    **options: Any,
) -> pddplan.Verification:
    """``solve --verify``: ``pddplan.verify``, reporting each step on stderr (not
    ``quiet``)."""

    def note(text: str) -> None:
        if not quiet:
            err.print(text, style="dim", highlight=False)

    return pddplan.verify(
        problem,
        first,
        requests=requests,
        time_cap_s=time_cap_s,
        seed=seed,
        progress=note,
        **options,
    )


def with_verification(plan: Any, view: dict[str, Any]) -> Any:
    """The plan report (a rich renderable), followed by the verification table when there
    is one."""
    from rich.console import Group

    from pddplan.report import simulation

    if "verification" not in view:
        return plan
    v = view["verification"]
    last = v["iterations"][-1]["simulation"]
    parts = [plan, simulation.verification_report(v)]
    if last is not None:
        parts.append(simulation.simulation_table(last))
    return Group(*parts)


COMMANDS = {"simulate": user_errors(simulate)}
VERIFY_FLAGS = {"requests": "--verify-requests", "max_wall_s": "--verify-time-cap-s"}
"""How ``solve`` spells the run-length arguments of its ``--verify`` simulations."""
