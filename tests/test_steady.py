"""The run-length rules of ``pddplan.simulation.steady``, by hand: MSER-5's truncation, the
log-scale batch intervals, the verdict, and the session generator's stationarity."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import H100_H200, triple

from pddplan.io.scenario import load_scenario
from pddplan.simulation.decode import GAP_BINS_PER_DOUBLING, _gap_key
from pddplan.simulation.events import Events
from pddplan.simulation.steady import Interval, _judge, gap_interval, log_interval, mser_truncation
from pddplan.spec.scenario import Sla
from pddplan.workload.sessions import SessionOptions, SessionSource


def test_mser_drops_a_warm_up_step_and_nothing_from_a_flat_series():
    """Forty batches of five at 10 then 160 at 0: the squared standard error of what is
    left is smallest when exactly the first 200 observations go (what is left is
    constant: zero)."""
    values = np.concatenate([np.full(200, 10.0), np.zeros(800)])
    assert mser_truncation(values) == 200
    rng = np.random.default_rng(0)
    assert mser_truncation(rng.normal(size=1000)) < 500  # noise: within the first half


def test_mser_never_cuts_in_the_last_twentieth():
    """A series whose last few values are flat would, unrestricted, be 'truncated' there."""
    rng = np.random.default_rng(1)
    values = np.concatenate([rng.normal(size=990), np.zeros(10)])
    n = len(values) // 5
    assert mser_truncation(values) <= (n - max(10, n // 20)) * 5


def test_log_interval_stays_positive_and_holds_the_point():
    rng = np.random.default_rng(2)
    x = rng.lognormal(0, 2, 20_000)  # heavy tail: a symmetric interval would go below 0
    for q in (0.5, 0.9, 0.99):
        iv = log_interval(x, q, 20)
        assert 0 < iv.low < iv.value < iv.high
        assert iv.high / iv.value == pytest.approx(iv.value / iv.low)  # symmetric in log


def test_log_interval_of_equal_batches_is_the_point():
    x = np.tile(np.arange(1, 101, dtype=float), 20)  # every batch the same
    iv = log_interval(x, 0.9, 20)
    assert iv.low == pytest.approx(iv.value, rel=1e-12) == pytest.approx(iv.high, rel=1e-12)
    assert iv.value == pytest.approx(np.quantile(x, 0.9))


def test_gap_interval_is_widened_by_one_histogram_bin():
    """Every batch makes only 30 ms gaps: the interval is one bin each way, not a point."""
    key = _gap_key(0.030)
    marks = [{key: 100.0 * i} for i in range(21)]
    iv = gap_interval(marks, 0.99)
    bin_ = 2 ** (1 / GAP_BINS_PER_DOUBLING)
    assert iv.high / iv.value == pytest.approx(bin_) and iv.value / iv.low == pytest.approx(bin_)


SLA = Sla(ttft_p90_s=4, ttft_p99_s=12, tpot_ms=60)


@pytest.mark.parametrize(
    ("p99", "verdict"),
    [
        (Interval(10, 9, 11), "confirmed"),  # the upper bound within 12 s
        (Interval(11.5, 11, 12.5), "inconclusive"),  # the bound inside the interval
        (Interval(14, 13, 15), "missed"),  # the lower bound above it
    ],
)
def test_the_verdict_reads_the_interval_not_the_point(p99, verdict):
    ttft = {"p50": Interval(1, 0.9, 1.1), "p90": Interval(3, 2.8, 3.2), "p99": p99}
    got, reasons = _judge(ttft, Interval(30, 29, 31), SLA)
    assert got == verdict
    assert (reasons == ()) == (verdict == "confirmed")


def test_the_verdict_without_an_interval_is_never_confirmed():
    ttft = dict.fromkeys(("p50", "p90", "p99"), Interval(1, 0.9, 1.1))
    assert _judge(ttft, Interval(30, 0.0, math.inf), SLA)[0] == "inconclusive"


def test_events_pause_after_the_event_that_asks():
    ev, seen = Events(), []

    def note(x):
        seen.append(x)
        if x == 2:
            ev.pause()

    for t in range(5):
        ev.at(float(t), note, t)
    assert ev.run() is True and seen == [0, 1, 2]
    assert ev.run() is False and seen == [0, 1, 2, 3, 4]


def test_open_sessions_stay_at_rate_times_turn_gap():
    """Little's law, held by construction: a new session closes one at random."""
    s, _, _ = triple(load_scenario(H100_H200))
    src = SessionSource(s.workload, 30_000, SessionOptions(20.0, 4.0, 0.06), seed=3)
    assert src.target_sessions == round(20.0 * src.turn_gap_s) == 1200  # 60 s turn gap
    for _ in src:
        assert src.open_sessions == src.target_sessions
    assert 0 <= src.cold_share < 0.01  # the paper workload's cold requests are rare
