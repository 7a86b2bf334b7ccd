"""Explanations of a plan: the marginal value of one more purchase step of each pool or
one link tier up (each evaluated), and, for an infeasible scenario, how far each family of
limits would need to move for the demand to be servable (relax it alone, then bisect)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from pddplan import units
from pddplan.errors import InputError
from pddplan.evaluation.evaluator import ttft_p99, wider
from pddplan.evaluation.results import Evaluation
from pddplan.model.problem import Problem
from pddplan.plan.bounds import relaxed_optimum
from pddplan.plan.counts import Requirements
from pddplan.plan.results import Marginal, PlanResult, Relaxation, Verdict
from pddplan.plan.space import Choice, PoolOption, Space
from pddplan.spec.choices import MAX_BCR, MAX_CAPACITY
from pddplan.spec.fleet import Fleet, LinkChoice, Routing
from pddplan.spec.limits import MAX_LINK_GBPS
from pddplan.spec.scenario import Link, Scenario
from pddplan.work import TimeLimitReached

MIN_RATE_RPS = 1e-6
"""A budget that cannot buy this rate buys nothing (max capacity)."""


def marginals(space: Space, fleet: Fleet, base: Evaluation, measure) -> list[Marginal]:
    """One purchase step more of each pool, one less (or the pool dropped, ``_fewer``), and
    one link tier up: each evaluated for its cost and capacity (``measure`` is
    ``cost_and_capacity``) and its TTFT P99 at the demand."""
    hw, out = space.hw, []

    def marginal(changed: Fleet, change: str) -> Marginal | None:
        usage = [(p.datacenter, p.chip, p.gpus_per_instance * p.instances) for p in changed.pools]
        if not space.within_limits(usage):
            return None  # over a datacenter limit: not an option
        cost, capacity = measure(changed)
        gain = capacity - base.sla_capacity_rps
        if not wider(capacity, base.sla_capacity_rps) and not wider(
            base.sla_capacity_rps, capacity
        ):
            gain = 0.0  # equal to the capacity search's resolution: no change
        p99 = ttft_p99(space.problem, changed, base.demand_rps) if capacity > 0 else None
        return Marginal(
            change,
            (cost or 0.0) - (base.cost_per_hour_usd or 0.0),
            gain,
            capacity / cost if cost else None,  # as ``Evaluation.bcr``
            p99 if p99 is None or math.isfinite(p99) else None,
        )

    for i, pool in enumerate(fleet.pools):
        unit = hw.chips[pool.chip].purchase_unit_gpus
        step = math.lcm(pool.gpus_per_instance, unit) // pool.gpus_per_instance
        pools = list(fleet.pools)
        pools[i] = pool.model_copy(update={"instances": pool.instances + step})
        noun = "instance" if step == 1 else "instances"
        what = f"{pool.role} {noun} ({pool.chip} x{pool.gpus_per_instance})"
        out.append(marginal(fleet.model_copy(update={"pools": tuple(pools)}), f"+{step} {what}"))
        fewer = _fewer(fleet, i, step)
        if fewer is not None:
            out.append(marginal(fewer[0], fewer[1].format(step=step, what=what)))
    return [m for m in out if m is not None] + _links_up(space, fleet, marginal)


def _fewer(fleet: Fleet, i: int, step: int) -> tuple[Fleet, str] | None:
    """``fleet`` with one purchase step less of pool ``i``, or without the pool where that
    is its last step and the fleet can do without it (relay decode: the router then relays
    nothing); with the change in words (``{step}`` and ``{what}`` to fill). None: the
    pool is prefill or main decode at its last step (the fleet cannot go without it)."""
    pool = fleet.pools[i]
    if pool.instances > step:
        pools = list(fleet.pools)
        pools[i] = pool.model_copy(update={"instances": pool.instances - step})
        return fleet.model_copy(update={"pools": tuple(pools)}), "-{step} {what}"
    if pool.role != "relay_decode" or any(
        p.role == "relay_decode" for j, p in enumerate(fleet.pools) if j != i
    ):
        return None
    kept = tuple(
        p.model_copy(update={"hosts_relay_decode": False})
        for j, p in enumerate(fleet.pools)
        if j != i
    )
    routing = Routing(relay_above_mb=None, singular_max_output_tokens=0)
    dropped = fleet.model_copy(update={"pools": kept, "routing": routing})
    return (
        dropped,
        f"-{pool.instances * pool.gpus_per_instance} {pool.chip}: no relay decode (relay nothing)",
    )


def _links_up(
    space: Space, fleet: Fleet, marginal: Callable[[Fleet, str], Marginal | None]
) -> list[Marginal]:
    """Each link one tier up."""
    out = []
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


IDLE_SHARE = 0.10
"""A pool busy less than this at the SLA capacity gets a note on why it is that large
(``idle_pools``)."""


def idle_pools(space: Space, fleet: Fleet, e: Evaluation) -> list[str]:
    """Why each pool busy under ``IDLE_SHARE`` at the SLA capacity is as large as it is:
    the smallest instance its chip can hold the weights in, or the chip's purchase unit
    (when it is that small), else the latency limits; and the change that would shrink
    it (relay decode: on the prefill GPUs, or none: the runner-ups and the -1 rows)."""
    out = []
    hw, model = space.hw, space.model
    for p in e.pools:
        if p.utilization_at_capacity is None or p.utilization_at_capacity >= IDLE_SHARE:
            continue
        if p.gpus == 0:  # relay decode on the prefill GPUs: it costs nothing of its own
            continue
        options = [
            o for role, opts in space.options.items() if role == p.role for o in opts
            if (o.datacenter, o.chip) == (p.datacenter, p.chip) and o.host is None
        ]  # fmt: skip
        smallest = min((o.gpus for o in options), default=p.gpus_per_instance)
        unit = hw.chips[p.chip].purchase_unit_gpus
        least = math.lcm(smallest, unit) if smallest < unit else smallest
        busy = f"{p.role.replace('_', ' ')} on {p.gpus} {p.chip} in {p.datacenter} is {p.utilization_at_capacity:.0%} busy at the SLA capacity"
        if p.gpus <= least:
            if smallest >= unit:
                why = (
                    f"{smallest} GPUs is the smallest {p.chip} instance that holds "
                    f"{model.id}'s weights and a batch that meets the TPOT bound"
                )
            else:
                why = f"{unit} GPUs is the {p.chip}'s purchase unit"
        else:
            why = (
                f"the smallest would be {least} GPUs; its size is set by the latency limits "
                "at the demand, not by its load"
            )
        change = ""
        if p.role == "relay_decode":
            hostable = any(
                o.host is not None and o.datacenter == p.datacenter
                for o in space.options["relay_decode"]
            )
            change = (
                "; relay decode on the prefill GPUs, or none at all (cross-DC PD), would remove "
                "it: the runner-ups say whether either serves the demand"
                if hostable
                else "; only a fleet without relay decode (cross-DC PD) goes without it: the "
                "runner-ups say whether one serves the demand, the -1 row of --details "
                "marginals what dropping it costs"
            )
        elif p.role == "main_decode" or p.role == "prefill":
            change = "; a chip with a smaller instance would shrink it: see the runner-ups"
        out.append(f"{busy}: {why}{change}.")
    return out


EXPLAIN_STEPS = 12
"""Bisection steps per relaxed limit on the log of its factor (about 0.1% on 1..100); GPU
counts are bisected on the integers instead, to the exact count."""
MAX_RELAX = 100.0
"""The loosest relaxation tried: limits x 100 (demand / 100; utilization cap 0.99)."""
MAX_UTILIZATION = 0.99
DIGITS = 3
"""Significant figures of a relaxed value as printed (demand: one more)."""


@dataclass(frozen=True)
class Knob:
    """One limit of the scenario, or several moved together, that the explanation relaxes.

    ``at(f)`` gives the values at relaxation factor ``f >= 1``, already rounded to the
    printed grid in the direction that loosens, so the values solved are the values shown.
    """

    family: str
    keys: tuple[str, ...]
    """Where each value lives in the scenario file, e.g. ``datacenters.dc-a.max_gpus``."""
    unit: str
    now: tuple[float, ...]
    at: Callable[[float], tuple[float, ...]]
    apply: Callable[[Scenario, tuple[float, ...]], Scenario]
    integer: bool = False
    """One GPU count: bisected on the integers."""
    words: Callable[[tuple[float, ...]], str] | None = None
    """The values in words, where ``key value unit`` would not say it."""
    fallback: bool = False
    """Tried only where no limit of its unit helped alone (the datacenter limits
    together)."""

    def said(self, values: tuple[float, ...]) -> str:
        """``values`` against the scenario's: "sla.tpot_ms 62 ms (the scenario has 50 ms)"."""
        if self.words is not None:
            return self.words(values)
        moved = [
            (k, v, n) for k, v, n in zip(self.keys, values, self.now, strict=True) if v != n
        ] or list(zip(self.keys, values, self.now, strict=True))
        needed = " and ".join(f"{k} {_number(v, self.unit)}" for k, v, _ in moved)
        has = " and ".join(_number(n, self.unit) for _, _, n in moved)
        return f"{needed} (the scenario has {has})"


