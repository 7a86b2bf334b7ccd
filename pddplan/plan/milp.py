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
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pulp

from pddplan.plan.bounds import plan_cost
from pddplan.plan.counts import Requirements, undominated
from pddplan.plan.solver import NODE_LIMIT, SolveResult, solve
from pddplan.plan.space import NO_RLD, Band, Choice, PoolOption, State
from pddplan.spec.scenario import ROLES, Role
from pddplan.spec.status import MilpStatus
from pddplan.work import wall_clock

ALL_ROWS_AT_MOST = 4000
"""Add every requirement row up front when there are at most this many combinations;
beyond, rows are generated for the (option, state) pairs solutions use."""


def _rows_by_need(
    pairs: list[tuple[np.ndarray, list[pulp.LpVariable]]],
    on: list[list[pulp.LpVariable]],
    *,
    one_binds_on_none: bool,
) -> list[tuple[np.ndarray, list[list[pulp.LpVariable]]]]:
    """Requirement rows from (counts, binaries) pairs of one choice (pace bands, or MD
    options by first step), of which at most one is on: equal counts share a row over the
    sum of their binaries; with ``one_binds_on_none``, a single row every pair shares binds
    on none of them (only on ``on``)."""
    groups: dict[bytes, tuple[np.ndarray, list[pulp.LpVariable]]] = {}
    for need, binaries in pairs:
        groups.setdefault(need.tobytes(), (need, []))[1].extend(binaries)
    if one_binds_on_none and len(groups) == 1:
        return [(need, on) for need, _ in groups.values()]
    return [(need, [*on, group]) for need, group in groups.values()]


@dataclass(frozen=True)
class MilpOutcome:
    """What one minimum-cost solve at a fixed rate returned."""

    status: MilpStatus
    """``optimal``, ``infeasible``, or where a solve stopped early ``node_limit`` /
    ``time_limit`` (with a plan and its gap) or ``node_limit_no_incumbent`` /
    ``time_limit_no_incumbent`` (``pddplan.plan.solver``)."""
    choice: Choice | None
    cost_per_hour: float | None
    bound: float | None
    gap: float | None
    seconds: float
    solves: int
    variables: int
    constraints: int
    choices: tuple[Choice, ...] = ()
    """Per variant (``Variant``), its choice: the shared counts, its own routing."""
    scales: tuple[float, ...] = ()
    """Per variant, the share of the tail budgets it was planned for (1: its own)."""


@dataclass(frozen=True)
class Variant:
    """One workload the plan must serve with the same hardware (``pddplan.plan.robust``).

    ``tables`` holds its minimum counts by tail-budget scale: a variant that must meet the
    SLA on its own has one, at 1; a weighted variant one per scale it may be planned for
    (``TAIL_SCALES``), and the MILP picks one per weighted variant with
    ``sum weight x scale <= 1``: the weighted variants' tail masses, mixed by their weights,
    stay within the budgets (what a month's SLA measures)."""

    name: str
    tables: dict[float, Requirements]
    weight: float | None = None


def _part(x: object) -> object:
    """A row name's part for a cut or band."""
    return "never" if x is None else x.key if isinstance(x, Band) else x


def _name(*parts: object) -> str:
    """A PuLP-safe name from domain keys."""
    text = "_".join(str(p) for p in parts)
    for bad in " -.:/[]()":
        text = text.replace(bad, "_")
    return text


