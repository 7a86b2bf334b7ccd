"""The prefill pool as queues see it: a request's passes when they are part-full
(``filled_service``), its latency with the other attention groups' company
(``loaded_prefill_latency``), the pass in progress an arrival finds (``pass_in_progress``),
the requests that join its own rank behind it (``rank_company``), and the tail of its wait,
passes, link queueing and admission put together (``prefill_wait_tail``). The pool's load
and tail as one object is ``prefill_pool.PrefillPoolLoad``, which the planner's counts, the
evaluator and the simulator's analytic column all use."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from scipy import special

from pddplan.model.admission import Admission
from pddplan.model.instance import PrefillFigures
from pddplan.model.queueing import erlang_c

NEGLIGIBLE_EXTRA_S = 1e-6
"""An exponential delay of at most this mean (a microsecond) is left out of a tail: a link
whose capped flows barely meet adds ~1e-15 s, whose rate would overflow the formula."""


FILL_DURATION_BINS = 64
"""Quantile bins of pass durations over which ``filled_service`` mixes its Poisson counts."""


FILL_MAX_COMPANY = 20_000
"""Most requests ``filled_service`` counts in one pass's company (the rest: a full pass)."""


class Filled(NamedTuple):
    """Prefill at an arrival rate when passes run part-full (``filled_service``)."""

    service: np.ndarray
    """Per class: instance-seconds per request (one attention group's share of each pass)."""
    utilization: float
    """An instance's busy share: the rate per instance times the weighted mean service."""


def filled_service(
    figures: PrefillFigures, weights: np.ndarray, rate_per_instance: float
) -> Filled:
    """Each class's prefill service at ``rate_per_instance`` requests per second per
    instance, when a pass carries the tokens waiting at its start rather than a full
    chunk on every attention group (``prefill_service_s``'s assumption).

    A pass reads the weights and pays its collective latency and overhead however few
    tokens it carries; a chunk of ``t`` tokens with ``x`` tokens of other requests on its
    attention group carries ``t / (groups x min(chunk, t + x))`` of them
    (``PassFill``, costed per class and ``x``). A chunked-prefill scheduler takes the
    tokens waiting when a pass starts, so:

    - a request that finds the instance idle (probability ``1 - U``, Poisson arrivals see
      time averages) starts a pass alone: its first chunk at ``x = 0``;
    - one that finds it busy, and every later chunk (the instance is then busy with it),
      goes in the next pass with the requests that arrived during the pass in progress:
      ``N ~ Poisson(lambda_i D)`` of them, ``D`` a pass drawn by its length (an arrival
      falls in a pass in proportion to its duration; the passes' durations alone,
      ``pass_s``), bringing ``x = N t_bar / groups`` tokens to the chunk's group
      (``t_bar``: the mean new tokens of a chunk).

    ``svc_k = (1 - U) first_k(0) + U E[first_k(x)] + E[rest_k(x)]`` and
    ``U = lambda_i sum_k w_k svc_k`` is linear in ``U``: solved in closed form. Figures
    without a ``fill`` table (or no arrivals of new tokens) keep the full-pass service."""
    w = weights / float(weights.sum())
    fill = figures.fill
    if fill is None or figures.new_tokens is None or rate_per_instance <= 0:
        return Filled(figures.service, rate_per_instance * float(w @ figures.service))
    owner = figures.pass_owner
    count = np.bincount(owner, minlength=len(w))
    t_bar = float(w @ figures.new_tokens) / max(float(w @ count), 1e-300)
    # the company's count (a full pass from ``n_full`` on) and its tokens on the group
    n_full = min(math.ceil(fill.groups * fill.chunk / max(t_bar, 1e-300)), FILL_MAX_COMPANY)
    pmf = _arrivals_in_a_pass(figures, weights, rate_per_instance, n_full)
    n = np.arange(n_full + 1, dtype=float)
    x = np.minimum(n * t_bar / fill.groups, fill.chunk)
    x[-1] = fill.chunk
    # E[f(x)] for f linear between the grid's points: the count's mass on the points
    grid = fill.grid
    i = np.clip(np.searchsorted(grid, x, side="right") - 1, 0, len(grid) - 2)
    frac = np.clip((x - grid[i]) / (grid[i + 1] - grid[i]), 0.0, 1.0)
    on_grid = np.bincount(i, weights=pmf * (1 - frac), minlength=len(grid)) + np.bincount(
        i + 1, weights=pmf * frac, minlength=len(grid)
    )
    alone, busy, rest = fill.first[:, 0], fill.first @ on_grid, fill.rest @ on_grid
    a, b = float(w @ (alone + rest)), float(w @ (alone - busy))
    util = min(rate_per_instance * a / (1.0 + rate_per_instance * b), 1.0)
    service = (1.0 - util) * alone + util * busy + rest
    return Filled(service, rate_per_instance * float(w @ service))