def _number(v: float, unit: str) -> str:
    if unit == "%":
        return f"{v:.1%}"
    if unit == "GPUs":
        return f"{v:,.0f} GPUs"
    return f"{v:.{DIGITS + 1}g} {unit}"


def _grid(v: float, up: bool, digits: int = DIGITS) -> float:
    """``v`` rounded to ``digits`` significant figures, up (``up``) or down."""
    if v <= 0 or not math.isfinite(v):
        return v
    q = 10.0 ** (math.floor(math.log10(v)) - digits + 1)
    n = math.ceil(v / q) if up else math.floor(v / q)
    r = float(f"{n * q:.{digits + 1}g}")
    if (up and r < v) or (not up and r > v):  # binary fractions: one more step
        r = float(f"{(n + 1 if up else n - 1) * q:.{digits + 1}g}")
    return r


def knobs(scenario: Scenario) -> list[Knob]:
    """The limits ``explain_infeasible`` relaxes, one at a time: the SLA's bounds, the
    demand, the utilization cap, each datacenter's GPU and power limits, the per-pool and
    per-instance GPU caps, those limits together, and each link's fastest tier."""
    sla, sea = scenario.sla, scenario.search

    def with_sla(**update: float) -> Scenario:
        return scenario.model_copy(update={"sla": sla.model_copy(update=update)})

    def with_search(**update: float) -> Scenario:
        return scenario.model_copy(update={"search": sea.model_copy(update=update)})

    p90, p99 = sla.ttft_p90_s, sla.ttft_p99_s
    out = [
        Knob(
            "TTFT P90",
            ("sla.ttft_p90_s", "sla.ttft_p99_s"),
            "s",
            (p90, p99),
            lambda f: (_grid(p90 * f, True), max(p99, _grid(p90 * f, True))),
            lambda s, v: with_sla(ttft_p90_s=v[0], ttft_p99_s=v[1]),
        ),
        Knob(
            "TTFT P99",
            ("sla.ttft_p99_s",),
            "s",
            (p99,),
            lambda f: (_grid(p99 * f, True),),
            lambda s, v: with_sla(ttft_p99_s=v[0]),
        ),
        Knob(
            "TTFT P90 and P99",
            ("sla.ttft_p90_s", "sla.ttft_p99_s"),
            "s",
            (p90, p99),
            lambda f: (_grid(p90 * f, True), _grid(p99 * f, True)),
            lambda s, v: with_sla(ttft_p90_s=v[0], ttft_p99_s=max(v)),
        ),
        Knob(
            "TPOT",
            ("sla.tpot_ms",),
            "ms",
            (sla.tpot_ms,),
            lambda f: (_grid(sla.tpot_ms * f, True),),
            lambda s, v: with_sla(tpot_ms=v[0]),
        ),
    ]
    rate = scenario.workload.arrival_rps or 0.0
    if rate > 0:
        out.append(
            Knob(
                "demand",
                ("workload.arrival_rps",),
                "req/s",
                (rate,),
                lambda f: (rate if f == 1 else _grid(rate / f, False, DIGITS + 1),),
                lambda s, v: s.model_copy(
                    update={"workload": s.workload.model_copy(update={"arrival_rps": v[0]})}
                ),
            )
        )
    cap = sea.max_utilization
    if cap < MAX_UTILIZATION:
        out.append(
            Knob(
                "max utilization",
                ("search.max_utilization",),
                "%",
                (cap,),
                lambda f: (
                    cap if f == 1 else min(math.ceil((1 - (1 - cap) / f) * 1000) / 1000, 0.99),
                ),
                lambda s, v: with_search(max_utilization=v[0]),
            )
        )
    limits: list[tuple[str, float, bool, Callable[[Scenario, float], Scenario]]] = []
    for dc_id, dc in scenario.datacenters.items():
        if dc.max_gpus is not None:
            limits.append(
                (f"datacenters.{dc_id}.max_gpus", dc.max_gpus, True, _dc(dc_id, "max_gpus"))
            )
        if dc.max_power_kw is not None:
            key = f"datacenters.{dc_id}.max_power_kw"
            limits.append((key, dc.max_power_kw, False, _dc(dc_id, "max_power_kw")))
    limits.append(
        (
            "search.max_gpus_per_pool",
            sea.max_gpus_per_pool,
            True,
            lambda s, v: s.model_copy(
                update={"search": s.search.model_copy(update={"max_gpus_per_pool": int(v)})}
            ),
        )
    )
    for key, now, integer, set_one in limits:
        out.append(
            Knob(
                key.removeprefix("datacenters.").replace(".", " ", 1)
                if key.startswith("datacenters.")
                else key.removeprefix("search."),
                (key,),
                "GPUs" if integer else "kW",
                (now,),
                _scaled((now,), (integer,)),
                _first(set_one),
                integer=integer,
            )
        )
    if len(limits) > 1:

        def all_of(s: Scenario, v: tuple[float, ...]) -> Scenario:
            for (_, _, _, set_one), x in zip(limits, v, strict=True):
                s = set_one(s, x)
            return s

        out.append(
            Knob(
                "datacenter limits together",
                tuple(k for k, *_ in limits),
                "",
                tuple(n for _, n, *_ in limits),
                _scaled(tuple(n for _, n, *_ in limits), tuple(i for *_, i, _ in limits)),
                all_of,
                words=lambda v: ", ".join(
                    f"{k} {_number(x, 'GPUs' if i else 'kW')} (has {_number(n, 'GPUs' if i else 'kW')})"
                    for (k, n, i, _), x in zip(limits, v, strict=True)
                ),
                fallback=True,
            )
        )
    if sea.gpus_per_instance is None:
        most = sea.max_gpus_per_instance
        out.append(
            Knob(
                "max_gpus_per_instance",
                ("search.max_gpus_per_instance",),
                "GPUs",
                (most,),
                _scaled((most,), (True,)),
                lambda s, v: with_search(max_gpus_per_instance=int(v[0])),
                integer=True,
            )
        )
    for i, link in enumerate(scenario.links):
        out.append(_link_knob(i, link))
    return out


