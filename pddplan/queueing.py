"""Queueing tails for pools of identical servers (M/G/c, Erlang C with the Allen-Cunneen
correction).

A pool of ``c`` servers, each with mean service time ``s``, offered ``a = lambda x s``
erlangs (utilization ``rho = a / c``):

    P(wait > 0) = C(c, a)                                  (Erlang C)
    P(wait > t) = C(c, a) x exp(-2 (1 - rho) c t / ((1 + cs2) s))

where ``cs2`` is the squared coefficient of variation of the service time (0 for
deterministic, 1 for exponential). The exponential form is exact for M/M/c; the factor
``2 / (1 + cs2)`` is the Allen-Cunneen approximation for general service times.

Also the P99 of decode's inter-token gap when some steps carry a handoff stall (``p99_gap``),
and the prefill pool as queues see it (``prefill_wait_tail``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from scipy import special

from pddplan.perf import PrefillFigures


def erlang_c(servers: int, offered_erlangs: float) -> float:
    """Probability that an arrival waits, for ``servers`` servers and ``offered_erlangs``
    of load; 1 when the pool is saturated (load >= servers)."""
    if servers < 1:
        raise ValueError(f"servers must be >= 1, got {servers}")
    if offered_erlangs <= 0:
        return 0.0
    if offered_erlangs >= servers:
        return 1.0
    # Erlang B = P(N = c) / P(N <= c) for N ~ Poisson(a), the closed form of the recursion
    # B_n = a B_(n-1) / (n + a B_(n-1)); in logs, and with the regularized incomplete gamma
    # for the sum, so that it costs the same for 10 servers and for 10,000
    a = offered_erlangs
    log_pmf = servers * math.log(a) - a - special.gammaln(servers + 1)
    blocking = min(1.0, math.exp(log_pmf) / special.gammaincc(servers + 1, a))
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
        pairs += [(size, float(frac)) for frac, size in zip(r * share, sz, strict=True) if frac > 0]
    pairs.sort(reverse=True)
    above = 0.0
    for size, frac in pairs:
        above += frac
        if above > 0.01:
            return step + size
    return step


def percentile(
    tail: Callable[[float], float], q: float, hi: float, *, at_most: float, steps: int = 60
) -> float:
    """The smallest T with ``tail(T) = P(X > T) <= 1 - q``, by doubling from ``hi`` then
    bisecting ``steps`` times; infinite past ``at_most``."""
    lo = 0.0
    while tail(hi) > 1 - q:
        hi *= 2
        if hi > at_most:
            return math.inf
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if tail(mid) <= 1 - q else (mid, hi)
    return hi


class PassOrder(NamedTuple):
    """The part of ``loaded_prefill_latency`` that does not depend on the utilization: the
    passes sorted by time (``order``, ``x``), their weighted CDF and the gaps between them."""

    order: np.ndarray
    x: np.ndarray
    cdf: np.ndarray
    widths: np.ndarray


def pass_order(figures: PrefillFigures, weights: np.ndarray) -> PassOrder:
    """``PassOrder`` of ``figures``' passes under the class ``weights``."""
    passes = figures.pass_s
    w = weights[figures.pass_owner]
    order = np.argsort(passes, kind="stable")
    x = passes[order]
    cdf = np.cumsum(w[order]) / w.sum()
    widths = np.diff(x, append=x[-1])
    return PassOrder(order, x, cdf, widths)


def loaded_prefill_latency(
    figures: PrefillFigures,
    weights: np.ndarray,
    *,
    groups: int,
    utilization: float,
    passes: PassOrder | None = None,
) -> np.ndarray:
    """Each class's prefill latency when its pool runs at ``utilization``.

    A prefill instance with ``groups`` attention groups (data-parallel attention ranks)
    prefills one request per group at a time, all groups in the same passes, so a pass
    lasts as long as its slowest group's chunk, plus the experts' and weights' work for
    the other groups' tokens:

    - each other group is busy with probability ``utilization``, with a pass drawn from
      the workload's passes (``figures.pass_s``, weighted by the classes' ``weights``),
      so the longest other pass ``M`` has ``P(M <= x) = (1 - u + u F(x))^(groups - 1)``,
      and a pass of ``c`` alone takes ``E[max(c, M)] = c + integral_c^inf (1 - P(M <= x)) dx``
      in company;
    - the shared work grows linearly with the busy groups, from nothing alone to
      ``groups x service - latency`` with every group busy on requests like it (what a
      full pass of identical chunks costs beyond one alone).

    One attention group per instance leaves the latency alone. ``passes``, from
    ``pass_order(figures, weights)``, saves sorting the passes again on every call.
    """
    latency = figures.latency
    if groups <= 1 or utilization <= 0:
        return latency
    order, x, cdf, widths = pass_order(figures, weights) if passes is None else passes
    others = (1.0 - utilization + utilization * cdf) ** (groups - 1)
    above = np.cumsum(((1.0 - others) * widths)[::-1])[::-1]  # integral from x_i upward
    company = np.empty_like(figures.pass_s)
    company[order] = x + above
    slowed = np.bincount(figures.pass_owner, weights=company, minlength=len(latency))
    shared = np.maximum(0.0, groups * figures.service - latency)
    return slowed + utilization * shared


def prefill_wait_tail(
    t_s: np.ndarray,
    *,
    instances: int,
    groups: int,
    utilization: float,
    mean_service_s: float,
    service_cv2: float,
    extra_mean_s: np.ndarray | float = 0.0,
) -> np.ndarray:
    """P(wait + X > t) at a prefill pool of ``instances`` instances: ``instances x groups``
    servers (one per attention group), each holding a request for ``groups`` times its
    service time at full load, at ``utilization`` (M/G/c, ``wait_tail_many``; one attention
    group per instance is the plain M/G/c of instances). X is an independent exponential
    delay of mean ``extra_mean_s`` (per entry of ``t_s``; 0: none), the link's queueing
    (``network.wan_queueing_mean_s``):

        P(W + X > t) = (1 - C) e^(-b t) + C (a e^(-b t) - b e^(-a t)) / (a - b)

    for ``P(W > t) = C e^(-a t)`` and ``b = 1 / mean``; 1 for negative ``t``.
    """
    t_s = np.asarray(t_s, dtype=float)
    servers = instances * groups
    if utilization >= 1.0:
        return np.ones_like(t_s)
    c = erlang_c(servers, utilization * servers)
    a = 2.0 * (1.0 - utilization) * servers / ((1.0 + service_cv2) * groups * mean_service_s)
    m = np.broadcast_to(np.asarray(extra_mean_s, dtype=float), t_s.shape)
    t = np.maximum(t_s, 0.0)
    ea = np.exp(-a * t)
    if not (m > 0).any():
        return np.where(t_s < 0, 1.0, c * ea)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        b = 1.0 / m  # inf where there is no delay
        b = np.where(np.abs(a - b) <= 1e-9 * a, b * (1 + 1e-6), b)  # a = b: the limit
        x = np.exp(-b * t)
        out = (1.0 - c) * x + c * (a * x - b * ea) / (a - b)
    out = np.where(m > 0, out, c * ea)
    out = np.where(np.isinf(m), 1.0, out)
    return np.where(t_s < 0, 1.0, out)
