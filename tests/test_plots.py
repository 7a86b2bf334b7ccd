"""Plots that tell the truth (issue 51, item 5), checked on the figures' data, not pixels:
planned points drawn as points (a line only where the value between them is known, a step
only where one was located), costs per month as the tables give them, axes and titles that
name each value as a person reads it, break-evens on the panel of the measure that judges
them, series that coincide marked, and ``simulate --plot``'s TTFT distribution against the
SLA beside its breakdown by segment."""

from __future__ import annotations

import json

import matplotlib
import pytest
from conftest import SMALL, run_main

import pddplan
from pddplan import units
from pddplan.report import plots
from pddplan.sweeps.axes import parse_vary
from pddplan.sweeps.engine import SweepJob, SweepRun
from pddplan.sweeps.points import ArchResult, PointResult


def _row(name: str, kind: str, cost: float, capacity: float, fleet: str) -> ArchResult:
    return ArchResult(name, kind, "ok", cost_per_hour_usd=cost, sla_capacity_rps=capacity,
                      bcr=capacity / cost, ttft_p99_s=1.0, fleet=fleet)  # fmt: skip


def _run(path: str, rows_at: dict[float, list[ArchResult]]) -> SweepRun:
    values = ",".join(f"{v:g}" for v in rows_at)
    job = SweepJob("s.yaml", "0", (parse_vary(f"{path}={values}"),))
    points = [PointResult(i, {path: v}, "ok", None, rows) for i, (v, rows) in
              enumerate(rows_at.items())]  # fmt: skip
    return SweepRun(job, points, len(points))


def _bathtub() -> SweepRun:
    """PDD's plan is the intra-DC H100 one up to a hit of 0.5 (the two series coincide
    there) and intra-DC L40S has the best BCR; at 0.9 PDD's does: one break-even, judged by
    BCR, between 0.5 and 0.9."""
    at = {}
    for hit, pdd_cap in ((0.0, 50.0), (0.5, 50.0), (0.9, 90.0)):
        at[hit] = [_row("PDD", "pdd", 100.0, pdd_cap, "F-pdd"),
                   _row("intra-DC h100", "intra-dc-homogeneous", 100.0, 50.0, "F-intra"),
                   _row("intra-DC l40s", "intra-dc-homogeneous", 50.0, 35.0, "F-l40s")]  # fmt: skip
    return _run("workload.prefix_hit.mean", at)


def test_lines_are_points_per_month_with_human_axes_and_break_evens_on_the_judging_panel():
    fig, kind = plots.sweep_figure(_bathtub(), "bcr")
    assert kind == "lines against mean prefix hit rate"
    assert "workload.prefix_hit" not in fig._suptitle.get_text()
    axes = {ax.get_title().split(" (")[0]: ax for ax in fig.axes}
    bcr, cost = axes["BCR"], axes["cost"]
    assert "judges the winner" in bcr.get_title() and "req/s per $/hour" in bcr.get_ylabel()
    assert cost.get_ylabel() == "cost, $/month"
    month = units.HOURS_PER_MONTH
    assert {line.get_ydata()[0] for line in cost.get_lines()} == {100.0 * month, 50.0 * month}
    for ax in fig.axes:
        assert ax.get_xlabel() in ("", "mean prefix hit rate")
        for line in ax.get_lines():  # every planned point a marker, never a held step
            assert line.get_marker() not in (None, "None", "") and line.get_drawstyle() == "default"
    # the break-even, judged by BCR, on the BCR panel alone: its list and its interval
    assert [t.get_gid() for t in bcr.texts] == ["break-evens"]
    assert "0.5-0.9: intra-DC l40s -> PDD" in bcr.texts[0].get_text()
    spans = [p for ax in fig.axes for p in ax.patches if p.get_gid() == "break-even"]
    assert len(spans) == 1 and spans[0].axes is bcr
    assert not any(
        t.get_gid() == "break-evens" for ax in fig.axes if ax is not bcr for t in ax.texts
    )
    # where PDD's series is the intra-DC one at every point, the panel says so; the one drawn
    # later is smaller, another marker, so the one below shows around it
    notes = {ax.get_title(): [t.get_text() for t in ax.texts if t.get_gid() == "coincide"]
             for ax in fig.axes}  # fmt: skip
    assert notes["cost"] == ["same values here:\nintra-DC h100 = PDD"]
    assert notes["SLA capacity"] == notes["BCR (judges the winner)"] == []  # they part at 0.9
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "PDD", "intra-DC h100", "intra-DC l40s"]  # fmt: skip
    big, small, _ = cost.get_lines()
    assert big.get_markersize() > small.get_markersize() and big.get_marker() != small.get_marker()
    matplotlib.pyplot.close(fig)


