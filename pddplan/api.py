"""The public API: every job the command line does, as a function of files and values.

Load a scenario into a ``Problem`` once, then ask it questions::

    import pddplan

    problem = pddplan.load_scenario("scenarios/pdd-h100-h200.yaml")
    plan = pddplan.solve(problem, objective="min-cost")
    print(plan.status, plan.evaluation.cost_per_hour_usd)

Every function raises ``PddplanError`` (``InputError`` for bad input) for the user's
mistakes, with messages that name this API's arguments; anything else is a bug. The heavy
parts (the MILP, the simulator) are imported when first used, so ``import pddplan`` is fast.

May import: ``sweeps``, ``simulation``, ``plan``, ``evaluation``, ``calibration``, ``io``,
``horizon``, ``model``, ``workload``, ``spec``, ``threads``, ``work``, ``progress``, ``errors``, ``units``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from pddplan import units
from pddplan.errors import ArgumentError, InputError
from pddplan.spec.choices import MAX_CAPACITY, MIN_COST, Engine, Method, Objective, SolverName
from pddplan.threads import one_blas_thread
from pddplan.work import wall_clock

if TYPE_CHECKING:
    from pddplan.calibration.fit import Calibration
    from pddplan.evaluation.results import Evaluation
    from pddplan.horizon.inputs import HorizonInputs
    from pddplan.io.catalogs import Catalogs
    from pddplan.model.figures import InstancePerf
    from pddplan.model.pricing import FleetCost
    from pddplan.model.problem import Problem
    from pddplan.plan.compare import Comparison
    from pddplan.plan.horizon import HorizonResult
    from pddplan.plan.results import ErrorMargin, PlanResult
    from pddplan.plan.robust import RobustResult
    from pddplan.progress import Progress
    from pddplan.simulation.day import DayReplay
    from pddplan.simulation.run import SimResult
    from pddplan.simulation.steady import RunLength
    from pddplan.simulation.verify import Verification
    from pddplan.spec.acquisition import AcquisitionCatalog
    from pddplan.spec.fleet import Fleet
    from pddplan.sweeps.engine import SweepRun
    from pddplan.sweeps.prices import Sweep
    from pddplan.workload.trace import HourlyProfile, TraceFit, WindowedFit

OBJECTIVES: tuple[str, ...] = get_args(Objective)
SOLVERS: tuple[str, ...] = get_args(SolverName)
METHODS: tuple[str, ...] = get_args(Method)
ENGINES: tuple[str, ...] = get_args(Engine)


# --- inputs ---------------------------------------------------------------------------------
def load_scenario(path: str | Path, *, max_input_mb: float | None = None) -> Problem:
    """The scenario at ``path`` with the catalogs it uses, every reference checked;
    ``max_input_mb``: the largest file read (default: ``PDDPLAN_MAX_INPUT_MB``, else 4 MB;
    ``input_limit`` sets it for a block of reads).

    Raises:
        InputError: one located line (``FILE:LINE: KEY: problem``) per problem found.
    """
    from pddplan.io.located import input_limit
    from pddplan.io.scenario import load_scenario as load

    with input_limit(max_input_mb):
        return load(Path(path))


def load_catalogs(
    hardware: str | Path | None = None,
    models: str | Path | None = None,
    *,
    problem: Problem | None = None,
) -> Catalogs:
    """The hardware, model and engine catalogs at these paths (default: the shipped ones),
    or the ones ``problem``'s scenario names."""
    from pddplan.io.catalogs import load_catalogs as load

    if problem is not None:
        if hardware is not None or models is not None:
            raise ArgumentError(
                "problem",
                "{argument} takes its catalogs from the scenario's catalogs: section; give "
                "either it or the catalog paths",
            )
        paths = problem.scenario.catalogs
        base = problem.source.path.parent if problem.source is not None else None
        return load(paths.hardware, paths.models, engines=paths.engines, base=base)
    return load(_path(hardware), _path(models))


def load_fleet(
    path: str | Path,
    problem: Problem,
    variant: str | None = None,
    *,
    max_input_mb: float | None = None,
) -> Fleet:
    """A fleet file, or the deployment in a plan file from ``solve``'s JSON, checked
    against ``problem``'s scenario; ``variant``: a robust plan's routing for that workload
    variant; ``max_input_mb`` as ``load_scenario``'s."""
    from pddplan.io.fleet import load_fleet as load
    from pddplan.io.located import input_limit

    with input_limit(max_input_mb):
        return load(Path(path), problem, variant)


def with_engine(
    problem: Problem,
    engine: str | Mapping[str, str] | None = None,
    perf_quantile: float | None = None,
) -> Problem:
    """``problem`` with its pass times from ``engine``'s profile (``catalogs/engines.yaml``;
    None: the scenario's) at ``perf_quantile`` of the model's held-out error (None: the
    scenario's; 0.5: the fit itself). ``engine`` is one profile's name for every role, or
    per role: ``"prefill=sglang,main_decode=ideal"`` or a mapping (``default`` for the
    roles neither names; a role named in neither keeps the scenario's engine).
    ``ArgumentError`` for an unknown engine or role, an engine without a profile for a chip
    its role may use, roles whose engines cannot hand each other the KV cache, or a
    quantile outside (0, 1)."""
    changes: dict[str, Any] = {}
    if engine is not None:
        from pddplan.io.catalogs import engine_option

        changes["engine"] = engine_option(
            engine, problem.scenario, problem.hardware, problem.engines
        )
    if perf_quantile is not None:
        if not 0 < perf_quantile < 1:
            raise ArgumentError(
                "perf_quantile", f"{{argument}} must lie in (0, 1), got {perf_quantile:g}"
            )
        changes["perf_quantile"] = perf_quantile
    return problem.derive(changes) if changes else problem


def variant_problem(problem: Problem, name: str) -> Problem:
    """The problem of ``problem``'s workload variant ``name`` (its workload on the
    scenario's hardware)."""
    pairs = problem.variants()
    for v, vp in pairs:
        if v.name == name:
            return vp
    known = ", ".join(v.name for v, _ in pairs) or "none"
    raise ArgumentError(
        "variant",
        f"{{argument}}: scenario {problem.scenario.name} has no variant '{name}' "
        f"(its workload_variants: {known})",
    )


