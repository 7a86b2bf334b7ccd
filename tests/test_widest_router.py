"""The router-setting rule (``evaluator.widest_router``): the largest SLA capacity, the first
of equal ones, found in few capacity searches; the same choice as checking the settings in
order and searching each one past the best so far, which it replaced."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pddplan.evaluation.evaluator import CAPACITY_TOLERANCE, wider, widest_router


class Settings:
    """Candidates of known capacities whose limits grow with the rate: within every limit
    up to their capacity, with an excess proportional to the rate (a utilization). Counts
    the capacity searches."""

    def __init__(
        self,
        capacities: list[float],
        weights: list[float] | None = None,
        within: list[float] | None = None,
    ) -> None:
        self.capacities = capacities
        self.weights = weights or [1.0] * len(capacities)
        """Scale each candidate's excess: a limit other than the one that binds may be the
        nearest below its capacity."""
        self.within = within or capacities
        """The rate up to which each is within every limit: its capacity, but where its
        search reports less (the bracket's low end, or a kink in a limit)."""
        self.searched: list[int] = []

    def slack(self, i: int, rate: float) -> float | None:
        if rate == float("inf"):
            raise OverflowError("a state at an infinite rate")  # as the evaluator's
        c = self.within[i]
        return self.weights[i] * rate / c if rate <= c else None

    def capacity(self, i: int) -> float:
        self.searched.append(i)
        return self.capacities[i]

    def widest(self, incumbent: float, least: float = 0.0) -> tuple[int, float]:
        return widest_router(
            incumbent, len(self.capacities), self.slack, self.capacity, least=least
        )


def in_order(
    incumbent: float, capacities: list[float], least: float = 0.0
) -> tuple[int, float, int]:
    """The scan ``widest_router`` replaced: each setting in order, searched if within every
    limit just past the best capacity so far, kept if ``wider``; with its capacity
    searches."""
    best, capacity, searches = -1, incumbent, 0
    for i, c in enumerate(capacities):
        if c >= max(least, capacity * (1 + 2 * CAPACITY_TOLERANCE)):
            searches += 1
            if wider(c, capacity):
                best, capacity = i, c
    return best, capacity, searches


def test_the_widest_by_hand_in_one_capacity_search():
    s = Settings([3.0, 5.0, 9.0, 4.0, 7.0])
    assert s.widest(2.0) == (2, 9.0)
    assert s.searched == [2]  # the most slack just past 2 req/s: the widest, at once
    assert in_order(2.0, s.capacities) == (2, 9.0, 3)  # which the scan reached in 3 searches


def test_of_equal_capacities_the_first_then_the_incumbent_before_all():
    s = Settings([3.0, 9.0, 5.0, 9.0])
    assert s.widest(2.0) == (1, 9.0)
    assert Settings([9.0, 8.0]).widest(9.0) == (-1, 9.0)
    # equal to the search's resolution: a tie, not a win
    near = 9.0 * (1 + CAPACITY_TOLERANCE)
    assert Settings([5.0, 9.0, near]).widest(1.0) == (1, 9.0)


def test_a_later_setting_with_more_slack_does_not_displace_an_equal_earlier_one():
    s = Settings([5.0, 9.0, 9.0], weights=[1.0, 1.0, 0.5])
    assert s.widest(2.0) == (1, 9.0)
    assert s.searched == [2, 1]  # the most slack first, then the earlier equal one


def test_only_what_serves_the_least_rate_counts():
    s = Settings([3.0, 5.0])
    assert s.widest(1.0, least=6.0) == (-1, 1.0)
    assert s.searched == []  # no state within every limit: no capacity search
    assert Settings([3.0, 7.0, 6.5]).widest(1.0, least=6.0) == (1, 7.0)


def test_an_unbounded_incumbent_is_kept():
    assert Settings([3.0]).widest(float("inf")) == (-1, float("inf"))


def test_an_unbounded_setting_is_never_checked_at_an_infinite_rate():
    inf = float("inf")
    s = Settings([1.0, 5.0, inf])
    assert s.widest(3.0) == (2, inf) == in_order(3.0, s.capacities)[:2]
    # an earlier unbounded one takes precedence, found by its capacity search
    assert Settings([inf, 5.0, inf], weights=[1.0, 1.0, 0.5]).widest(3.0) == (0, inf)


def test_a_setting_searched_past_the_widest_does_not_hide_an_earlier_tie():
    """The widest (1) ties with an earlier one (0); then another (2) is within every limit
    just past it, but its search reports less (a kink): 0, as the scan in order gives."""
    s = Settings([5.0, 5.0, 3.0], weights=[1.0, 0.5, 1.0], within=[5.0, 5.0, 5.0 * (1 + 3e-6)])
    assert s.widest(1.0) == (0, 5.0)


@settings(max_examples=150, deadline=None)
@given(
    incumbent=st.sampled_from([0.5, 2.0, 4.0, 6.0]),
    settings_=st.lists(
        st.tuples(
            st.sampled_from([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, float("inf")]),
            st.sampled_from([1.0, 0.5, 0.2]),
        ),
        max_size=12,
    ),
    least=st.sampled_from([0.0, 3.0, 5.0]),
)
def test_the_same_choice_as_the_scan_in_order(incumbent, settings_, least):
    """Capacities equal or apart by more than the resolution (the rule and the scan differ
    only in near-ties inside it), whichever limit is nearest below them: the same setting
    and capacity; where the excess follows the capacity, never more capacity searches
    (but where an unbounded one wins: the settings before it are searched, not checked at
    an infinite rate)."""
    capacities = [c for c, _ in settings_]
    best, capacity, searches = in_order(incumbent, capacities, least)
    s = Settings(capacities, [w for _, w in settings_])
    assert s.widest(incumbent, least) == (best, capacity)
    plain = Settings(capacities)
    assert plain.widest(incumbent, least) == (best, capacity)
    if capacity < float("inf"):
        assert len(plain.searched) <= searches
