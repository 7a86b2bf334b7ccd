"""Lower bounds on the minimum cost at a rate, without a solver.

- ``relaxed_optimum``: the minimum-cost MILP without its datacenter rows (GPU and power
  limits, the budget) and with owned GPUs priced per pool. Its minimizer is a plan; when
  that plan meets the dropped rows and its exact cost equals the bound, it is the MILP's
  optimum and no MILP needs to run (``pddplan.plan.search`` then skips the solver).
- ``cost_floor``: a cruder bound per cell of a rate grid, for the max-BCR search's pruning.
"""

from __future__ import annotations

import itertools
import math
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from pddplan.model.network import TcpPath, link_bytes_per_s, rdma_transfer_s, wan_times
from pddplan.plan.counts import Requirements
from pddplan.plan.space import NO_RLD, Band, Choice, PoolOption, Space, State, hardware_key
from pddplan.spec.scenario import ROLES, Role


def _low(space: Space, o: PoolOption, n):
    """The cost of ``n`` instances of ``o``, as many of its GPUs owned as the inventory
    allows (owned GPUs at their running cost), so never above what a plan pays."""
    owned, discount = space.owned.get((o.datacenter, o.chip), (0, 0.0))
    return n * o.usd_per_instance_hour - discount * np.minimum(n * o.bought_gpus, owned)


def _costs(space: Space, needs: list[tuple[PoolOption, np.ndarray]], shape) -> np.ndarray:
    """Per option of ``needs`` (first axis), the cost of its minimum counts (inf past its
    maximum); one row of inf without options."""
    if not needs:
        return np.full((1, *np.atleast_1d(shape)), np.inf)
    return np.stack(
        [np.where(n > o.max_instances, np.inf, _low(space, o, n)) for o, n in needs]
    ).astype(float)


def _ties(options: list, costs: np.ndarray, tol: float) -> list:
    """The options whose cost is the least of ``costs`` (one per option)."""
    return [o for o, c in zip(options, costs, strict=True) if c <= costs.min() + tol]


MAX_TIES = 4
"""``relaxed_optimum`` returns at most this many plans of the least cost."""
MAX_TIED_CELLS = 2000
"""...and looks at most at this many (state, band, cut) cells of the least cost for them."""


@dataclass(frozen=True)
class RelaxedOptimum:
    """The relaxation's minimum ``cost`` (inf: not even the relaxation has a plan), and the
    distinct deployments of that cost that are the MILP's optimum too (``choices``, empty
    when none is: a datacenter row binds)."""

    cost: float
    choices: tuple[Choice, ...] = ()

    @property
    def exact(self) -> bool:
        return bool(self.choices)


