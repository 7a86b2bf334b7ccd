"""An infeasible scenario explained in the user's units: each printed relaxation is the
value a solve found a plan at (checked here by setting it in the scenario and solving
again), one step tighter is still infeasible, purchase units are named when they are the
reason, and a full link is named where it stops the demand."""

from __future__ import annotations

import pytest
from conftest import SMALL, problem_of, triple

from pddplan.io.scenario import load_scenario
from pddplan.plan.explain import _grid
from pddplan.plan.results import Relaxation
from pddplan.plan.search import solve_plan
from pddplan.spec.scenario import Scenario


def with_value(model, path: str, value: float):
    """``model`` with the value at dotted ``path`` replaced (``datacenters.east.max_gpus``;
    ``links[i].tiers``: a tier of ``value`` Gbit/s added at the fastest tier's price)."""
    head, _, rest = path.partition(".")
    if head.startswith("links["):
        i = int(head[len("links[") : -1])
        links = list(model.links)
        top = links[i].tiers[-1]
        links[i] = links[i].model_copy(
            update={"tiers": (*links[i].tiers, top.model_copy(update={"gbps": value}))}
        )
        return model.model_copy(update={"links": tuple(links)})
    if not rest:
        if isinstance(getattr(model, head), int):
            value = int(value)
        return model.model_copy(update={head: value})
    child = getattr(model, head)
    if isinstance(child, dict):
        key, _, rest = rest.partition(".")
        return model.model_copy(update={head: {**child, key: with_value(child[key], rest, value)}})
    return model.model_copy(update={head: with_value(child, rest, value)})


def feasible(scenario: Scenario, hardware, models, relax: Relaxation, values) -> bool:
    for key, v in zip(relax.keys, values, strict=True):
        scenario = with_value(scenario, key, v)
    out = solve_plan(problem_of(scenario, hardware, models), objective="min-cost", explain=False)
    return out.status != "infeasible"


def tighter(relax: Relaxation) -> tuple[float, ...]:
    """One step tighter than the printed values: a GPU fewer, else 2% (the bisection's
    0.1% plus the printed grid's 3 significant figures), demand 2% more."""
    if relax.unit == "GPUs":
        return tuple(
            v - 1 if v != n else v for v, n in zip(relax.needed, relax.scenario_values, strict=True)
        )
    if relax.family == "demand":
        return tuple(v * 1.02 for v in relax.needed)
    return tuple(
        v / 1.02 if v != n else v for v, n in zip(relax.needed, relax.scenario_values, strict=True)
    )


def solved(scenario: Scenario, hardware, models):
    r = solve_plan(problem_of(scenario, hardware, models), objective="min-cost")
    assert r.status == "infeasible" and r.fleet is None
    return r


@pytest.mark.slow
def test_a_tight_ttft_is_relaxed_to_a_value_checked_by_solving_again(hardware, models):
    """A TTFT SLA no prefill can meet: every limit that helps alone is printed at a value
    the planner finds a plan at, and 2% tighter it still finds none; TPOT cannot help."""
    s, hw, catalog = triple(load_scenario(SMALL))
    tight = s.model_copy(
        update={"sla": s.sla.model_copy(update={"ttft_p90_s": 0.05, "ttft_p99_s": 0.1})}
    )
    r = solved(tight, hw, catalog)
    by = {x.family: x for x in r.relaxations}
    both = by["TTFT P90 and P99"]
    assert both.keys == ("sla.ttft_p90_s", "sla.ttft_p99_s") and both.unit == "s"
    assert by["TPOT"].needed == () and by["TPOT"].factor is None
    helped = [x for x in r.relaxations if x.needed]
    assert {"TTFT P90", "TTFT P90 and P99"} <= {x.family for x in helped}
    for relax in helped:
        assert relax.verified, relax
        for v, n in zip(relax.needed, relax.scenario_values, strict=True):
            if v != n:
                assert f"{v:.4g}" in relax.message, relax  # the value printed is the one solved
        assert feasible(tight, hw, catalog, relax, relax.needed), relax
        assert not feasible(tight, hw, catalog, relax, tighter(relax)), relax


