"""The built-in studies (``pddplan sweep --study NAME``).

- ``bathtub``: the mean prefix hit from 0 to 0.99 (``workload.prefix_hit.mean``, shape
  kept), every architecture; where PDD wins on BCR. PDD's case rests on the hit: at low
  hits every architecture prefills most tokens and the WAN carries whole contexts.
- ``price-premium``: the main-decode chip's price from 1.0 to 1.6 times the prefill
  chip's; the break-even where PDD stops winning.
- ``demand``: the exact steps of the minimum cost as a function of demand: a coarse grid of
  rates, then bisection between every two rates whose fleets differ, down to
  ``DEMAND_TOLERANCE``; each step names what is added.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from pddplan import units
from pddplan.errors import InputError
from pddplan.model.problem import Problem
from pddplan.progress import Progress
from pddplan.spec.choices import MIN_COST
from pddplan.spec.status import PointStatus, RowStatus
from pddplan.sweeps.axes import Axis, parse_vary
from pddplan.sweeps.engine import STOPPED, SweepJob, SweepRun, journal_in, scenario_digest
from pddplan.sweeps.journal import Journal
from pddplan.sweeps.points import ArchResult, PointResult, PointRunner, Settings

STUDIES = ("bathtub", "price-premium", "demand")
COMPARED = ("pdd", "cross-dc-naive", "intra-dc-homogeneous", "intra-dc-heterogeneous")
"""The architectures a study compares by default (the hypothetical datacenter left out)."""
BATHTUB_HITS = "0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.85,0.9,0.93,0.95,0.97,0.99"
PREMIUMS = tuple(round(1.0 + 0.05 * i, 2) for i in range(13))
"""The MD chip's price over the prefill chip's: 1.0 to 1.6."""
DEMAND_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)
"""The demand study's first grid, times the scenario's demand."""
DEMAND_TOLERANCE = 0.005
"""The demand study bisects a step down to this relative width of demand."""
MAX_DEMAND_POINTS = 400


def _served(p: PointResult) -> ArchResult | None:
    """A point's first row with a plan that serves the demand, if the point was planned."""
    if p.status != PointStatus.OK:
        return None
    return next((r for r in p.results if r.status == RowStatus.OK), None)


def study_axes(problem: Problem, name: str) -> tuple[list[str], str]:
    """The ``--vary`` axes of a grid study and the metric it is judged by."""
    s = problem.scenario
    if name == "bathtub":
        return [f"workload.prefix_hit.mean={BATHTUB_HITS}"], "bcr"
    if name == "price-premium":
        prefill = next((c for _, c in s.chips_for("prefill")), None)
        decode = next((c for _, c in s.chips_for("main_decode") if c != prefill), None)
        if prefill is None or decode is None:
            raise InputError(
                f"--study price-premium: scenario {s.name} needs a main-decode chip other than "
                "its prefill chip to price against it"
            )
        base = (
            s.prices_usd_per_gpu_hour.get(prefill)
            or problem.hardware.chips[prefill].price_usd_per_hour
        )
        if base is None:
            raise InputError(
                f"--study price-premium: {prefill} has no price (prices_usd_per_gpu_hour)"
            )
        values = ",".join(f"{round(r * base, 6):g}" for r in PREMIUMS)
        return [f"prices_usd_per_gpu_hour.{decode}={values}"], "cost"
    raise InputError(f"--study: unknown study '{name}'; choose one of {', '.join(STUDIES)}")


