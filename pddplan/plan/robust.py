"""Robust plans: one set of hardware that serves every workload variant of a scenario.

A scenario's ``workload_variants`` (a month of traffic each, say) share the hardware a plan
buys (options, instance counts, link tier, decode-side cache) and each keep their own
routing (relay, singular and catch-up cuts, relay decode's pace band): router thresholds
are software and follow the traffic. One MILP (``pddplan.plan.milp.Formulation`` with
``variants``) holds every variant's requirement rows on the shared counts:

- a variant with ``must_meet: true`` keeps the TTFT tail budgets on its own (its counts at
  tail scale 1);
- weighted variants share the budgets on their mixture: each is planned for a share
  ``scale_v`` of them, one of ``TAIL_SCALES``, with ``sum_v weight_v x scale_v <= 1``, so
  ``sum_v weight_v x tail mass_v <= budget`` (what a monthly SLA measures). The scales
  are a grid: the plan is optimal over it, not over every split of the budget.

Every variant's plan is then scored by the evaluator under its own workload, the
weighted variants' tail masses mixed, and set against the plans each variant would get
alone (``single``): their costs (the price of robustness against the dearest) and each of
them under every variant (which break where).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from pddplan.errors import InputError
from pddplan.evaluation.evaluator import TTFT_FAILURE, Evaluator
from pddplan.evaluation.results import Evaluation
from pddplan.model.problem import Problem
from pddplan.plan import milp
from pddplan.plan.bounds import relaxed_optimum
from pddplan.plan.counts import Requirements
from pddplan.plan.space import Choice, NoOptionsError, Space
from pddplan.progress import Progress
from pddplan.spec.choices import MIN_COST
from pddplan.spec.fleet import Fleet
from pddplan.spec.scenario import TAIL_BUDGETS, WorkloadVariant
from pddplan.spec.status import MilpStatus, PlanStatus
from pddplan.work import TimeLimitReached, deadline, wall_clock

TAIL_SCALES = (0.5, 1.0, 1.5, 2.0)
"""The shares of the TTFT tail budgets a weighted variant may be planned for."""
CAPACITY_TOLERANCE = 1e-5
"""A variant's evaluated SLA capacity may fall this far (relative) below its rate."""


@dataclass(frozen=True)
class VariantResult:
    """One variant at the shared fleet."""

    name: str
    weight: float | None
    must_meet: bool
    rate_rps: float
    """The rate planned for: its demand x (1 + headroom)."""
    tail_scale: float
    """The share of the tail budgets it was planned for (1 for a must-meet variant)."""
    fleet: Fleet
    """The shared hardware with this variant's routing."""
    evaluation: Evaluation
    """The evaluator's report at ``rate_rps``."""
    tail_masses: tuple[float, float]
    """Its share of requests above the TTFT P90 and P99 bounds at ``rate_rps``."""
    meets: bool
    """Must-meet: its SLA capacity reaches ``rate_rps``. Weighted: every limit but the
    tail budgets holds there (those hold on the mixture)."""


@dataclass(frozen=True)
class CrossCheck:
    """One single-variant plan's hardware under one variant."""

    variant: str
    serves: bool
    """Some routing of that hardware serves the variant's rate within its limits (a must-meet
    variant at its own budgets, a weighted one at its own budgets too: alone, the mixture
    is not defined)."""
    capacity_rps: float | None = None
    """The SLA capacity with that routing (None where no routing serves the rate)."""
    breaks: str = ""
    """Where none serves: the limits the plan's own routing fails at the variant's rate."""


@dataclass(frozen=True)
class SinglePlan:
    """The plan a variant would get alone, and what its hardware does under every variant."""

    name: str
    status: str
    cost_per_hour_usd: float | None
    fleet: Fleet | None
    under: list[CrossCheck] = field(default_factory=list)


