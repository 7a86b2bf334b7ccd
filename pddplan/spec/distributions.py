"""Workload distributions: request lengths (tokens) and prefix-cache hit rates (0-1).

Each distribution is one validated object with a ``dist`` kind and that kind's parameters;
``pddplan.workload.distributions`` gives its quantiles and CDF (``frozen_dist``) and averages it
over a quantile slice (the representative of a request class, ``pddplan.workload.classes``).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, model_validator

from pddplan.spec.base import Frozen
from pddplan.spec.limits import MAX_TOKENS

Tokens = Annotated[float, Field(gt=0, le=MAX_TOKENS)]

SHARE_TOLERANCE = 1e-6
"""Bucket shares must sum to 1 within this tolerance."""


class Bucket(Frozen):
    """A histogram bar: ``share`` of requests lie in [lo, hi) (uniform inside)."""

    lo: Annotated[float, Field(ge=0, le=MAX_TOKENS)]
    hi: Annotated[float, Field(gt=0, le=MAX_TOKENS)]
    share: Annotated[float, Field(ge=0, le=1)]

    @model_validator(mode="after")
    def _ordered(self) -> Bucket:
        if self.hi <= self.lo:
            raise ValueError(f"hi ({self.hi:g}) must be above lo ({self.lo:g})")
        return self


def _check_buckets(buckets: tuple[Bucket, ...], upper: float | None) -> list[str]:
    problems = []
    total = sum(b.share for b in buckets)
    if abs(total - 1.0) > SHARE_TOLERANCE:
        problems.append(f"bucket shares sum to {total:.6g}; they must sum to 1")
    for a, b in itertools.pairwise(buckets):
        if b.lo < a.hi:
            problems.append(
                f"buckets overlap or are out of order: [{a.lo:g}, {a.hi:g}) then [{b.lo:g}, {b.hi:g})"
            )
    if upper is not None and buckets and buckets[-1].hi > upper:
        problems.append(f"bucket hi {buckets[-1].hi:g} is above {upper:g}")
    return problems


class _Distribution(Frozen):
    """What the length and hit-rate distributions share: typed access to the parameters
    their kind requires."""

    if TYPE_CHECKING:  # fields of both subclasses
        dist: str
        buckets: tuple[Bucket, ...] | None

    def number(self, name: str) -> float:
        """A parameter this kind requires (its validator made sure it is given)."""
        value = getattr(self, name)
        if not isinstance(value, int | float):
            raise ValueError(f"dist '{self.dist}' has no {name}")
        return float(value)

    def bars(self) -> tuple[Bucket, ...]:
        """The buckets of a ``buckets`` distribution."""
        if self.buckets is None:
            raise ValueError(f"dist '{self.dist}' has no buckets")
        return self.buckets


class LengthDist(_Distribution):
    """A token-length distribution.

    Kinds and their keys: ``fixed`` (value); ``uniform`` (min, max); ``lognormal`` (median,
    sigma, optional min/max truncation); ``buckets`` (list of {lo, hi, share}).
    """

    dist: Literal["fixed", "uniform", "lognormal", "buckets"]
    value: Tokens | None = None
    median: Tokens | None = None
    sigma: Annotated[float, Field(gt=0)] | None = None
    min: Tokens | None = None
    max: Tokens | None = None
    buckets: tuple[Bucket, ...] | None = None

    @model_validator(mode="after")
    def _params_match_kind(self) -> LengthDist:
        need = {
            "fixed": ("value",),
            "uniform": ("min", "max"),
            "lognormal": ("median", "sigma"),
            "buckets": ("buckets",),
        }[self.dist]
        problems = _check_params(
            self,
            need,
            ("value", "median", "sigma", "min", "max", "buckets"),
            optional={"lognormal": ("min", "max")}.get(self.dist, ()),
        )
        if self.min is not None and self.max is not None and self.max <= self.min:
            problems.append(f"max ({self.max:g}) must be above min ({self.min:g})")
        if self.buckets is not None:
            problems += _check_buckets(self.buckets, None)
        if problems:
            raise ValueError("; ".join(problems))
        return self


class HitDist(_Distribution):
    """A prefix-cache hit-rate distribution on [0, 1].

    Kinds and their keys: ``fixed`` (value); ``beta`` (mean, concentration = alpha + beta);
    ``buckets`` (list of {lo, hi, share} with 0 <= lo < hi <= 1).
    """

    dist: Literal["fixed", "beta", "buckets"]
    value: Annotated[float, Field(ge=0, le=1)] | None = None
    mean: Annotated[float, Field(gt=0, lt=1)] | None = None
    concentration: Annotated[float, Field(gt=0)] | None = None
    buckets: tuple[Bucket, ...] | None = None

    @model_validator(mode="after")
    def _params_match_kind(self) -> HitDist:
        need = {"fixed": ("value",), "beta": ("mean", "concentration"), "buckets": ("buckets",)}[
            self.dist
        ]
        problems = _check_params(self, need, ("value", "mean", "concentration", "buckets"))
        if self.buckets is not None:
            problems += _check_buckets(self.buckets, 1.0)
        if problems:
            raise ValueError("; ".join(problems))
        return self


def _check_params(
    obj: LengthDist | HitDist,
    need: tuple[str, ...],
    every: tuple[str, ...],
    optional: tuple[str, ...] = (),
) -> list[str]:
    kind = obj.dist
    missing = [k for k in need if getattr(obj, k) is None]
    extra = [
        k for k in every if k not in need and k not in optional and getattr(obj, k) is not None
    ]
    problems = []
    if missing:
        problems.append(f"dist '{kind}' needs {', '.join(missing)}")
    if extra:
        problems.append(
            f"dist '{kind}' does not take {', '.join(extra)} (it takes {', '.join(need + optional)})"
        )
    return problems
