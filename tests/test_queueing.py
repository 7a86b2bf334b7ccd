"""Queueing formulas against textbook values."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pddplan.queueing import erlang_c, wait_tail


def test_single_server_erlang_c_is_rho():
    """M/M/1: an arrival waits with probability rho."""
    assert erlang_c(1, 0.7) == pytest.approx(0.7)


def test_erlang_c_textbook_value():
    """c = 2, a = 1 erlang: B(2,1) = 1/5, C = B / (1 - rho (1 - B)) = 0.2 / 0.6 = 1/3."""
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)


def test_mm1_wait_tail():
    """M/M/1, rho 0.5, service 1 s: P(W > t) = 0.5 exp(-0.5 t)."""
    assert wait_tail(2.0, servers=1, utilization=0.5, mean_service_s=1.0) == pytest.approx(
        0.5 * math.exp(-1)
    )
    assert wait_tail(-1.0, servers=1, utilization=0.5, mean_service_s=1.0) == 1.0
    assert wait_tail(5.0, servers=1, utilization=1.0, mean_service_s=1.0) == 1.0


def test_deterministic_service_halves_the_decay_time():
    """Allen-Cunneen: cs2 = 0 doubles the decay rate of the tail."""
    exp_tail = wait_tail(1.0, servers=4, utilization=0.8, mean_service_s=1.0, service_cv2=1.0)
    det_tail = wait_tail(0.5, servers=4, utilization=0.8, mean_service_s=1.0, service_cv2=0.0)
    assert det_tail == pytest.approx(exp_tail)


@given(c=st.integers(1, 200), rho=st.floats(0.01, 0.99))
def test_bigger_pools_wait_less_at_the_same_utilization(c, rho):
    """Economies of scale: at equal utilization, more servers means fewer waits."""
    assert erlang_c(c + 1, rho * (c + 1)) <= erlang_c(c, rho * c) + 1e-12
