"""The axes of a sweep: ``--vary PATH=SPEC`` parsed into a path and its values, and the
points the axes make (a grid, or the axes zipped).

SPEC is one of:

- ``LO:HI:STEP``: LO, LO + STEP, ... up to HI (HI included when it is on the grid, to a
  relative 1e-9);
- ``LO:HI:xN``: N points spaced evenly in log between LO and HI, both included (LO > 0);
- ``a,b,c``: the values listed, in that order (numbers, ``true``/``false``, or text such as
  a chip id).

Every problem is an ``InputError`` that names the ``--vary`` argument and what is allowed.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from pddplan.errors import InputError

MAX_POINTS = 100_000
"""A grid larger than this needs ``confirm_large`` (the command line's ``--yes``)."""


@dataclass(frozen=True)
class Axis:
    """One varied path and its values, in sweep order."""

    path: str
    values: tuple[Any, ...]
    spec: str
    """The SPEC as given (for the report)."""


def parse_vary(text: str) -> Axis:
    """``PATH=SPEC`` as an ``Axis`` (module docstring)."""
    path, sep, spec = text.partition("=")
    path, spec = path.strip(), spec.strip()
    if not sep or not path or not spec:
        raise InputError(
            f"--vary {text}: expected PATH=SPEC, e.g. workload.arrival_rps=2:10:2, "
            "prices_usd_per_gpu_hour.h200-sxm=3:4:x5 or sla.ttft_p99_s=8,10,12"
        )
    return Axis(path, _values(path, spec), spec)


def _values(path: str, spec: str) -> tuple[Any, ...]:
    where = f"--vary {path}={spec}"
    if ":" not in spec:
        items = [s.strip() for s in spec.split(",")]
        if any(not s for s in items):
            raise InputError(f"{where}: an empty item in the list; give a,b,c")
        values = tuple(_scalar(s) for s in items)
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
        if n < 2:
            raise InputError(f"{where}: xN needs at least 2 points, got {n}")
        if not 0 < lo < hi:
            raise InputError(f"{where}: log spacing needs 0 < LO < HI, got LO {lo:g}, HI {hi:g}")
        ratio = math.log(hi / lo) / (n - 1)
        points = [lo * math.exp(i * ratio) for i in range(n)]
        points[-1] = hi
        return tuple(_clean(x) for x in points)
    step = _number(where, last, "STEP")
    if step == 0:
        raise InputError(f"{where}: STEP is 0; give a step above 0")
    if step < 0:
        raise InputError(f"{where}: STEP must be above 0 (give LO below HI), got {step:g}")
    if hi < lo:
        raise InputError(f"{where}: the range is empty: HI {hi:g} is below LO {lo:g}")
    n = math.floor((hi - lo) / step * (1 + 1e-9) + 1e-9) + 1
    if n > MAX_POINTS:
        raise InputError(f"{where}: {n:,} values on one axis; at most {MAX_POINTS:,}")
    integral = all(float(x).is_integer() for x in (lo, hi, step))
    grid = [lo + i * step for i in range(n)]
    return tuple(round(x) if integral else _clean(x) for x in grid)


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


def _scalar(text: str) -> Any:
    """A list item: an int, a float, true/false, or the text itself."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        x = float(text)
    except ValueError:
        return text
    if not math.isfinite(x):
        raise InputError(f"a list item must be finite, got '{text}'")
    return x


def points(axes: list[Axis], *, zipped: bool = False) -> list[dict[str, Any]]:
    """Every point of the axes as ``{path: value}``: their grid, the first axis the
    slowest to change; or, ``zipped``, the i-th value of each axis together."""
    if not axes:
        raise InputError("a sweep needs at least one --vary PATH=SPEC (or a --study)")
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
