"""Relay decode's pace (``pddplan.model.relay``), checked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from pddplan.model.relay import eager_tokens, relay_pace

# a step table of 10 ms + 1 ms per sequence, batches 1..100
BATCHES = np.arange(1, 101, dtype=float)
STEPS = (BATCHES, 0.010 + 0.001 * BATCHES)


def test_relayed_requests_alone_set_the_batch_by_littles_law():
    """10 s of transfer per second on 2 instances: 5 requests each, a 15 ms step."""
    step, batch = relay_pace(STEPS, 10.0, 0.0, 2)
    assert batch == pytest.approx(5.0) and step == pytest.approx(0.015)


def test_singular_tokens_make_a_fixed_point():
    """Adding 100 singular tokens/s: 2b = 10 + 100 (0.010 + 0.001 b), so b = 11 / 1.9."""
    step, batch = relay_pace(STEPS, 10.0, 100.0, 2)
    assert batch == pytest.approx(11 / 1.9, rel=1e-9)
    assert step == pytest.approx(0.010 + 0.001 * 11 / 1.9, rel=1e-9)


def test_an_overload_stops_past_the_largest_batch():
    step, batch = relay_pace(STEPS, 1e4, 0.0, 1)
    assert batch > 100 and step == pytest.approx(0.110)


def test_eager_tokens_are_the_mean_of_min_over_the_outputs():
    """Outputs 100 and 300 (mean 200) stopped at 200 tokens: (100 + 200) / 2 = 150, not
    min(200, 200) = 200; never above the class's mean output."""
    got = eager_tokens(np.array([200.0]), np.array([[100.0, 300.0]]), np.array([200.0]))
    assert got == pytest.approx([150.0])
    assert eager_tokens(np.array([200.0]), np.array([[100.0, 300.0]]), np.array([1e6])) == (
        pytest.approx([200.0])
    )
