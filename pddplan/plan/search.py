"""``pddplan solve``: the objectives on top of the minimum-cost MILP, and the explanations.

- **min cost** at the scenario's demand: one MILP (``pddplan.plan.milp.min_cost``).
- **max SLA capacity** within ``budget_usd_per_hour``: bisection on the arrival rate; each
  step asks the MILP for the cheapest deployment at that rate and compares it with the
  budget. A feasible step jumps to that deployment's evaluated capacity.
- **max BCR** (SLA capacity per dollar-hour, capacity at least the demand): Dinkelbach's
  method. Let ``C(r)`` be the MILP's minimum cost at rate ``r``; it does not decrease with
  ``r``, and the best BCR is ``max_r r / C(r)``. For the current ratio ``q``, the
  parametric problem ``max_r r - q C(r)`` is bounded over rate segments, a branch and bound
  on the rate: a solve at ``r_i`` gives a deployment of cost ``c_i`` whose evaluated
  capacity ``b_i`` covers ``[r_i, b_i]`` exactly; a *probe* at ``t`` (``relaxed_cost``, the
  MILP without its datacenter rows, no solver) gives a lower bound on ``C`` from ``t`` on;
  and ``cost_floor`` bounds each cell of a rate grid. The segment with the best bound is
  worked next: probed just past its start when that is a capacity (the next cost step),
  probed at ``q`` times its lower bound when its start cannot reach ``q`` (closing
  everything below), else solved. ``q`` follows the best evaluated ratio. It stops when no
  bound exceeds ``q (1 + BCR_TOLERANCE)``, which proves the optimum to that tolerance; the
  largest bound is reported.

Every deployment is scored by the evaluator (``pddplan.evaluate.evaluator``), so the report's
capacity, TTFT and BCR are the evaluator's, not the MILP's.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from pddplan.errors import InputError
from pddplan.evaluate.evaluator import MAX_RATE_RPS, cost_and_capacity, evaluate, sla_capacity
from pddplan.evaluate.fleet_model import seeded_memo
from pddplan.model.kv import KvModel
from pddplan.plan import milp
from pddplan.plan.bounds import cost_floor, relaxed_cost
from pddplan.plan.counts import Requirements
from pddplan.plan.limits import within_limits
from pddplan.plan.results import Evaluation, Marginal, PlanResult, Relaxation, SolveStats
from pddplan.plan.space import Choice, NoOptionsError, Space
from pddplan.spec.fleet import Fleet, LinkChoice
from pddplan.spec.hardware import HardwareCatalog
from pddplan.spec.llm import ModelSpec
from pddplan.spec.scenario import Scenario

BCR_TOLERANCE = 1e-4
"""max BCR stops when no rate interval can beat the incumbent by more than this."""
RATE_TOLERANCE = 1e-4
"""max capacity stops when the bracket is this narrow (relative)."""
MIN_RATE_RPS = 1e-6
"""max capacity: a budget that cannot buy this rate buys nothing."""
MAX_MILP_SOLVES = 400
"""A guard on the rate searches: past it, the search stops as if the time limit had run
out (max BCR: ``not_converged``; otherwise ``time_limit``)."""


class _Search:
    """Minimum-cost solves at chosen rates, memoized, with the evaluator's capacity."""

    def __init__(
        self,
        space: Space,
        solver: str,
        deadline: float,
        budget: float | None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.space, self.solver, self.deadline, self.budget = space, solver, deadline, budget
        self.clock = clock
        self.solves = 0
        self.size = (0, 0)
        self.timed_out = False
        self.points: dict[float, tuple[Choice | None, float, float]] = {}
        self.last_gap: float | None = None
        self.tables: dict[float, Requirements] = {}
        """Requirements computed by probes (``relaxed``), for a solve at the same rate."""
        prefill = space.options["prefill"]
        self.memo = seeded_memo(
            space.classes,
            [(gb, list(h)) for gb, h in space.caches],
            {(o.chip, o.gpus): o.instance for r in space.options.values() for o in r},
            {(o.chip, o.gpus): space.prefill_times(o) for o in prefill},
        )

    def at(self, rate: float) -> tuple[Choice | None, float, float]:
        """(choice, cost per hour, evaluated SLA capacity) of the cheapest plan at ``rate``;
        (None, inf, 0) when no plan serves it."""
        if rate in self.points:
            return self.points[rate]
        left = self.deadline - self.clock()
        if left <= 0 or self.solves >= MAX_MILP_SOLVES:
            self.timed_out = True
            return None, math.inf, 0.0
        req = self.tables.pop(rate, None) or self.space.at(rate)
        out = milp.min_cost(
            req,
            solver=self.solver,
            time_limit_s=left,
            mip_gap=self.space.scenario.solver.mip_gap,
            budget_usd_per_hour=self.budget,
            clock=self.clock,
        )
        self.solves += out.solves
        self.size = (max(self.size[0], out.variables), max(self.size[1], out.constraints))
        if out.status in ("time_limit", "time_limit_no_incumbent"):
            self.timed_out = True
        if out.choice is None:
            point = (None, math.inf, 0.0)
        else:
            self.last_gap = out.gap
            fleet = self.space.fleet(out.choice, "plan")
            s = self.space
            models = {s.model.id: s.model}
            capacity = sla_capacity(
                s.scenario, s.hw, models, fleet, memo=self.memo, served_rps=rate * (1 - 1e-9)
            )
            if capacity < rate * (1 - 1e-5):
                raise RuntimeError(
                    f"planner bug: the MILP's plan at {rate:.6g} req/s has an evaluated SLA "
                    f"capacity of {capacity:.6g} req/s"
                )
            point = (out.choice, out.cost_per_hour, max(capacity, rate))
        self.points[rate] = point
        return point

    def relaxed(self, rate: float) -> float:
        """A lower bound on the minimum cost at ``rate`` (``relaxed_cost``); its tables
        are kept for a solve there. Past the time limit: 0, and the search stops."""
        if self.clock() >= self.deadline:
            self.timed_out = True
            return 0.0
        req = self.space.at(rate)
        self.tables[rate] = req
        return relaxed_cost(req)


def plan_kv_figures(
    scenario: Scenario, hardware: HardwareCatalog, models: dict[str, ModelSpec]
) -> dict[str, float]:
    """The figures a router needs to compute a request's WAN payload."""
    model = models[scenario.model]
    kv = KvModel(model, scenario.kv_dtype or model.kv_dtype)
    return {"kv_bytes_per_token": kv.bytes_per_token, "fixed_bytes": kv.fixed_bytes}


def solve_plan(
    scenario: Scenario,
    hardware: HardwareCatalog,
    models: dict[str, ModelSpec],
    *,
    objective: str | None = None,
    solver: str | None = None,
    time_limit_s: float | None = None,
    explain: bool = True,
    clock: Callable[[], float] = time.perf_counter,
) -> PlanResult:
    """Plan ``scenario`` for ``objective`` (default: the scenario's). ``clock`` is the time
    source the time limit is measured on (tests give a fake one)."""
    objective = objective or scenario.objective
    solver = solver or scenario.solver.name
    limit = time_limit_s if time_limit_s is not None else scenario.solver.time_limit_s
    start = clock()
    demand = scenario.workload.arrival_rps or 0.0
    if objective == "max-capacity" and scenario.budget_usd_per_hour is None:
        raise InputError("objective 'max-capacity' needs budget_usd_per_hour in the scenario")
    try:
        space = Space(scenario, hardware, models)
    except NoOptionsError as e:
        deadline = start + limit
        relaxations = (
            _explain(scenario, hardware, models, solver, deadline, clock) if explain else []
        )
        stats = SolveStats(objective, solver, "infeasible", clock() - start)
        note = Relaxation("options", 1.0, None, str(e))
        return PlanResult(
            scenario.name, scenario.model, "infeasible", stats, relaxations=[note, *relaxations]
        )
    search = _Search(
        space,
        solver,
        start + limit,
        scenario.budget_usd_per_hour if objective == "max-capacity" else None,
        clock,
    )
    iterations, bound = 0, None
    if objective == "min-cost":
        choice, _, _ = search.at(demand)
    elif objective == "max-capacity":
        choice, iterations = _max_capacity(search)
    else:
        choice, iterations, bound = _max_bcr(search, demand)
    status = _status(search, choice, bound)
    seconds = clock() - start
    stats = SolveStats(
        objective,
        solver,
        status,
        seconds,
        search.solves,
        *search.size,
        gap=_gap(search, objective, choice, bound),
        iterations=iterations,
        bcr_bound=bound,
    )
    if choice is None and explain and status == "infeasible" and objective == "max-capacity":
        relaxations = [_budget_needed(space, solver, start + limit, clock)]
    elif choice is None and explain and status == "infeasible":
        relaxations = _explain(scenario, hardware, models, solver, start + limit, clock)
    else:
        relaxations = []
    result = finish_plan(space, stats, choice, memo=search.memo, relaxations=relaxations)
    return replace(result, stats=replace(stats, seconds=clock() - start))


def finish_plan(
    space: Space,
    stats: SolveStats,
    choice: Choice | None,
    *,
    method: str = "milp",
    memo: dict | None = None,
    relaxations: list[Relaxation] | None = None,
) -> PlanResult:
    """The plan's deployment, its evaluation at the demand and its marginal values."""
    s = space.scenario
    if choice is None:
        return PlanResult(
            s.name, s.model, stats.status, stats, relaxations=relaxations or [], method=method
        )
    fleet = space.fleet(choice, f"{s.name}-plan")
    models = {space.model.id: space.model}
    memo = {} if memo is None else memo

    def measure(f: Fleet) -> tuple[float | None, float]:
        return cost_and_capacity(s, space.hw, models, f, memo=memo)

    evaluation = evaluate(s, space.hw, models, fleet, memo=memo)
    return PlanResult(
        s.name,
        s.model,
        stats.status,
        stats,
        fleet,
        evaluation,
        _marginals(space, fleet, evaluation, measure),
        method=method,
    )


def _status(search: _Search, choice: Choice | None, bound: float | None) -> str:
    if choice is None:
        return "time_limit_no_incumbent" if search.timed_out else "infeasible"
    if search.timed_out:
        return "not_converged" if bound is not None else "time_limit"
    return "optimal"


def _gap(search: _Search, objective: str, choice: Choice | None, bound: float | None):
    if choice is None:
        return None
    if objective == "max-bcr" and bound is not None:
        if not math.isfinite(bound):
            return None  # stopped before any bound was proven: the gap is unknown
        _, cost, cap = next(p for p in search.points.values() if p[0] is choice)
        best = cap / cost
        return max(0.0, (bound - best) / bound) if bound > 0 else 0.0
    return search.last_gap


# --- max capacity -----------------------------------------------------------------------------
def _max_capacity(search: _Search) -> tuple[Choice | None, int]:
    """Bisection on the rate for the largest one the budget buys (see module docstring)."""
    best: tuple[Choice | None, float] = (None, 0.0)
    lo, hi, steps = 0.0, math.inf, 0
    rate = max(search.space.scenario.workload.arrival_rps or 1.0, 1e-3)
    while not math.isfinite(hi) or (hi - lo > RATE_TOLERANCE * hi and hi > MIN_RATE_RPS):
        if math.isfinite(hi):
            rate = (lo + hi) / 2
        choice, _, capacity = search.at(rate)
        steps += 1
        if search.timed_out:
            break
        if choice is None:
            hi = rate
        else:
            best = (choice, capacity) if capacity > best[1] else best
            lo = max(lo, capacity)
            if not math.isfinite(hi):
                rate = 2 * lo
                if rate > MAX_RATE_RPS:
                    search.timed_out = True  # no limit found: report what we have
                    break
    return best[0], steps


# --- max BCR ----------------------------------------------------------------------------------
FLOOR_CELLS = 2000
"""Geometric cells over the rate range on which the cost floor bounds each interval."""


def _max_bcr(search: _Search, demand: float) -> tuple[Choice | None, int, float | None]:
    """Dinkelbach's method over the rate (see the module docstring)."""
    first, cost, cap = search.at(demand)
    if first is None:
        return None, 0, None
    evaluated = [(demand, cost, cap, first)]  # (rate, cost, capacity, choice)
    probes: dict[float, float] = {}  # rate -> relaxed_cost there (a lower bound above it)
    top = cap  # the first rate not even the relaxation serves, by doubling
    while not search.timed_out:
        top *= 2
        probes[top] = search.relaxed(top)
        if math.isinf(probes[top]):
            break
        if top > MAX_RATE_RPS:
            search.timed_out = True  # no limit found: report what we have
    # past the time limit nothing above the last proven rate is bounded
    infeasible_above = math.inf if search.timed_out else top
    grid = np.geomspace(demand, top, FLOOR_CELLS + 1)
    floor = cost_floor(search.space, grid)
    if top / 2 > cap and not search.timed_out:  # the largest rate the relaxation serves:
        choice, c, b = search.at(top / 2)  # usually the best ratio's neighbourhood
        if choice is not None:
            evaluated.append((top / 2, c, b, choice))
        elif not search.timed_out:  # a datacenter limit the relaxation drops binds there
            infeasible_above = top / 2
    q = max(b / c for _, c, b, _ in evaluated)
    iterations = 1
    bound = math.inf
    while not search.timed_out:
        # Dinkelbach's parametric problem at q, bounded over the open intervals
        bound, segment = _best_gap(evaluated, probes, infeasible_above, grid, floor)
        if bound <= q * (1 + BCR_TOLERANCE) or segment is None:
            break
        start, low = segment
        probed = start in probes and start not in search.points
        if probed and start / low >= q * (1 - 1e-9):
            # its own minimum cost could beat q: the MILP there gives the plan (and
            # reveals the next step of C)
            choice, c, b = search.at(start)
            if choice is None:
                if not search.timed_out:
                    infeasible_above = min(infeasible_above, start)
                continue
            evaluated.append((start, c, b, choice))
            if b / c > q:
                q, iterations = b / c, iterations + 1
            continue
        # a probe below q: no rate up to q x low can beat q; a capacity's end: the step of C
        # just past it
        point = q * low if probed else start * (1 + BCR_TOLERANCE / 2)
        if point in probes:  # the bound there is already known: this would never end
            raise RuntimeError(f"planner bug: the max-BCR search probed {point:.6g} req/s twice")
        probes[point] = search.relaxed(point)
        if math.isinf(probes[point]):  # not even the relaxation has a plan there
            infeasible_above = min(infeasible_above, point)
    bound = max(q, _best_gap(evaluated, probes, infeasible_above, grid, floor)[0])
    best = max(evaluated, key=lambda e: (e[2] / e[1], -e[1]))
    return best[3], iterations, bound


def _best_gap(
    evaluated, probes: dict[float, float], infeasible_above: float, grid, floor
) -> tuple[float, tuple[float, float] | None]:
    """The highest BCR any rate outside the evaluated plans' capacities could reach, and the
    open segment where, as ``(start, lower bound on C at start)``. ``C`` does not
    decrease, so at a rate ``r`` it is at least the cost of every plan solved at or below
    ``r``, every probe's relaxed cost at or below ``r``, and the cost floor of ``r``'s cell. The segments run between solved
    rates, capacities and probes; the ratio bound in each is taken per cell."""
    solved = sorted((e[0], e[1], e[2]) for e in evaluated)
    marks = sorted(
        {r for r, _, _ in solved} | {b for _, _, b in solved} | set(probes) | {infeasible_above}
    )
    marks = [m for m in marks if m <= infeasible_above]
    known = sorted([(r, c) for r, c, _ in solved] + list(probes.items()))
    best, where = 0.0, None
    low, k = 0.0, 0
    for start, end in itertools.pairwise(marks):
        while k < len(known) and known[k][0] <= start:
            low = max(low, known[k][1])
            k += 1
        if any(r <= start and end <= b for r, _, b in solved):
            continue  # covered: its best ratio is a plan's, known
        if not math.isfinite(end):  # above every proven rate: nothing bounds it
            return math.inf, None
        first = max(int(np.searchsorted(grid, start, side="right")) - 1, 0)
        last = min(int(np.searchsorted(grid, end, side="left")), len(grid) - 1)
        cells = np.arange(first, last)
        if len(cells) == 0:
            ratio = end / low
        else:
            ratios = np.minimum(grid[cells + 1], end) / np.maximum(low, floor[cells])
            ratio = float(ratios.max())
        if ratio > best:
            best, where = ratio, (start, low)
    return best, where


# --- explanations -----------------------------------------------------------------------------
def _marginals(space: Space, fleet: Fleet, base: Evaluation, measure) -> list[Marginal]:
    """One more purchase step of each pool, and one link tier up (each evaluated, for the
    cost and capacity only: ``measure`` is ``cost_and_capacity``)."""
    hw, out = space.hw, []

    def marginal(changed: Fleet, change: str) -> Marginal | None:
        usage = [(p.datacenter, p.chip, p.gpus_per_instance * p.instances) for p in changed.pools]
        if not within_limits(space.scenario, hw, usage):
            return None  # over a datacenter limit: not an option
        cost, capacity = measure(changed)
        return Marginal(
            change,
            (cost or 0.0) - (base.cost_per_hour_usd or 0.0),
            capacity - base.sla_capacity_rps,
            capacity / cost if cost else None,  # as ``Evaluation.bcr``
        )

    for i, pool in enumerate(fleet.pools):
        unit = hw.chips[pool.chip].purchase_unit_gpus
        step = math.lcm(pool.gpus_per_instance, unit) // pool.gpus_per_instance
        pools = list(fleet.pools)
        pools[i] = pool.model_copy(update={"instances": pool.instances + step})
        noun = "instance" if step == 1 else "instances"
        out.append(
            marginal(
                fleet.model_copy(update={"pools": tuple(pools)}),
                f"+{step} {pool.role} {noun} ({pool.chip} x{pool.gpus_per_instance})",
            )
        )
    for i, choice in enumerate(fleet.links):
        link = next(x for x in space.scenario.links if set(x.between) == set(choice.between))
        faster = [t.gbps for t in link.tiers if t.gbps > choice.gbps]
        if faster:
            links = list(fleet.links)
            links[i] = LinkChoice(between=choice.between, gbps=faster[0])
            out.append(
                marginal(
                    fleet.model_copy(update={"links": tuple(links)}),
                    f"link {'-'.join(choice.between)} {choice.gbps:g} -> {faster[0]:g} Gbps",
                )
            )
    return [m for m in out if m is not None]


EXPLAIN_STEPS = 12
"""Bisection steps per relaxed family (on the log of the factor: about 0.1% on 1..100)."""
MAX_RELAX = 100.0
"""The loosest relaxation tried: limits x 100 (demand / 100; utilization cap 0.99)."""


def _relaxed(scenario: Scenario, family: str, f: float) -> tuple[Scenario, str]:
    """``scenario`` with one family of limits relaxed by factor ``f >= 1``, and the relaxed
    values in words."""
    sla, sea = scenario.sla, scenario.search
    if family == "TTFT P90":
        p90 = sla.ttft_p90_s * f
        p99 = max(sla.ttft_p99_s, p90)  # P99 may not be below P90
        new = sla.model_copy(update={"ttft_p90_s": p90, "ttft_p99_s": p99})
        text = f"TTFT P90 {p90:.3g} s" + (f" (and P99 {p99:.3g} s)" if p99 > sla.ttft_p99_s else "")
        return scenario.model_copy(update={"sla": new}), text
    if family == "TTFT P99":
        new = sla.model_copy(update={"ttft_p99_s": sla.ttft_p99_s * f})
        return scenario.model_copy(update={"sla": new}), f"TTFT P99 {new.ttft_p99_s:.3g} s"
    if family == "TTFT P90 and P99":
        new = sla.model_copy(
            update={"ttft_p90_s": sla.ttft_p90_s * f, "ttft_p99_s": sla.ttft_p99_s * f}
        )
        text = f"TTFT P90 {new.ttft_p90_s:.3g} s and P99 {new.ttft_p99_s:.3g} s"
        return scenario.model_copy(update={"sla": new}), text
    if family == "TPOT":
        new = sla.model_copy(update={"tpot_ms": sla.tpot_ms * f})
        return scenario.model_copy(update={"sla": new}), f"TPOT {new.tpot_ms:.3g} ms"
    if family == "demand":
        rate = (scenario.workload.arrival_rps or 0.0) / f
        work = scenario.workload.model_copy(update={"arrival_rps": rate})
        return scenario.model_copy(update={"workload": work}), f"demand {rate:.4g} req/s"
    if family == "max utilization":
        cap = min(1 - (1 - sea.max_utilization) / f, 0.99)
        new = sea.model_copy(update={"max_utilization": cap})
        return scenario.model_copy(update={"search": new}), f"utilization cap {cap:.1%}"
    # datacenter limits: GPUs, power and the per-pool cap, all x f
    dcs = {
        k: dc.model_copy(
            update={
                "max_gpus": None if dc.max_gpus is None else math.ceil(dc.max_gpus * f),
                "max_power_kw": None if dc.max_power_kw is None else dc.max_power_kw * f,
            }
        )
        for k, dc in scenario.datacenters.items()
    }
    new = sea.model_copy(update={"max_gpus_per_pool": math.ceil(sea.max_gpus_per_pool * f)})
    trial = scenario.model_copy(update={"datacenters": dcs, "search": new})
    return trial, f"datacenter GPU and power limits x {f:.3g}"


FAMILIES = (
    "TTFT P90",
    "TTFT P99",
    "TTFT P90 and P99",
    "TPOT",
    "demand",
    "max utilization",
    "datacenter limits",
)
"""The families of limits ``solve`` relaxes to explain an infeasible scenario."""


def _budget_needed(
    space: Space, solver: str, deadline: float, clock: Callable[[], float]
) -> Relaxation:
    """max capacity with a budget that buys nothing: the cheapest plan's cost at a vanishing
    rate is the budget it takes."""
    budget = space.scenario.budget_usd_per_hour
    left = max(deadline - clock(), 1.0)
    out = milp.min_cost(space.at(MIN_RATE_RPS), solver=solver, time_limit_s=left, clock=clock)
    if out.choice is None:
        return Relaxation("budget", 1.0, None, "no plan serves any traffic, at any budget")
    return Relaxation(
        "budget",
        1.0,
        out.cost_per_hour / budget,
        f"needs a budget of ${out.cost_per_hour:,.2f}/hour to serve any traffic; "
        f"the scenario has ${budget:,.2f}/hour",
    )


def _explain(
    scenario: Scenario,
    hardware: HardwareCatalog,
    models: dict[str, ModelSpec],
    solver: str,
    deadline: float,
    clock: Callable[[], float],
) -> list[Relaxation]:
    """For each family of limits: relax it alone (up to ``MAX_RELAX``); if that makes the
    demand servable, bisect for the smallest relaxation that does. Families left when the
    solve's time limit runs out are reported as not tried."""

    def feasible(family: str, f: float) -> bool:
        trial, _ = _relaxed(scenario, family, f)
        try:
            space = Space(trial, hardware, models)
        except InputError:
            return False
        rate = trial.workload.arrival_rps or 0.0
        left = max(deadline - clock(), 1.0)
        out = milp.min_cost(space.at(rate), solver=solver, time_limit_s=left, clock=clock)
        return out.choice is not None

    out = []
    for family in FAMILIES:
        if clock() > deadline:
            out.append(Relaxation(family, 1.0, None, "not tried: the time limit ran out"))
            continue
        if not feasible(family, MAX_RELAX):
            out.append(
                Relaxation(
                    family, 1.0, None, f"relaxing {family} alone (x {MAX_RELAX:g}) does not help"
                )
            )
            continue
        good, bad = MAX_RELAX, 1.0
        for _ in range(EXPLAIN_STEPS):
            mid = math.sqrt(good * bad)
            good, bad = (mid, bad) if feasible(family, mid) else (good, mid)
        _, now = _relaxed(scenario, family, 1.0)
        _, needed = _relaxed(scenario, family, good)
        verb = "can serve at most" if family == "demand" else "needs"
        out.append(Relaxation(family, 1.0, good, f"{verb} {needed}; the scenario has {now}"))
    return out
