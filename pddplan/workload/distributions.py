"""The workload's distributions as numbers: quantiles and CDFs (``frozen_dist``) and the
mean over a quantile slice (``slice_mean``), the representative of a request class
(``pddplan.workload.classes``)."""

from __future__ import annotations

import functools

import numpy as np
from numpy.typing import ArrayLike

from pddplan.spec.distributions import Bucket, HitDist, LengthDist


class Dist:
    """A distribution on the real line as the planner uses it: quantiles and the CDF."""

    def ppf(self, q: ArrayLike) -> np.ndarray:
        raise NotImplementedError

    def cdf(self, x: ArrayLike) -> np.ndarray:
        raise NotImplementedError


class _Fixed(Dist):
    def __init__(self, value: float) -> None:
        self.value = value

    def ppf(self, q: ArrayLike) -> np.ndarray:
        return np.full_like(np.asarray(q, dtype=float), self.value)

    def cdf(self, x: ArrayLike) -> np.ndarray:
        return (np.asarray(x, dtype=float) >= self.value).astype(float)


class _Uniform(Dist):
    def __init__(self, lo: float, hi: float) -> None:
        self.lo, self.width = lo, hi - lo

    def ppf(self, q: ArrayLike) -> np.ndarray:
        return self.lo + np.asarray(q, dtype=float) * self.width

    def cdf(self, x: ArrayLike) -> np.ndarray:
        return np.clip((np.asarray(x, dtype=float) - self.lo) / self.width, 0.0, 1.0)


class _LogNormal(Dist):
    """``median x exp(sigma Z)``: ``ppf(q) = median exp(sigma ndtri(q))``."""

    def __init__(self, median: float, sigma: float) -> None:
        self.median, self.sigma = median, sigma

    def ppf(self, q: ArrayLike) -> np.ndarray:
        from scipy import special  # imported where needed: it takes a sixth of a second

        z: np.ndarray = special.ndtri(np.asarray(q, dtype=float))
        return self.median * np.exp(self.sigma * z)

    def cdf(self, x: ArrayLike) -> np.ndarray:
        from scipy import special

        x = np.asarray(x, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.log(x / self.median) / self.sigma
        cdf: np.ndarray = np.where(x > 0, special.ndtr(z), 0.0)
        return cdf


class _Beta(Dist):
    def __init__(self, a: float, b: float) -> None:
        self.a, self.b = a, b

    def ppf(self, q: ArrayLike) -> np.ndarray:
        from scipy import special

        ppf: np.ndarray = special.betaincinv(self.a, self.b, np.asarray(q, dtype=float))
        return ppf

    def cdf(self, x: ArrayLike) -> np.ndarray:
        from scipy import special

        cdf: np.ndarray = special.betainc(
            self.a, self.b, np.clip(np.asarray(x, dtype=float), 0.0, 1.0)
        )
        return cdf


class _Histogram(Dist):
    """Uniform within each bar: the CDF is piecewise linear through the bars' edges."""

    def __init__(self, edges: np.ndarray, weights: np.ndarray) -> None:
        widths = np.diff(edges)
        density = weights / widths
        density = density / float(np.sum(density * widths))
        self.edges: np.ndarray = edges
        self.cum: np.ndarray = np.concatenate(([0.0], np.cumsum(density * widths)))

    def ppf(self, q: ArrayLike) -> np.ndarray:
        ppf: np.ndarray = np.interp(np.asarray(q, dtype=float), self.cum, self.edges)
        return ppf

    def cdf(self, x: ArrayLike) -> np.ndarray:
        cdf: np.ndarray = np.interp(np.asarray(x, dtype=float), self.edges, self.cum)
        return cdf


@functools.lru_cache(maxsize=256)
def frozen_dist(d: LengthDist | HitDist) -> Dist:
    """The distribution ``d`` describes (cached: ``d`` is immutable). Quantiles and CDFs
    come from ``scipy.special`` (``ndtri``, ``ndtr``, ``betaincinv``, ``betainc``): the
    same numbers as ``scipy.stats`` for a tenth of its import time."""
    if d.dist == "fixed":
        return _Fixed(d.number("value"))
    if d.dist == "uniform":
        return _Uniform(d.number("min"), d.number("max"))
    if d.dist == "lognormal":
        base = _LogNormal(d.number("median"), d.number("sigma"))
        if d.min is None and d.max is None:
            return base
        lo = float(base.cdf(d.min)) if d.min is not None else 0.0
        hi = float(base.cdf(d.max)) if d.max is not None else 1.0
        return _Truncated(base, lo, hi)
    if d.dist == "beta":
        concentration = d.number("concentration")
        a = d.number("mean") * concentration
        return _Beta(a, concentration - a)
    edges, weights = _bucket_grid(d.bars())
    return _Histogram(edges, weights)


class _Truncated(Dist):
    """A distribution truncated to [ppf(lo), ppf(hi)] of a base (quantile remapping)."""

    def __init__(self, base: Dist, lo: float, hi: float) -> None:
        self.base, self.lo, self.hi = base, lo, hi

    def ppf(self, q: ArrayLike) -> np.ndarray:
        return self.base.ppf(self.lo + np.asarray(q) * (self.hi - self.lo))

    def cdf(self, x: ArrayLike) -> np.ndarray:
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


def slice_points(
    d: LengthDist | HitDist, q_lo: float, q_hi: float, n: int = QUANTILE_GRID
) -> np.ndarray:
    """``d`` at ``n`` quantiles spread evenly over [q_lo, q_hi]."""
    q = q_lo + (np.arange(n) + 0.5) / n * (q_hi - q_lo)
    return np.asarray(frozen_dist(d).ppf(q), dtype=float)


def slice_mean(d: LengthDist | HitDist, q_lo: float, q_hi: float) -> float:
    """Mean of ``d`` over its quantile slice [q_lo, q_hi] (the class representative)."""
    if d.dist == "fixed":
        return d.number("value")
    return float(np.mean(slice_points(d, q_lo, q_hi)))
