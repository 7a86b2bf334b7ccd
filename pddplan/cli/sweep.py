"""``pddplan sweep``: the scenario planned across a grid of values, as a table, a file and a
figure."""

from __future__ import annotations

import io
import os
import stat
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

import pddplan
from pddplan.cli import signals
from pddplan.cli.common import (
    EngineOpt,
    NodeLimitOpt,
    ObjectiveOpt,
    PerfQuantileOpt,
    QuietOpt,
    RatePointsOpt,
    ScenarioArg,
    SolverOpt,
    TimeLimitOpt,
    cache_folder,
    err,
    folder_takes_files,
    load_problem,
    not_an_input,
    note,
    out,
    progress,
    user_errors,
    value,
    warn,
    writable_folder,
)
from pddplan.cli.common import write_file as write_text


class SweepFormat(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


class Engine(StrEnum):
    local = "local"
    ray = "ray"


class Study(StrEnum):
    bathtub = "bathtub"
    price_premium = "price-premium"
    demand = "demand"


class Metric(StrEnum):
    cost = "cost"
    bcr = "bcr"
    capacity = "capacity"
    ttft_p99 = "ttft_p99"


def sweep(
    scenario: ScenarioArg,
    vary: Annotated[
        list[str] | None,
        typer.Option(
            "--vary",
            help="PATH=SPEC: a dotted scenario path (workload.arrival_rps, "
            "prices_usd_per_gpu_hour.h200-sxm, links[0].rtt_ms, sla.ttft_p99_s) or the knob "
            "workload.prefix_hit.mean; SPEC is LO:HI:STEP, LO:HI:xN (N log-spaced) or a,b,c. "
            "Several make a grid (the first changes slowest).",
        ),
    ] = None,
    zipped: Annotated[
        bool, typer.Option("--zip", help="Pair the --vary values (one length) instead of a grid.")
    ] = False,
    study: Annotated[
        Study | None,
        typer.Option(
            "--study",
            help="A built-in study: bathtub (mean prefix hit 0-0.99), price-premium (the MD "
            "chip's price 1.0-1.6x the prefill chip's), demand (the steps of min cost).",
        ),
    ] = None,
    objective: ObjectiveOpt = None,
    architectures: Annotated[
        str | None,
        typer.Option(
            "--architectures",
            help="Comma-separated: pdd, cross-dc-naive, intra-dc-homogeneous, "
            "intra-dc-heterogeneous, hypothetical (default: pdd; a study: all but "
            "hypothetical).",
        ),
    ] = None,
    metric: Annotated[
        Metric | None,
        typer.Option(
            help="What the winner, the break-evens and a heatmap are judged by (default: "
            "the objective's: cost, bcr or capacity)."
        ),
    ] = None,
    format_: Annotated[
        SweepFormat,
        typer.Option("--format", help="table (terminal), csv, json or parquet (needs pyarrow)."),
    ] = SweepFormat.table,
    out_file: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Write the results here (written at the end, atomically); the journal "
            "OUT.journal.jsonl beside it holds each finished point until then (checksummed, "
            "locked against a second sweep). Its folder is checked before any planning. "
            "Without it, the journal is kept in the user's cache folder "
            "($XDG_CACHE_HOME/pddplan or ~/.cache/pddplan), named by the sweep's fingerprint.",
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue from the journal (--out's, else the cache folder's for this same "
            "sweep): skip its points (lines that fail their checksum or lie off the grid are "
            "reported and run again).",
        ),
    ] = False,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", help="Draw the figure that fits the sweep (.png or .svg)."),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers", min=1, max=1024, help="Local worker processes (default: the cores)."
        ),
    ] = None,
    runner: Annotated[
        Engine, typer.Option("--runner", help="local processes, or ray (needs ray installed).")
    ] = Engine.local,
    engine: EngineOpt = None,
    perf_quantile: PerfQuantileOpt = None,
    address: Annotated[
        str | None,
        typer.Option("--address", help="Ray: a running cluster's address (default: start one)."),
    ] = None,
    solver: SolverOpt = None,
    time_limit: TimeLimitOpt = None,
    node_limit: NodeLimitOpt = None,
    rate_points: RatePointsOpt = None,
    max_points: Annotated[
        int | None,
        typer.Option(
            "--max-points",
            min=1,
            max=1_000_000,
            help="The most points the grid may have, checked before any work (default "
            "100,000; at most 1,000,000).",
        ),
    ] = None,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes", help="Run a grid of more than 100,000 points: --max-points 1,000,000."
        ),
    ] = False,
    quiet: QuietOpt = False,
) -> None:
    """Plan the scenario at every point of a grid of values: how the answer moves with
    demand, prices, hit rates, the link or the SLA. Every --vary, the grid's size and
    --out's folder are checked before any planning.

    Example: [bold]pddplan sweep scenarios/pdd-paper-fleets.yaml --vary
    prices_usd_per_gpu_hour.h200-sxm=2.7:4.3:0.4 --architectures pdd,intra-dc-homogeneous
    --plot price.png[/bold]
    """
    from pddplan.report import sweeps as report

    if plot is not None and plot.suffix.lower() not in (".png", ".svg"):
        raise pddplan.InputError(f"--plot {plot}: give a .png or .svg file")
    if format_ == SweepFormat.parquet and out_file is None:
        raise pddplan.InputError("--format parquet writes a binary file: give --out FILE")
    not_an_input(out_file, [scenario])
    if out_file is not None:
        _check_out(out_file)
    kinds = [a.strip() for a in (architectures or "").split(",") if a.strip()] or None
    if engine in ("local", "ray"):
        raise pddplan.InputError(
            f"--engine {engine}: --engine names the serving engine's profile (sglang, vllm, "
            f"trtllm, ideal); run the sweep's points with --runner {engine}"
        )
    problem = load_problem(scenario, engine, perf_quantile)
    options = {
        "objective": value(objective),
        "architectures": kinds,
        "solver": value(solver),
        "time_limit_s": time_limit,
        "node_limit": node_limit,
        "rate_points": rate_points,
        "workers": workers or os.cpu_count() or 1,
        "engine": value(runner),
        "address": address,
        "journal": None if out_file is None else Path(f"{out_file}.journal.jsonl"),
        "journal_dir": _journal_folder(resume) if out_file is None else None,
        "resume": resume,
        "confirm_large": yes,
        "max_points": max_points,
        "hold_journal": True,
        "scenario_label": str(scenario),
    }
    what = "sweep" if study is None else f"study {value(study)}"
    unit = "rates" if study == Study.demand else "points"
    with progress(what, unit, quiet=quiet) as view:
        told = False

        def tell(done: int, total: int | None, label: str) -> None:
            nonlocal told
            if not told and options["journal_dir"] is not None:  # once the sweep starts
                err.print(f"journal: {options['journal_dir']} (named by the sweep's "
                          "fingerprint); if the sweep stops, run the same command with "
                          "--resume to continue it", style="dim", highlight=False,
                          soft_wrap=True)  # fmt: skip
            told = True
            view(done, total, label)

        if study is not None:
            run = pddplan.study(problem, value(study), vary=vary or [], progress=tell,
                                **options)  # fmt: skip
        else:
            options["architectures"] = kinds or ["pdd"]
            run = pddplan.sweep(problem, vary or [], zipped=zipped, progress=tell, **options)
    written = False
    try:
        _finish(run, report, format_, out_file, metric, study, options)
        written = True
    finally:  # the journal's points are in the output once it is written, and only then
        run.close_journal(remove=written)
    if out_file is not None:
        note(f"wrote {out_file}")
    if plot is not None:
        from pddplan.report.plots import plot_sweep

        chosen = value(metric) or ("bcr" if study == Study.bathtub else report.default_metric(run))
        try:
            kind = plot_sweep(run, plot, chosen)
        except ValueError as e:
            raise pddplan.InputError(f"--plot: {e}") from None
        except OSError as e:
            raise pddplan.InputError(f"--plot: cannot write {plot}: {e.strerror}") from None
        note(f"wrote {plot} ({kind})")


