"""``pddplan solve --verify``: plan, simulate the plan, and re-plan with a tighter analytic
model until the simulator confirms the plan meets the SLA.

A plan is checked at the load it claims: its SLA capacity for max BCR and max capacity
(the rate its BCR rests on), the scenario's demand for min cost. When the simulation
misses a bound, the planner's copy of that bound is scaled by how far the simulation
missed it (bound / simulated, less a ``MARGIN``), so that the next plan holds the analytic
percentile that much below the SLA; a simulated pool or link above its utilization cap
lowers the caps by ``CAP_STEP``. The SLA the plan is reported against stays the user's.
After ``max_iterations`` plans without a confirmed one, the last plan is returned marked
unconfirmed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pddplan.hardware import HardwareCatalog
from pddplan.llm import ModelSpec
from pddplan.results import PlanResult
from pddplan.scenario import Scenario
from pddplan.sim_stats import SimResult, simulate

MARGIN = 0.95
"""The tightened bound aims this far below what the simulation says would just pass."""
CAP_STEP = 0.9
"""Utilization caps shrink by this factor when a simulated pool or link runs above them."""
MAX_ITERATIONS = 4


@dataclass(frozen=True)
class Tightening:
    """The planner's model, relative to the scenario: each SLA bound and cap times a factor."""

    ttft_p90: float = 1.0
    ttft_p99: float = 1.0
    tpot: float = 1.0
    utilization: float = 1.0

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
                "max_link_utilization": s.search.max_link_utilization * self.utilization,
            }
        )
        return s.model_copy(update={"sla": sla, "search": search})


@dataclass(frozen=True)
class VerifyStep:
    iteration: int
    tightening: Tightening
    plan: PlanResult
    load_rps: float | None
    """The load simulated (None: the plan had no fleet)."""
    sim: SimResult | None
    confirmed: bool


@dataclass(frozen=True)
class Verification:
    steps: list[VerifyStep] = field(default_factory=list)
    confirmed: bool = False
    message: str = ""

    @property
    def final(self) -> VerifyStep | None:
        return self.steps[-1] if self.steps else None


def _load(plan: PlanResult, scenario: Scenario) -> float | None:
    e = plan.evaluation
    if e is None:
        return None
    if plan.stats.objective == "min-cost":
        return scenario.workload.arrival_rps or e.sla_capacity_rps
    return e.sla_capacity_rps


def _tighter(t: Tightening, sim: SimResult, caps: Scenario) -> Tightening:
    def scaled(factor: float, simulated: float, bound: float) -> float:
        if simulated <= bound:
            return factor
        return factor * bound / simulated * MARGIN

    util = t.utilization
    too_busy = [f for _, f in sim.pool_utilization if f.simulated > caps.search.max_utilization]
    links = [
        f for f in sim.link_utilization.values() if f.simulated > caps.search.max_link_utilization
    ]
    if too_busy or links:
        util *= CAP_STEP
    return Tightening(
        ttft_p90=scaled(t.ttft_p90, sim.ttft_s["p90"].simulated, sim.sla["ttft_p90_s"]),
        ttft_p99=scaled(t.ttft_p99, sim.ttft_s["p99"].simulated, sim.sla["ttft_p99_s"]),
        tpot=scaled(t.tpot, sim.tpot_ms["p99"].simulated, sim.sla["tpot_ms"]),
        utilization=util,
    )


def verify(
    scenario: Scenario,
    hardware: HardwareCatalog,
    models: dict[str, ModelSpec],
    solve: Callable[[Scenario], PlanResult],
    *,
    first: PlanResult | None = None,
    requests: int = 20_000,
    seed: int = 0,
    max_iterations: int = MAX_ITERATIONS,
    progress: Callable[[str], None] | None = None,
) -> Verification:
    """The loop in the module docstring. ``solve`` plans a (tightened) scenario; ``first``
    is a plan already made for the scenario itself."""
    tightening = Tightening()
    steps: list[VerifyStep] = []
    for i in range(1, max_iterations + 1):
        planned = tightening.apply(scenario)
        plan = first if (i == 1 and first is not None) else solve(planned)
        load = _load(plan, scenario)
        if plan.fleet is None or not load:
            steps.append(VerifyStep(i, tightening, plan, None, None, False))
            return Verification(
                steps,
                False,
                f"iteration {i}: the tightened model has no plan ({plan.status}); "
                "no simulator-confirmed plan was found",
            )
        if progress is not None:
            progress(f"iteration {i}: simulating {plan.fleet.name} at {load:.2f} req/s")
        sim = simulate(
            scenario, hardware, models, plan.fleet, requests=requests, rate_rps=load, seed=seed
        )
        steps.append(VerifyStep(i, tightening, plan, load, sim, sim.sla_met))
        if sim.sla_met:
            return Verification(
                steps, True, f"iteration {i}: the simulator confirms the plan at {load:.2f} req/s"
            )
        tightening = _tighter(tightening, sim, planned)
    last = steps[-1].sim
    missed = "; ".join(last.misses) if last is not None else ""
    return Verification(
        steps,
        False,
        f"no simulator-confirmed plan in {max_iterations} iterations (last: {missed})",
    )
