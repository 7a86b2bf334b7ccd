"""``pddplan report``: a plan file (``solve --out``), or a sweep's saved results, as one
self-contained HTML file to share, or Markdown with its figures beside it; and the same
report for ``solve --report``."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

import pddplan
from pddplan.cli.common import folder_takes_files, not_an_input, note, user_errors, value

if TYPE_CHECKING:
    from pddplan.report.page import Page


class ReportFormat(StrEnum):
    html = "html"
    md = "md"


class Metric(StrEnum):  # pddplan sweep --metric's (pddplan.cli.sweep.Metric)
    cost = "cost"
    bcr = "bcr"
    capacity = "capacity"
    ttft_p99 = "ttft_p99"


MARKDOWN_SUFFIXES = (".md", ".markdown")


def report_format(out: Path, given: ReportFormat | None) -> str:
    """``--format``, else the output's suffix: Markdown for ``.md``, HTML otherwise."""
    if given is not None:
        return given.value
    return "md" if out.suffix.lower() in MARKDOWN_SUFFIXES else "html"


def figures_folder(out: Path) -> Path:
    """Where a Markdown report's images go: ``report.md`` -> ``report-figures/``."""
    return out.with_name(f"{out.stem}-figures")


def check_out(
    out: Path,
    inputs: list[Path | None],
    fmt: str,
    *,
    force: bool,
    option: str = "--out",
    example: str = "report.html",
) -> None:
    """Before any work: ``out`` is not an input, names a file (not a folder: ``example``
    is the name a refusal suggests in it) in a folder that takes new files, and, unless
    ``force``, is not a file with something in it (nor, for Markdown, a figures folder with
    files in it)."""
    where = f"{option} {out}"
    not_an_input(out, inputs, option)
    if out.is_dir():
        raise pddplan.InputError(f"{where}: a folder; give a file name (e.g. {out / example})")
    if not force and out.exists() and out.stat().st_size > 0:
        raise pddplan.InputError(
            f"{where}: exists and is not empty; give --force to replace it, or another file"
        )
    if fmt == "md":
        figures = figures_folder(out)
        if figures.exists() and not figures.is_dir():
            raise pddplan.InputError(
                f"{where}: {figures} is a file; the report's figures go in a folder of that name"
            )
        if not force and figures.is_dir() and any(figures.iterdir()):
            raise pddplan.InputError(
                f"{where}: its figures folder {figures} is not empty; give --force to replace "
                "its figures, or another file"
            )
    folder = out.parent
    if not folder.is_dir():
        raise pddplan.InputError(f"{where}: the folder {folder} does not exist")
    folder_takes_files(folder, where)


def write_page(page: Page, out: Path, fmt: str) -> None:
    """Write ``page`` to ``out``: one HTML file, or Markdown with its figures in
    ``figures_folder(out)``; each file atomically (``pddplan.atomic``), the figures first."""
    from pddplan.atomic import atomic_file, atomic_write_text

    try:
        if fmt == "md":
            from pddplan.report.markdown import page_markdown

            figures = figures_folder(out)
            text, images = page_markdown(page, figures.name)
            if images:
                figures.mkdir(exist_ok=True)
            for name, data in images.items():
                with atomic_file(figures / name) as f:
                    f.write(data)
        else:
            from pddplan.report.html import page_html

            text = page_html(page)
        atomic_write_text(out, text)
    except OSError as e:
        raise pddplan.InputError(f"--out: cannot write {e.filename or out}: {e.strerror}") from None


def plan_page(
    data: dict[str, Any],
    problem: pddplan.Problem,
    fleet: pddplan.Fleet,
    sweep: pddplan.SweepRun | None = None,
    metric: str | None = None,
) -> Page:
    """The report of a plan (its file's JSON, the problem and deployment it was made for),
    with its TTFT distribution at the demand computed from them."""
    from pddplan.report.page import plan_page as page

    cdf = pddplan.ttft_cdf(problem, fleet, data["demand_rps"])
    return page(
        data, problem.scenario, cdf, sweep=sweep, metric=metric, version=pddplan.__version__
    )