def _finish(
    run: Any,
    report: Any,
    format_: SweepFormat,
    out_file: Path | None,
    metric: Metric | None,
    study: Study | None,
    options: dict[str, Any],
) -> None:
    """Say what reading the journal ignored, stop where the run was interrupted, else
    print or write the results."""
    for line in run.warnings:
        err.print(f"Warning: {line}", markup=False, highlight=False, soft_wrap=True)
    chosen = value(metric) or ("bcr" if study == Study.bathtub else report.default_metric(run))
    if run.interrupted:
        journal = run.journal.path if run.journal is not None else options["journal"]
        err.print(f"interrupted by {signals.name()} after {len(run.points):,} of "
                  f"{run.total:,} points" + (f"; run the same command again with --resume to "
                  f"finish (journal {journal})" if journal else ""),
                  markup=False, highlight=False, soft_wrap=True)  # fmt: skip
        signals.report()
        raise typer.Exit(signals.exit_code())
    if format_ != SweepFormat.table:  # a study's findings (the demand steps), beside the data
        for note in run.notes:
            err.print(note, markup=False, highlight=False)
    if out_file is None and format_ == SweepFormat.table:
        out.print(report.sweep_table(run, chosen))
    elif format_ == SweepFormat.parquet:
        _write_bytes(out_file, report.sweep_parquet(run))
    else:
        if format_ == SweepFormat.csv:
            text = report.sweep_csv(run)
        elif format_ == SweepFormat.json:
            text = report.sweep_json(run)
        else:
            from rich.console import Console

            buf = io.StringIO()
            Console(file=buf, width=140, no_color=True).print(report.sweep_table(run, chosen))
            text = buf.getvalue()
        if out_file is None:
            typer.echo(text, nl=False)
        else:
            write_text(out_file, text)


