"""Fitting calibration knobs to measured points by bounded least squares on log residuals.

Each point's prediction is what ``pddplan perf`` gives for its deployment and request shape
with the knobs at trial values (the point's own ``calibration`` held fixed). The objective is

    sum_i (log(predicted_i / measured_i))^2 + ridge x sum_k (log(knob_k / default_k))^2

over the knobs asked for, each within its bounds (``BOUNDS``), in log space. A roofline is a
``max()`` of terms, so the objective has kinks where the binding term changes: the fit runs
from ``STARTS`` starting points (the defaults, then points drawn in the bounds with a fixed
seed: the same input gives the same fit) and keeps the best. A knob's uncertainty is its
standard error from the Jacobian at the solution (``cov = s^2 (J^T J)^-1`` with ``s^2`` the
residual variance), as a multiplicative factor. A knob that no point informs (changing it
by ``PROBE`` moves no prediction by more than ``INFORMED``) is refused. Points of kind
``average`` (a production average: a lower bound on capacity) are predicted and reported,
but not fitted.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize

from pddplan.errors import ArgumentError, InputError
from pddplan.model.figures import InstancePerf, analyze_instance
from pddplan.model.instance import make_instance
from pddplan.spec.calibration import (
    MIN_ERROR_POINTS,
    CalibrationOverride,
    CalibrationSpec,
    Phase,
    PhaseError,
    resolve_calibration,
)
from pddplan.spec.engine import EngineProfile, chip_knobs
from pddplan.spec.hardware import HardwareCatalog
from pddplan.spec.llm import ModelSpec
from pddplan.spec.measurement import Measurement
from pddplan.spec.source import quote

BOUNDS: dict[str, tuple[float, float]] = {
    "prefill_mfu": (0.02, 1.0),
    "decode_mfu": (0.02, 1.0),
    "decode_hbm_efficiency": (0.1, 1.0),
    "collective_efficiency": (0.05, 1.0),
    "ep_imbalance": (1.0, 4.0),
    "prefill_comm_hidden": (0.01, 1.0),
    "decode_comm_hidden": (0.01, 1.0),
    "prefill_overlap_slowdown": (1.0, 3.0),
    "decode_overlap_slowdown": (1.0, 3.0),
    "scaleup_latency_us": (0.1, 1000.0),
    "scaleout_latency_us": (0.1, 1000.0),
    "step_overhead_ms": (0.01, 100.0),
}
"""The knobs ``calibrate`` may fit, and the range each may take."""
DEFAULT_KNOBS = ("prefill_mfu", "decode_mfu", "decode_hbm_efficiency", "collective_efficiency")
"""Fitted when none are named: those of them the points inform."""
RIDGE = 0.01
"""Default weight of the pull toward the defaults (per knob, on log ratios): a knob the
points barely inform stays near its default instead of wandering along a flat valley."""
STARTS = 8
PROBE = 0.2
"""Relative change of a knob when probing whether the points inform it."""
INFORMED = 1e-3
"""A knob whose probe moves no prediction by more than this share informs nothing."""


@dataclass(frozen=True)
class PointFit:
    """One point before and after the fit."""

    measurement: Measurement
    where: str
    before: float
    """Predicted with the defaults."""
    after: float
    """Predicted with the fitted knobs."""

    @property
    def residual_before(self) -> float:
        """predicted / measured - 1."""
        return self.before / self.measurement.value - 1

    @property
    def residual_after(self) -> float:
        return self.after / self.measurement.value - 1


@dataclass(frozen=True)
class KnobFit:
    name: str
    default: float
    value: float
    factor: float
    """One standard error as a multiplicative factor: the knob lies in ``[value / factor,
    value x factor]`` at one sigma (inf where the points cannot bound it)."""
    at_bound: bool
    """The fit ended on the knob's bound: the points want it beyond its range."""


