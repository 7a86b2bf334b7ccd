"""Images of a fitted trace (``pddplan workload show --plot``), of sweeps (``pddplan sweep
--plot``), of a simulation (``pddplan simulate --plot``), of a plan's report (``pddplan
report``: cost against capacity, the TTFT distribution, utilization) and of a plan over time
(``pddplan solve HORIZON --plot`` and its report: capacity by how its GPUs are had against
demand, and cost by month). The only module that imports matplotlib, and only when a plot
is asked for.

The figures say what was computed and no more: planned points are drawn as points, a line
joins them only where the value between them is known (a step only where a study located
it), costs are per month as the tables give them, and every axis and title names its value
as a person reads it (``pddplan.sweeps.analysis.axis_label``), with its unit."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pddplan import units
from pddplan.atomic import atomic_file
from pddplan.spec.status import PointStatus

if TYPE_CHECKING:
    from pddplan.simulation.run import SimResult
    from pddplan.sweeps.engine import SweepRun
    from pddplan.workload.trace import TraceFit


def plot_trace(fit: TraceFit, path: Path) -> None:
    """Write the hit-rate histogram and the hit rate over time to ``path`` (PNG, SVG, PDF)."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    from matplotlib import pyplot as plt

    fig, (hist, series) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    labels = [f"{b['lo']:g}-{b['hi']:g}" for b in fit.hit_histogram]
    x = range(len(labels))
    hist.bar(
        [i - 0.2 for i in x],
        [b["share"] for b in fit.hit_histogram],
        width=0.4,
        label="prefill side",
    )
    if fit.md_hit_histogram is not None:
        hist.bar(
            [i + 0.2 for i in x],
            [b["share"] for b in fit.md_hit_histogram],
            width=0.4,
            label="decode side",
        )
    hist.set_xticks(list(x), labels, rotation=30)
    hist.legend()
    hist.set(
        xlabel="prefix-cache hit rate",
        ylabel="share of requests",
        title=f"Hit-rate histogram ({fit.requests:,} requests)",
    )
    times = [t / 60 for t, _ in fit.hit_over_time]
    series.plot(times, [h for _, h in fit.hit_over_time], marker=".")
    series.axhline(
        fit.mean_hit_rate, color="gray", linestyle="--", label=f"mean {fit.mean_hit_rate:.2f}"
    )
    series.set(
        xlabel="minutes since the first request",
        ylabel="mean hit rate",
        ylim=(0, 1),
        title="Hit rate over time (cache warms up)",
    )
    series.legend()
    fig.suptitle(Path(fit.path).name)
    with atomic_file(path) as f:  # the temporary name has no extension: say the format
        fig.savefig(f, format=Path(path).suffix.lstrip(".").lower() or "png", dpi=110)
    plt.close(fig)


# --- sweeps -----------------------------------------------------------------------------------
PLOTTED = {
    "bcr": ("BCR", "req/s per $/hour", 1.0),
    "cost": ("cost", "$/month", units.HOURS_PER_MONTH),
    "capacity": ("SLA capacity", "req/s", 1.0),
    "ttft_p99": ("TTFT P99 at the demand", "s", 1.0),
}
"""A sweep's measure -> (name, unit as the tables write it, factor from the result's
unit): costs per month, as every table gives them."""
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h")
DASHES = ("-", "--", "-.", ":")
LOCATED = 0.01
"""A change of cost between two planned demands this close (relative) is a step the study
located (the demand study bisects to 0.5%): drawn as a step. A wider gap is not drawn: the
cost changes somewhere in it, at a demand no point planned."""


def metric_label(metric: str) -> str:
    """``metric``'s axis label: its name and unit (``PLOTTED``)."""
    name, unit, _ = PLOTTED[metric]
    return f"{name}, {unit}"


def _save(fig: Any, path: Path, dpi: int) -> None:
    with atomic_file(path) as f:  # the temporary name has no extension: say the format
        fig.savefig(f, format=Path(path).suffix.lstrip(".").lower() or "png", dpi=dpi)


