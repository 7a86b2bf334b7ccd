"""``pddplan workload ...``: workloads from request traces."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

import pddplan
from pddplan.cli.common import (
    PLOT_SUFFIXES,
    Command,
    JsonOpt,
    emit,
    not_an_input,
    note,
    out,
    user_errors,
    write_file,
)

workload_app = typer.Typer(
    help="Workloads from request traces: hit rates, lengths and arrivals.", no_args_is_help=True
)

DEFAULT_BUCKETS = "0,0.2,0.4,0.7,0.9,0.95,0.99,1"
"""The planner's prefill-hit class edges (``pddplan.workload.classes.HIT_EDGES``; a test keeps
the two equal), spelled out so that ``--help`` does not import the workload model."""

TraceArg = Annotated[Path, typer.Argument(help="Mooncake-format JSONL trace.")]
BlockOpt = Annotated[int, typer.Option("--block-size", min=1, help="Tokens per prefix block.")]
CacheOpt = Annotated[
    str,
    typer.Option("--cache-tokens", help="Prefill-side cache capacity in tokens, or 'unbounded'."),
]
MdCacheOpt = Annotated[
    str | None,
    typer.Option(
        "--md-cache-tokens",
        help="Also replay a decode-side (MD) cache of this many tokens, or 'unbounded'.",
    ),
]
BucketsOpt = Annotated[
    str, typer.Option("--buckets", help="Hit-rate bucket edges, rising from 0 to 1.")
]
HitCurveOpt = Annotated[
    bool,
    typer.Option(
        "--hit-curve",
        help="Also measure an LRU prefix cache's hit rate at every capacity (one pass).",
    ),
]
SkipBadOpt = Annotated[
    bool,
    typer.Option("--skip-bad", help="Skip malformed lines and count them, instead of stopping."),
]


def _cache_tokens(option: str, text: str | None) -> Any:
    if text is None or text == "unbounded":
        return text
    try:
        tokens = int(text)
    except ValueError:
        tokens = 0
    if tokens < 1:
        raise pddplan.InputError(
            f"{option}: '{text}' is not allowed; give a positive number of tokens or 'unbounded'"
        )
    return tokens


WINDOW_UNITS = {"m": 60, "h": 3600, "d": 86400}


MAX_WINDOW_DAYS = 3650
"""The longest ``--window``, in days (ten years: longer than any trace kept)."""


def _window_s(text: str) -> float:
    """``--window``: a whole number of minutes, hours or days (``30m``, ``12h``, ``1d``),
    from one minute to ``MAX_WINDOW_DAYS`` days."""
    number, unit = text[:-1], text[-1:]
    shown = text if len(text) <= 40 else f"{text[:37]}... ({len(text):,} characters)"
    if unit in WINDOW_UNITS and number.isascii() and number.isdigit() and len(number) <= 12:
        seconds = int(number) * WINDOW_UNITS[unit]
        if 0 < seconds <= MAX_WINDOW_DAYS * 86400:
            return seconds
    raise pddplan.InputError(
        f"--window: '{shown}' is not allowed; give a whole number of minutes, hours or days "
        f"from 1m to {MAX_WINDOW_DAYS}d: 30m, 12h, 1d, 7d"
    )


def _edges(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise pddplan.InputError(
            f"--buckets: '{text}' is not a comma-separated list of numbers from 0 to 1"
        ) from None


def _fit_options(
    block_size: int, cache_tokens: str, md_cache_tokens: str | None, buckets: str, skip_bad: bool
) -> dict[str, Any]:
    """The fit's keyword arguments from the command's options (each checked)."""
    return {
        "block_tokens": block_size,
        "cache_tokens": _cache_tokens("--cache-tokens", cache_tokens),
        "md_cache_tokens": _cache_tokens("--md-cache-tokens", md_cache_tokens),
        "hit_edges": _edges(buckets),
        "skip_bad": skip_bad,
    }


def _fit(
    trace: Path,
    block_size: int,
    cache_tokens: str,
    md_cache_tokens: str | None,
    buckets: str,
    skip_bad: bool,
    hit_curve: bool = False,
) -> pddplan.TraceFit:
    options = _fit_options(block_size, cache_tokens, md_cache_tokens, buckets, skip_bad)
    return pddplan.fit_trace(trace, hit_curve=hit_curve, **options)


@workload_app.command("fit", cls=Command)
@user_errors
def workload_fit(
    trace: TraceArg,
    block_size: BlockOpt = 512,
    cache_tokens: CacheOpt = "unbounded",
    md_cache_tokens: MdCacheOpt = None,
    buckets: BucketsOpt = DEFAULT_BUCKETS,
    output: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Write the fitted workload block (YAML) here; with --window, the "
            "workload_variants list.",
        ),
    ] = None,
    skip_bad: SkipBadOpt = False,
    hit_curve: HitCurveOpt = False,
    window: Annotated[
        str | None,
        typer.Option(
            "--window",
            help="Cut the trace by timestamp into windows (30m, 12h, 1d, 7d), fit each, and "
            "write them with --out as workload_variants.",
        ),
    ] = None,
    by_hour: Annotated[
        bool,
        typer.Option(
            "--by-hour",
            help="The arrival rate by hour of the day as a 24-factor daily profile (the peak "
            "hour 1); with --out, the horizon.daily_profile block. Needs a trace of a day or "
            "more.",
        ),
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Replay a trace through prefix caches and fit the workload: hit-rate histogram,
    length distributions, arrival rate, and request classes a scenario can use.

    Example: [bold]pddplan workload fit trace.jsonl --cache-tokens 2000000 --out workload.yaml[/bold]
    """
    from pddplan.report import views
    from pddplan.report import workload as report_workload

    not_an_input(output, [trace])
    if by_hour:
        for given, name in (
            (window, "--window"),
            (hit_curve or None, "--hit-curve"),
            (None if cache_tokens == "unbounded" else cache_tokens, "--cache-tokens"),
            (md_cache_tokens, "--md-cache-tokens"),
            (None if buckets == DEFAULT_BUCKETS else buckets, "--buckets"),
        ):
            if given is not None:
                raise pddplan.InputError(
                    f"--by-hour: not with {name} (it reads the timestamps alone: no cache is "
                    "replayed)"
                )
        profile = pddplan.fit_by_hour(trace, block_tokens=block_size, skip_bad=skip_bad)
        if output is not None:
            write_file(output, pddplan.daily_profile_yaml(profile))
            note(f"wrote {output}")
        emit(
            json_out,
            lambda: views.hourly_profile_view(profile),
            lambda: report_workload.hourly_report(profile),
        )
        return
    if window is not None:
        window_s = _window_s(window)
        if hit_curve:
            raise pddplan.InputError("--hit-curve: not with --window (it measures the whole trace)")
        options = _fit_options(block_size, cache_tokens, md_cache_tokens, buckets, skip_bad)
        windowed = pddplan.fit_trace_windows(trace, window_s, **options)
        if output is not None:
            write_file(output, pddplan.variants_yaml(windowed, window))
            note(f"wrote {output}")
        emit(
            json_out,
            lambda: views.trace_windows_view(windowed),
            lambda: report_workload.trace_windows_report(windowed, window),
        )
        return
    fit = _fit(trace, block_size, cache_tokens, md_cache_tokens, buckets, skip_bad, hit_curve)
    if output is not None:
        write_file(output, pddplan.workload_yaml(fit))
        note(f"wrote {output}")
    emit(json_out, lambda: views.trace_fit_view(fit), lambda: report_workload.trace_report(fit))


