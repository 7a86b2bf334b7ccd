"""A cheap lower bound on the minimum cost per rate, for the max-BCR search
(``pddplan.plan.search``)."""

from __future__ import annotations

import math

import numpy as np

from pddplan import units
from pddplan.model.network import link_bytes_per_s, rdma_transfer_s, wan_transfer_s_many
from pddplan.plan.counts import Requirements
from pddplan.plan.space import PoolOption, Space
from pddplan.spec.scenario import Role


def _low(space: Space, o: PoolOption, n):
    """The cost of ``n`` instances of ``o``, as many of its GPUs owned as the inventory
    allows (owned GPUs at their running cost), so never above what a plan pays."""
    owned, discount = space.owned.get((o.datacenter, o.chip), (0, 0.0))
    return n * o.usd_per_instance_hour - discount * np.minimum(n * o.gpus, owned)


def _cheapest(space: Space, needs: list[tuple[PoolOption, np.ndarray]], shape) -> np.ndarray:
    """Elementwise, the cheapest of the options' minimum counts (inf past an option's
    maximum, or with no option)."""
    best = np.full(shape, np.inf)
    for o, n in needs:
        best = np.minimum(best, np.where(n > o.max_instances, np.inf, _low(space, o, n)))
    return best


def relaxed_cost(req: Requirements) -> float:
    """A lower bound on the minimum-cost MILP's optimum at ``req.rate`` (inf: no plan).

    The MILP picks one option per role, one transfer state and one relay, singular and
    catch-up cut, each option at least its minimum count for those choices
    (``Requirements``). Dropping the datacenter limits (GPUs, power) and pricing each pool
    with as many of its GPUs owned as the inventory allows leaves, per transfer state and
    cut, the sum of each role's cheapest option at its minimum count: the minimum of that
    over the choices never exceeds the MILP's optimum, and equals it when no limit binds."""
    sp = req.space
    ncut = len(sp.cuts)
    nsing, ncatch = len(sp.singular_cuts), len(sp.catch_up_cuts)
    best = math.inf
    for st in req.feasible_states:
        prefill = _cheapest(
            sp,
            [(o, req.prefill(o, st)) for o in sp.options["prefill"] if st.sent_by(o)],
            ncut,
        )
        if not np.isfinite(prefill).any():
            continue
        # one row per singular cut (relay), per (singular, catch-up) cut (decode), as
        # ``Requirements.relay_all`` and ``main_all`` give them; elementwise, as one by one
        rld = [o for o in sp.options["relay_decode"] if o.datacenter == st.p_dc]
        if rld:
            relay = _cheapest(sp, [(o, req.relay_all(o, st)) for o in rld], (nsing, ncut))
        else:
            relays = sp.relay_matrix[st.cache].any(axis=1)
            relay = np.tile(np.where(relays, np.inf, 0.0), (nsing, 1))
        main = [o for o in sp.options["main_decode"] if o.datacenter == st.md_dc]
        decode = _cheapest(sp, [(o, req.main_all(o, st)) for o in main], (nsing * ncatch, ncut))
        totals = (prefill + np.repeat(relay, ncatch, axis=0) + decode).min(axis=1)
        best = min(best, float((totals + st.usd_per_hour).min()))
    return best


def cost_floor(space: Space, grid: np.ndarray) -> np.ndarray:
    """For each cell ``[grid[i], grid[i+1]]`` of rates, a lower bound on the cheapest plan's
    cost per hour anywhere in the cell (inf where no option can carry the rate).

    It adds the cheapest prefill option at its utilization floor to the cheapest, over the
    decode-side cache choices, of: the cheapest transfer state of that cache choice within
    the link cap, plus the cheapest main decode at its utilization floor (at the batch that
    cache choice leaves): for
    every token, or, if requests may be relayed, for the fewest tokens relaying can leave
    it (every request relayed, with the eager tokens of the slowest state still feasible at
    the cell's start, its WAN time taken at the cell's end) plus one RLD purchase step. It
    ignores TTFT, TPOT and the coupling between roles, so it never exceeds the MILP's
    minimum. ``pddplan.plan.search`` uses it to prune rate intervals for max BCR."""
    lo, hi = np.asarray(grid[:-1], dtype=float), np.asarray(grid[1:], dtype=float)
    w = space.w

    def cheapest(role: Role, tokens: np.ndarray | float, cache_state=None) -> np.ndarray:
        best = np.full_like(lo, np.inf)
        for o in space.options[role]:
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
    for k in range(len(space.caches)):  # each decode-side cache choice on its own
        states = np.full_like(lo, np.inf)
        longest = np.zeros((len(lo), len(w)))  # per cell: the longest WAN time per class
        payload = space.payloads[k]
        here = [st for st in space.states if st.cache == k]
        for st in here:
            if st.gbps is None:
                nic = space.hw.chips[st.p_chip].nic_bytes_per_s
                states = np.minimum(states, 0.0)
                longest = np.maximum(longest, rdma_transfer_s(payload, nic_bytes_per_s=nic))
                continue
            total_payload = float(w @ payload)
            goodput = link_bytes_per_s(st.gbps, st.link.tcp_efficiency)
            feasible = lo * total_payload / goodput <= space.link_rho * (1 + 1e-9)
            states = np.minimum(states, np.where(feasible, st.usd_per_hour, np.inf))
            rtt = st.link.rtt_ms * units.MS
            cells = np.nonzero(feasible)[0]
            u = np.minimum(hi[cells] * total_payload / goodput, space.link_rho)
            share = (goodput * (1 - u))[:, None]  # one row per cell
            wan = wan_transfer_s_many(payload, rtt_s=rtt, share_bytes_per_s=share)
            longest[cells] = np.maximum(longest[cells], wan + rtt / 2)
        if not here:
            continue
        decode = cheapest("main_decode", float(w @ space.out), here[0])
        if relaying:
            eager = np.minimum(space.out, np.ceil(longest / space.tpot_s))
            singular = space.out <= max(space.singular_cuts)
            fewest = np.where(singular, 0.0, space.out - eager) @ w
            rld = min(float(_low(space, o, o.unit_step)) for o in space.options["relay_decode"])
            decode = np.minimum(decode, cheapest("main_decode", fewest, here[0]) + rld)
        total = np.minimum(total, decode + states)
    return prefill + total