class _Routing:
    """One variant's software choices: its relay, singular and catch-up cuts, relay
    decode's pace band and (weighted) its tail-budget scale. Names carry ``prefix``."""

    def __init__(self, add: Callable, v: Variant, prefix: tuple[str, ...]) -> None:
        self.variant = v
        self.req = v.tables[1.0]
        sp = self.sp = self.req.space
        self.prefix = prefix

        def name(*parts: object) -> str:
            return _name(*prefix, *parts)

        self.name = name
        self.cut = {j: add(name("cut", j), cat="Binary") for j in range(len(sp.cuts))}
        # reach[j] = 1 when the chosen cut relays at least what cut j relays (cuts are
        # ordered from relaying nothing to relaying most): sum over j' >= j of cut[j']
        self.reach = {
            j: add(name("reach", j), lowBound=0, upBound=1) for j in range(1, len(sp.cuts))
        }
        self.singular = {s: add(name("singular", s), cat="Binary") for s in sp.singular_cuts}
        self.catch_up = {
            h: add(name("catch_up", "never" if h is None else h), cat="Binary")
            for h in sp.catch_up_cuts
        }
        # relay decode's pace band (one-hot), "none" exactly when no RLD is used
        self.band = {b.key: add(name("band", b.key), cat="Binary") for b in self.req.bands()}
        self.scale = (
            {x: add(name("scale", x), cat="Binary") for x in sorted(v.tables)}
            if v.weight is not None
            else {}
        )


