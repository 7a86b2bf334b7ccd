"""The runner-ups (``pddplan.plan.alternatives``): each family's cheapest deployment at the
demand, against brute force over every candidate of that family, on the shipped small
scenario and random small ones; the families; the restricted space's shared tables."""

from __future__ import annotations

import math

import pytest
from conftest import SMALL, problem_of
from test_enumerate import random_scenario

import pddplan
from pddplan.evaluation.evaluator import capacity_if_serving, meets_sla, serves
from pddplan.plan.alternatives import ON_PREFILL, Family, families
from pddplan.plan.brute_force import MAX_CANDIDATES, _candidates, _largest, _skeleton_key
from pddplan.plan.counts import Requirements
from pddplan.plan.search import solve_plan
from pddplan.plan.space import Space
from pddplan.work import counted


def brute_force_by_family(problem: pddplan.Problem) -> dict[Family, float]:
    """Each family's least cost among the candidates that serve the demand, scored by the
    evaluator alone (no MILP, no count table): every candidate of the space, cheapest
    first, per family."""
    space = Space(problem)
    demand = problem.scenario.workload.arrival_rps or 0.0
    best: dict[Family, float] = {}
    feasible: dict[tuple, bool] = {}
    for cost, _, c in sorted(_candidates(space, None, MAX_CANDIDATES), key=lambda x: x[:2]):
        f = Family.of(c)
        if f in best:
            continue
        skeleton = _skeleton_key(c)
        if skeleton not in feasible:
            feasible[skeleton] = meets_sla(problem, space.fleet(_largest(c), "x"), demand)
        if not feasible[skeleton]:
            continue
        capacity = capacity_if_serving(problem, space.fleet(c, "x"), demand)
        if capacity is not None and serves(capacity, demand):
            best[f] = cost
    return best


def test_the_small_scenario_has_four_families():
    names = [f.label for f in families(Space(pddplan.load_scenario(SMALL)))]
    assert names == [  # by hand: P on h100 in east; MD on a100 or l40s in west; RLD or none
        "cross-DC PD: P h100-sxm (east), MD a100-80g-sxm (west)",
        "PDD: P h100-sxm + RLD h100-sxm (east), MD a100-80g-sxm (west)",
        "cross-DC PD: P h100-sxm (east), MD l40s (west)",
        "PDD: P h100-sxm + RLD h100-sxm (east), MD l40s (west)",
    ]


@pytest.mark.slow
def test_the_small_scenario_has_three_runner_ups_cheapest_first():
    problem = pddplan.load_scenario(SMALL)
    with counted() as work:
        r = pddplan.solve(problem, top=3)
    assert work["runner_up_bounds"] == 3  # every other family bounded
    assert work["runner_up_plans"] == 3  # and the three planned
    assert r.runner_ups is not None and r.fleet is not None
    assert r.runner_ups.families == 4
    own = Family.of_fleet(r.fleet)
    rows = r.runner_ups.rows
    assert len(rows) == 3 and own not in [x.family for x in rows]
    costs = [x.cost_per_hour_usd for x in rows]
    assert costs == sorted(costs) and costs[0] >= r.evaluation.cost_per_hour_usd
    # a PDD runner-up has relay decode: its family requires it
    for x in rows:
        has_rld = any(p.role == "relay_decode" for p in x.fleet.pools)
        assert has_rld == (x.family.relay is not None)
        assert x.evaluation.status == "ok"
    assert pddplan.solve(problem, top=1).runner_ups.rows == rows[:1]
    assert pddplan.solve(problem).runner_ups is None  # the API's default: none asked for


@pytest.mark.slow
@pytest.mark.parametrize(
    ("seed", "milp"), [(0, False), (1, False), (5, False), (7, False), (1, True), (6, True)]
)
def test_each_runner_up_is_its_familys_brute_force_optimum(
    seed, milp, hardware, models, monkeypatch
):
    """``milp``: with the relaxation's plan never taken as exact, so each family is solved
    by the MILP (with ``relay_required``'s row where it has relay decode)."""
    from pddplan.plan import search
    from pddplan.plan.bounds import RelaxedOptimum

    if milp:
        exact = search.relaxed_optimum

        def bound_only(*args, **kwargs):
            return RelaxedOptimum(exact(*args, **kwargs).cost)

        monkeypatch.setattr(search, "relaxed_optimum", bound_only)
    problem = problem_of(random_scenario(seed), hardware, models)
    with counted() as work:
        r = solve_plan(problem, top=20)
    assert r.fleet is not None and (work["milp_solves"] > 0) == milp
    brute = brute_force_by_family(problem)
    assert math.isclose(min(brute.values()), r.evaluation.cost_per_hour_usd, rel_tol=1e-9)
    own = Family.of_fleet(r.fleet)
    listed = [f for f in families(Space(problem)) if f != own]
    expected = {f: brute[f] for f in listed if f in brute}
    found = {x.family: x.cost_per_hour_usd for x in r.runner_ups.rows}
    assert found.keys() == expected.keys(), (seed, sorted(f.label for f in expected))
    for f, cost in expected.items():
        assert math.isclose(found[f], cost, rel_tol=1e-9), (seed, f.label, found[f], cost)
    assert {f.label for f in r.runner_ups.unserved} == {
        f.label for f in listed if f not in expected
    }


def test_a_restricted_space_shares_the_count_tables():
    problem = pddplan.load_scenario(SMALL)
    space = Space(problem)
    rate = problem.scenario.workload.arrival_rps
    full = Requirements(space, rate)
    fam = families(space)[0]
    sub = fam.space(space)
    assert sub.structure == space.structure
    assert Requirements(sub, rate)._pools is full._pools  # one memo: nothing recomputed
    assert all(fam.admits(o) for opts in sub.options.values() for o in opts)
    assert all(fam.carries(st) for st in sub.states)
    assert not sub.relay_required and fam.relay is None
    assert space.options["relay_decode"] and not sub.options["relay_decode"]


def test_family_words():
    f = Family(("a", "h100"), ("b", "h200"), ("a", "h100"))
    assert f.architecture == "PDD" and f.label == "PDD: P h100 + RLD h100 (a), MD h200 (b)"
    assert Family(("a", "h100"), ("b", "h200"), ON_PREFILL).architecture == "PDD, RLD on P GPUs"
    assert Family(("a", "h100"), ("b", "h200"), None).architecture == "cross-DC PD"
    intra = Family(("a", "h100"), ("a", "h200"), None)
    assert intra.intra_dc and intra.label == "intra-DC PD: P h100 + MD h200 (a)"
