"""Queueing tails for pools of identical servers (M/G/c, Erlang C with the Allen-Cunneen
correction).

A pool of ``c`` servers, each with mean service time ``s``, offered ``a = lambda x s``
erlangs (utilization ``rho = a / c``):

    P(wait > 0) = C(c, a)                                  (Erlang C)
    P(wait > t) = C(c, a) x exp(-2 (1 - rho) c t / ((1 + cs2) s))

where ``cs2`` is the squared coefficient of variation of the service time (0 for
deterministic, 1 for exponential). The exponential form is exact for M/M/c; the factor
``2 / (1 + cs2)`` is the Allen-Cunneen approximation for general service times.

Also the P99 of decode's inter-token gap when some steps carry a handoff stall (``p99_gap``)
and a percentile of any tail by bisection (``percentile``). The prefill pool's tail is in
``prefill_queue``, main decode's admission in ``admission``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import special


def erlang_c(servers: float, offered_erlangs: float) -> float:
    """Probability that an arrival waits, for ``servers`` servers and ``offered_erlangs``
    of load; 1 when the pool is saturated (load >= servers). A non-integer ``servers``
    (a link's transfers at their cap, ``network.capped_sharing_factor``) takes the closed
    form below as it stands: the continuous extension of Erlang B through the incomplete
    gamma function (Jagerman 1974)."""
    if servers < 1:
        raise ValueError(f"servers must be >= 1, got {servers}")
    if offered_erlangs <= 0:
        return 0.0
    if offered_erlangs >= servers:
        return 1.0
    # Erlang B = P(N = c) / P(N <= c) for N ~ Poisson(a), the closed form of the recursion
    # B_n = a B_(n-1) / (n + a B_(n-1)); in logs, and with the regularized incomplete gamma
    # for the sum, so that it costs the same for 10 servers and for 10,000 (and is defined
    # between integers)
    a = offered_erlangs
    log_pmf = servers * math.log(a) - a - float(special.gammaln(servers + 1))
    blocking = min(1.0, math.exp(log_pmf) / float(special.gammaincc(servers + 1, a)))
    rho = offered_erlangs / servers
    return blocking / (1.0 - rho * (1.0 - blocking))


def wait_tail(
    t_s: float, *, servers: int, utilization: float, mean_service_s: float, service_cv2: float = 1.0
) -> float:
    """P(wait > ``t_s``) in an M/G/c queue at ``utilization`` (Allen-Cunneen)."""
    return float(
        wait_tail_many(
            np.array([t_s]),
            servers=servers,
            utilization=utilization,
            mean_service_s=mean_service_s,
            service_cv2=service_cv2,
        )[0]
    )


def wait_tail_many(
    t_s: np.ndarray,
    *,
    servers: int,
    utilization: float,
    mean_service_s: float,
    service_cv2: float = 1.0,
) -> np.ndarray:
    """P(wait > t) for each time in ``t_s`` (one pool); 1 for negative times and for a
    saturated pool."""
    t_s = np.asarray(t_s, dtype=float)
    if utilization >= 1.0:
        return np.ones_like(t_s)
    c = erlang_c(servers, utilization * servers)
    rate = 2.0 * (1.0 - utilization) * servers / ((1.0 + service_cv2) * mean_service_s)
    return np.where(t_s < 0, 1.0, c * np.exp(-rate * np.maximum(t_s, 0.0)))


def p99_gap(
    step: float, rates: list[np.ndarray], sizes: list[np.ndarray], shares: np.ndarray
) -> float:
    """The 99th percentile of decode's inter-token gap: ``step``, plus the largest stall such that
    more than 1% of steps carry a stall at least that long (each pool's stalled-step
    fractions weighted by its share of tokens)."""
    pairs = []
    for r, sz, share in zip(rates, sizes, shares, strict=True):
        pairs += [
            (float(size), float(frac)) for frac, size in zip(r * share, sz, strict=True) if frac > 0
        ]
    pairs.sort(reverse=True)
    above = 0.0
    for size, frac in pairs:
        above += frac
        if above > 0.01:
            return step + size
    return step


PERCENTILE_TOLERANCE = 1e-6
"""``percentile`` stops when its bracket is this narrow, relative to its upper end (a TTFT
of seconds to the microsecond; the reports print milliseconds at most)."""


def percentile(
    tail: Callable[[float], float], q: float, hi: float, *, at_most: float, steps: int = 60
) -> float:
    """The smallest T with ``tail(T) = P(X > T) <= 1 - q``, by doubling from ``hi`` then
    bisecting, at most ``steps`` times, until the bracket is within
    ``PERCENTILE_TOLERANCE`` of its upper end, which is returned (a T with ``tail(T) <=
    1 - q``); infinite past ``at_most``."""
    lo = 0.0
    while tail(hi) > 1 - q:
        hi *= 2
        if hi > at_most:
            return math.inf
    for _ in range(steps):
        if hi - lo <= PERCENTILE_TOLERANCE * hi:
            break
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if tail(mid) <= 1 - q else (mid, hi)
    return hi
