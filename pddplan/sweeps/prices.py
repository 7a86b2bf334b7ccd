"""A price sweep of one chip (``pddplan compare --price-sweep``): every architecture
re-planned at equal demand at each price, and the price where PDD stops being cheaper than
the cheapest baseline, bisected. Each point is a ``compare`` at equal demand on the
scenario with that price (``with_price``); the counts and capacities depend on no price, so
the points after the first only re-solve (``pddplan.model.problem.NON_PHYSICAL``)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from pddplan.errors import InputError
from pddplan.model.problem import Problem
from pddplan.plan.compare import compare
from pddplan.progress import Progress
from pddplan.spec.scenario import Scenario


@dataclass(frozen=True)
class SweepPoint:
    price: float
    pdd_cost_per_hour: float | None
    """PDD's equal-demand cost at this price."""
    baseline: str | None
    """The cheapest baseline at this price (hypothetical excluded)."""
    baseline_cost_per_hour: float | None

    @property
    def pdd_wins(self) -> bool:
        return self.pdd_cost_per_hour is not None and (
            self.baseline_cost_per_hour is None
            or self.pdd_cost_per_hour < self.baseline_cost_per_hour
        )


@dataclass(frozen=True)
class Sweep:
    chip: str
    points: list[SweepPoint]
    break_even: float | None
    """The price (USD per GPU-hour) where PDD's equal-demand cost meets the cheapest
    baseline's; None when PDD wins, or loses, across the whole sweep."""
    bracket: tuple[float, float] | None
    """The sweep prices either side of the break-even."""


BREAK_EVEN_STEPS = 6
"""Bisection steps between the two sweep prices around the break-even (step / 64)."""


def with_price(scenario: Scenario, chip: str, price: float) -> Scenario:
    """``scenario`` with ``chip`` at ``price`` USD per GPU-hour, all in (a bought chip is
    swept as if rented at that price)."""
    prices = dict(scenario.prices_usd_per_gpu_hour) | {chip: price}
    bought = {c: b for c, b in scenario.gpu_purchase.items() if c != chip}
    return scenario.model_copy(update={"prices_usd_per_gpu_hour": prices, "gpu_purchase": bought})


def price_sweep(
    problem: Problem,
    chip: str,
    prices: list[float],
    *,
    solver: str | None = None,
    time_limit_s: float | None = None,
    progress: Progress | None = None,
) -> Sweep:
    """Re-plan every architecture at equal demand at each price of ``chip``, then bisect
    for the price at which PDD stops being cheaper than the cheapest baseline.
    ``progress`` (``pddplan.progress``) hears each price before it is planned, with the
    prices done and the prices in all (the grid; with ``BREAK_EVEN_STEPS`` more once a
    break-even is bracketed)."""
    if not prices:
        raise InputError("the price sweep has no points")
    if chip not in problem.hardware.chips:
        raise InputError(f"price sweep: unknown chip '{chip}'")

    planned: list[float] = []
    total = len(prices)

    def point(price: float) -> SweepPoint:
        if progress is not None:
            progress(len(planned), total, f"{chip} at ${price:.4g}/GPU-hour")
        planned.append(price)
        c = compare(
            problem.with_scenario(with_price(problem.scenario, chip, price)),
            at="demand",
            solver=solver,
            time_limit_s=time_limit_s,
            explain=False,
        ).section("demand")
        pdd = next(x for x in c.rows if x.kind == "pdd")
        base = next((x for x in c.ranked if x.kind not in ("pdd", "hypothetical")), None)
        return SweepPoint(
            price,
            pdd.cost_per_hour if pdd.ok else None,
            base.label if base else None,
            base.cost_per_hour if base else None,
        )

    points = [point(p) for p in sorted(prices)]
    bracket = next(
        ((a.price, b.price) for a, b in itertools.pairwise(points) if a.pdd_wins != b.pdd_wins),
        None,
    )
    if bracket is None:
        if progress is not None:
            progress(total, total, "done")
        return Sweep(chip, points, None, None)
    total += BREAK_EVEN_STEPS
    lo, hi = bracket
    lo_wins = next(p for p in points if p.price == lo).pdd_wins
    for _ in range(BREAK_EVEN_STEPS):
        mid = (lo + hi) / 2
        if point(mid).pdd_wins == lo_wins:
            lo = mid
        else:
            hi = mid
    if progress is not None:
        progress(total, total, "done")
    return Sweep(chip, points, (lo + hi) / 2, bracket)


__all__ = ["BREAK_EVEN_STEPS", "Sweep", "SweepPoint", "price_sweep", "with_price"]
