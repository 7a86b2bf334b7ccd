"""Explanations of a plan: the marginal value of one more purchase step of each pool or
one link tier up (each evaluated), and, for an infeasible scenario, how far each family of
limits would need to move for the demand to be servable (relax it alone, then bisect)."""

from __future__ import annotations

import math
from collections.abc import Callable

from pddplan import units
from pddplan.errors import InputError
from pddplan.evaluation.results import Evaluation
from pddplan.model.problem import Problem
from pddplan.plan import milp
from pddplan.plan.counts import Requirements
from pddplan.plan.results import Marginal, PlanResult, Relaxation, Verdict
from pddplan.plan.space import Space
from pddplan.spec.fleet import Fleet, LinkChoice
from pddplan.spec.scenario import Scenario

MIN_RATE_RPS = 1e-6
"""A budget that cannot buy this rate buys nothing (max capacity)."""


def marginals(space: Space, fleet: Fleet, base: Evaluation, measure) -> list[Marginal]:
    """One more purchase step of each pool, and one link tier up (each evaluated, for the
    cost and capacity only: ``measure`` is ``cost_and_capacity``)."""
    hw, out = space.hw, []

    def marginal(changed: Fleet, change: str) -> Marginal | None:
        usage = [(p.datacenter, p.chip, p.gpus_per_instance * p.instances) for p in changed.pools]
        if not space.within_limits(usage):
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
        capped = sea.model_copy(update={"max_utilization": cap})
        return scenario.model_copy(update={"search": capped}), f"utilization cap {cap:.1%}"
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
    wider = sea.model_copy(update={"max_gpus_per_pool": math.ceil(sea.max_gpus_per_pool * f)})
    trial = scenario.model_copy(update={"datacenters": dcs, "search": wider})
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


def budget_needed(
    space: Space, solver: str, deadline: float, clock: Callable[[], float]
) -> Relaxation:
    """max capacity with a budget that buys nothing: the cheapest plan's cost at a vanishing
    rate is the budget it takes."""
    budget = space.scenario.budget_usd_per_hour
    if budget is None:  # the scenario validator gives every max-capacity scenario one
        raise ValueError("budget_needed asks about a scenario without a budget")
    left = max(deadline - clock(), 1.0)
    out = milp.min_cost(
        Requirements(space, MIN_RATE_RPS), solver=solver, time_limit_s=left, clock=clock
    )
    if out.choice is None or out.cost_per_hour is None:
        return Relaxation("budget", 1.0, None, "no plan serves any traffic, at any budget")
    return Relaxation(
        "budget",
        1.0,
        out.cost_per_hour / budget,
        f"needs a budget of ${out.cost_per_hour:,.2f}/hour to serve any traffic; "
        f"the scenario has ${budget:,.2f}/hour",
    )


def explain_infeasible(
    problem: Problem,
    solver: str,
    deadline: float,
    clock: Callable[[], float],
) -> list[Relaxation]:
    """For each family of limits: relax it alone (up to ``MAX_RELAX``); if that makes the
    demand servable, bisect for the smallest relaxation that does. Families left when the
    solve's time limit runs out are reported as not tried."""

    scenario = problem.scenario

    def feasible(family: str, f: float) -> bool:
        trial, _ = _relaxed(scenario, family, f)
        try:
            space = Space(problem.with_scenario(trial))
        except InputError:
            return False
        rate = trial.workload.arrival_rps or 0.0
        left = max(deadline - clock(), 1.0)
        out = milp.min_cost(
            Requirements(space, rate), solver=solver, time_limit_s=left, clock=clock
        )
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


# --- the verdict ----------------------------------------------------------------------------
OVERSIZED = 2.0
"""A plan whose SLA capacity is above this many times the planned load says so, and why."""


def verdict(space: Space, plan: PlanResult) -> Verdict | None:
    """The plan's one-line verdict (``Verdict``); None without a plan."""
    e, fleet = plan.evaluation, plan.fleet
    if e is None or fleet is None:
        return None
    s = space.scenario
    demand = s.workload.arrival_rps or 0.0
    planned = demand * (1 + s.headroom)
    by_dc: dict[str, dict[str, int]] = {}
    for p in fleet.pools:
        chips = by_dc.setdefault(p.datacenter, {})
        chips[p.chip] = chips.get(p.chip, 0) + p.gpus_per_instance * p.instances
    buy = "; ".join(
        f"{', '.join(f'{n} {chip}' for chip, n in chips.items())} in {dc}"
        for dc, chips in by_dc.items()
    )
    buy += "".join(f"; a {x.gbps:g} Gbit/s {x.between[0]}-{x.between[1]} link" for x in fleet.links)
    month = e.cost_per_hour_usd * units.HOURS_PER_MONTH if e.cost_per_hour_usd else None
    capacity = e.sla_capacity_rps
    limit = e.binding[0].split(" (")[0] if e.binding else None
    ratio = capacity / demand if demand > 0 else math.inf
    oversized = capacity > OVERSIZED * planned
    reason = advice = None
    if oversized:
        reason, advice = _why_oversized(space, plan, planned)
    headroom = f", sized for +{s.headroom:.0%}" if s.headroom else ""
    text = (
        f"Buy {buy}: {'$' + format(month, ',.0f') if month else 'no price'}/month. It serves {capacity:,.3g} req/s, "
        f"{_times(ratio)} the {demand:g} req/s demand{headroom}"
        + (f"; {limit} stops it growing" if limit else "")
        + "."
    )
    if oversized:
        text += f" More than {OVERSIZED:g}x the demand: {reason}; {advice}."
    return Verdict(text, buy, month, capacity, demand, planned, limit, oversized, reason, advice)


def _times(ratio: float) -> str:
    if not math.isfinite(ratio):
        return "any multiple of"
    return f"{ratio:.2g}x" if ratio < 10 else f"{ratio:,.0f}x"


def _why_oversized(space: Space, plan: PlanResult, planned: float) -> tuple[str, str]:
    """Why a plan serves far more than the planned load, and how to size for it."""
    objective = plan.stats.objective
    if objective == "max-bcr":
        return (
            "max BCR sizes for the best SLA capacity per dollar, not for the demand",
            "--objective min-cost buys the cheapest fleet for the demand",
        )
    if objective == "max-capacity":
        return (
            "max capacity spends the budget",
            "--objective min-cost buys the cheapest fleet for the demand",
        )
    fleet = plan.fleet
    assert fleet is not None  # a verdict is only given for a plan
    steps = {
        (o.datacenter, o.role, o.chip, o.gpus): o.unit_step
        for options in space.options.values()
        for o in options
    }
    smallest = [
        p
        for p in fleet.pools
        if p.instances <= steps.get((p.datacenter, p.role, p.chip, p.gpus_per_instance), 1)
    ]
    if len(smallest) == len(fleet.pools):
        sizes = ", ".join(
            f"{p.role} {p.instances} x {p.gpus_per_instance} {p.chip}" for p in fleet.pools
        )
        return (
            f"every pool is already its smallest purchase ({sizes}): the instance size "
            f"that holds {space.model.id} sets the scale",
            "a smaller model, a larger-memory chip or smaller purchase units would size down",
        )
    more = ", ".join(
        f"{p.role} {p.instances} x {p.gpus_per_instance} {p.chip}"
        for p in fleet.pools
        if p not in smallest
    )
    return (
        f"the SLA, not the load, sets the count of {more}",
        "relaxing the binding latency bound (see the relaxations of a tighter scenario) "
        "would size down",
    )
