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

from pddplan.model.instance import PrefillFigures

NEGLIGIBLE_EXTRA_S = 1e-6
"""An exponential delay of at most this mean (a microsecond) is left out of a tail: a link
whose capped flows barely meet adds ~1e-15 s, whose rate would overflow the formula."""


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
    """The part of ``loaded_prefill_latency`` that does not depend on the load: the passes
    sorted by time (``order``, ``x``), their weighted CDF and each sorted pass's successor
    (``nxt``; the last is its own)."""

    order: np.ndarray
    x: np.ndarray
    cdf: np.ndarray
    nxt: np.ndarray


def pass_order(figures: PrefillFigures, weights: np.ndarray) -> PassOrder:
    """``PassOrder`` of ``figures``' passes under the class ``weights``."""
    w = weights[figures.pass_owner]
    order = np.argsort(figures.pass_s, kind="stable")
    x = figures.pass_s[order]
    cdf = np.cumsum(w[order]) / w.sum()
    return PassOrder(order, x, cdf, np.append(x[1:], x[-1]))


class LoadedPrefill(NamedTuple):
    """Per class: the mean and the variance of its prefill latency under load
    (``loaded_prefill_latency``)."""

    mean_s: np.ndarray
    var_s2: np.ndarray


def loaded_prefill_latency(
    figures: PrefillFigures,
    weights: np.ndarray,
    *,
    groups: int,
    utilization: float,
    instances: int,
    passes: PassOrder | None = None,
) -> LoadedPrefill:
    """Each class's prefill latency, mean and variance, in a pool of ``instances`` instances
    at ``utilization``.

    A prefill instance with ``groups`` attention groups (data-parallel attention ranks)
    prefills one request per group at a time, all groups in the same passes, back to back:
    a pass lasts as long as its slowest group's chunk, plus the experts' and weights' work
    for every group's tokens.

    - **Company.** An arrival shares an instance only when none is idle: with each
      request holding an instance for its latency alone, that is Erlang C's
      ``P_share = C(instances, lambda E[latency])``. Then each other group is busy with
      probability ``u_c = utilization x P_share``, on a chunk drawn from the workload's
      passes (``figures.pass_s``, weighted by the classes' ``weights``), so the longest
      other pass ``M`` has ``P(M <= x) = (1 - u_c + u_c F(x))^(groups - 1)``; a pass of
      ``c`` alone then takes ``max(c, M)``.
    - **Shared work.** One more request of class ``j`` in a full pass costs
      ``s_j = (groups x service_j - latency_j) / (groups - 1)`` of the other groups'
      experts and weights. At ``lambda_i`` requests per second per instance, a share
      ``rho_s = lambda_i E[s] x P_share`` of an instance's time goes to it: passes that
      carry the arrivals' tokens as they come last ``1 / (1 - rho_s)`` times their
      slowest chunk (``P = A + rho_s P``).
    - **Variance.** Per pass, ``Var max(c, M)`` plus the binomial spread of the other
      groups' shared work, ``(groups - 1) (u_c E[s_p^2] - u_c^2 E[s_p]^2)`` (``s_p``: a
      pass's share of its class's ``s_j``), both scaled by ``1 / (1 - rho_s)^2``.

    So ``mean_k = sum_i E[max(c_ki, M)] / (1 - rho_s)``; one attention group per instance
    (or no load) leaves the latency alone, with no variance. ``rho_s >= 1``: infinite.
    ``passes``, from ``pass_order(figures, weights)``, saves sorting the passes again on
    every call.
    """
    latency = figures.latency
    if groups <= 1 or utilization <= 0:
        return LoadedPrefill(latency, np.zeros_like(latency))
    owner = figures.pass_owner
    total_w = float(weights.sum())
    per_instance_rps = utilization * total_w / float(weights @ figures.service)
    share = erlang_c(instances, per_instance_rps * instances * float(weights @ latency) / total_w)
    busy = utilization * share
    count = np.bincount(owner, minlength=len(latency))
    other = np.maximum(0.0, groups * figures.service - latency) / (groups - 1)
    rho_s = per_instance_rps * float(weights @ other) / total_w * share
    if rho_s >= 1.0:
        return LoadedPrefill(np.full_like(latency, np.inf), np.zeros_like(latency))
    w = weights[owner]
    order, x, cdf, nxt = pass_order(figures, weights) if passes is None else passes
    above_x = 1.0 - (1.0 - busy + busy * cdf) ** (groups - 1)  # P(M > x) on [x_i, x_i+1)
    # E[max(c, M)^k] = c^k + integral_c^inf k x^(k-1) P(M > x) dx, M a step function
    m1, m2 = np.empty_like(figures.pass_s), np.empty_like(figures.pass_s)
    m1[order] = x + np.cumsum((above_x * (nxt - x))[::-1])[::-1]
    m2[order] = x**2 + np.cumsum((above_x * (nxt**2 - x**2))[::-1])[::-1]
    per_pass = (other / np.maximum(count, 1))[owner]
    s1, s2 = float(w @ per_pass) / w.sum(), float(w @ per_pass**2) / w.sum()
    spread = (groups - 1) * max(0.0, busy * s2 - (busy * s1) ** 2)
    stretch = 1.0 / (1.0 - rho_s)
    mean = np.bincount(owner, weights=m1, minlength=len(latency)) * stretch
    var = np.bincount(owner, weights=np.maximum(m2 - m1**2, 0.0) + spread, minlength=len(latency))
    return LoadedPrefill(mean, var * stretch**2)


