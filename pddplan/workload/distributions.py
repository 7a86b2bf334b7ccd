"""The workload's distributions as numbers: quantiles and CDFs (``frozen_dist``) and the
mean over a quantile slice (``slice_mean``), the representative of a request class
(``pddplan.workload.classes``)."""

from __future__ import annotations

import functools

import numpy as np
from scipy import stats

from pddplan.spec.distributions import Bucket, HitDist, LengthDist


@functools.lru_cache(maxsize=256)
def frozen_dist(d: LengthDist | HitDist) -> stats.rv_continuous | stats.rv_discrete:
    """A ``scipy.stats`` frozen distribution for ``d`` (cached: ``d`` is immutable, and
    building one costs more than using it)."""
    if d.dist == "fixed":
        return stats.rv_discrete(values=([d.value], [1.0]))
    if d.dist == "uniform":
        return stats.uniform(loc=d.min, scale=d.max - d.min)  # type: ignore[operator]
    if d.dist == "lognormal":
        base = stats.lognorm(s=d.sigma, scale=d.median)
        if d.min is None and d.max is None:
            return base
        lo = base.cdf(d.min) if d.min is not None else 0.0
        hi = base.cdf(d.max) if d.max is not None else 1.0
        return _Truncated(base, lo, hi)
    if d.dist == "beta":
        a = d.mean * d.concentration  # type: ignore[operator]
        return stats.beta(a, d.concentration - a)  # type: ignore[operator]
    edges, weights = _bucket_grid(d.buckets)  # type: ignore[arg-type]
    return stats.rv_histogram((weights, edges), density=False)


class _Truncated:
    """A distribution truncated to [ppf(lo), ppf(hi)] of a base (quantile remapping)."""

    def __init__(self, base: stats.rv_continuous, lo: float, hi: float) -> None:
        self.base, self.lo, self.hi = base, lo, hi

    def ppf(self, q: np.ndarray | float) -> np.ndarray | float:
        return self.base.ppf(self.lo + np.asarray(q) * (self.hi - self.lo))

    def cdf(self, x: np.ndarray | float) -> np.ndarray | float:
        return np.clip((self.base.cdf(x) - self.lo) / (self.hi - self.lo), 0.0, 1.0)


def _bucket_grid(buckets: tuple[Bucket, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Contiguous edges and weights, with zero-weight bins filling any gaps."""
    edges, weights = [buckets[0].lo], []
    for b in buckets:
        if b.lo > edges[-1]:
            weights.append(0.0)
            edges.append(b.lo)
        weights.append(b.share)
        edges.append(b.hi)
    return np.asarray(edges), np.asarray(weights)


QUANTILE_GRID = 64
"""Quantile points per class used to average a distribution over a class's slice."""


def slice_mean(d: LengthDist | HitDist, q_lo: float, q_hi: float) -> float:
    """Mean of ``d`` over its quantile slice [q_lo, q_hi] (the class representative)."""
    if d.dist == "fixed":
        return float(d.value)  # type: ignore[arg-type]
    q = q_lo + (np.arange(QUANTILE_GRID) + 0.5) / QUANTILE_GRID * (q_hi - q_lo)
    return float(np.mean(frozen_dist(d).ppf(q)))
