"""The horizon cut into periods: tranches (the months purchases start in) x groups of hours
of the day with about the same load.

The rule, deterministic (docs/scenarios.md#horizon):

1. **Tranches.** The ``months`` of the horizon are cut into tranches of ``tranche`` months
   from month 1 (the last one shorter when they do not divide); purchases and reservations
   start at a tranche's first month and persist, so each tranche is **sized for its last
   month**, the busiest one while demand grows.
2. **Hour groups.** In each tranche, the 24 hours of the day are first split by the overlays
   that apply to them in that last month (hours with different workloads never share a
   period); within each part, hours are taken from the busiest down (ties: the earlier hour
   first). The first opens a group; each next hour joins it when its factor is above
   ``(1 - group_share) x`` the group's highest (below it by less than ``group_share`` of it),
   or equals it, and otherwise opens the next group. This greedy cut gives the fewest groups in which no hour is sized
   more than ``group_share`` above its own load, and it yields at most
   ``1 + floor(ln(f_min / f_max) / ln(1 - group_share))`` groups per part for positive
   factors.
3. **Periods.** Each (tranche, group) is one period, sized for its highest hour in the
   tranche's last month: ``rps = arrival_rps x max factor x (1 + growth)^(last month - 1)``.
   It stands for ``len(hours) x 730 / 24`` hours a month (``hours_per_month``), over the
   tranche's months (``weight_hours``, its weight in cost: a rented GPU in it costs
   ``$/GPU-hour x weight_hours``). Periods are listed by tranche, then by peak rate (busiest
   first), then by first hour.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pddplan.spec.horizon import HOURS_PER_DAY, TRANCHE_LETTER, Horizon
from pddplan.spec.scenario import Scenario, Workload, WorkloadVariant, resolve_variant
from pddplan.units import HOURS_PER_MONTH


@dataclass(frozen=True)
class Tranche:
    """A run of months that purchases and reservations start at the first of."""

    index: int
    """0-based position in the horizon."""
    first_month: int
    """Its first month, 1-based (month 1 is the scenario's first month)."""
    last_month: int
    """Its last month, 1-based: the month its periods are sized for."""

    @property
    def months(self) -> int:
        """Months it spans (the tranche length; the last tranche may be shorter)."""
        return self.last_month - self.first_month + 1

    @property
    def hours(self) -> float:
        """Hours it spans, 730 a month: what an owned or reserved GPU is paid for in it."""
        return self.months * HOURS_PER_MONTH


@dataclass(frozen=True)
class Period:
    """One period of the horizon: some hours of the day, in one tranche."""

    name: str
    """``q3.g2``: the tranche's letter and 1-based number, the group's 1-based number."""
    index: int
    """0-based position in ``periods``'s list."""
    tranche: Tranche
    group: int
    """0-based position among its tranche's groups (busiest first)."""
    hours: tuple[int, ...]
    """Hours of the day it holds (0-23), rising."""
    peak_hour: int
    """The hour it is sized for: its highest factor (the earliest where tied)."""
    factor: float
    """The daily profile's factor at ``peak_hour`` (relative to the peak hour, 1)."""
    growth: float
    """(1 + monthly_growth)^(tranche.last_month - 1): the demand growth it is sized for."""
    rps: float
    """The demand it must serve, requests/s: ``arrival_rps x factor x growth`` (0 for hours
    with no load)."""
    mean_rps: float
    """The mean demand over the hours it stands for, requests/s: ``arrival_rps x`` the mean
    factor of its hours ``x`` the mean growth over the tranche's months ``x`` the weekly
    profile's mean day (for traffic-billed costs and tokens served)."""
    hours_per_month: float
    """Hours a month it stands for: ``len(hours) x 730 / 24``."""
    weight_hours: float
    """Its weight in cost, hours: ``hours_per_month x tranche.months``."""
    overlays: tuple[str, ...]
    """Names of the overlays laid over the base workload in it, in list order."""
    workload: Workload | None
    """Its whole workload at ``rps`` (the overlays applied); None where ``rps`` is 0."""


def tranches(horizon: Horizon) -> tuple[Tranche, ...]:
    """The horizon's tranches, from month 1."""
    step = horizon.tranche_months
    return tuple(
        Tranche(k, first, min(first + step - 1, horizon.months))
        for k, first in enumerate(range(1, horizon.months + 1, step))
    )


def hour_groups(
    factors: Sequence[float], share: float, hours: Sequence[int] | None = None
) -> tuple[tuple[int, ...], ...]:
    """``hours`` (default: every index of ``factors``) grouped by ``factors`` as the module
    says: busiest first, an hour joining the open group while its factor is above ``(1 -
    share) x`` the group's highest, or equal to it. Each group is rising; the groups
    are in the order they were opened (busiest first)."""
    if not 0 <= share < 1:
        raise ValueError(f"share must be in [0, 1), got {share}")
    chosen = range(len(factors)) if hours is None else hours
    order = sorted(chosen, key=lambda h: (-factors[h], h))
    groups: list[list[int]] = []
    for h in order:
        if groups:
            top = factors[groups[-1][0]]
            if factors[h] == top or factors[h] > top * (1 - share):
                groups[-1].append(h)
                continue
        groups.append([h])
    return tuple(tuple(sorted(g)) for g in groups)


def monthly_peaks(scenario: Scenario) -> tuple[float, ...]:
    """Each month's peak-hour demand (requests/s), months 1..``months``: the demand curve
    a schedule is drawn against. Empty without a horizon or a rate."""
    h, rate = scenario.horizon, scenario.workload.arrival_rps
    if h is None or rate is None:
        return ()
    return tuple(rate * h.growth(m) for m in range(1, h.months + 1))


def hour_rates(scenario: Scenario, tranche: Tranche) -> tuple[float, ...]:
    """Each hour's demand (requests/s, hour 0 first) in ``tranche``'s last month, the month
    its periods are sized for: ``arrival_rps x factor x growth``; every period's ``rps`` is
    the highest of its hours'."""
    h, rate = scenario.horizon, scenario.workload.arrival_rps
    if h is None or rate is None:
        raise ValueError("a scenario with a horizon and a known arrival rate")
    growth = h.growth(tranche.last_month)
    return tuple(rate * f * growth for f in h.daily_profile)


def periods(scenario: Scenario) -> tuple[Period, ...]:
    """The periods of ``scenario``'s horizon (the module's rule), by tranche, then busiest
    first. Empty for a scenario without a horizon.

    Expects a loaded scenario (``pddplan.io.scenario.load_scenario``: the rate known, a
    trace fitted, ``horizon_problems`` clear); raises ``ValueError`` otherwise."""
    h = scenario.horizon
    if h is None:
        return ()
    rate = scenario.workload.arrival_rps
    if rate is None:
        raise ValueError("the workload has no arrival_rps yet (a trace not fitted)")
    daily = h.daily_profile
    overlays = h.overlays or ()
    out: list[Period] = []
    for t in tranches(h):
        growth = h.growth(t.last_month)
        mean_growth = math.fsum(h.growth(m) for m in range(t.first_month, t.last_month + 1))
        mean_growth /= t.months
        parts: dict[tuple[int, ...], list[int]] = {}
        for hour in range(HOURS_PER_DAY):
            key = tuple(
                i for i, o in enumerate(overlays) if o.applies(t.last_month, hour, h.months)
            )
            parts.setdefault(key, []).append(hour)
        found = [
            (group, key)
            for key, hours in parts.items()
            for group in hour_groups(daily, h.group_share, hours)
        ]
        found.sort(key=lambda gk: (-max(daily[x] for x in gk[0]), gk[0][0]))
        for g, (group, key) in enumerate(found):
            peak_hour = min(group, key=lambda x: (-daily[x], x))
            factor = daily[peak_hour]
            rps = rate * factor * growth
            names = tuple(overlays[i].name for i in key)
            hours_per_month = len(group) * HOURS_PER_MONTH / HOURS_PER_DAY
            out.append(
                Period(
                    name=f"{TRANCHE_LETTER[h.tranche]}{t.index + 1}.g{g + 1}",
                    index=len(out),
                    tranche=t,
                    group=g,
                    hours=group,
                    peak_hour=peak_hour,
                    factor=factor,
                    growth=growth,
                    rps=rps,
                    mean_rps=rate
                    * math.fsum(daily[x] for x in group)
                    / len(group)
                    * mean_growth
                    * h.weekly_mean(),
                    hours_per_month=hours_per_month,
                    weight_hours=hours_per_month * t.months,
                    overlays=names,
                    workload=_workload(scenario, key, rps),
                )
            )
    return tuple(out)


def _workload(scenario: Scenario, overlay_ids: tuple[int, ...], rps: float) -> Workload | None:
    """The base workload with the given overlays laid over it in order, at ``rps``."""
    if rps <= 0:
        return None
    h = scenario.horizon
    overlays = (h.overlays or ()) if h is not None else ()
    workload = scenario.workload
    for i in overlay_ids:
        o = overlays[i]
        workload = resolve_variant(workload, WorkloadVariant(name=o.name, **o.changes()))
    return workload.model_copy(update={"arrival_rps": rps})


def period_scenario(scenario: Scenario, period: Period) -> Scenario:
    """The scenario that plans ``period`` alone: ``scenario`` with the period's workload (its
    rate and overlays), no horizon, no workload variants, named ``SCENARIO/PERIOD``. With a
    flat profile, no growth and one period this is the scenario without its horizon, so
    ``solve`` on it is the one-period case of a horizon plan. Raises ``ValueError`` for a
    period with no demand (``workload`` None)."""
    if period.workload is None:
        raise ValueError(f"period {period.name} has no demand (hours {period.hours} at factor 0)")
    return scenario.model_copy(
        update={
            "name": f"{scenario.name}/{period.name}",
            "workload": period.workload,
            "workload_variants": None,
            "horizon": None,
        }
    )
