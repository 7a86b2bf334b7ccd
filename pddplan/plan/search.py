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
  bound exceeds ``q (1 + bcr_tolerance)``, which proves the optimum to that tolerance; the
  largest bound is reported.

Every deployment is scored by the evaluator (``pddplan.evaluation.evaluator``), so the report's
capacity, TTFT and BCR are the evaluator's, not the MILP's.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import NamedTuple

import numpy as np

from pddplan.errors import InputError
from pddplan.evaluation.evaluator import MAX_RATE_RPS, cost_and_capacity, evaluate, sla_capacity
from pddplan.model.network import TcpPath, link_bytes_per_s, rdma_transfer_s, wan_times
from pddplan.model.problem import Problem
from pddplan.plan import milp
from pddplan.plan.counts import Requirements
from pddplan.plan.explain import (
    MIN_RATE_RPS,
    budget_needed,
    explain_infeasible,
    marginals,
    verdict,
)
from pddplan.plan.results import BcrStep, PlanResult, Relaxation, SolveStats
from pddplan.plan.space import Choice, NoOptionsError, PoolOption, Space
from pddplan.spec.fleet import Fleet
from pddplan.spec.scenario import Role

RATE_TOLERANCE = 1e-4
"""max capacity stops when the bracket is this narrow (relative)."""
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

    def at(self, rate: float) -> tuple[Choice | None, float, float]:
        """(choice, cost per hour, evaluated SLA capacity) of the cheapest plan at ``rate``;
        (None, inf, 0) when no plan serves it."""
        if rate in self.points:
            return self.points[rate]
        left = self.deadline - self.clock()
        if left <= 0 or self.solves >= MAX_MILP_SOLVES:
            self.timed_out = True
            return None, math.inf, 0.0
        req = self.tables.pop(rate, None) or Requirements(self.space, rate)
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
        point: tuple[Choice | None, float, float]
        if out.choice is None or out.cost_per_hour is None:
            point = (None, math.inf, 0.0)
        else:
            self.last_gap = out.gap
            fleet = self.space.fleet(out.choice, "plan")
            capacity = sla_capacity(self.space.problem, fleet, served_rps=rate * (1 - 1e-9))
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
        req = Requirements(self.space, rate)
        self.tables[rate] = req
        return relaxed_cost(req)


def solve_plan(
    problem: Problem,
    *,
    objective: str | None = None,
    solver: str | None = None,
    time_limit_s: float | None = None,
    explain: bool = True,
    clock: Callable[[], float] = time.perf_counter,
) -> PlanResult:
    """Plan ``problem`` for ``objective`` (default: the scenario's). ``clock`` is the time
    source the time limit is measured on (tests give a fake one)."""
    scenario = problem.scenario
    objective = objective or scenario.objective
    solver = solver or scenario.solver.name
    limit = time_limit_s if time_limit_s is not None else scenario.solver.time_limit_s
    start = clock()
    demand = (scenario.workload.arrival_rps or 0.0) * (1 + scenario.headroom)  # planned
    if objective == "max-capacity" and scenario.budget_usd_per_hour is None:
        raise InputError(
            problem.located(
                ("budget_usd_per_hour",),
                "objective 'max-capacity' needs a budget in USD per hour; the scenario sets "
                "none (add budget_usd_per_hour)",
            )
        )
    try:
        space = Space(problem)
    except NoOptionsError as e:
        deadline = start + limit
        relaxations = explain_infeasible(problem, solver, deadline, clock) if explain else []
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
    iterations, bound, best_bcr = 0, None, None
    if objective == "min-cost":
        choice, _, _ = search.at(demand)
    elif objective == "max-capacity":
        choice, iterations = _max_capacity(search)
    else:
        choice, iterations, bound, best_bcr = _max_bcr(search, demand)
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
        bcr_best=best_bcr,
    )
    if choice is None and explain and status == "infeasible" and objective == "max-capacity":
        relaxations = [budget_needed(space, solver, start + limit, clock)]
    elif choice is None and explain and status == "infeasible":
        relaxations = explain_infeasible(problem, solver, start + limit, clock)
    else:
        relaxations = []
    result = finish_plan(space, stats, choice, relaxations=relaxations)
    steps = _bcr_steps(search) if objective == "max-bcr" else []
    return replace(result, stats=replace(stats, seconds=clock() - start), bcr_steps=steps)


