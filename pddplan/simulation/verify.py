"""``pddplan solve --verify``: plan, simulate the plan at steady state, and re-plan with a
tighter analytic model until the simulator confirms the plan meets the SLA.

A plan is checked at the load it was planned for, the demand times (1 + headroom), whatever
the objective: there the SLA has a verdict. Each simulation runs until its verdict is decided
or its percentiles are known to the run length's precision (``simulation.steady``).
"confirmed" ends the loop, and the confirmed plan is simulated once more at the SLA capacity
its verdict claims (``CapacityCheck``): there the tail sits on the bound by definition, so a
pass or fail is noise, and what is reported is the analytic TTFT P90 and P99 against the
simulated ones, each within its band (``P90_BAND``, ``P99_BAND``) or not. An "inconclusive" run is
taken as a miss, at its upper confidence bounds, and the step says so: a buyer needs a
plan the simulator confirms. When the simulation misses a bound, the planner's copy of that bound is scaled by how far the simulation
missed it (bound / simulated, less a ``MARGIN``), so that the next plan holds the analytic
percentile that much below the SLA (by ``MAX_STEP`` at most per iteration). The cap of
whatever holds the slow requests longest (the link when their KV transfer outlasts the
rest of their TTFT, the pools otherwise), and of any pool or link simulated above its
cap, falls by ``CAP_STEP``. A simulated decode-side hit below the scenario's (the
cache holds less of the sessions than assumed) scales the planner's MD hits down to it. The SLA the plan is reported against stays the user's.
After ``max_iterations`` plans without a confirmed one, the last plan is returned marked
unconfirmed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from pddplan.model.problem import Problem
from pddplan.plan.results import PlanResult
from pddplan.simulation.run import Figure, SimResult, check_length, simulate
from pddplan.simulation.steady import RunLength
from pddplan.spec.scenario import Scenario
from pddplan.workload.classes import md_cache_hits

MARGIN = 0.95
"""The tightened bound aims this far below what the simulation says would just pass."""
MAX_STEP = 0.8
"""No planning factor falls below this share of its last value in one iteration."""
MAX_HIT_STEP = 0.25
"""The decode-side hit factor falls at most to this share of its last value at once."""
HIT_SLACK = 0.9
"""A simulated decode-side hit under this share of the plan's is corrected first."""
CAP_STEP = 0.9
"""Utilization caps shrink by this factor when a simulated pool or link runs above them."""
MAX_ITERATIONS = 6


@dataclass(frozen=True)
class Tightening:
    """The planner's model, relative to the scenario: each SLA bound and cap times a factor."""

    ttft_p90: float = 1.0
    ttft_p99: float = 1.0
    tpot: float = 1.0
    utilization: float = 1.0
    """Pools' utilization cap."""
    link_utilization: float = 1.0
    md_hit: float = 1.0
    """Decode-side cache hits (each ``md_cache`` option's, per class) times this."""

    def apply(self, s: Scenario) -> Scenario:
        sla = s.sla.model_copy(
            update={
                "ttft_p90_s": s.sla.ttft_p90_s * self.ttft_p90,
                "ttft_p99_s": s.sla.ttft_p99_s * self.ttft_p99,
                "tpot_ms": s.sla.tpot_ms * self.tpot,
            }
        )
        search = s.search.model_copy(
            update={
                "max_utilization": s.search.max_utilization * self.utilization,
                "max_link_utilization": s.search.max_link_utilization * self.link_utilization,
            }
        )
        update: dict[str, Any] = {"sla": sla, "search": search}
        if s.md_cache is not None and s.md_cache[0].measured and self.md_hit < 1.0:
            hits = md_cache_hits(s.workload, s.md_cache)
            update["md_cache"] = tuple(
                o.model_copy(
                    update={"md_prefix_hit": None, "md_hit": tuple(x * self.md_hit for x in h)}
                )
                for o, h in zip(s.md_cache, hits, strict=True)
            )
        return s.model_copy(update=update)


@dataclass(frozen=True)
class VerifyStep:
    iteration: int
    tightening: Tightening
    plan: PlanResult
    load_rps: float | None
    """The load simulated (None: the plan had no fleet)."""
    sim: SimResult | None
    confirmed: bool
    note: str = ""
    """What the step did, in words."""


P90_BAND = 0.10
"""How far the analytic TTFT P90 may be from the simulated one at the SLA capacity (relative),
the band ``docs/simulate.md`` holds the model to."""
P99_BAND = 0.15
"""The same for P99."""
BANDS = (("p90", P90_BAND), ("p99", P99_BAND))


