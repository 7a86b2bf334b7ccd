"""The planning MILP at one arrival rate (``docs/milp.md`` states it with these names).

Binary choices pick one prefill option, at most one relay-decode option and one main-decode
option (``use``), one transfer state (``transfer``: the P and MD datacenters and the link
tier, or RDMA inside one datacenter), one relay cut, one singular cut and one catch-up cut.
Integer ``units`` count purchase steps of each option (``instances = unit_step x units``).
The requirement rows

    instances[o] >= need[o, state, ..., chosen cut] - M x (number of its choices off)

written as ``need[0] + sum_j (need[j] - need[j-1]) reach[j]`` with ``reach[j]`` = 1 when
the chosen cut relays at least what cut j relays (sparse: a term only where the need
changes), carry the minimum counts that ``pddplan.plan.counts.Requirements`` computed from the nonlinear
model; they bind only when all the choices they name are on. Rows are added for the
combinations a solution uses (row generation): a solution that satisfies the rows of its
own combination meets every limit, and every row is valid, so the first such solution of a
minimum-cost solve is optimal. Small problems get every row at once.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pulp

from pddplan.plan.counts import Requirements
from pddplan.plan.solver import SolveResult, solve
from pddplan.plan.space import NO_RLD, Band, Choice, PoolOption
from pddplan.spec.scenario import ROLES

ALL_ROWS_AT_MOST = 4000
"""Add every requirement row up front when there are at most this many combinations;
beyond, rows are generated for the (option, state) pairs solutions use."""


@dataclass(frozen=True)
class MilpOutcome:
    """What one minimum-cost solve at a fixed rate returned."""

    status: str
    """``optimal``, ``time_limit``, ``time_limit_no_incumbent`` or ``infeasible``."""
    choice: Choice | None
    cost_per_hour: float | None
    bound: float | None
    gap: float | None
    seconds: float
    solves: int
    variables: int
    constraints: int


def _part(x: object) -> object:
    """A row name's part for a cut or band."""
    return "never" if x is None else x.key if isinstance(x, Band) else x


def _name(*parts: object) -> str:
    """A PuLP-safe name from domain keys."""
    text = "_".join(str(p) for p in parts)
    for bad in " -.:/[]()":
        text = text.replace(bad, "_")
    return text


