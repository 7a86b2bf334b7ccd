"""``pddplan solve``: the objectives on top of the minimum-cost MILP, and the explanations.

Each rate's minimum cost (``_Search.at``) is the relaxation's plan when that meets the
datacenter rows it drops (``pddplan.plan.bounds.relaxed_optimum``: then no MILP runs), else
the MILP's (``pddplan.plan.milp.min_cost``). The plan returned is then the one of equal
cost the evaluator confirms and prefers, with its router tuned (``_Search._preferred``).

- **min cost** at the scenario's demand: one such rate.
- **max SLA capacity** within ``budget_usd_per_hour``: a search on the arrival rate; each
  step asks the MILP for the cheapest deployment at that rate and compares it with the
  budget. A feasible step jumps to that deployment's evaluated capacity and tries the rate
  just past it next (no plan there proves it the answer); otherwise doubling, then
  bisection.
- **max BCR** (SLA capacity per dollar-hour, capacity at least the demand): Dinkelbach's
  method. Let ``C(r)`` be the MILP's minimum cost at rate ``r``; it does not decrease with
  ``r``, and the best BCR is ``max_r r / C(r)``. For the current ratio ``q``, the
  parametric problem ``max_r r - q C(r)`` is bounded over rate segments, a branch and bound
  on the rate: a solve at ``r_i`` gives a deployment of cost ``c_i`` whose evaluated
  capacity ``b_i`` covers ``[r_i, b_i]`` exactly; a *probe* at ``t`` (``relaxed_optimum``, the
  MILP without its datacenter rows, no solver) gives a lower bound on ``C`` from ``t`` on;
  and ``cost_floor`` bounds each cell of a rate grid. The segment with the best bound is
  worked next: probed just past its start when that is a capacity (the next cost step),
  probed at ``q`` times its lower bound when its start cannot reach ``q`` (closing
  everything below), else solved. ``q`` follows the best evaluated ratio. It stops when no
  bound exceeds ``q (1 + bcr_tolerance)``, which proves the optimum to that tolerance; the
  largest bound is reported.

Every deployment is scored by the evaluator (``pddplan.evaluation.evaluator``), so the report's
capacity, TTFT and BCR are the evaluator's, not the MILP's.

Each search stops on counted work (``docs/milp.md``, "Work budgets"): ``solver.rate_points``
rates priced, ``solver.node_limit`` nodes per MILP, ``CUT_ROUNDS`` and ``RESIZES``
check-and-cut rounds per rate, so its answer is the same on any machine (``work_limit``
where a budget ran out). ``solver.time_limit_s`` is a wall-clock safety stop only
(``time_limit``: the answer may differ on a faster machine).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import replace
from typing import NamedTuple

import numpy as np

from pddplan.errors import InputError
from pddplan.evaluation.evaluator import (
    CAPACITY_TOLERANCE,
    MAX_RATE_RPS,
    Evaluator,
    capacity_if_serving,
    cost_and_capacity,
    evaluate,
    serves,
    sla_capacity,
    ttft_p99,
    wider,
    widest_router,
)
from pddplan.model.problem import Problem
from pddplan.plan.alternatives import RunnerUps, runner_ups
from pddplan.plan.bounds import MAX_TIES, cost_floor, plan_cost, relaxed_optimum
from pddplan.plan.counts import Requirements
from pddplan.plan.explain import (
    MIN_RATE_RPS,
    budget_needed,
    explain_infeasible,
    idle_pools,
    verdict,
)
from pddplan.plan.explain import marginals as price_steps
from pddplan.plan.results import (
    BcrStep,
    PlanResult,
    RejectedPlan,
    Relaxation,
    SolveStats,
)
from pddplan.plan.space import (
    NO_RLD,
    Band,
    Choice,
    NoOptionsError,
    Space,
    describe,
    hardware_key,
)
from pddplan.progress import Progress
from pddplan.spec.choices import MAX_BCR, MAX_CAPACITY, MIN_COST, Objective
from pddplan.spec.fleet import Fleet
from pddplan.spec.status import PlanStatus
from pddplan.work import TimeLimitReached, counted, deadline, tally, wall_clock

RATE_TOLERANCE = 1e-4
"""max capacity stops when the bracket is this narrow (relative)."""
CUT_ROUNDS = 12
"""How many deployments ``_Search.at`` may find rejected by the evaluator at one rate (each
cut and the rate solved again) before it gives up on a proven plan there and plans the
rate scaled by the shortfall instead (``RESIZES``), reported as ``work_limit``."""
RESIZES = 4
"""After ``CUT_ROUNDS``: how many times ``_Search.at`` plans for a higher rate, each time by
the shortfall the evaluator found."""


class _Search:
    """Minimum-cost solves at chosen rates, memoized, with the evaluator's capacity, within
    the scenario's work budgets (``solver.rate_points``, ``solver.node_limit``) and its
    wall-clock safety stop (``deadline``, on ``clock``)."""

    def __init__(
        self,
        space: Space,
        solver: str,
        start: float,
        limit_s: float,
        budget: float | None,
        clock: Callable[[], float] = wall_clock,
        progress: Progress | None = None,
        objective: Objective = MIN_COST,
    ) -> None:
        self.space, self.solver, self.budget = space, solver, budget
        self.progress, self.objective = progress, objective
        self.deadline, self.limit_s, self.clock = start + limit_s, limit_s, clock
        options = space.scenario.solver
        self.rate_points, self.node_limit = options.rate_points, options.node_limit
        self.priced = 0
        """Rates priced: minimum-cost points and relaxation probes (``rate_points``)."""
        self.solves = 0
        self.size = (0, 0)
        self.stop: PlanStatus | None = None
        """``WORK_LIMIT`` or ``TIME_LIMIT`` once the search must stop, else None."""
        self.stop_reason: str | None = None
        """What stopped it, in words."""
        self.points: dict[float, tuple[Choice | None, float, float]] = {}
        self.last_gap: float | None = None
        self.tables: dict[float, Requirements] = {}
        """Requirements computed by probes (``relaxed``), for a solve at the same rate."""
        self.solved: dict[float, Requirements] = {}
        """Requirements of the rates solved, for the router settings (``_preferred``)."""
        self.milp = True
        """Whether a rate the relaxation does not settle is solved by the MILP (False: it has
        no plan here; ``pddplan.plan.horizon``'s menus, which say so)."""
        self.rounds = 0
        """Check-and-cut rounds: deployments the evaluator found short of the rate they
        were planned for (``at``)."""
        self.rejected: list[RejectedPlan] = []
        """Each deployment the evaluator rejected."""
        self.lower_bound = 0.0
        """The relaxation's bound on the minimum cost at the rate ``_cheapest`` last solved."""
        self.unproven = False
        """Whether a rate's plan was found by resizing (``CUT_ROUNDS`` ran out): confirmed,
        not proven the cheapest..."""
        self.unproven_reason: str | None = None
        """...and that, in words."""
        self.settled: set[float] = set()
        """The rates whose relaxation's plan was the optimum (no MILP ran there)."""

    @property
    def stopped(self) -> bool:
        """Whether a budget or the safety stop ended the search."""
        return self.stop is not None

    def halt(self, stop: PlanStatus, reason: str) -> None:
        """Stop the search: the first reason is kept, but the time limit overrides a work
        budget (an answer it shaped may differ on a faster machine, which must be said)."""
        if self.stop is None or (stop == PlanStatus.TIME_LIMIT and self.stop != stop):
            self.stop, self.stop_reason = stop, reason

    def _timed_out(self) -> None:
        self.halt(PlanStatus.TIME_LIMIT, f"the time limit ({self.limit_s:g} s)")

    def _price(self) -> bool:
        """Count one rate priced; False, and the search stops, past the rate-point budget
        or the time limit."""
        if self.clock() >= self.deadline:
            self._timed_out()
            return False
        if self.priced >= self.rate_points:
            self.halt(
                PlanStatus.WORK_LIMIT,
                f"its rate-point budget (solver.rate_points = {self.rate_points:,})",
            )
            return False
        self.priced += 1
        tally("rate_points")
        if self.progress is not None:  # the total is not known: the search ends when it proves
            self.progress(self.priced, None, f"{self.objective}: {self.solves:,} MILP solves, "
                          f"at most {self.rate_points:,} rates")  # fmt: skip
        return True

    def at(self, rate: float) -> tuple[Choice | None, float, float]:
        """``_at``, memoized; (None, inf, 0), not kept, where the time limit stops it."""
        if rate in self.points:
            return self.points[rate]
        try:
            point = self._at(rate)
        except TimeLimitReached:
            self._timed_out()
            return None, math.inf, 0.0
        self.points[rate] = point
        return point

    def _at(self, rate: float) -> tuple[Choice | None, float, float]:
        """(choice, cost per hour, evaluated SLA capacity) of the cheapest plan at ``rate``
        that the evaluator confirms; (None, inf, 0) when no plan serves it.

        Check and cut (``docs/milp.md``): the planner's counts are meant never to be below
        what the evaluator needs, but where a plan's deployment is short of ``rate`` under
        every router setting it may use (``router_settings``), it is excluded (a cut) and
        the rate solved again, so the plan returned is the cheapest the evaluator confirms.
        Each rejection is a round (``rounds``). After ``CUT_ROUNDS`` rejections at one rate the search stops
        proving and plans for the rate scaled by the shortfall, up to ``RESIZES`` times: a
        confirmed plan, not a proven one (the search's status is then ``work_limit``)."""
        point: tuple[Choice | None, float, float] = (None, math.inf, 0.0)
        rejected: list[Choice] = []
        target, lower = rate, 0.0
        for attempt in range(CUT_ROUNDS + RESIZES + 1):
            resizing = attempt >= CUT_ROUNDS
            choice, cost, gap = self._cheapest(
                target, tuple(rejected) if not resizing else (), at_rate=rate
            )
            if choice is None or cost is None:
                break
            self.last_gap = gap
            if not resizing:
                lower = self.lower_bound
            confirmed, capacity = self.confirmed(choice, rate)
            if confirmed is not None:
                confirmed, capacity = self._preferred(confirmed, cost, rate)
                point = (confirmed, cost, capacity)
                if resizing:  # confirmed, not proven: its gap against the rate's bound
                    self.unproven = True
                    self.unproven_reason = (
                        f"the check-and-cut rounds' budget at one rate (CUT_ROUNDS = {CUT_ROUNDS})"
                    )
                    self.last_gap = max(0.0, cost - lower) / cost if cost > 0 else 0.0
                break
            self.rounds += 1
            self.rejected.append(RejectedPlan(rate, capacity, describe(choice)))
            if not resizing:
                rejected.append(choice)
            else:
                target *= rate / max(capacity, 1e-12) * (1 + 1e-3)
        return point

    def confirmed(self, choice: Choice, rate: float) -> tuple[Choice | None, float]:
        """``choice`` as it is if it serves ``rate``, else with the router setting
        (``router_settings``) that gives it the largest SLA capacity, if that serves
        ``rate``; with the capacity. (None, the largest capacity) when no setting does."""
        capacity = self._capacity(choice)
        if serves(capacity, rate):
            return choice, capacity
        best, capacity = self._widest_router(
            choice, capacity, self.solved[rate], least=rate * (1 - CAPACITY_TOLERANCE)
        )
        return (best, capacity) if serves(capacity, rate) else (None, capacity)

    def _capacity(self, choice: Choice) -> float:
        return sla_capacity(self.space.problem, self.space.fleet(choice, "plan"))

    def _capacity_above(self, choice: Choice, floor: float) -> float | None:
        """``choice``'s SLA capacity if it is within every limit at ``floor`` req/s, else
        None (``capacity_if_serving``: the limits grow with the rate but for rare kinks,
        which this reads as the capacity being below ``floor``)."""
        return capacity_if_serving(self.space.problem, self.space.fleet(choice, "plan"), floor)

    def _widest_router(
        self, choice: Choice, capacity: float, req: Requirements, least: float = 0.0
    ) -> tuple[Choice, float]:
        """``choice`` (of SLA capacity ``capacity``) under the router setting of
        ``router_settings`` that gives it the largest SLA capacity, counting only settings
        within every limit at ``least`` req/s; of equal capacities, ``choice``'s own, then
        the first (``widest_router``). With its capacity."""
        problem, others = self.space.problem, router_settings(req, choice)
        fleets = [self.space.fleet(c, "plan") for c in others]
        i, best = widest_router(
            capacity,
            len(others),
            lambda i, rate: Evaluator(problem, fleets[i]).slack(rate),
            lambda i: sla_capacity(problem, fleets[i]),
            least=least,
        )
        return (choice if i < 0 else others[i]), best

    def _cheapest(
        self, rate: float, rejected: tuple[Choice, ...] = (), *, at_rate: float | None = None
    ) -> tuple[Choice | None, float | None, float | None]:
        """The minimum-cost plan at ``rate`` but for the ``rejected`` deployments: the
        relaxation's where it is exact, else the MILP's (None when there is none, or the
        search must stop). Its tables are kept for ``at_rate`` (default ``rate``), the rate
        the plan is confirmed at."""
        if not self._price():
            return None, None, None
        req = self.tables.pop(rate, None) or self.solved.get(rate) or Requirements(self.space, rate)
        self.solved[rate] = req
        self.solved.setdefault(at_rate if at_rate is not None else rate, req)
        keys = frozenset(hardware_key(c) for c in rejected)
        relaxed = relaxed_optimum(req, self.budget, rejected=keys)
        self.lower_bound = relaxed.cost
        if relaxed.exact:  # no datacenter limit binds: the relaxation's plan is optimal
            self.settled.add(rate)
            return relaxed.choices[0], relaxed.cost, 0.0
        if math.isinf(relaxed.cost) or not self.milp:
            return None, None, None
        # imported here: PuLP takes 0.04 s to import, and the relaxation settles most rates
        from pddplan.plan import milp

        out = milp.min_cost(
            req,
            solver=self.solver,
            time_limit_s=max(self.deadline - self.clock(), 1e-3),
            mip_gap=self.space.scenario.solver.mip_gap,
            node_limit=self.node_limit,
            budget_usd_per_hour=self.budget,
            clock=self.clock,
            lower_bound=relaxed.cost,
            rejected=rejected,
        )
        self.solves += out.solves
        self.size = (max(self.size[0], out.variables), max(self.size[1], out.constraints))
        if out.status.on_time:
            self._timed_out()
        elif out.status.on_nodes:
            self.halt(
                PlanStatus.WORK_LIMIT,
                f"a MILP's node limit (solver.node_limit = {self.node_limit:,})",
            )
        return out.choice, out.cost_per_hour, out.gap

    def _preferred(self, choice: Choice, cost: float, rate: float) -> tuple[Choice, float]:
        """The tie rule, at every rate the search solves (``docs/milp.md``, "Of plans of
        equal cost"): of the deployments of ``choice``'s cost at ``rate`` that the evaluator
        confirms (``choice`` and up to ``MAX_TIES`` the relaxation finds at that cost), the
        one ``widest`` picks; then, for it, the router setting (``router_settings``) that
        gives it the largest SLA capacity. The minimum-cost MILP is indifferent between
        them, yet on one fleet they can move the TTFT tail several times. Returns it and
        its capacity."""
        req = self.solved[rate]
        ties = [choice]
        for c in relaxed_optimum(req, self.budget, ties=MAX_TIES).choices:
            if hardware_key(c) != hardware_key(choice) and math.isclose(
                plan_cost(self.space, c), cost, rel_tol=1e-9, abs_tol=1e-9
            ):
                ties.append(c)
        scored = [(choice, self._capacity(choice))]  # confirmed: it serves the rate
        for c in ties[1:]:
            top = max(b for _, b in scored)
            b = self._capacity_above(
                c, max(rate * (1 - CAPACITY_TOLERANCE), top * (1 - 2 * CAPACITY_TOLERANCE))
            )
            if b is not None and serves(b, rate):
                scored.append((c, b))
        best, capacity = widest(self.space, scored, rate)
        return self._widest_router(best, capacity, req)

    def relaxed(self, rate: float) -> float:
        """A lower bound on the minimum cost at ``rate`` (``relaxed_optimum``); its tables
        are kept for a solve there. Past the rate-point budget or the time limit: 0, and
        the search stops."""
        if not self._price():
            return 0.0
        try:
            req = Requirements(self.space, rate)
            cost = relaxed_optimum(req).cost
        except TimeLimitReached:
            self._timed_out()
            return 0.0
        self.tables[rate] = req
        return cost


def solve_plan(
    problem: Problem,
    *,
    objective: Objective | None = None,
    solver: str | None = None,
    time_limit_s: float | None = None,
    explain: bool = True,
    clock: Callable[[], float] = wall_clock,
    progress: Progress | None = None,
    top: int = 0,
    marginals: bool = True,
) -> PlanResult:
    """Plan ``problem`` for ``objective`` (default: the scenario's). ``clock`` is the time
    source the time limit is measured on (tests give a fake one); ``progress``
    (``pddplan.progress``) hears the rates priced each time the search prices one (the
    total unknown until it ends). ``top``: how many runner-ups to plan beside it
    (``pddplan.plan.alternatives``: the cheapest deployment of each other family at the
    demand). ``marginals``: whether to price the plan one step more or less of each pool
    and the link (``PlanResult.marginals``; a capacity search each), for callers that
    show them."""
    scenario = problem.scenario
    objective = objective or scenario.objective
    solver = solver or scenario.solver.name
    limit = time_limit_s if time_limit_s is not None else scenario.solver.time_limit_s
    start = clock()
    demand = (scenario.workload.arrival_rps or 0.0) * (1 + scenario.headroom)  # planned
    if objective == MAX_CAPACITY and scenario.budget_usd_per_hour is None:
        raise InputError(
            problem.located(
                ("budget_usd_per_hour",),
                "objective 'max-capacity' needs a budget in USD per hour; the scenario sets "
                "none (add budget_usd_per_hour)",
            )
        )
    try:
        with deadline(start + limit, clock):
            space = Space(problem)
    except TimeLimitReached:
        stop = f"the time limit ({limit:g} s)"
        stats = SolveStats(objective, solver, PlanStatus.TIME_LIMIT, clock() - start)
        return PlanResult(
            scenario.name, scenario.model, PlanStatus.TIME_LIMIT, replace(stats, stop_reason=stop)
        )
    except NoOptionsError as e:
        with deadline(start + limit, clock):
            relaxations = (
                explain_infeasible(problem, solver, start + limit, clock) if explain else []
            )
        stats = SolveStats(objective, solver, PlanStatus.INFEASIBLE, clock() - start)
        note = Relaxation("options", 1.0, None, str(e))
        return PlanResult(
            scenario.name,
            scenario.model,
            PlanStatus.INFEASIBLE,
            stats,
            relaxations=[note, *relaxations],
        )
    search = _Search(
        space,
        solver,
        start,
        limit,
        scenario.budget_usd_per_hour,
        clock,
        progress,
        objective,
    )
    iterations, bound, best_bcr = 0, None, None
    with counted() as work, deadline(start + limit, clock):
        try:
            if objective == MIN_COST:
                choice, _, _ = search.at(demand)
            elif objective == MAX_CAPACITY:
                choice, iterations = _max_capacity(search)
            else:
                choice, iterations, bound, best_bcr = _max_bcr(search, demand)
        except TimeLimitReached:  # between the search's own steps (e.g. the cost floor)
            search.halt(PlanStatus.TIME_LIMIT, f"the time limit ({limit:g} s)")
            choice = _best_found(search, objective)
    status = _status(search, choice)
    seconds = clock() - start
    stats = SolveStats(
        objective,
        solver,
        status,
        seconds,
        search.solves,
        len(search.settled),
        *search.size,
        gap=_gap(search, objective, choice, bound),
        iterations=iterations,
        bcr_bound=bound,
        bcr_best=best_bcr,
        check_rounds=search.rounds,
        rejected=tuple(search.rejected),
        stop_reason=search.stop_reason or search.unproven_reason,
        rate_points=search.priced,
        rate_point_budget=search.rate_points,
        milp_nodes=work["milp_nodes"],
        node_limit=search.node_limit,
    )
    stats = replace(stats, gap_note=_gap_note(stats) if choice is not None else None)
    relaxations = []
    if choice is None and explain and status == PlanStatus.INFEASIBLE:
        with deadline(start + limit, clock):
            budget = scenario.budget_usd_per_hour
            rate = MIN_RATE_RPS if objective == MAX_CAPACITY else demand
            needed = (
                None if budget is None else budget_needed(space, solver, start + limit, clock, rate)
            )
            if needed is not None and (needed.factor is not None or objective == MAX_CAPACITY):
                relaxations = [needed]  # the budget binds (or nothing serves any traffic)
            else:
                relaxations = explain_infeasible(problem, solver, start + limit, clock)
    result = finish_plan(space, stats, choice, relaxations=relaxations, marginals=marginals)
    steps = _bcr_steps(search, choice) if objective == MAX_BCR else []
    others = None
    if choice is not None and top > 0 and demand > 0:
        if progress is not None:
            progress(search.priced, None, "the runner-ups")
        others = _runner_ups(space, choice, demand, top, solver, start, limit, clock)
    if progress is not None:
        progress(search.priced, search.priced, "done")
    return replace(
        result, stats=replace(stats, seconds=clock() - start), bcr_steps=steps, runner_ups=others
    )


def _runner_ups(
    space: Space,
    choice: Choice,
    rate: float,
    top: int,
    solver: str,
    start: float,
    limit: float,
    clock: Callable[[], float],
) -> RunnerUps:
    """``alternatives.runner_ups`` at ``rate``, each family planned as the plan was: a
    minimum-cost search (check and cut, the tie rule) on its restricted space, within what
    is left of the time limit."""

    def plan_family(sub: Space, at: float) -> tuple[Choice | None, float, float, str | None]:
        search = _Search(sub, solver, start, limit, None, clock, None, MIN_COST)
        found, cost, capacity = search.at(at)
        return found, cost, capacity, search.stop_reason if search.stopped else None

    with deadline(start + limit, clock):
        return runner_ups(
            space, choice, rate, top, plan_family, clock=clock, deadline=start + limit
        )


def finish_plan(
    space: Space,
    stats: SolveStats,
    choice: Choice | None,
    *,
    method: str = "milp",
    relaxations: list[Relaxation] | None = None,
    marginals: bool = True,
) -> PlanResult:
    """The plan's deployment, its evaluation at the demand and (with ``marginals``) its
    marginal values."""
    s = space.scenario
    if choice is None:
        return PlanResult(
            s.name,
            s.model,
            stats.status,
            stats,
            relaxations=relaxations or [],
            method=method,
            left_out=space.left_out_lines(),
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
        price_steps(space, fleet, evaluation, measure) if marginals else [],
        idle=idle_pools(space, fleet, evaluation),
        left_out=space.left_out_lines(),
        method=method,
        kv_bytes_per_token=space.problem.kv.bytes_per_token,
        kv_fixed_bytes=space.problem.kv.fixed_bytes,
        planned_rps=evaluation.planned_rps,
    )
    return replace(plan, verdict=verdict(space, plan))


def widest(space: Space, scored: list[tuple[Choice, float]], rate: float) -> tuple[Choice, float]:
    """The tie rule's order over deployments of equal cost that serve ``rate``, each with its
    SLA capacity: the largest capacity; of equal capacities (none ``wider``: equal to the
    capacity search's resolution), the shortest TTFT P99 at the demand (``rate`` without
    one); then the first. The MILP's search and
    ``--method enumerate`` both pick by it."""
    top = max(b for _, b in scored)
    best = [(c, b) for c, b in scored if not wider(top, b)]
    if len(best) == 1:
        return best[0]
    problem = space.problem
    demand = problem.scenario.workload.arrival_rps or rate
    tails = [ttft_p99(problem, space.fleet(c, "plan"), demand) for c, _ in best]
    return best[int(np.argmin(tails))]


def _best_found(search: _Search, objective: Objective) -> Choice | None:
    """The best plan a search stopped between its steps had found: the most SLA capacity
    (max capacity) or BCR (max BCR) of the rates it solved; none for min cost."""
    found = [(c, cost, cap) for c, cost, cap in search.points.values() if c is not None]
    if objective == MIN_COST or not found:
        return None
    key = (lambda p: p[2]) if objective == MAX_CAPACITY else (lambda p: p[2] / p[1])
    return max(found, key=key)[0]


def _status(search: _Search, choice: Choice | None) -> PlanStatus:
    if search.stop is not None:
        return search.stop
    if choice is None:
        return PlanStatus.INFEASIBLE
    return PlanStatus.WORK_LIMIT if search.unproven else PlanStatus.OPTIMAL


def _gap(search: _Search, objective: Objective, choice: Choice | None, bound: float | None):
    if choice is None:
        return None
    if objective == MAX_BCR and bound is not None:
        if not math.isfinite(bound):
            return None  # stopped before any bound was proven: the gap is unknown
        _, cost, cap = next(p for p in search.points.values() if p[0] is choice)
        best = cap / cost
        return max(0.0, (bound - best) / bound) if bound > 0 else 0.0
    return search.last_gap


def _gap_note(stats: SolveStats) -> str | None:
    """Why a stopped search's plan carries no gap or no finite bound (None: it carries both,
    or the search finished)."""
    if not stats.status.stopped:
        return None
    what = stats.stop_reason or "its work budget"
    more = (
        "a longer --time-limit"
        if stats.status == PlanStatus.TIME_LIMIT
        else "a larger --rate-points or --node-limit"
    )
    bound = stats.bcr_bound
    if stats.objective == MAX_BCR and (bound is None or not math.isfinite(bound)):
        return (
            f"{what} stopped the search before any rate above the plans evaluated was "
            f"proven unservable, so nothing bounds BCR yet and the gap is unknown; {more} "
            "proves a bound"
        )
    if stats.gap is None:
        return (
            f"the last MILP stopped at {what} without reporting a bound (the solver gave "
            f"none), so its gap is unknown; {more} proves one"
        )
    return None


ROUTING_TRIALS = 6
"""The most-relaying router settings per singular and catch-up cut (``routings``) that
``router_settings`` scores before every other relay cut."""


def router_settings(req: Requirements, choice: Choice) -> list[Choice]:
    """The router settings the search scores for ``choice``'s hardware: ``routings`` (the
    most relaying its counts carry, per singular and catch-up cut; up to
    ``ROUTING_TRIALS``), then every other relay cut with its singular and catch-up cuts,
    as the evaluator's own search for a fleet without a router does (``_best_routing``):
    the counts may carry a cut the evaluator rejects (a P99 gap of handoff stalls they
    price lower) where a cut relaying less serves. Each distinct router once."""
    sp = req.space
    seen = {sp.fleet(choice, "plan").routing}
    out = []
    others = [replace(choice, cut=cut) for cut in sp.cuts if cut != choice.cut]
    for c in [*routings(req, choice)[:ROUTING_TRIALS], *others]:
        routing = sp.fleet(c, "plan").routing
        if routing not in seen:
            seen.add(routing)
            out.append(c)
    return out


def routings(req: Requirements, choice: Choice) -> list[Choice]:
    """``choice`` with each other router setting its hardware carries at ``req.rate``: per
    (singular cut, catch-up cut), the relay cut relaying most within every role's count
    (in some RLD pace band, when it has relay decode; none relayed, when it has not)."""
    sp, st, o = req.space, choice.state, choice.options
    n = choice.instances
    prefill, relay, main = o["prefill"], o["relay_decode"], o["main_decode"]
    assert prefill is not None and main is not None
    nsing, ncatch = len(sp.singular_cuts), len(sp.catch_up_cuts)
    relays = np.asarray(sp.relay_matrix[st.cache].any(axis=1))
    first_s = sp.first_step_s(main, st)
    prefill_ok = np.stack(
        [req.prefill(prefill, st, x, first_s=first_s) <= n["prefill"] for x in sp.singular_cuts]
    )
    bands = [NO_RLD] if relay is None else list(sp.bands)
    found: dict[tuple[int, int], tuple[int, Band]] = {}
    for band in bands:
        if relay is None:
            relay_ok = np.tile(~relays, (nsing, 1))
        else:
            relay_ok = (req.relay_all(relay, st, band) <= n["relay_decode"]) & relays
        main_ok = req.main_all(main, st, band) <= n["main_decode"]
        ok = np.repeat(prefill_ok & relay_ok, ncatch, axis=0) & main_ok
        for row in range(nsing * ncatch):
            js = np.flatnonzero(ok[row])
            key = divmod(row, ncatch)
            if len(js) and (key not in found or js[-1] > found[key][0]):
                found[key] = (int(js[-1]), band)
    out = []
    seen: set[tuple[float | None, int, int | None]] = {
        (choice.cut, choice.singular, choice.catch_up)
    }
    for (s, h), (j, band) in sorted(found.items()):
        c = replace(
            choice,
            cut=sp.cuts[j],
            singular=sp.singular_cuts[s],
            catch_up=sp.catch_up_cuts[h],
            band=band,
        )
        if not relays[j]:  # nothing relayed: the other cuts do not matter
            c = replace(c, singular=sp.singular_cuts[0], catch_up=sp.catch_up_cuts[0])
        setting = (c.cut, c.singular, c.catch_up)
        if setting not in seen:
            seen.add(setting)
            out.append(c)
    return out


# --- max capacity -----------------------------------------------------------------------------
def _max_capacity(search: _Search) -> tuple[Choice | None, int]:
    """The largest rate the budget buys (see module docstring): after each rate that finds
    a plan, first the rate just past that plan's capacity, which proves it the answer in one
    step where it is; else doubling, then bisection."""
    best: tuple[Choice | None, float] = (None, 0.0)
    lo, hi, steps = 0.0, math.inf, 0
    rate = max(search.space.scenario.workload.arrival_rps or 1.0, 1e-3)
    climbed = False  # the last rate was the one just past the best capacity
    while not math.isfinite(hi) or (hi - lo > RATE_TOLERANCE * hi and hi > MIN_RATE_RPS):
        choice, _, capacity = search.at(rate)
        steps += 1
        if search.stopped:
            break
        if choice is None:
            hi = rate
        else:
            best = (choice, capacity) if capacity > best[1] else best
            lo = max(lo, capacity)
        if choice is not None and not climbed:
            rate, climbed = lo * (1 + RATE_TOLERANCE / 2), True
        elif math.isfinite(hi):
            rate, climbed = (lo + hi) / 2, False
        else:
            rate, climbed = 2 * lo, False
        if rate > MAX_RATE_RPS and not math.isfinite(hi):
            search.halt(
                PlanStatus.WORK_LIMIT, f"no rate up to {MAX_RATE_RPS:g} req/s is out of reach"
            )
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
    probes: dict[float, float] = {}  # rate -> relaxed_optimum's cost there (a lower bound above it)
    top = cap  # the first rate not even the relaxation serves, by doubling
    while not search.stopped:
        top *= 2
        probes[top] = search.relaxed(top)
        if math.isinf(probes[top]):
            break
        if top > MAX_RATE_RPS:
            search.halt(
                PlanStatus.WORK_LIMIT, f"no rate up to {MAX_RATE_RPS:g} req/s is out of reach"
            )
    # past the time limit nothing above the last proven rate is bounded
    infeasible_above = math.inf if search.stopped else top
    grid = np.geomspace(demand, top, FLOOR_CELLS + 1)
    floor = cost_floor(search.space, grid)
    if top / 2 > cap and not search.stopped:  # the largest rate the relaxation serves:
        choice, c, b = search.at(top / 2)  # usually the best ratio's neighbourhood
        if choice is not None:
            evaluated.append((top / 2, c, b, choice))
        elif not search.stopped:  # a datacenter limit the relaxation drops binds there
            infeasible_above = top / 2
    q = max(b / c for _, c, b, _ in evaluated)
    iterations = 1
    bound = math.inf
    while not search.stopped:
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
                if not search.stopped:
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
    if search.stopped or not math.isfinite(bound):
        return best[3], iterations, bound, q
    threshold = (1 - search.space.scenario.search.bcr_plateau) * bound
    bounds = _Bounds(evaluated, probes, infeasible_above, grid, floor)
    _cheapest_reaching(search, threshold, demand, bounds, tolerance)  # adds to evaluated
    # The scan's answer is the cheapest only where each rate's MILP plan is the cheapest
    # plan that serves it. The evaluator's capacity can exceed what the MILP planned for (a
    # plan solved at 163 req/s served 175.6 on pdd-h100-h200 while the MILP at 175.5 bought
    # one more instance), so the cheapest plan in the plateau may be one solved earlier,
    # and a plan's BCR may pass the bound the count tables proved: then the best BCR found
    # is the bound reported (docs/milp.md, "Limits"), while the plateau stays the one the
    # scan proved its cheapest plan in.
    q = max(q, *(b / c for _, c, b, _ in evaluated))
    bound = max(bound, q)
    within = [e for e in evaluated if e[2] / e[1] >= threshold]
    if within:
        return min(within, key=lambda e: (e[1], -e[2]))[3], iterations, bound, q
    return best[3], iterations, bound, q


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
    while not search.stopped:
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


def _bcr_steps(search: _Search, plan: Choice | None) -> list[BcrStep]:
    """Every distinct deployment the search solved, cheapest first, each with its own
    evaluated capacity; ``plan`` marked."""
    seen: dict[str, BcrStep] = {}
    for choice, cost, capacity in search.points.values():
        if choice is not None and cost > 0:
            label = describe(choice)
            step = BcrStep(cost, capacity, capacity / cost, label, choice is plan)
            if label not in seen or step.plan:
                seen[label] = step
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
