"""Engine profiles fitted to a public corpus of measured runs, and the model's error with
them on points the fit did not see.

**The fit.** An engine's points are predicted with the hardware catalog's family defaults
and, on top, the fitted knobs (each point's own ``calibration`` held fixed, as in
``fit.calibrate``). The knobs are of two kinds:

- the engine's own (``ENGINE_KNOBS``: the per-layer fixed cost, the expert GEMMs' padding),
  one value for every chip family: they are the engine's software, not the chip;
- the efficiencies (``FAMILY_KNOBS``), one value per chip family with at least
  ``FAMILY_MIN_POINTS`` of the engine's points, and one pooled value for the families with
  fewer (and for those with none, in the shipped profile).

Each is fitted in log space by bounded least squares on ``log(predicted / measured)`` with
a ridge toward its starting value (``RIDGE``), from ``starts`` starting points, as
``fit.calibrate``; a knob no point informs keeps its starting value.

**Cross-validation.** Points are grouped by source (``source_group``: one publication,
whatever the commit of it), and the groups dealt into ``k`` folds, largest first, each to
the fold with the fewest points so far (ties: the lower fold). Each fold is predicted by
the fit on the other folds; ``k`` = the number of groups is leave-one-source-out.

**The error.** A held-out point's ratio is predicted / measured per-GPU throughput (for a
decode-step point, measured / predicted step time: the same ratio). Its phase is the pass
the metric times: prefill for the prefill metrics, decode for the decode ones, and for an
aggregated server's output rate, the phase of most of its predicted GPU-seconds.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize

from pddplan.calibration.fit import BOUNDS, _as_factor, pass_ratio, phase_of, predict
from pddplan.errors import InputError
from pddplan.spec.calibration import CalibrationOverride, Phase
from pddplan.spec.hardware import HardwareCatalog
from pddplan.spec.llm import ModelSpec
from pddplan.spec.measurement import Measurement

ENGINE_KNOBS = ("layer_overhead_us", "expert_pad_tokens")
"""Fitted once per engine: its fixed cost per layer, its expert GEMMs' padding."""
FAMILY_KNOBS = ("prefill_mfu", "decode_mfu", "decode_hbm_efficiency")
"""Fitted per chip family where the engine has enough points there, else pooled."""
FAMILY_MIN_POINTS = 5
"""Points of one engine on one chip family that earn the family its own efficiencies."""
STARTING = {"layer_overhead_us": 10.0, "expert_pad_tokens": 32.0}
"""Where the engine knobs start, and what the ridge pulls them toward: 10 us a layer (a
few kernel launches of ~2-5 us each; the per-layer cost in the issue's low-concurrency
misses), half a 64-row grouped-GEMM tile."""
FIT_BOUNDS = BOUNDS | {"layer_overhead_us": (0.1, 1000.0), "expert_pad_tokens": (0.1, 1024.0)}
RIDGE = 0.01
"""As ``fit.RIDGE``: per knob, on log ratios to the starting value."""
STARTS = 3


@dataclass(frozen=True, order=True)
class Param:
    """One fitted value: ``knob`` for ``family`` (None: pooled, every family without its
    own)."""

    knob: str
    family: str | None = None

    @property
    def label(self) -> str:
        return self.knob if self.family is None else f"{self.family}.{self.knob}"


@dataclass(frozen=True)
class Fit:
    """An engine's fitted knobs."""

    values: dict[Param, float]
    factors: dict[Param, float]
    """One standard error per knob as a multiplicative factor (inf: unbounded)."""
    at_bound: list[Param]
    idle: list[Param]
    """Knobs no point informs: held at their starting value."""
    points: int

    def knobs_for(self, family: str) -> dict[str, float]:
        """The knobs a point (or a chip) of ``family`` is predicted with."""
        return family_knobs(self.values, family)


def family_knobs(values: dict[Param, float], family: str) -> dict[str, float]:
    """``family``'s own values of ``values``, and the pooled ones where it has none."""
    out = {}
    for p, v in values.items():
        if (p.family is None and Param(p.knob, family) not in values) or p.family == family:
            out[p.knob] = v
    return out


@dataclass(frozen=True)
class HeldOut:
    """A point predicted by a fit that did not see its source."""

    measurement: Measurement
    where: str
    fold: int
    predicted: float
    phase: Phase

    @property
    def ratio(self) -> float:
        """Predicted / measured per-GPU throughput (measured / predicted step time)."""
        return pass_ratio(self.measurement, self.predicted)


