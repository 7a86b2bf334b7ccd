"""Counted work (``pddplan.work``): the counter itself, and the work the shipped solves take,
asserted as counts (never as seconds: CI's machine is shared), each ceiling about 15% over
what the solve counted when it was set, so a change that multiplies the work fails here."""

from __future__ import annotations

import threading

import pytest
from conftest import ROOT, quick_or_slow

import pddplan
from pddplan.work import STEPS, TimeLimitReached, counted, deadline, tally


def test_a_step_counts_in_every_enclosing_block():
    """A solve counts its own MILP nodes in a block of its own, and a benchmark's block
    around it still sees them."""
    tally("states")  # outside any block: nothing to count into, no error
    with counted() as outer:
        tally("states")
        with counted() as inner:
            tally("states", 3)
        tally("pool_tails")
    assert inner == {"states": 3}
    assert outer == {"states": 4, "pool_tails": 1}


def test_the_deadline_stops_work_only_where_a_unit_starts():
    """Past the deadline, a step that starts a unit of work (``CHECKED``) raises; a step
    inside one does not (nothing is left half-built), nor does any step outside the block
    or in a block that lifts the deadline."""
    now = {"t": 0.0}
    with deadline(10.0, clock=lambda: now["t"]):
        tally("count_searches")  # in time
        now["t"] = 11.0
        tally("pool_tails")  # inside a unit: never stopped there
        with pytest.raises(TimeLimitReached):
            tally("count_searches")
        with deadline(None):
            tally("count_searches")  # finishing a plan found in time
    tally("count_searches")


def test_each_thread_counts_into_its_own_block():
    seen: dict[str, int] = {}

    def worker():
        with counted() as work:
            tally("states", 5)
        seen["worker"] = work["states"]

    with counted() as mine:
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        tally("states")
    assert seen == {"worker": 5} and mine == {"states": 1}


# (scenario, ceilings): the counts when set were small 455/188/6, README 817/250/8, paper
# 1,062/324/10 (pool tails / states / capacity searches); the paper's pool tails were 8,066
# before each relay cut's stretch was read by bisection (``stretched_meets``). Since the
# router settings are ranked by ``widest_router`` (and the capacity search aims past its
# estimates): small 317/193/6, README 376/180/8 (was 414/212/11), paper 432/171/4 (was
# 586/313/10)
CEILINGS = {
    "small-llama-8b": {"pool_tails": 360, "states": 215, "capacity_searches": 7},
    "pdd-h100-h200": {"pool_tails": 440, "states": 210, "capacity_searches": 9},
    "pdd-paper-fleets": {"pool_tails": 500, "states": 200, "capacity_searches": 5},
}


@pytest.mark.parametrize(
    "path", quick_or_slow([ROOT / "scenarios" / f"{name}.yaml" for name in CEILINGS])
)
def test_a_solve_takes_no_more_work_than_counted(path):
    """The min-cost solve of a shipped scenario, twice: the same counts both times (the
    work depends on nothing but the input), within the ceilings, and no MILP where the
    relaxation's plan is exact."""
    name = path.stem
    runs = []
    for _ in range(2):
        problem = pddplan.load_scenario(path)
        with counted() as work:
            pddplan.solve(problem, explain=False)
        runs.append(dict(work))
    assert runs[0] == runs[1]
    assert set(runs[0]) <= set(STEPS)
    for step, ceiling in CEILINGS[name].items():
        assert runs[0].get(step, 0) <= ceiling, (step, runs[0])
    assert runs[0].get("milp_solves", 0) == 0
