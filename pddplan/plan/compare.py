"""``pddplan compare``: the same workload and SLA planned under each architecture.

Each architecture is a restriction of the scenario, planned by ``solve_plan`` (same MILP,
same evaluator, same objective):

- ``intra-dc-homogeneous``: classic PD in one datacenter on one chip type, for every chip
  the scenario allows; the best chip is the architecture's result.
- ``intra-dc-heterogeneous``: PD in one datacenter, prefill on the chips the scenario allows
  for prefill and decode on those it allows for main decode, as if they sat together.
- ``cross-dc-naive``: prefill and main decode in different, linked datacenters; every
  request's whole context KV crosses the WAN (no relay decode, no decode-side cache).
- ``pdd``: the scenario as given.

The single datacenter of the intra-DC baselines (``INTRA_DC``) has every datacenter's limits
added up (GPUs, power, owned inventory) and the worst PUE: the same envelope PDD plans in.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import ValidationError

from pddplan.errors import InputError
from pddplan.model.problem import Problem
from pddplan.plan.results import PlanResult
from pddplan.plan.search import solve_plan
from pddplan.spec.distributions import HitDist
from pddplan.spec.scenario import Datacenter, MdCacheOption, Role, Scenario

ARCHITECTURES = ("intra-dc-homogeneous", "intra-dc-heterogeneous", "cross-dc-naive", "pdd")
INTRA_DC = "intra-dc"
"""The datacenter of the intra-DC baselines."""
BASELINES = ARCHITECTURES[:3]


@dataclass(frozen=True)
class ArchitectureResult:
    name: str
    plan: PlanResult | None
    """None when the scenario cannot express the architecture (see ``reason``)."""
    reason: str | None = None
    """Why there is no plan (infeasible, or the architecture does not apply)."""
    chip: str | None = None
    """intra-dc-homogeneous: the chip of the best plan."""
    by_chip: list[tuple[str, PlanResult | None, str | None]] = field(default_factory=list)
    """intra-dc-homogeneous: every allowed chip's plan (or why none)."""

    @property
    def bcr(self) -> float | None:
        e = self.plan.evaluation if self.plan else None
        return e.bcr if e is not None and e.status == "ok" else None


@dataclass(frozen=True)
class Comparison:
    scenario: Scenario
    objective: str
    architectures: list[ArchitectureResult]

    def get(self, name: str) -> ArchitectureResult:
        return next(a for a in self.architectures if a.name == name)

    @property
    def best_intra_dc(self) -> ArchitectureResult | None:
        """The intra-DC baseline with the highest BCR (None if neither has a plan)."""
        intra = [a for a in self.architectures if a.name.startswith("intra-dc") and a.bcr]
        return max(intra, key=lambda a: a.bcr or 0.0, default=None)

    @property
    def best_baseline(self) -> ArchitectureResult | None:
        """The baseline (every architecture but PDD) with the highest BCR."""
        base = [a for a in self.architectures if a.name in BASELINES and a.bcr]
        return max(base, key=lambda a: a.bcr or 0.0, default=None)


# --- the architectures as scenarios -----------------------------------------------------------
def _roles_chips(s: Scenario, role: Role) -> list[str]:
    return sorted({chip for _, chip in s.chips_for(role)})


def _sum_or_none(values: list) -> float | None:
    return None if any(v is None for v in values) else sum(values)


def intra_dc(s: Scenario, prefill_chips: list[str], decode_chips: list[str]) -> Scenario:
    """``s`` as PD in one datacenter: prefill on ``prefill_chips``, main decode on
    ``decode_chips``, no relay decode, no WAN."""
    dcs = list(s.datacenters.values())
    chips = sorted(set(prefill_chips) | set(decode_chips))
    inventory: dict[str, int] = {}
    for dc in dcs:
        for chip, n in dc.inventory.items():
            if chip in chips:
                inventory[chip] = inventory.get(chip, 0) + n
    max_gpus = _sum_or_none([dc.max_gpus for dc in dcs])
    dc = Datacenter(
        chips=tuple(chips),
        roles=("prefill", "main_decode"),
        role_chips={"prefill": tuple(prefill_chips), "main_decode": tuple(decode_chips)},
        max_gpus=None if max_gpus is None else int(max_gpus),
        max_power_kw=_sum_or_none([dc.max_power_kw for dc in dcs]),
        pue=max(dc.pue for dc in dcs),
        inventory=inventory,
    )
    return s.model_copy(update={"datacenters": {INTRA_DC: dc}, "links": ()})


