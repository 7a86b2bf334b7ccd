"""``pddplan calibrate``: fit the model's knobs to measured points."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

import pddplan
from pddplan.cli.common import (
    JsonOpt,
    OneEngineOpt,
    QuietOpt,
    emit,
    not_an_input,
    note,
    status_line,
    user_errors,
    warn,
    write_file,
)


def calibrate(
    measurements: Annotated[
        list[Path],
        typer.Argument(
            metavar="MEASUREMENTS...",
            help="Points (CSV or JSON), or vLLM / SGLang / genai-perf benchmark results.",
        ),
    ],
    knobs: Annotated[
        str | None,
        typer.Option(
            "--knobs",
            help="Comma-separated knobs to fit (default: the efficiency factors the points "
            "inform: prefill_mfu, decode_mfu, decode_hbm_efficiency, collective_efficiency).",
        ),
    ] = None,
    ridge: Annotated[
        float | None,
        typer.Option(
            "--ridge",
            help="Weight of the pull toward the defaults: a finite number > 0 (default 0.01).",
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Model a benchmark result ran (its catalog id).")
    ] = None,
    chip: Annotated[
        str | None, typer.Option("--chip", help="Chip a benchmark result ran on.")
    ] = None,
    gpus: Annotated[
        int | None,
        typer.Option("--gpus", help="GPUs of the deployment a benchmark ran on (1 to 4,096)."),
    ] = None,
    max_points: Annotated[
        int | None,
        typer.Option(
            "--max-points",
            help="The most points read from all the files together (default 500); a file "
            "past it is refused before its points are fitted.",
        ),
    ] = None,
    out_file: Annotated[
        Path | None,
        typer.Option("--out", help="Write the fitted calibration: block (YAML) here."),
    ] = None,
    engine: OneEngineOpt = None,
    quiet: QuietOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Fit calibration knobs to measured throughputs by bounded least squares.

    Each point is predicted as `pddplan perf` would for its deployment and request shape;
    the fit minimizes the squared log residuals plus a ridge toward the defaults, from
    several starts. Prints each point's residual before and after and each knob's value
    and uncertainty; --out writes a calibration: block a scenario can include. A knob no
    point informs is refused; a fit that does not converge writes nothing.

    Example: [bold]pddplan calibrate benchmarks/validation_points.json --knobs prefill_mfu[/bold]
    """
    from pddplan.report import calibration as report_calibration
    from pddplan.report import views

    not_an_input(out_file, list(measurements))
    names = [k.strip() for k in knobs.split(",") if k.strip()] if knobs is not None else None
    with status_line(quiet=quiet) as show:
        fit = pddplan.calibrate(
            measurements, knobs=names, ridge=ridge, model=model, chip=chip, gpus=gpus,
            engine=engine, max_points=max_points, progress=show,
        )  # fmt: skip
    for line in fit.notes:
        warn(line)
    if out_file is not None:
        write_file(out_file, pddplan.calibration_yaml(fit, [str(p) for p in measurements]))
        note(f"wrote {out_file}")
    view = views.calibration_view(fit)
    emit(json_out, lambda: view, lambda: report_calibration.calibration_report(view))


COMMANDS = {
    "calibrate": user_errors(calibrate, names={"ridge": "--ridge", "max_points": "--max-points"})
}