def _check_out(path: Path) -> None:
    """Before any planning: ``--out`` names a file (new, or a regular writable one) in a
    folder that exists and takes new files (the output's temporary file, the journal)."""
    where = f"--out {path}"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        raise pddplan.InputError(f"{where}: {path.parent} is not a folder") from None
    except OSError as e:
        raise pddplan.InputError(f"{where}: cannot use it: {e.strerror}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise pddplan.InputError(f"{where}: a folder; give a file name (e.g. {path / 'sweep.csv'})")
    if st is not None and stat.S_ISREG(st.st_mode) and not st.st_mode & 0o222:
        raise pddplan.InputError(f"{where}: the file is read-only; make it writable, or give "
                                 "another --out")  # fmt: skip
    folder = path.parent
    if folder.exists() and not folder.is_dir():
        raise pddplan.InputError(f"{where}: {folder} is not a folder")
    if not folder.is_dir():
        raise pddplan.InputError(f"{where}: the folder {folder} does not exist")
    folder_takes_files(folder, where)


def _write_bytes(path: Path | None, data: bytes) -> None:
    from pddplan.atomic import atomic_file

    assert path is not None
    try:
        with atomic_file(path) as f:
            f.write(data)
    except OSError as e:
        raise pddplan.InputError(f"--out: cannot write {path}: {e.strerror}") from None


def _journal_folder(resume: bool) -> Path | None:
    """Where a sweep without --out keeps its journal: the user's cache folder (said on
    stderr once the sweep starts); None (no journal, and a warning) where it cannot be
    written, unless --resume needs it."""
    folder = cache_folder()
    try:
        writable_folder(folder, "the journal's cache folder")
    except pddplan.InputError as e:
        if resume:
            raise
        warn(f"{e}; the sweep runs without a journal (give --out to keep one)")
        return None
    return folder


COMMANDS = {
    "sweep": user_errors(
        sweep,
        names={"confirm_large": "--yes", "workers": "--workers", "max_points": "--max-points"},
    )
}