def finish_plan(
    space: Space,
    stats: SolveStats,
    choice: Choice | None,
    *,
    method: str = "milp",
    relaxations: list[Relaxation] | None = None,
) -> PlanResult:
    """The plan's deployment, its evaluation at the demand and its marginal values."""
    s = space.scenario
    if choice is None:
        return PlanResult(
            s.name, s.model, stats.status, stats, relaxations=relaxations or [], method=method
        )
    fleet = space.fleet(choice, f"{s.name}-plan")

    def measure(f: Fleet) -> tuple[float | None, float]:
        return cost_and_capacity(space.problem, f)

    evaluation = evaluate(space.problem, fleet)
    plan = PlanResult(
        s.name,
        s.model,
        stats.status,
        stats,
        fleet,
        evaluation,
        marginals(space, fleet, evaluation, measure),
        method=method,
        kv_bytes_per_token=space.problem.kv.bytes_per_token,
        kv_fixed_bytes=space.problem.kv.fixed_bytes,
        planned_rps=evaluation.planned_rps,
    )
    return replace(plan, verdict=verdict(space, plan))


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


# --- lower bounds on the minimum cost, for max BCR --------------------------------------------
def _low(space: Space, o: PoolOption, n):
    """The cost of ``n`` instances of ``o``, as many of its GPUs owned as the inventory
    allows (owned GPUs at their running cost), so never above what a plan pays."""
    owned, discount = space.owned.get((o.datacenter, o.chip), (0, 0.0))
    return n * o.usd_per_instance_hour - discount * np.minimum(n * o.gpus, owned)


def _cheapest(space: Space, needs: list[tuple[PoolOption, np.ndarray]], shape) -> np.ndarray:
    """Elementwise, the cheapest of the options' minimum counts (inf past an option's
    maximum, or with no option)."""
    best = np.full(shape, np.inf)
    for o, n in needs:
        best = np.minimum(best, np.where(n > o.max_instances, np.inf, _low(space, o, n)))
    return best


def relaxed_cost(req: Requirements) -> float:
    """A lower bound on the minimum-cost MILP's optimum at ``req.rate`` (inf: no plan).

    The MILP picks one option per role, one transfer state and one relay, singular and
    catch-up cut, each option at least its minimum count for those choices
    (``Requirements``). Dropping the datacenter limits (GPUs, power) and pricing each pool
    with as many of its GPUs owned as the inventory allows leaves, per transfer state and
    cut, the sum of each role's cheapest option at its minimum count: the minimum of that
    over the choices never exceeds the MILP's optimum, and equals it when no limit binds."""
    sp = req.space
    ncut = len(sp.cuts)
    nsing, ncatch = len(sp.singular_cuts), len(sp.catch_up_cuts)
    best = math.inf
    for st in req.feasible_states:
        prefill = _cheapest(
            sp,
            [(o, req.prefill(o, st)) for o in sp.options["prefill"] if st.sent_by(o)],
            ncut,
        )
        if not np.isfinite(prefill).any():
            continue
        # one row per singular cut (relay), per (singular, catch-up) cut (decode), as
        # ``Requirements.relay_all`` and ``main_all`` give them; elementwise, as one by one,
        # per RLD count band (the band sets RLD's pace, and so MD's counts)
        main = [o for o in sp.options["main_decode"] if o.datacenter == st.md_dc]
        relays = sp.relay_matrix[st.cache].any(axis=1)
        rld = [o for o in sp.options["relay_decode"] if o.datacenter == st.p_dc]
        for band in req.bands():
            if band.index < 0:
                relay = np.tile(np.where(relays, np.inf, 0.0), (nsing, 1))
            elif rld:
                relay = _cheapest(sp, [(o, req.relay_all(o, st, band)) for o in rld], (nsing, ncut))
            else:
                continue
            decode = _cheapest(
                sp, [(o, req.main_all(o, st, band)) for o in main], (nsing * ncatch, ncut)
            )
            totals = (prefill + np.repeat(relay, ncatch, axis=0) + decode).min(axis=1)
            best = min(best, float((totals + st.usd_per_hour).min()))
    return best