@dataclass(frozen=True)
class Calibration:
    """A finished fit: what ``calibrate`` prints and writes."""

    knobs: list[KnobFit]
    points: list[PointFit]
    rms_before: float
    """Root mean square of the fitted (capacity) points' log residuals with the defaults."""
    rms_after: float
    ridge: float
    starts: int
    engine: str = ""
    """The engine profile the knobs were fitted on top of (its knobs for each point's chip
    family come first; the fitted ones override them)."""
    held_out: list[HeldPoint] = field(default_factory=list)
    """Each capacity point predicted by the fit on the other folds (``ERROR_FOLDS``); empty
    with fewer than ``MIN_ERROR_POINTS`` capacity points."""
    error_folds: int = 0
    """The folds ``held_out`` was predicted on (0: none)."""
    error: dict[Phase, PhaseError] = field(default_factory=dict)
    """Per phase with at least ``MIN_ERROR_POINTS`` held-out points: the quantiles of
    measured / predicted pass time (``error_table``), which a scenario that includes the
    written block plans its ``perf_quantile`` with."""
    notes: tuple[str, ...] = ()
    """Warnings about the input (points merged as repeats), one located line each."""


@dataclass(frozen=True)
class HeldPoint:
    """A capacity point predicted by the fit on the folds that do not hold it."""

    measurement: Measurement
    where: str
    predicted: float
    phase: Phase

    @property
    def time_ratio(self) -> float:
        """Measured / predicted pass time (predicted / measured throughput)."""
        return 1.0 / pass_ratio(self.measurement, self.predicted)


def pass_ratio(m: Measurement, predicted: float) -> float:
    """Predicted / measured per-GPU throughput for ``m``'s metric (measured / predicted step
    time where the metric is a step time)."""
    if m.metric == "decode_step_ms":
        return m.value / predicted
    return predicted / m.value


ERROR_FOLDS = 10
"""Folds of the held-out error of a user's calibration (at most one per point)."""
ERROR_STARTS = 2
"""Starts of each fold's fit: the defaults and the full fit's knobs (the full fit already
searched ``STARTS``)."""
ERROR_QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9, 0.95)
"""The quantiles an error table holds (as the engine profiles')."""


def error_table(times: Sequence[float], pooled: str | None = None) -> PhaseError:
    """The quantiles (``ERROR_QUANTILES``) of measured / predicted pass times, made never to
    fall as the quantile rises (as ``PhaseError`` requires)."""
    qs = {q: round(float(np.quantile(np.asarray(times), q)), 3) for q in ERROR_QUANTILES}
    for a, b in itertools.pairwise(ERROR_QUANTILES):
        qs[b] = max(qs[b], qs[a])
    return PhaseError(points=len(times), quantiles=qs, pooled=pooled)


FitProgress = Callable[[str], None]
"""Hears the fit's work as one line of text (the start, the predictions made so far)."""


MAX_RIDGE = 1e6
"""The largest ridge: a pull a million times the points' weight already holds every knob at
its default; past it the least-squares residuals overflow."""


def check_ridge(ridge: float, *, zero: bool = False) -> None:
    """``ridge`` is a finite number > 0 (>= 0 with ``zero``: an exact fit, as the tests and
    the cross-validation ask), else an ``ArgumentError`` naming ``ridge``: 0 leaves a knob
    the points barely inform free along a flat valley, and inf or nan would reach the
    solver as a residual it cannot minimize."""
    number = isinstance(ridge, int | float) and not isinstance(ridge, bool)
    if not number or not (ridge >= 0 if zero else ridge > 0) or not ridge <= MAX_RIDGE:
        raise ArgumentError(
            "ridge",
            f"{{argument}}: must be a number {'>=' if zero else '>'} 0 and at most "
            f"{MAX_RIDGE:g}, got {ridge!r}",
        )


def engine_knobs(
    engine: EngineProfile | None, hardware: HardwareCatalog, chip: str
) -> dict[str, float]:
    """``engine``'s knobs for ``chip``'s family, as a dict (none without an engine)."""
    if engine is None:
        return {}
    return chip_knobs(engine, hardware, chip).model_dump(exclude_none=True)


def predict(
    m: Measurement,
    model: ModelSpec,
    hardware: HardwareCatalog,
    knobs: dict[str, float] | None = None,
    engine: EngineProfile | None = None,
) -> float:
    """What the model gives for ``m``'s metric with ``engine``'s knobs for its chip, then
    ``knobs``, then the point's own calibration on top."""
    values = engine_knobs(engine, hardware, m.chip) | dict(knobs or {})
    return _metric(point_figures(m, model, hardware, values), m)