@pytest.mark.slow  # over 1 s: the default run's time (README)
def test_a_purchase_unit_that_the_gpu_limit_cannot_hold_is_named(hardware, models):
    """An 8B model fits one H100, but H100s come in 8-GPU nodes: with max_gpus 6 the
    reason is the unit, and the relaxation is exactly 8 GPUs (7 is still infeasible)."""
    s, hw, catalog = triple(load_scenario(SMALL))
    dcs = dict(s.datacenters)
    dcs["east"] = dcs["east"].model_copy(update={"max_gpus": 6})
    six = s.model_copy(update={"datacenters": dcs})
    r = solved(six, hw, catalog)
    options = r.relaxations[0]
    assert options.family == "options"
    assert "8-GPU units" in options.message and "datacenters.east.max_gpus is 6" in options.message
    assert "weights on 1 GPU" in options.message
    east = next(x for x in r.relaxations if x.keys == ("datacenters.east.max_gpus",))
    assert east.needed == (8,) and east.verified
    assert "datacenters.east.max_gpus 8 GPUs (the scenario has 6 GPUs)" in east.message
    assert "bought in 8-GPU units" in east.message
    assert feasible(six, hw, catalog, east, (8,))
    assert not feasible(six, hw, catalog, east, (7,))


@pytest.mark.slow
def test_a_full_link_is_named_with_the_bandwidth_that_serves_the_demand(hardware, models):
    """Only a 10 Gbit/s tier: the demand row says the link is full at the most it serves,
    and the link row asks for the tier that serves the demand, checked by solving again."""
    s, hw, catalog = triple(load_scenario(SMALL))
    link = s.links[0].model_copy(update={"tiers": s.links[0].tiers[:1]})
    slow = s.model_copy(update={"links": (link,)})
    r = solved(slow, hw, catalog)
    by = {x.family: x for x in r.relaxations}
    demand, faster = by["demand"], by["link east-west"]
    assert "east-west link is at its fastest tier (10 Gbit/s)" in demand.message
    assert demand.needed[0] < s.workload.arrival_rps and demand.verified
    assert faster.keys == ("links[0].tiers",) and faster.unit == "Gbit/s" and faster.verified
    assert f"needs a {faster.needed[0]:g} Gbit/s tier on the east-west link" in faster.message
    for relax in (demand, faster):
        assert feasible(slow, hw, catalog, relax, relax.needed), relax
        assert not feasible(slow, hw, catalog, relax, tighter(relax)), relax


@pytest.mark.parametrize(
    ("v", "up", "expected"),
    [
        (0.10012, True, 0.101),
        (0.1, True, 0.1),
        (123.4, True, 124.0),
        (999.2, True, 1000.0),
        (13.168, False, 13.1),
        (6.2399, False, 6.23),
        (3e-5, True, 3e-5),
        (3.0000000000000004e-05, True, 3.01e-5),
    ],
)
def test_printed_values_are_rounded_in_the_direction_that_loosens(v, up, expected):
    assert _grid(v, up) == expected
    assert (_grid(v, up) >= v) if up else (_grid(v, up) <= v)


def test_limits_the_time_limit_stops_are_not_tried_and_say_so(hardware, models):
    """The explanation shares the solve's safety stop: a clock that passes the deadline
    after the search (here, at its 40th read) leaves the later limits untried, each row
    saying why, and no row claims a value it did not solve."""
    s, hw, catalog = triple(load_scenario(SMALL))
    tight = s.model_copy(
        update={"sla": s.sla.model_copy(update={"ttft_p90_s": 0.05, "ttft_p99_s": 0.1})}
    )
    reads = {"n": 0}

    def clock() -> float:
        reads["n"] += 1
        return 0.0 if reads["n"] <= 40 else 1e9

    r = solve_plan(problem_of(tight, hw, catalog), objective="min-cost", clock=clock)
    assert r.status == "infeasible" and r.fleet is None
    untried = [x for x in r.relaxations if x.message == "not tried: stopped at the time limit"]
    assert untried and all(x.factor is None and not x.needed for x in untried)
    assert all(x.verified for x in r.relaxations if x.needed)
