"""Images of a fitted trace (``pddplan workload show --plot``) and of sweeps (``pddplan sweep
--plot``). The only module that imports matplotlib, and only when a plot is asked for."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pddplan import units
from pddplan.atomic import atomic_file
from pddplan.spec.status import PointStatus

if TYPE_CHECKING:
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
def plot_sweep(run: SweepRun, path: Path, metric: str) -> str:
    """Write the figure that fits the sweep to ``path`` and say which it drew: one varied
    value -> lines of BCR, cost, SLA capacity and TTFT P99 against it, one per architecture,
    break-even points marked; the demand -> cost (and GPUs) against demand, as steps; two
    values -> a heatmap of ``metric`` for the first architecture."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from pddplan.sweeps import analysis

    axes = run.job.axes
    if len(axes) == 1 and axes[0].path == "workload.arrival_rps":
        fig, kind = _demand_figure(plt, run), "cost against demand"
    elif len(axes) == 1 or run.job.zipped:
        fig, kind = _lines_figure(plt, run, metric), "lines against " + axes[0].path
    elif len(axes) == 2:
        fig, kind = _heatmap_figure(plt, run, metric), f"heatmap of {metric}"
    else:
        raise ValueError("a plot takes one or two varied values")
    fig.suptitle(
        f"{run.job.scenario}: {analysis.METRICS[metric][1] if 'heatmap' in kind else kind}"
    )
    with atomic_file(path) as f:
        fig.savefig(f, format=Path(path).suffix.lstrip(".").lower() or "png", dpi=120)
    plt.close(fig)
    return kind


def _series(
    run: SweepRun, architecture: str, metric: str
) -> tuple[list[float], list[float], list[bool]]:
    """The points where ``architecture`` has a value of ``metric``: x, y, and whether the
    search stopped early there (a work budget or the time limit)."""
    from pddplan.sweeps import analysis

    path = run.job.axes[0].path
    xs, ys, limited = [], [], []
    for p in run.points:
        v = analysis.value_of(p, architecture, metric) if p.status == PointStatus.OK else None
        if v is not None:
            xs.append(float(p.values[path]))
            ys.append(v)
            limited.append(analysis.stopped_early(p, architecture))
    return xs, ys, limited


def _lines_figure(plt: Any, run: SweepRun, metric: str) -> Any:
    from pddplan.sweeps import analysis

    fig, grid = plt.subplots(2, 2, figsize=(11, 7.5), layout="constrained", sharex=True)
    path = run.job.axes[0].path
    names = analysis.architectures(run)
    evens = analysis.break_evens(run, metric)
    for ax, m in zip(grid.flat, ("bcr", "cost", "capacity", "ttft_p99"), strict=True):
        for k, name in enumerate(names):
            xs, ys, limited = _series(run, name, m)
            if xs:
                # PDD on top and wider: where its plan is a baseline's (one datacenter) the
                # lines coincide, and PDD's must stay visible
                pdd = name == "PDD"
                (line,) = ax.plot(xs, ys, marker=".", label=name, color=f"C{k}",
                                  lw=2.4 if pdd else 1.4, zorder=3 if pdd else 2)  # fmt: skip
                stopped = [(x, y) for x, y, t in zip(xs, ys, limited, strict=True) if t]
                if stopped:  # hollow: the best found, not a proven optimum
                    ax.scatter(*zip(*stopped, strict=True), s=70, facecolors="none",
                               edgecolors=line.get_color(), zorder=3)  # fmt: skip
        for b in evens:
            ax.axvline((float(b.lo) + float(b.hi)) / 2, color="gray", linestyle="--", lw=1)
        ax.set(ylabel=analysis.METRICS[m][1])
        ax.grid(alpha=0.3)
    for ax in grid[1]:
        ax.set(xlabel=analysis.axis_label(path))
    grid[0][0].legend(fontsize="small")
    if any(analysis.stopped_early(p, n) for p in run.points for n in names):
        grid[1][0].text(0.02, 0.98, "hollow: the search stopped early (best found)",
                        transform=grid[1][0].transAxes, va="top", fontsize="x-small")  # fmt: skip
    if evens:
        more = [f"... {len(evens) - 4} more (the table lists them)"] if len(evens) > 4 else []
        grid[0][1].text(0.02, 0.98, "dashed: break-even\n" + "\n".join(
            [f"{b.lo:g}-{b.hi:g}: {b.before} -> {b.after}" for b in evens[:4]] + more),
            transform=grid[0][1].transAxes, va="top", fontsize="x-small")  # fmt: skip
    return fig