def cross_dc_naive(s: Scenario) -> Scenario:
    """``s`` without relay decode and without a decode-side cache, main decode only in
    datacenters that do not also prefill. Raises ``InputError`` when no prefill
    datacenter is then linked to a main-decode one."""
    prefill_dcs = {d for d, dc in s.datacenters.items() if "prefill" in dc.roles}
    dcs = {}
    for dc_id, dc in s.datacenters.items():
        roles = [r for r in dc.roles if r != "relay_decode"]
        if dc_id in prefill_dcs and len(prefill_dcs) < len(s.datacenters):
            roles = [r for r in roles if r != "main_decode"]
        if not roles:
            continue
        role_chips = {r: c for r, c in (dc.role_chips or {}).items() if r in roles} or None
        dcs[dc_id] = dc.model_copy(update={"roles": tuple(roles), "role_chips": role_chips})
    links = tuple(x for x in s.links if all(d in dcs for d in x.between))
    w = s.workload
    if w.classes is not None:
        n = len(w.classes)
        w = w.model_copy(
            update={"classes": tuple(c.model_copy(update={"md_hit": None}) for c in w.classes)}
        )
        none = MdCacheOption(gb_per_gpu=0.0, md_hit=(0.0,) * n)
    elif w.prefix_hit is not None:
        w = w.model_copy(update={"md_prefix_hit": None})
        none = MdCacheOption(gb_per_gpu=0.0, md_prefix_hit=HitDist(dist="fixed", value=0.0))
    else:
        raise InputError("cross-dc-naive needs the workload as classes or distributions")
    data = s.model_dump()
    data.update(datacenters=dcs, links=links, workload=w, md_cache=(none,))
    try:
        return Scenario.model_validate(data)
    except ValidationError as e:
        raise InputError(
            "cross-dc-naive needs prefill and main decode in different, linked "
            f"datacenters: {e.errors()[0]['msg']}"
        ) from None


# --- planning each ----------------------------------------------------------------------------
Solve = Callable[[Scenario], PlanResult]


def _bcr(plan: PlanResult | None) -> float:
    """A plan's BCR, 0 without one."""
    e = plan.evaluation if plan is not None else None
    return (e.bcr or 0.0) if e is not None else 0.0


def _why(plan: PlanResult) -> str | None:
    if plan.evaluation is not None and plan.evaluation.status == "ok":
        return None
    helpful = [r.message for r in plan.relaxations if r.factor is not None or r.family == "options"]
    if helpful:
        return "; ".join(helpful)
    if plan.relaxations:
        return "no single family of limits, relaxed up to x100, makes it feasible"
    return f"no plan (status {plan.status})"


def _plan(solve: Solve, build: Callable[[], Scenario]) -> tuple[PlanResult | None, str | None]:
    try:
        scenario = build()
    except InputError as e:
        return None, str(e)
    plan = solve(scenario)
    return plan, _why(plan)


def compare(
    problem: Problem,
    *,
    objective: str | None = None,
    solver: str | None = None,
    time_limit_s: float | None = None,
    progress: Callable[[str], None] | None = None,
    explain: bool = True,
) -> Comparison:
    """Plan ``problem`` under each of ``ARCHITECTURES`` for ``objective`` (default: the
    scenario's). ``explain``: say how far an infeasible architecture's limits would need
    to move (a bisection per family of limits)."""
    scenario = problem.scenario
    objective = objective or scenario.objective

    def solve(s: Scenario) -> PlanResult:
        return solve_plan(
            problem.with_scenario(s),
            objective=objective,
            solver=solver,
            time_limit_s=time_limit_s,
            explain=explain,
        )

    def step(text: str) -> None:
        if progress is not None:
            progress(text)

    results = []
    p_chips, d_chips = _roles_chips(scenario, "prefill"), _roles_chips(scenario, "main_decode")
    by_chip = []
    for chip in sorted(set(p_chips) | set(d_chips)):
        step(f"intra-dc-homogeneous on {chip}")
        plan, why = _plan(solve, functools.partial(intra_dc, scenario, [chip], [chip]))
        by_chip.append((chip, plan, why))
    ok = [(c, p) for c, p, why in by_chip if why is None]
    if ok:
        chip, plan = max(ok, key=lambda x: _bcr(x[1]))
        results.append(ArchitectureResult(ARCHITECTURES[0], plan, None, chip, by_chip))
    else:
        reason = "; ".join(f"{c}: {why}" for c, _, why in by_chip)
        results.append(ArchitectureResult(ARCHITECTURES[0], None, reason, None, by_chip))
    step("intra-dc-heterogeneous")
    plan, why = _plan(solve, lambda: intra_dc(scenario, p_chips, d_chips))
    results.append(ArchitectureResult(ARCHITECTURES[1], plan, why))
    step("cross-dc-naive")
    plan, why = _plan(solve, lambda: cross_dc_naive(scenario))
    results.append(ArchitectureResult(ARCHITECTURES[2], plan, why))
    step("pdd")
    plan, why = _plan(solve, lambda: scenario)
    results.append(ArchitectureResult(ARCHITECTURES[3], plan, why))
    return Comparison(scenario, objective, results)