@dataclass(frozen=True)
class RobustResult:
    scenario: str
    status: PlanStatus
    """``optimal``, ``time_limit`` (with the best plan found, or none) or ``infeasible``."""
    seconds: float
    """To the robust plan: the variants' counts and the MILP (the single plans after)."""
    variables: int
    constraints: int
    cost_per_hour_usd: float | None = None
    bound: float | None = None
    gap: float | None = None
    variants: list[VariantResult] = field(default_factory=list)
    mixture: tuple[float, float] | None = None
    """The weighted variants' tail masses mixed by their weights (P90, P99 bounds)."""
    singles: list[SinglePlan] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    solver: str = "cbc"
    model: str = ""

    @property
    def price_of_robustness_usd_per_hour(self) -> float | None:
        """The robust plan's cost less the dearest single-variant plan's: at least 0 when
        that plan is a must-meet variant's; a weighted variant planned alone at its own
        budgets may cost more than the robust plan, which may give it a larger share."""
        costs = [p.cost_per_hour_usd for p in self.singles if p.cost_per_hour_usd is not None]
        if self.cost_per_hour_usd is None or len(costs) != len(self.singles) or not costs:
            return None
        # to a nano-dollar an hour: the costs are sums in different orders (the robust
        # MILP's, a single plan's), and equal plans must not read as "-0"
        return round(self.cost_per_hour_usd - max(costs), 9) + 0.0

    @property
    def confirmed(self) -> bool:
        """Every variant meets its part and the mixture is within the budgets."""
        if not self.variants:
            return False
        within = self.mixture is None or all(
            m <= b + 1e-9 for m, (_, b) in zip(self.mixture, TAIL_BUDGETS, strict=True)
        )
        return within and all(v.meets for v in self.variants)


def _rate(problem: Problem) -> float:
    s = problem.scenario
    return (s.workload.arrival_rps or 0.0) * (1 + s.headroom)


def _status(milp_status: MilpStatus) -> PlanStatus:
    """The MILP's outcome as a plan's status: its node limit with or without a plan is
    ``work_limit``, the time limit ``time_limit`` (the plan, or its absence, says which)."""
    if milp_status.on_nodes:
        return PlanStatus.WORK_LIMIT
    if milp_status.on_time:
        return PlanStatus.TIME_LIMIT
    return PlanStatus(milp_status)


class _Run(NamedTuple):
    """How each of a robust plan's MILPs runs: the backend, its node limit (counted work)
    and the wall-clock safety stop."""

    solver: str
    node_limit: int
    deadline: float
    clock: Callable[[], float]

    def own(self, variant: milp.Variant) -> milp.MilpOutcome:
        """One variant's own minimum-cost plan at its table at scale 1: the relaxation's
        where it is exact (``relaxed_optimum``: no datacenter limit binds, so its plan is
        the MILP's optimum, as ``solve`` takes it), else the MILP's."""
        relaxed = relaxed_optimum(variant.tables[1.0])
        if not relaxed.exact:
            return self.min_cost(variants=[variant])
        choice, cost = relaxed.choices[0], relaxed.cost
        return milp.MilpOutcome(
            MilpStatus.OPTIMAL, choice, cost, cost, 0.0, 0.0, 0, 0, 0, (choice,), (1.0,)
        )

    def min_cost(self, **kwargs: Any) -> milp.MilpOutcome:
        """``milp.min_cost`` within these limits; past the deadline, ``TimeLimitReached``
        before anything of it is built (a formulation costs as much as a short solve)."""
        left = self.deadline - self.clock()
        if left <= 0:
            raise TimeLimitReached
        return milp.min_cost(
            solver=self.solver,
            node_limit=self.node_limit,
            time_limit_s=left,
            clock=self.clock,
            **kwargs,
        )