def point_figures(
    m: Measurement, model: ModelSpec, hardware: HardwareCatalog, knobs: dict[str, float]
) -> InstancePerf:
    """``pddplan perf``'s figures for ``m``'s deployment and request shape, with ``knobs``
    and the point's own calibration on top."""
    values = dict(knobs) | m.calibration.model_dump(exclude_none=True)
    spec = CalibrationSpec(default=CalibrationOverride(**values))
    cal = resolve_calibration(hardware, m.chip, spec)
    inst = make_instance(
        model,
        hardware.chips[m.chip],
        m.gpus,
        cal,
        kv_dtype=m.kv_dtype,
        weight_dtype=m.weight_dtype,
        context_parallel=m.context_parallel,
        attention_tp=m.attention_tp,
    )
    return analyze_instance(
        inst,
        input_tokens=m.input_tokens,
        hit_rate=m.hit_rate,
        output_tokens=m.output_tokens,
        tpot_ms=m.tpot_ms,
        batch=m.batch,
    )


def _metric(perf: InstancePerf, m: Measurement) -> float:
    if m.metric == "serving_output_tokens_per_s_per_gpu":
        prefill, decode = perf.prefill_input_tokens_per_s_per_gpu, perf.decode_tokens_per_s_per_gpu
        if prefill <= 0 or decode <= 0:
            return 0.0
        return m.output_tokens / (m.input_tokens / prefill + m.output_tokens / decode)
    return float(getattr(perf, m.metric))


def defaults(
    hardware: HardwareCatalog,
    chips: Sequence[str],
    names: Sequence[str],
    engine: EngineProfile | None = None,
) -> dict[str, float]:
    """Each knob's default: its value for the first chip of ``chips`` (the catalog family's
    efficiency defaults, ``engine``'s knobs for the family, the deployment defaults). Chips
    of one fit should share a family."""
    overrides = CalibrationOverride(**engine_knobs(engine, hardware, chips[0]))
    cal = resolve_calibration(hardware, chips[0], engine=overrides)
    values = cal.efficiency.model_dump() | cal.knobs.model_dump()
    return {k: float(values[k]) for k in names}


