"""The axes of a sweep: ``--vary PATH=SPEC`` parsed into a path and its values, and the
points the axes make (a grid, or the axes zipped).

SPEC is one of:

- ``LO:HI:STEP``: LO, LO + STEP, ... up to HI (HI included when it is on the grid, to a
  relative 1e-9);
- ``LO:HI:xN``: N points spaced evenly in log between LO and HI, both included (LO > 0);
- ``a,b,c``: the values listed, in that order (numbers, ``true``/``false``, or text such as
  a chip id).

Every problem is an ``InputError`` that names the ``--vary`` argument and what is allowed.
An axis is bounded before any of its values is made: at most ``max_points`` values (the
grid's own bound, ``DEFAULT_MAX_POINTS`` unless raised, never above ``POINTS_CEILING``),
finite bounds, and every value finite.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from pddplan.errors import InputError

DEFAULT_MAX_POINTS = 100_000
"""The most points a grid may have unless the caller raises it (``--max-points``)."""
POINTS_CEILING = 1_000_000
"""The most points any grid may have (``--yes``, or the largest ``--max-points``): every
point and its result are held in memory until the output is written."""
MAX_POINTS = DEFAULT_MAX_POINTS
"""The former name of ``DEFAULT_MAX_POINTS``."""
MAX_AXES = 32
"""The most ``--vary`` axes one sweep takes."""
EXACT_INTEGERS = 2.0**53
"""Whole numbers up to this magnitude stay whole on a range axis; beyond it a float has no
unit step, so they stay floats."""


@dataclass(frozen=True)
class Axis:
    """One varied path and its values, in sweep order."""

    path: str
    values: tuple[Any, ...]
    spec: str
    """The SPEC as given (for the report)."""


def parse_vary(text: str, *, max_points: int = DEFAULT_MAX_POINTS) -> Axis:
    """``PATH=SPEC`` as an ``Axis`` (module docstring) of at most ``max_points`` values."""
    path, sep, spec = text.partition("=")
    path, spec = path.strip(), spec.strip()
    if not sep or not path or not spec:
        raise InputError(
            f"--vary {text}: expected PATH=SPEC, e.g. workload.arrival_rps=2:10:2, "
            "prices_usd_per_gpu_hour.h200-sxm=3:4:x5 or sla.ttft_p99_s=8,10,12"
        )
    return Axis(path, _values(path, spec, max_points), spec)


def _too_many(where: str, n: float | int, cap: int) -> InputError:
    count = f"{n:,}" if isinstance(n, int) else f"more than {cap:,}"
    return InputError(
        f"{where}: {count} values on one axis; at most {cap:,} (--max-points, "
        f"itself at most {POINTS_CEILING:,})"
    )


def _values(path: str, spec: str, cap: int) -> tuple[Any, ...]:
    where = f"--vary {path}={spec}" if len(spec) <= 80 else f"--vary {path}={spec[:60]}..."
    if ":" not in spec:
        if spec.count(",") >= cap:
            raise _too_many(where, spec.count(",") + 1, cap)
        items = [s.strip() for s in spec.split(",")]
        if any(not s for s in items):
            raise InputError(f"{where}: an empty item in the list; give a,b,c")
        values = tuple(_scalar(where, s) for s in items)
        if len(set(map(repr, values))) != len(values):
            raise InputError(f"{where}: the list repeats a value; give each once")
        return values
    parts = spec.split(":")
    if len(parts) != 3:
        raise InputError(f"{where}: a range is LO:HI:STEP or LO:HI:xN, got {len(parts)} parts")
    lo, hi = (_number(where, p, name) for p, name in zip(parts[:2], ("LO", "HI"), strict=True))
    last = parts[2].strip()
    if last.lower().startswith("x"):
        try:
            n = int(last[1:])
        except ValueError:
            raise InputError(f"{where}: xN takes a whole number of points, got '{last}'") from None
        if n > cap:
            raise _too_many(where, n, cap)
        if n < 2:
            raise InputError(f"{where}: xN needs at least 2 points, got {n}")
        if not 0 < lo < hi:
            raise InputError(f"{where}: log spacing needs 0 < LO < HI, got LO {lo:g}, HI {hi:g}")
        ratio = (math.log(hi) - math.log(lo)) / (n - 1)  # hi / lo may overflow
        points = [lo * math.exp(i * ratio) for i in range(n)]
        points[0] = lo
        points[-1] = hi
        return tuple(_clean(x) for x in points)
    step = _number(where, last, "STEP")
    if step == 0:
        raise InputError(f"{where}: STEP is 0; give a step above 0")
    if step < 0:
        raise InputError(f"{where}: STEP must be above 0 (give LO below HI), got {step:g}")
    if hi < lo:
        raise InputError(f"{where}: the range is empty: HI {hi:g} is below LO {lo:g}")
    span = (hi - lo) / step
    if not math.isfinite(span):  # hi - lo past the float range: each over step instead
        span = hi / step - lo / step
    if not math.isfinite(span) or span >= 10 * cap:  # too many to count them
        raise _too_many(where, math.inf, cap)
    n = math.floor(span * (1 + 1e-9) + 1e-9) + 1
    if n > cap:
        raise _too_many(where, n, cap)
    integral = all(float(x).is_integer() and abs(x) <= EXACT_INTEGERS for x in (lo, hi, step))
    grid = [_at(lo, step, i) for i in range(n)]
    if not all(math.isfinite(x) for x in grid):
        raise InputError(f"{where}: the range runs past the largest number a value may take")
    return tuple(round(x) if integral else _clean(x) for x in grid)


def _at(lo: float, step: float, i: int) -> float:
    """``lo + i step``, halved and doubled where ``i step`` alone passes the float range."""
    x = lo + i * step
    return x if math.isfinite(x) else 2 * (lo / 2 + i * (step / 2))


def _clean(x: float) -> float:
    """``x`` rounded to 12 significant digits, so that 0.1 + 2 x 0.1 reads 0.3."""
    return float(f"{x:.12g}")


def _number(where: str, text: str, name: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise InputError(f"{where}: {name} must be a number, got '{text.strip()}'") from None
    if not math.isfinite(x):
        raise InputError(f"{where}: {name} must be finite, got '{text.strip()}'")
    return x


def _scalar(where: str, text: str) -> Any:
    """A list item: an int, a float, true/false, or the text itself."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        whole = int(text)
    except ValueError:
        pass
    else:
        if abs(whole) > 2**63 - 1:
            raise InputError(f"{where}: the item {text[:30]} is past the largest integer a "
                             "value may take (about 9.2e18)")  # fmt: skip
        return whole
    try:
        x = float(text)
    except ValueError:
        return text
    if not math.isfinite(x):
        raise InputError(f"{where}: a list item must be finite, got '{text[:30]}'")
    return x