def source_group(m: Measurement) -> str:
    """The publication a point comes from: its URL's host and path, a GitHub file whatever
    its commit (an issue or a pull request is a publication of its own)."""
    url = m.url or m.source or m.id or ""
    url = re.sub(r"^https?://(www\.)?", "", url).split("#")[0].split("?")[0].rstrip("/")
    blob = re.match(r"github\.com/([^/]+/[^/]+)/(?:blob|tree)/[^/]+/(.*)", url)
    if blob:
        return f"github.com/{blob[1]}/{blob[2]}"
    return url


def folds_by_source(measurements: Sequence[Measurement], k: int) -> list[int]:
    """Each point's fold: sources dealt into ``k`` folds, largest first, each to the fold
    with the fewest points so far (the lower fold on a tie; sources of equal size by
    name), so every point of a source shares a fold."""
    sizes = Counter(source_group(m) for m in measurements)
    if k > len(sizes):
        raise InputError(f"{k} folds need {k} sources; these points have {len(sizes)}")
    fold_of: dict[str, int] = {}
    filled = [0] * k
    for group, n in sorted(sizes.items(), key=lambda item: (-item[1], item[0])):
        fold = min(range(k), key=lambda f: (filled[f], f))
        fold_of[group] = fold
        filled[fold] += n
    return [fold_of[source_group(m)] for m in measurements]


def parameters(measurements: Sequence[Measurement], hardware: HardwareCatalog) -> list[Param]:
    """The knobs an engine's points fit: ``ENGINE_KNOBS`` once, ``FAMILY_KNOBS`` per family
    with ``FAMILY_MIN_POINTS`` or more, and pooled where any family has fewer."""
    families = Counter(hardware.chips[m.chip].family for m in measurements)
    own = sorted(f for f, n in families.items() if n >= FAMILY_MIN_POINTS)
    params = [Param(k) for k in ENGINE_KNOBS]
    if len(own) < len(families):
        params += [Param(k) for k in FAMILY_KNOBS]
    return params + [Param(k, f) for f in own for k in FAMILY_KNOBS]


def _start(param: Param, hardware: HardwareCatalog) -> float:
    if param.knob in STARTING:
        return STARTING[param.knob]
    family = param.family or "hopper"
    defaults = hardware.efficiency_defaults[family]
    return float(getattr(defaults, param.knob))


def fit_engine(
    points: Sequence[tuple[Measurement, str]],
    models: dict[str, ModelSpec],
    hardware: HardwareCatalog,
    *,
    fixed: CalibrationOverride | None = None,
    ridge: float = RIDGE,
    starts: int = STARTS,
) -> Fit:
    """Fit an engine's knobs (``parameters``) to its ``points``; ``fixed`` knobs (the
    profile's sourced, unfitted settings, e.g. ``attention_bf16``) hold for every point.
    ``InputError`` when the fit converges from no start."""
    ms = [m for m, _ in points if m.kind == "capacity"]
    if not ms:
        raise InputError("no capacity point to fit")
    params = parameters(ms, hardware)
    base = (fixed or CalibrationOverride()).model_dump(exclude_none=True)
    families = [hardware.chips[m.chip].family for m in ms]
    start = {p: _start(p, hardware) for p in params}
    measured = np.array([m.value for m in ms])

    def values_of(z: np.ndarray, names: list[Param]) -> dict[Param, float]:
        return start | {p: float(math.exp(v)) for p, v in zip(names, z, strict=True)}

    def predictions(values: dict[Param, float]) -> np.ndarray:
        return np.array(
            [
                predict(m, models[m.model], hardware, base | family_knobs(values, f))
                for m, f in zip(ms, families, strict=True)
            ]
        )

    before = predictions(start)
    if not np.all(before > 0):
        bad = ms[int(np.flatnonzero(~(before > 0))[0])]
        raise InputError(f"{bad.id}: the model predicts no {bad.metric} for this point")
    idle = [p for p in params if not _informs(p, start, before, predictions)]
    names = [p for p in params if p not in idle]
    lo = np.log([FIT_BOUNDS[p.knob][0] for p in names])
    hi = np.log([FIT_BOUNDS[p.knob][1] for p in names])
    centre = np.clip(np.log([start[p] for p in names]), lo, hi)

    def residuals(z: np.ndarray) -> np.ndarray:
        predicted = predictions(values_of(z, names))
        fit = np.log(np.maximum(predicted, 1e-300) / measured)
        return np.concatenate([fit, math.sqrt(ridge) * (z - centre)])

    rng = np.random.default_rng(0)
    tries = [centre] + [rng.uniform(lo, hi) for _ in range(max(starts, 1) - 1)]
    best = None
    for z in tries:
        result = optimize.least_squares(residuals, z, bounds=(lo, hi), diff_step=1e-3)
        if result.status > 0 and (best is None or result.cost < best.cost):
            best = result
    if best is None:
        raise InputError(f"the fit did not converge from any of {len(tries)} starts")
    values = values_of(best.x, names)
    factors = _factors(best, len(ms), names)
    at_bound = [
        p for i, p in enumerate(names) if min(abs(best.x[i] - lo[i]), abs(best.x[i] - hi[i])) < 1e-6
    ]
    return Fit(values, factors, at_bound, idle, len(ms))