def plot_sweep(run: SweepRun, path: Path, metric: str) -> str:
    """Write the figure that fits the sweep to ``path`` (``sweep_figure``) and say which it
    drew."""
    fig, kind = sweep_figure(run, metric)
    from matplotlib import pyplot as plt

    try:
        _save(fig, path, 120)
    finally:
        plt.close(fig)
    return kind


def sweep_figure(run: SweepRun, metric: str) -> tuple[Any, str]:
    """The figure that fits the sweep, and what it is in words: one varied value -> BCR,
    cost, SLA capacity and TTFT P99 against it, one series per architecture (the planned
    points as markers), the break-evens ``metric`` judges shaded and listed on its panel;
    the demand -> the minimum cost against demand, each planned demand a point, a line only
    where the cost is known (flat between two points of one cost, a step the study located);
    two values -> a heatmap of ``metric`` for the first architecture. Titles and axes name
    each value as a person reads it (``analysis.axis_label``), costs per month."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    from matplotlib import pyplot as plt

    from pddplan.sweeps import analysis

    axes = run.job.axes
    if len(axes) == 1 and axes[0].path == "workload.arrival_rps":
        fig, kind = _demand_figure(plt, run), "minimum cost against demand"
    elif len(axes) == 1 or run.job.zipped:
        name = analysis.axis_name(axes[0].path)[0]
        fig, kind = _lines_figure(plt, run, metric), f"lines against {name}"
    elif len(axes) == 2:
        fig, kind = _heatmap_figure(plt, run, metric), f"heatmap of {PLOTTED[metric][0]}"
    else:
        raise ValueError("a plot takes one or two varied values")
    if "lines" in kind:
        title = (
            f"BCR, cost, SLA capacity and TTFT P99 against {kind.removeprefix('lines against ')}"
        )
    else:
        title = kind
    fig.suptitle(f"{run.job.scenario}: {title}")
    return fig, kind


def _series(
    run: SweepRun, architecture: str, metric: str
) -> tuple[list[float], list[float], list[bool]]:
    """The points where ``architecture`` has a value of ``metric`` (in ``PLOTTED``'s
    unit): x, y, and whether the search stopped early there (a work budget or the time
    limit)."""
    from pddplan.sweeps import analysis

    path = run.job.axes[0].path
    factor = PLOTTED[metric][2]
    xs, ys, limited = [], [], []
    for p in run.points:
        v = analysis.value_of(p, architecture, metric) if p.status == PointStatus.OK else None
        if v is not None:
            xs.append(float(p.values[path]))
            ys.append(v * factor)
            limited.append(analysis.stopped_early(p, architecture))
    return xs, ys, limited


def _same(a: tuple[list[float], list[float]], b: tuple[list[float], list[float]]) -> bool:
    """Whether two series have the same points (to a part in a million)."""
    return len(a[0]) == len(b[0]) and all(
        x == u and abs(y - v) <= 1e-6 * max(abs(y), abs(v), 1e-12)
        for x, y, u, v in zip(a[0], a[1], b[0], b[1], strict=True)
    )


def _lines_figure(plt: Any, run: SweepRun, metric: str) -> Any:
    from matplotlib.ticker import StrMethodFormatter

    from pddplan.sweeps import analysis

    fig, grid = plt.subplots(2, 2, figsize=(11, 8.2), layout="constrained", sharex=True)
    path = run.job.axes[0].path
    names = analysis.architectures(run)
    evens = analysis.break_evens(run, metric)
    panels = dict(zip(("bcr", "cost", "capacity", "ttft_p99"), grid.flat, strict=True))
    handles: dict[str, Any] = {}
    for m, ax in panels.items():
        drawn: dict[str, tuple[list[float], list[float]]] = {}
        coincide = []
        for k, name in enumerate(names):
            xs, ys, limited = _series(run, name, m)
            if not xs:
                continue
            # each series its own marker and dashes, the later ones smaller and thinner: where
            # two coincide (PDD's plan is a baseline's), the one below shows around the other
            (line,) = ax.plot(xs, ys, marker=MARKERS[k % len(MARKERS)],
                              linestyle=DASHES[k % len(DASHES)], markersize=max(10 - 2 * k, 4),
                              markerfacecolor="none", lw=max(2.6 - 0.5 * k, 0.8),
                              color=f"C{k}", label=name, zorder=2 + k)  # fmt: skip
            handles.setdefault(name, line)
            same = next((n for n, d in drawn.items() if _same(d, (xs, ys))), None)
            if same is not None:
                coincide.append(f"{name} = {same}")
            stopped = [(x, y) for x, y, t in zip(xs, ys, limited, strict=True) if t]
            if stopped:  # filled: the best found, not a proven optimum
                ax.scatter(*zip(*stopped, strict=True), s=30, color=f"C{k}", zorder=2 + k)
            drawn[name] = (xs, ys)
        ax.set(ylabel=metric_label(m), title=PLOTTED[m][0])
        if m == "cost":
            ax.yaxis.set_major_formatter(StrMethodFormatter("${x:,.0f}"))
        ax.grid(alpha=0.3)
        if coincide:  # one line on the other at every point here: said, not left to the eye
            note = ax.text(0.98, 0.02, "same values here:\n" + "\n".join(coincide),
                           transform=ax.transAxes, ha="right", va="bottom", fontsize="x-small",
                           bbox={"facecolor": "white", "alpha": 0.8, "lw": 0})  # fmt: skip
            note.set_gid("coincide")
    for ax in grid[1]:
        ax.set(xlabel=analysis.axis_label(path))
    fig.legend(list(handles.values()), list(handles), loc="outside lower center",
               ncols=min(len(handles), 2), fontsize="small")  # fmt: skip
    if any(analysis.stopped_early(p, n) for p in run.points for n in names):
        grid[1][0].text(0.02, 0.98, "filled: the search stopped early (best found)",
                        transform=grid[1][0].transAxes, va="top", fontsize="x-small")  # fmt: skip
    judge = panels[metric]
    judge.set_title(f"{PLOTTED[metric][0]} (judges the winner)")
    for b in evens:  # where the winner changes: somewhere between the two planned values
        judge.axvspan(float(b.lo), float(b.hi), color="gray", alpha=0.2, lw=0, gid="break-even")
    if evens:
        more = [f"... {len(evens) - 4} more (the table lists them)"] if len(evens) > 4 else []
        text = judge.text(0.02, 0.98, f"shaded: break-even ({PLOTTED[metric][0]})\n" + "\n".join(
            [f"{b.lo:g}-{b.hi:g}: {b.before} -> {b.after}" for b in evens[:4]] + more),
            transform=judge.transAxes, va="top", fontsize="x-small",
            bbox={"facecolor": "white", "alpha": 0.8, "lw": 0})  # fmt: skip
        text.set_gid("break-evens")
    return fig


def _demand_figure(plt: Any, run: SweepRun) -> Any:
    from matplotlib.ticker import StrMethodFormatter

    from pddplan.sweeps import analysis

    fig, ax = plt.subplots(figsize=(9, 5), layout="constrained")
    path = run.job.axes[0].path
    served = []
    for k, name in enumerate(analysis.architectures(run)):
        xs, ys, _ = _series(run, name, "cost")
        if not xs:
            continue
        color = f"C{k}"
        ax.plot(xs, ys, marker=MARKERS[k % len(MARKERS)], linestyle="none", color=color,
                markersize=max(8 - 1.5 * k, 4), label=name, zorder=3 + k)  # fmt: skip
        for (a, ca), (b, cb) in itertools.pairwise(zip(xs, ys, strict=True)):
            if abs(cb - ca) <= 1e-9 * max(abs(ca), 1.0):
                # the minimum cost never falls as demand grows: equal at both ends, it is
                # that cost between them
                ax.plot([a, b], [ca, cb], color=color, lw=1.4, zorder=2 + k)
            elif b / a - 1 <= LOCATED:  # a step the study located: drawn where it is
                ax.plot([b, b], [ca, cb], color=color, lw=1.0, linestyle=":", zorder=2 + k)
        served.append(max(xs))
    top = max(float(p.values[path]) for p in run.points)
    if served and max(served) < top:  # the rates nothing serves: shaded, the axis cut short
        right = min(top, max(served) * 1.15)
        ax.axvspan(max(served), right, color="gray", alpha=0.15, lw=0,
                   label=f"no plan above {max(served):.4g} req/s (asked up to {top:.4g})")  # fmt: skip
        ax.set_xlim(right=right)
    ax.yaxis.set_major_formatter(StrMethodFormatter("${x:,.0f}"))
    ax.set(xlabel=analysis.axis_label(path), ylabel="minimum cost, $/month",
           title="markers: demands planned; a line: the cost there is known (equal at both "
           "ends, or a step located within 1%)")  # fmt: skip
    ax.title.set_fontsize("small")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="upper left")
    return fig


def _heatmap_figure(plt: Any, run: SweepRun, metric: str) -> Any:
    import numpy as np

    from pddplan.sweeps import analysis

    ya, xa = run.job.axes  # the first axis down, the second across
    name = analysis.architectures(run)[0]
    factor = PLOTTED[metric][2]
    z = np.full((len(ya.values), len(xa.values)), np.nan)
    for p in run.points:
        if p.status != PointStatus.OK:
            continue
        v = analysis.value_of(p, name, metric)
        if v is not None:
            z[ya.values.index(p.values[ya.path]), xa.values.index(p.values[xa.path])] = v * factor
    fig, ax = plt.subplots(figsize=(9, 6.5), layout="constrained")
    mesh = ax.imshow(z, origin="lower", aspect="auto", cmap="viridis", interpolation="nearest")
    ax.set_xticks(range(len(xa.values)), [f"{v:g}" for v in xa.values],
                  rotation=45 if len(xa.values) > 8 else 0)  # fmt: skip
    ax.set_yticks(range(len(ya.values)), [f"{v:g}" for v in ya.values])
    if z.size <= 150:  # few cells: their values, readable
        for (i, j), v in np.ndenumerate(z):
            if np.isfinite(v):
                ax.text(j, i, f"{v:,.0f}" if metric == "cost" else f"{v:.3g}", ha="center",
                        va="center", fontsize="x-small", color="white")  # fmt: skip
    _thin(ax.xaxis, len(xa.values))
    _thin(ax.yaxis, len(ya.values))
    ax.set(xlabel=analysis.axis_label(xa.path), ylabel=analysis.axis_label(ya.path),
           title=f"{name}; blank: no plan serves the demand")  # fmt: skip
    fig.colorbar(mesh, ax=ax, label=metric_label(metric))
    return fig


def _thin(axis: Any, n: int, most: int = 12) -> None:
    """Show at most ``most`` tick labels, so that they stay readable."""
    step = max(1, -(-n // most))
    for i, label in enumerate(axis.get_ticklabels()):
        label.set_visible(i % step == 0)


# --- a simulation ---------------------------------------------------------------------------
SEGMENTS = {
    "queue": "queue for a prefill pass",
    "prefill": "prefill passes",
    "transfer": "KV transfer",
    "handoff": "handoff",
    "first_token": "first token",
    "decode": "to the first token (admission, first step, return)",
}
"""The simulator's TTFT segments (``SimResult.tail_breakdown``), in words; one it adds
later is drawn under its own name."""


def plot_simulation(result: SimResult, path: Path) -> None:
    """Write ``simulation_figure`` to ``path`` (PNG, SVG, PDF)."""
    fig = simulation_figure(result)
    from matplotlib import pyplot as plt

    try:
        _save(fig, path, 110)
    finally:
        plt.close(fig)


def simulation_figure(result: SimResult) -> Any:
    """A simulation in two panels: the measured requests' TTFT distribution (its CDF on a
    logit scale, so that P90 and P99 stand apart) against the SLA's P90 and P99 bounds, the
    simulated percentiles with their 95% intervals and the analytic model's beside them;
    and the TTFT of the requests above the simulated P90 by segment (mean seconds each)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.ticker import NullFormatter

    from pddplan.simulation.run import CDF_PROBABILITIES

    fig, (cdf, parts) = plt.subplots(1, 2, figsize=(12, 4.8), layout="constrained",
                                     width_ratios=(3, 2))  # fmt: skip
    probs = [p for p in CDF_PROBABILITIES if 0 < p < 1]
    xs = [x for p, x in zip(CDF_PROBABILITIES, result.ttft_cdf_s, strict=False) if 0 < p < 1]
    if xs:
        cdf.plot(xs, probs[: len(xs)], color="C0", lw=1.6, label="simulated TTFT")
    cdf.set_yscale("logit")
    cdf.set_ylim(0.01, 0.999)
    cdf.set_yticks([0.1, 0.5, 0.9, 0.99, 0.999], ["10%", "50%", "90%", "99%", "99.9%"])
    cdf.yaxis.set_minor_formatter(NullFormatter())
    for key, q, color in (("p90", 0.9, "C1"), ("p99", 0.99, "C3")):
        bound = result.sla.get(f"ttft_{key}_s")
        if bound is not None:
            cdf.axvline(bound, color=color, linestyle="--", lw=1.2,
                        label=f"SLA {key.upper()} bound {bound:g} s", gid=f"sla-{key}")  # fmt: skip
        cdf.axhline(q, color=color, linestyle=":", lw=0.8)
        f = result.ttft_s.get(key)
        if f is None:
            continue
        err = None
        if f.low is not None and f.high is not None:
            err = [[max(f.simulated - f.low, 0.0)], [max(f.high - f.simulated, 0.0)]]
        cdf.errorbar([f.simulated], [q], xerr=err, fmt="o", color=color, capsize=3,
                     label=f"simulated {key.upper()} {f.simulated:.3g} s (95% interval)",
                     gid=f"simulated-{key}")  # fmt: skip
        if f.predicted is not None:
            cdf.plot([f.predicted], [q], marker="x", color=color, linestyle="none",
                     markersize=9, label=f"analytic {key.upper()} {f.predicted:.3g} s",
                     gid=f"analytic-{key}")  # fmt: skip
    cdf.set(xlabel="time to first token, s", ylabel="share of requests at or below",
            title=f"TTFT distribution ({result.requests:,} requests measured) against the SLA")  # fmt: skip
    cdf.title.set_fontsize("medium")
    cdf.grid(alpha=0.3)
    cdf.legend(fontsize="x-small", loc="lower right")
    segments = [(k, v) for k, v in result.tail_breakdown.items() if v == v]  # NaN: none
    left = 0.0
    for i, (key, seconds) in enumerate(segments):
        parts.barh([0], [seconds], left=left, color=f"C{i}",
                   label=f"{SEGMENTS.get(key, key.replace('_', ' '))}: {seconds:.3g} s")  # fmt: skip
        left += seconds
    bound = result.sla.get("ttft_p99_s")
    if bound is not None:
        parts.axvline(bound, color="C3", linestyle="--", lw=1.2,
                      label=f"SLA P99 bound {bound:g} s")  # fmt: skip
    parts.set_yticks([])
    parts.set(
        xlabel="mean seconds", title="TTFT of the requests above the simulated P90, by segment"
    )
    parts.title.set_fontsize("medium")
    parts.legend(fontsize="x-small", loc="upper center", bbox_to_anchor=(0.5, -0.18))
    fig.suptitle(f"{result.scenario}: {result.fleet} at {result.rate_rps:.3g} req/s "
                 f"(verdict: {result.verdict})")  # fmt: skip
    return fig


