"""Plans over time: what to own, reserve and rent, tranche by tranche and hour group by hour
group, so that every period of a scenario's ``horizon:`` is served within the SLA at least
total cost (docs/milp.md#plans-over-time-the-horizon-milp).

Two steps:

1. **Each period's deployments** (``menus``): for every family (an architecture and a chip per
   role, ``pddplan.plan.alternatives``), its cheapest deployment at the period's demand, as
   ``solve`` plans it (the relaxation, check and cut, the tie rule) on the scenario's space
   restricted to the family. A family's cheapest deployment at a rate ``r`` with SLA
   capacity ``C`` is its cheapest at every rate in ``[r, C]`` (a deployment that serves a
   higher rate serves ``r``, and costs are monotone), so each family is planned only at the
   rates where its cheapest deployment changes, from the lowest period rate up: a few
   solves per family, not one per period.
2. **The schedule** (``pddplan.plan.horizon_milp``): one MILP picks a deployment per period
   and the GPUs of each (datacenter, chip) to own (bought per tranche, kept), reserve (per
   term) and rent (per period) so that each period's pick runs, and leases the link per
   tranche, at least total cost. The same MILP restricted gives the two simple policies the
   plan is set against: rent everything, and own for the peak.

The plan is optimal over those menus: a period runs one family's cheapest deployment at its
rate, priced at the scenario's (rental) prices. A deployment that is dearer at rental prices
but cheaper with owned GPUs (more of an owned chip, less of a rented one, inside one family)
is not in a menu; nor is a family's plan at a rate where the relaxation does not settle it
(``menus``, said in a note). Periods whose workload differs (``horizon.overlays``) get their
own space.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pddplan.errors import InputError
from pddplan.evaluation.evaluator import evaluate
from pddplan.evaluation.results import Evaluation
from pddplan.horizon.inputs import HorizonInputs
from pddplan.horizon.periods import Period, period_scenario
from pddplan.model.pricing import gpu_price
from pddplan.model.problem import Problem
from pddplan.plan import horizon_milp as hm
from pddplan.plan.alternatives import Family, families
from pddplan.plan.search import _Search
from pddplan.plan.space import Choice, NoOptionsError, Space
from pddplan.spec.choices import MIN_COST
from pddplan.spec.fleet import Fleet
from pddplan.spec.status import MilpStatus, PlanStatus
from pddplan.units import HOURS_PER_MONTH
from pddplan.work import tally, wall_clock

Chip = hm.Chip


@dataclass(frozen=True)
class Deployment:
    """One family's cheapest deployment at a rate: what a period may run."""

    family: Family
    choice: Choice
    fleet: Fleet
    rate_rps: float
    """The rate it was planned at (the lowest of the periods it is for)."""
    capacity_rps: float
    """Its SLA capacity: it is the family's cheapest for every rate up to this."""
    gpus: dict[Chip, int]
    link: tuple[str, float] | None
    """(link id, Gbit/s) it needs."""
    other_usd_per_hour: float
    """The decode-side cache's tiers, per hour."""


@dataclass(frozen=True)
class PeriodPlan:
    period: Period
    deployment: Deployment | None
    """None: a period with no demand."""
    rented: dict[Chip, int]
    """GPUs rented on demand in its hours."""
    evaluation: Evaluation | None = None
    """The evaluator at the period's demand."""
    sunk: dict[Chip, int] = field(default_factory=dict)
    """Sunk GPUs (the scenario's inventory) its deployment runs (``horizon_milp.Held``)."""
    owned: dict[Chip, int] = field(default_factory=dict)
    """Owned GPUs held: bought to serve from its tranche or an earlier one (idle in its
    hours where its deployment needs fewer)."""
    reserved: dict[Chip, int] = field(default_factory=dict)
    """Reserved GPUs in force in its tranche."""
    usd_per_hour: float = 0.0
    """What an hour of it costs: owned and reserved GPUs held, the sunk GPUs it runs, its
    rentals, its deployment's other costs and the link's lease per hour; times its hours a
    month, summed over its tranche's periods, the tranche's monthly cost."""


@dataclass(frozen=True)
class Purchase:
    datacenter: str
    chip: str
    gpus: int
    tranche: int
    serves_from_month: int
    order_by_month: int
    """Ordered by this month (its lead time before; 1 or less: at once)."""
    usd: float
    """What it costs over the horizon: its hourly cost from its first month to the end."""