def test_cost_against_demand_draws_points_and_lines_only_where_the_cost_is_known():
    """4 and 8 req/s cost the same: flat between them. 8 to 12 differ: the step is
    somewhere between them, not drawn. 12 to 12.05 (0.4%) differ: a step located there.
    Above 12.05 nothing serves the demand: nothing is drawn past it."""
    at = {r: [_row("PDD", "pdd", c, 20.0, f"F{c}")] for r, c in
          ((4.0, 10.0), (8.0, 10.0), (12.0, 20.0), (12.05, 30.0))}  # fmt: skip
    at[16.0] = [ArchResult("PDD", "pdd", "infeasible", reason="no link fast enough")]
    fig, kind = plots.sweep_figure(_run("workload.arrival_rps", at), "cost")
    assert kind == "minimum cost against demand"
    (ax,) = fig.axes
    assert ax.get_ylabel() == "minimum cost, $/month" and ax.get_xlabel() == "demand, req/s"
    month = units.HOURS_PER_MONTH
    points, *joins = ax.get_lines()
    assert list(points.get_xdata()) == [4.0, 8.0, 12.0, 12.05]
    assert list(points.get_ydata()) == [10 * month, 10 * month, 20 * month, 30 * month]
    assert points.get_linestyle() == "None" and points.get_drawstyle() == "default"
    drawn = sorted((tuple(j.get_xdata()), tuple(j.get_ydata())) for j in joins)
    assert drawn == [((4.0, 8.0), (10 * month, 10 * month)),  # flat: known
                     ((12.05, 12.05), (20 * month, 30 * month))]  # the located step  # fmt: skip
    assert not any(8.0 < x < 12.0 for j in joins for x in j.get_xdata())  # no guess
    matplotlib.pyplot.close(fig)


def test_the_heatmap_is_per_month_and_written(tmp_path):
    rows = [_row("PDD", "pdd", 10.0, 20.0, "F")]
    job = SweepJob("s.yaml", "0", (parse_vary("sla.ttft_p99_s=1,2"), parse_vary("links[0].rtt_ms=10,20")))  # fmt: skip
    points = [PointResult(i, {"sla.ttft_p99_s": a, "links[0].rtt_ms": b}, "ok", None, rows)
              for i, (a, b) in enumerate(((1, 10), (1, 20), (2, 10), (2, 20)))]  # fmt: skip
    run = SweepRun(job, points, 4)
    fig, kind = plots.sweep_figure(run, "cost")
    assert kind == "heatmap of cost"
    heat, bar = fig.axes
    assert heat.get_xlabel() == "round-trip time (links[0]), ms"
    assert heat.get_ylabel() == "TTFT P99 bound, s" and bar.get_ylabel() == "cost, $/month"
    assert heat.images[0].get_array().max() == pytest.approx(10 * units.HOURS_PER_MONTH)
    matplotlib.pyplot.close(fig)
    png = tmp_path / "heat.png"
    assert plots.plot_sweep(run, png, "cost") == "heatmap of cost"
    assert png.stat().st_size > 10_000


def test_a_simulation_is_drawn_against_the_sla_with_its_ttft_by_segment(tmp_path):
    problem = pddplan.load_scenario(SMALL)
    plan = pddplan.solve(problem)
    result = pddplan.simulate(problem, plan.fleet, requests=2000)
    fig = plots.simulation_figure(result)
    cdf, parts = fig.axes
    assert cdf.get_yscale() == "logit" and cdf.get_xlabel() == "time to first token, s"
    by_gid = {line.get_gid(): line for line in cdf.get_lines() if line.get_gid()}
    for key in ("p90", "p99"):  # the SLA's bound, where the scenario puts it
        assert (
            list(by_gid[f"sla-{key}"].get_xdata())
            == [problem.scenario.sla.model_dump()[f"ttft_{key}_s"]] * 2
        )
        assert by_gid[f"analytic-{key}"].get_xdata()[0] == pytest.approx(
            result.ttft_s[key].predicted
        )
    curve = next(line for line in cdf.get_lines() if line.get_label() == "simulated TTFT")
    xs, ys = list(curve.get_xdata()), list(curve.get_ydata())
    assert xs == sorted(xs) and ys == sorted(ys) and 0.9 in ys and 0.99 in ys
    p90 = xs[ys.index(0.9)]  # the distribution drawn is the one the percentiles come from
    assert p90 == pytest.approx(result.ttft_s["p90"].simulated, rel=0.05)
    bars = parts.patches
    assert len(bars) == len(result.tail_breakdown)
    assert sum(b.get_width() for b in bars) == pytest.approx(sum(result.tail_breakdown.values()))
    legend = [t.get_text() for t in parts.get_legend().get_texts()]
    assert any(t.startswith("KV transfer") for t in legend)
    assert any(t.startswith("prefill passes") for t in legend)
    matplotlib.pyplot.close(fig)


@pytest.mark.slow
def test_simulate_plot_writes_the_figure(tmp_path):
    plan = tmp_path / "plan.json"
    assert run_main("solve", str(SMALL), "--out", str(plan), "--json").exit_code == 0
    png = tmp_path / "sim.png"
    res = run_main("simulate", str(SMALL), "--plan", str(plan), "--requests", "2000",
                   "--plot", str(png), "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert png.stat().st_size > 5_000 and f"wrote {png}" in res.stderr  # an empty figure: ~2 kB
    json.loads(res.stdout)  # the figure changes nothing on stdout
    bad = run_main("simulate", str(SMALL), "--plan", str(plan), "--plot", str(tmp_path / "x.txt"))
    assert bad.exit_code == 2 and "no image suffix" in bad.stderr
