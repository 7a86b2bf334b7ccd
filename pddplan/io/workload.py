"""Writing a fitted workload as a ``workload:`` block a scenario can include, a trace's
time windows as a ``workload_variants:`` list, and its arrival rate by hour of the day as a
``horizon.daily_profile``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pddplan.workload.trace import HourlyProfile, TraceFit, WindowedFit

PROFILE_DECIMALS = 3
"""Decimals a written daily profile keeps (the peak hour's factor stays exactly 1)."""


def workload_yaml(fit: TraceFit) -> str:
    """The fitted workload as a commented ``workload:`` block a scenario can include."""
    md = f"{fit.md_cache_tokens} tokens" if fit.md_cache_tokens else "none (MD hit = P hit)"
    header = [
        f"# Fitted by `pddplan workload fit` from {Path(fit.path).name}: {fit.requests} requests "
        f"over {fit.duration_s:,.0f} s"
        + (f" ({fit.arrival_rps:.4g} req/s)." if fit.arrival_rps is not None else "."),
        f"# Prefill-side cache: {fit.cache_tokens}; decode-side cache: {md}; "
        f"blocks of {fit.block_tokens} tokens.",
        f"# Mean hit rate {fit.mean_hit_rate:.4f} (token-weighted {fit.token_weighted_hit_rate:.4f}).",
        "# Each class is a P-hit bucket x input-length quantile x output-length quantile, with",
        "# its requests' mean lengths and hit rates, so the trace's joint shape is kept.",
    ]
    classes = _class_rows(fit)
    if fit.arrival_rps is None:
        header.append("# The trace spans no time: set arrival_rps before using this block.")
    rate = round(fit.arrival_rps, 6) if fit.arrival_rps is not None else None
    body = yaml.safe_dump(
        {"workload": {"arrival_rps": rate, "classes": classes}},
        sort_keys=False,
        width=200,
        default_flow_style=None,
    )
    return "\n".join(header) + "\n" + body


def _class_rows(fit: TraceFit) -> list[dict[str, Any]]:
    """The fitted classes as the scenario's ``classes`` rows, rounded, the first weight
    absorbing the rounding so that the weights sum to exactly 1."""
    classes: list[dict[str, Any]] = [
        {
            "key": c.key,
            "weight": round(c.weight, 8),
            "input_tokens": round(c.input_tokens, 1),
            "output_tokens": round(c.output_tokens, 1),
            "p_hit": round(c.p_hit, 6),
            "md_hit": round(c.md_hit, 6),
        }
        for c in fit.classes
    ]
    total = sum(c["weight"] for c in classes)
    classes[0]["weight"] = round(classes[0]["weight"] + 1.0 - total, 8)  # exact sum after rounding
    return classes


def variants_yaml(windowed: WindowedFit, window: str) -> str:
    """The trace's windows as a commented YAML list to paste under a scenario's
    ``workload_variants:`` key: one weighted variant per window (``w1``, ``w2``, ...) with
    its classes and arrival rate, its weight its share of the requests (rounded to 6
    decimals, the last absorbing the rounding so that they sum to 1)."""
    header = [
        f"# Fitted by `pddplan workload fit --window {window}` from {Path(windowed.path).name}: "
        f"{windowed.requests} requests over {windowed.duration_s:,.0f} s in "
        f"{len(windowed.windows)} windows.",
        "# Paste under a scenario's `workload_variants:` key. Each variant gives its window's",
        "# classes and arrival rate (replacing the base workload's requests); its weight is its",
        "# share of the requests. The prefix cache is carried from one window to the next.",
    ]
    if windowed.merged:
        header.append(
            f"# {windowed.merged} windows with fewer than {windowed.min_requests} requests "
            "were merged into the window before them (the first into the one after)."
        )
    weights = [round(w.weight, 6) for w in windowed.windows]
    weights[-1] = round(1.0 - sum(weights[:-1]), 6)
    parts = ["\n".join(header)]
    for w, weight in zip(windowed.windows, weights, strict=True):
        note = (
            f"# {w.name}: {w.start_s:,.0f}-{w.end_s:,.0f} s after the first request, "
            f"{w.fit.requests} requests, mean hit rate {w.fit.mean_hit_rate:.4f}"
        )
        if w.arrival_rps is None:
            note += "\n# It spans no time: set arrival_rps before using it."
        entry = {
            "name": w.name,
            "weight": weight,
            "arrival_rps": float(f"{w.arrival_rps:.7g}") if w.arrival_rps is not None else None,
            "classes": _class_rows(w.fit),
        }
        body = yaml.safe_dump([entry], sort_keys=False, width=200, default_flow_style=None)
        parts.append(note + "\n" + body.rstrip("\n"))
    return "\n".join(parts) + "\n"


def daily_profile_yaml(profile: HourlyProfile) -> str:
    """``profile`` as a commented ``horizon:`` block holding its ``daily_profile`` (each
    hour's rate over the peak hour's, rounded to ``PROFILE_DECIMALS``), to paste into a
    scenario; the comment gives the peak hour's rate for ``workload.arrival_rps``."""
    factors = [round(f, PROFILE_DECIMALS) for f in profile.factors]
    header = [
        f"# Fitted by `pddplan workload fit --by-hour` from {Path(profile.path).name}: "
        f"{profile.requests:,} requests over {profile.days:.2f} days.",
        "# Each factor is the hour's mean arrival rate over the peak hour's (hours 0-23 of the",
        "# trace's clock: UTC for Unix timestamps). The peak hour is "
        f"{profile.peak_hour}h at {profile.peak_rps:.6g} req/s",
        f"# (the trace's mean: {profile.mean_rps:.6g} req/s): set workload.arrival_rps to the "
        "peak hour's rate you plan for.",
    ]
    body = yaml.safe_dump(
        {"horizon": {"daily_profile": factors}}, sort_keys=False, width=200, default_flow_style=None
    )
    return "\n".join(header) + "\n" + body
