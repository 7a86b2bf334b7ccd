"""The horizon MILP: which GPUs to own, reserve and rent, tranche by tranche and period by
period, so that every period runs one of its deployments, at least total cost over the
horizon (docs/milp.md#plans-over-time-the-horizon-milp).

Its inputs are plain data (``HorizonModel``): per period the deployments it may run
(``Entry``: GPUs per datacenter and chip, a link tier, the rest of its hourly cost), per
(datacenter, chip) how GPUs can be had (``Supply``), the tranches, the links' tiers. The
planner (``pddplan.plan.horizon``) builds them from a scenario; tests build them by hand.

Variables, with the names the model gives them:

- ``pick_P_K`` (binary): period ``P`` runs its deployment ``K``; one per period;
- ``own_C_T`` (integer, purchase units): GPUs of ``C`` = (datacenter, chip) bought to serve
  from tranche ``T`` on (no earlier than the lead time allows), kept to the horizon's end;
- ``reserve_C_T_J`` (integer, GPUs): GPUs of ``C`` reserved from tranche ``T`` for term
  ``J`` (``reserve_on_C_T_J``, binary, holds the term's minimum);
- ``rent_C_P`` (integer, GPUs): GPUs of ``C`` rented on demand in period ``P``;
- ``sunk_C_P`` (continuous): the GPUs of ``C`` already owned (the scenario's inventory)
  that period ``P`` runs;
- ``lease_L_T_G`` (binary): link ``L`` leased at tier ``G`` through tranche ``T``.

Rows: ``one_pick_P``; ``gpus_C_P`` (the picked deployment's GPUs of ``C`` are at most those
held: sunk in use + owned + reserved in force + rented); ``supply_C_P`` (held at most the
chip's inventory in the datacenter); ``dc_D_P`` (held at most the datacenter's
``max_gpus``); ``link_L_P`` (the leased tier carries the picked deployment's);
``one_lease_L_T``; ``reserve_min_C_T_J`` / ``reserve_on_C_T_J``.

Objective, USD over the horizon: owned GPUs at their hourly cost (amortized capex, hosting,
power) from their first tranche to the horizon's end; reserved GPUs for their whole term
(a commitment: the months past the horizon are paid too); rented GPUs and the sunk GPUs in
use for the period's hours; each tranche's link lease for its months; each picked
deployment's other costs (the decode-side cache's tiers) for the period's hours.

``holdings`` reads a schedule back period by period: the sunk GPUs run, the owned GPUs held,
the reserved GPUs in force, the rented GPUs, and what an hour of the period costs (``Held``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulp

from pddplan.plan.solver import NODE_LIMIT, solve
from pddplan.spec.limits import MAX_GPUS
from pddplan.spec.status import MilpStatus
from pddplan.units import HOURS_PER_MONTH

Chip = tuple[str, str]
"""(datacenter, chip)."""


@dataclass(frozen=True)
class Entry:
    """One deployment a period may run."""

    gpus: Mapping[Chip, int]
    """GPUs it runs, per (datacenter, chip)."""
    link: tuple[str, float] | None = None
    """(link id, Gbit/s) of the tier it needs; None without a WAN link."""
    other_usd_per_hour: float = 0.0
    """Its hourly cost besides GPUs and link (the decode-side cache's DRAM and SSD)."""


@dataclass(frozen=True)
class PeriodModel:
    name: str
    tranche: int
    """Index into ``HorizonModel.tranches``."""
    hours: float
    """Hours it stands for over the horizon (its hours a month x its tranche's months)."""
    entries: Sequence[Entry]
    """The deployments it may run; empty for a period with no demand."""


@dataclass(frozen=True)
class Term:
    months: int
    usd_per_gpu_hour: float
    min_gpus: int = 0


@dataclass(frozen=True)
class Supply:
    """How GPUs of one (datacenter, chip) can be had."""

    sunk_gpus: int = 0
    sunk_usd_per_gpu_hour: float = 0.0
    max_gpus: int | None = None
    """The most held at once (sunk, owned, reserved and rented together); None: no cap."""
    unit_gpus: int = 1
    """GPUs are bought in multiples of this."""
    own_usd_per_gpu_hour: float | None = None
    """None: cannot be bought."""
    own_from_tranche: int = 0
    """The first tranche a purchase can serve (the lead time)."""
    terms: Sequence[Term] = ()
    rent_usd_per_gpu_hour: float | None = None
    """None: cannot be rented."""


@dataclass(frozen=True)
class HorizonModel:
    tranche_months: Sequence[int]
    """Each tranche's months, in order."""
    periods: Sequence[PeriodModel]
    supply: Mapping[Chip, Supply]
    dc_max_gpus: Mapping[str, int] = field(default_factory=dict)
    link_tiers: Mapping[str, Mapping[float, float]] = field(default_factory=dict)
    """Per link id, its tiers: Gbit/s -> USD per month."""

    @property
    def horizon_months(self) -> int:
        return sum(self.tranche_months)

    def months_from(self, tranche: int) -> int:
        """Months from the start of ``tranche`` to the horizon's end."""
        return sum(self.tranche_months[tranche:])

    def in_force(self, start: int, term: Term, tranche: int) -> bool:
        """Whether a reservation of ``term`` from tranche ``start`` is in force in
        ``tranche`` (it starts at ``start``'s first month and lasts ``term.months``)."""
        if tranche < start:
            return False
        return sum(self.tranche_months[start:tranche]) < term.months


@dataclass(frozen=True)
class Policy:
    """A restriction of the MILP: a simple purchasing policy to set the plan against."""

    own: bool = True
    """Whether GPUs may be bought."""
    own_once: bool = False
    """Bought only at each chip's first tranche (the lead time's), once: "own for the peak"."""
    reserve: bool = True
    rent_after_lead_time: bool = True
    """Whether a chip that can be bought may be rented once purchases can serve."""


OPTIMAL = Policy()
RENT_ALL = Policy(own=False, reserve=False)
OWN_FOR_PEAK = Policy(own_once=True, reserve=False, rent_after_lead_time=False)


@dataclass(frozen=True)
class Schedule:
    """The MILP's answer."""

    status: MilpStatus
    total_usd: float | None
    bound_usd: float | None
    gap: float | None
    picks: tuple[int, ...] = ()
    """Per period, the index of the entry it runs (-1: none needed)."""
    own: Mapping[tuple[Chip, int], int] = field(default_factory=dict)
    """GPUs bought per (chip, tranche they serve from)."""
    reserve: Mapping[tuple[Chip, int, int], int] = field(default_factory=dict)
    """GPUs reserved per (chip, first tranche, term index)."""
    rent: Mapping[tuple[Chip, int], int] = field(default_factory=dict)
    """GPUs rented per (chip, period index)."""
    sunk: Mapping[tuple[Chip, int], float] = field(default_factory=dict)
    """Sunk GPUs run per (chip, period index)."""
    lease: Mapping[tuple[str, int], float] = field(default_factory=dict)
    """Gbit/s leased per (link, tranche)."""
    variables: int = 0
    constraints: int = 0
    nodes: int | None = None


@dataclass(frozen=True)
class Held:
    """What one period holds, per (datacenter, chip), and what an hour of it costs: read
    from a ``Schedule`` by ``holdings``."""

    sunk: Mapping[Chip, int]
    """Sunk GPUs (the scenario's inventory) its deployment runs: those it needs beyond the
    owned, reserved and rented ones (those are paid for whether run or not), at most the
    inventory; ``sunk_C_P`` at the optimum wherever a sunk GPU costs anything to run."""
    owned: Mapping[Chip, int]
    """Owned GPUs held: bought to serve from its tranche or an earlier one."""
    reserved: Mapping[Chip, int]
    """Reserved GPUs in force in its tranche."""
    rented: Mapping[Chip, int]
    """GPUs rented on demand for its hours."""
    usd_per_hour: float
    """What an hour of it costs: owned GPUs held and reservations in force (paid every hour
    of the tranche), the sunk GPUs it runs, its rentals, its deployment's other costs, and
    its tranche's link leases spread over a month's hours. Summed over a tranche's periods,
    each times its hours a month, it is the tranche's monthly cost."""


def holdings(m: HorizonModel, s: Schedule) -> list[Held]:
    """Per period of ``m`` (in order), what the schedule ``s`` holds and what an hour of
    it costs (``Held``); empty for a schedule without an answer."""
    if s.total_usd is None:
        return []
    out = []
    for i, p in enumerate(m.periods):
        k = s.picks[i] if i < len(s.picks) else -1
        entry = p.entries[k] if k >= 0 else None
        sunk: dict[Chip, int] = {}
        owned: dict[Chip, int] = {}
        reserved: dict[Chip, int] = {}
        rented: dict[Chip, int] = {}
        usd = 0.0
        for c in sorted(m.supply):
            sup = m.supply[c]
            own = sum(n for (cc, t), n in s.own.items() if cc == c and t <= p.tranche)
            res = sum(
                n
                for (cc, t, j), n in s.reserve.items()
                if cc == c and m.in_force(t, sup.terms[j], p.tranche)
            )
            rent = s.rent.get((c, i), 0)
            need = entry.gpus.get(c, 0) if entry is not None else 0
            run = min(sup.sunk_gpus, max(0, need - own - res - rent))
            for kept, n in ((owned, own), (reserved, res), (rented, rent), (sunk, run)):
                if n:
                    kept[c] = n
            usd += own * (sup.own_usd_per_gpu_hour or 0.0) + rent * (
                sup.rent_usd_per_gpu_hour or 0.0
            )
            usd += run * sup.sunk_usd_per_gpu_hour
            usd += sum(
                n * sup.terms[j].usd_per_gpu_hour
                for (cc, t, j), n in s.reserve.items()
                if cc == c and m.in_force(t, sup.terms[j], p.tranche)
            )
        if entry is not None:
            usd += entry.other_usd_per_hour
        usd += sum(
            m.link_tiers[link][g] / HOURS_PER_MONTH
            for (link, t), g in s.lease.items()
            if t == p.tranche
        )
        out.append(Held(sunk, owned, reserved, rented, usd))
    return out


def _name(*parts: object) -> str:
    text = "_".join(str(p) for p in parts)
    for bad in " -.:/[]()":
        text = text.replace(bad, "_")
    return text


def schedule(
    m: HorizonModel,
    policy: Policy = OPTIMAL,
    *,
    solver: str = "cbc",
    node_limit: int = NODE_LIMIT,
    time_limit_s: float = 600.0,
    mip_gap: float = 1e-4,
) -> Schedule:
    """The least-cost schedule of ``m`` under ``policy`` (module docstring)."""
    prob = pulp.LpProblem("pdd_horizon", pulp.LpMinimize)
    add = prob.add_variable
    chips = sorted(m.supply)
    cost: list[pulp.LpAffineExpression] = []
    pick = {
        (i, k): add(_name("pick", i, k), cat="Binary")
        for i, p in enumerate(m.periods)
        for k in range(len(p.entries))
    }
    own: dict[tuple[Chip, int], pulp.LpVariable] = {}
    reserve: dict[tuple[Chip, int, int], pulp.LpVariable] = {}
    rent: dict[tuple[Chip, int], pulp.LpVariable] = {}
    sunk: dict[tuple[Chip, int], pulp.LpVariable] = {}
    tranches = range(len(m.tranche_months))
    for c in chips:
        s = m.supply[c]
        if policy.own and s.own_usd_per_gpu_hour is not None:
            first = s.own_from_tranche
            for t in [first] if policy.own_once else range(first, len(m.tranche_months)):
                var = own[(c, t)] = add(_name("own", *c, t), lowBound=0, cat="Integer")
                hours = m.months_from(t) * HOURS_PER_MONTH
                cost.append(s.own_usd_per_gpu_hour * s.unit_gpus * hours * var)
        if policy.reserve:
            for t in tranches:
                for j, term in enumerate(s.terms):
                    var = reserve[(c, t, j)] = add(
                        _name("reserve", *c, t, j), lowBound=0, cat="Integer"
                    )
                    cost.append(term.usd_per_gpu_hour * term.months * HOURS_PER_MONTH * var)
                    if term.min_gpus > 0:
                        on = add(_name("reserve_on", *c, t, j), cat="Binary")
                        prob += var >= term.min_gpus * on, _name("reserve_min", *c, t, j)
                        most = s.max_gpus if s.max_gpus is not None else MAX_GPUS
                        prob += var <= most * on, _name("reserve_on", *c, t, j)
        for i, p in enumerate(m.periods):
            if not p.entries:
                continue
            if s.rent_usd_per_gpu_hour is not None and (
                policy.rent_after_lead_time
                or s.own_usd_per_gpu_hour is None
                or p.tranche < s.own_from_tranche
            ):
                var = rent[(c, i)] = add(_name("rent", *c, i), lowBound=0, cat="Integer")
                cost.append(s.rent_usd_per_gpu_hour * p.hours * var)
            if s.sunk_gpus > 0:
                var = sunk[(c, i)] = add(_name("sunk", *c, i), lowBound=0, upBound=s.sunk_gpus)
                cost.append(s.sunk_usd_per_gpu_hour * p.hours * var)

    def bought(c: Chip, i: int, tranche: int) -> pulp.LpAffineExpression:
        """GPUs of ``c`` owned, reserved in force and rented in period ``i`` (of
        ``tranche``): all that is held but the sunk ones."""
        s = m.supply[c]
        return (
            pulp.lpSum(s.unit_gpus * v for (cc, t), v in own.items() if cc == c and t <= tranche)
            + pulp.lpSum(
                v
                for (cc, t, j), v in reserve.items()
                if cc == c and m.in_force(t, s.terms[j], tranche)
            )
            + rent.get((c, i), 0)
        )

    def held(c: Chip, i: int, tranche: int) -> pulp.LpAffineExpression:
        return m.supply[c].sunk_gpus + bought(c, i, tranche)

    lease: dict[tuple[str, int, float], pulp.LpVariable] = {}
    for link, tiers in sorted(m.link_tiers.items()):
        for t in tranches:
            for gbps, usd in sorted(tiers.items()):
                var = lease[(link, t, gbps)] = add(_name("lease", link, t, gbps), cat="Binary")
                cost.append(usd * m.tranche_months[t] * var)
            prob += (
                pulp.lpSum(lease[(link, t, g)] for g in tiers) <= 1,
                _name("one_lease", link, t),
            )
    for i, p in enumerate(m.periods):
        if not p.entries:
            continue
        prob += pulp.lpSum(pick[(i, k)] for k in range(len(p.entries))) == 1, _name("one_pick", i)
        cost += [e.other_usd_per_hour * p.hours * pick[(i, k)] for k, e in enumerate(p.entries)]
        for c in chips:
            need = pulp.lpSum(e.gpus.get(c, 0) * pick[(i, k)] for k, e in enumerate(p.entries))
            running = bought(c, i, p.tranche) + sunk.get((c, i), 0)
            prob += need <= running, _name("gpus", *c, i)
            if m.supply[c].max_gpus is not None:
                prob += held(c, i, p.tranche) <= m.supply[c].max_gpus, _name("supply", *c, i)
        for dc, most in sorted(m.dc_max_gpus.items()):
            here = [c for c in chips if c[0] == dc]
            if here:
                prob += (
                    pulp.lpSum(held(c, i, p.tranche) for c in here) <= most,
                    _name("dc", dc, i),
                )
        for link, tiers in sorted(m.link_tiers.items()):
            for k, e in enumerate(p.entries):
                if e.link is None or e.link[0] != link:
                    continue
                enough = [lease[(link, p.tranche, g)] for g in tiers if g >= e.link[1] - 1e-9]
                prob += pulp.lpSum(enough) >= pick[(i, k)], _name("link", link, i, k)
    prob += pulp.lpSum(cost)
    got = solve(
        prob, solver=solver, time_limit_s=time_limit_s, mip_gap=mip_gap, node_limit=node_limit
    )
    n_vars, n_rows = len(prob.variables()), prob.numConstraints()
    if got.objective is None:
        return Schedule(
            got.status, None, got.bound, got.gap,
            variables=n_vars, constraints=n_rows, nodes=got.nodes,
        )  # fmt: skip
    v = got.values

    def value(var: pulp.LpVariable) -> float:
        return v.get(var.name, 0.0)

    picks = []
    for i, p in enumerate(m.periods):
        ks = [k for k in range(len(p.entries)) if value(pick[(i, k)]) > 0.5]
        picks.append(ks[0] if ks else -1)
    return Schedule(
        got.status,
        got.objective,
        got.bound,
        got.gap,
        tuple(picks),
        {k: round(value(x)) * m.supply[k[0]].unit_gpus for k, x in own.items() if value(x) > 0.5},
        {k: round(value(x)) for k, x in reserve.items() if value(x) > 0.5},
        {k: round(value(x)) for k, x in rent.items() if value(x) > 0.5},
        {k: value(x) for k, x in sunk.items() if value(x) > 1e-9},
        {(link, t): g for (link, t, g), x in lease.items() if value(x) > 0.5},
        variables=n_vars,
        constraints=n_rows,
        nodes=got.nodes,
    )