# --- the shareable report (``pddplan report``) ------------------------------------------------
WIDE = (9.0, 4.6)
"""A report figure's size in inches on a wide screen (and in Markdown)."""
NARROW = (4.4, 5.2)
"""Its size for a phone-wide screen: taller than wide, the same figures."""
REPORT_DPI = 100


def png(fig: Any, dpi: int = REPORT_DPI) -> tuple[bytes, tuple[int, int]]:
    """``fig`` as PNG bytes and their size in pixels (width, height); the figure is closed.
    No software or date in the file, so that the same figure gives the same bytes."""
    import io

    from matplotlib import pyplot as plt

    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
        w, h = fig.get_size_inches()
    finally:
        plt.close(fig)
    return buf.getvalue(), (round(w * dpi), round(h * dpi))


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    from matplotlib import pyplot as plt

    return plt


def narrow_sweep_figure(run: SweepRun, metric: str) -> Any:
    """``sweep_figure`` for a phone-wide screen: taller than wide, its title wrapped, its
    words smaller, so that nothing is cut at the edge."""
    import textwrap

    fig, _ = sweep_figure(run, metric)
    width, height = fig.get_size_inches()
    narrow = NARROW[0] * 1.15
    fig.set_size_inches(narrow, narrow * height / width * 1.6)
    title = fig.get_suptitle()
    fig.suptitle(textwrap.fill(title, 48), fontsize="small")
    for ax in fig.axes:
        ax.title.set_fontsize("small")
        ax.xaxis.label.set_fontsize("x-small")
        ax.yaxis.label.set_fontsize("x-small")
        ax.tick_params(labelsize="x-small")
    for legend in list(fig.legends):  # one series a line: long names fit the width
        handles, labels = legend.legend_handles, [t.get_text() for t in legend.get_texts()]
        legend.remove()
        fig.legend(handles, labels, loc="outside lower center", ncols=1, fontsize="x-small")
    return fig


