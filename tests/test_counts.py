"""The planner's count searches (``pddplan.plan.counts``): the orders they rely on, checked
on the shipped options, and the searches against the direct way, counted in evaluations."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import PAPER_FLEETS
from hypothesis import given, settings
from hypothesis import strategies as st

from pddplan.api import load_scenario
from pddplan.model.prefill_pool import PrefillPoolLoad
from pddplan.plan.counts import stretched_meets
from pddplan.plan.space import Space


@settings(max_examples=200, deadline=None)
@given(
    thresholds=st.lists(st.floats(1.0, 2.0), min_size=2, max_size=12),
    stretch=st.lists(st.sampled_from([1.0, 1.01, 1.1, 1.25, 1.4, 1.5, 1.75, 2.0]), min_size=1),
    rows=st.integers(1, 3),
)
def test_stretched_meets_reads_each_cut_at_its_own_stretch(thresholds, stretch, rows):
    """A predicate monotone in the stretch (entry (row, cut) holds up to its threshold):
    ``stretched_meets`` gives what evaluating every cut at its own stretch gives, in at most
    two evaluations plus two per halving of the distinct stretches."""
    stretch = np.array(stretch)
    cuts = len(stretch)
    limit = np.resize(np.array(thresholds), (rows, cuts))
    calls: list[float] = []

    def meets_at(s: float) -> np.ndarray:
        calls.append(s)
        return s <= limit

    direct = stretch[None, :] <= limit
    assert np.array_equal(stretched_meets(meets_at, stretch, rows), direct)
    distinct = len(np.unique(stretch))
    assert (
        len(calls) <= 2 + 2 * int(np.ceil(np.log2(distinct))) if distinct > 1 else len(calls) == 1
    )
    assert len(set(calls)) == len(calls)  # no stretch evaluated twice


def test_all_met_at_the_largest_stretch_takes_one_evaluation():
    calls: list[float] = []

    def meets_at(s: float) -> np.ndarray:
        calls.append(s)
        return np.ones((2, 5), dtype=bool)

    assert stretched_meets(meets_at, np.array([1.0, 1.3, 1.1, 1.2, 1.4]), 2).all()
    assert calls == [1.4]


@pytest.fixture(scope="module")
def paper_space():
    return Space(load_scenario(PAPER_FLEETS))


@pytest.mark.slow
def test_the_prefill_tail_grows_with_the_stretch_and_falls_with_the_count(paper_space):
    """What the count search relies on, on every prefill option of the paper's scenario (the
    one that hosts relay decode): at a fixed count, a longer pass never lowers the share of
    requests above any budget nor the busy share (``stretched_meets``); at a fixed stretch,
    another instance never raises them (the scan over the count)."""
    sp = paper_space
    budgets = np.array([[0.5], [1.0], [2.0], [4.0], [8.0]]) * np.ones((1, len(sp.w)))
    rate = sp.scenario.workload.arrival_rps
    checked = 0
    for o in sp.options["prefill"]:
        figures, passes = sp.prefill_times(o), sp.prefill_passes(o)
        groups = o.instance.attention_groups

        def load(n: int, stretch: float, o=o, figures=figures, passes=passes, groups=groups):
            return PrefillPoolLoad(figures, passes, sp.w, rate / n, n, groups, stretch)

        for n in (2, 4, 8, 16, 32):
            if n > o.max_instances:
                continue
            prev_tail, prev_util = None, -1.0
            for stretch in (1.0, 1.02, 1.1, 1.3, 1.6):
                pool = load(n, stretch)
                if pool.utilization >= 1.0:
                    break
                tail = pool.tail(budgets)
                assert pool.utilization >= prev_util
                if prev_tail is not None:
                    assert (tail >= prev_tail - 1e-9).all(), (o.key, n, stretch)
                prev_tail, prev_util = tail, pool.utilization
                checked += 1
            fewer = load(n, 1.0)
            more = load(n + 1, 1.0)
            if fewer.utilization < 1.0:
                assert (more.tail(budgets) <= fewer.tail(budgets) + 1e-9).all(), (o.key, n)
    assert checked >= 20


def test_a_count_search_cut_short_by_the_time_limit_starts_again():
    """A prefill count search is a generator the relaxation may stop and go on with
    (``Requirements.prefill_within``); one the time limit ends as it starts is dropped, not
    kept dead, so the next ask searches from the start (a dead one would end at once, with
    no counts) and finds the counts a search without a limit finds."""
    from conftest import SMALL

    from pddplan.plan.counts import Requirements
    from pddplan.work import TimeLimitReached, deadline

    problem = load_scenario(SMALL)
    req = Requirements(Space(problem), 20.0)
    st = req.feasible_states[0]
    o = next(o for o in req.space.options["prefill"] if st.sent_by(o))
    first = min(req.space.first_steps(st))
    now = [0.0]
    with pytest.raises(TimeLimitReached), deadline(0.5, lambda: now[0]):
        now[0] = 1.0
        req.prefill_within(o, st, first_s=first, most=3)
    assert not req._scans
    alone = Requirements(Space(load_scenario(SMALL)), 20.0)
    assert np.array_equal(req.prefill(o, st, first_s=first), alone.prefill(o, st, first_s=first))
