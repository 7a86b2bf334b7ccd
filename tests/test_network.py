"""WAN and RDMA transfer times, checked by hand and against the PDD paper's measurement."""

from __future__ import annotations

import math

import pytest

from pddplan.model.network import (
    CALIBRATED_INITIAL_WINDOW_BYTES,
    link_bytes_per_s,
    rdma_transfer_s,
    wan_transfer_s,
)

RTT = 0.030


def test_reproduces_the_paper_handoff_mean():
    """4,559,872 B (DeepSeek-V4-Pro's FP8 window state) on an idle 25 Gbps, 30 ms path:
    30 ms x log2(4,559,872 / 91,600 + 1) + 15 ms = 30 x 5.667 + 15 = 185 ms, the measured mean."""
    t = wan_transfer_s(4_559_872, rtt_s=RTT, share_bytes_per_s=link_bytes_per_s(25, 0.9))
    assert t == pytest.approx(0.185, abs=0.001)


def test_bandwidth_bound_transfer_by_hand():
    """1 GB at 10 Gbit/s x 0.9 = 1.125e9 B/s over 30 ms: the window opens to the 33.75 MB
    bandwidth-delay product in 30 x log2(33.75e6 / 91,600 + 1) ms, then the rest streams."""
    r = link_bytes_per_s(10, 0.9)
    assert r == pytest.approx(1.125e9)
    bdp = r * RTT
    expected = (
        RTT * math.log2(bdp / CALIBRATED_INITIAL_WINDOW_BYTES + 1) + (1e9 - bdp) / r + RTT / 2
    )
    assert wan_transfer_s(1e9, rtt_s=RTT, share_bytes_per_s=r) == pytest.approx(expected)


def test_new_connections_pay_a_handshake():
    r = link_bytes_per_s(10, 0.9)
    reused = wan_transfer_s(1e6, rtt_s=RTT, share_bytes_per_s=r)
    assert wan_transfer_s(
        1e6, rtt_s=RTT, share_bytes_per_s=r, new_connection=True
    ) == pytest.approx(reused + RTT)


def test_monotone_in_size_and_share():
    r = link_bytes_per_s(10, 0.9)
    sizes = [1e3, 1e5, 1e6, 3.4e7, 1e8, 1e9]
    times = [wan_transfer_s(b, rtt_s=RTT, share_bytes_per_s=r) for b in sizes]
    assert times == sorted(times)
    assert wan_transfer_s(0, rtt_s=RTT, share_bytes_per_s=r) == 0.0
    assert wan_transfer_s(1e8, rtt_s=RTT, share_bytes_per_s=r / 2) > times[4]


def test_rdma_is_tens_of_ms_for_gigabytes():
    """The PDD brief: KV arrives at RLD 'in tens of ms'. 366 MB (a 64K-token V4 request,
    FP8) over a 400 Gbit/s NIC = 7.3 ms + 20 us."""
    assert rdma_transfer_s(366e6, nic_bytes_per_s=400 * 1e9 / 8) == pytest.approx(0.00734, abs=1e-4)
