"""What a sweep point changes in its scenario: a value at a dotted path, or a derived knob.

A point is applied to the scenario's plain data (``Scenario.model_dump(mode="json")``) and
validated again by the caller. Two changes are more than a value set at a path:

- ``workload.prefix_hit.mean`` (``HIT_MEAN``) moves the prefill-side hit distribution to a
  new mean with its shape kept: every hit rate ``h`` becomes ``1 - s (1 - h)`` (each
  request's miss fraction scaled by one factor ``s``), clipped at 0, with ``s`` solved so
  that the mean is the one asked (``scaled_misses``). The decode-side hits that are given
  (``workload.md_prefix_hit``, each ``md_cache`` option's ``md_prefix_hit`` or ``md_hit``,
  classes' ``md_hit``) move by the same ``s``; a tiered MD cache takes its hit from the
  sessions' reuse, which follows the new prefill-side distribution by itself. A mean of 0
  is every hit at 0 (``fixed``), the only distribution with that mean.
- a bucket's ``share`` (``...buckets[i].share``) renormalises the other buckets of its
  histogram so that the shares still sum to 1, in their old proportions.

Paths that do not exist are found before any point runs (``check_axes``), with the
nearest existing path as a did-you-mean; so is a value of the wrong kind for its path.
"""

from __future__ import annotations

import copy
import difflib
import math
import re
from collections.abc import Callable, Collection, Iterator
from typing import Any

from pddplan.errors import InputError
from pddplan.model.problem import set_path
from pddplan.sweeps.axes import Axis

HIT_MEAN = "workload.prefix_hit.mean"
FREE_KEYS = ("prices_usd_per_gpu_hour", "gpu_purchase")
"""Mappings whose keys are the user's (chip ids): a path may add a key to them."""
_SHARE = re.compile(r"^(?P<hist>.*\.buckets)\[(?P<i>\d+)\]\.share$")
_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
ZERO_HIT_WIDTH = 1e-3
"""Hits clipped to 0 are kept as the bucket [0, this): the histogram form needs lo < hi."""


def _parts(path: str) -> list[str | int]:
    return [int(i) if i else key for key, i in _PART.findall(path)]


def _get(data: Any, path: str) -> Any:
    node = data
    for part in _parts(path):
        node = node[part]
    return node


