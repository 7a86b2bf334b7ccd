"""``calibrate`` in the terminal: the fitted knobs and each point's fit."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.text import Text

from pddplan.report.tables import grid


def calibration_report(view: dict[str, Any]) -> Group:
    """``pddplan calibrate``: the knobs fitted, then each point's residual before and after."""
    knobs = grid("Fitted knobs", ("knob", "default", "fitted", "1 sigma", "note"))
    for k in view["knobs"]:
        factor = k["one_sigma_factor"]
        knobs.add_row(
            k["name"],
            f"{k['default']:.4g}",
            f"{k['value']:.4g}",
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
            f"{p['measured']:,.4g}",
            f"{p['residual_before']:+.1%}",
            f"{p['residual_after']:+.1%}",
        )
    rms = Text(
        f"RMS log residual {view['rms_log_residual_before']:.3f} with the defaults, "
        f"{view['rms_log_residual_after']:.3f} fitted (ridge {view['ridge']:g}, "
        f"{view['starts']} starts)"
    )
    return Group(knobs, points, rms)