def solve_robust(
    problem: Problem,
    *,
    solver: str | None = None,
    time_limit_s: float | None = None,
    singles: bool = True,
    clock: Callable[[], float] = wall_clock,
    progress: Progress | None = None,
) -> RobustResult:
    """The cheapest hardware that serves every one of ``problem``'s workload variants
    (module docstring), each variant's plan alone beside it unless ``singles`` is False.
    ``progress`` (``pddplan.progress``) hears each step before it starts: each variant's
    own plan, the shared plan, the shared plan under each variant and each single plan
    under each variant."""
    scenario = problem.scenario
    if not scenario.workload_variants:
        raise InputError(f"scenario {scenario.name}: no workload_variants to plan for")
    solver = solver or scenario.solver.name
    limit = time_limit_s if time_limit_s is not None else scenario.solver.time_limit_s
    start = clock()
    pairs = problem.variants()
    n = len(pairs)
    step = _Steps(progress, n + 1 + n + (n * n if singles else 0))
    try:
        with deadline(start + limit, clock):
            m = robust_milp(problem, pairs, solver, start + limit, clock, step)
    except TimeLimitReached:  # before the robust MILP had a plan
        return RobustResult(
            scenario.name, PlanStatus.TIME_LIMIT, clock() - start, 0, 0,
            notes=[f"stopped at the time limit ({limit:g} s) before any plan was found"],
            solver=solver, model=scenario.model,
        )  # fmt: skip
    out, plans, alone, spaces = m.outcome, m.alone_plans, m.alone, m.spaces
    seconds = clock() - start
    if out.status == MilpStatus.INFEASIBLE:
        _raise_if_one_is_infeasible(problem, pairs, m.alone_plans, solver, start + limit, clock)
    if not out.choices:
        notes = (
            ["every variant is feasible alone; no one set of hardware serves them all (the "
             "datacenters' limits, or no link tier within its cap for every variant)"]
            if out.status == MilpStatus.INFEASIBLE
            else []
        )  # fmt: skip
        return RobustResult(
            scenario.name, _status(out.status), seconds, out.variables, out.constraints,
            notes=notes, solver=solver, model=scenario.model,
        )  # fmt: skip
    results = []
    for (v, vp), space, choice, scale in zip(pairs, spaces, out.choices, out.scales, strict=True):
        step(f"the shared plan under variant {v.name}")
        results.append(_at_shared(v, vp, space.fleet(choice, f"{scenario.name}-robust"), scale))
    weighted = [r for r in results if r.weight is not None]
    mixture = (
        (
            sum((r.weight or 0.0) * r.tail_masses[0] for r in weighted),
            sum((r.weight or 0.0) * r.tail_masses[1] for r in weighted),
        )
        if weighted
        else None
    )
    # each variant's own plan under every variant, in what is left of the time limit: the
    # whole solve, its single plans included, ends within it (the shared fleet's variants
    # are evaluated past it, at most MAX_VARIANTS of them)
    run = _Run(solver, scenario.solver.node_limit, start + limit, clock)
    checks: list[SinglePlan] = []
    unfinished: list[str] = []
    if singles:
        try:
            with deadline(start + limit, clock):
                checks = _singles(pairs, alone, plans, spaces, run, step)
        except TimeLimitReached:
            unfinished.append(
                f"each variant's own plan and its cross-checks were not finished within the "
                f"time limit ({limit:g} s): give a longer --time-limit to see them"
            )
    step.finish()
    return RobustResult(
        scenario.name,
        _status(out.status),
        seconds,
        out.variables,
        out.constraints,
        out.cost_per_hour,
        out.bound,
        out.gap,
        results,
        mixture,
        checks,
        notes=unfinished,
        solver=solver,
        model=scenario.model,
    )


def _at_shared(v: WorkloadVariant, vp: Problem, fleet: Fleet, scale: float) -> VariantResult:
    rate = _rate(vp)
    ev = Evaluator(vp, fleet)
    state = ev.state(rate)
    if v.weight is None:
        meets = ev.capacity >= rate * (1 - CAPACITY_TOLERANCE)
    else:  # the tail budgets hold on the mixture, every other limit here
        meets = not [f for f in state.failures if not f.startswith(TTFT_FAILURE)]
    return VariantResult(
        v.name,
        v.weight,
        v.must_meet,
        rate,
        scale,
        fleet,
        # the report's demand is the planned rate already: not that rate x (1 + headroom)
        replace(ev.report(rate), planned_rps=rate, ttft_planned_s=None),
        (state.tail90, state.tail99),
        meets,
    )


class _Steps:
    """A robust solve's steps, told to ``progress`` (``pddplan.progress``) as each starts."""

    def __init__(self, progress: Progress | None, total: int) -> None:
        self.progress, self.total, self.done = progress, total, 0

    def __call__(self, label: str) -> None:
        if self.progress is not None:
            self.progress(min(self.done, self.total), self.total, label)
        self.done += 1

    def finish(self) -> None:
        if self.progress is not None:
            self.progress(self.total, self.total, "done")


@dataclass(frozen=True)
class RobustMilp:
    """``robust_milp``'s parts: the robust MILP's outcome, and each variant's own."""

    outcome: milp.MilpOutcome
    variants: list[milp.Variant]
    alone: list[milp.Variant]
    """Each variant at its own budgets, alone."""
    alone_plans: list[milp.MilpOutcome]
    spaces: list[Space]