@dataclass(frozen=True)
class Reservation:
    datacenter: str
    chip: str
    gpus: int
    term_months: int
    first_month: int
    usd_per_gpu_hour: float
    usd: float
    """The whole term, paid whether used or not (past the horizon's end too)."""


@dataclass(frozen=True)
class LinkLease:
    link: str
    tranche: int
    gbps: float
    usd_per_month: float


@dataclass(frozen=True)
class PolicyCost:
    """A simple policy's cost over the horizon (None: it is infeasible, ``reason`` says why)."""

    name: str
    total_usd: float | None
    reason: str | None = None


@dataclass(frozen=True)
class HorizonResult:
    scenario: str
    model: str
    status: PlanStatus
    total_usd: float | None
    bound_usd: float | None
    gap: float | None
    months: int
    periods: list[PeriodPlan] = field(default_factory=list)
    purchases: list[Purchase] = field(default_factory=list)
    reservations: list[Reservation] = field(default_factory=list)
    leases: list[LinkLease] = field(default_factory=list)
    monthly_usd: list[float] = field(default_factory=list)
    """The cost of each month, month 1 first."""
    policies: list[PolicyCost] = field(default_factory=list)
    deployments: int = 0
    """Deployments in the periods' menus (distinct)."""
    family_plans: int = 0
    """Family solves the menus took."""
    variables: int = 0
    constraints: int = 0
    notes: list[str] = field(default_factory=list)


RENT_ALL = "rent everything"
OWN_FOR_PEAK = "own for the peak"


def link_id(between: tuple[str, str]) -> str:
    """A link's name in a plan over time: its two datacenters, sorted, joined by ``-``."""
    return "-".join(sorted(between))


def _deployment(
    space: Space, family: Family, choice: Choice, rate: float, cap: float
) -> Deployment:
    problem = space.problem
    gpus: dict[Chip, int] = {}
    other = 0.0
    for role, o in choice.options.items():
        n = choice.instances[role]
        if o is None or n == 0 or o.host is not None:
            continue
        key = (o.datacenter, o.chip)
        gpus[key] = gpus.get(key, 0) + n * o.gpus
        base = gpu_price(problem, o.chip, o.datacenter).full
        other += n * o.gpus * (o.usd_per_gpu_hour - base)
    st = choice.state
    link = None
    if st.gbps is not None and st.link is not None:
        link = (link_id(st.link.between), st.gbps)
    fleet = space.fleet(choice, family.architecture)
    return Deployment(family, choice, fleet, rate, cap, gpus, link, other)


def menus(
    problem: Problem,
    periods: list[Period],
    solver: str,
    *,
    clock: Callable[[], float] = wall_clock,
    limit_s: float = math.inf,
) -> tuple[list[list[Deployment]], int, list[str]]:
    """Per period, each family's cheapest deployment at its demand (module docstring), how
    many family solves that took, and the families left out above a rate. Periods without
    demand get none. A family is planned by the relaxation, its plans confirmed by the
    evaluator (check and cut): where that leaves no plan at a rate (a datacenter limit
    binds, or the evaluator rejects the relaxation's plans) the MILP is not run, which
    bounds the work (a MILP there took 10-15 s, and a family may need several), and the
    family is left out of the menus from that rate up, said in a note."""
    out: list[list[Deployment]] = [[] for _ in periods]
    left_out: list[str] = []
    solves = 0
    by_space: dict[tuple[str, ...], list[int]] = {}
    for i, p in enumerate(periods):
        if p.workload is not None:
            by_space.setdefault(p.overlays, []).append(i)
    start = clock()
    for overlays, members in by_space.items():
        sp_problem = problem
        if overlays:
            sp_problem = problem.with_scenario(
                period_scenario(problem.scenario, periods[members[0]])
            )
        try:
            space = Space(sp_problem)
        except NoOptionsError as e:
            raise InputError(problem.located(("horizon",), str(e))) from None
        rates = sorted({periods[i].rps for i in members})
        for family in families(space):
            try:
                sub = family.space(space)
            except NoOptionsError:
                continue
            search = _Search(sub, solver, start, limit_s, None, clock, None, MIN_COST)
            search.milp = False  # bounded work: the relaxation's plans, confirmed (docstring)
            k = 0
            while k < len(rates):
                rate = rates[k]
                choice, _, cap = search.at(rate)
                solves += 1
                tally("horizon_family_plans")
                if choice is None:
                    if math.isfinite(search.lower_bound):  # a plan exists: the MILP's
                        left_out.append(
                            f"{family.label} from {rate:.3g} req/s: not in the periods' "
                            "menus (its cheapest plan there needs the MILP; `pddplan solve` "
                            "at that rate plans it)"
                        )
                    break  # no higher rate has a plan either
                d = _deployment(sub, family, choice, rate, cap)
                while k < len(rates) and rates[k] <= cap:
                    for i in members:
                        if periods[i].rps == rates[k]:
                            out[i].append(d)
                    k += 1
    return out, solves, left_out


