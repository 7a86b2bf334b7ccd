"""KV transfer times: RDMA inside a datacenter, TCP flows over the WAN between datacenters.

WAN. A transfer of ``B`` bytes runs as ``streams`` TCP flows over a path of round trip
``RTT`` (``TcpPath``, from a link's ``tcp`` settings). Each flow is capped by its window
and by its congestion control's response to random loss ``p``:

    window cap  = window_max / RTT                          (the socket buffer ceiling)
    Reno        = MSS / RTT x sqrt(3/2) / sqrt(p)           (Mathis et al. 1997)
    CUBIC       = MSS / RTT x max(1.054 x (RTT / p)^(3/4), sqrt(3/2) / sqrt(p))
                  (RFC 8312 section 5.1: (C (3 + beta) / (4 (1 - beta)))^(1/4) with C = 0.4,
                  beta = 0.7, RTT in seconds; the max is its Reno-friendly region)
    flow cap c  = streams x min(window cap, loss-limited rate)

The transfer alone, with ``r = min(c, line goodput)`` and a starting window ``W0`` (the
initial window ``IW x MSS`` per stream after idle when slow start restarts, else the window
the connection already has open, ``c x RTT``), in the fluid slow-start model: the window
doubles every RTT until it covers ``r x RTT``; after that the transfer runs at ``r``.

    sent_ss   = r x RTT                                          # bytes sent in slow start
    T(B) = RTT x log2(B / W0 + 1) + RTT / 2                      if B <= sent_ss
         = RTT x log2(sent_ss / W0 + 1) + (B - sent_ss) / r + RTT / 2   otherwise

(the last term: the last byte's one-way propagation; a new connection adds one RTT of
set-up). Under load the link is processor sharing with peak-rate caps (each transfer at
most ``c``, all of them at most the goodput ``g``): with ``m = g / c`` transfers filling the
link and utilization ``rho``, the mean time of a transfer of ``B`` bytes is

    (B / c) x (1 + C(m, rho m) / (m (1 - rho)))                  (C: Erlang C)

so other flows add ``(B / c) C(m, rho m) / (m (1 - rho))`` (``wan_queueing_mean_s``); one
flow that can fill the link (``m = 1``) gives plain processor sharing, ``(B / g) rho / (1 -
rho)``. A loss among a transfer's last three segments leaves no duplicate ACKs to trigger
fast retransmit and costs a retransmission timeout (``TcpPath.rto_probability``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pddplan import units
from pddplan.model.numeric import Num
from pddplan.model.queueing import erlang_c
from pddplan.spec.scenario import Link

RDMA_LATENCY_S = 20 * units.US
"""Assumption: fixed cost of one RDMA KV transfer inside a datacenter (verbs post and
completion, tens of microseconds)."""
CUBIC_C = 0.4
"""CUBIC's scaling constant, segments / s^3 (RFC 8312 section 5.1, Linux's default)."""
CUBIC_BETA = 0.7
"""CUBIC's multiplicative decrease (RFC 8312 section 4.5)."""
TAIL_SEGMENTS = 3
"""Segments at a transfer's end whose loss leaves fewer than three duplicate ACKs (the
fast-retransmit threshold, RFC 5681 section 3.2), so the sender waits for its RTO."""