def robust_milp(
    problem: Problem,
    pairs: list[tuple[WorkloadVariant, Problem]],
    solver: str,
    deadline: float,
    clock: Callable[[], float] = wall_clock,
    step: Callable[[str], None] = lambda label: None,
) -> RobustMilp:
    """The variants' count tables, each variant's own plan, and the robust MILP, bounded
    below by them and started from the cheapest own plan that serves every variant: a
    robust plan serves each must-meet variant at its own budgets and each weighted one at
    no more than the loosest share the mixture allows it (``_loosest``), so it costs at
    least each variant's plan at that share (with the optimum often equal to the dearest,
    the solver then stops at once). The weighted variants' plans at that share are solved
    only where the must-meet variants' plans leave a gap to the start."""
    spaces, variants = [], []
    for i, (v, vp) in enumerate(pairs):
        try:
            space = Space(vp)
        except NoOptionsError as e:
            raise InputError(
                problem.located(("workload_variants", i), f"variant {v.name}: {e}")
            ) from None
        rate = _rate(vp)
        scales = TAIL_SCALES if v.weight is not None else (1.0,)
        tables = {x: Requirements(space, rate, x) for x in scales}
        spaces.append(space)
        variants.append(milp.Variant(v.name, tables, v.weight))
    alone = [milp.Variant(x.name, {1.0: x.tables[1.0]}) for x in variants]
    run = _Run(solver, problem.scenario.solver.node_limit, deadline, clock)
    plans = []
    for own in alone:
        step(f"variant {own.name}'s own plan")
        plans.append(run.own(own))
    # the must-meet variants' own plans bound the robust cost below; a weighted variant's
    # own plan does not (the robust plan may serve it at a looser share), its plan at the
    # loosest share the mixture allows it does: those are planned only where the must-meet
    # bound leaves a gap to the start (or there is no must-meet variant)
    must = [p for p, x in zip(plans, variants, strict=True) if x.weight is None]

    def loose() -> list[milp.MilpOutcome]:
        return [
            plans[i] if scale == 1.0 else run.own(milp.Variant(x.name, {1.0: x.tables[scale]}))
            for i, (x, scale) in enumerate(zip(variants, _loosest(variants), strict=True))
            if x.weight is not None
        ]

    lower = _lower(must or loose())
    step("the shared plan")
    initial, cost = _incumbent(plans, alone, lower, run)
    gap = lower is None or cost is None or cost > lower * (1 + 1e-9)
    if must and len(must) < len(variants) and gap:
        # the start stays: a plan that serves every variant costs no less than a bound
        lower = _lower(must + loose())
    if initial is not None and cost is not None and not gap:
        # the start serves every variant at its own budgets and costs the lower bound: it
        # is the optimum, with no MILP to prove it (CBC took 4-7 s to read the monthly
        # scenario's 11,634 rows and stop at once)
        out = milp.MilpOutcome(
            MilpStatus.OPTIMAL, initial[0], cost, lower, 0.0, 0.0, 0, 0, 0,
            tuple(initial), (1.0,) * len(initial),
        )  # fmt: skip
    else:
        out = run.min_cost(variants=variants, lower_bound=lower, initial=initial)
    return RobustMilp(out, variants, alone, plans, spaces)


def _incumbent(
    plans: list[milp.MilpOutcome],
    alone: list[milp.Variant],
    lower: float | None,
    run: _Run,
) -> tuple[list[Choice] | None, float | None]:
    """A robust solution to start the solver from, and its cost per hour: the cheapest
    variant's own plan whose hardware, routed by the MILP for each variant at its own
    budgets, serves them all (a plan below the lower bound cannot; one at it is the
    optimum, proven at once); (None, None) where none does."""
    floor = (lower or 0.0) * (1 - 1e-9)
    mine = sorted(
        (p for p in plans if p.choice is not None and (p.cost_per_hour or 0.0) >= floor),
        key=lambda p: p.cost_per_hour or 0.0,
    )
    for plan in mine:
        routed = []
        for v in alone:
            got = run.min_cost(variants=[v], hardware=plan.choice)
            if got.choice is None:
                break
            routed.append(got.choice)
        else:
            return routed, plan.cost_per_hour
    return None, None