@one_blas_thread
def solve_robust(
    problem: Problem,
    *,
    solver: SolverName | None = None,
    time_limit_s: float | None = None,
    node_limit: int | None = None,
    headroom: float | None = None,
    singles: bool = True,
    clock: Callable[[], float] = wall_clock,
    progress: Progress | None = None,
) -> RobustResult:
    """One set of hardware that serves every workload variant of ``problem``'s scenario
    at least cost, each variant with its own routing (``pddplan.plan.robust``), beside
    the plan each variant would get alone (unless ``singles`` is False). ``node_limit``:
    as ``solve``'s; ``progress`` (``pddplan.progress``) hears each step: a variant's own
    plan, the shared plan under a variant, a single plan under a variant."""
    _choice("solver", solver, SOLVERS)
    _no_horizon(problem)
    problem = _with_budgets(problem, node_limit=node_limit)
    if headroom is not None:
        if not headroom >= 0:
            raise ArgumentError("headroom", f"{{argument}} must be >= 0, got {headroom}")
        problem = problem.derive({"headroom": headroom})
    from pddplan.plan.robust import solve_robust as run

    return run(problem, solver=solver, time_limit_s=time_limit_s, singles=singles, clock=clock,
               progress=progress)  # fmt: skip


def _no_horizon(problem: Problem) -> None:
    """Refuse, in one located line, to plan one rate for a scenario with a horizon: solving
    it as a single-rate scenario would silently ignore its profile, growth and purchases."""
    if problem.scenario.horizon is not None:
        raise InputError(
            problem.located(
                ("horizon",),
                "a scenario with a horizon is planned over its periods: solve_horizon (the "
                "CLI's solve does it), not at one rate",
            )
        )


@one_blas_thread
def solve_horizon(
    problem: Problem,
    *,
    solver: SolverName | None = None,
    time_limit_s: float | None = None,
    node_limit: int | None = None,
    clock: Callable[[], float] = wall_clock,
) -> HorizonResult:
    """What to own, reserve and rent over ``problem``'s ``horizon:``, tranche by tranche and
    period by period, at least total cost, set against renting everything and owning for
    the peak (``pddplan.plan.horizon``, docs/milp.md#plans-over-time-the-horizon-milp).
    ``node_limit``: the branch-and-bound nodes each MILP may take (counted work);
    ``time_limit_s``: the wall-clock safety stop. ``ArgumentError`` for a scenario without a
    horizon."""
    _choice("solver", solver, SOLVERS)
    from pddplan.plan.horizon import solve_horizon as run

    inputs = horizon_inputs(problem)
    problem = _with_budgets(problem, node_limit=node_limit)
    return run(problem, inputs, solver=solver, time_limit_s=time_limit_s, clock=clock)


@one_blas_thread
def replay_day(
    problem: Problem,
    plan: HorizonResult | Mapping[str, Any] | None = None,
    *,
    tranche: int | None = None,
    hour_s: float = 3600.0,
    seed: int = 0,
) -> DayReplay:
    """One day of a plan over time, request by request (``pddplan.simulation.day``): the 24
    hours of ``tranche`` (1-based; default: the last, the busiest), each at its own rate in
    the tranche's last month (the month its periods are sized for) and run by its period's
    deployment, instances joining and leaving where the deployment changes, the link at
    the tranche's lease. ``plan``: ``solve_horizon``'s result, or the JSON ``solve --out``
    wrote for it (None: planned first, after the arguments are checked). ``hour_s``:
    simulated seconds an hour lasts (3,600; less compresses the day)."""
    from pddplan.horizon.periods import hour_rates, tranches
    from pddplan.plan.horizon import link_id
    from pddplan.simulation.day import HourPlan, check_hour
    from pddplan.simulation.day import replay_day as run

    h = problem.scenario.horizon
    if h is None:
        raise ArgumentError(
            "problem", f"{{argument}}: scenario {problem.scenario.name} has no horizon: section"
        )
    cuts = tranches(h)
    if tranche is not None and not (isinstance(tranche, int) and 1 <= tranche <= len(cuts)):
        raise ArgumentError(
            "tranche", f"{{argument}} must be a tranche from 1 to {len(cuts)}, got {tranche}"
        )
    k = (tranche or len(cuts)) - 1
    for o in h.overlays or ():
        laid = [x for x in range(24) if o.applies(cuts[k].last_month, x, h.months)]
        if laid:
            raise InputError(
                problem.located(
                    ("horizon", "overlays"),
                    f"overlay {o.name} applies in hours {laid[0]}-{laid[-1]} of tranche "
                    f"{k + 1}: a day's replay samples one workload, the base one; replay a "
                    "tranche without overlays",
                )
            )
    check_hour(hour_s)
    if plan is None:
        plan = solve_horizon(problem)
        if plan.total_usd is None:
            raise InputError(
                f"scenario {problem.scenario.name}: no plan over the horizon to replay "
                "(`pddplan solve` on it says why)"
            )
    periods, leases = _scheduled(plan)
    if not periods:
        raise InputError("the plan over time has no schedule (no plan was found)")
    by_hour: dict[int, tuple[str, Fleet | None]] = {}
    for name, t, hours, fleet in periods:
        if t == k:
            by_hour.update((x, (name, fleet)) for x in hours)
    if sorted(by_hour) != list(range(24)):
        raise InputError(
            f"the plan's periods of tranche {k + 1} do not cover the 24 hours of a day; "
            "was it planned on this scenario?"
        )
    rates = hour_rates(problem.scenario, cuts[k])
    day = [HourPlan(x, by_hour[x][0], by_hour[x][1], rates[x]) for x in range(24)]
    ids = {link_id(link.between): frozenset(link.between) for link in problem.scenario.links}
    gbps = {ids[link]: g for link, t, g in leases if t == k and link in ids}
    cut = cuts[k]
    return run(
        problem,
        day,
        links_gbps=gbps,
        hour_s=hour_s,
        seed=seed,
        tranche=f"tranche {k + 1} (months {cut.first_month}-{cut.last_month})",
    )


def _scheduled(
    plan: HorizonResult | Mapping[str, Any],
) -> tuple[list[tuple[str, int, tuple[int, ...], Fleet | None]], list[tuple[str, int, float]]]:
    """A plan over time's periods (name, 0-based tranche, hours of the day, deployment) and
    link leases (link, 0-based tranche, Gbit/s), from its result or its JSON."""
    from pddplan.spec.fleet import Fleet

    if not isinstance(plan, Mapping):
        periods = [
            (
                pp.period.name,
                pp.period.tranche.index,
                pp.period.hours,
                pp.deployment.fleet if pp.deployment is not None else None,
            )
            for pp in plan.periods
        ]
        return periods, [(x.link, x.tranche, x.gbps) for x in plan.leases]
    try:
        periods = [
            (
                str(p["name"]),
                int(p["tranche"]) - 1,
                tuple(int(x) for x in p["hours_of_day"]),
                Fleet.model_validate(p["deployment"]) if p["deployment"] is not None else None,
            )
            for p in plan["periods"]
        ]
        leases = [
            (str(x["link"]), int(x["tranche"]), float(x["gbps"])) for x in plan["link_leases"]
        ]
    except (KeyError, TypeError, ValueError) as e:
        raise InputError(
            f"the plan over time lacks a figure the replay needs ({type(e).__name__}: {e}); "
            "re-run `pddplan solve --out`"
        ) from None
    return periods, leases


