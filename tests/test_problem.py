"""``Problem``: the derived tables are computed once, shared by derived problems whose inputs
did not change, and a problem and every result pickle (later work runs points in other
processes)."""

from __future__ import annotations

import pickle
from functools import cached_property

import pytest
from conftest import DATA, H100_H200, ROOT, SMALL

import pddplan
from pddplan.model.problem import TABLE_INPUTS, set_path


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow  # the default run stays under 90 s on a shared machine
def test_a_workload_change_keeps_the_instances_only():
    problem = pddplan.load_scenario(SMALL)
    pddplan.solve(problem, objective="min-cost")
    busier = problem.derive({"workload.output_tokens.median": 400})
    pddplan.solve(busier, objective="min-cost")
    assert busier.table_builds["instances"] == 0
    assert busier.table_builds["classes"] == 1 and busier.table_builds["prefill"] > 0


@pytest.mark.slow
def test_a_demand_change_keeps_every_table_but_the_rates():
    """A demand sweep's points differ in ``workload.arrival_rps`` alone: the request classes,
    the pass-time tables and the reuse samples are the same, and so is a fleet's capacity
    (the reuse grid is 2^k req/s whatever the demand); the counts at the new rate are new.
    The derived problem plans as one loaded afresh would."""
    problem = pddplan.load_scenario(SMALL)
    first = pddplan.solve(problem, objective="min-cost", marginals=False)
    busier = problem.derive({"workload.arrival_rps": 2 * problem.scenario.workload.arrival_rps})
    plan = pddplan.solve(busier, objective="min-cost", marginals=False)
    for table in ("classes", "instances", "prefill", "passes", "decode_points", "decode_steps"):
        assert busier.table_builds[table] == 0, table
    assert busier.table_builds["counts"] > 0
    # the counts are per rate: kept from point to point they would only grow
    assert busier._tables.counts is not problem._tables.counts
    alone = pddplan.Problem(busier.scenario, busier.hardware, busier.model, engines=busier.engines)
    again = pddplan.solve(alone, objective="min-cost", marginals=False)
    assert again.fleet == plan.fleet
    assert again.evaluation == plan.evaluation
    # the first plan's capacity, kept from the first problem, is the one a fresh problem at
    # the other demand finds
    from pddplan.evaluation.evaluator import sla_capacity

    searched = busier.table_builds["capacities"]
    kept = sla_capacity(busier, first.fleet)
    assert busier.table_builds["capacities"] == searched
    assert kept == first.evaluation.sla_capacity_rps == sla_capacity(alone, first.fleet)


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


@pytest.mark.slow  # the default run stays under 90 s on a shared machine
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


@pytest.mark.slow
def test_a_problem_with_count_searches_stopped_short_pickles():
    """The README's solve leaves prefill count searches stopped short (generators, kept on
    the problem: ``ScaledCounts.scans``); a pickled copy drops them and counts those from the
    start, to the same plan."""
    problem = pddplan.load_scenario(H100_H200)
    plan = pddplan.solve(problem, marginals=False)
    stopped = [
        m.scale_one.scans for m in problem._tables.counts.values() if hasattr(m, "scale_one")
    ]
    assert any(stopped)
    copy = pickle.loads(pickle.dumps(problem))
    assert not any(
        m.scale_one.scans for m in copy._tables.counts.values() if hasattr(m, "scale_one")
    )
    assert pddplan.solve(copy, marginals=False).fleet == plan.fleet


# --- what each table reads ------------------------------------------------------------------
def _scenario_paths(scenario) -> dict[int, str]:
    """Every model object in ``scenario``'s tree by id, as its dotted path without indexes
    (``links[0].tiers[2]`` is ``links.tiers``)."""
    from pddplan.spec.base import Frozen

    paths: dict[int, str] = {}

    def walk(value, path: str) -> None:
        if isinstance(value, Frozen):
            paths[id(value)] = path
            for name in type(value).model_fields:
                walk(object.__getattribute__(value, name), f"{path}.{name}" if path else name)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item, path)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item, path)

    walk(scenario, "")
    return paths


def _covered(read: str, declared: tuple[str, ...]) -> bool:
    """Whether ``declared`` inputs (``TABLE_INPUTS``' form) cover a read of ``read``."""
    from pddplan.model.problem import NON_PHYSICAL, RATE_ONLY, SHAPE

    for d in declared:
        if d == SHAPE:
            if read.startswith("workload.") and read.removeprefix("workload.") not in RATE_ONLY:
                return True
        elif d.endswith(":physical"):
            field = d.removesuffix(":physical")
            if (read == field or read.startswith(field + ".")) and read not in NON_PHYSICAL:
                return True
        elif read == d or read.startswith(d + "."):
            return True
    return False


