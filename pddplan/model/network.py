"""KV transfer times: RDMA inside a datacenter, TCP over the WAN between datacenters.

WAN (TCP), one flow of ``B`` bytes with bandwidth share ``r`` (bytes/s) and round trip
``RTT``, in the fluid slow-start model: the window starts at ``W0`` and doubles every RTT
until it covers the bandwidth-delay product ``r x RTT``; after that the flow runs at ``r``.

    rounds_ss = log2(r x RTT / W0 + 1)            # rounds to open the window
    sent_ss   = W0 x (2^rounds_ss - 1) = r x RTT  # bytes sent meanwhile
    T(B) = RTT x log2(B / W0 + 1) + RTT / 2                     if B <= sent_ss
         = RTT x rounds_ss + (B - sent_ss) / r + RTT / 2        otherwise

plus one RTT of connection set-up for a new connection. The last term is the one-way
propagation of the last byte.
"""

from __future__ import annotations

import numpy as np

from pddplan import units
from pddplan.model.numeric import Num

CALIBRATED_INITIAL_WINDOW_BYTES = 91_600.0
"""W0 such that an idle 30 ms-RTT path moves DeepSeek-V4-Pro's 4.56 MB window state in the
185 ms mean that the PDD paper measured for its WAN KV handoff (DESIGN.md section 2:
"WAN KV send mean 185 ms / max 512.6 ms"). Calibration, not a datasheet figure: a
persistent connection whose congestion window survives idle periods starts near this."""
RDMA_LATENCY_S = 20 * units.US
"""Assumption: fixed cost of one RDMA KV transfer inside a datacenter (verbs post and
completion, tens of microseconds)."""


def wan_transfer_s(
    nbytes: float,
    *,
    rtt_s: float,
    share_bytes_per_s: float,
    initial_window_bytes: float = CALIBRATED_INITIAL_WINDOW_BYTES,
    new_connection: bool = False,
) -> float:
    """Seconds for ``nbytes`` over a TCP flow with bandwidth ``share_bytes_per_s``."""
    setup = rtt_s if new_connection and nbytes > 0 else 0.0
    many = wan_transfer_s_many(
        np.array([nbytes]),
        rtt_s=rtt_s,
        share_bytes_per_s=share_bytes_per_s,
        initial_window_bytes=initial_window_bytes,
    )
    return setup + float(many[0])


def rdma_transfer_s(nbytes: Num, *, nic_bytes_per_s: float) -> Num:
    """Seconds for ``nbytes`` (a size or an array of sizes) over one RDMA NIC inside a
    datacenter."""
    return RDMA_LATENCY_S + nbytes / nic_bytes_per_s


def link_bytes_per_s(gbps: float, tcp_efficiency: float) -> float:
    """Goodput of a WAN link tier: line rate x TCP efficiency, in bytes/s."""
    return gbps * units.GBIT * tcp_efficiency


def wan_transfer_s_many(
    nbytes: np.ndarray,
    *,
    rtt_s: float,
    share_bytes_per_s: float | np.ndarray,
    initial_window_bytes: float = CALIBRATED_INITIAL_WINDOW_BYTES,
) -> np.ndarray:
    """The transfer time of each size in ``nbytes`` (same link, reused connections): the
    formula in the module docstring, vectorized. ``share_bytes_per_s`` may be an array that
    broadcasts against ``nbytes`` (e.g. a column: one row per link load)."""
    nbytes = np.asarray(nbytes, dtype=float)
    share = np.asarray(share_bytes_per_s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        sent_ss = np.maximum(share * rtt_s, initial_window_bytes)
        ramp_small = rtt_s * np.log2(nbytes / initial_window_bytes + 1)
        rounds = np.log2(sent_ss / initial_window_bytes + 1)
        ramp_big = rtt_s * rounds + (nbytes - sent_ss) / share
        out = np.where(nbytes <= sent_ss, ramp_small, ramp_big) + rtt_s / 2
        out = np.where(share > 0, out, np.inf)
    return np.where(nbytes > 0, out, 0.0)


def wan_queueing_mean_s(
    nbytes: np.ndarray, *, goodput_bytes_per_s: float, utilization: float
) -> np.ndarray:
    """The part of each transfer's time that other flows add on a link at ``utilization``
    (processor sharing: ``B / (goodput (1 - u)) - B / goodput``); the TTFT tails take it
    as exponentially distributed around this mean, the rest of the transfer as fixed."""
    nbytes = np.asarray(nbytes, dtype=float)
    u = min(max(utilization, 0.0), 1.0)
    if u >= 1.0:
        return np.full_like(nbytes, np.inf)
    return nbytes / goodput_bytes_per_s * u / (1.0 - u)
