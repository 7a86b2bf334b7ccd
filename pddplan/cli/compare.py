"""``pddplan compare``: the architectures side by side, in the terminal or as a document."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from pddplan.cli.common import (
    OBJECTIVES,
    SOLVERS,
    SolverOpt,
    check_choice,
    err,
    out,
    user_errors,
    write_file,
)
from pddplan.errors import InputError
from pddplan.io.scenario import load_scenario
from pddplan.plan.compare import compare as run_compare
from pddplan.plan.compare import parse_sweep, price_sweep
from pddplan.report import tables, views
from pddplan.report.documents import comparison_csv, comparison_markdown

FORMATS = ("table", "json", "md", "csv")


@user_errors
def compare(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML file.")],
    format_: Annotated[
        str, typer.Option("--format", help="table (terminal), json, md (Markdown) or csv.")
    ] = "table",
    out_file: Annotated[
        Path | None, typer.Option("--out", help="Write the output to this file instead.")
    ] = None,
    price_sweep_spec: Annotated[
        str | None,
        typer.Option(
            "--price-sweep",
            help="Re-plan across a chip's price, CHIP=LO:HI:STEP in USD per GPU-hour, and "
            "find the break-even where PDD stops beating the best baseline on BCR.",
        ),
    ] = None,
    objective: Annotated[
        str | None,
        typer.Option(
            help="max-bcr, min-cost (at the demand) or max-capacity (within the budget), "
            "for every architecture. Default: the scenario's."
        ),
    ] = None,
    solver: SolverOpt = None,
    time_limit: Annotated[
        float | None,
        typer.Option("--time-limit", min=0.1, help="Seconds per architecture's solve."),
    ] = None,
) -> None:
    """Plan the same workload and SLA as intra-DC homogeneous, intra-DC heterogeneous,
    cross-DC naive and PDD, and compare cost, capacity, BCR and latency.

    Example: [bold]pddplan compare scenarios/pdd-h100-h200.yaml --format md --out review.md[/bold]
    """
    check_choice("--format", format_, FORMATS)
    check_choice("--objective", objective, OBJECTIVES)
    check_choice("--solver", solver, SOLVERS)
    sweep_args = parse_sweep(price_sweep_spec) if price_sweep_spec is not None else None
    s, hw, catalog = load_scenario(scenario)
    used = {c for dc in s.datacenters.values() for c in dc.chips}
    if sweep_args is not None and sweep_args[0] not in used:
        raise InputError(
            f"--price-sweep: chip '{sweep_args[0]}' is not used anywhere in scenario {s.name}"
        )
    quiet = format_ != "table" or out_file is not None

    def progress(text: str) -> None:
        if not quiet:
            err.print(f"planning {text}", style="dim", highlight=False)

    options = {"objective": objective, "solver": solver, "time_limit_s": time_limit}
    comparison = run_compare(s, hw, catalog, progress=progress, **options)
    sweep = None
    if sweep_args is not None:
        chip, prices = sweep_args
        sweep = price_sweep(s, hw, catalog, chip, prices, progress=progress, **options)
    view = views.comparison_view(comparison, sweep)
    if out_file is None and format_ == "table":
        out.print(tables.comparison_report(view))
        return
    if format_ == "json":
        text = json.dumps(view, indent=2) + "\n"
    elif format_ == "csv":
        text = comparison_csv(view)
    elif format_ == "md":
        text = comparison_markdown(view, s, str(scenario))
    else:  # a table into a file: plain text, 100 columns
        buf = io.StringIO()
        Console(file=buf, width=100, no_color=True).print(tables.comparison_report(view))
        text = buf.getvalue()
    if out_file is None:
        typer.echo(text, nl=False)
    else:
        write_file(out_file, text)
        err.print(f"wrote {out_file}")