def _demand_figure(plt: Any, run: SweepRun) -> Any:
    from matplotlib.ticker import StrMethodFormatter

    from pddplan.sweeps import analysis

    fig, ax = plt.subplots(figsize=(9, 5), layout="constrained")
    path = run.job.axes[0].path
    served = []
    for name in analysis.architectures(run):
        xs, ys, _ = _series(run, name, "cost")
        if xs:
            ax.step(
                xs, [y * units.HOURS_PER_MONTH for y in ys], where="post", marker=".", label=name
            )
            served.append(max(xs))
    # each step: where the first architecture's fleet changes (the table names the fleets)
    first = analysis.architectures(run)[:1]
    fleets = [(float(p.values[path]), analysis.fleet_of(p, first[0])) for p in run.points if first]
    steps = [(a, b) for (a, fa), (b, fb) in itertools.pairwise(fleets)
             if fa != fb and fa is not None and fb is not None]  # fmt: skip
    for k, (a, b) in enumerate(steps[:6]):
        ax.axvline((a + b) / 2, color="gray", linestyle=":", lw=1)
        ax.annotate(f"{(a + b) / 2:.4g} req/s", ((a + b) / 2, 0.02 + 0.06 * k),
                    xycoords=("data", "axes fraction"), fontsize="x-small", rotation=0)  # fmt: skip
    top = max(float(p.values[path]) for p in run.points)
    if served and max(served) < top:  # the rates nothing serves: shaded, the axis cut short
        right = min(top, max(served) * 1.15)
        ax.axvspan(max(served), right, color="gray", alpha=0.15, lw=0,
                   label=f"no plan above {max(served):.4g} req/s (asked up to {top:.4g})")  # fmt: skip
        ax.set_xlim(right=right)
    ax.yaxis.set_major_formatter(StrMethodFormatter("${x:,.0f}"))
    ax.set(xlabel=analysis.axis_label("workload.arrival_rps"), ylabel="min cost, USD/month")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="center left")
    return fig


def _heatmap_figure(plt: Any, run: SweepRun, metric: str) -> Any:
    import numpy as np

    from pddplan.sweeps import analysis

    ya, xa = run.job.axes  # the first axis down, the second across
    name = analysis.architectures(run)[0]
    z = np.full((len(ya.values), len(xa.values)), np.nan)
    for p in run.points:
        if p.status != PointStatus.OK:
            continue
        v = analysis.value_of(p, name, metric)
        if v is not None:
            z[ya.values.index(p.values[ya.path]), xa.values.index(p.values[xa.path])] = v
    fig, ax = plt.subplots(figsize=(9, 6.5), layout="constrained")
    mesh = ax.imshow(z, origin="lower", aspect="auto", cmap="viridis", interpolation="nearest")
    ax.set_xticks(range(len(xa.values)), [f"{v:g}" for v in xa.values],
                  rotation=45 if len(xa.values) > 8 else 0)  # fmt: skip
    ax.set_yticks(range(len(ya.values)), [f"{v:g}" for v in ya.values])
    if z.size <= 150:  # few cells: their values, readable
        for (i, j), v in np.ndenumerate(z):
            if np.isfinite(v):
                ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize="x-small",
                        color="white")  # fmt: skip
    _thin(ax.xaxis, len(xa.values))
    _thin(ax.yaxis, len(ya.values))
    ax.set(xlabel=analysis.axis_label(xa.path), ylabel=analysis.axis_label(ya.path),
           title=f"{name}; blank: no plan serves the demand")  # fmt: skip
    fig.colorbar(mesh, ax=ax, label=analysis.METRICS[metric][1])
    return fig


def _thin(axis: Any, n: int, most: int = 12) -> None:
    """Show at most ``most`` tick labels, so that they stay readable."""
    step = max(1, -(-n // most))
    for i, label in enumerate(axis.get_ticklabels()):
        label.set_visible(i % step == 0)