class Formulation:
    """The MILP for ``req`` (one arrival rate), optionally within a budget per hour."""

    def __init__(self, req: Requirements, budget_usd_per_hour: float | None = None) -> None:
        self.req = req
        sp = self.sp = req.space
        self.prob = pulp.LpProblem("pdd_plan", pulp.LpMinimize)
        add = self.prob.add_variable
        self.by_role = {r: req.undominated(r) for r in ROLES}
        hosts = {o.key for o in self.by_role["prefill"]}  # relay decode on prefill: its host kept
        self.by_role["relay_decode"] = [
            o for o in self.by_role["relay_decode"] if o.host is None or o.host in hosts
        ]
        self.options = [o for r in ROLES for o in self.by_role[r]]
        self.use = {o.key: add(_name("use", o.key), cat="Binary") for o in self.options}
        self.units = {
            o.key: add(
                _name("units", o.key),
                lowBound=0,
                upBound=o.max_instances // o.unit_step,
                cat="Integer",
            )
            for o in self.options
        }
        self.states = req.feasible_states
        self.transfer = {st.key: add(_name("transfer", st.key), cat="Binary") for st in self.states}
        self.cut = {j: add(_name("cut", j), cat="Binary") for j in range(len(sp.cuts))}
        # reach[j] = 1 when the chosen cut relays at least what cut j relays (cuts are
        # ordered from relaying nothing to relaying most): sum over j' >= j of cut[j']
        self.reach = {
            j: add(_name("reach", j), lowBound=0, upBound=1) for j in range(1, len(sp.cuts))
        }
        self.singular = {s: add(_name("singular", s), cat="Binary") for s in sp.singular_cuts}
        self.catch_up = {
            h: add(_name("catch_up", "never" if h is None else h), cat="Binary")
            for h in sp.catch_up_cuts
        }
        # relay decode's pace band (one-hot), "none" exactly when no RLD is used
        self.band = {b.key: add(_name("band", b.key), cat="Binary") for b in req.bands()}
        # owned GPUs in use, per (datacenter, chip) with inventory: priced at running cost
        self.owned = {
            k: add(_name("owned", *k), lowBound=0, upBound=n)
            for k, (n, discount) in sp.owned.items()
            if discount > 0
        }
        self.rows: set[tuple] = set()
        self._objective_and_structure(budget_usd_per_hour)

    def instances(self, o: PoolOption) -> pulp.LpAffineExpression:
        return o.unit_step * self.units[o.key]

    def cost(self) -> pulp.LpAffineExpression:
        """USD per hour: instances at full price, less what owned GPUs save, plus the link."""
        return (
            pulp.lpSum(o.usd_per_instance_hour * self.instances(o) for o in self.options)
            - pulp.lpSum(self.sp.owned[k][1] * var for k, var in self.owned.items())
            + pulp.lpSum(st.usd_per_hour * self.transfer[st.key] for st in self.states)
        )

    def _objective_and_structure(self, budget: float | None) -> None:
        sp, prob = self.sp, self.prob
        by_role = self.by_role
        prob += self.cost()
        for role in ROLES:
            total = pulp.lpSum(self.use[o.key] for o in by_role[role])
            if role == "relay_decode":
                prob += total <= 1, _name("one_option", role)
            else:
                prob += total == 1, _name("one_option", role)
        for o in self.options:
            n = self.instances(o)
            prob += n <= o.max_instances * self.use[o.key], _name("count_needs_use", o.key)
            prob += self.units[o.key] >= self.use[o.key], _name("use_needs_count", o.key)
        prob += pulp.lpSum(self.transfer.values()) == 1, "one_transfer"
        prob += pulp.lpSum(self.cut.values()) == 1, "one_cut"
        last = len(sp.cuts) - 1
        for j, var in self.reach.items():
            below = self.reach[j + 1] if j < last else 0
            prob += var == below + self.cut[j], _name("reach_chain", j)
        prob += pulp.lpSum(self.singular.values()) == 1, "one_singular"
        prob += pulp.lpSum(self.catch_up.values()) == 1, "one_catch_up"
        for st in self.states:
            senders = [o for o in by_role["prefill"] if st.sent_by(o)]
            receivers = [o for o in by_role["main_decode"] if st.received_by(o)]
            prob += (
                self.transfer[st.key] <= pulp.lpSum(self.use[o.key] for o in senders),
                _name("transfer_from_prefill", st.key),
            )
            prob += (
                self.transfer[st.key] <= pulp.lpSum(self.use[o.key] for o in receivers),
                _name("transfer_to_main_decode", st.key),
            )
        prefill = {p.key: p for p in by_role["prefill"]}
        for o in by_role["relay_decode"]:
            if o.host is not None:  # on the host's instances: at most one per instance
                host = prefill[o.host]
                prob += self.use[o.key] <= self.use[host.key], _name("relay_on_host", o.key)
                prob += (
                    self.instances(o) <= self.instances(host),
                    _name("relay_within_host", o.key),
                )
                continue
            beside = [p for p in by_role["prefill"] if p.datacenter == o.datacenter]
            prob += (
                self.use[o.key] <= pulp.lpSum(self.use[p.key] for p in beside),
                _name("relay_beside_prefill", o.key),
            )
        # one pace band; "none" exactly without relay decode
        prob += pulp.lpSum(self.band.values()) == 1, "one_band"
        prob += (
            self.band[NO_RLD.key] + pulp.lpSum(self.use[o.key] for o in by_role["relay_decode"])
            == 1,
            "band_none_without_relay_decode",
        )
        relaying = [self.cut[j] for j, relays in enumerate(sp.relays_any) if relays]
        prob += (
            pulp.lpSum(relaying) <= pulp.lpSum(self.use[o.key] for o in by_role["relay_decode"]),
            "relay_needs_relay_decode",
        )
        # datacenter limits
        s, hw = sp.scenario, sp.hw
        for dc_id, dc in s.datacenters.items():
            here = [o for o in self.options if o.datacenter == dc_id]
            if not here:
                continue
            gpus = pulp.lpSum(o.bought_gpus * self.instances(o) for o in here)
            if dc.max_gpus is not None:
                prob += gpus <= dc.max_gpus, _name("max_gpus", dc_id)
            if dc.max_power_kw is not None:
                kw = pulp.lpSum(
                    o.bought_gpus * hw.chips[o.chip].tdp_w / 1000 * dc.pue * self.instances(o)
                    for o in here
                )
                prob += kw <= dc.max_power_kw, _name("max_power_kw", dc_id)
            for chip in dc.inventory:
                if (dc_id, chip) in self.owned:
                    used = pulp.lpSum(
                        o.bought_gpus * self.instances(o) for o in here if o.chip == chip
                    )
                    prob += self.owned[(dc_id, chip)] <= used, _name("owned_in_use", dc_id, chip)
        if budget is not None:
            prob += self.cost() <= budget, "budget"
        # cheap valid bounds: prefill utilization alone
        for o in by_role["prefill"]:
            n_util = int(self.req.prefill_utilization_floor(o))
            prob += self.instances(o) >= n_util * self.use[o.key], _name("prefill_floor", o.key)

    # requirement rows -----------------------------------------------------------------------
    def combinations(self) -> list[tuple]:
        sp = self.sp
        out: list[tuple] = []
        for st in self.states:
            for o in self.by_role["prefill"]:
                if st.sent_by(o):
                    if o.hosting:  # its passes stretch with the hosted load: per singular cut
                        out += [("prefill", o, st, s) for s in sp.singular_cuts]
                    else:
                        out.append(("prefill", o, st))
            for o in self.by_role["relay_decode"]:
                if o.datacenter == st.p_dc and any(st.sent_by(p) for p in self.by_role["prefill"]):
                    out += [("relay_decode", o, st, s) for s in sp.singular_cuts]
            for o in self.by_role["main_decode"]:
                if st.received_by(o):
                    out += [
                        ("main_decode", o, st, s, h)
                        for s in sp.singular_cuts
                        for h in sp.catch_up_cuts
                    ]
        return out

    def _needs(self, combo: tuple) -> list[tuple[np.ndarray, list[list[pulp.LpVariable]]]]:
        """A combination's requirement rows: per distinct minimum-count array (per relay
        cut), the choices it binds on. Each choice is a list of binaries of which at most
        one is on (a set of pace bands: their sum), so the row binds when every choice's
        sum is 1. Relay and main decode's counts depend on the pace band: bands with equal
        counts share a row, and a main-decode row every band shares binds on no band."""
        role, o, st, *rest = combo
        req = self.req
        on = [[self.use[o.key]], [self.transfer[st.key]]]
        if role == "prefill":
            if rest:  # hosting relay decode: per singular cut
                return [(req.prefill(o, st, rest[0]), [*on, [self.singular[rest[0]]]])]
            return [(req.prefill(o, st), on)]
        on.append([self.singular[rest[0]]])
        if role == "relay_decode":
            bands = self.sp.bands
            needs = [req.relay(o, st, rest[0], b) for b in bands]
        else:
            on.append([self.catch_up[rest[1]]])
            bands = req.bands()
            needs = [req.main(o, st, rest[0], rest[1], b) for b in bands]
        groups: dict[bytes, tuple[np.ndarray, list[pulp.LpVariable]]] = {}
        for b, need in zip(bands, needs, strict=True):
            groups.setdefault(need.tobytes(), (need, []))[1].append(self.band[b.key])
        every = len(groups) == 1 and role == "main_decode"
        return [(need, on if every else [*on, group]) for need, group in groups.values()]

    def add_row(self, combo: tuple) -> None:
        if combo in self.rows:
            return
        self.rows.add(combo)
        role, o, st, *rest = combo
        for k, (need, on) in enumerate(self._needs(combo)):
            big = int(need.max())
            if big == 0:
                continue
            # the need at the chosen cut, as need[0] plus its changes along the cut order:
            # instances - sum_j (need[j] - need[j-1]) reach[j] - big * sum(on)
            #   >= need[0] - big * len(on)
            terms: dict = {self.units[o.key]: float(o.unit_step)}
            for j in range(1, len(need)):
                if need[j] != need[j - 1]:
                    terms[self.reach[j]] = -float(need[j] - need[j - 1])
            for choice in on:
                for var in choice:
                    terms[var] = terms.get(var, 0.0) - big
            row = pulp.LpConstraint(
                pulp.LpAffineExpression(terms),
                sense=pulp.LpConstraintGE,
                rhs=float(need[0]) - big * len(on),
                name=_name("need", role, o.key, st.key, *[_part(x) for x in rest], k),
            )
            self.prob += row

    def add_floors(self) -> None:
        """Valid rows that tighten the LP relaxation: each prefill and main-decode option's
        count is at least its smallest need in the chosen transfer state (over every cut,
        singular and catch-up choice), once the option is used."""
        req = self.req
        for o in [*self.by_role["prefill"], *self.by_role["main_decode"]]:
            least = {}
            for st in self.states:
                if o.role == "prefill":
                    if st.sent_by(o):
                        least[st.key] = int(req.prefill(o, st).min())
                elif st.received_by(o):
                    least[st.key] = min(
                        int(req.main(o, st, s, h, b).min())
                        for b in req.bands()
                        for s in self.sp.singular_cuts
                        for h in self.sp.catch_up_cuts
                    )
            least = {k: min(v, o.max_instances) for k, v in least.items() if v > 0}
            if not least:
                continue
            big = max(least.values())
            self.prob += (
                self.instances(o)
                >= pulp.lpSum(n * self.transfer[k] for k, n in least.items())
                - big * (1 - self.use[o.key]),
                _name("floor", o.key),
            )

    def rows_for(self, choice: Choice) -> list[tuple]:
        o = choice.options
        p = o["prefill"]
        combos: list[tuple] = [
            ("prefill", p, choice.state, choice.singular)
            if p is not None and p.hosting
            else ("prefill", p, choice.state)
        ]
        if o["relay_decode"] is not None:
            combos.append(("relay_decode", o["relay_decode"], choice.state, choice.singular))
        combos.append(
            ("main_decode", o["main_decode"], choice.state, choice.singular, choice.catch_up)
        )
        return combos

    def choice(self, values: dict[str, float], *, normalize: bool = True) -> Choice:
        """The solution as a ``Choice``. With ``normalize``, a solution that relays nothing
        reports the first singular and catch-up cuts (the solver's pick among them is
        arbitrary); row generation needs the raw pick (``normalize=False``)."""

        def on(var: pulp.LpVariable) -> bool:
            return values.get(var.name, 0.0) > 0.5

        options: dict = {r: None for r in ROLES}
        instances = {r: 0 for r in ROLES}
        for o in self.options:
            if on(self.use[o.key]):
                options[o.role] = o
                instances[o.role] = o.unit_step * round(values.get(self.units[o.key].name, 0.0))
        state = next(st for st in self.states if on(self.transfer[st.key]))
        j = next(j for j, v in self.cut.items() if on(v))
        singular = next(s for s, v in self.singular.items() if on(v))
        catch_up = next(h for h, v in self.catch_up.items() if on(v))
        band = next(b for b in self.req.bands() if on(self.band[b.key]))
        if normalize and self.sp.cuts[j] is None:  # nothing relayed: the others do not matter
            singular, catch_up = self.sp.singular_cuts[0], self.sp.catch_up_cuts[0]
        return Choice(options, instances, state, self.sp.cuts[j], singular, catch_up, band)