def _informs(
    param: Param,
    start: dict[Param, float],
    before: np.ndarray,
    predictions: Callable[[dict[Param, float]], np.ndarray],
) -> bool:
    """Whether moving ``param`` by 20% moves some prediction by more than 0.1%."""
    lo, hi = FIT_BOUNDS[param.knob]
    trial = min(max(start[param] * 1.2, lo), hi)
    if trial == start[param]:
        trial = min(max(start[param] * 0.8, lo), hi)
    moved = predictions(start | {param: trial})
    return bool(np.any(np.abs(moved / before - 1) > 1e-3))


def _factors(result: optimize.OptimizeResult, n: int, names: list[Param]) -> dict[Param, float]:
    j = result.jac[:n]
    dof = n - len(names)
    if dof <= 0:
        return dict.fromkeys(names, math.inf)
    s2 = float(np.sum(result.fun[:n] ** 2)) / dof
    try:
        cov = np.linalg.inv(j.T @ j + 1e-12 * np.eye(len(names))) * s2
    except np.linalg.LinAlgError:
        return dict.fromkeys(names, math.inf)
    return {p: _as_factor(float(cov[i, i])) for i, p in enumerate(names)}


def cross_validate(
    points: Sequence[tuple[Measurement, str]],
    models: dict[str, ModelSpec],
    hardware: HardwareCatalog,
    *,
    folds: int,
    fixed: CalibrationOverride | None = None,
    ridge: float = RIDGE,
    starts: int = STARTS,
) -> list[HeldOut]:
    """Every point predicted by the fit on the folds that do not hold its source
    (``folds_by_source``); ``InputError`` where a fold leaves too few points to fit."""
    ms = [m for m, _ in points]
    fold_of = folds_by_source(ms, folds)
    base = (fixed or CalibrationOverride()).model_dump(exclude_none=True)
    out: list[HeldOut] = []
    for k in range(folds):
        train = [p for p, f in zip(points, fold_of, strict=True) if f != k]
        test = [p for p, f in zip(points, fold_of, strict=True) if f == k]
        if len(train) < len(parameters([m for m, _ in train], hardware)) + 1:
            raise InputError(f"fold {k + 1} of {folds} leaves {len(train)} points to fit: too few")
        fit = fit_engine(train, models, hardware, fixed=fixed, ridge=ridge, starts=starts)
        for m, where in test:
            family = hardware.chips[m.chip].family
            knobs = base | fit.knobs_for(family)
            value = predict(m, models[m.model], hardware, knobs)
            out.append(HeldOut(m, where, k, value, phase_of(m, models[m.model], hardware, knobs)))
    return out


@dataclass(frozen=True)
class Summary:
    """Held-out figures of a set of points."""

    points: int
    within: float
    """Share within ``band`` of 1 (ratio)."""
    median: float
    """Median ratio."""
    mape: float
    """Mean |ratio - 1|."""


def summarize(held: Sequence[HeldOut], band: float = 0.2) -> Summary:
    r = np.array([h.ratio for h in held])
    if not len(r):
        return Summary(0, math.nan, math.nan, math.nan)
    return Summary(
        len(r),
        float(np.mean(np.abs(r - 1) <= band)),
        float(np.median(r)),
        float(np.mean(np.abs(r - 1))),
    )