def load_acquisition(path: str | Path | None = None) -> AcquisitionCatalog:
    """How each chip can be had over a horizon (owned, reserved terms, each figure with its
    source) from ``path`` (default: the shipped ``catalogs/acquisition.yaml``)."""
    from pddplan.io.catalogs import load_acquisition as load

    return load(_path(path))


def horizon_inputs(problem: Problem) -> HorizonInputs:
    """``problem``'s horizon cut into periods (tranche x hour group, each with its demand and
    weight in cost) and how each GPU can be had in each datacenter
    (``pddplan.horizon.HorizonInputs``), with the acquisition catalog the scenario names
    (or the shipped one). ``ArgumentError`` for a scenario without a horizon."""
    from pddplan.horizon.inputs import horizon_inputs as cut
    from pddplan.io.scenario import scenario_acquisition

    if problem.scenario.horizon is None:
        raise ArgumentError(
            "problem", f"{{argument}}: scenario {problem.scenario.name} has no horizon: section"
        )
    where = problem.source.path if problem.source is not None else Path("scenario.yaml")
    catalog = scenario_acquisition(problem.scenario, where)
    return cut(problem.scenario, problem.hardware, catalog)


def _with_budgets(
    problem: Problem, *, node_limit: int | None = None, rate_points: int | None = None
) -> Problem:
    """``problem`` with the work budgets given (``solver.node_limit``,
    ``solver.rate_points``; None keeps the scenario's), each a positive whole count."""
    changes: dict[str, int] = {}
    for name, budget in (("node_limit", node_limit), ("rate_points", rate_points)):
        if budget is None:
            continue
        _whole(name, budget, note=" (a count of work)")
        changes[f"solver.{name}"] = budget
    return problem.derive(changes) if changes else problem


def scenario_schema() -> dict[str, Any]:
    """The scenario format as JSON Schema."""
    from pddplan.spec.scenario import scenario_json_schema

    return scenario_json_schema()


# --- planning -------------------------------------------------------------------------------
@one_blas_thread
def solve(
    problem: Problem,
    *,
    objective: Objective | None = None,
    solver: SolverName | None = None,
    time_limit_s: float | None = None,
    node_limit: int | None = None,
    rate_points: int | None = None,
    method: Method = "milp",
    headroom: float | None = None,
    explain: bool = True,
    clock: Callable[[], float] = wall_clock,
    progress: Progress | None = None,
    top: int = 0,
    budget_usd_per_hour: float | None = None,
    marginals: bool = True,
) -> PlanResult:
    """The plan for ``objective`` (default: the scenario's): chips, counts, link tier and
    router thresholds, evaluated, with marginal values, or why there is none.

    Args:
        objective: ``max-bcr``, ``min-cost`` (at the demand) or ``max-capacity`` (within
            the scenario's ``budget_usd_per_hour``).
        solver: ``cbc`` (bundled) or ``highs``; default: the scenario's.
        time_limit_s: the wall-clock safety stop for the whole search, in seconds (default:
            the scenario's ``solver.time_limit_s``); a search it stops is ``time_limit``.
        node_limit: branch-and-bound nodes per MILP solve (default: the scenario's
            ``solver.node_limit``).
        rate_points: rates the search may price (default: the scenario's
            ``solver.rate_points``). The work budgets shape the answer, the same on any
            machine; a search that uses one up is ``work_limit`` (``docs/milp.md``).
        method: ``milp``, or ``enumerate``: brute force scored by the evaluator.
        headroom: demand growth to plan for (default: the scenario's ``headroom``): the plan
            serves ``arrival_rps x (1 + headroom)``.
        explain: for an infeasible scenario, find the smallest relaxation of each limit.
        clock: the time source the time limit is measured on.
        progress: hears the rates priced (``pddplan.progress``: done, total, label) each
            time the search prices one; the total is unknown until the search ends.
        top: runner-ups to plan beside the plan: the cheapest deployment of each other
            family (architecture and chip per role) at the demand, cheapest first
            (``PlanResult.runner_ups``; ``pddplan.plan.alternatives``); 0: none.
        budget_usd_per_hour: the most the plan may cost (default: the scenario's
            ``budget_usd_per_hour``): what ``max-capacity`` spends, a ceiling for the other
            objectives. One below the cheapest plan raises ``ArgumentError`` with that
            plan's cost.
        marginals: price the plan one step more or less of each pool and the link
            (``PlanResult.marginals``, a capacity search each); False leaves them empty,
            for a caller that does not show them.
    """
    _choice("objective", objective, OBJECTIVES)
    _choice("solver", solver, SOLVERS)
    _choice("method", method, METHODS)
    _no_horizon(problem)
    if not isinstance(top, int) or isinstance(top, bool) or not 0 <= top <= MAX_TOP:
        raise ArgumentError(
            "top", f"{{argument}} must be a whole number from 0 to {MAX_TOP}, got {top!r}"
        )
    problem = _with_budgets(problem, node_limit=node_limit, rate_points=rate_points)
    if budget_usd_per_hour is not None:
        problem = problem.derive({"budget_usd_per_hour": _budget(budget_usd_per_hour)})
    if headroom is not None:
        if not headroom >= 0:
            raise ArgumentError("headroom", f"{{argument}} must be >= 0, got {headroom}")
        problem = problem.derive({"headroom": headroom})
    if method == "enumerate":
        from pddplan.plan.brute_force import enumerate_plan

        return enumerate_plan(problem, objective=objective, marginals=marginals)
    from pddplan.plan.search import solve_plan

    result = solve_plan(
        problem,
        objective=objective,
        solver=solver,
        time_limit_s=time_limit_s,
        explain=explain,
        clock=clock,
        progress=progress,
        top=top,
        marginals=marginals,
    )
    if budget_usd_per_hour is not None:
        _budget_buys(result, budget_usd_per_hour)
    return result


MAX_TOP = 20
"""The most runner-ups ``solve`` plans (each is a search of its own)."""


def _budget(budget: float) -> float:
    """A budget argument checked: finite and above 0."""
    if (
        isinstance(budget, bool)
        or not isinstance(budget, int | float)
        or not math.isfinite(budget)
        or not budget > 0
    ):
        raise ArgumentError(
            "budget_usd_per_hour", f"{{argument}} must be a finite $/hour above 0, got {budget!r}"
        )
    return float(budget)