def _record_reads(monkeypatch) -> dict[str, set[str]]:
    """Record, from here on, each scenario field read while a ``Problem`` fills one of its
    tables (``Problem._building``), under the innermost table being filled. Only the
    fields read are recorded, not the models read on the way to them."""
    from contextlib import contextmanager

    from pddplan.model.problem import Problem
    from pddplan.spec.base import Frozen

    reads: dict[str, set[str]] = {}
    building: list[str] = []
    paths: dict[int, str] = {}
    keep_alive: list[object] = []  # so that no id in ``paths`` is reused
    make = Problem.__init__

    def init(self, scenario, *args, **kwargs):
        paths.update(_scenario_paths(scenario))
        keep_alive.append(scenario)
        make(self, scenario, *args, **kwargs)

    @contextmanager
    def recording(self, table):
        self.table_builds[table] += 1
        building.append(table)
        try:
            yield
        finally:
            building.pop()

    plain = Frozen.__getattribute__

    def get(obj, name):
        value = plain(obj, name)
        field = building and id(obj) in paths and name in type(obj).model_fields
        if field and (not isinstance(value, Frozen | list | tuple) or not value):
            path = paths[id(obj)]
            reads.setdefault(building[-1], set()).add(f"{path}.{name}" if path else name)
        return value

    class Tracked:
        """A cached property of ``Problem`` whose reads count as its readers' reads,
        whenever they read it (it is computed once, perhaps outside any table)."""

        def __init__(self, prop: cached_property) -> None:
            self.func, self.name = prop.func, f"property {prop.attrname}"

        def __get__(self, obj, owner=None):
            if obj is None:
                return self
            kept = obj.__dict__.setdefault("_tracked", {})
            if self.name not in kept:
                building.append(self.name)
                try:
                    kept[self.name] = self.func(obj)
                finally:
                    building.pop()
            if building:
                reads.setdefault(building[-1], set()).update(reads.get(self.name, ()))
            return kept[self.name]

    for name, attr in list(vars(Problem).items()):
        if isinstance(attr, cached_property):
            monkeypatch.setattr(Problem, name, Tracked(attr))
    monkeypatch.setattr(Problem, "__init__", init)
    monkeypatch.setattr(Problem, "_building", recording)
    monkeypatch.setattr(Frozen, "__getattribute__", get)
    return reads


def _undeclared(reads: dict[str, set[str]]) -> dict[str, list[str]]:
    """Per table, the fields it read and does not declare."""
    tables = {t: found for t, found in reads.items() if t in TABLE_INPUTS}
    return {
        table: sorted(r for r in found if not _covered(r, TABLE_INPUTS[table]))
        for table, found in tables.items()
        if any(not _covered(r, TABLE_INPUTS[table]) for r in found)
    }


@pytest.mark.parametrize("scenario", [SMALL, pytest.param(H100_H200, marks=pytest.mark.slow)])
def test_each_table_reads_only_what_it_declares(scenario, monkeypatch):
    """A table is shared with a derived problem when its declared inputs are unchanged
    (``Problem.with_scenario``); a field it reads without declaring would give a derived
    problem stale figures. Every scenario field a table reads while a solve and an
    evaluation fill it is among its ``TABLE_INPUTS``."""
    reads = _record_reads(monkeypatch)
    problem = pddplan.load_scenario(scenario)
    plan = pddplan.solve(problem, objective="min-cost")
    pddplan.evaluate(problem, plan.fleet)
    assert {"classes", "instances", "prefill", "decode_points", "capacities"} <= set(reads)
    assert _undeclared(reads) == {}


def test_an_undeclared_read_is_caught(monkeypatch):
    """The recording sees a read the declarations leave out: the instances are built from
    the KV dtype, and without it declared the check names it."""
    reads = _record_reads(monkeypatch)
    problem = pddplan.load_scenario(SMALL)
    pddplan.solve(problem, objective="min-cost")
    short = {
        **TABLE_INPUTS,
        "instances": tuple(k for k in TABLE_INPUTS["instances"] if k != "kv_dtype"),
    }
    monkeypatch.setattr("test_problem.TABLE_INPUTS", short)
    assert _undeclared(reads) == {"instances": ["kv_dtype"]}


def test_every_scenario_field_is_physical_or_not():
    """``NON_PHYSICAL`` names real fields, and the physical tables' inputs are every other
    field (a new field is an input of the counts and the capacities unless listed)."""
    from pddplan.model.problem import _PHYSICAL, NON_PHYSICAL
    from pddplan.spec.scenario import Scenario

    top = {f.split(".")[0] for f in NON_PHYSICAL}
    assert top <= set(Scenario.model_fields)
    physical = {f.split(":")[0] for f in _PHYSICAL} - {"hardware", "engines"}
    assert physical | top == set(Scenario.model_fields)
    assert physical & top == {"links", "search"}  # the links' prices, max BCR's tolerances
    assert TABLE_INPUTS["capacities"] == _PHYSICAL
    assert TABLE_INPUTS["counts"] == (*_PHYSICAL, "workload.arrival_rps")  # per rate


@pytest.mark.slow
def test_a_routed_fleets_capacity_does_not_depend_on_the_demand():
    """With a tiered decode-side cache too (the README's scenario): the reuse grid does not
    move with the demand, and a fleet with a router reads the demand nowhere, so problems
    at other demands may share its capacity."""
    from pddplan.evaluation.evaluator import Evaluator, sla_capacity

    problem = pddplan.load_scenario(H100_H200)
    fleet = pddplan.load_fleet(ROOT / "fleets" / "pdd-h100-h200-example.yaml", problem)
    routed = fleet.model_copy(update={"routing": Evaluator(problem, fleet).routing})
    capacities = set()
    for rate in (0.5, 4.0, 40.0):
        fresh = problem.derive({"workload.arrival_rps": rate})
        alone = pddplan.Problem(fresh.scenario, fresh.hardware, fresh.model, engines=fresh.engines)
        capacities.add(sla_capacity(alone, routed))
    assert len(capacities) == 1