def _model(
    inputs: HorizonInputs, problem: Problem, menu: list[list[Deployment]]
) -> hm.HorizonModel:
    s = problem.scenario
    tranches = inputs.tranches
    supply = {}
    for o in inputs.options:
        unit = problem.hardware.chips[o.chip].purchase_unit_gpus
        first = o.owned.first_tranche(tranches) if o.owned is not None else None
        own = o.owned.usd_per_gpu_hour if first is not None and o.owned is not None else None
        supply[(o.datacenter, o.chip)] = hm.Supply(
            sunk_gpus=o.sunk_gpus,
            sunk_usd_per_gpu_hour=o.sunk_usd_per_gpu_hour,
            max_gpus=o.max_gpus,
            unit_gpus=unit,
            own_usd_per_gpu_hour=own,
            own_from_tranche=first.index if first is not None else 0,
            terms=tuple(hm.Term(r.term_months, r.usd_per_gpu_hour, r.min_gpus) for r in o.reserved),
            rent_usd_per_gpu_hour=o.on_demand.usd_per_gpu_hour if o.on_demand else None,
        )
    periods = [
        hm.PeriodModel(
            p.name,
            p.tranche.index,
            p.weight_hours,
            [hm.Entry(d.gpus, d.link, d.other_usd_per_hour) for d in menu[i]],
        )
        for i, p in enumerate(inputs.periods)
    ]
    return hm.HorizonModel(
        tranche_months=[t.months for t in tranches],
        periods=periods,
        supply=supply,
        dc_max_gpus={d: dc.max_gpus for d, dc in s.datacenters.items() if dc.max_gpus is not None},
        link_tiers={
            link_id(link.between): {t.gbps: t.usd_per_month for t in link.tiers} for link in s.links
        },
    )


def _status(status: MilpStatus) -> PlanStatus:
    if status.on_nodes:
        return PlanStatus.WORK_LIMIT
    if status.on_time:
        return PlanStatus.TIME_LIMIT
    return PlanStatus(status)


def solve_horizon(
    problem: Problem,
    inputs: HorizonInputs,
    *,
    solver: str | None = None,
    time_limit_s: float | None = None,
    clock: Callable[[], float] = wall_clock,
) -> HorizonResult:
    """The least-cost schedule over ``problem``'s horizon (module docstring), set against
    renting everything and owning for the peak."""
    s = problem.scenario
    solver = solver or s.solver.name
    limit = time_limit_s if time_limit_s is not None else s.solver.time_limit_s
    start = clock()
    periods = list(inputs.periods)
    menu, solves, left_out = menus(problem, periods, solver, clock=clock, limit_s=limit)
    head = HorizonResult(
        s.name, s.model, PlanStatus.INFEASIBLE, None, None, None, inputs.horizon.months,
        family_plans=solves, notes=left_out,
    )  # fmt: skip
    missing = [p for p, m in zip(periods, menu, strict=True) if p.workload is not None and not m]
    if missing:
        worst = max(missing, key=lambda p: p.rps)
        return replace(
            head,
            notes=[
                *left_out,
                f"period {worst.name} (month {worst.tranche.last_month}, {worst.rps:.3g} req/s): "
                "no deployment serves it within the SLA and the datacenters' limits; "
                "`pddplan solve` on the scenario without its horizon at that rate explains why",
            ],
        )
    model = _model(inputs, problem, menu)
    left = max(1.0, limit - (clock() - start))
    node_limit = s.solver.node_limit
    got = hm.schedule(model, solver=solver, node_limit=node_limit, time_limit_s=left)
    head = replace(
        head,
        deployments=len({id(d) for m in menu for d in m}),
        variables=got.variables,
        constraints=got.constraints,
    )
    if got.total_usd is None:
        return replace(
            head,
            status=_status(got.status),
            bound_usd=got.bound_usd,
            notes=[
                *left_out,
                "no schedule serves every period within the chips' inventory and the "
                "datacenters' max_gpus (horizon.supply, datacenters.*.max_gpus)",
            ],
        )
    policies = []
    for name, policy in ((RENT_ALL, hm.RENT_ALL), (OWN_FOR_PEAK, hm.OWN_FOR_PEAK)):
        alt = hm.schedule(model, policy, solver=solver, node_limit=node_limit, time_limit_s=left)
        reason = None
        if alt.total_usd is None:
            reason = (
                "infeasible: the chips' inventory (horizon.supply) or lead times leave a "
                "period without the GPUs it needs"
            )
        policies.append(PolicyCost(name, alt.total_usd, reason))
    return _result(problem, inputs, model, menu, got, policies, head)