def cost_capacity_figure(
    points: list[tuple[str, float, float]], demand_rps: float, *, size: tuple[float, float] = WIDE
) -> Any:
    """The plan and its runner-ups as points, each labelled (``points``: label, SLA
    capacity in req/s, cost in $/month; the plan first), with the demand they were
    planned for as a vertical line: what each alternative costs for the capacity it
    gives."""
    from matplotlib.ticker import StrMethodFormatter

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=size, layout="constrained")
    for k, (label, capacity, cost) in enumerate(points):
        plan = k == 0
        ax.plot([capacity], [cost], marker="*" if plan else "o", markersize=14 if plan else 8,
                linestyle="none", color="C3" if plan else "C0", gid="plan" if plan else
                f"runner-up-{k}", zorder=3)  # fmt: skip
        ax.annotate(label, (capacity, cost), xytext=(6, 6 if k % 2 else -12),
                    textcoords="offset points", fontsize="small")  # fmt: skip
    ax.axvline(demand_rps, color="gray", linestyle="--", lw=1.0, gid="demand")
    ax.annotate(f"demand {demand_rps:g} req/s", (demand_rps, 1.0), xycoords=("data", "axes fraction"),
                xytext=(4, -14), textcoords="offset points", fontsize="x-small", color="gray")  # fmt: skip
    caps = [c for _, c, _ in points] + [demand_rps]
    costs = [m for _, _, m in points]
    span = max(caps) - min(caps) or max(caps) or 1.0
    ax.set_xlim(min(caps) - 0.25 * span, max(caps) + 0.35 * span)
    spread = max(costs) - min(costs) or max(costs) or 1.0
    ax.set_ylim(min(costs) - 0.2 * spread, max(costs) + 0.2 * spread)
    ax.yaxis.set_major_formatter(StrMethodFormatter("${x:,.0f}"))
    ax.set(xlabel="SLA capacity, req/s", ylabel="cost, $/month")
    ax.grid(alpha=0.3)
    return fig


