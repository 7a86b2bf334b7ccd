"""``pddplan compare``: the architectures side by side, in the terminal or as a document."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Annotated

import typer

import pddplan
from pddplan.cli.common import (
    At,
    EngineOpt,
    Format,
    NodeLimitOpt,
    PerfQuantileOpt,
    QuietOpt,
    RatePointsOpt,
    ScenarioArg,
    SolverOpt,
    TimeLimitOpt,
    load_problem,
    not_an_input,
    note,
    out,
    progress,
    user_errors,
    value,
    writable_folder,
    write_file,
)


def parse_sweep(text: str) -> tuple[str, list[float]]:
    """``CHIP=LO:HI:STEP`` to (chip, prices). Raises ``InputError`` on anything else."""
    chip, sep, spec = text.partition("=")
    parts = spec.split(":")
    usage = f"--price-sweep: expected CHIP=LO:HI:STEP (e.g. h200-sxm=2.7:4.0:0.1), got '{text}'"
    if not sep or not chip or len(parts) != 3:
        raise pddplan.InputError(usage)
    try:
        lo, hi, step = (float(x) for x in parts)
    except ValueError:
        raise pddplan.InputError(usage) from None
    if not (math.isfinite(lo) and math.isfinite(hi) and math.isfinite(step)):
        raise pddplan.InputError(usage)
    if lo <= 0 or step <= 0 or hi < lo:
        raise pddplan.InputError(
            f"--price-sweep {text}: needs 0 < LO <= HI and STEP > 0, so it has no points"
        )
    n = math.floor((hi - lo) / step + 1e-9) + 1
    return chip, [round(lo + i * step, 10) for i in range(n)]


def compare(
    scenario: ScenarioArg,
    format_: Annotated[
        Format, typer.Option("--format", help="table (terminal), json, md (Markdown) or csv.")
    ] = Format.table,
    out_file: Annotated[
        Path | None, typer.Option("--out", help="Write the output to this file instead.")
    ] = None,
    price_sweep_spec: Annotated[
        str | None,
        typer.Option(
            "--price-sweep",
            help="Re-plan at equal demand across a chip's price, CHIP=LO:HI:STEP in USD per "
            "GPU-hour, and find the break-even where PDD stops being cheaper than the cheapest "
            "baseline.",
        ),
    ] = None,
    at: Annotated[
        At,
        typer.Option(
            "--at",
            help="demand: each architecture's cheapest fleet for the demand; budget: each "
            "one's most capacity for one $/hour; both.",
        ),
    ] = At.both,
    budget: Annotated[
        float | None,
        typer.Option(
            "--budget",
            help="The budget of the equal-budget question, in $/hour (a month is 730 hours). "
            "Default: the scenario's budget_usd_per_hour, else the PDD equal-demand fleet's "
            "cost.",
        ),
    ] = None,
    solver: SolverOpt = None,
    time_limit: TimeLimitOpt = None,
    node_limit: NodeLimitOpt = None,
    rate_points: RatePointsOpt = None,
    engine: EngineOpt = None,
    perf_quantile: PerfQuantileOpt = None,
    out_fleets: Annotated[
        Path | None,
        typer.Option(
            "--out-fleets",
            help="Also write each row's fleet and the scenario it was planned on (a relaxed "
            "or restricted copy) into this folder: 'pddplan evaluate SCENARIO --fleet FLEET' "
            "on a pair gives the row's figures.",
        ),
    ] = None,
    quiet: QuietOpt = False,
) -> None:
    """Ask every architecture the same question: the cheapest fleet for the demand, the most
    capacity for a budget, or both.

    The architectures: intra-DC PD in each real datacenter on each of its chips (and mixed
    where it allows two or more), a hypothetical one-DC holding every chip (for
    reference), cross-DC naive and PDD. Each section ranks them by its own measure (cost
    at equal demand, capacity at equal budget) and ends with a verdict.

    Example: [bold]pddplan compare scenarios/pdd-h100-h200.yaml --format md --out review.md[/bold]
    """
    from pddplan.report import compare as report_compare
    from pddplan.report import documents, views

    sweep_args = parse_sweep(price_sweep_spec) if price_sweep_spec is not None else None
    if out_fleets is not None:  # found before any planning
        writable_folder(out_fleets, "--out-fleets")
    not_an_input(out_file, [scenario])
    problem = load_problem(scenario, engine, perf_quantile)
    options = {
        "solver": value(solver),
        "time_limit_s": time_limit,
        "node_limit": node_limit,
        "rate_points": rate_points,
    }
    if sweep_args is not None:  # a chip the scenario does not use fails before any planning
        used = {c for dc in problem.scenario.datacenters.values() for c in dc.chips}
        if sweep_args[0] not in used:
            raise pddplan.InputError(
                f"--price-sweep: chip '{sweep_args[0]}' is not used anywhere in scenario "
                f"{problem.scenario.name}"
            )
    with progress("compare", "rows", quiet=quiet) as tell:
        comparison = pddplan.compare(
            problem, at=value(at), budget_usd_per_hour=budget, progress=tell, **options
        )
    sweep = None
    if sweep_args is not None:
        chip, prices = sweep_args
        with progress("price sweep", "prices", quiet=quiet) as tell:
            sweep = pddplan.price_sweep(problem, chip, prices, progress=tell, **options)
    view = views.comparison_view(comparison, sweep)
    if out_fleets is not None:
        files = pddplan.comparison_files(comparison, problem)
        for name, text in files.items():
            write_file(out_fleets / name, text, "--out-fleets")
        note(f"wrote {len(files)} files to {out_fleets}")
    if out_file is None and format_ == Format.table:
        out.print(report_compare.comparison_report(view))
        return
    if format_ == Format.json:
        text = json.dumps(view, indent=2) + "\n"
    elif format_ == Format.csv:
        text = documents.comparison_csv(view)
    elif format_ == Format.md:
        text = documents.comparison_markdown(view, problem.scenario, str(scenario))
    else:  # a table into a file: plain text, 100 columns
        from rich.console import Console

        buf = io.StringIO()
        Console(file=buf, width=100, no_color=True).print(report_compare.comparison_report(view))
        text = buf.getvalue()
    if out_file is None:
        typer.echo(text, nl=False)
    else:
        write_file(out_file, text)
        note(f"wrote {out_file}")


COMMANDS = {"compare": user_errors(compare, names={"budget_usd_per_hour": "--budget"})}