@dataclass(frozen=True)
class TcpPath:
    """One WAN path's TCP figures (a link's ``tcp`` settings and its RTT), in SI units."""

    rtt_s: float
    mss_bytes: float = 1448.0
    initial_window_segments: float = 10.0
    window_max_bytes: float = 6_291_456.0
    loss_rate: float = 0.0
    congestion_control: str = "cubic"
    streams: int = 1
    slow_start_after_idle: bool = False
    min_rto_s: float = 0.2

    @classmethod
    def of(cls, link: Link) -> TcpPath:
        """The path of a scenario's link."""
        t = link.tcp
        return cls(
            rtt_s=link.rtt_ms * units.MS,
            mss_bytes=float(t.mss_bytes),
            initial_window_segments=float(t.initial_window_segments),
            window_max_bytes=float(t.window_max_bytes),
            loss_rate=t.loss_rate,
            congestion_control=t.congestion_control,
            streams=t.streams,
            slow_start_after_idle=t.slow_start_after_idle,
            min_rto_s=t.min_rto_ms * units.MS,
        )

    @property
    def loss_limited_bytes_per_s(self) -> float:
        """One flow's rate under random loss (inf at ``loss_rate`` 0)."""
        p, rtt, mss = self.loss_rate, self.rtt_s, self.mss_bytes
        if p <= 0:
            return math.inf
        reno = math.sqrt(1.5 / p)  # segments per RTT
        if self.congestion_control == "reno":
            return mss * reno / rtt
        factor = (CUBIC_C * (3 + CUBIC_BETA) / (4 * (1 - CUBIC_BETA))) ** 0.25
        return float(mss * max(factor * (rtt / p) ** 0.75, reno) / rtt)

    @property
    def flow_cap_bytes_per_s(self) -> float:
        """One transfer's ceiling: ``streams`` x min(window / RTT, loss-limited rate)."""
        one = min(self.window_max_bytes / self.rtt_s, self.loss_limited_bytes_per_s)
        return self.streams * one

    def initial_window_bytes(self, rate_bytes_per_s: float) -> float:
        """The window a transfer starts with: the initial window per stream after idle when
        slow start restarts, else the window a transfer at ``rate_bytes_per_s`` keeps open."""
        if self.slow_start_after_idle:
            return self.streams * self.initial_window_segments * self.mss_bytes
        return rate_bytes_per_s * self.rtt_s

    def alone_s(self, nbytes: np.ndarray, goodput_bytes_per_s: float) -> np.ndarray:
        """Each size's mean transfer time on an otherwise idle link: the module docstring's
        ``T``, plus the retransmission timeout times its probability."""
        rate = min(self.flow_cap_bytes_per_s, goodput_bytes_per_s)
        fluid = wan_transfer_s_many(
            nbytes,
            rtt_s=self.rtt_s,
            share_bytes_per_s=rate,
            initial_window_bytes=self.initial_window_bytes(rate),
        )
        return fluid + self.rto_probability(nbytes) * self.min_rto_s

    def flows_to_fill(self, goodput_bytes_per_s: float) -> float:
        """``m``: transfers at their cap that fill the link (at least 1)."""
        return max(1.0, goodput_bytes_per_s / self.flow_cap_bytes_per_s)

    def rto_probability(self, nbytes: np.ndarray) -> np.ndarray:
        """Probability that a transfer of each size loses one of its last
        ``TAIL_SEGMENTS`` segments and waits ``min_rto_s`` for the retransmission."""
        segments = np.minimum(
            np.ceil(np.asarray(nbytes, dtype=float) / self.mss_bytes), TAIL_SEGMENTS
        )
        return np.where(segments > 0, 1.0 - (1.0 - self.loss_rate) ** segments, 0.0)

    def tail_loss_probability(self, nbytes: float) -> float:
        """``rto_probability`` of one size, without arrays (the simulator's, per request)."""
        segments = min(math.ceil(nbytes / self.mss_bytes), TAIL_SEGMENTS)
        return 1.0 - (1.0 - self.loss_rate) ** segments if segments > 0 else 0.0