def ttft_cdf_figure(
    cdf: list[tuple[float, float]],
    bounds: dict[str, float],
    predicted: dict[str, float | None],
    rate_rps: float,
    *,
    size: tuple[float, float] = WIDE,
) -> Any:
    """The analytic TTFT distribution at ``rate_rps`` (its CDF on a logit scale, so that
    P90 and P99 stand apart, as ``simulate --plot`` draws the measured one), the SLA's
    bounds (``bounds``: ``p90``, ``p99`` in seconds) as dashed lines, and the predicted
    percentiles (``predicted``) as markers on the curve."""
    from matplotlib.ticker import NullFormatter

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=size, layout="constrained")
    inside = [(t, p) for t, p in cdf if 0.0 < p < 1.0]
    if inside:
        ax.plot(*zip(*inside, strict=True), color="C0", lw=1.8, label="predicted TTFT", gid="cdf")
    ax.set_yscale("logit")
    ax.set_ylim(0.01, 0.999)
    ax.set_yticks([0.1, 0.5, 0.9, 0.99, 0.999], ["10%", "50%", "90%", "99%", "99.9%"])
    ax.yaxis.set_minor_formatter(NullFormatter())
    for key, q, color in (("p90", 0.9, "C1"), ("p99", 0.99, "C3")):
        bound = bounds.get(key)
        if bound is not None:
            ax.axvline(bound, color=color, linestyle="--", lw=1.2,
                       label=f"SLA {key.upper()} bound {bound:g} s", gid=f"sla-{key}")  # fmt: skip
        ax.axhline(q, color=color, linestyle=":", lw=0.8)
        x = predicted.get(key)
        if x is not None:
            ax.plot([x], [q], marker="o", color=color, linestyle="none", markersize=7,
                    label=f"predicted {key.upper()} {x:.3g} s", gid=f"predicted-{key}")  # fmt: skip
    ax.set_xlim(0, cdf[-1][0] if cdf else None)
    ax.set(xlabel="time to first token, s", ylabel="share of requests at or below")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="x-small", loc="lower right")
    return fig