def _scaled(now: tuple[float, ...], integer: tuple[bool, ...]) -> Callable[[float], tuple]:
    def at(f: float) -> tuple[float, ...]:
        if f == 1:
            return now
        return tuple(
            math.ceil(n * f - 1e-9) if i else _grid(n * f, True)
            for n, i in zip(now, integer, strict=True)
        )

    return at


def _first(
    set_one: Callable[[Scenario, float], Scenario],
) -> Callable[[Scenario, tuple[float, ...]], Scenario]:
    return lambda s, v: set_one(s, v[0])


def _dc(dc_id: str, key: str) -> Callable[[Scenario, float], Scenario]:
    def apply(s: Scenario, v: float) -> Scenario:
        dcs = dict(s.datacenters)
        dcs[dc_id] = dcs[dc_id].model_copy(update={key: int(v) if key == "max_gpus" else v})
        return s.model_copy(update={"datacenters": dcs})

    return apply


def _link_knob(i: int, link: Link) -> Knob:
    """A faster tier on link ``i`` than its fastest, priced pro rata per Gbit/s (for the
    check only: feasibility does not depend on the price)."""
    top = link.tiers[-1]
    name = "-".join(link.between)

    def apply(s: Scenario, v: tuple[float, ...]) -> Scenario:
        if v[0] <= top.gbps:
            return s
        tier = top.model_copy(
            update={"gbps": v[0], "usd_per_month": top.usd_per_month * v[0] / top.gbps}
        )
        links = list(s.links)
        links[i] = links[i].model_copy(update={"tiers": (*links[i].tiers, tier)})
        return s.model_copy(update={"links": tuple(links)})

    return Knob(
        f"link {name}",
        (f"links[{i}].tiers",),
        "Gbit/s",
        (top.gbps,),
        lambda f: (top.gbps if f == 1 else min(_grid(top.gbps * f, True), MAX_LINK_GBPS),),
        apply,
        words=lambda v: (
            f"a {v[0]:g} Gbit/s tier on the {name} link (its fastest is {top.gbps:g} Gbit/s)"
            if v[0] > top.gbps
            else f"the {name} link's fastest tier, {top.gbps:g} Gbit/s"
        ),
    )