def _budget_buys(result: PlanResult, budget: float) -> None:
    """Raise ``ArgumentError`` where the budget given is what leaves ``result`` without a
    plan: below the cheapest plan, whose cost it says."""
    if result.fleet is not None:
        return
    needed = next((r for r in result.relaxations if r.family == "budget" and r.needed), None)
    if needed is None:
        return
    cost = needed.needed[0]
    what = "of any size" if result.stats.objective == MAX_CAPACITY else "for the demand"
    raise ArgumentError(
        "budget_usd_per_hour",
        f"{{argument}} ${budget:,.2f}/hour (${budget * units.HOURS_PER_MONTH:,.0f}/month) is "
        f"below the cheapest plan {what}: ${cost:,.2f}/hour (${cost * units.HOURS_PER_MONTH:,.0f}"
        f"/month)",
    )


@one_blas_thread
def error_margin(
    problem: Problem,
    plan: PlanResult,
    *,
    quantile: float = 0.9,
    solver: SolverName | None = None,
    time_limit_s: float | None = None,
    clock: Callable[[], float] = wall_clock,
) -> ErrorMargin | None:
    """What ``plan`` (a min-cost plan at the scenario's pass times) would face at
    ``quantile`` of the model's held-out error: its SLA capacity there, and what the
    min-cost plan made there buys beyond it (planned only where this plan no longer serves
    its planned rate there). None for a plan without a fleet, another
    objective's, a problem already at or past ``quantile``, or an engine profile without
    a measured error (``ideal``). ``time_limit_s`` and ``clock``: as ``solve``'s, for the
    plan made at ``quantile`` (``solve`` gives this what is left of its own limit)."""
    from pddplan.evaluation.evaluator import sla_capacity
    from pddplan.plan.results import ErrorMargin

    if plan.fleet is None or plan.evaluation is None or plan.stats.objective != MIN_COST:
        return None
    if problem.scenario.perf_quantile >= quantile:
        return None
    from pddplan.spec.scenario import ROLES

    slower = with_engine(problem, perf_quantile=quantile)
    if all(slower.time_factors(r) == problem.time_factors(r) for r in ROLES):
        return None  # profiles without an error table
    # its capacity there (not the whole evaluation: its percentiles and limits go unread)
    capacity = sla_capacity(slower, plan.fleet)
    demand = slower.scenario.workload.arrival_rps or 0.0
    if capacity >= plan.planned_rps:  # it holds there: nothing more to buy
        return ErrorMargin(quantile, problem.engine_text, capacity, demand, 0, 0.0)
    other = solve(slower, objective=MIN_COST, solver=solver, time_limit_s=time_limit_s, clock=clock)
    extra_gpus = extra_cost = None
    if other.fleet is not None and other.evaluation is not None:
        extra_gpus = _gpus(other.fleet) - _gpus(plan.fleet)
        if other.evaluation.cost_per_hour_usd is not None and plan.evaluation.cost_per_hour_usd:
            extra_cost = other.evaluation.cost_per_hour_usd - plan.evaluation.cost_per_hour_usd
    return ErrorMargin(quantile, problem.engine_text, capacity, demand, extra_gpus, extra_cost)


def _gpus(fleet: Fleet) -> int:
    return sum(p.instances * p.gpus_per_instance for p in fleet.pools)


@one_blas_thread
def evaluate(problem: Problem, fleet: Fleet, *, demand_rps: float | None = None) -> Evaluation:
    """What ``fleet`` delivers on ``problem``: SLA capacity, cost, BCR, TTFT percentiles and
    utilizations at ``demand_rps`` req/s (default: the scenario's demand)."""
    from pddplan.evaluation.evaluator import evaluate as run

    return run(problem, fleet, demand_rps=demand_rps)


def price_fleet(problem: Problem, fleet: Fleet) -> FleetCost:
    """What ``fleet`` costs per hour, pool by pool and link by link (no egress: there is
    no traffic to bill), without evaluating its performance."""
    from pddplan.model.pricing import fleet_cost

    return fleet_cost(problem, fleet)


MAX_CDF_POINTS = 10_000
"""The most points ``ttft_cdf`` computes."""


@one_blas_thread
def ttft_cdf(
    problem: Problem,
    fleet: Fleet,
    rate_rps: float,
    *,
    points: int = 161,
    upto_s: float | None = None,
) -> list[tuple[float, float]]:
    """The analytic TTFT distribution of ``fleet`` at ``rate_rps`` req/s: ``(T, P(TTFT <=
    T))`` pairs, T in seconds, at ``points`` evenly spaced values of T from 0 to ``upto_s``.
    It is the evaluator's own tail (the share of requests above T, which its TTFT
    percentiles and the SLA check invert), so the curve crosses 0.9 and 0.99 where
    ``evaluate`` reports P90 and P99 at that rate.

    Args:
        rate_rps: the arrival rate, req/s (>= 0).
        points: how many values of T, 2 to 10,000.
        upto_s: the last T, seconds (default: past the SLA's TTFT P99 bound and the fleet's
            P99.9 at that rate, whichever is later, and at most 10x that bound).

    Raises:
        ArgumentError: a rate, a count or a bound out of range.
    """
    import numpy as np

    from pddplan.evaluation.evaluator import BISECT_STEPS, MAX_TTFT_S, Evaluator
    from pddplan.model.queueing import percentile

    if not (isinstance(rate_rps, int | float) and math.isfinite(rate_rps) and rate_rps >= 0):
        raise ArgumentError(
            "rate_rps", f"{{argument}} must be a finite rate >= 0, got {rate_rps!r}"
        )
    _whole("points", points, most=MAX_CDF_POINTS)
    if points < 2:
        raise ArgumentError("points", "{argument} must be at least 2, got 1")
    bound = problem.scenario.sla.ttft_p99_s
    tail = Evaluator(problem, fleet).state(rate_rps).ttft_tail
    if upto_s is None:
        p999 = percentile(tail, 0.999, bound, at_most=MAX_TTFT_S, steps=BISECT_STEPS)
        upto_s = min(max(1.25 * bound, 1.1 * p999), 10 * bound)
    elif not (isinstance(upto_s, int | float) and math.isfinite(upto_s) and upto_s > 0):
        raise ArgumentError("upto_s", f"{{argument}} must be a finite time > 0 s, got {upto_s!r}")
    at = np.linspace(0.0, float(upto_s), points)
    above = tail.many(at)
    # to 12 places: 1 - (a share within a rounding of 1) is 0, not 2e-16
    return [
        (float(t), min(1.0, max(0.0, round(1.0 - float(a), 12))))
        for t, a in zip(at, above, strict=True)
    ]