def relaxed_optimum(
    req: Requirements,
    budget_usd_per_hour: float | None = None,
    *,
    ties: int = 1,
    rejected: frozenset[tuple] = frozenset(),
) -> RelaxedOptimum:
    """A lower bound on the minimum-cost MILP's optimum at ``req.rate``, and the plans that
    reach it.

    The MILP picks one option per role, one transfer state, one RLD pace band and one
    relay, singular and catch-up cut, each option at least its minimum count for those
    choices (``Requirements``). Dropping the datacenter limits (GPUs, power), the budget,
    and pricing each pool with as many of its GPUs owned as the inventory allows leaves,
    per transfer state, band and cut, the sum of each role's cheapest option at its
    minimum count: the minimum of that over the choices never exceeds the MILP's optimum.
    A minimizer meets every row the MILP has besides the dropped ones, so when it also
    meets those and its exact cost (owned GPUs shared between pools of one chip) equals
    the bound, it is optimal. Minimizers that are the same deployment but for the router
    are one plan here (the one relaying most; ``pddplan.plan.search`` tunes the router);
    distinct deployments of equal cost (two layouts of the same GPUs, say) are returned up
    to ``ties`` of them (at most ``MAX_TIES``), for the search to pick the one with the
    largest SLA capacity. Deployments whose ``hardware_key`` is in ``rejected`` (the
    evaluator found them short) are not returned: when every minimizer is, none is exact
    and the MILP, with a cut for each, finds the next."""
    sp = req.space
    ncatch = len(sp.catch_up_cuts)
    best, tables = _relaxed_tables(req)
    if not math.isfinite(best):
        return RelaxedOptimum(math.inf)
    tol = 1e-9 * max(1.0, best)
    enough = min(ties, MAX_TIES)
    found: dict[tuple, Choice] = {}
    cells = 0
    for st, band, totals, relays, (senders, p_costs), (rld, r_costs), (main, m_costs) in (
        (t[0], t[1], t[2], t[3], *t[4]) for t in tables
    ):
        # the most relaying first: of one deployment's cells, the first found is kept
        for row, j in sorted(
            np.argwhere(totals <= best + tol).tolist(), key=lambda c: (-c[1], -c[0])
        ):
            cells += 1
            r = row // ncatch
            relay_ties = [None]
            if band.index >= 0 and relays[j]:
                relay_ties = _ties(rld, r_costs[:, r, j], tol)
            for p, rd, m in itertools.product(
                _ties(senders, p_costs[:, r, j], tol),
                relay_ties,
                _ties(main, m_costs[:, row, j], tol),
            ):
                options = {"prefill": p, "relay_decode": rd, "main_decode": m}
                choice = _as_choice(req, st, band, r, row % ncatch, j, options)
                key = hardware_key(choice)
                if key not in rejected:
                    found.setdefault(key, choice)
            if len(found) >= enough or cells >= MAX_TIED_CELLS:
                break
        if len(found) >= enough or cells >= MAX_TIED_CELLS:
            break
    if found:
        _remember(req, next(iter(found.values())))
    exact = [
        c
        for c in found.values()
        if _meets_dropped_rows(sp, c, budget_usd_per_hour)
        and math.isclose(plan_cost(sp, c), best, rel_tol=1e-9, abs_tol=1e-9)
    ]
    return RelaxedOptimum(best, tuple(exact))


_TABLES: weakref.WeakKeyDictionary[Requirements, tuple[float, list]] = weakref.WeakKeyDictionary()
"""``_relaxed_tables`` per count tables: the search asks ``relaxed_optimum`` at one rate for
its bound, for the plan, and for the plan's ties, with other ``ties``, ``rejected`` and
budgets that change only which minimizers it returns."""


def _relaxed_tables(req: Requirements) -> tuple[float, list]:
    """The relaxation's least cost at ``req.rate`` and, per (transfer state, first step,
    pairing, band), its cost table over the cuts with each role's option costs: what
    ``relaxed_optimum`` minimizes, kept per ``req`` (it depends on nothing else).

    A prefill option's counts (the count searches, most of the work) are searched only
    where they could be part of a least-cost plan: an option whose cost at its
    utilization floor (``Requirements.prefill_utilization_floor``, at most its count at
    every cut) plus the state's own cost exceeds a plan's total already found cannot be,
    and its row is left at inf. A first pass over the cheapest option at its floor per
    state and first step finds that plan (``_least_tables`` with ``first``); the second
    prunes against it and against each cheaper total as it finds one. The least cost and
    every table cell within the tolerance of it are the same as with every count
    searched. Where every count is searched already (a price sweep's later points), there
    is nothing to prune: one pass, in order."""
    if req in _TABLES:
        return _TABLES[req]
    groups = [(st, f) for st in req.feasible_states for f in req.space.first_steps(st)]
    order = list(range(len(groups)))
    found = math.inf
    kept: dict[tuple, np.ndarray] = {}
    if not all(_known(req, st, f) for st, f in groups):  # else nothing to search or prune
        found = _remembered_total(req)
        if not math.isfinite(found):
            found, _, least = _least_tables(req, groups, math.inf, first=True, kept=kept)
            # the groups whose first pass found the least totals first (tables in order)
            order.sort(key=lambda g: least[g])
    best, tables, _ = _least_tables(req, [groups[g] for g in order], found, kept=kept)
    tables = [t for _, t in sorted(zip(order, tables, strict=True), key=lambda gt: gt[0])]
    _TABLES[req] = best, [t for group in tables for t in group]
    return _TABLES[req]


