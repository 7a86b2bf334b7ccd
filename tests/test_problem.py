"""``Problem``: the derived tables are computed once, shared by derived problems whose inputs
did not change, and a problem and every result pickle (later work runs points in other
processes)."""

from __future__ import annotations

import pickle

import pytest
from conftest import DATA, H100_H200, SMALL

import pddplan
from pddplan.model.problem import TABLE_INPUTS, set_path


def test_a_price_change_rebuilds_no_table():
    problem = pddplan.load_scenario(H100_H200)
    first = pddplan.solve(problem, objective="min-cost")
    assert problem.table_builds["instances"] > 0 and problem.table_builds["prefill"] > 0
    dearer = problem.derive({"prices_usd_per_gpu_hour.h200-sxm": 4.2})
    plan = pddplan.solve(dearer, objective="min-cost")
    assert sum(dearer.table_builds.values()) == 0, dearer.table_builds
    # and it is the plan a problem loaded from scratch with that price gets
    fresh = pddplan.load_scenario(H100_H200).derive({"prices_usd_per_gpu_hour.h200-sxm": 4.2})
    again = pddplan.solve(fresh, objective="min-cost")
    assert plan.evaluation.cost_per_hour_usd == pytest.approx(again.evaluation.cost_per_hour_usd)
    assert plan.fleet == again.fleet
    assert plan.evaluation.cost_per_hour_usd > first.evaluation.cost_per_hour_usd


def test_counts_are_shared_across_link_prices_but_not_across_the_link():
    """The planner's minimum counts depend on no price: a dearer link tier reuses them (and
    plans as a problem loaded afresh does), a longer round trip counts again."""
    problem = pddplan.load_scenario(H100_H200)
    pddplan.solve(problem, objective="min-cost")
    assert problem.table_builds["counts"] > 0 and problem.table_builds["capacities"] > 0
    dearer = problem.derive({"links[0].tiers[3].usd_per_month": 30_000})
    plan = pddplan.solve(dearer, objective="min-cost")
    assert dearer.table_builds["counts"] == 0, dearer.table_builds
    fresh = pddplan.load_scenario(H100_H200).derive({"links[0].tiers[3].usd_per_month": 30_000})
    again = pddplan.solve(fresh, objective="min-cost")
    assert plan.fleet == again.fleet and fresh.table_builds["counts"] > 0
    assert plan.evaluation.cost_per_hour_usd == again.evaluation.cost_per_hour_usd
    farther = problem.derive({"links[0].rtt_ms": 60})
    pddplan.solve(farther, objective="min-cost")
    assert farther.table_builds["counts"] > 0 and farther.table_builds["capacities"] > 0


def test_a_workload_change_keeps_the_instances_only():
    problem = pddplan.load_scenario(SMALL)
    pddplan.solve(problem, objective="min-cost")
    busier = problem.derive({"workload.output_tokens.median": 400})
    pddplan.solve(busier, objective="min-cost")
    assert busier.table_builds["instances"] == 0
    assert busier.table_builds["classes"] == 1 and busier.table_builds["prefill"] > 0


def test_each_table_declares_inputs_that_exist():
    problem = pddplan.load_scenario(SMALL)
    for inputs in TABLE_INPUTS.values():
        for name in inputs:
            problem._input(name)  # raises if a declared input is not a scenario field


def test_derive_validates_and_names_the_path():
    problem = pddplan.load_scenario(SMALL)
    with pytest.raises(pddplan.InputError, match="arrival_rps"):
        problem.derive({"workload.arrival_rps": -1})
    with pytest.raises(pddplan.InputError, match=r"has no links\[3\]\.rtt_ms"):
        problem.derive({"links[3].rtt_ms": 10})
    data = {"a": [{"b": 1}]}
    set_path(data, "a[0].b", 2)
    assert data == {"a": [{"b": 2}]}


def test_problem_and_results_pickle():
    problem = pddplan.load_scenario(SMALL)
    plan = pddplan.solve(problem, objective="min-cost")
    fleet = pddplan.load_fleet(DATA / "fleets" / "small.yaml", problem)
    sim = pddplan.simulate(problem, fleet, requests=500, rate_rps=2.0)
    for value in (problem, plan, plan.evaluation, sim, pddplan.load_catalogs()):
        again = pickle.loads(pickle.dumps(value))
        assert type(again) is type(value)
    copy = pickle.loads(pickle.dumps(problem))
    assert copy.scenario == problem.scenario and copy.table_builds == problem.table_builds
    assert pddplan.solve(copy, objective="min-cost").fleet == plan.fleet