def cost_floor(space: Space, grid: np.ndarray) -> np.ndarray:
    """For each cell ``[grid[i], grid[i+1]]`` of rates, a lower bound on the cheapest plan's
    cost per hour anywhere in the cell (inf where no option can carry the rate).

    It adds the cheapest prefill option at its utilization floor to the cheapest, over the
    decode-side cache choices, of: the cheapest transfer state of that cache choice within
    the link cap, plus the cheapest main decode at its utilization floor (at the batch that
    cache choice leaves): for
    every token, or, if requests may be relayed, for the fewest tokens relaying can leave
    it (every request relayed, with the eager tokens of the slowest state still feasible at
    the cell's start, its WAN time taken at the cell's end, at relay decode's fastest step)
    plus one RLD purchase step. It
    ignores TTFT, TPOT and the coupling between roles, so it never exceeds the MILP's
    minimum. ``pddplan.plan.search`` uses it to prune rate intervals for max BCR."""
    lo, hi = np.asarray(grid[:-1], dtype=float), np.asarray(grid[1:], dtype=float)
    w = space.w

    def cheapest(role: Role, tokens: np.ndarray | float, cache_state=None) -> np.ndarray:
        best = np.full_like(lo, np.inf)
        for o in space.options[role]:
            per_instance: float | np.ndarray
            if role == "prefill":
                per_instance = space.rho / float(w @ space.prefill_times(o)[1])
            else:
                batch, step = (o.batch, o.step_s)
                if role == "main_decode" and cache_state is not None:
                    batch, step = space.md_point(o, cache_state)
                if batch == 0:
                    continue
                per_instance = space.rho * batch / step / np.maximum(tokens, 1e-12)
            n = np.maximum(np.ceil(lo / per_instance * (1 - 1e-9)), 1)
            n = np.ceil(n / o.unit_step) * o.unit_step
            cost = np.where(n <= o.max_instances, _low(space, o, n), np.inf)
            best = np.minimum(best, cost)
        return best

    prefill = cheapest("prefill", 0.0)
    relaying = any(c is not None for c in space.cuts) and space.options["relay_decode"]
    total = np.full_like(lo, np.inf)
    for k in range(len(space.caches)):  # each decode-side cache choice on its own
        states = np.full_like(lo, np.inf)
        longest = np.zeros((len(lo), len(w)))  # per cell: the longest WAN time per class
        payload = space.payloads[k]
        here = [st for st in space.states if st.cache == k]
        for st in here:
            if st.gbps is None:
                nic = space.hw.chips[st.sender].nic_bytes_per_s
                states = np.minimum(states, 0.0)
                longest = np.maximum(longest, rdma_transfer_s(payload, nic_bytes_per_s=nic))
                continue
            total_payload = float(w @ payload)
            goodput = link_bytes_per_s(st.gbps, st.wan.tcp_efficiency)
            feasible = lo * total_payload / goodput <= space.link_rho * (1 + 1e-9)
            states = np.minimum(states, np.where(feasible, st.usd_per_hour, np.inf))
            path = TcpPath.of(st.wan)
            for cell in np.nonzero(feasible)[0]:
                u = min(hi[cell] * total_payload / goodput, space.link_rho)
                wan, _ = wan_times(payload, path=path, goodput_bytes_per_s=goodput, utilization=u)
                longest[cell] = np.maximum(longest[cell], wan)
        if not here:
            continue
        decode = cheapest("main_decode", float(w @ space.out), here[0])
        if relaying:
            # the most eager tokens: RLD at its fastest step (one sequence a batch)
            fastest = min(float(space.decode_steps(o)[1][0]) for o in space.options["relay_decode"])
            eager = np.minimum(space.out, np.ceil(longest / fastest))
            singular = space.out <= max(space.singular_cuts)
            fewest = np.where(singular, 0.0, space.out - eager) @ w
            rld = min(float(_low(space, o, o.unit_step)) for o in space.options["relay_decode"])
            decode = np.minimum(decode, cheapest("main_decode", fewest, here[0]) + rld)
        total = np.minimum(total, decode + states)
    return prefill + total


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