@one_blas_thread
def compare(
    problem: Problem,
    *,
    at: Literal["demand", "budget", "both"] = "both",
    budget_usd_per_hour: float | None = None,
    solver: SolverName | None = None,
    time_limit_s: float | None = None,
    node_limit: int | None = None,
    rate_points: int | None = None,
    progress: Progress | None = None,
    explain: bool = True,
) -> Comparison:
    """Every architecture (intra-DC per real datacenter and chip, a hypothetical one-DC,
    cross-DC naive, PDD) at equal demand (each one's min-cost fleet), at equal budget (each
    one's max-capacity fleet for ``budget_usd_per_hour``, default: the scenario's, else the
    PDD equal-demand fleet's cost), or both (``docs/compare.md``). ``progress``
    (``pddplan.progress``) hears the rows done and the rows in all, with the next row's
    name, before each row is planned. The limits are ``solve``'s, for each row's search."""
    _choice("solver", solver, SOLVERS)
    problem = _with_budgets(problem, node_limit=node_limit, rate_points=rate_points)
    from pddplan.plan.compare import compare as run

    return run(
        problem,
        at=at,
        budget_usd_per_hour=budget_usd_per_hour,
        solver=solver,
        time_limit_s=time_limit_s,
        progress=progress,
        explain=explain,
    )


def comparison_files(comparison: Comparison, problem: Problem) -> dict[str, str]:
    """Each row of ``comparison`` that has a plan as two files, name -> text: its fleet,
    ``{question}-{row number}-{kind}[-{chip}][-{datacenter}].fleet.yaml``, and the scenario
    it was planned on (a restricted or relaxed copy of ``problem``'s, as each file's first
    lines say), the same name with ``.scenario.yaml``. ``pddplan evaluate SCENARIO --fleet
    FLEET`` on a pair gives the row's figures."""
    from pddplan.io.export import fleet_yaml, scenario_yaml

    base = problem.source.path.parent if problem.source is not None else Path.cwd()
    files: dict[str, str] = {}
    for section in comparison.sections:
        for i, row in enumerate(section.rows, start=1):
            if not row.ok or row.plan is None or row.plan.fleet is None or row.problem is None:
                continue
            where = [x for x in (row.chip, row.datacenter) if x]
            stem = "-".join([section.at, f"{i:02d}", row.kind, *where])
            note = (
                f"pddplan compare: the row '{row.label}' at equal {section.at}.\n"
                f"Evaluate it with: pddplan evaluate {stem}.scenario.yaml --fleet {stem}.fleet.yaml"
            )
            if row.relaxes:
                note += f"\nThis scenario relaxes {problem.scenario.name}: {row.relaxes}."
            files[f"{stem}.fleet.yaml"] = fleet_yaml(row.plan.fleet, note)
            files[f"{stem}.scenario.yaml"] = scenario_yaml(row.problem.scenario, base, note)
    return files


@one_blas_thread
def price_sweep(
    problem: Problem,
    chip: str,
    prices: list[float],
    *,
    solver: SolverName | None = None,
    time_limit_s: float | None = None,
    node_limit: int | None = None,
    rate_points: int | None = None,
    progress: Progress | None = None,
) -> Sweep:
    """Every architecture re-planned at equal demand at each of ``chip``'s ``prices`` (USD
    per GPU-hour), and the price where PDD stops being cheaper than the cheapest
    baseline. The limits are ``solve``'s, for each search; ``progress``
    (``pddplan.progress``) hears the prices done."""
    from pddplan.sweeps.prices import price_sweep as run

    problem = _with_budgets(problem, node_limit=node_limit, rate_points=rate_points)
    used = {c for dc in problem.scenario.datacenters.values() for c in dc.chips}
    if chip not in used:
        raise ArgumentError(
            "chip",
            f"{{argument}}: chip '{chip}' is not used anywhere in scenario {problem.scenario.name}",
        )
    return run(
        problem,
        chip,
        prices,
        solver=solver,
        time_limit_s=time_limit_s,
        progress=progress,
    )


@one_blas_thread
def sweep(
    problem: Problem,
    vary: Sequence[str],
    *,
    zipped: bool = False,
    objective: Objective | None = None,
    architectures: Sequence[str] = ("pdd",),
    solver: SolverName | None = None,
    time_limit_s: float | None = None,
    node_limit: int | None = None,
    rate_points: int | None = None,
    workers: int = 1,
    engine: Engine = "local",
    address: str | None = None,
    journal: str | Path | None = None,
    journal_dir: str | Path | None = None,
    resume: bool = False,
    confirm_large: bool = False,
    max_points: int | None = None,
    hold_journal: bool = False,
    scenario_label: str | None = None,
    progress: Progress | None = None,
) -> SweepRun:
    """``problem`` planned at every point of the ``vary`` axes (``PATH=SPEC`` each, see
    ``docs/sweeps.md``): their grid, or with ``zipped`` their values paired. Each point is
    the scenario with its values, validated (an invalid point is a result with its reason),
    planned for ``objective`` as each of ``architectures`` (``pdd``, ``cross-dc-naive``,
    ``intra-dc-homogeneous``, ``intra-dc-heterogeneous``, ``hypothetical``). ``workers``
    local processes, or Ray tasks (``engine="ray"``, ``address`` of a cluster); ``journal``:
    a file each finished point is appended to (checksummed, locked: ``docs/sweeps.md``), which
    ``resume`` continues; ``journal_dir``: where ``journal`` is not given, a folder to keep
    it in, named by the grid's fingerprint (the same sweep finds it again); ``hold_journal``
    keeps it open and locked in the result until ``SweepRun.close_journal``. ``progress``
    (``pddplan.progress``) hears the points done as each finishes. A grid has at most ``max_points`` points (default
    ``DEFAULT_MAX_POINTS``; ``confirm_large``: ``POINTS_CEILING``, the most it may be),
    checked, with every path and value, before any work. The limits are ``solve``'s, for
    each point's searches: the work budgets make a point's answer the same on every worker."""
    from pddplan.sweeps.axes import (
        DEFAULT_MAX_POINTS,
        MAX_AXES,
        POINTS_CEILING,
        grid_size,
        parse_vary,
    )
    from pddplan.sweeps.engine import SweepJob, journal_in, run_sweep, scenario_digest
    from pddplan.sweeps.knobs import check_axes
    from pddplan.sweeps.points import ARCHITECTURES, Settings

    _choice("objective", objective, OBJECTIVES)
    _choice("solver", solver, SOLVERS)
    _choice("engine", engine, ENGINES)
    problem = _with_budgets(problem, node_limit=node_limit, rate_points=rate_points)
    for a in architectures:
        _choice("architectures", a, ARCHITECTURES)
    if not architectures:
        raise ArgumentError("architectures", "{argument}: give at least one architecture")
    limit = max_points if max_points is not None else (
        POINTS_CEILING if confirm_large else DEFAULT_MAX_POINTS)  # fmt: skip
    _whole("max_points", limit, most=POINTS_CEILING)
    if len(vary) > MAX_AXES:
        raise ArgumentError(
            "vary", f"{{argument}}: {len(vary)} axes; a sweep takes at most {MAX_AXES}"
        )
    axes = [parse_vary(v, max_points=limit) for v in vary]
    size = grid_size(axes, zipped=zipped)
    if size > limit:
        more = (f"; sweep a coarser grid, or raise {{argument}} (at most {POINTS_CEILING:,})"
                if limit < POINTS_CEILING else f"; {POINTS_CEILING:,} is the most a sweep "
                "holds: sweep a coarser grid, or split it")  # fmt: skip
        raise ArgumentError("max_points", f"--vary: the grid has {size:,} points, over "
                            f"{{argument}} {limit:,}{more}")  # fmt: skip
    check_axes(problem, axes)
    label = scenario_label or (
        str(problem.source.path) if problem.source else problem.scenario.name
    )
    settings = Settings(
        objective or problem.scenario.objective,
        tuple(dict.fromkeys(architectures)),
        solver,
        time_limit_s,
    )
    job = SweepJob(label, scenario_digest(problem), tuple(axes), zipped, settings)
    job.points()  # a zip of unequal axes fails here, before any journal is written
    folder = _path(journal_dir)
    return run_sweep(
        problem,
        job,
        workers=workers,
        engine=engine,
        address=address,
        journal=_path(journal) or (journal_in(folder, job) if folder is not None else None),
        resume=resume,
        hold_journal=hold_journal,
        progress=progress,
    )