def budget_needed(
    space: Space,
    solver: str,
    deadline: float,
    clock: Callable[[], float],
    rate: float = MIN_RATE_RPS,
) -> Relaxation:
    """A budget that buys no plan at ``rate`` (max capacity: a vanishing rate, any traffic;
    min cost and max BCR: the demand): the cheapest plan's cost there is the budget it
    takes (factor None where no budget buys one)."""
    budget = space.scenario.budget_usd_per_hour
    if budget is None:
        raise ValueError("budget_needed asks about a scenario without a budget")
    left = max(deadline - clock(), 1.0)
    from pddplan.plan import milp  # PuLP on first use (search.py says why)

    out = milp.min_cost(
        Requirements(space, rate),
        solver=solver,
        time_limit_s=left,
        node_limit=space.scenario.solver.node_limit,
        clock=clock,
    )
    what = "any traffic" if rate <= MIN_RATE_RPS else f"the demand ({rate:,.4g} req/s)"
    if out.choice is None or out.cost_per_hour is None:
        return Relaxation("budget", 1.0, None, f"no plan serves {what}, at any budget")
    needed = _grid(out.cost_per_hour, True, 6)
    return Relaxation(
        "budget",
        1.0,
        needed / budget,
        f"needs budget_usd_per_hour ${needed:,.2f} (${needed * units.HOURS_PER_MONTH:,.0f}"
        f"/month) to serve {what}; the scenario has ${budget:,.2f}",
        keys=("budget_usd_per_hour",),
        needed=(needed,),
        scenario_values=(budget,),
        unit="USD/hour",
        verified=True,
    )