def _least_tables(
    req: Requirements,
    groups: list[tuple[State, float]],
    bound: float,
    *,
    first: bool = False,
    kept: dict[tuple, np.ndarray] | None = None,
) -> tuple[float, list[list], list[float]]:
    """``_relaxed_tables``' loop over ``groups`` (transfer state, MD's first step): the least
    total it finds, each group's tables and least total, with the prefill options whose
    floor cost exceeds ``bound`` (or the running least, where lower) left out; with
    ``first``, only the cheapest option at its floor per group, without the hosting
    pairings (a plan's total: an upper bound on the least). ``kept``: the relay-decode and
    main-decode cost tables of an earlier pass, which this one adds to and reads."""
    sp = req.space
    ncut = len(sp.cuts)
    nsing, ncatch = len(sp.singular_cuts), len(sp.catch_up_cuts)
    kept = {} if kept is None else kept

    def costs(role: str, options: list[PoolOption], st: State, band: Band, shape) -> np.ndarray:
        """The options' cost tables at their minimum counts (``_costs``), once per pass set."""
        key = (role, st.key, band.key, tuple(o.key for o in options))
        if key not in kept:
            counts = req.relay_all if role == "relay_decode" else req.main_all
            kept[key] = _costs(sp, [(o, counts(o, st, band)) for o in options], shape)
        return kept[key]

    best = math.inf
    out: list[list] = []
    least: list[float] = []
    for st, first_s in groups:
        relays = np.asarray(sp.relay_matrix[st.cache].any(axis=1))
        main = sp.first_steps(st)[first_s]
        tables: list = []
        out.append(tables)
        least.append(math.inf)
        limit = min(bound, best) * (1 + 1e-9) + 1e-9 - st.usd_per_hour
        for senders, p_costs, rld, hosted in _pairings(req, st, first_s, limit, first):
            prefill = p_costs.min(axis=0)  # singular cuts x relay cuts
            if not np.isfinite(prefill).any():
                continue
            # one row per singular cut (relay), per (singular, catch-up) cut (decode), as
            # ``Requirements.relay_all`` and ``main_all`` give them; elementwise, as one by
            # one, per RLD pace band (the band sets RLD's pace, and so MD's counts)
            for band in req.bands():
                band_p_costs, band_prefill = p_costs, prefill
                if band.index < 0:
                    if hosted is not None or sp.relay_required:
                        continue  # without relay decode: the plain pairing's
                    r_costs = np.tile(np.where(relays, np.inf, 0.0), (1, nsing, 1))
                elif rld:
                    r_costs = costs("relay_decode", rld, st, band, (nsing, ncut))
                    # a cut that relays nothing uses no RLD: not where RLD is required, and
                    # not for a host (a host of nothing is the plain pairing's option)
                    if sp.relay_required or hosted is not None:
                        r_costs = np.where(relays, r_costs, np.inf)
                    if hosted is not None:  # on the host's instances, at most one each:
                        # the host buys as many as its relay decode needs (``_host_count``)
                        host = senders[0]
                        n = _host_count(host, hosted, req.relay_all(rld[0], st, band))
                        band_p_costs = _costs(sp, [(host, n)], (nsing, ncut))
                        band_prefill = band_p_costs.min(axis=0)
                else:
                    continue
                m_costs = costs("main_decode", main, st, band, (nsing * ncatch, ncut))
                relay, decode = r_costs.min(axis=0), m_costs.min(axis=0)
                totals = np.repeat(band_prefill + relay, ncatch, axis=0) + decode + st.usd_per_hour
                least[-1] = min(least[-1], float(totals.min()))
                best = min(best, least[-1])
                roles = ((senders, band_p_costs), (rld, r_costs), (main, m_costs))
                tables.append((st, band, totals, relays, roles))
    return best, out, least