def min_cost(
    req: Requirements,
    *,
    solver: str = "cbc",
    time_limit_s: float = 60.0,
    mip_gap: float = 1e-6,
    budget_usd_per_hour: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
    lower_bound: float | None = None,
) -> MilpOutcome:
    """The cheapest deployment that serves ``req.rate`` within every limit. ``clock``: the
    time source ``time_limit_s`` is measured on. ``lower_bound``: a cost per hour no plan
    is below (``pddplan.plan.bounds.relaxed_optimum``), added as a row so that the solver
    starts from it rather than from its own weaker LP bound."""
    start = clock()
    if not req.feasible_states:
        return MilpOutcome("infeasible", None, None, None, None, 0.0, 0, 0, 0)
    f = Formulation(req, budget_usd_per_hour)
    if lower_bound is not None and math.isfinite(lower_bound):
        f.prob += f.cost() >= lower_bound * (1 - 1e-9), "cost_lower_bound"
    combos = f.combinations()
    if len(combos) <= ALL_ROWS_AT_MOST:
        for c in combos:
            f.add_row(c)
        f.add_floors()
    solves, missing = 0, []
    result: SolveResult | None = None
    while True:
        left = time_limit_s - (clock() - start)
        if left <= 0:
            break
        result = solve(f.prob, solver=solver, time_limit_s=left, mip_gap=mip_gap)
        solves += 1
        if result.status not in ("optimal", "time_limit"):
            break
        missing = [
            c for c in f.rows_for(f.choice(result.values, normalize=False)) if c not in f.rows
        ]
        if not missing:
            break
        pairs = {(c[1].key, c[2].key) for c in missing}
        for c in combos:  # every row of the (option, state) pairs just used
            if (c[1].key, c[2].key) in pairs:
                f.add_row(c)
    seconds = clock() - start
    size = (f.prob.numVariables(), f.prob.numConstraints())
    if result is None or result.status not in ("optimal", "time_limit"):
        status = "time_limit_no_incumbent" if result is None else result.status
        return MilpOutcome(status, None, None, None, None, seconds, solves, *size)
    if missing:  # stopped by the time limit with rows still to add: no proven-feasible plan
        return MilpOutcome(
            "time_limit_no_incumbent", None, None, None, None, seconds, solves, *size
        )
    bound, gap = result.bound, result.gap
    if bound is None and lower_bound is not None and math.isfinite(lower_bound):
        bound = lower_bound  # the solver printed none: the relaxation's bound still holds
        objective = result.objective or 0.0
        gap = max(0.0, objective - bound) / max(1.0, abs(objective))
    return MilpOutcome(
        result.status,
        f.choice(result.values),
        result.objective,
        bound,
        gap,
        seconds,
        solves,
        *size,
    )