def prefill_wait_tail(
    t_s: np.ndarray,
    *,
    instances: int,
    groups: int,
    utilization: float,
    mean_service_s: float,
    service_cv2: float,
    extra_mean_s: np.ndarray | float = 0.0,
    company_mean_s: np.ndarray | float = 0.0,
    company_var_s2: np.ndarray | float = 0.0,
) -> np.ndarray:
    """P(W + X + D > t) at a prefill pool of ``instances`` instances; 1 for negative ``t``.

    - ``W``, the wait (M/G/c, ``wait_tail_many``): ``P(W > t) = C e^(-a t)``. With one
      attention group per instance, the ``instances`` instances are the servers. With
      several, a request joins the groups of one instance (the first to end a pass takes
      it, wherever its groups stand) and waits there, not for the pool's first free group:
      the servers are that instance's ``groups`` attention groups, each holding a request
      for ``groups`` times its service time at full load, at ``utilization``.
    - ``X``, the link's queueing (``network.wan_queueing_mean_s``): exponential of mean
      ``extra_mean_s`` (0: none; inf: a tail of 1).
    - ``D``, what the other attention groups add to the request's passes
      (``loaded_prefill_latency`` less its latency alone): normal, of mean
      ``company_mean_s`` and variance ``company_var_s2``.

    All per entry of ``t_s``, independent. For the exponentials present, of rates ``r_k``,
    ``P(sum > s) = sum_k c_k e^(-r_k s)`` with ``c_k = prod_(j != k) r_j / (r_j - r_k)``,
    and with ``D ~ N(mu, sigma^2)`` added, ``z = (t - mu) / sigma``:

        P(D + sum > t) = Q(z) + sum_k c_k exp(-r_k (t - mu) + r_k^2 sigma^2 / 2) Phi(z - r_k sigma)

    ``P(W + X + D > t) = (1 - C) P(X + D > t) + C P(Exp(a) + X + D > t)``.
    """
    t_s = np.asarray(t_s, dtype=float)
    servers = groups if groups > 1 else instances
    if utilization >= 1.0:
        return np.ones_like(t_s)
    c = erlang_c(servers, utilization * servers)
    a = 2.0 * (1.0 - utilization) * servers / ((1.0 + service_cv2) * groups * mean_service_s)
    m = np.broadcast_to(np.asarray(extra_mean_s, dtype=float), t_s.shape)
    mu = np.asarray(company_mean_s, dtype=float)
    sigma = np.sqrt(np.broadcast_to(np.asarray(company_var_s2, dtype=float), t_s.shape))
    s = np.maximum(t_s, 0.0) - mu
    noisy = sigma > 0
    if noisy.all():  # the usual case: one branch, not two
        sd = sigma
        z = s / sd
        q = special.ndtr(-z)  # P(D > t)
    else:
        sd = np.where(noisy, sigma, 1.0)
        z = s / sd
        q = np.where(noisy, special.ndtr(-z), s < 0)
    # P(D + Exp(r) > t) = q + e(r); for two rates, q + e(a) b / (b - a) + e(b) a / (a - b)
    e_a = _exponential_excess(a, s, sd, z, noisy)
    with_x = (m > NEGLIGIBLE_EXTRA_S) & np.isfinite(m)
    if not with_x.any():
        out = q + c * e_a
    else:
        b = np.where(with_x, 1.0 / np.where(with_x, m, 1.0), 1.0)
        b = np.where(np.abs(b - a) <= 1e-7 * a, a * (1 + 1e-5), b)  # a = b: the limit
        e_b = _exponential_excess(b, s, sd, z, noisy)
        both = (b * e_a - a * e_b) / (b - a)
        out = q + np.where(with_x, (1.0 - c) * e_b + c * both, c * e_a)
    if np.isinf(m).any():
        out = np.where(np.isinf(m), 1.0, out)
    return np.where(t_s < 0, 1.0, np.clip(out, 0.0, 1.0))


def _exponential_excess(
    rate: float | np.ndarray, s: np.ndarray, sd: np.ndarray, z: np.ndarray, noisy: np.ndarray
) -> np.ndarray:
    """``P(D + E > t) - P(D > t)`` for ``E`` exponential of ``rate`` and ``D ~ N(mu, sd^2)``
    (where ``noisy``, else ``D = mu``), at ``s = t - mu`` and ``z = s / sd``:
    ``exp(-rate s + rate^2 sd^2 / 2) Phi(z - rate sd)``, or ``e^(-rate s)`` for ``s >= 0``
    without noise."""
    with np.errstate(over="ignore", under="ignore"):
        if noisy.all():
            out: np.ndarray = np.exp(
                -rate * s + 0.5 * (rate * sd) ** 2 + special.log_ndtr(z - rate * sd)
            )
            return out
        sharp = np.where(s >= 0, np.exp(-rate * np.maximum(s, 0.0)), 0.0)
        if not noisy.any():
            return sharp
        smooth = np.exp(-rate * s + 0.5 * (rate * sd) ** 2 + special.log_ndtr(z - rate * sd))
        return np.where(noisy, smooth, sharp)
