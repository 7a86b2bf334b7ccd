"""``pddplan solve --method enumerate``: brute force over the planner's decisions, every
candidate scored by the evaluator (``pddplan.evaluation.evaluator``), never by the MILP's rows.

A candidate is one option per role (relay decode optional), a transfer state, instance
counts (multiples of each option's purchase step, up to its maximum), a relay cut, a
singular cut and a catch-up cut: the same choices ``pddplan.plan.space.Space`` offers the
MILP. Datacenter limits (GPUs, power, inventory) and the budget are checked directly.

- min cost: candidates in increasing cost order; the first cost at which the evaluator finds
  one serving the demand is the optimum, and of the candidates of that cost that serve it,
  the tie rule (``pddplan.plan.search.widest``: most SLA capacity, then the shortest TTFT
  P99 at the demand, then the first) picks the plan, as the MILP's search does. Every
  limit is monotone in the instance counts (more instances never raise a utilization, a
  queueing wait or a stall fraction), so a skeleton (options, state, cuts) the evaluator
  rejects at its largest counts is skipped whole.
- max BCR / max capacity: candidates in decreasing order of an upper bound on their
  capacity (prefill's utilization cap, which the evaluator also enforces); the evaluator's
  SLA capacity of each, until no bound can beat the best.

It is exponential in the number of choices: meant for small scenarios and for checking the
MILP (``tests/test_enumerate.py``).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import replace

import numpy as np

from pddplan.errors import ArgumentError
from pddplan.evaluation.evaluator import (
    CAPACITY_TOLERANCE,
    capacity_if_serving,
    meets_sla,
    serves,
    sla_capacity,
)
from pddplan.model.problem import Problem
from pddplan.plan.results import PlanResult, SolveStats
from pddplan.plan.search import finish_plan, widest
from pddplan.plan.space import Choice, PoolOption, Space
from pddplan.spec.choices import MAX_BCR, MAX_CAPACITY, MIN_COST, Objective
from pddplan.spec.status import PlanStatus

MAX_CANDIDATES = 2_000_000
"""Refuse to enumerate more candidates than this (use the MILP)."""


def _counts(o: PoolOption | None) -> range:
    if o is None:
        return range(0, 1)
    return range(o.unit_step, o.max_instances + 1, o.unit_step)


def _skeletons(space: Space) -> Iterator[tuple]:
    """(prefill, relay decode or None, main decode, state, cut, singular, catch-up)."""
    rld_options: list[PoolOption | None] = [None, *space.options["relay_decode"]]
    for p, r, m, st in itertools.product(
        space.options["prefill"], rld_options, space.options["main_decode"], space.states
    ):
        if p.datacenter != st.p_dc or not st.received_by(m):
            continue
        if st.p_chip is not None and st.p_chip != p.chip:
            continue
        if r is not None and r.datacenter != p.datacenter:
            continue
        if r is not None and r.host is not None and r.host != p.key:
            continue  # relay decode on prefill instances: on this prefill option's only
        if p.hosting and (r is None or r.host is None):
            continue  # hosting nothing, its fleet is the plain prefill option's
        relays = np.asarray(space.relay_matrix[st.cache].any(axis=1))
        for cut, relaying in zip(space.cuts, relays, strict=True):
            if (cut is None) != (r is None):
                continue  # relaying needs RLD; an RLD pool with nothing to do is dominated
            if p.hosting and not relaying:
                continue  # a host relays: else its fleet is the plain prefill option's
            routers = (
                [(space.singular_cuts[0], space.catch_up_cuts[0])]
                if cut is None
                else itertools.product(space.singular_cuts, space.catch_up_cuts)
            )
            for singular, catch_up in routers:
                yield p, r, m, st, cut, singular, catch_up


def _candidates(space: Space, budget: float | None, limit: int) -> list[tuple[float, int, Choice]]:
    """Every candidate within the datacenter limits and the budget, with its cost."""
    total = sum(
        len(_counts(p)) * len(_counts(r)) * len(_counts(m)) for p, r, m, *_ in _skeletons(space)
    )
    if total > limit:
        raise ArgumentError(
            "method",
            f"{{argument}} enumerate: {total:,} candidates, more than {limit:,}; "
            "use the MILP (the default) for a scenario this size",
        )
    out: list[tuple[float, int, Choice]] = []
    for p, r, m, st, cut, singular, catch_up in _skeletons(space):
        for n_p, n_r, n_m in itertools.product(_counts(p), _counts(r), _counts(m)):
            if r is not None and r.host is not None and n_r != n_p:
                continue  # the fleet hosts relay decode on every prefill instance
            pools = [(p, n_p), (r, n_r), (m, n_m)]
            usage = [(o.datacenter, o.chip, o.bought_gpus * n) for o, n in pools if o is not None]
            if not space.within_limits(usage):
                continue
            cost = st.usd_per_hour + space.pools_cost(pools)
            if budget is not None and cost > budget:
                continue
            choice = Choice(
                {"prefill": p, "relay_decode": r, "main_decode": m},
                {"prefill": n_p, "relay_decode": n_r, "main_decode": n_m},
                st,
                cut,
                singular,
                catch_up,
            )
            out.append((cost, len(out), choice))
    return out


def _skeleton_key(c: Choice) -> tuple:
    return (
        tuple(None if o is None else o.key for o in c.options.values()),
        c.state.key,
        c.cut,
        c.singular,
        c.catch_up,
    )


def _largest(c: Choice) -> Choice:
    """The same skeleton with every pool at its most instances."""
    counts = {r: (o.max_instances if o is not None else 0) for r, o in c.options.items()}
    return replace(c, instances=counts)


def enumerate_plan(
    problem: Problem,
    *,
    objective: Objective | None = None,
    max_candidates: int = MAX_CANDIDATES,
    marginals: bool = True,
) -> PlanResult:
    """The optimum by brute force (see the module docstring); ``marginals`` as
    ``solve_plan``'s."""
    scenario = problem.scenario
    objective = objective or scenario.objective
    start = time.perf_counter()
    space = Space(problem)
    budget = scenario.budget_usd_per_hour if objective == MAX_CAPACITY else None
    candidates = _candidates(space, budget, max_candidates)
    demand = (scenario.workload.arrival_rps or 0.0) * (1 + scenario.headroom)
    scored = 0
    bound: float | None = None
    best: Choice | None = None

    def fleet(c: Choice):
        return space.fleet(c, f"{scenario.name}-plan")

    if objective == MIN_COST:
        # the first cost at which a candidate serves the demand; of those at that cost that
        # do, the one the tie rule prefers (``search.widest``), as the MILP's search picks
        at_most: dict[tuple, bool] = {}  # skeleton -> feasible at its largest counts
        least: float | None = None
        served: list[tuple[Choice, float]] = []
        for cost, _, c in sorted(candidates, key=lambda x: (x[0], x[1])):
            if least is not None and cost > least * (1 + 1e-9) + 1e-9:
                break
            skeleton = _skeleton_key(c)
            if skeleton not in at_most:
                scored += 1
                at_most[skeleton] = meets_sla(problem, fleet(_largest(c)), demand)
            if not at_most[skeleton]:
                continue
            scored += 1
            capacity = capacity_if_serving(problem, fleet(c), demand)
            if capacity is not None and serves(capacity, demand):
                least = cost if least is None else least
                served.append((c, capacity))
        if served:
            best = widest(space, served, demand)[0]
    else:
        bounded = []
        for cost, i, c in candidates:
            prefill = c.options["prefill"]
            if prefill is None:  # every candidate has one (_skeletons)
                raise ValueError("a candidate without a prefill option")
            svc = float(space.w @ space.prefill_times(prefill).service)
            upper = c.instances["prefill"] * space.rho / svc
            key = upper / cost if objective == MAX_BCR else upper
            bounded.append((key, -cost, -i, upper, cost, c))
        bounded.sort(key=lambda x: (x[0], x[1], x[2]), reverse=True)
        best_value = 0.0
        capacities: dict[int, float] = {}
        for key, _, minus_i, _, cost, c in bounded:
            if key <= best_value:
                break
            scored += 1
            capacity = capacities[-minus_i] = sla_capacity(problem, fleet(c))
            if capacity <= 0 or (objective == MAX_BCR and not serves(capacity, demand)):
                continue
            value = capacity / cost if objective == MAX_BCR else capacity
            if value > best_value * (1 + 2 * CAPACITY_TOLERANCE):
                best, best_value = c, value
        if objective == MAX_BCR and best is not None:
            # the cheapest candidate within the plateau of the best BCR
            bound = best_value
            threshold = (1 - scenario.search.bcr_plateau) * best_value
            by_cost = sorted(bounded, key=lambda x: (x[4], -x[2]))
            for key, _, minus_i, _, cost, c in by_cost:
                if key < threshold:
                    continue  # its capacity bound cannot reach the plateau
                if -minus_i not in capacities:
                    scored += 1
                    capacities[-minus_i] = sla_capacity(problem, fleet(c))
                capacity = capacities[-minus_i]
                if serves(capacity, demand) and capacity / cost >= threshold:
                    best = c
                    break
    stats = SolveStats(
        objective,
        "enumerate",
        PlanStatus.OPTIMAL if best is not None else PlanStatus.INFEASIBLE,
        time.perf_counter() - start,
        candidates=len(candidates),
        evaluated=scored,
        bcr_bound=bound,
        bcr_best=bound,
    )
    return finish_plan(space, stats, best, method="enumerate", marginals=marginals)