def calibrate(
    points: Sequence[tuple[Measurement, str]],
    models: dict[str, ModelSpec],
    hardware: HardwareCatalog,
    knobs: Sequence[str] | None = None,
    *,
    ridge: float = RIDGE,
    starts: int = STARTS,
    engine: EngineProfile | None = None,
    error_folds: int = ERROR_FOLDS,
    start: dict[str, float] | None = None,
    progress: FitProgress | None = None,
) -> Calibration:
    """Fit ``knobs`` (default: those of ``DEFAULT_KNOBS`` the points inform) to ``points``
    ((measurement, where) pairs), on top of ``engine``'s profile (None: the hardware
    catalog's figures, ``ideal``); with ``MIN_ERROR_POINTS`` capacity points or more and
    ``error_folds``, the held-out error per phase (``Calibration.error``). ``start``: a
    second starting point (knob values) tried after the defaults. ``InputError`` for a
    knob no point informs, too few points, a point the defaults cannot predict, or a fit
    (or a fold's) that does not converge. ``progress`` hears the work as it goes (each
    start, and every 50 predictions)."""
    if not points:
        raise InputError("no points to fit")
    asked = knobs is not None
    names = list(knobs) if knobs is not None else list(DEFAULT_KNOBS)
    twice = sorted({k for k in names if names.count(k) > 1})
    if twice:
        raise InputError(f"--knobs: {', '.join(twice)} named twice; name each knob once")
    if knobs is not None and not names:
        raise InputError(f"--knobs: no knob named; fittable: {', '.join(BOUNDS)}")
    unknown = [k for k in names if k not in BOUNDS]
    if unknown:
        shown = ", ".join(quote(k, 40) for k in unknown[:5])
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise InputError(f"--knobs: unknown knob {shown}{more}; fittable: {', '.join(BOUNDS)}")
    check_ridge(ridge, zero=True)
    chips = [m.chip for m, _ in points]
    x0 = defaults(hardware, chips, names, engine)
    made = [0]
    stage = ["predicting the points with the defaults"]

    def run(m: Measurement, values: dict[str, float]) -> float:
        made[0] += 1
        if progress is not None and made[0] % 50 == 0:
            progress(f"calibrate: {stage[0]}; {made[0]:,} predictions of {len(points):,} points")
        return predict(m, models[m.model], hardware, values, engine)

    before = []
    for m, where in points:
        try:
            value = run(m, x0)
        except ArgumentError as e:  # a point's own batch past what memory holds, say
            raise InputError(
                f"{where}: {e.argument}: {e.template.format(argument=e.argument)}"
            ) from None
        except InputError as e:  # its weights do not fit its GPUs, say: located at the point
            raise InputError(f"{where}: gpus: {'; '.join(e.problems)}") from None
        if not value > 0:
            raise InputError(f"{where}: the model predicts no {m.metric} for this point")
        before.append(value)
    fitted_points = [(m, w) for m, w in points if m.kind == "capacity"]
    fitted_before = [b for (m, _), b in zip(points, before, strict=True) if m.kind == "capacity"]
    if not fitted_points:
        raise InputError("no capacity point to fit: average-load points are lower bounds only")
    informed = {k: _informs(k, x0, fitted_points, fitted_before, run) for k in names}
    idle = [k for k, ok in informed.items() if not ok]
    if idle and asked:
        raise InputError(
            f"--knobs: no point informs {', '.join(idle)}: changing it by {PROBE:.0%} moves "
            f"no prediction by more than {INFORMED:.1%}; measure a point it limits, or leave "
            "it out"
        )
    names = [k for k in names if informed[k]]
    if not names:
        raise InputError("no knob is informed by these points: nothing to fit")
    if len(fitted_points) < len(names):
        raise InputError(
            f"{len(fitted_points)} capacity points cannot fit {len(names)} knobs "
            f"({', '.join(names)}); give at least {len(names)} points or fewer knobs"
        )
    measured = np.array([m.value for m, _ in fitted_points])
    lo = np.log([BOUNDS[k][0] for k in names])
    hi = np.log([BOUNDS[k][1] for k in names])
    base = np.log([x0[k] for k in names])

    def residuals(z: np.ndarray) -> np.ndarray:
        values = dict(x0) | {k: float(math.exp(v)) for k, v in zip(names, z, strict=True)}
        predicted = np.array([run(m, values) for m, _ in fitted_points])
        fit = np.log(np.maximum(predicted, 1e-300) / measured)
        return np.concatenate([fit, math.sqrt(ridge) * (z - base)])

    rng = np.random.default_rng(0)
    tries = [np.clip(base, lo, hi)]
    if start is not None:
        tries.append(np.clip(np.log([start.get(k, x0[k]) for k in names]), lo, hi))
    tries += [rng.uniform(lo, hi) for _ in range(max(starts - len(tries), 0))]
    best = None
    for n, z in enumerate(tries, 1):
        stage[0] = f"fitting {', '.join(names)} from start {n} of {len(tries)}"
        if progress is not None:
            progress(f"calibrate: {stage[0]}; {made[0]:,} predictions of {len(points):,} points")
        result = optimize.least_squares(residuals, z, bounds=(lo, hi), diff_step=1e-3)
        if result.status > 0 and (best is None or result.cost < best.cost):
            best = result
    if best is None:
        raise InputError(
            f"the fit did not converge from any of {len(tries)} starts; nothing written"
        )
    fitted = {k: float(math.exp(v)) for k, v in zip(names, best.x, strict=True)}
    factors = _factors(best, len(fitted_points), len(names))
    after = [run(m, dict(x0) | fitted) for m, _ in points]
    knob_fits = [
        KnobFit(
            k,
            x0[k],
            fitted[k],
            factors[i],
            bool(min(abs(best.x[i] - lo[i]), abs(best.x[i] - hi[i])) < 1e-6),
        )
        for i, k in enumerate(names)
    ]
    point_fits = [
        PointFit(m, where, b, a) for (m, where), b, a in zip(points, before, after, strict=True)
    ]
    capacity = [p for p in point_fits if p.measurement.kind == "capacity"]
    held: list[HeldPoint] = []
    if error_folds and len(fitted_points) >= MIN_ERROR_POINTS:
        held = _held_out(
            fitted_points, models, hardware, names, fitted,
            ridge=ridge, engine=engine, progress=progress,
        )  # fmt: skip
    phases: tuple[Phase, ...] = ("prefill", "decode")
    by_phase = {ph: [h.time_ratio for h in held if h.phase == ph] for ph in phases}
    return Calibration(
        knob_fits,
        point_fits,
        _rms([p.before / p.measurement.value for p in capacity]),
        _rms([p.after / p.measurement.value for p in capacity]),
        ridge,
        len(tries),
        engine.id if engine is not None else "ideal",
        held,
        min(ERROR_FOLDS, len(fitted_points)) if held else 0,
        {ph: error_table(t) for ph, t in by_phase.items() if len(t) >= MIN_ERROR_POINTS},
    )