@dataclass(frozen=True)
class CapacityCheck:
    """The final plan simulated at the SLA capacity its verdict claims: not a pass or fail on
    the SLA (at the capacity the tail sits on the bound by definition, so the verdict there
    is a coin toss), but the analytic TTFT P90 and P99 against the simulated ones, each
    within its band or not."""

    rate_rps: float
    sim: SimResult
    bands: ClassVar[tuple[tuple[str, float], ...]] = BANDS

    @property
    def within(self) -> dict[str, bool | None]:
        """Per percentile, whether the analytic figure is within its band of the simulated
        one (None without both)."""
        out: dict[str, bool | None] = {}
        for key, band in self.bands:
            error = self.sim.ttft_s[key].error
            out[key] = None if error is None else abs(error) <= band
        return out


@dataclass(frozen=True)
class Verification:
    steps: list[VerifyStep] = field(default_factory=list)
    confirmed: bool = False
    message: str = ""
    at_capacity: CapacityCheck | None = None
    """The confirmed plan simulated at its SLA capacity (``CapacityCheck``)."""

    @property
    def stopped(self) -> bool:
        """Whether a simulation's wall-clock safety stop ended one of its runs (no verdict)."""
        sims = [st.sim for st in self.steps if st.sim is not None]
        if self.at_capacity is not None:
            sims.append(self.at_capacity.sim)
        return any(sim.stopped for sim in sims)

    @property
    def final(self) -> VerifyStep | None:
        """The confirmed step; else the simulated plan that came closest (an inconclusive
        one before a missed one, then the cheapest: a tighter model that bought more
        without a confirmation is no better a purchase); else the last one with a plan."""
        confirmed = [st for st in self.steps if st.confirmed]
        if confirmed:
            return confirmed[0]
        simulated = [st for st in self.steps if st.sim is not None]
        if simulated:
            return min(
                simulated,
                key=lambda st: (
                    st.sim is not None and st.sim.verdict == "missed",
                    st.plan.evaluation.cost_per_hour_usd if st.plan.evaluation else math.inf,
                    st.iteration,
                ),
            )
        with_plan = [st for st in self.steps if st.plan.fleet is not None]
        return with_plan[-1] if with_plan else None


def _load(plan: PlanResult, scenario: Scenario) -> float | None:
    """The load whose verdict the loop needs: the demand x (1 + headroom) the plan was
    planned for, whatever the objective (the SLA capacity is checked apart, ``CapacityCheck``)."""
    e = plan.evaluation
    if e is None:
        return None
    return plan.planned_rps or e.demand_rps or e.sla_capacity_rps


def _at_capacity(
    problem: Problem,
    plan: PlanResult,
    length: RunLength,
    seed: int,
    progress: Callable[[str], None] | None,
) -> CapacityCheck | None:
    """The confirmed plan simulated at the SLA capacity its verdict claims, to the run
    length's precision (not until a verdict: there is none to decide); None when the
    capacity is the load already simulated or unbounded."""
    e = plan.evaluation
    if e is None or plan.fleet is None or not math.isfinite(e.sla_capacity_rps):
        return None
    rate = e.sla_capacity_rps
    if rate <= (plan.planned_rps or e.demand_rps) * (1 + 1e-9):
        return None
    if progress is not None:
        progress(f"simulating {plan.fleet.name} at its SLA capacity, {rate:.2f} req/s")
    sim = simulate(
        problem, plan.fleet, length=replace(length, until_decided=False), rate_rps=rate, seed=seed
    )
    return CapacityCheck(rate, sim)