@one_blas_thread
def study(
    problem: Problem,
    name: str,
    *,
    vary: Sequence[str] = (),
    architectures: Sequence[str] | None = None,
    scenario_label: str | None = None,
    progress: Progress | None = None,
    **options: Any,
) -> SweepRun:
    """A built-in study (``bathtub``, ``price-premium``, ``demand``; ``docs/sweeps.md``):
    a sweep with its own axes, over every architecture unless ``architectures`` is given.
    ``options`` are ``sweep``'s. The demand study plans in this process, bisecting on the
    steps of the minimum cost (each rate depends on the ones before); it journals each rate
    (``journal``, ``resume``) as a sweep does."""
    from pddplan.sweeps.studies import COMPARED, STUDIES, demand_study, study_axes

    _choice("name", name, STUDIES)
    kinds = tuple(architectures) if architectures else COMPARED
    if name == "demand":
        problem = _with_budgets(
            problem, node_limit=options.get("node_limit"), rate_points=options.get("rate_points")
        )
        from pddplan.sweeps.points import ARCHITECTURES, Settings

        for a in kinds:
            _choice("architectures", a, ARCHITECTURES)
        _choice("solver", options.get("solver"), SOLVERS)
        settings = Settings(MIN_COST, kinds[:1] if architectures is None else kinds,
                            options.get("solver"), options.get("time_limit_s"))  # fmt: skip
        label = scenario_label or problem.scenario.name
        return demand_study(problem, settings, vary=list(vary), scenario_label=label,
                            journal=_path(options.get("journal")),
                            journal_dir=_path(options.get("journal_dir")),
                            resume=bool(options.get("resume")),
                            hold_journal=bool(options.get("hold_journal")),
                            progress=progress)  # fmt: skip
    if vary:
        raise ArgumentError("vary", f"{{argument}}: --study {name} sets its own axes; leave it out")
    axes, _metric = study_axes(problem, name)
    return sweep(problem, axes, architectures=kinds, scenario_label=scenario_label,
                 progress=progress, **options)  # fmt: skip


# --- checking a plan ------------------------------------------------------------------------
@one_blas_thread
def simulate(
    problem: Problem,
    fleet: Fleet,
    *,
    requests: int | None = None,
    precision: float | None = None,
    time_cap_s: float | None = None,
    max_requests: int | None = None,
    rate_rps: float | None = None,
    trace: str | Path | None = None,
    skip_bad: bool = False,
    seed: int = 0,
    p_cache_tokens: int | None = None,
    setup_rtts: float = 0.0,
    progress: Progress | None = None,
) -> SimResult:
    """``fleet`` simulated request by request at steady state, beside the analytic model's
    prediction, with a verdict on the SLA (``docs/simulate.md#run-length``).

    Args:
        requests: served requests, warm-up included (default: the run decides its length:
            until TTFT P90 and P99 are known within ``precision``, or ``max_requests``).
        precision: relative half-width of the 95% intervals the run aims at (default 5%).
        time_cap_s: a wall-clock safety stop (default: none). A run it ends has verdict
            ``time_limit``: not a verdict, since how far it got depends on the machine.
        max_requests: served requests a run may take (default 120,000): with the seed,
            what makes the run the same on any machine.
        rate_rps: the arrival rate of sampled sessions (default: the fleet's SLA capacity).
        trace: replay a Mooncake JSONL trace instead.
        seed: same seed, same result.
        p_cache_tokens: prefill-side prefix cache per datacenter (default: unbounded).
        setup_rtts: round trips of connection set-up per WAN transfer.
        progress: hears the requests served (``pddplan.progress``) as the run goes, with
            the phase and the TTFT P99 so far; the total is the fixed length, else an
            estimate from the precision reached so far.
    """
    from pddplan.simulation.run import simulate as run

    return run(
        problem,
        fleet,
        length=_run_length(requests, precision, time_cap_s, max_requests),
        rate_rps=rate_rps,
        trace=_path(trace),
        skip_bad=skip_bad,
        seed=seed,
        p_cache_tokens=p_cache_tokens,
        setup_rtts=setup_rtts,
        progress=progress,
    )