class _Check:
    """One relaxed scenario: its space, whether a plan serves it, and its minimum-cost plan
    (``choice``; None: still infeasible), solved on first use where ``feasible`` is known
    without it."""

    def __init__(
        self,
        space: Space | None,
        solve: Callable[[], Choice | None],
        feasible: bool | None = None,
        fallback: Choice | None = None,
    ) -> None:
        self.space, self._solve, self._fallback = space, solve, fallback
        self.feasible = feasible if feasible is not None else self.choice is not None

    @cached_property
    def choice(self) -> Choice | None:
        return self._solve() or self._fallback


def explain_infeasible(
    problem: Problem,
    solver: str,
    deadline: float,
    clock: Callable[[], float],
) -> list[Relaxation]:
    """For each limit (``knobs``): relax it alone (up to ``MAX_RELAX``); if that makes the
    demand servable, bisect for the smallest relaxation that does, on the printed grid.
    Every value printed is one a minimum-cost solve found a plan at (``verified``). Limits
    left when the solve's time limit (the safety stop) runs out are reported as not
    tried."""

    scenario = problem.scenario
    checks: dict[tuple[str, tuple[float, ...]], _Check] = {}

    def check(knob: Knob, values: tuple[float, ...]) -> _Check:
        key = (knob.family, values)
        if key not in checks:
            checks[key] = _solve(problem, knob.apply(scenario, values), solver, deadline, clock)
        return checks[key]

    def feasible(knob: Knob, values: tuple[float, ...]) -> bool:
        return check(knob, values).feasible

    out: list[Relaxation] = []
    for knob in knobs(scenario):
        if knob.fallback and any(r.needed and r.unit in ("GPUs", "kW") for r in out):
            continue
        if clock() > deadline:
            out.append(_row(knob, None, "not tried: stopped at the time limit"))
            continue
        try:
            out.append(_relax(knob, check, feasible, scenario))
        except TimeLimitReached:
            out.append(_row(knob, None, "not tried: stopped at the time limit"))
    return out