def horizon_page(data: dict[str, Any], scenario: pddplan.Scenario) -> Page:
    """The report of a plan over a horizon (its file's JSON, the scenario it carries): every
    figure from the file, nothing planned again."""
    from pddplan.report.page import horizon_page as page

    return page(data, scenario, version=pddplan.__version__)


def report(
    source: Annotated[
        Path,
        typer.Argument(
            metavar="PLAN",
            help="A plan file (solve --out; a plan over a horizon too), or a sweep's results "
            "(sweep --format json --out).",
        ),
    ],
    out_file: Annotated[
        Path,
        typer.Option(
            "--out",
            help="The report to write: one HTML file, or with --format md (or a .md name) "
            "Markdown with its figures in a folder beside it (report.md: report-figures/).",
        ),
    ],
    format_: Annotated[
        ReportFormat | None,
        typer.Option("--format", help="html or md (default: md for a .md --out, else html)."),
    ] = None,
    sweep: Annotated[
        Path | None,
        typer.Option("--sweep", help="Add a sweep's saved results (sweep --format json --out)."),
    ] = None,
    metric: Annotated[
        Metric | None,
        typer.Option(
            help="What the sweep's figure judges by (default: the sweep objective's: cost, "
            "bcr or capacity)."
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace an --out that exists and is not empty.")
    ] = False,
) -> None:
    """Write a plan as a report to share: one self-contained HTML file (no network, no
    script), or Markdown: verdict, fleet, costs, runner-ups, TTFT by segment and its
    distribution, utilization, sensitivity, router rules, figures. A plan over a horizon:
    verdict against the simple policies, what to buy and reserve, link leases, each period,
    capacity and cost over time, cost by month.

    Example: [bold]pddplan report plan.json --out report.html[/bold]
    """
    fmt = report_format(out_file, format_)
    check_out(out_file, [source, sweep], fmt, force=force)
    read = pddplan.read_plan_or_sweep(source)
    if isinstance(read, pddplan.PlanFile):
        problem = pddplan.plan_problem(read)
        pddplan.check_scenario_file(read, redo="report on it as it is now")
        if (read.data.get("robust") or read.over_horizon) and sweep is not None:
            which = "a plan over a horizon" if read.over_horizon else "a robust plan"
            raise pddplan.InputError(
                f"--sweep {sweep}: {which}'s report has no sweep section; report the sweep "
                "alone (pddplan report SWEEP.json)"
            )
        run = pddplan.read_sweep(sweep) if sweep is not None else None
        try:
            if read.over_horizon:
                page = horizon_page(read.data, problem.scenario)
            elif read.data.get("robust"):
                from pddplan.report.page import robust_page

                page = robust_page(read.data, problem.scenario, version=pddplan.__version__)
            else:
                fleet = pddplan.load_fleet(read.path, problem)
                page = plan_page(read.data, problem, fleet, run, value(metric))
        except (KeyError, TypeError, ValueError, AttributeError) as e:  # an edited file
            raise pddplan.InputError(
                f"{source}: a figure the report needs is missing or not a number "
                f"({type(e).__name__}: {e}); re-run `pddplan solve --out`"
            ) from None
    else:
        if sweep is not None:
            raise pddplan.InputError(
                f"--sweep {sweep}: {source} is itself a sweep's results; give --sweep with a "
                "plan file"
            )
        from pddplan.report.page import sweep_page

        page = sweep_page(read, value(metric), version=pddplan.__version__)
    write_page(page, out_file, fmt)
    extra = f" and {figures_folder(out_file)}/" if fmt == "md" and page.figures else ""
    note(f"wrote {out_file}{extra}")


COMMANDS = {"report": user_errors(report)}