def wan_transfer_s(
    nbytes: float,
    *,
    rtt_s: float,
    share_bytes_per_s: float,
    initial_window_bytes: float,
    new_connection: bool = False,
) -> float:
    """Seconds for ``nbytes`` over a TCP flow with bandwidth ``share_bytes_per_s`` that
    starts with a window of ``initial_window_bytes``."""
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
    initial_window_bytes: float,
) -> np.ndarray:
    """The transfer time of each size in ``nbytes`` (same link, reused connections): the
    formula in the module docstring, vectorized. ``share_bytes_per_s`` may be an array that
    broadcasts against ``nbytes`` (e.g. a column: one row per link load)."""
    nbytes = np.asarray(nbytes, dtype=float)
    share = np.asarray(share_bytes_per_s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        sent_ss = share * rtt_s
        ramp_small = rtt_s * np.log2(nbytes / initial_window_bytes + 1)
        rounds = np.log2(sent_ss / initial_window_bytes + 1)
        ramp_big = rtt_s * rounds + (nbytes - sent_ss) / share
        out = np.where(nbytes <= sent_ss, ramp_small, ramp_big) + rtt_s / 2
        out = np.where(share > 0, out, np.inf)
    return np.where(nbytes > 0, out, 0.0)


def fit_loss_rate(path: TcpPath, nbytes: float, mean_s: float) -> float:
    """The loss rate at which ``nbytes`` alone on ``path`` (an idle link faster than its
    flows) takes ``mean_s``: the one TCP figure fitted to a measurement (``Tcp.loss_rate``).
    Raises ``ValueError`` when no loss rate in (0, 0.1) gives that time."""
    from scipy.optimize import brentq  # only for fitting: the planner never loads it

    def excess(p: float) -> float:
        fast = TcpPath(**{**path.__dict__, "loss_rate": p})
        return float(fast.alone_s(np.array([nbytes]), math.inf)[0]) - mean_s

    lo, hi = 1e-12, 0.1
    if excess(lo) > 0 or excess(hi) < 0:
        raise ValueError(
            f"no loss rate in ({lo:g}, {hi:g}) moves {nbytes:,.0f} B in {mean_s * 1e3:g} ms "
            f"on this path ({excess(lo) + mean_s:.3f} s to {excess(hi) + mean_s:.3f} s)"
        )
    return float(brentq(excess, lo, hi, xtol=1e-15, rtol=1e-10))


def capped_sharing_factor(flows_to_fill: float, utilization: float) -> float:
    """``C(m, rho m) / (m (1 - rho))``: the mean slowdown other transfers add on a
    processor-sharing link whose transfers each run at most ``1 / m`` of it (``m`` =
    ``flows_to_fill``), as a multiple of a transfer's time at its cap; inf when full."""
    u = min(max(utilization, 0.0), 1.0)
    if u >= 1.0:
        return math.inf
    m = max(flows_to_fill, 1.0)
    return erlang_c(m, u * m) / (m * (1.0 - u))


def wan_queueing_mean_s(
    nbytes: np.ndarray, *, path: TcpPath, goodput_bytes_per_s: float, utilization: float
) -> np.ndarray:
    """The part of each transfer's time that other flows add on a link at ``utilization``
    (processor sharing with peak-rate caps, module docstring); the TTFT tails take it as
    exponentially distributed around this mean, the rest of the transfer as fixed."""
    nbytes = np.asarray(nbytes, dtype=float)
    cap = min(path.flow_cap_bytes_per_s, goodput_bytes_per_s)
    factor = capped_sharing_factor(path.flows_to_fill(goodput_bytes_per_s), utilization)
    if math.isinf(factor):
        return np.where(nbytes > 0, math.inf, 0.0)
    return nbytes / cap * factor


def wan_times(
    nbytes: np.ndarray,
    *,
    path: TcpPath,
    goodput_bytes_per_s: float,
    utilization: float,
    alone_s: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per size: the mean time from the first byte sent to the first token back at the
    user's side (the transfer alone, what other flows add, and the half RTT back), and the
    part of it other flows add (``wan_queueing_mean_s``). ``alone_s``: the transfer alone
    (``path.alone_s(nbytes, goodput_bytes_per_s)``, which does not depend on the
    utilization) where the caller has it already."""
    queueing = wan_queueing_mean_s(
        nbytes, path=path, goodput_bytes_per_s=goodput_bytes_per_s, utilization=utilization
    )
    if alone_s is None:
        alone_s = path.alone_s(nbytes, goodput_bytes_per_s)
    return alone_s + queueing + path.rtt_s / 2, queueing