@workload_app.command("sample", cls=Command)
@user_errors
def workload_sample() -> None:
    """Print the path of the sample trace installed with pddplan: the first 240 s (731
    requests) of the Mooncake conversation trace, Apache-2.0 (the README beside it says
    where it comes from and how it was cut).

    Example: [bold]pddplan workload fit "$(pddplan workload sample)"[/bold]
    """
    typer.echo(str(pddplan.sample_trace()))


@workload_app.command("show", cls=Command)
@user_errors
def workload_show(
    trace: TraceArg,
    block_size: BlockOpt = 512,
    cache_tokens: CacheOpt = "unbounded",
    md_cache_tokens: MdCacheOpt = None,
    buckets: BucketsOpt = DEFAULT_BUCKETS,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Also write the histogram and the hit rate over time as an image (PNG, SVG or PDF).",
        ),
    ] = None,
    skip_bad: SkipBadOpt = False,
) -> None:
    """Show a trace as tables with a terminal histogram; optionally plot it.

    Example: [bold]pddplan workload show trace.jsonl --plot hits.png[/bold]
    """
    from pddplan.report import plots
    from pddplan.report import workload as report_workload

    if plot is not None and plot.suffix.lower() not in PLOT_SUFFIXES:
        raise pddplan.InputError(
            f"--plot: '{plot}' has no image suffix; use one of {', '.join(PLOT_SUFFIXES)}"
        )
    fit = _fit(trace, block_size, cache_tokens, md_cache_tokens, buckets, skip_bad)
    out.print(report_workload.trace_report(fit))
    if plot is not None:
        try:
            plots.plot_trace(fit, plot)
        except OSError as e:
            raise pddplan.InputError(f"--plot: cannot write {plot}: {e.strerror}") from None
        note(f"wrote {plot}")