# --- price sensitivity ------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepPoint:
    price: float
    pdd_bcr: float | None
    baseline: str | None
    """The best baseline at this price."""
    baseline_bcr: float | None

    @property
    def pdd_wins(self) -> bool:
        return self.pdd_bcr is not None and (
            self.baseline_bcr is None or self.pdd_bcr > self.baseline_bcr
        )


@dataclass(frozen=True)
class Sweep:
    chip: str
    points: list[SweepPoint]
    break_even: float | None
    """The price (USD per GPU-hour) where PDD's BCR meets the best baseline's; None when
    PDD wins, or loses, across the whole sweep."""
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
    objective: str | None = None,
    solver: str | None = None,
    time_limit_s: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> Sweep:
    """Re-plan every architecture at each price of ``chip``, then bisect for the price at
    which PDD stops beating the best baseline on BCR."""
    if not prices:
        raise InputError("the price sweep has no points")
    if chip not in problem.hardware.chips:
        raise InputError(f"price sweep: unknown chip '{chip}'")

    def point(price: float) -> SweepPoint:
        if progress is not None:
            progress(f"{chip} at ${price:.4g}/GPU-hour")
        c = compare(
            problem.with_scenario(with_price(problem.scenario, chip, price)),
            objective=objective,
            solver=solver,
            time_limit_s=time_limit_s,
            explain=False,
        )
        base = c.best_baseline
        return SweepPoint(
            price, c.get("pdd").bcr, base.name if base else None, base.bcr if base else None
        )

    points = [point(p) for p in sorted(prices)]
    bracket = next(
        ((a.price, b.price) for a, b in itertools.pairwise(points) if a.pdd_wins != b.pdd_wins),
        None,
    )
    if bracket is None:
        return Sweep(chip, points, None, None)
    lo, hi = bracket
    lo_wins = next(p for p in points if p.price == lo).pdd_wins
    for _ in range(BREAK_EVEN_STEPS):
        mid = (lo + hi) / 2
        if point(mid).pdd_wins == lo_wins:
            lo = mid
        else:
            hi = mid
    return Sweep(chip, points, (lo + hi) / 2, bracket)


def parse_sweep(text: str) -> tuple[str, list[float]]:
    """``CHIP=LO:HI:STEP`` to (chip, prices). Raises ``InputError`` on anything else."""
    chip, sep, spec = text.partition("=")
    parts = spec.split(":")
    usage = f"--price-sweep: expected CHIP=LO:HI:STEP (e.g. h200-sxm=2.7:4.0:0.1), got '{text}'"
    if not sep or not chip or len(parts) != 3:
        raise InputError(usage)
    try:
        lo, hi, step = (float(x) for x in parts)
    except ValueError:
        raise InputError(usage) from None
    if not (math.isfinite(lo) and math.isfinite(hi) and math.isfinite(step)):
        raise InputError(usage)
    if lo <= 0 or step <= 0 or hi < lo:
        raise InputError(
            f"--price-sweep {text}: needs 0 < LO <= HI and STEP > 0, so it has no points"
        )
    n = math.floor((hi - lo) / step + 1e-9) + 1
    return chip, [round(lo + i * step, 10) for i in range(n)]


__all__ = [
    "ARCHITECTURES",
    "ArchitectureResult",
    "Comparison",
    "Sweep",
    "SweepPoint",
    "compare",
    "cross_dc_naive",
    "intra_dc",
    "parse_sweep",
    "price_sweep",
]