def demand_study(
    problem: Problem,
    settings: Settings,
    *,
    vary: list[str],
    scenario_label: str,
    journal: Path | None = None,
    journal_dir: Path | None = None,
    resume: bool = False,
    hold_journal: bool = False,
    progress: Progress | None = None,
) -> SweepRun:
    """The steps of the minimum cost against demand (module docstring): every rate planned,
    in rate order, and a note per step saying where it lies and what it adds.

    Each rate depends on the ones before, so they are planned here, one at a time. With
    ``journal``, each planned rate is appended to it as a sweep's point is; ``resume``
    takes the journalled rates instead of planning them again (the bisection then walks
    the same rates); ``journal_dir``: a folder to keep it in where ``journal`` is not
    given, named by the study's fingerprint (``engine.journal_in``). Ctrl-C ends the study
    with ``interrupted`` set. ``progress`` (``pddplan.progress``) hears the rates planned,
    of the first grid's and, once it bisects, of those planned and the steps left to
    bisect (each at least one more rate)."""
    path = "workload.arrival_rps"
    if vary:
        axes = [parse_vary(v) for v in vary]
        if len(axes) != 1 or axes[0].path != path:
            raise InputError(f"--study demand takes at most one --vary, of {path} (its first grid)")
        rates = sorted({float(v) for v in axes[0].values})
    else:
        demand = problem.scenario.workload.arrival_rps or 0.0
        if not demand > 0:
            raise InputError("--study demand needs workload.arrival_rps above 0, or --vary it")
        rates = [round(demand * f, 9) for f in DEMAND_FACTORS]
    if any(not r > 0 for r in rates):
        raise InputError(f"--study demand: rates must be above 0, got {min(rates):g}")
    settings = replace(settings, objective=MIN_COST)
    runner = PointRunner(problem, settings)
    start = time.perf_counter()
    first = Axis(path, tuple(rates), "demand study")
    job = SweepJob(scenario_label, scenario_digest(problem), (first,), False, settings)
    if journal is None and journal_dir is not None:
        journal = journal_in(journal_dir, job)

    def on_grid(point: PointResult) -> bool:  # a rate the bisection may plan: any above 0
        rate = point.values.get(path)
        return (point.index >= 0 and set(point.values) == {path}
                and isinstance(rate, int | float) and not isinstance(rate, bool)
                and math.isfinite(rate) and rate > 0)  # fmt: skip

    log = (Journal(journal, job.identity(), resume=resume, on_grid=on_grid)
           if journal is not None else None)  # fmt: skip
    seen: dict[float, PointResult] = {}
    if log is not None:
        seen = {float(p.values[path]): p for _, p in sorted(log.done.items())}
    resumed = len(seen)
    todo: list[tuple[float, float]] = []

    def tell() -> None:
        if progress is not None:
            left = len([r for r in rates if r not in seen]) + len(todo)
            progress(len(seen), len(seen) + left, f"{len(todo):,} steps to bisect")

    def at(rate: float) -> PointResult:
        if rate not in seen:
            try:
                point = runner.run(len(seen), {path: rate})
            except KeyboardInterrupt:
                if log is not None:
                    log.add(PointResult(len(seen), {path: rate}, PointStatus.INTERRUPTED, STOPPED))
                raise
            seen[rate] = point
            if log is not None:
                log.add(point)
            tell()
        return seen[rate]

    def fleet(rate: float) -> str | None:
        """What the plan at ``rate`` buys (a step of cost is a change of it; the router
        may differ at equal cost)."""
        r = _served(at(rate))
        return None if r is None else r.hardware or r.fleet

    todo += itertools.pairwise(rates)
    steps: list[tuple[float, float]] = []
    interrupted = False
    tell()
    try:
        while todo:
            lo, hi = todo.pop()
            if fleet(lo) == fleet(hi):
                continue
            if hi / lo - 1 <= DEMAND_TOLERANCE or len(seen) >= MAX_DEMAND_POINTS:
                steps.append((lo, hi))
                continue
            mid = float(f"{math.sqrt(lo * hi):.6g}")
            if mid in (lo, hi):
                steps.append((lo, hi))
                continue
            todo += [(lo, mid), (mid, hi)]
    except KeyboardInterrupt:
        interrupted = True
    except BaseException:
        if log is not None:
            log.close()
        raise
    if progress is not None and not interrupted:
        progress(len(seen), len(seen), "done")
    if log is not None and not hold_journal:
        log.close()
    ordered = sorted(seen)
    points = [replace(seen[r], index=i) for i, r in enumerate(ordered)]
    axis = Axis(path, tuple(ordered), "demand study")
    job = replace(job, axes=(axis,))
    notes = [_step_note(seen[lo], seen[hi], lo, hi) for lo, hi in sorted(steps)]
    total = len(points) + (1 if interrupted else 0)  # at least the rate it was planning
    return SweepRun(job, points, total, interrupted, resumed,
                    wall_s=time.perf_counter() - start, notes=notes,
                    pass_times=problem.engine_label, warnings=list(log.warnings) if log else [],
                    journal=log if hold_journal else None)  # fmt: skip


def _step_note(a: PointResult, b: PointResult, lo: float, hi: float) -> str:
    def first(p: PointResult) -> Any:
        return _served(p)

    ra, rb = first(a), first(b)
    where = f"step between {lo:g} and {hi:g} req/s"
    if rb is None:
        return (
            f"{where}: no plan above it ({b.reason or (b.results[0].reason if b.results else '')})"
        )
    if ra is None:
        return f"{where}: first plan {rb.fleet}"
    added = _added(ra.hardware or ra.fleet or "", rb.hardware or rb.fleet or "")
    month = units.HOURS_PER_MONTH
    return (f"{where}: ${ra.cost_per_hour_usd * month:,.0f} -> ${rb.cost_per_hour_usd * month:,.0f}"
            f"/month; {added}")  # fmt: skip


def _added(before: str, after: str) -> str:
    """What ``after``'s pools, link and cache have that ``before``'s do not, in words
    (``hardware_line``s: the pools, then the link, then the cache, joined by ``; ``)."""

    def parts(text: str) -> set[str]:
        pools, *rest = text.split("; ")
        return {p.strip() for p in pools.split(" + ") if p.strip()} | {
            x if x.startswith("MD cache") else f"link {x}" for x in rest if x
        }

    old, new = parts(before), parts(after)
    gone, came = sorted(old - new), sorted(new - old)
    if not gone and not came:
        return "same pools, other routing"
    return "; ".join([*(f"+ {c}" for c in came), *(f"- {g}" for g in gone)])