def _result(
    problem: Problem,
    inputs: HorizonInputs,
    model: hm.HorizonModel,
    menu: list[list[Deployment]],
    got: hm.Schedule,
    policies: list[PolicyCost],
    head: HorizonResult,
) -> HorizonResult:
    tranches = inputs.tranches
    opts = {(o.datacenter, o.chip): o for o in inputs.options}
    plans = []
    held = hm.holdings(model, got)
    for i, p in enumerate(inputs.periods):
        k = got.picks[i]
        d = menu[i][k] if k >= 0 else None
        rented = {c: n for (c, j), n in got.rent.items() if j == i}
        ev = evaluate(problem, d.fleet, demand_rps=p.rps) if d is not None else None
        h = held[i]
        plans.append(
            PeriodPlan(p, d, rented, ev, dict(h.sunk), dict(h.owned), dict(h.reserved),
                       h.usd_per_hour)
        )  # fmt: skip
    purchases = []
    for (c, t), gpus in sorted(got.own.items()):
        owned = opts[c].owned
        assert owned is not None
        tr = tranches[t]
        hours = model.months_from(t) * HOURS_PER_MONTH
        purchases.append(
            Purchase(c[0], c[1], gpus, t, tr.first_month, owned.order_month(tr),
                     gpus * owned.usd_per_gpu_hour * hours)
        )  # fmt: skip
    reservations = []
    for (c, t, j), gpus in sorted(got.reserve.items()):
        term = opts[c].reserved[j]
        reservations.append(
            Reservation(c[0], c[1], gpus, term.term_months, tranches[t].first_month,
                        term.usd_per_gpu_hour,
                        gpus * term.usd_per_gpu_hour * term.term_months * HOURS_PER_MONTH)
        )  # fmt: skip
    leases = [
        LinkLease(link, t, g, model.link_tiers[link][g])
        for (link, t), g in sorted(got.lease.items())
    ]
    return replace(
        head,
        status=_status(got.status),
        total_usd=got.total_usd,
        bound_usd=got.bound_usd,
        gap=got.gap,
        periods=plans,
        purchases=purchases,
        reservations=reservations,
        leases=leases,
        monthly_usd=_monthly(model, got, menu, inputs),
        policies=policies,
    )


def _monthly(
    m: hm.HorizonModel, got: hm.Schedule, menu: list[list[Deployment]], inputs: HorizonInputs
) -> list[float]:
    """Each month's cost: owned GPUs held, reservations in force, each period's rentals, sunk
    GPUs in use and other costs for its hours that month, the link's lease."""
    out = []
    for t in inputs.tranches:
        usd: float = 0.0
        for (c, tt), gpus in got.own.items():
            own = m.supply[c].own_usd_per_gpu_hour
            if tt <= t.index and own is not None:
                usd += gpus * own * HOURS_PER_MONTH
        for (c, tt, j), gpus in got.reserve.items():
            term = m.supply[c].terms[j]
            if m.in_force(tt, term, t.index):
                usd += gpus * term.usd_per_gpu_hour * HOURS_PER_MONTH
        for i, p in enumerate(inputs.periods):
            if p.tranche.index != t.index:
                continue
            for (c, j), n in got.rent.items():
                rate = m.supply[c].rent_usd_per_gpu_hour
                if j == i and rate is not None:
                    usd += n * rate * p.hours_per_month
            for (c, j), running in got.sunk.items():
                if j == i:
                    usd += running * m.supply[c].sunk_usd_per_gpu_hour * p.hours_per_month
            k = got.picks[i]
            if k >= 0:
                usd += menu[i][k].other_usd_per_hour * p.hours_per_month
        for (link, tt), g in got.lease.items():
            if tt == t.index:
                usd += m.link_tiers[link][g]
        out += [usd] * t.months
    return out


__all__ = [
    "OWN_FOR_PEAK",
    "RENT_ALL",
    "Deployment",
    "HorizonResult",
    "LinkLease",
    "PeriodPlan",
    "PolicyCost",
    "Purchase",
    "Reservation",
    "link_id",
    "menus",
    "solve_horizon",
]