def utilization_figure(
    rows: list[tuple[str, float | None, float | None]],
    cap: float,
    *,
    size: tuple[float, float] = WIDE,
) -> Any:
    """How busy each pool and link is (``rows``: name, busy at the demand, busy at the SLA
    capacity, shares 0-1), as bars beside each other, against the utilization cap the
    planner keeps them under."""
    plt = _pyplot()
    height = max(size[1], 1.2 + 0.55 * len(rows))
    fig, ax = plt.subplots(figsize=(size[0], height), layout="constrained")
    ys = range(len(rows))
    demand = [(r[1] or 0.0) * 100 for r in rows]
    capacity = [(r[2] or 0.0) * 100 for r in rows]
    bars = (("at the demand", -0.2, demand), ("at the SLA capacity", 0.2, capacity))
    for k, (label, offset, values) in enumerate(bars):
        ax.barh([y + offset for y in ys], values, height=0.38, color=f"C{k}", label=label,
                gid=f"busy-{k}")  # fmt: skip
        for y, v in zip(ys, values, strict=True):
            ax.text(v + 1, y + offset, f"{v:.0f}%", va="center", fontsize="x-small")
    ax.axvline(cap * 100, color="C3", linestyle="--", lw=1.2, label=f"cap {cap:.0%}", gid="cap")
    ax.set_yticks(list(ys), [r[0] for r in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, 112)
    ax.set(xlabel="busy, % of the time")
    ax.grid(alpha=0.3, axis="x")
    ax.legend(fontsize="x-small", loc="lower center", bbox_to_anchor=(0.5, 1.0),
              ncols=3 if size[0] >= 6 else 1)  # fmt: skip
    return fig


# --- a plan over time ---------------------------------------------------------------------------
HORIZON_WIDE = (9.0, 6.6)
"""A plan over time's figure, wide: two panels, so taller than ``WIDE``."""
HORIZON_NARROW = (4.4, 7.4)
"""... and phone-wide."""
KIND_COLORS = {"sunk": "0.6", "owned": "C0", "reserved": "C2", "rented": "C1"}
"""Each way a GPU is had, its colour (``documents.HORIZON_KINDS``' order, bottom up)."""
KIND_WORDS = {
    "sunk": "sunk (inventory run)",
    "owned": "owned",
    "reserved": "reserved",
    "rented": "rented",
}


def horizon_figure(
    bars: list[tuple[int, int, float, dict[str, float]]],
    monthly_usd: list[float],
    averages: list[tuple[str, float | None]],
    *,
    size: tuple[float, float] = HORIZON_WIDE,
    title: str = "",
) -> Any:
    """A plan over time in two panels on one month axis. Above, each period (``bars``: its
    tranche's first and last month, its demand in req/s, its deployment's SLA capacity in
    req/s by how its GPUs are had, ``KIND_COLORS``' keys) as a stacked bar, side by side
    within its tranche's months in the order given, its demand a black marker. Below, the
    cost of each month (``monthly_usd``, month 1 first) as bars, and ``averages`` (a name,
    its average $/month over the horizon, None: infeasible, not drawn but named in the
    legend) as horizontal lines."""
    from matplotlib.ticker import StrMethodFormatter

    plt = _pyplot()
    narrow = size[0] < 6
    fig, (top, bottom) = plt.subplots(2, 1, figsize=size, layout="constrained", sharex=True,
                                      height_ratios=(3, 2))  # fmt: skip
    tranches: dict[tuple[int, int], list[int]] = {}
    for i, (first, last, _, _) in enumerate(bars):
        tranches.setdefault((first, last), []).append(i)
    xs, widths = [0.0] * len(bars), [0.0] * len(bars)
    for (first, last), members in tranches.items():
        span = last - first + 1
        for j, i in enumerate(members):
            xs[i] = first - 0.5 + (j + 0.5) * span / len(members)
            widths[i] = 0.8 * span / len(members)
    below = [0.0] * len(bars)
    for kind, color in KIND_COLORS.items():
        heights = [b[3].get(kind, 0.0) for b in bars]
        if not any(heights):
            continue
        top.bar(xs, heights, width=widths, bottom=below, color=color, label=KIND_WORDS[kind],
                gid=f"capacity-{kind}")  # fmt: skip
        below = [a + h for a, h in zip(below, heights, strict=True)]
    top.plot(xs, [b[2] for b in bars], linestyle="none", marker="_", markersize=9 if narrow else 12,
             markeredgewidth=2, color="black", label="demand (busiest hour)", gid="demand")  # fmt: skip
    for first, _ in list(tranches)[1:]:
        for ax in (top, bottom):
            ax.axvline(first - 0.5, color="0.85", lw=0.8, zorder=0)
    highest = max([*below, *(b[2] for b in bars), 0.0])
    top.set(ylabel="SLA capacity, req/s", ylim=(0, highest * 1.08 or 1.0))
    top.grid(alpha=0.3, axis="y")
    top.legend(fontsize="x-small", loc="lower center", bbox_to_anchor=(0.5, 1.0),
               ncols=2 if narrow else 5)  # fmt: skip
    months = list(range(1, len(monthly_usd) + 1))
    bottom.bar(months, monthly_usd, width=0.8, color="C4", alpha=0.75, label="this plan, each month",
               gid="monthly")  # fmt: skip
    styles = ("-", "--", ":", "-.")
    for k, (name, average) in enumerate(averages):
        if average is None:
            bottom.plot([], [], linestyle="none", label=f"{name}: infeasible")
            continue
        bottom.axhline(average, color="black" if k == 0 else f"C{k + 5}", lw=1.3,
                       linestyle=styles[k % len(styles)],
                       label=f"{name}: ${average:,.0f}/month on average", gid=f"average-{k}")  # fmt: skip
    bottom.yaxis.set_major_formatter(StrMethodFormatter("${x:,.0f}"))
    bottom.set(ylabel="cost, $/month", ylim=(0, None))
    bottom.grid(alpha=0.3, axis="y")
    handles, labels = bottom.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=1 if narrow else 2,
               fontsize="x-small")  # fmt: skip
    centers = [(first + last) / 2 for first, last in tranches]
    bottom.set_xticks(centers, [f"{a}-{b}" if a != b else f"{a}" for a, b in tranches],
                      rotation=45 if narrow and len(tranches) > 4 else 0)  # fmt: skip
    bottom.set_xlabel("months (each tranche's)", fontsize="small")
    if monthly_usd:
        bottom.set_xlim(0.5, len(monthly_usd) + 0.5)
    if narrow:
        for ax in (top, bottom):
            ax.tick_params(labelsize="x-small")
            ax.yaxis.label.set_fontsize("x-small")
    if narrow:
        bottom.xaxis.label.set_fontsize("x-small")
    if title:
        import textwrap

        fig.suptitle(textwrap.fill(title, 48) if narrow else title,
                     fontsize="small" if narrow else "medium")  # fmt: skip
    return fig


def write_figure(fig: Any, path: Path, dpi: int = 110) -> None:
    """Write ``fig`` to ``path`` (PNG, SVG, PDF, by its suffix) atomically, and close it."""
    from matplotlib import pyplot as plt

    try:
        _save(fig, path, dpi)
    finally:
        plt.close(fig)