def _tighter(t: Tightening, sim: SimResult, caps: Scenario) -> Tightening:
    """The next planning model: see the module docstring. A decode-side hit short of the
    plan's is the cause of every other miss it brings (bigger transfers, a busier link),
    so it is corrected first, alone; no factor falls by more than ``MAX_STEP`` at once. An
    inconclusive run is judged at its upper confidence bounds."""
    upper = sim.verdict == "inconclusive"

    def seen(f: Figure) -> float:
        return f.high if upper and f.high is not None and math.isfinite(f.high) else f.simulated

    planned = (sim.md_hit.predicted or 0.0) * t.md_hit  # the scenario's hit, as planned
    tiered = caps.md_cache is not None and not caps.md_cache[0].measured  # hits from the curve
    if not tiered and planned and sim.md_hit.simulated < planned * HIT_SLACK:
        ratio = max(MAX_HIT_STEP, sim.md_hit.simulated / planned)
        return replace(t, md_hit=t.md_hit * ratio)

    def scaled(factor: float, simulated: float, bound: float) -> float:
        if simulated <= bound:
            return factor
        return factor * max(MAX_STEP, bound / simulated * MARGIN)

    util, link = t.utilization, t.link_utilization
    tail = sim.tail_breakdown
    ttft_missed = seen(sim.ttft_s["p90"]) > sim.sla["ttft_p90_s"] or (
        seen(sim.ttft_s["p99"]) > sim.sla["ttft_p99_s"]
    )
    busy = any(f.simulated > caps.search.max_utilization for _, f in sim.pool_utilization)
    pools_slow = tail["queue"] + tail["prefill"] + tail["decode"]
    if busy or (ttft_missed and tail["transfer"] < pools_slow):
        util *= CAP_STEP
    links = sim.link_utilization.values()
    if any(f.simulated > caps.search.max_link_utilization for f in links) or (
        ttft_missed and tail["transfer"] >= pools_slow
    ):
        link *= CAP_STEP
    return replace(
        t,
        ttft_p90=scaled(t.ttft_p90, seen(sim.ttft_s["p90"]), sim.sla["ttft_p90_s"]),
        ttft_p99=scaled(t.ttft_p99, seen(sim.ttft_s["p99"]), sim.sla["ttft_p99_s"]),
        tpot=scaled(t.tpot, seen(sim.tpot_ms["p99"]), sim.sla["tpot_ms"]),
        utilization=util,
        link_utilization=link,
    )


def _halfway(good: Tightening, tight: Tightening) -> Tightening:
    """SLA factors halfway (geometrically) from the last plannable ones to ``tight``'s;
    ``tight``'s caps and hits. The same when they are within 1%."""

    def mid(a: float, b: float) -> float:
        return a if b >= a * 0.99 else (a * b) ** 0.5

    return replace(
        tight,
        ttft_p90=mid(good.ttft_p90, tight.ttft_p90),
        ttft_p99=mid(good.ttft_p99, tight.ttft_p99),
        tpot=mid(good.tpot, tight.tpot),
    )


def verify(
    problem: Problem,
    solve: Callable[[Problem], PlanResult],
    *,
    first: PlanResult | None = None,
    length: RunLength | None = None,
    seed: int = 0,
    max_iterations: int = MAX_ITERATIONS,
    progress: Callable[[str], None] | None = None,
) -> Verification:
    """The loop in the module docstring. ``solve`` plans a (tightened) problem; ``first``
    is a plan already made for the problem itself. When a tightened SLA leaves the
    planner no plan (the latency of the longest requests alone may not fit it), the next
    iteration tightens it half as much (``_halfway``). ``length``: each simulation's
    (it stops once its verdict is decided)."""
    length = replace(length or RunLength(), until_decided=True)
    check_length(length)
    scenario = problem.scenario
    tightening, last_good = Tightening(), Tightening()
    steps: list[VerifyStep] = []
    for i in range(1, max_iterations + 1):
        planned = tightening.apply(scenario)
        plan = first if (i == 1 and first is not None) else solve(problem.with_scenario(planned))
        load = _load(plan, scenario)
        if plan.fleet is None or not load:
            note = "no plan under the tightened model: tightening half as much"
            steps.append(VerifyStep(i, tightening, plan, None, None, False, note))
            milder = _halfway(last_good, tightening)
            if milder == tightening:
                break
            tightening = milder
            continue
        if progress is not None:
            progress(f"iteration {i}: simulating {plan.fleet.name} at {load:.2f} req/s")
        sim = simulate(problem, plan.fleet, length=length, rate_rps=load, seed=seed)
        if sim.confirmed:
            note = f"confirmed at {load:.2f} req/s"
            steps.append(VerifyStep(i, tightening, plan, load, sim, True, note))
            check = _at_capacity(problem, plan, length, seed, progress)
            return Verification(
                steps, True, f"iteration {i}: the simulator {note} (the demand)", check
            )
        why = "; ".join(sim.reasons)
        if sim.stopped:  # no verdict to re-plan on
            note = f"stopped at the time limit, not a verdict ({why})"
            steps.append(VerifyStep(i, tightening, plan, load, sim, False, note))
            return Verification(steps, False, f"iteration {i}: {note}")
        if sim.verdict == "inconclusive":
            note = f"inconclusive ({why}): re-planning as if it missed, at its upper bounds"
        else:
            note = f"missed ({why}): re-planning with a tighter model"
        if progress is not None:
            progress(f"iteration {i}: {note}")
        steps.append(VerifyStep(i, tightening, plan, load, sim, False, note))
        last_good = tightening
        tightening = _tighter(tightening, sim, planned)
    tried = [st for st in steps if st.sim is not None]
    why = f" (the last plan simulated: {tried[-1].note})" if tried else ""
    return Verification(
        steps, False, f"no simulator-confirmed plan in {len(steps)} iterations{why}"
    )