def _relax(
    knob: Knob,
    check: Callable[[Knob, tuple[float, ...]], _Check],
    feasible: Callable[[Knob, tuple[float, ...]], bool],
    scenario: Scenario,
) -> Relaxation:
    """``knob``'s smallest relaxation that makes the demand servable (``explain_infeasible``)."""
    far = knob.at(MAX_RELAX)
    if far == knob.now or not feasible(knob, far):
        return _row(knob, None, f"relaxing it alone (x {MAX_RELAX:g}) does not help")
    if knob.integer:
        bad, good = int(knob.now[0]), int(far[0])
        while good - bad > 1:
            count = (good + bad) // 2
            bad, good = (bad, count) if feasible(knob, (count,)) else (count, good)
        values: tuple[float, ...] = (float(good),)
    else:
        fgood, fbad = MAX_RELAX, 1.0
        for _ in range(EXPLAIN_STEPS):
            mid = math.sqrt(fgood * fbad)
            fgood, fbad = (mid, fbad) if feasible(knob, knob.at(mid)) else (fgood, mid)
        values = knob.at(fgood)
    final = check(knob, values)  # solved already: the value printed is the one solved
    verified = final.feasible
    if knob.family == "demand":
        text = f"can serve at most {knob.said(values)}"
        if scenario.headroom:
            text += f", planned with +{scenario.headroom:.0%} headroom"
        if final.space is not None and final.choice is not None:
            text += f"; there {_binding(final.space, final.choice)}"
    else:
        text = f"needs {knob.said(values)}"
        if final.space is not None and final.choice is not None and knob.unit == "GPUs":
            text += _units_named(final.space, final.choice, knob)
    if not verified:
        text += " (not confirmed: the search stopped at a work budget or the time limit)"
    return _row(knob, values, text, verified)


def _row(
    knob: Knob, values: tuple[float, ...] | None, text: str, verified: bool = False
) -> Relaxation:
    factor = None
    if values is not None:
        ratios = [
            (v / n if knob.family != "demand" else n / v) if n and v else math.inf
            for v, n in zip(values, knob.now, strict=True)
            if v != n
        ]
        factor = max(ratios, default=1.0)
        if knob.unit == "%":  # the cap's slack, as the bisection's factor
            factor = (1 - knob.now[0]) / max(1 - values[0], 1e-12)
    return Relaxation(
        knob.family,
        1.0,
        factor,
        text,
        keys=knob.keys,
        needed=values or (),
        scenario_values=knob.now,
        unit=knob.unit,
        verified=verified,
    )