def points(axes: list[Axis], *, zipped: bool = False) -> list[dict[str, Any]]:
    """Every point of the axes as ``{path: value}``: their grid, the first axis the
    slowest to change; or, ``zipped``, the i-th value of each axis together."""
    if not axes:
        raise InputError("a sweep needs at least one --vary PATH=SPEC (or a --study)")
    if len(axes) > MAX_AXES:
        raise InputError(f"--vary: {len(axes)} axes; a sweep takes at most {MAX_AXES}")
    seen: set[str] = set()
    for a in axes:
        if a.path in seen:
            raise InputError(f"--vary {a.path}: the path is varied twice; give it once")
        seen.add(a.path)
    if zipped:
        lengths = {len(a.values) for a in axes}
        if len(lengths) > 1:
            sizes = ", ".join(f"{a.path} {len(a.values)}" for a in axes)
            raise InputError(f"--zip pairs the axes' values, so they need one length; got {sizes}")
        return [dict(zip((a.path for a in axes), vs, strict=True))
                for vs in zip(*(a.values for a in axes), strict=True)]  # fmt: skip
    return [
        dict(zip((a.path for a in axes), vs, strict=True))
        for vs in itertools.product(*(a.values for a in axes))
    ]


def grid_size(axes: list[Axis], *, zipped: bool = False) -> int:
    """How many points ``points`` would make (without making them)."""
    if not axes:
        return 0
    if zipped:
        return len(axes[0].values)
    return math.prod(len(a.values) for a in axes)