def _leaves(data: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(data, dict):
        for k, v in data.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _leaves(v, f"{prefix}[{i}]")
    else:
        yield prefix


def _exists(data: Any, path: str) -> bool:
    try:
        _get(data, path)
    except (KeyError, IndexError, TypeError):
        return False
    return True


def check_axes(data: dict[str, Any], axes: list[Axis], *, chips: Collection[str] = ()) -> None:
    """Each axis names a path of the scenario (or a knob) and values of its kind, and a
    new key of a mapping of chips is one of ``chips``: else an ``InputError``, one line per
    bad axis."""
    problems = []
    leaves = [p for p in _leaves(data) if p]
    for a in axes:
        where = f"--vary {a.path}"
        if a.path == HIT_MEAN:
            if (
                data["workload"].get("prefix_hit") is None
                and data["workload"].get("classes") is None
            ):
                problems.append(f"{where}: the workload has no prefix_hit distribution or classes "
                                "to move (a trace: fit it with 'pddplan workload fit' first)")  # fmt: skip
            bad = [v for v in a.values if not _is_number(v) or not 0 <= v < 1]
            if bad:
                problems.append(f"{where}: a mean hit rate is a number in [0, 1), got {bad[0]!r}")
            continue
        parts = _parts(a.path)
        if not parts or not _exists(data, a.path):
            parent = a.path.rpartition(".")[0]
            key = a.path.rpartition(".")[2]
            if parent in FREE_KEYS and _exists(data, parent) and key in chips:
                current = None
            elif parent in FREE_KEYS and _exists(data, parent):
                near = difflib.get_close_matches(key, list(chips), n=1, cutoff=0.5)
                hint = f"; did you mean {near[0]}?" if near else ""
                problems.append(f"{where}: '{key}' is not a chip of the hardware catalog{hint}")
                continue
            else:
                near = difflib.get_close_matches(a.path, [*leaves, HIT_MEAN], n=1, cutoff=0.6)
                hint = f"; did you mean {near[0]}?" if near else ""
                problems.append(f"{where}: the scenario has no {a.path}{hint}")
                continue
        else:
            current = _get(data, a.path)
        if isinstance(current, dict | list):
            problems.append(
                f"{where}: {a.path} is a {'mapping' if isinstance(current, dict) else 'list'}; "
                "vary one of its values (e.g. "
                f"{next(p for p in leaves if p.startswith(a.path))})"
            )
            continue
        kind = _kind(current)
        wrong = [v for v in a.values if kind is not None and _kind(v) != kind]
        if wrong:
            problems.append(
                f"{where}: {a.path} takes a {kind} (it is {current!r}), got {wrong[0]!r}"
            )
    if problems:
        raise InputError(problems)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _kind(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return "true/false"
    if _is_number(v):
        return "number"
    return "text"


def apply(data: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """A copy of the scenario data with the point's ``values`` applied (module docstring);
    plain paths first, then bucket shares, then the hit mean."""
    out = copy.deepcopy(data)
    for path, v in values.items():
        if path != HIT_MEAN:
            set_path(out, path, v)
    for path, v in values.items():
        m = _SHARE.match(path)
        if m is not None:
            _renormalise(out, m["hist"], int(m["i"]), float(v), path)
    if HIT_MEAN in values:
        move_hit_mean(out["workload"], out.get("md_cache"), float(values[HIT_MEAN]))
    return out


def _renormalise(data: dict[str, Any], hist: str, i: int, share: float, path: str) -> None:
    buckets = _get(data, hist)
    rest = sum(b["share"] for j, b in enumerate(buckets) if j != i)
    if not 0 <= share <= 1:
        raise InputError(f"{path}: a share is in [0, 1], got {share:g}")
    if rest <= 0 and share < 1:
        raise InputError(f"{path}: the other buckets have no share to scale to {1 - share:g}")
    for j, b in enumerate(buckets):
        if j != i:
            b["share"] = b["share"] * (1 - share) / rest if rest > 0 else 0.0


# --- the hit-mean knob ----------------------------------------------------------------------
def _mean(dist: dict[str, Any]) -> float:
    kind = dist["dist"]
    if kind == "fixed":
        return float(dist["value"])
    if kind == "beta":
        return float(dist["mean"])
    return sum(b["share"] * (b["lo"] + b["hi"]) / 2 for b in dist["buckets"])


def _move(h: float, s: float) -> float:
    """A hit rate ``h`` with its miss fraction scaled by ``s``, clipped at 0 (``s`` infinite:
    every hit 0)."""
    return 0.0 if math.isinf(s) else max(0.0, 1 - s * (1 - h))


def _scaled(dist: dict[str, Any], s: float) -> dict[str, Any]:
    """``dist`` with every hit ``h`` moved to ``_move(h, s)``."""

    def move(h: float) -> float:
        return _move(h, s)

    kind = dist["dist"]
    if math.isinf(s):
        return {"dist": "fixed", "value": 0.0}
    if kind == "fixed":
        return {"dist": "fixed", "value": move(dist["value"])}
    if kind == "beta":
        mean = move(dist["mean"])
        if mean <= 0:
            return {"dist": "fixed", "value": 0.0}
        return {"dist": "beta", "mean": min(mean, 1 - 1e-9), "concentration": dist["concentration"]}
    zero, kept = 0.0, []
    for b in dist["buckets"]:
        lo, hi, share = 1 - s * (1 - b["lo"]), 1 - s * (1 - b["hi"]), b["share"]  # unclipped
        if hi <= ZERO_HIT_WIDTH:  # the whole bucket clips to 0
            zero += share
            continue
        if lo < ZERO_HIT_WIDTH and b["lo"] < b["hi"]:  # the part below joins the zeros
            cut = (ZERO_HIT_WIDTH - lo) / (hi - lo)
            zero += share * cut
            lo, share = ZERO_HIT_WIDTH, share * (1 - cut)
        kept.append({"lo": lo, "hi": hi, "share": share})
    if zero > 0:
        kept.insert(0, {"lo": 0.0, "hi": ZERO_HIT_WIDTH, "share": zero})
    return {"dist": "buckets", "buckets": kept}


def scaled_misses(dist: dict[str, Any], mean: float) -> tuple[dict[str, Any], float]:
    """``dist`` (plain data of a ``HitDist``) moved to ``mean`` with its shape kept, and the
    miss factor ``s`` that does it (module docstring); bisection on ``s`` where clipping at
    0 makes the mean bend."""
    if mean <= 0:
        return {"dist": "fixed", "value": 0.0}, math.inf
    miss = 1 - _mean(dist)
    if miss <= 0:
        raise InputError(
            f"{HIT_MEAN}: every hit is 1 here; there is no miss fraction to scale to {mean:g}"
        )
    s = (1 - mean) / miss
    if dist["dist"] == "buckets" and mean < ZERO_HIT_WIDTH:  # below what the form can hold
        return {"dist": "fixed", "value": mean}, s
    if abs(_mean(_scaled(dist, s)) - mean) > 1e-9:  # clipped at 0: the mean bends, bisect
        s = _bisect(lambda s: _mean(_scaled(dist, s)), s, mean)
    return _scaled(dist, s), s


def _bisect(mean_at: Callable[[float], float], s: float, mean: float) -> float:
    """The miss factor at or above ``s`` where ``mean_at`` (decreasing in it) is ``mean``."""
    lo = hi = s
    for _ in range(64):
        if mean_at(hi) <= mean:
            break
        hi *= 2
    else:
        raise InputError(f"{HIT_MEAN}: no scaling of the misses brings the mean down to {mean:g}")
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mean_at(mid) > mean else (lo, mid)
    return (lo + hi) / 2


def move_hit_mean(workload: dict[str, Any], md_cache: list[dict[str, Any]] | None,
                  mean: float) -> None:  # fmt: skip
    """Move the workload's prefill-side hit to ``mean`` and every given decode-side hit by
    the same miss factor, in place (module docstring)."""
    classes = workload.get("classes")
    if classes:
        miss = sum(c["weight"] * (1 - c["p_hit"]) for c in classes)
        if miss <= 0 and mean < 1:
            raise InputError(
                f"{HIT_MEAN}: every class hits 1; there is no miss fraction to scale to {mean:g}"
            )
        s = math.inf if mean <= 0 else (1 - mean) / miss

        def at(s: float) -> float:  # classes clip at 0 too: bisect where they do
            return sum(c["weight"] * _move(c["p_hit"], s) for c in classes)

        if mean > 0 and abs(at(s) - mean) > 1e-9:
            s = _bisect(at, s, mean)
        for c in classes:
            c["p_hit"] = _move(c["p_hit"], s)
            if c.get("md_hit") is not None:
                c["md_hit"] = _move(c["md_hit"], s)
    else:
        workload["prefix_hit"], s = scaled_misses(workload["prefix_hit"], mean)
        if workload.get("md_prefix_hit") is not None:
            workload["md_prefix_hit"] = _scaled(workload["md_prefix_hit"], s)
    for option in md_cache or []:
        if option.get("md_prefix_hit") is not None:
            option["md_prefix_hit"] = _scaled(option["md_prefix_hit"], s)
        if option.get("md_hit") is not None:
            option["md_hit"] = [_move(h, s) for h in option["md_hit"]]