def _solve(
    problem: Problem,
    trial: Scenario,
    solver: str,
    deadline: float,
    clock: Callable[[], float],
) -> _Check:
    """``trial`` at its planned demand: whether a plan serves it, and its minimum-cost plan (a
    relaxation under which no option exists, or that ends without a plan for lack of time,
    is infeasible). The MILP's relaxation without the datacenter limits
    (``relaxed_optimum``) decides most checks alone: where it has no plan, neither has the
    MILP; where its plan is exact, that plan serves (it is a minimum-cost one), and the
    MILP runs only where the text names the plan (``_relax``: its own choice among equal
    costs, the one ``solve`` of the relaxed scenario would print)."""
    try:
        space = Space(problem.with_scenario(trial))
    except InputError:
        return _Check(None, lambda: None, feasible=False)
    rate = (trial.workload.arrival_rps or 0.0) * (1 + trial.headroom)
    req = Requirements(space, rate)

    def plan() -> Choice | None:
        from pddplan.plan import milp  # PuLP on first use (search.py says why)

        left = max(deadline - clock(), 1.0)
        out = milp.min_cost(
            req, solver=solver, time_limit_s=left, node_limit=trial.solver.node_limit, clock=clock
        )
        return out.choice

    relaxed = relaxed_optimum(req)
    if math.isinf(relaxed.cost):
        return _Check(space, lambda: None, feasible=False)
    if relaxed.exact:
        return _Check(space, plan, feasible=True, fallback=relaxed.choices[0])
    return _Check(space, plan)


def _gpus_by_dc(space: Space, choice: Choice) -> dict[str, list[tuple[PoolOption, int]]]:
    out: dict[str, list[tuple[PoolOption, int]]] = {}
    for role, o in choice.options.items():
        n = choice.instances[role]
        if o is not None and n > 0 and o.bought_gpus:
            out.setdefault(o.datacenter, []).append((o, n))
    return out


def _units_named(space: Space, choice: Choice, knob: Knob) -> str:
    """The plan the relaxed GPU limit buys, naming purchase units larger than an instance
    (where the unit, not the weights, sets the count)."""
    dc_id = knob.keys[0].split(".")[1] if knob.keys[0].startswith("datacenters.") else None
    pools = [
        (o, n)
        for dc, pools in _gpus_by_dc(space, choice).items()
        for o, n in pools
        if dc_id is None or dc == dc_id
    ]
    if not pools:
        return ""
    parts = []
    for o, n in pools:
        unit = space.hw.chips[o.chip].purchase_unit_gpus
        part = f"{o.role} {n} x {o.gpus} {o.chip}"
        if unit > o.gpus:
            part += f", bought in {unit}-GPU units"
        parts.append(part)
    return f"; the plan then: {'; '.join(parts)}"


