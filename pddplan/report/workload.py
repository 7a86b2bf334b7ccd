"""A fitted trace in the terminal: ``workload fit``'s report, its hit histograms and its windows."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from pddplan.report.tables import grid

if TYPE_CHECKING:
    from pddplan.workload.trace import HourlyProfile, TraceFit, WindowedFit

HISTOGRAM_WIDTH = 40
"""Characters of the longest bar in terminal histograms."""


def _bar(share: float, largest: float) -> str:
    eighths = round(share / largest * HISTOGRAM_WIDTH * 8) if largest > 0 else 0
    full, rest = divmod(eighths, 8)
    return "█" * full + ("▏▎▍▌▋▊▉"[rest - 1] if rest else "")


def _clock(seconds: float) -> str:
    """Seconds from a trace's start as ``HH:MM`` (whole minutes, cut), with whole days as
    ``Nd HH:MM``."""
    minutes = int(seconds // 60)
    days, minutes = divmod(minutes, 24 * 60)
    text = f"{minutes // 60:02d}:{minutes % 60:02d}"
    return f"{days}d {text}" if days else text


def trace_windows_report(windowed: WindowedFit, window: str) -> Table:
    """A trace cut into time windows: one row per window."""
    t = grid(
        f"Trace {Path(windowed.path).name} in windows of {window}: {windowed.requests:,} "
        f"requests over {windowed.duration_s:,.1f} s (start and end after the first request)",
        ("window", "start", "end", "requests", "share", "req/s", "mean hit", "input", "output"),
    )
    for w in windowed.windows:
        t.add_row(
            w.name,
            _clock(w.start_s),
            _clock(w.end_s),
            f"{w.fit.requests:,}",
            f"{w.weight:.1%}",
            f"{w.arrival_rps:,.3f}" if w.arrival_rps is not None else "—",
            f"{w.fit.mean_hit_rate:.2%}",
            f"{w.fit.input_tokens.mean:,.0f}",
            f"{w.fit.output_tokens.mean:,.0f}",
        )
    notes = ["mean input and output in tokens; the prefix cache carries over between windows"]
    if windowed.merged:
        notes.append(
            f"{windowed.merged} window{'s' if windowed.merged != 1 else ''} with fewer than "
            f"{windowed.min_requests} requests merged into a neighbour"
        )
    if windowed.skipped_lines:
        notes.append(f"{windowed.skipped_lines:,} bad lines skipped")
    t.caption = "; ".join(notes)
    return t


def hourly_report(profile: HourlyProfile) -> Table:
    """A trace's arrival rate by hour of the day: one row per hour, with a bar."""
    t = grid(
        f"Trace {Path(profile.path).name} by hour of the day: {profile.requests:,} requests over "
        f"{profile.days:.2f} days; peak {profile.peak_hour}h at {profile.peak_rps:.4g} req/s",
        ("hour", "requests", "req/s", "factor", ""),
    )
    for h in range(len(profile.rps)):
        t.add_row(
            f"{h:02d}h",
            f"{profile.counts[h]:,}",
            f"{profile.rps[h]:.4g}",
            f"{profile.factors[h]:.3f}",
            _bar(profile.factors[h], 1.0),
        )
    notes = [
        "factor: the hour's rate over the peak hour's (horizon.daily_profile; --out writes it)",
        "hours of the trace's clock (UTC for Unix timestamps)",
    ]
    if profile.skipped_lines:
        notes.append(f"{profile.skipped_lines:,} bad lines skipped")
    t.caption = "; ".join(notes)
    return t


def trace_report(fit: TraceFit) -> Group:
    """A fitted trace: summary, hit-rate histogram(s) as bars, length distributions."""
    summary = Table(title=f"Trace {Path(fit.path).name}", box=box.SIMPLE_HEAD)
    summary.add_column("figure")
    summary.add_column("value", justify="right")
    summary.add_row(
        "requests",
        f"{fit.requests:,}"
        + (
            f" ({fit.skipped_lines:,} bad line{'s' if fit.skipped_lines != 1 else ''} skipped)"
            if fit.skipped_lines
            else ""
        ),
    )
    summary.add_row("duration", f"{fit.duration_s:,.1f} s")
    summary.add_row(
        "mean arrival rate",
        f"{fit.arrival_rps:,.3f} req/s" if fit.arrival_rps else "— (no time span)",
    )
    summary.add_row(
        "prefill-side cache",
        f"{fit.cache_tokens} tokens" if fit.cache_tokens != "unbounded" else "unbounded",
    )
    summary.add_row("mean hit rate", f"{fit.mean_hit_rate:.2%}")
    summary.add_row("token-weighted hit rate", f"{fit.token_weighted_hit_rate:.2%}")
    if fit.md_mean_hit_rate is not None:
        summary.add_row("decode-side cache", f"{fit.md_cache_tokens} tokens")
        summary.add_row("decode-side mean hit rate", f"{fit.md_mean_hit_rate:.2%}")
    parts: list[Any] = [summary, _hit_histogram("Prefill-side hit rate", fit.hit_histogram)]
    if fit.md_hit_histogram is not None:
        parts.append(_hit_histogram("Decode-side hit rate", fit.md_hit_histogram))
    if fit.hit_curve is not None:
        curve = grid(
            "LRU prefix cache: share of prefix blocks found, by capacity",
            ("capacity, tokens", "blocks", "hit rate"),
        )
        for point in fit.hit_curve:
            tokens = point["cache_tokens"]
            curve.add_row(
                f"{tokens:,.0f}", f"{tokens / fit.block_tokens:,.0f}", f"{point['hit_rate']:.2%}"
            )
        parts.append(curve)
    lengths = Table(title="Lengths (tokens)", box=box.SIMPLE_HEAD)
    for col in ("", "mean", "p50", "p90", "p99", "max"):
        lengths.add_column(col, justify="left" if col == "" else "right")
    fits = Table(title="Fitted forms (best first; KS = largest CDF gap)", box=box.SIMPLE_HEAD)
    for col in ("", "form", "KS"):
        fits.add_column(col, justify="right" if col == "KS" else "left")
    for name, lf in (("input", fit.input_tokens), ("output", fit.output_tokens)):
        q = lf.quantiles
        lengths.add_row(
            name,
            f"{lf.mean:,.0f}",
            f"{q['p50']:,.0f}",
            f"{q['p90']:,.0f}",
            f"{q['p99']:,.0f}",
            f"{q['max']:,.0f}",
        )
        for f in lf.fits:
            if f["dist"] == "lognormal":
                form = f"lognormal median {f['median']:,.0f}, sigma {f['sigma']:.2f}"
            else:
                form = f"gamma shape {f['shape']:.2f}, scale {f['scale']:,.0f}"
            fits.add_row(name, form, f"{f['ks']:.3f}")
            name = ""
    parts += [lengths, fits, Text(f"{len(fit.classes)} request classes (weights sum to 1)")]
    return Group(*parts)


def _hit_histogram(title: str, histogram: list[dict[str, float]]) -> Table:
    t = Table(title=title, box=box.SIMPLE_HEAD)
    for col in ("bucket", "share", ""):
        t.add_column(col, justify="right" if col == "share" else "left")
    largest = max(b["share"] for b in histogram)
    for b in histogram:
        closing = "]" if b["hi"] == 1.0 else ")"
        t.add_row(
            f"[{b['lo']:.2f}, {b['hi']:.2f}{closing}",
            f"{b['share']:.1%}",
            _bar(b["share"], largest),
        )
    return t