def _held_out(
    points: Sequence[tuple[Measurement, str]],
    models: dict[str, ModelSpec],
    hardware: HardwareCatalog,
    names: Sequence[str],
    fitted: dict[str, float],
    *,
    ridge: float,
    engine: EngineProfile | None,
    progress: FitProgress | None = None,
) -> list[HeldPoint]:
    """Each point predicted by the same fit (``names``, ``ridge``, ``engine``) on the other
    ``ERROR_FOLDS`` folds (point ``i`` in fold ``i mod k``), from the defaults and from
    the full fit's knobs ``fitted``. ``InputError`` where a fold's fit fails (it names the
    fold): the error would not be the fit's."""
    k = min(ERROR_FOLDS, len(points))
    out = []
    for fold in range(k):
        train = [p for i, p in enumerate(points) if i % k != fold]

        def heard(line: str, fold: int = fold) -> None:
            if progress is not None:
                progress(f"held-out fold {fold + 1} of {k}: {line}")

        try:
            part = calibrate(
                train, models, hardware, names, ridge=ridge, starts=ERROR_STARTS,
                engine=engine, error_folds=0, start=fitted, progress=heard,
            )  # fmt: skip
        except InputError as e:
            raise InputError(
                f"the held-out error's fold {fold + 1} of {k} (its other "
                f"{len(train)} points): {e}; nothing written"
            ) from None
        values = {kf.name: kf.value for kf in part.knobs}
        for m, where in points[fold::k]:
            model = models[m.model]
            knobs = engine_knobs(engine, hardware, m.chip) | values
            predicted = predict(m, model, hardware, values, engine)
            out.append(HeldPoint(m, where, predicted, phase_of(m, model, hardware, knobs)))
    return out


def phase_of(
    m: Measurement, model: ModelSpec, hardware: HardwareCatalog, knobs: dict[str, float]
) -> Phase:
    """The pass a point's metric times: a prefill or decode figure's own; a serving
    throughput's, the phase that takes longer per request at these knobs."""
    if m.metric.startswith("prefill"):
        return "prefill"
    if m.metric != "serving_output_tokens_per_s_per_gpu":
        return "decode"
    perf = point_figures(m, model, hardware, knobs)
    prefill_s = m.input_tokens / perf.prefill_input_tokens_per_s_per_gpu
    decode_s = m.output_tokens / perf.decode_tokens_per_s_per_gpu
    return "prefill" if prefill_s > decode_s else "decode"


def _informs(
    knob: str,
    x0: dict[str, float],
    points: Sequence[tuple[Measurement, str]],
    before: list[float],
    run: Callable[[Measurement, dict[str, float]], float],
) -> bool:
    """Whether moving ``knob`` by ``PROBE`` (within its bounds) moves some prediction."""
    lo, hi = BOUNDS[knob]
    for direction in (1 - PROBE, 1 + PROBE):
        trial = min(max(x0[knob] * direction, lo), hi)
        if trial == x0[knob]:
            continue
        values = dict(x0) | {knob: trial}
        for (m, _), b in zip(points, before, strict=True):
            if abs(run(m, values) / b - 1) > INFORMED:
                return True
    return False


def _factors(result: optimize.OptimizeResult, n_points: int, n_knobs: int) -> list[float]:
    """One standard error per knob as a multiplicative factor (log-space standard error)."""
    j = result.jac[:n_points]  # the data rows; the ridge rows are the prior
    dof = n_points - n_knobs
    if dof <= 0:
        return [math.inf] * n_knobs
    s2 = float(np.sum(result.fun[:n_points] ** 2)) / dof
    try:
        cov = np.linalg.inv(j.T @ j + 1e-12 * np.eye(n_knobs)) * s2
    except np.linalg.LinAlgError:
        return [math.inf] * n_knobs
    return [_as_factor(float(cov[i, i])) for i in range(n_knobs)]


def _rms(ratios: Sequence[float]) -> float:
    logs = np.log(np.maximum(np.asarray(ratios, dtype=float), 1e-300))
    return float(np.sqrt(np.mean(logs**2)))


def _as_factor(variance: float) -> float:
    """A log-space variance as a one-sigma multiplicative factor (inf past float range)."""
    sd = math.sqrt(max(variance, 0.0))
    return math.exp(sd) if sd < 700 else math.inf