def _host_count(host: PoolOption, prefill: np.ndarray | int, relay: np.ndarray | int) -> np.ndarray:
    """A host's count with relay decode on its instances: at least its own prefill count
    (``prefill``) and one instance per hosted relay-decode instance (``relay``), rounded up
    to its purchase step (past its maximum: maximum + 1). The MILP's ``relay_within_host``
    and brute force buy the same."""
    n = np.maximum(prefill, relay)
    n = -(-n // host.unit_step) * host.unit_step
    return np.where(n > host.max_instances, host.max_instances + 1, n)


Pairing = tuple[list, np.ndarray, list, np.ndarray | None]
"""What ``_pairings`` returns per pairing: the prefill options, their costs per singular and
relay cut, the relay-decode options, the hosting option's counts (None: none hosts)."""


def _pairings(
    req: Requirements, st, first_s: float, limit: float = math.inf, first: bool = False
) -> list[Pairing]:
    """The (prefill options, their costs per singular and relay cut, relay-decode options,
    the hosting option's counts) the relaxation pairs in state ``st``: every plain sender
    with the relay-decode pools of their own (no hosting counts, None); and each hosting
    sender (a host) alone with the relay decode on its instances, its count with them
    (``Requirements.prefill`` per singular cut), at the cuts that relay in ``st``'s cache:
    bought without relay decode on it, a host's fleet is the plain option's
    (``Space.fleet``), priced at the plain option's counts. Only what a plan within
    ``limit`` plus the state's cost could use is counted, the rest left at inf: a sender
    whose cost at its utilization floor exceeds ``limit`` not at all, the others up to the
    most instances ``limit`` buys (``Requirements.prefill_within``). With ``first``, only
    the cheapest plain sender at its floor, without the hosting pairings
    (``_least_tables``)."""
    sp = req.space
    nsing, ncut = len(sp.singular_cuts), len(sp.cuts)
    senders = [o for o in sp.options["prefill"] if st.sent_by(o)]
    # counts searched to their end already are used as they are (a price sweep's later
    # points); the others are searched only as far as a plan within ``limit`` can use
    known = [req.prefill_known(o, st, first_s=first_s) for o in senders]

    def floor(o: PoolOption) -> float:
        """``o``'s cost at its utilization floor (at most its maximum count)."""
        return float(_low(sp, o, req.prefill_utilization_floor(o)))

    if first:
        unknown = [
            (floor(o), i)
            for i, (o, k) in enumerate(zip(senders, known, strict=True))
            if not k and not o.hosting
        ]
        pick = min(unknown)[1] if unknown and min(unknown)[0] <= limit else -1
        counted = [k or i == pick for i, k in enumerate(known)]
    else:
        counted = [k or floor(o) <= limit for o, k in zip(senders, known, strict=True)]

    apart = [o for o in sp.options["relay_decode"] if o.host is None and o.datacenter == st.p_dc]
    # the cuts a pairing's plan can use: without relay decode of its own, those that relay
    # nothing; where relay decode is required, those that relay something
    relays = np.asarray(sp.relay_matrix[st.cache].any(axis=1))
    usable = relays if sp.relay_required else np.ones(ncut, dtype=bool)

    def needs(o: PoolOption, on: bool, singular: int | None = None, rld: bool = True) -> np.ndarray:
        """``o``'s counts where they cost at most ``limit`` (``_most``) at a cut its
        pairing (with relay decode or not, ``rld``; a host's, only where it relays) can
        use, or past its maximum (cost inf) where they cost more, at the other cuts, or it
        is not counted."""
        if not on:
            return np.full(ncut, o.max_instances + 1)
        if req.prefill_known(o, st, singular, first_s=first_s):
            return req.prefill(o, st, singular, first_s=first_s)
        can = usable & relays if o.hosting else usable & (rld | ~relays)
        most = np.where(can, _most(sp, o, limit), -np.inf)
        return req.prefill_within(o, st, singular, first_s=first_s, most=most)

    # a host without relay decode on its instances: the plain option, paired already
    plain = [(o, c) for o, c in zip(senders, counted, strict=True) if not o.hosting]
    costs = _costs(sp, [(o, needs(o, c, rld=bool(apart))) for o, c in plain], ncut)
    out: list[Pairing] = [
        ([o for o, _ in plain], np.repeat(costs[:, None, :], nsing, axis=1), apart, None)
    ]
    if first:
        return out
    for p, c in zip(senders, counted, strict=True):
        on = [o for o in sp.options["relay_decode"] if o.host == p.key]
        if p.hosting and on and c:
            hosted = np.stack([needs(p, True, x) for x in sp.singular_cuts])
            out.append(([p], _costs(sp, [(p, hosted)], (nsing, ncut)), on, hosted))
    return out


def _shape(space: Space) -> tuple:
    """What a relaxation's cells are, beyond the counts: the options, the transfer states and
    whether relay decode is required (a runner-up family's space differs in these)."""
    return (
        tuple(o.key for r in ROLES for o in space.options[r]),
        tuple(st.key for st in space.states),
        space.relay_required,
    )


def _remember(req: Requirements, choice: Choice) -> None:
    """Keep ``choice``, a least-cost cell of the relaxation at ``req``'s prices, for the
    relaxations of other prices at this rate (``_remembered_total``)."""
    cell = tuple(
        (role, o.key, choice.instances[role]) for role, o in choice.options.items() if o is not None
    )
    req.least_cells.setdefault(_shape(req.space), (choice.state.key, cell))


def _remembered_total(req: Requirements) -> float:
    """The relaxation's total, at ``req``'s prices, of the least-cost cell found at other
    prices in a space of this shape (``_remember``): an upper bound on the least here, since
    the cell and its counts are the same; inf without one."""
    sp = req.space
    found = req.least_cells.get(_shape(sp))
    if found is None:
        return math.inf
    state_key, cell = found
    st = next((s for s in req.feasible_states if s.key == state_key), None)
    if st is None:
        return math.inf
    total = st.usd_per_hour
    for role, key, n in cell:
        o = next(o for o in sp.options[role] if o.key == key)
        total += float(_low(sp, o, n))
    return total


def _known(req: Requirements, st: State, first_s: float) -> bool:
    """Whether every prefill count ``_pairings`` asks for in ``st`` at MD first step
    ``first_s`` is searched to its end already."""
    sp = req.space
    for o in sp.options["prefill"]:
        if not st.sent_by(o):
            continue
        if not o.hosting:
            cuts: list[int | None] = [None]
        elif any(r.host == o.key for r in sp.options["relay_decode"]):
            cuts = list(sp.singular_cuts)  # a host's counts, per singular cut
        else:
            cuts = []  # hosting nothing: never paired (``_pairings``)
        for x in cuts:
            if not req.prefill_known(o, st, x, first_s=first_s):
                return False
    return True


def _most(space: Space, o: PoolOption, limit: float) -> float:
    """The most instances of ``o`` that cost at most ``limit`` per hour (``_low``; inf for
    no limit): past it, no count of ``o`` is part of a plan within the limit."""
    if not math.isfinite(limit):
        return math.inf
    costs = _low(space, o, np.arange(o.max_instances + 2))
    return float(np.searchsorted(costs, limit, side="right") - 1)


def _as_choice(req: Requirements, st, band, singular: int, catch_up: int, j: int, options):
    """The relaxation's minimizer as the MILP would report it: counts at the chosen cuts;
    a cut that relays nothing has no relay decode, no band, and the first singular and
    catch-up cuts (the others do not matter then)."""
    sp = req.space
    cut = sp.cuts[j]
    s, h = sp.singular_cuts[singular], sp.catch_up_cuts[catch_up]
    if not sp.relay_matrix[st.cache][j].any():
        options = {**options, "relay_decode": None}
        band, s, h = NO_RLD, sp.singular_cuts[0], sp.catch_up_cuts[0]
    instances = {r: 0 for r in ROLES}
    first_s = sp.first_step_s(options["main_decode"], st)
    instances["prefill"] = int(req.prefill(options["prefill"], st, s, first_s=first_s)[j])
    if options["relay_decode"] is not None:
        instances["relay_decode"] = int(req.relay(options["relay_decode"], st, s, band)[j])
        if options["relay_decode"].host is not None:  # one per host instance
            n = _host_count(options["prefill"], instances["prefill"], instances["relay_decode"])
            instances["prefill"] = int(n)
    instances["main_decode"] = int(req.main(options["main_decode"], st, s, h, band)[j])
    return Choice(options, instances, st, cut, s, h, band)


def plan_cost(space: Space, choice: Choice) -> float:
    """USD per hour of ``choice`` as the MILP's objective prices it: instances at full
    price, less what owned GPUs save (per datacenter and chip, up to the inventory, shared
    by the pools there), plus the link."""
    cost = choice.state.usd_per_hour
    used: dict[tuple[str, str], int] = {}
    for role, o in choice.options.items():
        if o is None:
            continue
        n = choice.instances[role]
        cost += n * o.usd_per_instance_hour
        key = (o.datacenter, o.chip)
        used[key] = used.get(key, 0) + n * o.bought_gpus
    for key, gpus in used.items():
        owned, discount = space.owned.get(key, (0, 0.0))
        cost -= discount * min(gpus, owned)
    return cost


def _meets_dropped_rows(space: Space, choice: Choice, budget: float | None) -> bool:
    """Whether ``choice`` is within every datacenter's GPU and power limits and the budget,
    and relay decode on prefill instances is on the chosen prefill option's, at most one
    per instance."""
    s, hw = space.scenario, space.hw
    rld, prefill = choice.options["relay_decode"], choice.options["prefill"]
    if rld is not None and rld.host is not None:
        if prefill is None or rld.host != prefill.key:
            return False
        if choice.instances["relay_decode"] > choice.instances["prefill"]:
            return False
    gpus: dict[str, int] = {}
    kw: dict[str, float] = {}
    for role, o in choice.options.items():
        if o is None:
            continue
        n = choice.instances[role] * o.bought_gpus
        dc = s.datacenters[o.datacenter]
        gpus[o.datacenter] = gpus.get(o.datacenter, 0) + n
        kw[o.datacenter] = kw.get(o.datacenter, 0.0) + n * hw.chips[o.chip].tdp_w / 1000 * dc.pue
    for dc_id, n in gpus.items():
        dc = s.datacenters[dc_id]
        if dc.max_gpus is not None and n > dc.max_gpus:
            return False
        if dc.max_power_kw is not None and kw[dc_id] > dc.max_power_kw * (1 + 1e-9):
            return False
    return budget is None or plan_cost(space, choice) <= budget * (1 + 1e-9)


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
            if cache_state is not None and o.store != cache_state.store:
                continue  # another tiered cache's instances
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
    by_twin: dict[tuple[str, Any], np.ndarray] = {}
    for k in range(len(space.caches)):  # each decode-side cache choice on its own
        states = np.full_like(lo, np.inf)
        longest = np.zeros((len(lo), len(w)))  # per cell: the longest WAN time per class
        payload = space.payloads[k]
        here = [st for st in space.states if st.cache == k]
        for st in here:
            if st.gbps is None:
                nic = space.hw.chips[st.sender].nic_bytes_per_s
                states = np.minimum(states, 0.0)
                sent = rdma_transfer_s(payload, nic_bytes_per_s=nic)
                longest = np.maximum(longest, np.maximum(sent, space.fetch_s[k]))
                continue
            total_payload = float(w @ payload)
            goodput = link_bytes_per_s(st.gbps, st.wan.tcp_efficiency)
            feasible = lo * total_payload / goodput <= space.link_rho * (1 + 1e-9)
            states = np.minimum(states, np.where(feasible, st.usd_per_hour, np.inf))
            path = TcpPath.of(st.wan)
            alone = None  # the transfer alone: the same in every cell
            for cell in np.nonzero(feasible)[0]:
                if (st.twin, cell) not in by_twin:  # twins: the same transfer and payloads
                    u = min(hi[cell] * total_payload / goodput, space.link_rho)
                    if alone is None:
                        alone = path.alone_s(payload, goodput)
                    by_twin[(st.twin, cell)] = wan_times(
                        payload,
                        path=path,
                        goodput_bytes_per_s=goodput,
                        utilization=u,
                        alone_s=alone,
                    )[0]
                wan = np.maximum(by_twin[(st.twin, cell)], space.fetch_s[k])
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
