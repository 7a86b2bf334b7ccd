"""``calibrate`` in the terminal: the fitted knobs and each point's fit."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.text import Text

from pddplan.report.format import readable
from pddplan.report.tables import grid


def calibration_report(view: dict[str, Any]) -> Group:
    """``pddplan calibrate``: the knobs fitted, then each point's residual before and after."""
    knobs = grid("Fitted knobs", ("knob", "default", "fitted", "1 sigma", "note"))
    for k in view["knobs"]:
        factor = k["one_sigma_factor"]
        knobs.add_row(
            k["name"],
            readable(k["default"]),
            readable(k["value"]),
            "unbounded" if factor is None else f"x/÷ {factor:.3f}",
            "at its bound" if k["at_bound"] else "",
        )
    points = grid(
        "Points: predicted / measured - 1", ("point", "metric", "measured", "before", "after")
    )
    for p in view["points"]:
        points.add_row(
            p["id"],
            p["metric"].replace("_tokens_per_s_per_gpu", " tok/s/GPU"),
            readable(p["measured"]),
            f"{p['residual_before']:+.1%}",
            f"{p['residual_after']:+.1%}",
        )
    rms = Text(
        f"RMS log residual {view['rms_log_residual_before']:.3f} with the defaults, "
        f"{view['rms_log_residual_after']:.3f} fitted (ridge {view['ridge']:g}, "
        f"{view['starts']} starts)"
    )
    return Group(knobs, points, rms, Text(held_out_line(view["held_out"])))


def held_out_line(held: dict[str, Any]) -> str:
    """The fit's held-out error in one line, and the error table it gives each phase (or
    why none)."""
    if not held["points"]:
        return (
            f"No held-out error: fewer than {held['min_points']} capacity points; "
            "--perf-quantile uses the engine profile's error"
        )
    phases = []
    for phase, n in held["phase_points"].items():
        table = held["error"].get(phase)
        if table is None:
            phases.append(
                f"{phase} {n} points, fewer than {held['min_points']}: the engine profile's"
            )
        else:
            q90 = table["quantiles"]["0.9"] / table["quantiles"]["0.5"]
            phases.append(f"{phase} {n} points (x{q90:.2f} at Q = 0.9)")
    return (
        f"Held out ({held['folds']} folds): {held['within_20pct']:.0%} of {held['points']} "
        f"points within ±20%, median ratio {held['median_ratio']:.2f}, MAPE "
        f"{held['mape']:.0%}. Error for --perf-quantile: {'; '.join(phases)}"
    )