@one_blas_thread
def verify(
    problem: Problem,
    plan: PlanResult | None = None,
    *,
    objective: Objective | None = None,
    solver: SolverName | None = None,
    time_limit_s: float | None = None,
    node_limit: int | None = None,
    rate_points: int | None = None,
    requests: int | None = None,
    precision: float | None = None,
    time_cap_s: float | None = None,
    max_requests: int | None = None,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> Verification:
    """Plan (or take ``plan``), simulate it at the load it claims until the verdict is
    decided, and re-plan with a tighter model until the simulator confirms a plan
    (``docs/simulate.md#the-verify-loop``). ``requests``, ``precision``, ``time_cap_s``,
    ``max_requests``: each simulation's run length, as in ``simulate``; the planning
    limits are ``solve``'s."""
    problem = _with_budgets(problem, node_limit=node_limit, rate_points=rate_points)

    def again(p: Problem) -> PlanResult:
        return solve(p, objective=objective, solver=solver, time_limit_s=time_limit_s)

    from pddplan.simulation.verify import verify as run

    length = _run_length(requests, precision, time_cap_s, max_requests)
    return run(problem, again, first=plan, length=length, seed=seed, progress=progress)


# --- the model, the workload and the catalogs -------------------------------------------------
@one_blas_thread
def instance_figures(
    model: str,
    chip: str,
    *,
    catalogs: Catalogs | None = None,
    problem: Problem | None = None,
    gpus: int | None = None,
    input_tokens: int = 8192,
    hit_rate: float = 0.0,
    output_tokens: int = 512,
    tpot_ms: float | None = None,
    batch: int | None = None,
    dest_hit_rate: float = 0.0,
    kv_dtype: Literal["bf16", "fp8"] | None = None,
    weight_dtype: Literal["bf16", "fp8", "fp4"] | None = None,
    context_parallel: bool = False,
    engine: str | None = None,
) -> InstancePerf:
    """One instance of ``model`` on ``chip`` for one request shape: prefill latency and
    throughput, the largest decode batch, KV sizes. ``gpus`` defaults to the smallest power
    of two that holds the weights; ``context_parallel`` splits each prompt's attention over
    its attention groups. With ``problem``, its scenario's engine, calibration overrides,
    dtypes and catalogs apply; ``engine`` names the engine profile (default: the
    scenario's, else the catalog's default)."""
    from pddplan.model.figures import analyze_instance
    from pddplan.model.instance import make_instance, smallest_fitting_gpus
    from pddplan.spec.calibration import resolve_calibration
    from pddplan.spec.engine import chip_knobs

    _choice("kv_dtype", kv_dtype, ("bf16", "fp8"))
    _choice("weight_dtype", weight_dtype, ("bf16", "fp8", "fp4"))
    if problem is not None:
        catalogs = load_catalogs(problem=problem)
        kv_dtype = kv_dtype or problem.scenario.kv_dtype
        weight_dtype = weight_dtype or problem.scenario.weight_dtype
    elif catalogs is None:
        catalogs = load_catalogs()
    spec, chip_spec = catalogs.model(model), catalogs.chip(chip)
    if problem is not None:
        if engine is not None:
            catalogs.engine(engine, [chip])  # one engine's name: an instance runs one
        problem = with_engine(problem, engine)
        if problem.mixed:
            raise ArgumentError(
                "serving_engine",
                f"{{argument}}: the scenario's roles run different engines "
                f"({problem.engine_label}): give the one this instance runs",
            )
        cal, engine_id = problem.calibration(chip), problem.engine.id
    else:
        engine_id = catalogs.engine(engine, [chip])
        profile = catalogs.engines.engines[engine_id]
        cal = resolve_calibration(
            catalogs.hardware, chip, engine=chip_knobs(profile, catalogs.hardware, chip)
        )
    if gpus is None:
        gpus = smallest_fitting_gpus(spec, chip_spec, cal, weight_dtype=weight_dtype)
        if gpus is None:
            raise ArgumentError(
                "gpus",
                f"{model} does not fit any instance of up to 1024 x {chip}; give {{argument}}",
            )
    try:
        inst = make_instance(
            spec,
            chip_spec,
            gpus,
            cal,
            kv_dtype=kv_dtype,
            weight_dtype=weight_dtype,
            context_parallel=context_parallel,
        )
    except ValueError as e:  # context parallelism with one attention group
        raise ArgumentError("context_parallel", f"{{argument}}: {e}") from None
    figures = analyze_instance(
        inst,
        input_tokens=input_tokens,
        hit_rate=hit_rate,
        output_tokens=output_tokens,
        tpot_ms=tpot_ms,
        batch=batch,
        dest_hit_rate=dest_hit_rate,
    )
    return dataclasses.replace(figures, engine=engine_id)


@one_blas_thread
def calibrate(
    paths: Sequence[str | Path],
    *,
    knobs: list[str] | None = None,
    ridge: float | None = None,
    model: str | None = None,
    chip: str | None = None,
    gpus: int | None = None,
    catalogs: Catalogs | None = None,
    engine: str | None = None,
    max_points: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> Calibration:
    """The calibration knobs fitted to measured points (``docs/validation.md#calibrate``):
    CSV or JSON points, or vLLM / SGLang / genai-perf benchmark results (which need
    ``model``, ``chip`` and ``gpus``). ``knobs``: those to fit (default: the efficiency
    factors the points inform); ``ridge``: a number in (0, 1e6] (default 0.01);
    ``engine``: the engine profile they are fitted on top of (default: the catalog's
    default engine), which must cover every point's chip. ``max_points``: the most points
    read in all (default ``MAX_CALIBRATION_POINTS``, 500). Points repeated exactly are
    fitted once, each repeat a warning in the result's ``notes``. ``progress`` hears the
    fit's work as a line of text."""
    from pddplan.calibration.fit import RIDGE, check_ridge
    from pddplan.calibration.fit import calibrate as fit
    from pddplan.io.measurements import Deployment, load_measurements, merge_duplicates
    from pddplan.spec.limits import MAX_CALIBRATION_POINTS, MAX_INSTANCE_GPUS

    if ridge is not None:
        check_ridge(ridge)
    limit = MAX_CALIBRATION_POINTS if max_points is None else max_points
    _whole("max_points", limit)
    if gpus is not None:
        _whole("gpus", gpus, most=MAX_INSTANCE_GPUS,
               note=" (the GPUs of one instance; docs/scenarios.md#input-limits)")  # fmt: skip
    catalogs = catalogs if catalogs is not None else load_catalogs()
    given = [x is not None for x in (model, chip, gpus)]
    if any(given) and not all(given):
        raise InputError("a benchmark result's deployment needs all of --model, --chip, --gpus")
    deployment = Deployment(model, chip, gpus) if model and chip and gpus else None
    points = load_measurements([Path(p) for p in paths], catalogs, deployment, max_points=limit)
    points, notes = merge_duplicates(points)
    profile = catalogs.engines.engines[
        catalogs.engine(engine, sorted({p.measurement.chip for p in points}))
    ]
    result = fit(
        [(p.measurement, p.where) for p in points],
        {m: catalogs.model(m) for m in {p.measurement.model for p in points}},
        catalogs.hardware,
        knobs,
        ridge=RIDGE if ridge is None else ridge,
        engine=profile,
        progress=progress,
    )
    return dataclasses.replace(result, notes=tuple(notes))


def calibration_yaml(fit: Calibration, sources: list[str]) -> str:
    """``fit`` as a commented ``calibration:`` block a scenario can include."""
    from pddplan.io.measurements import calibration_yaml as dump

    return dump(fit, sources)


@one_blas_thread
def fit_trace(
    path: str | Path,
    *,
    block_tokens: int = 512,
    cache_tokens: int | Literal["unbounded"] = "unbounded",
    md_cache_tokens: int | Literal["unbounded"] | None = None,
    hit_edges: tuple[float, ...] | None = None,
    skip_bad: bool = False,
    hit_curve: bool = False,
) -> TraceFit:
    """A Mooncake trace replayed through prefix caches of these sizes (tokens), and the
    workload it gives: hit histogram, lengths, arrival rate and request classes; with
    ``hit_curve``, also an LRU prefix cache's hit rate at every capacity
    (``TraceFit.hit_curve``)."""
    from pddplan.workload.classes import HIT_EDGES
    from pddplan.workload.trace import fit_trace as fit

    return fit(
        Path(path),
        block_tokens=block_tokens,
        cache_tokens=cache_tokens,
        md_cache_tokens=md_cache_tokens,
        hit_edges=hit_edges if hit_edges is not None else HIT_EDGES,
        skip_bad=skip_bad,
        hit_curve=hit_curve,
    )


@one_blas_thread
def fit_trace_windows(
    path: str | Path,
    window_s: float,
    *,
    block_tokens: int = 512,
    cache_tokens: int | Literal["unbounded"] = "unbounded",
    md_cache_tokens: int | Literal["unbounded"] | None = None,
    hit_edges: tuple[float, ...] | None = None,
    skip_bad: bool = False,
) -> WindowedFit:
    """A Mooncake trace replayed as ``fit_trace`` does, then cut by request timestamp into
    windows of ``window_s`` seconds, each fitted on its own (windows with fewer than 100
    requests merged into a neighbour)."""
    from pddplan.workload.classes import HIT_EDGES
    from pddplan.workload.trace import fit_trace_windows as fit

    return fit(
        Path(path),
        window_s,
        block_tokens=block_tokens,
        cache_tokens=cache_tokens,
        md_cache_tokens=md_cache_tokens,
        hit_edges=hit_edges if hit_edges is not None else HIT_EDGES,
        skip_bad=skip_bad,
    )


def fit_by_hour(
    path: str | Path, *, block_tokens: int = 512, skip_bad: bool = False
) -> HourlyProfile:
    """A Mooncake trace's arrival rate by hour of the day, as a 24-factor daily profile
    (``pddplan.workload.trace.HourlyProfile``); ``InputError`` for a trace shorter than a
    day."""
    from pddplan.workload.trace import fit_by_hour as fit

    _whole("block_tokens", block_tokens)
    return fit(Path(path), block_tokens=block_tokens, skip_bad=skip_bad)


def daily_profile_yaml(profile: HourlyProfile) -> str:
    """``profile`` as a commented ``horizon:`` block with its ``daily_profile``."""
    from pddplan.io.workload import daily_profile_yaml as write

    return write(profile)


def variants_yaml(windowed: WindowedFit, window: str) -> str:
    """``windowed`` as a commented list to paste under ``workload_variants:``; ``window``
    is the window as the user wrote it (``1d``), for the header."""
    from pddplan.io.workload import variants_yaml as dump

    return dump(windowed, window)


def workload_yaml(fit: TraceFit) -> str:
    """``fit`` as a commented ``workload:`` block a scenario can include."""
    from pddplan.io.workload import workload_yaml as dump

    return dump(fit)


def import_hf_config(
    path: str | Path,
    model_id: str,
    *,
    total_params_b: float | None = None,
    active_params_b: float | None = None,
    catalog: str | Path | None = None,
) -> str:
    """A model catalog entry (YAML text) from a Hugging Face ``config.json``; with
    ``catalog``, also added to that model catalog file (created if missing; its other
    entries and comments kept)."""
    from pddplan.io.hf import add_model_entry
    from pddplan.io.hf import import_hf_config as convert
    from pddplan.spec.limits import MAX_PARAMS_B

    given = {"total_params_b": total_params_b, "active_params_b": active_params_b}
    for name, value in given.items():
        if value is not None and not 0 < value <= MAX_PARAMS_B:
            raise ArgumentError(
                name,
                f"{{argument}}: billions of parameters, > 0 and at most {MAX_PARAMS_B:g}, "
                f"got {value:g}",
            )
    if (
        total_params_b is not None
        and active_params_b is not None
        and active_params_b > total_params_b
    ):
        raise ArgumentError(
            "active_params_b",
            f"{{argument}} ({active_params_b:g}) exceeds the total ({total_params_b:g})",
        )
    text = convert(
        Path(path), model_id, total_params_b=total_params_b, active_params_b=active_params_b
    )
    if catalog is not None:
        add_model_entry(Path(catalog), text)
    return text


# --- helpers --------------------------------------------------------------------------------
def _run_length(
    requests: int | None,
    precision: float | None,
    time_cap_s: float | None,
    max_requests: int | None,
) -> RunLength:
    """A ``RunLength`` with the given fields, its defaults for the rest."""
    from dataclasses import replace

    from pddplan.simulation.steady import RunLength

    length = RunLength(requests=requests)
    if precision is not None:
        length = replace(length, precision=precision)
    if time_cap_s is not None:
        length = replace(length, max_wall_s=time_cap_s)
    if max_requests is not None:
        length = replace(length, max_requests=max_requests)
    return length


def _whole(argument: str, value: object, *, most: int | None = None, note: str = "") -> None:
    """``value`` is a whole number from 1 (to ``most``), else an ``ArgumentError`` naming
    ``argument`` (a bool is not a number here)."""
    whole = isinstance(value, int) and not isinstance(value, bool)
    if whole and value >= 1 and (most is None or value <= most):  # type: ignore[operator]
        return
    span = "of at least 1" if most is None else f"from 1 to {most:,}"
    raise ArgumentError(
        argument, f"{{argument}} must be a whole number {span}{note}, got {value!r}"
    )


def _path(p: str | Path | None) -> Path | None:
    return None if p is None else Path(p)


def _choice(argument: str, value: str | None, allowed: tuple[str, ...]) -> None:
    if value is not None and value not in allowed:
        raise ArgumentError(
            argument, f"{{argument}}: '{value}' is not allowed; choose one of {', '.join(allowed)}"
        )