def _lower(bounds: list[milp.MilpOutcome]) -> float | None:
    """The robust cost's lower bound from plans each at most as constrained as the robust
    plan: the dearest of those proven optimal (an infeasible one adds nothing; the robust
    MILP finds that out itself), or None where none is."""
    proven = [b.cost_per_hour for b in bounds if b.status == MilpStatus.OPTIMAL and b.cost_per_hour]
    return max(proven) if proven else None


def _loosest(variants: list[milp.Variant]) -> list[float]:
    """Per variant, the loosest of its tail scales the mixture row allows it with the other
    weighted variants at their tightest (``sum w x scale <= sum w``; 1 for a must-meet
    variant): the robust plan serves it at no looser a share, so costs at least its plan
    there."""
    weighted = [x for x in variants if x.weight is not None]
    total = sum(x.weight or 0.0 for x in weighted) * (1 + 1e-9)
    out = []
    for x in variants:
        if x.weight is None:
            out.append(1.0)
            continue
        others = sum((y.weight or 0.0) * min(y.tables) for y in weighted if y is not x)
        cap = (total - others) / x.weight
        out.append(max((k for k in x.tables if k <= cap * (1 + 1e-12)), default=min(x.tables)))
    return out


def _singles(
    pairs: list[tuple[WorkloadVariant, Problem]],
    alone: list[milp.Variant],
    plans: list[milp.MilpOutcome],
    spaces: list[Space],
    run: _Run,
    step: Callable[[str], None] = lambda label: None,
) -> list[SinglePlan]:
    """Each variant's own plan (the MILP at its own budgets, from its own counts) and its
    hardware under every variant: the MILP with the hardware fixed picks the routing, if
    any, that serves that variant's rate."""
    out = []
    for (v, _vp), plan, space in zip(pairs, plans, spaces, strict=True):
        if plan.choice is None:
            out.append(SinglePlan(v.name, plan.status, None, None))
            continue
        fleet = space.fleet(plan.choice, f"{v.name}-alone")
        under = []
        for (u, up), other in zip(pairs, alone, strict=True):
            step(f"variant {v.name}'s own plan under variant {u.name}")
            under.append(_under(plan.choice, fleet, u, up, other, run))
        out.append(SinglePlan(v.name, plan.status, plan.cost_per_hour, fleet, under))
    return out


def _under(
    choice: Choice,
    fleet: Fleet,
    u: WorkloadVariant,
    up: Problem,
    variant: milp.Variant,
    run: _Run,
) -> CrossCheck:
    routed = run.min_cost(variants=[variant], hardware=choice)
    rate = _rate(up)
    tried = [fleet, fleet.model_copy(update={"routing": None})]  # its own; the best relay cut
    if routed.choice is not None:  # the planner's routing for this hardware
        tried.insert(0, variant.tables[1.0].space.fleet(routed.choice, fleet.name))
    capacity = max(Evaluator(up, f).capacity for f in tried)
    if capacity >= rate * (1 - CAPACITY_TOLERANCE):
        return CrossCheck(u.name, True, capacity)
    failures = Evaluator(up, fleet).state(rate).failures
    return CrossCheck(u.name, False, None, "; ".join(failures))


def _raise_if_one_is_infeasible(
    problem: Problem,
    pairs: list[tuple[WorkloadVariant, Problem]],
    alone_plans: list[milp.MilpOutcome],
    solver: str,
    end: float,
    clock: Callable[[], float],
) -> None:
    """An ``InputError`` at the first variant no plan serves even alone, with the smallest
    relaxation that would let one, searched in what is left of the time limit (until
    ``end`` on ``clock``; none when nothing is left). The variants whose own plan
    ``robust_milp`` found are not planned again."""
    from pddplan.plan.search import solve_plan

    for i, ((v, vp), own) in enumerate(zip(pairs, alone_plans, strict=True)):
        if own.status != PlanStatus.INFEASIBLE:
            continue
        left = end - clock()
        relaxations = []
        if left > 0:
            plan = solve_plan(vp, objective=MIN_COST, solver=solver, time_limit_s=left, clock=clock)
            if plan.status != PlanStatus.INFEASIBLE:
                continue
            relaxations = plan.relaxations
        fixes = [r for r in relaxations if r.factor is not None]
        fix = min(fixes, key=lambda r: abs(r.factor - 1) if r.factor else 0.0, default=None)
        raise InputError(
            problem.located(
                ("workload_variants", i),
                f"variant {v.name}: no plan serves it even alone"
                + (f"; {fix.message}" if fix is not None else ""),
            )
        )
