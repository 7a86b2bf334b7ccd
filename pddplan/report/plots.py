"""Images of a fitted trace (``pddplan workload show --plot``). The only module that
imports matplotlib, and only when a plot is asked for."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pddplan.atomic import atomic_file

if TYPE_CHECKING:
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