def _max_bcr(
    search: _Search, demand: float
) -> tuple[Choice | None, int, float | None, float | None]:
    """Dinkelbach's method over the rate (see the module docstring) for the best BCR and its
    proven bound; then the cheapest plan within the plateau of the bound
    (``_cheapest_reaching``). Returns (that plan, iterations, bound, best BCR found)."""
    tolerance = search.space.scenario.search.bcr_tolerance
    first, cost, cap = search.at(demand)
    if first is None:
        return None, 0, None, None
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
        if bound <= q * (1 + tolerance) or segment is None:
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
        point = q * low if probed else start * (1 + tolerance / 2)
        if point in probes:  # the bound there is already known: this would never end
            raise RuntimeError(f"planner bug: the max-BCR search probed {point:.6g} req/s twice")
        probes[point] = search.relaxed(point)
        if math.isinf(probes[point]):  # not even the relaxation has a plan there
            infeasible_above = min(infeasible_above, point)
    bound = max(q, _best_gap(evaluated, probes, infeasible_above, grid, floor)[0])
    best = max(evaluated, key=lambda e: (e[2] / e[1], -e[1]))
    if search.timed_out or not math.isfinite(bound):
        return best[3], iterations, bound, q
    threshold = (1 - search.space.scenario.search.bcr_plateau) * bound
    bounds = _Bounds(evaluated, probes, infeasible_above, grid, floor)
    cheapest = _cheapest_reaching(search, threshold, demand, bounds, tolerance)
    return (cheapest or best[3]), iterations, bound, q


class _Bounds(NamedTuple):
    """What the max-BCR search knows about the minimum cost ``C`` of each rate: the plans
    it solved (rate, cost, capacity, choice), the probes' lower bounds (rate -> cost), the
    rate above which nothing is feasible, and the cost floor of each grid cell."""

    evaluated: list[tuple[float, float, float, Choice]]
    probes: dict[float, float]
    infeasible_above: float
    grid: np.ndarray
    floor: np.ndarray

    def first_possible(self, threshold: float, start: float) -> float | None:
        """The smallest rate ``t >= start`` at which a plan could reach BCR ``threshold``:
        ``t / L(t) >= threshold`` with ``L`` the lower bound on ``C`` at ``t`` (every
        solved cost and probe at or below ``t``, and ``t``'s cell floor; ``L`` at a cell's
        start stands for the whole cell, which only makes ``t`` earlier). None: no rate
        up to the feasible limit can."""
        known = sorted([(r, c) for r, c, _, _ in self.evaluated] + list(self.probes.items()))
        grid, floor = self.grid, self.floor
        first = max(int(np.searchsorted(grid, start, side="right")) - 1, 0)
        for i in range(first, len(grid) - 1):
            lo, hi = max(start, float(grid[i])), min(float(grid[i + 1]), self.infeasible_above)
            if lo > hi:
                return None
            low = max([c for r, c in known if r <= lo] + [float(floor[i])])
            t = max(lo, threshold * low)
            if t <= hi:
                return t
        return None


def _cheapest_reaching(
    search: _Search, threshold: float, demand: float, bounds: _Bounds, tolerance: float
) -> Choice | None:
    """The cheapest plan whose BCR is at least ``threshold`` (None if the search runs out
    of time first). A plan that is the cheapest at some rate dominates every other plan of
    its capacity, and the cheapest cost only grows with the rate, so the steps of ``C``
    are scanned in increasing rate from ``demand``: the first step reaching ``threshold``
    is the answer, and stretches no step can reach (``first_possible``) are skipped."""
    rate = demand
    while not search.timed_out:
        t = bounds.first_possible(threshold, rate)
        if t is None:
            return None
        choice, cost, capacity = search.at(t)
        if choice is None:
            return None
        bounds.evaluated.append((t, cost, capacity, choice))
        if capacity / cost >= threshold:
            return choice
        rate = capacity * (1 + tolerance / 2)  # the next step of C
    return None


def _bcr_steps(search: _Search) -> list[BcrStep]:
    """Every distinct plan the search solved, cheapest first."""
    seen: dict[tuple[float, float], BcrStep] = {}
    for choice, cost, capacity in search.points.values():
        if choice is not None and cost > 0:
            key = (round(cost, 9), round(capacity, 9))
            seen.setdefault(key, BcrStep(cost, capacity, capacity / cost))
    return sorted(seen.values(), key=lambda s: (s.cost_per_hour_usd, s.sla_capacity_rps))


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