PASS_BINS_MEMO = 256
"""How many workloads' binned passes ``_pass_bins`` keeps (then it starts again)."""


_pass_bins_memo: dict[tuple[int, int, int], tuple[np.ndarray, ...]] = {}


def _pass_bins(
    pass_s: np.ndarray, owner: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The passes ``pass_s`` (of the classes ``owner``, at the class ``weights``) an arrival
    falls in, in proportion to their length: binned at ``FILL_DURATION_BINS`` weighted
    quantiles of duration, each bin's mean duration and probability. The same at every
    rate, and asked for at every count the planner tries: kept per the arrays' identity
    (prefill figures are never changed in place), with the arrays, so that an identity
    is not reused while kept."""
    key = (id(pass_s), id(owner), id(weights))
    kept = _pass_bins_memo.get(key)
    if kept is not None and kept[0] is pass_s and kept[1] is owner and kept[2] is weights:
        return kept[3], kept[4]
    q = (weights / float(weights.sum()))[owner] * pass_s
    order = np.argsort(pass_s, kind="stable")
    cum = np.cumsum(q[order]) / max(float(q.sum()), 1e-300)
    bins = np.minimum((cum * FILL_DURATION_BINS).astype(int), FILL_DURATION_BINS - 1)
    q_sum = np.bincount(bins, weights=q[order], minlength=FILL_DURATION_BINS)
    qd_sum = np.bincount(bins, weights=(q * pass_s)[order], minlength=FILL_DURATION_BINS)
    keep = q_sum > 0
    d_bin, q_bin = qd_sum[keep] / q_sum[keep], q_sum[keep] / q_sum[keep].sum()
    if len(_pass_bins_memo) >= PASS_BINS_MEMO:
        _pass_bins_memo.clear()
    _pass_bins_memo[key] = (pass_s, owner, weights, d_bin, q_bin)
    return d_bin, q_bin


def _arrivals_in_a_pass(
    figures: PrefillFigures, weights: np.ndarray, rate: float, n_max: int
) -> np.ndarray:
    """``P(N = n)`` for ``n = 0 .. n_max`` (the last: that many or more), ``N`` the arrivals
    at ``rate`` during the pass an arrival falls in: ``Poisson(rate x D)``, ``D`` one of
    ``figures``' passes at the class ``weights`` drawn in proportion to its length
    (``_pass_bins``). Passes ``k`` times as long: ``rate`` times ``k``."""
    d_bin, q_bin = _pass_bins(figures.pass_s, figures.pass_owner, weights)
    n = np.arange(n_max + 1, dtype=float)
    mu = rate * d_bin[:, None]
    log_pmf = n * np.log(np.maximum(mu, 1e-300)) - mu - special.gammaln(n + 1)
    pmf = q_bin @ np.exp(log_pmf)
    pmf[-1] += max(0.0, 1.0 - float(pmf.sum()))
    return np.asarray(pmf)


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


class RankCompany(NamedTuple):
    """The requests that join a request's chunked-prefill passes on its attention group
    behind it (``rank_company``): ``N`` of them with probability ``probs[n]``, adding
    ``delays[n, k]`` seconds to a request of class ``k``."""

    probs: np.ndarray
    delays: np.ndarray


RANK_COMPANY_TAIL = 1e-5
"""The company's distribution is cut where fewer than this share of arrivals see more; the
cut mass goes to the last atom."""


RANK_COMPANY_ATOMS = 48
"""At most this many atoms: past it, counts are binned, each bin at its largest (a tail no
lighter)."""


def prefill_wait(
    *, instances: int, groups: int, utilization: float, mean_service_s: float, service_cv2: float
) -> tuple[float, float]:
    """The M/G/c wait at a prefill pool (Allen-Cunneen, see ``prefill_wait_tail``): the
    probability that an arrival waits, and the mean wait of those that do."""
    servers = groups if groups > 1 else instances
    c = erlang_c(servers, utilization * servers)
    mean = (1.0 + service_cv2) * groups * mean_service_s / (2.0 * (1.0 - utilization) * servers)
    return c, mean


def rank_company(
    figures: PrefillFigures,
    weights: np.ndarray,
    *,
    utilization: float,
    instances: int,
    service_cv2: float,
    company_service_s: float | None = None,
) -> RankCompany | None:
    """The requests that share a request's passes on an instance of one attention group,
    behind it in the queue.

    A chunked-prefill pass takes every queued request's tokens, up to ``chunk_tokens``
    on the group, and all of them finish with it. So a request's prefill ends its wait
    ``W`` (the work ahead of it: the M/G/c wait, ``prefill_wait``), its own work, and the
    work of the requests that arrived while it waited, as far as its passes have room
    (``figures.room_tokens``): with ``N ~ Poisson(lambda W)`` for ``W`` exponential of mean
    ``m`` (``lambda``: the pool's arrival rate), ``N`` is geometric,
    ``P(N = n) = p (1 - p)^n`` with ``p = 1 / (1 + lambda m)``, and adds
    ``d_k(n) = min(n s, room_k s / t)`` (``s``: the mean service, ``t``: the mean tokens
    prefilled). ``N`` is taken independent of ``W`` (a long wait brings more company: the
    tail is a little light where the room is not yet full); an arrival that does not wait
    starts a pass alone. None without rooms or load. ``company_service_s``: the mean
    seconds one more request adds to a pass it joins (default ``s``); where passes run
    part-full (``filled_service``) the mean service carries fixed costs a joiner shares,
    and a joiner adds its full-pass service.
    """
    room, new = figures.room_tokens, figures.new_tokens
    if room is None or new is None or utilization <= 0 or utilization >= 1:
        return None
    total = float(weights.sum())
    svc = float(weights @ figures.service) / total
    rate = utilization * instances / svc
    _, mean_wait = prefill_wait(
        instances=instances,
        groups=1,
        utilization=utilization,
        mean_service_s=svc,
        service_cv2=service_cv2,
    )
    joins = svc if company_service_s is None else company_service_s
    per_token = joins / max(float(weights @ new) / total, 1e-12)
    cap = np.maximum(room, 0.0) * per_token  # seconds of company a class's passes hold
    p = 1.0 / (1.0 + rate * mean_wait)
    # P(N >= n) = (1 - p)^n: cut where it falls below the tail, or where every class's
    # room is full (more company adds nothing)
    full = math.ceil(float(cap.max()) / joins) if cap.max() > 0 else 0
    n_max = min(full, math.ceil(math.log(RANK_COMPANY_TAIL) / math.log1p(-p))) if p < 1 else 0
    n = np.arange(n_max + 1, dtype=float)
    probs = p * (1.0 - p) ** n
    probs[-1] = (1.0 - p) ** n_max  # P(N >= n_max)
    return _company(probs, joins, cap)


def _company(probs: np.ndarray, joins: float, cap: np.ndarray) -> RankCompany:
    """``RankCompany`` of ``probs[n]``, the chance of ``n`` requests of company (the last
    atom: that many or more), each adding ``joins`` seconds up to a class's ``cap``; at
    most ``RANK_COMPANY_ATOMS`` atoms (past it, counts binned, each bin at its largest)."""
    n = np.arange(len(probs), dtype=float)
    if len(probs) > RANK_COMPANY_ATOMS:
        edges = np.unique(np.linspace(0, len(probs), RANK_COMPANY_ATOMS + 1).astype(int))
        probs = np.add.reduceat(probs, edges[:-1])
        n = n[edges[1:] - 1]
    return RankCompany(probs, np.minimum(n[:, None] * joins, cap[None, :]))


class PassInProgress(NamedTuple):
    """What an arrival at an instance of several attention groups meets
    (``pass_in_progress``): with probability ``busy`` less the chance that no group is
    free, only the rest of the pass in progress, exponential of mean ``rest_s``; and, when
    it waits at all, ``company``: the requests that go in its pass with it."""

    busy: float
    rest_s: float
    company: RankCompany


def pass_in_progress(
    figures: PrefillFigures,
    weights: np.ndarray,
    rate_per_instance: float,
    *,
    groups: int,
    company_service_s: float,
    loaded: LoadedPrefill | None = None,
) -> PassInProgress | None:
    """The pass in progress at a prefill instance of ``groups`` attention groups, at
    ``rate_per_instance`` requests per second; None with one group or without load.

    Its groups run their chunks in one pass, and a chunked-prefill scheduler starts a
    request only when a pass ends. So an arrival that finds a group free but the instance
    in a pass waits for the rest of that pass, and goes in the next one with every request
    that arrived during it:

    - ``busy``: the instance's busy share, any group in a pass (``filled_service`` of
      ``PrefillFigures.whole``: a lone chunk pays all of a pass's fixed costs);
    - ``rest_s = E[D^2] / (2 E[D])`` over the workload's passes (``figures.pass_s``, each
      class's passes at its weight), each as much longer than alone as ``loaded`` (the
      other groups' company, ``loaded_prefill_latency``) makes the mean request's prefill;
    - ``company``: ``N ~ Poisson(rate x D)`` requests, ``D`` the pass in progress drawn by
      its length (those that arrive before the request and after it alike: a Poisson
      stream seen from one of its arrivals), each adding ``company_service_s`` (a full
      pass's share: the fixed costs are shared) up to the room of the whole instance,
      ``groups`` chunks a pass less the request's own tokens."""
    whole, room, new = figures.whole, figures.room_tokens, figures.new_tokens
    if groups <= 1 or whole is None or room is None or new is None or rate_per_instance <= 0:
        return None
    busy = filled_service(figures._replace(fill=whole), weights, rate_per_instance).utilization
    stretch = 1.0
    if loaded is not None:
        stretch = float(weights @ loaded.mean_s) / max(float(weights @ figures.latency), 1e-300)
    w = weights[figures.pass_owner]
    d = figures.pass_s
    rest = stretch * float(w @ d**2) / (2.0 * float(w @ d))
    total = float(weights.sum())
    cap = np.maximum(groups * (room + new) - new, 0.0)
    cap = cap * company_service_s / max(float(weights @ new) / total, 1e-12)
    # counts past the instance's room add nothing; past ``mean + 10 sd + 10``, nothing seen
    full = math.ceil(float(cap.max()) / company_service_s) if cap.max() > 0 else 0
    most = rate_per_instance * stretch * float(d.max())
    n_max = min(full, math.ceil(most + 10.0 * math.sqrt(most) + 10.0))
    probs = _arrivals_in_a_pass(figures, weights, rate_per_instance * stretch, n_max)
    # cut where fewer than RANK_COMPANY_TAIL of arrivals see more (the mass to the last atom)
    seen = np.cumsum(probs[::-1])[::-1] >= RANK_COMPANY_TAIL  # P(N >= n)
    last = int(np.flatnonzero(seen)[-1]) if seen.any() else 0
    probs = np.append(probs[:last], probs[last:].sum())
    return PassInProgress(min(busy, 1.0), rest, _company(probs, company_service_s, cap))


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
    rank: RankCompany | None = None,
    admission: Admission | None = None,
    drain: tuple[float, float] | None = None,
    in_pass: PassInProgress | None = None,
) -> np.ndarray:
    """P(W + X + D + R + A > t) at a prefill pool of ``instances`` instances; 1 for negative
    ``t``.

    - ``W``, the wait (M/G/c, ``wait_tail_many``): ``P(W > t) = C e^(-a t)``. With one
      attention group per instance, the ``instances`` instances are the servers. With
      several, a request joins the groups of one instance (the first to end a pass takes
      it, wherever its groups stand) and waits there, not for the pool's first free group:
      the servers are that instance's ``groups`` attention groups, each holding a request
      for ``groups`` times its service time at full load, at ``utilization``. With
      ``in_pass`` (``pass_in_progress``), an arrival that finds a group free but the
      instance in a pass waits for the rest of the pass: with probability
      ``max(0, in_pass.busy - C)``, exponential of mean ``in_pass.rest_s``; and
      ``in_pass.company`` stands for ``rank``.
    - ``X``, the link's queueing (``network.wan_queueing_mean_s``): exponential of mean
      ``extra_mean_s`` (0: none; inf: a tail of 1).
    - ``D``, what the other attention groups add to the request's passes
      (``loaded_prefill_latency`` less its latency alone): normal, of mean
      ``company_mean_s`` and variance ``company_var_s2``.
    - ``R``, with ``rank`` (``rank_company``): the requests that join its passes on its own
      attention group behind it: ``rank.delays[n]`` with probability ``rank.probs[n]``
      after a wait, 0 without one.
    - ``A``, with ``admission`` (``md_admission``): the wait for a decode slot at main
      decode, where ``admission.applies`` (requests that go straight to MD): exponential
      after an atom at 0, like ``W``.

    All per entry of ``t_s`` (classes last), independent. For the exponentials present, of
    rates ``r_k``, ``P(sum > s) = sum_k c_k e^(-r_k s)`` with ``c_k = prod_(j != k) r_j /
    (r_j - r_k)``, and with ``D ~ N(mu, sigma^2)`` added, ``z = (t - mu) / sigma``:

        P(D + sum > t) = Q(z) + sum_k c_k exp(-r_k (t - mu) + r_k^2 sigma^2 / 2) Phi(z - r_k sigma)

    ``P(W + X + D + R > t) = (1 - C) P(X + D > t) + C sum_n P(R = d_n) P(Exp(a) + X + D > t - d_n)``
    (with ``in_pass``, ``1 - C - p`` and a third term, ``p`` of the same with the rest of the
    pass for ``Exp(a)``), and likewise over whether ``A`` is 0.
    """
    t_s = np.asarray(t_s, dtype=float)
    if utilization >= 1.0:
        return np.ones_like(t_s)
    c, mean_wait = prefill_wait(
        instances=instances,
        groups=groups,
        utilization=utilization,
        mean_service_s=mean_service_s,
        service_cv2=service_cv2,
    )
    if drain is not None:
        _, mean_wait = prefill_wait(
            instances=instances,
            groups=groups,
            utilization=min(drain[0], utilization),
            mean_service_s=drain[1],
            service_cv2=service_cv2,
        )
    m = np.broadcast_to(np.asarray(extra_mean_s, dtype=float), t_s.shape)
    mu = np.asarray(company_mean_s, dtype=float)
    sigma = np.sqrt(np.broadcast_to(np.asarray(company_var_s2, dtype=float), t_s.shape))
    noisy = sigma > 0
    sd = np.where(noisy, sigma, 1.0)
    with_x = (m > NEGLIGIBLE_EXTRA_S) & np.isfinite(m)
    no = np.zeros(t_s.shape, dtype=bool)
    # the exponentials: the wait, the link's queueing, MD's admission wait
    rates = [np.full(t_s.shape, 1.0 / mean_wait), np.where(with_x, 1.0 / np.where(with_x, m, 1), 1)]
    if admission is not None:
        rates.append(np.full(t_s.shape, 1.0 / admission.mean_s))

    def apart(rates: list[np.ndarray]) -> list[np.ndarray]:
        """Equal rates nudged apart (the hypoexponential's limit)."""
        for i in range(1, len(rates)):
            for j in range(i):
                close = np.abs(rates[i] - rates[j]) <= 1e-7 * rates[j]
                rates[i] = np.where(close, rates[j] * (1 + 1e-5 * (i - j)), rates[i])
        return rates

    rates = apart(rates)

    def terms(
        waits: bool, admits: np.ndarray, rates: list[np.ndarray] = rates
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """The exponentials present, as (rate, coefficient) with the coefficient 0 where
        absent: the wait if ``waits``, the link's queueing where it counts, MD's admission
        wait where ``admits``. ``P(sum > s) = sum_j c_j e^(-r_j s)``, ``c_j = prod_(i != j)
        r_i / (r_i - r_j)``."""
        present = [np.full(t_s.shape, waits), with_x, admits][: len(rates)]
        out = []
        for j, (r, here) in enumerate(zip(rates, present, strict=True)):
            if not here.any():
                continue
            coef = np.ones(t_s.shape)
            for i, (ri, there) in enumerate(zip(rates, present, strict=True)):
                if i != j and there.any():
                    coef = np.where(there, coef * ri / (ri - r), coef)
            out.append((r, np.where(here, coef, 0.0)))
        return out

    # the same budgets (``t_s``, or ``behind`` the company's atoms) meet the same rates in
    # several terms below: each budget's normal part and each (budget, rate) excess are
    # computed once (by the budget array's identity, kept alive here, and the rate's values)
    prepared: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
    excesses: dict[tuple[int, bytes], np.ndarray] = {}
    figures: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def prepare(
        t: np.ndarray, mu: np.ndarray, sd: np.ndarray, noisy: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(t, s, z, P(D > t)) for budgets ``t`` (``D``'s mean ``mu``, its spread ``sd``
        where ``noisy``, each given per entry of ``t`` or broadcast to it)."""
        if id(t) not in prepared:
            s = np.maximum(t, 0.0) - mu
            z = s / sd
            base = (s < 0).astype(float)
            if noisy.any():  # the normal part only where there is one (and it is not 0)
                zs = np.broadcast_to(z, base.shape).reshape(-1)
                live = ~(zs >= NDTR_ZERO_FROM)
                if noisy.all():
                    base = _ndtr_where(-zs, live, 0.0).reshape(base.shape)
                else:
                    at = np.flatnonzero(live & np.broadcast_to(noisy, base.shape).reshape(-1))
                    base.reshape(-1)[at] = special.ndtr(-zs[at])
            prepared[id(t)] = (t, s, z, base)
        return prepared[id(t)]

    def tail(
        t: np.ndarray,
        exps: list[tuple[np.ndarray, np.ndarray]],
        at: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> np.ndarray:
        """P(D + the exponentials ``exps`` > t), the exponentials' rates and coefficients
        (and ``D``'s figures) given on ``t_s``'s entries: ``at`` takes an array of that
        shape to ``t``'s entries (None: ``t`` is ``t_s``)."""
        take = (lambda a: a) if at is None else at
        if id(t) not in figures:
            figures[id(t)] = (take(mu), take(sd), take(noisy))
        d_mu, d_sd, d_noisy = figures[id(t)]
        _, s, z, out = prepare(t, d_mu, d_sd, d_noisy)
        for r, coef in exps:
            key = (id(t), r.tobytes())
            if key not in excesses:
                excesses[key] = _exponential_excess(take(r), s, d_sd, z, d_noisy)
            out = out + take(coef) * excesses[key]
        return np.where(t < 0, 1.0, out)

    # the pass in progress, where a group is free but the instance is in a pass
    p_pass = 0.0 if in_pass is None else max(0.0, in_pass.busy - c)
    rank = rank if in_pass is None else in_pass.company
    pass_rates = rates
    if in_pass is not None and p_pass > 0:
        pass_rates = apart([np.full(t_s.shape, 1.0 / in_pass.rest_s), *rates[1:]])
    if rank is not None:  # the company's atoms on a leading axis
        shape = (len(rank.probs),) + (1,) * (t_s.ndim - 1) + rank.delays.shape[1:]
        behind_all = t_s[None] - rank.delays.reshape(shape)
        # where an atom's delay alone spends the budget the tail is 1: only the other
        # entries are computed (a third of them at max BCR's rates), each as it was
        kept = np.flatnonzero(~(behind_all < 0))
        behind = behind_all.reshape(-1)[kept]

        def at_kept(a: np.ndarray) -> np.ndarray:
            return np.broadcast_to(a, behind_all.shape).reshape(-1)[kept]

    def waited(exps: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        if rank is None:
            return tail(t_s, exps)
        out = np.ones(behind_all.size)
        out[kept] = tail(behind, exps, at_kept)
        return np.tensordot(rank.probs, out.reshape(behind_all.shape), axes=1)

    def given(admits: np.ndarray) -> np.ndarray:
        """The tail given which entries wait for MD's admission."""
        out = (1.0 - c - p_pass) * tail(t_s, terms(False, admits)) + c * waited(terms(True, admits))
        if p_pass > 0:
            out = out + p_pass * waited(terms(True, admits, pass_rates))
        return out

    out = given(no)
    if admission is not None:
        applies = np.broadcast_to(np.asarray(admission.applies, dtype=bool), t_s.shape)
        if admission.wait_prob > 1e-12 and applies.any():
            p_md = np.where(applies, admission.wait_prob, 0.0)
            out = (1.0 - p_md) * out + p_md * given(applies)
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
            return _smooth_excess(rate, s, sd, z)
        sharp = np.where(s >= 0, np.exp(-rate * np.maximum(s, 0.0)), 0.0)
        if not noisy.any():
            return sharp
        # the smooth form only where there is noise (a quarter of the entries, typically:
        # the normal CDF is most of the cost), each entry as the formula above gives it
        shape = np.broadcast_shapes(np.shape(rate), s.shape, sd.shape, z.shape, noisy.shape)
        at = np.broadcast_to(noisy, shape)
        r, s_, sd_, z_ = (np.broadcast_to(a, shape)[at] for a in (rate, s, sd, z))
        out = np.array(np.broadcast_to(sharp, shape))
        out[at] = _smooth_excess(r, s_, sd_, z_)
        return out


NDTR_ONE_FROM = 8.3
"""``scipy.special.ndtr(x)`` is 1.0 exactly from ``x = 8.2924`` on (``1 - Phi(8.3) = 5.2e-17``,
under half the spacing of doubles below 1); ``_ndtr`` does not call it there."""
NDTR_ZERO_FROM = 37.7
"""``scipy.special.ndtr(-z)`` is 0.0 exactly from ``z = 37.677`` on (it underflows)."""
NDTR_GATHER_BELOW = 0.75
"""``_ndtr_where`` gathers the entries it evaluates when fewer than this share of them
need it (measured on tail-sized arrays: gathering pays from a quarter skipped on)."""


def _ndtr(x: np.ndarray) -> np.ndarray:
    """``scipy.special.ndtr(x)``, the same to the bit, evaluated only below
    ``NDTR_ONE_FROM``: in a tail's terms most entries often lie above it (59% of the README
    solve's, 25% of ``domestic-910c-h20``'s), and the CDF costs 15 ns an entry."""
    flat = np.asarray(x, dtype=float).reshape(-1)
    live = ~(flat >= NDTR_ONE_FROM)  # NaN is live: it stays NaN, as ndtr gives it
    return _ndtr_where(flat, live, 1.0).reshape(np.shape(x))


def _ndtr_where(flat: np.ndarray, live: np.ndarray, fill: float) -> np.ndarray:
    """``scipy.special.ndtr(flat)`` where ``live``, ``fill`` elsewhere, for a ``fill`` that
    ndtr returns exactly there: every entry evaluated where most are live (the same bits),
    only the live ones gathered where many are not."""
    if np.count_nonzero(live) >= NDTR_GATHER_BELOW * flat.size:
        return np.asarray(special.ndtr(flat))
    out = np.full(flat.size, fill)
    at = np.flatnonzero(live)
    out[at] = special.ndtr(flat[at])
    return out


def _smooth_excess(
    rate: float | np.ndarray, s: np.ndarray, sd: np.ndarray, z: np.ndarray
) -> np.ndarray:
    """``exp(-rate s + rate^2 sd^2 / 2) Phi(z - rate sd)``: the product where neither factor
    leaves floating point (``Phi`` by ``ndtr``, half the cost of its log), else the sum of
    logs (``log_ndtr``), which the product equals to 1e-13 relative."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        power = -rate * s + 0.5 * (rate * sd) ** 2
        x = z - rate * sd
        out: np.ndarray = np.exp(power) * _ndtr(x)
        # exp overflows past 709.8 and ndtr underflows below -37.68: a margin short of each
        far = (power >= 700.0) | (x <= -37.0)
        if far.any():
            power, x = np.broadcast_arrays(power, x)
            out[far] = np.exp(power[far] + special.log_ndtr(x[far]))
    return out
