"""``pddplan simulate`` and the ``--verify`` step of ``pddplan solve``: the discrete-event
simulator on a plan, with a progress bar on long runs."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

import pddplan
from pddplan.cli.common import (
    FleetOpt,
    JsonOpt,
    PlanOpt,
    ScenarioArg,
    SeedOpt,
    emit,
    err,
    load_deployment,
    user_errors,
)

RequestsOpt = Annotated[
    int,
    typer.Option("--requests", min=1, help="Sampled requests to simulate (10% warm up first)."),
]
VerifyRequestsOpt = Annotated[
    int,
    typer.Option("--verify-requests", min=100, help="Sampled requests per --verify simulation."),
]


@contextlib.contextmanager
def progress_bar(label: str) -> Iterator[Callable[[int, int], None]]:
    """A progress callback ``(done, total)`` drawn on stderr when it is a terminal."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    bar = Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )
    task = bar.add_task(label, total=None)
    with bar:

        def tick(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total or None)

        yield tick


def simulate(
    scenario: ScenarioArg,
    plan: PlanOpt = None,
    fleet: FleetOpt = None,
    requests: RequestsOpt = 20_000,
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
    json_out: JsonOpt = False,
) -> None:
    """Simulate a plan request by request and compare with the analytic model.

    Sampled multi-turn sessions (Poisson arrivals, the scenario's lengths and hit targets)
    or a trace go through prefill queues and chunked passes, prefix caches, the WAN link,
    relay and main decode with continuous batching, and handoffs, exactly as the plan's
    router sets them. Prints TTFT and TPOT percentiles, goodput, utilizations and the
    analytic prediction beside each.

    Example: [bold]pddplan simulate scenarios/pdd-h100-h200.yaml --plan plan.json --requests 50000[/bold]
    """
    from pddplan.report import simulation, views

    problem, deployment = load_deployment(scenario, fleet, plan)
    with progress_bar("simulating") as tick:
        result = pddplan.simulate(
            problem,
            deployment,
            requests=requests,
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


def verify_plan(
    problem: pddplan.Problem,
    first: pddplan.PlanResult,
    requests: int,
    seed: int,
    **options: Any,
) -> pddplan.Verification:
    """``solve --verify``: ``pddplan.verify``, reporting each step on stderr."""

    def note(text: str) -> None:
        err.print(text, style="dim", highlight=False)

    with progress_bar("verifying"):
        return pddplan.verify(
            problem, first, requests=requests, seed=seed, progress=note, **options
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