def _binding(space: Space, choice: Choice) -> str:
    """What stops the plan at the largest servable demand from serving more: a datacenter
    limit or per-pool cap within one purchase step, the link's fastest tier, or, with
    none of those, the latency bounds."""
    s, out = space.scenario, []
    by_dc = _gpus_by_dc(space, choice)
    for dc_id, dc in s.datacenters.items():
        pools = by_dc.get(dc_id, [])
        used = sum(o.bought_gpus * n for o, n in pools)
        step = min((o.gpus * o.unit_step for o, _ in pools), default=0)
        if dc.max_gpus is not None and pools and used + step > dc.max_gpus:
            out.append(
                f"datacenters.{dc_id}.max_gpus binds ({used:,} of {dc.max_gpus:,} GPUs used)"
            )
        if dc.max_power_kw is not None and pools:
            kw = sum(
                o.bought_gpus * n * space.hw.chips[o.chip].tdp_w / 1000 * dc.pue for o, n in pools
            )
            more = min(
                o.gpus * o.unit_step * space.hw.chips[o.chip].tdp_w / 1000 * dc.pue
                for o, _ in pools
            )
            if kw + more > dc.max_power_kw:
                out.append(
                    f"datacenters.{dc_id}.max_power_kw binds ({kw:,.0f} of {dc.max_power_kw:,.0f} kW)"
                )
    for role, o in choice.options.items():
        n = choice.instances[role]
        if o is not None and o.bought_gpus and n + o.unit_step > o.max_instances:
            out.append(
                f"the {role} pool is at its cap ({n * o.gpus:,} GPUs, search.max_gpus_per_pool or max_gpus)"
            )
    st = choice.state
    if st.gbps is not None:
        link = st.wan
        if st.gbps >= link.tiers[-1].gbps:
            out.append(
                f"the {'-'.join(link.between)} link is at its fastest tier ({st.gbps:g} Gbit/s)"
            )
    if not out:
        return "no GPU, power or link limit is full: the latency bounds stop it"
    return "; ".join(dict.fromkeys(out))


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
    buy = procurement(space, fleet, e)
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
        f"{buy}: {'$' + format(month, ',.0f') if month else 'no price'}/month. It serves {capacity:,.3g} req/s, "
        f"{_times(ratio)} the {demand:g} req/s demand{headroom}"
        + (f"; {limit} stops it growing" if limit else "")
        + "."
    )
    if oversized:
        text += f" More than {OVERSIZED:g}x the demand: {reason}; {advice}."
    return Verdict(text, buy, month, capacity, demand, planned, limit, oversized, reason, advice)


def procurement(space: Space, fleet: Fleet, e: Evaluation) -> str:
    """What the plan has each datacenter acquire, in the words of how each chip is priced:
    ``Rent 32 h100-sxm in cluster-a; buy 8 h200-sxm in cluster-b; use the 16 owned
    a100-80g-sxm in dc-x``; and the link tiers to lease."""
    gpus: dict[tuple[str, str], int] = {}
    for p in fleet.pools:
        key = (p.datacenter, p.chip)
        gpus[key] = gpus.get(key, 0) + p.gpus_per_instance * p.instances
    verbs: dict[str, list[str]] = {}  # verb -> what, in fleet order
    for (dc, chip), n in gpus.items():
        owned = min(space.owned.get((dc, chip), (0, 0.0))[0], n)
        if owned:
            verbs.setdefault("use", []).append(f"the {owned} owned {chip} in {dc}")
        if n > owned:
            verb = "buy" if e.price_basis.get(chip) == "buy" else "rent"
            more = " more" if owned else ""
            verbs.setdefault(verb, []).append(f"{n - owned}{more} {chip} in {dc}")
    parts = [f"{verb} {', '.join(what)}" for verb, what in verbs.items()]
    parts += [f"lease a {x.gbps:g} Gbit/s {x.between[0]}-{x.between[1]} link" for x in fleet.links]
    text = "; ".join(parts)
    return text[:1].upper() + text[1:]


def _times(ratio: float) -> str:
    if not math.isfinite(ratio):
        return "any multiple of"
    if ratio < 10:  # 1.02x, not 1x: a plan 2% above the demand is not at it
        return f"{ratio:.2f}x" if ratio < 1.1 else f"{ratio:.2g}x"
    return f"{ratio:,.0f}x"


def _why_oversized(space: Space, plan: PlanResult, planned: float) -> tuple[str, str]:
    """Why a plan serves far more than the planned load, and how to size for it."""
    objective = plan.stats.objective
    if objective == MAX_BCR:
        return (
            "max BCR sizes for the best SLA capacity per dollar, not for the demand",
            "--objective min-cost buys the cheapest fleet for the demand",
        )
    if objective == MAX_CAPACITY:
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