class Formulation:
    """The MILP for ``req`` (one arrival rate), optionally within a budget per hour; or, given
    ``variants``, one set of hardware (options, counts, transfer state) that serves each of
    them with its own routing (a robust plan, ``pddplan.plan.robust``)."""

    def __init__(
        self,
        req: Requirements | None = None,
        budget_usd_per_hour: float | None = None,
        *,
        variants: list[Variant] | None = None,
        hardware: Choice | None = None,
    ) -> None:
        self.hardware = hardware
        if variants is None:
            assert req is not None
            variants = [Variant("", {1.0: req})]
        self.variants = variants
        self.req = variants[0].tables[1.0]
        sp = self.sp = self.req.space
        self.prob = pulp.LpProblem("pdd_plan", pulp.LpMinimize)
        add = self.prob.add_variable
        many = len(variants) > 1
        self.routes = [_Routing(add, v, (f"v{i}",) if many else ()) for i, v in enumerate(variants)]
        # the transfer states every variant's link load allows
        keys = set.intersection(*({st.key for st in r.req.feasible_states} for r in self.routes))
        self.states = [st for st in self.req.feasible_states if st.key in keys]
        self.by_role = self._options()
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
        self.transfer = {st.key: add(_name("transfer", st.key), cat="Binary") for st in self.states}
        # the single plan's routing by the names the rest of the planner reads
        r0 = self.routes[0]
        self.cut, self.reach, self.singular = r0.cut, r0.reach, r0.singular
        self.catch_up, self.band = r0.catch_up, r0.band
        # owned GPUs in use, per (datacenter, chip) with inventory: priced at running cost
        self.owned = {
            k: add(_name("owned", *k), lowBound=0, upBound=n)
            for k, (n, discount) in sp.owned.items()
            if discount > 0
        }
        self.rows: set[tuple] = set()
        self._objective_and_structure(budget_usd_per_hour)

    def _options(self) -> dict[Role, list[PoolOption]]:
        """Per role, the options the plan may buy: those no other option dominates in every
        variant at every tail scale (``counts.undominated``; an option dominated in each
        variant by a different one may still be the cheapest cover of all of them), of the
        options every variant has."""
        if self.hardware is not None:  # exactly its options (dominated or not)
            given = {o.key for o in self.hardware.options.values() if o is not None}
            by_role = {r: [o for o in self.sp.options[r] if o.key in given] for r in ROLES}
        elif len(self.variants) == 1:
            by_role = {r: self.req.undominated(r) for r in ROLES}
        elif not self.states:  # no link serves every variant: infeasible (``min_cost``)
            by_role = {r: list(self.sp.options[r]) for r in ROLES}
        else:
            by_role = {}
            for role in ROLES:
                everywhere = [
                    o
                    for o in self.sp.options[role]
                    if all(any(x.key == o.key for x in r.sp.options[role]) for r in self.routes)
                ]
                figures = [
                    req.figures(role, [self._state(r, st) for st in self.states])
                    for r in self.routes
                    for req in r.variant.tables.values()
                ]
                by_role[role] = undominated(self.sp, everywhere, figures)
        hosts = {o.key for o in by_role["prefill"]}  # relay decode on prefill: its host kept
        by_role["relay_decode"] = [
            o for o in by_role["relay_decode"] if o.host is None or o.host in hosts
        ]
        return by_role

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
        # a hosting prefill option is a host: relay decode on its instances, at a cut that
        # relays in the transfer state's cache (without, its fleet is the plain option's,
        # whose counts are its own)
        hosting = [p for p in by_role["prefill"] if p.hosting]
        for p in hosting:
            hosted = [o for o in by_role["relay_decode"] if o.host == p.key]
            prob += (
                self.use[p.key] <= pulp.lpSum(self.use[o.key] for o in hosted),
                _name("host_hosts", p.key),
            )
        rld_used = pulp.lpSum(self.use[o.key] for o in by_role["relay_decode"])
        for r in self.routes:
            self._routing_structure(r, rld_used)
            for shared in self.states if hosting else []:
                st = self._state(r, shared)
                relays = np.asarray(r.sp.relay_matrix[st.cache].any(axis=1))
                relaying = pulp.lpSum(r.cut[j] for j, x in enumerate(relays) if x)
                for p in hosting:
                    if st.sent_by(p):
                        prob += (
                            self.use[p.key] + self.transfer[shared.key] <= 1 + relaying,
                            r.name("host_relays", p.key, st.key),
                        )
        weighted = [r for r in self.routes if r.variant.weight is not None]
        if weighted:  # the weighted variants' tail masses, mixed, within the budgets
            total = sum(r.variant.weight or 0.0 for r in weighted)  # 1, to validation's 1e-6
            prob += (
                pulp.lpSum(
                    (r.variant.weight or 0.0) * x * var
                    for r in weighted
                    for x, var in r.scale.items()
                )
                <= total * (1 + 1e-9),
                "mixture_tail_budget",
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
        if self.hardware is not None:  # the hardware is given: only the routing is free
            given = self.hardware
            bought = {o.key: given.instances[o.role] for o in given.options.values() if o}
            for o in self.options:
                prob += self.instances(o) == bought.get(o.key, 0), _name("given", o.key)
            if given.state.key in self.transfer:  # else its link is over its cap here
                prob += self.transfer[given.state.key] == 1, "given_transfer"
        # cheap valid bounds: prefill utilization alone, in every variant
        for o in by_role["prefill"]:
            n_util = max(int(r.req.prefill_utilization_floor(self._own(r, o))) for r in self.routes)
            prob += self.instances(o) >= n_util * self.use[o.key], _name("prefill_floor", o.key)

    def _routing_structure(self, r: _Routing, rld_used: pulp.LpAffineExpression) -> None:
        prob, name = self.prob, r.name
        prob += pulp.lpSum(r.cut.values()) == 1, name("one_cut")
        last = len(r.sp.cuts) - 1
        for j, var in r.reach.items():
            below = r.reach[j + 1] if j < last else 0
            prob += var == below + r.cut[j], name("reach_chain", j)
        prob += pulp.lpSum(r.singular.values()) == 1, name("one_singular")
        prob += pulp.lpSum(r.catch_up.values()) == 1, name("one_catch_up")
        # one pace band; "none" exactly without relay decode
        prob += pulp.lpSum(r.band.values()) == 1, name("one_band")
        prob += r.band[NO_RLD.key] + rld_used == 1, name("band_none_without_relay_decode")
        relaying = [r.cut[j] for j, relays in enumerate(r.sp.relays_any) if relays]
        if r.sp.relay_required:  # a family with relay decode (``Space.restricted``)
            prob += pulp.lpSum(relaying) == 1, name("relay_decode_required")
        prob += pulp.lpSum(relaying) <= rld_used, name("relay_needs_relay_decode")
        if r.scale:
            prob += pulp.lpSum(r.scale.values()) == 1, name("one_scale")

    def _own(self, r: _Routing, o: PoolOption) -> PoolOption:
        """Variant ``r``'s option of ``o``'s key (its figures are at that workload)."""
        if r is self.routes[0]:
            return o
        return next(x for x in r.sp.options[o.role] if x.key == o.key)

    def _state(self, r: _Routing, st: State) -> State:
        if r is self.routes[0]:
            return st
        return next(x for x in r.req.feasible_states if x.key == st.key)

    # requirement rows -----------------------------------------------------------------------
    def combinations(self) -> list[tuple]:
        """Every requirement row's key: (variant, scale, role, option, state, cuts...), the
        option and state the variant's own."""
        out: list[tuple] = []
        for i, r in enumerate(self.routes):
            for x in sorted(r.variant.tables):
                out += [(i, x, *c) for c in self._combinations(r)]
        return out

    def _combinations(self, r: _Routing) -> list[tuple]:
        sp = r.sp
        out: list[tuple] = []
        for shared in self.states:
            st = self._state(r, shared)
            for p in self.by_role["prefill"]:
                o = self._own(r, p)
                if st.sent_by(o):
                    if o.hosting:  # its passes stretch with the hosted load: per singular cut
                        out += [("prefill", o, st, s) for s in sp.singular_cuts]
                    else:
                        out.append(("prefill", o, st))
            for q in self.by_role["relay_decode"]:
                o = self._own(r, q)
                if o.datacenter == st.p_dc and any(st.sent_by(p) for p in self.by_role["prefill"]):
                    out += [("relay_decode", o, st, s) for s in sp.singular_cuts]
            for m in self.by_role["main_decode"]:
                o = self._own(r, m)
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
        counts share a row, and a main-decode row every band shares binds on no band;
        prefill's on the main-decode option's first step, the same way
        (``_rows_by_need``)."""
        i, scale, role, o, st, *rest = combo
        r = self.routes[i]
        req = r.variant.tables[scale]
        on = [[self.use[o.key]], [self.transfer[st.key]]]
        if r.scale:
            on.append([r.scale[scale]])
        if role == "prefill":
            singular = rest[0] if rest else None
            if rest:  # hosting relay decode: per singular cut
                on.append([r.singular[rest[0]]])
            # per first step of the main-decode options receiving in st (their use
            # binaries): one all of them share binds on none
            pairs = [
                (req.prefill(o, st, singular, first_s=first_s), used)
                for first_s, receivers in r.sp.first_steps(st).items()
                if (used := [self.use[m.key] for m in receivers if m.key in self.use])
            ]
            return _rows_by_need(pairs, on, one_binds_on_none=True)
        on.append([r.singular[rest[0]]])
        if role == "relay_decode":
            bands = r.sp.bands
            needs = [req.relay(o, st, rest[0], b) for b in bands]
        else:
            on.append([r.catch_up[rest[1]]])
            bands = req.bands()
            needs = [req.main(o, st, rest[0], rest[1], b) for b in bands]
        pairs = [(need, [r.band[b.key]]) for b, need in zip(bands, needs, strict=True)]
        return _rows_by_need(pairs, on, one_binds_on_none=role == "main_decode")

    def add_row(self, combo: tuple) -> None:
        if combo in self.rows:
            return
        self.rows.add(combo)
        i, scale, role, o, st, *rest = combo
        r = self.routes[i]
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
                    terms[r.reach[j]] = -float(need[j] - need[j - 1])
            for choice in on:
                for var in choice:
                    terms[var] = terms.get(var, 0.0) - big
            parts = [] if not r.scale else [scale]
            row = pulp.LpConstraint(
                pulp.LpAffineExpression(terms),
                sense=pulp.LpConstraintGE,
                rhs=float(need[0]) - big * len(on),
                name=r.name("need", role, o.key, st.key, *[_part(x) for x in rest], *parts, k),
            )
            self.prob += row

    def add_floors(self) -> None:
        """Valid rows that tighten the LP relaxation: each prefill and main-decode option's
        count is at least its smallest need in the chosen transfer state (over every cut,
        singular and catch-up choice), once the option is used, in every variant."""
        for r in self.routes:
            for shared in [*self.by_role["prefill"], *self.by_role["main_decode"]]:
                self._floor(r, shared)

    def _floor(self, r: _Routing, shared: PoolOption) -> None:
        """``add_floors`` for one variant: its smallest need over every choice of its own
        (a weighted variant's over its tail scales too)."""
        o = self._own(r, shared)
        least = {}
        for common in self.states:
            st = self._state(r, common)
            needs = []
            for req in r.variant.tables.values():
                if o.role == "prefill":
                    if st.sent_by(o):
                        needs.append(int(req.prefill_least(o, st).min()))
                elif st.received_by(o):
                    needs += [
                        int(req.main(o, st, s, h, b).min())
                        for b in req.bands()
                        for s in r.sp.singular_cuts
                        for h in r.sp.catch_up_cuts
                    ]
            if needs:
                least[st.key] = min(needs)
        least = {k: min(v, o.max_instances) for k, v in least.items() if v > 0}
        if not least:
            return
        big = max(least.values())
        self.prob += (
            self.instances(o)
            >= pulp.lpSum(n * self.transfer[k] for k, n in least.items())
            - big * (1 - self.use[o.key]),
            r.name("floor", o.key),
        )

    def exclude(self, rejected: Choice, index: int) -> None:
        """A cut that the evaluator's rejection of ``rejected`` (its hardware, under every
        router setting it may use, misses the rate) adds: a solution must differ from
        it in an option or the transfer state, or buy more instances of one of its options
        (``docs/milp.md``, "Check and cut"). The plans it also removes, the same hardware
        with fewer instances, cost less than the optimum it was, so they were infeasible
        already: the cut removes that one deployment."""
        chosen = [o for o in rejected.options.values() if o is not None]
        if any(o.key not in self.use for o in chosen) or rejected.state.key not in self.transfer:
            return  # not a solution of this formulation: nothing to exclude
        prob, terms = self.prob, [1 - self.transfer[rejected.state.key]]
        for role in ROLES:
            o = rejected.options[role]
            if o is None:  # without relay decode: buying any is a difference
                terms += [self.use[x.key] for x in self.by_role[role]]
                continue
            terms.append(1 - self.use[o.key])
            top = o.max_instances // o.unit_step
            have = rejected.instances[role] // o.unit_step
            if have < top:  # more of it: a binary that may be on only above the count
                more = prob.add_variable(_name("more", index, o.key), cat="Binary")
                prob += self.units[o.key] >= (have + 1) * more, _name("more_than", index, o.key)
                terms.append(more)
        prob += pulp.lpSum(terms) >= 1, _name("rejected", index)

    def start_from(self, choices: list[Choice]) -> None:
        """Every integer variable's initial value from a solution: the variants' choices
        (one hardware, each variant's routing), every weighted variant at its own budgets."""
        hw = choices[0]
        picked = {o.key for o in hw.options.values() if o is not None}
        for o in self.options:
            self.use[o.key].setInitialValue(int(o.key in picked))
            count = hw.instances[o.role] if o.key in picked else 0
            self.units[o.key].setInitialValue(count // o.unit_step)
        for st in self.states:
            self.transfer[st.key].setInitialValue(int(st.key == hw.state.key))
        for r, c in zip(self.routes, choices, strict=True):
            j = r.sp.cuts.index(c.cut)
            for k, var in r.cut.items():
                var.setInitialValue(int(k == j))
            for k, var in r.reach.items():
                var.setInitialValue(int(j >= k))
            for s_cut, var in r.singular.items():
                var.setInitialValue(int(s_cut == c.singular))
            for h_cut, var in r.catch_up.items():
                var.setInitialValue(int(h_cut == c.catch_up))
            for key, var in r.band.items():
                var.setInitialValue(int(key == c.band.key))
            for scale, var in r.scale.items():
                var.setInitialValue(int(scale == 1.0))

    def rows_for(self, choices: list[Choice], scales: list[float]) -> list[tuple]:
        """The requirement rows the variants' choices (at their scales) must satisfy."""
        combos: list[tuple] = []
        for i, (choice, x) in enumerate(zip(choices, scales, strict=True)):
            o = choice.options
            p = o["prefill"]
            combos.append(
                (i, x, "prefill", p, choice.state, choice.singular)
                if p is not None and p.hosting
                else (i, x, "prefill", p, choice.state)
            )
            if o["relay_decode"] is not None:
                combos.append(
                    (i, x, "relay_decode", o["relay_decode"], choice.state, choice.singular)
                )
            combos.append(
                (i, x, "main_decode", o["main_decode"], choice.state, choice.singular,
                 choice.catch_up)
            )  # fmt: skip
        return combos

    def choice(self, values: dict[str, float], *, normalize: bool = True) -> Choice:
        """The first variant's choice (a single plan's: ``choices``)."""
        return self.choices(values, normalize=normalize)[0][0]

    def choices(
        self, values: dict[str, float], *, normalize: bool = True
    ) -> tuple[list[Choice], list[float]]:
        """The solution as a ``Choice`` per variant (each with its own options' figures and
        routing, the counts shared) and the tail-budget scale of each. With ``normalize``, a
        variant that relays nothing reports the first singular and catch-up cuts (the
        solver's pick among them is arbitrary); row generation needs the raw pick
        (``normalize=False``)."""

        def on(var: pulp.LpVariable) -> bool:
            return values.get(var.name, 0.0) > 0.5

        bought = [o for o in self.options if on(self.use[o.key])]
        shared = next(st for st in self.states if on(self.transfer[st.key]))
        out, scales = [], []
        for r in self.routes:
            options: dict = {role: None for role in ROLES}
            instances = {role: 0 for role in ROLES}
            for o in bought:
                options[o.role] = self._own(r, o)
                instances[o.role] = o.unit_step * round(values.get(self.units[o.key].name, 0.0))
            j = next(j for j, v in r.cut.items() if on(v))
            singular = next(s for s, v in r.singular.items() if on(v))
            catch_up = next(h for h, v in r.catch_up.items() if on(v))
            band = next(b for b in r.req.bands() if on(r.band[b.key]))
            if normalize and r.sp.cuts[j] is None:  # nothing relayed: the others do not matter
                singular, catch_up = r.sp.singular_cuts[0], r.sp.catch_up_cuts[0]
            state = self._state(r, shared)
            out.append(Choice(options, instances, state, r.sp.cuts[j], singular, catch_up, band))
            scales.append(next(x for x, v in r.scale.items() if on(v)) if r.scale else 1.0)
        return out, scales


def min_cost(
    req: Requirements | None = None,
    *,
    variants: list[Variant] | None = None,
    solver: str = "cbc",
    time_limit_s: float = 60.0,
    mip_gap: float = 1e-6,
    node_limit: int = NODE_LIMIT,
    budget_usd_per_hour: float | None = None,
    clock: Callable[[], float] = wall_clock,
    lower_bound: float | None = None,
    hardware: Choice | None = None,
    initial: list[Choice] | None = None,
    rejected: tuple[Choice, ...] = (),
) -> MilpOutcome:
    """The cheapest deployment that serves ``req.rate`` within every limit; given
    ``variants``, the cheapest hardware that serves each variant's rate with its own
    routing (``Formulation``). ``node_limit``: branch-and-bound nodes per solver run
    (counted work); ``time_limit_s``: the wall-clock safety stop, measured on ``clock``.
    ``lower_bound``: a cost per hour no plan is below
    (``pddplan.plan.bounds.relaxed_optimum``), added as a row so that the solver starts
    from it rather than from its own weaker LP bound. ``hardware``: a plan's options,
    counts and transfer state, fixed; what is left to choose is the routing (does that
    hardware serve these variants, and how). ``initial``: a solution to start the solver
    from, one choice per variant (``Formulation.start_from``). ``rejected``: deployments the
    evaluator found short of the rate, each excluded by a cut (``Formulation.exclude``)."""
    start = clock()
    first = variants[0].tables[1.0] if variants else req
    if first is None or not first.feasible_states:
        return MilpOutcome(MilpStatus.INFEASIBLE, None, None, None, None, 0.0, 0, 0, 0)
    f = Formulation(req, budget_usd_per_hour, variants=variants, hardware=hardware)
    if not f.states or (hardware is not None and hardware.state.key not in f.transfer):
        return MilpOutcome(MilpStatus.INFEASIBLE, None, None, None, None, 0.0, 0, 0, 0)
    if lower_bound is not None and math.isfinite(lower_bound):
        f.prob += f.cost() >= lower_bound * (1 - 1e-9), "cost_lower_bound"
    for i, choice in enumerate(rejected):
        f.exclude(choice, i)
    combos = f.combinations()
    # given variants (one or several), their tables are counted whole already (the
    # dominance test, or the caller's robust plan): every row at once
    if variants is not None or len(combos) <= ALL_ROWS_AT_MOST:
        for c in combos:
            f.add_row(c)
        f.add_floors()
    if initial is not None:
        f.start_from(initial)
    solves, missing = 0, []
    result: SolveResult | None = None
    while True:
        left = time_limit_s - (clock() - start)
        if left <= 0:
            break
        result = solve(
            f.prob,
            solver=solver,
            time_limit_s=left,
            mip_gap=mip_gap,
            node_limit=node_limit,
            warm_start=initial is not None,
            # CBC's preprocessing, measured on robust MILPs (docs/milp.md): on the paper's
            # four months 9.8 s with it, 3.3 s without (2.1 s and 0.14 s from the start);
            # on two variants no single plan covers 87 s and 21 s. On single plans it
            # helps as often as not (one month alone 0.26 s with it, 1.6 s without).
            preprocess=variants is None or len(variants) == 1,
        )
        solves += 1
        if result.status != MilpStatus.OPTIMAL and not result.status.stopped:
            break
        picked = f.choices(result.values, normalize=False)
        missing = [c for c in f.rows_for(*picked) if c not in f.rows]
        if not missing:
            break
        # every row of the (option, state) pairs the solution just used, in every variant
        # and at every tail scale (the next solution is likely to use them too)
        used = {(c[3].key, c[4].key) for c in missing}
        for c in combos:
            if (c[3].key, c[4].key) in used:
                f.add_row(c)
    seconds = clock() - start
    size = (f.prob.numVariables(), f.prob.numConstraints())
    if result is None or (result.status != MilpStatus.OPTIMAL and not result.status.stopped):
        status = MilpStatus.TIME_LIMIT_NO_INCUMBENT if result is None else result.status
        return MilpOutcome(status, None, None, None, None, seconds, solves, *size)
    if missing:  # stopped by the time limit with rows still to add: no proven-feasible plan
        return MilpOutcome(
            MilpStatus.TIME_LIMIT_NO_INCUMBENT, None, None, None, None, seconds, solves, *size
        )
    bound, gap = result.bound, result.gap
    if bound is None and lower_bound is not None and math.isfinite(lower_bound):
        bound = lower_bound  # the solver printed none: the relaxation's bound still holds
        objective = result.objective or 0.0
        gap = max(0.0, objective - bound) / max(1.0, abs(objective))
    choices, scales = f.choices(result.values)
    return MilpOutcome(
        result.status,
        choices[0],
        plan_cost(f.sp, choices[0]),  # exact: the solver's objective is a float sum
        bound,
        gap,
        seconds,
        solves,
        *size,
        tuple(choices),
        tuple(scales),
    )
