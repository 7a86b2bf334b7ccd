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

Paths are checked against the scenario's schema before any point runs (``check_axes``):
one that does not exist gets the nearest existing path as a did-you-mean; an index into
what is not a list, or past its end, a path into a section the scenario leaves unset, a
field no point can change (``FIXED``: the model, the workload variants, the catalogs) and
a value of the wrong type for its field are each one line.
"""

from __future__ import annotations

import copy
import difflib
import math
import re
import types
import typing
from collections.abc import Callable, Collection, Iterator
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from pddplan.errors import InputError
from pddplan.model.problem import Problem, set_path
from pddplan.spec.base import _scalar_problem
from pddplan.spec.scenario import Scenario
from pddplan.sweeps.axes import Axis

HIT_MEAN = "workload.prefix_hit.mean"
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


FIXED = {
    "model": "the model cannot be varied: every point shares the model's tables; sweep one "
    "scenario per model",
    "workload_variants": "workload variants cannot be varied: a sweep plans the scenario's "
    "own workload at every point; vary workload.* instead, or sweep one scenario per variant",
    "catalogs": "the catalogs cannot be varied: they are read once, before any point; sweep "
    "one scenario per catalog",
}
"""Top-level keys no sweep can vary, and why (each is read once, before any point)."""
_PATH = re.compile(r"^[^.\[\]]+(\.[^.\[\]]+|\[\d+\])*$")
_CHIP_KEYED = re.compile(r"^(prices_usd_per_gpu_hour|gpu_purchase|datacenters\.[^.]+\.inventory)$")
"""Mappings keyed by chip ids: a new key there must be a chip of the hardware catalog."""


class _Refused(Exception):
    """Why an axis's path cannot be varied (one line, without the ``--vary`` prefix)."""


def check_axes(problem: Problem, axes: list[Axis]) -> None:
    """Each axis names a path of the scenario's schema that a point can change (or a knob),
    and values of that field's type, before any point runs: else an ``InputError``, one
    line per bad axis. Paths into lists need an index in range; a path into a mapping or an
    optional section the scenario leaves unset says what to set; a new key of a mapping of
    chips is a chip of the hardware catalog. A value within its type but outside its
    field's range is left to the point (an ``invalid`` row), since a grid may cross it."""
    data = problem.scenario.model_dump(mode="json")
    chips = problem.hardware.chips
    problems = []
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
        try:
            annotation = _field(data, a.path, chips)
            _check_values(a.path, annotation, a.values)
            if a.path == "engine" or a.path.startswith("engine."):
                _check_engines(problem, a.path, a.values)
        except _Refused as e:
            problems.append(f"{where}: {e}")
    if problems:
        raise InputError(problems)


def _field(data: dict[str, Any], path: str, chips: Collection[str]) -> Any:
    """The type of the scenario's field at ``path``, walked through the schema with the
    scenario's data alongside (a union is the member the data holds); ``_Refused`` where
    the path is not one a point can set."""
    if not _PATH.match(path):
        raise _Refused("not a path: give dotted keys and [i] indexes, e.g. links[0].rtt_ms")
    parts = _parts(path)
    if parts[0] in FIXED:
        raise _Refused(FIXED[str(parts[0])])
    annotation: Any = Scenario
    node: Any = data
    at = ""
    for k, part in enumerate(parts):
        last = k == len(parts) - 1
        here = f"{at}[{part}]" if isinstance(part, int) else (f"{at}.{part}" if at else part)
        annotation = _member(annotation, node)
        if node is None and at:
            raise _Refused(f"{at} is not set in the scenario; set it there to vary {path}")
        origin = typing.get_origin(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if not isinstance(part, str):
                raise _Refused(
                    f"{at or 'the scenario'} is a mapping, not a list; it has no [{part}]"
                )
            if part not in annotation.model_fields:
                raise _Refused(f"the scenario has no {here}{_near(data, here)}")
            annotation = annotation.model_fields[part].annotation
            node = node.get(part) if isinstance(node, dict) else None
        elif origin is dict:
            key_type, value_type = typing.get_args(annotation)
            if not isinstance(part, str):
                raise _Refused(f"{at} is a mapping, not a list; it has no [{part}]")
            if isinstance(node, dict) and part in node:
                annotation, node = value_type, node[part]
            elif last and _scalar_type(value_type):
                if _CHIP_KEYED.match(at) and part not in chips:
                    near = difflib.get_close_matches(part, list(chips), n=1, cutoff=0.5)
                    hint = f"; did you mean {near[0]}?" if near else ""
                    raise _Refused(f"'{part}' is not a chip of the hardware catalog{hint}")
                try:
                    TypeAdapter(_bare(key_type)).validate_python(part)
                except ValidationError:
                    raise _Refused(f"'{part}' is not a key {at} takes") from None
                annotation, node = value_type, None
            else:
                raise _Refused(f"the scenario sets no {here}; add it to {at} in the scenario "
                               f"first, then vary its fields")  # fmt: skip
        elif origin in (tuple, list):
            if not isinstance(part, int):
                raise _Refused(f"{at} is a list; index it, as {at}[0].{part}")
            if not isinstance(node, list):
                raise _Refused(f"{at} is not set in the scenario; set it there to vary {path}")
            if part >= len(node):
                held = f"index 0 to {len(node) - 1}" if node else "it is empty"
                raise _Refused(f"{at} has {len(node)} item(s) ({held}); there is no {here}")
            args = typing.get_args(annotation)
            variadic = origin is list or (len(args) == 2 and args[1] is Ellipsis)
            annotation = args[0] if variadic else args[min(part, len(args) - 1)]
            node = node[part]
        else:
            what = f"index [{part}]" if isinstance(part, int) else f"key {part}"
            raise _Refused(f"{at} is {_describe(annotation)}, not a list or mapping; it has no "
                           f"{what}")  # fmt: skip
        at = here
    annotation = _member(annotation, node)
    if not _scalar_type(annotation):
        kind = "a list" if typing.get_origin(annotation) in (tuple, list) else "a mapping"
        example = next((p for p in _leaves(node, path) if p != path), None)
        hint = f" (e.g. {example})" if example else ""
        raise _Refused(f"{path} is {kind}; vary one of its values{hint}")
    return annotation


def _member(annotation: Any, node: Any) -> Any:
    """``annotation`` without ``Annotated`` and, for a union, the member ``node`` is (None
    stays in a union of scalars, where it is a value the leaf may take)."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return annotation
    members = [m for m in typing.get_args(annotation) if m is not type(None)]
    if all(_scalar_type(m) for m in members):
        return annotation
    if node is None:  # unset: where one member holds one value, that (``engine: NAME``)
        scalars = [m for m in members if _scalar_type(m)]
        if len(members) == 1 or len(scalars) == 1:
            return _member((scalars or members)[0], None)
        return annotation
    for m in members:
        try:
            TypeAdapter(m).validate_python(node)
        except ValidationError:
            continue
        return _member(m, node)
    return members[0]


def _scalar_type(annotation: Any) -> bool:
    """Whether a field of this type holds one value (a number, text, a choice...), not a
    section, list or mapping."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return all(_scalar_type(m) for m in typing.get_args(annotation))
    if origin in (tuple, list, dict) or annotation in (tuple, list, dict):
        return False
    return not (isinstance(annotation, type) and issubclass(annotation, BaseModel))


def _bare(annotation: Any) -> Any:
    """``annotation`` with every ``Annotated`` constraint removed: the type alone."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _bare(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return typing.Union[tuple(_bare(m) for m in typing.get_args(annotation))]  # noqa: UP007
    return annotation


def _describe(annotation: Any) -> str:
    """A field's type in words: 'a number', 'a whole number', 'true/false', 'text', 'one of
    a, b'."""
    bare = _bare(annotation)
    origin = typing.get_origin(bare)
    if origin in (typing.Union, types.UnionType):
        words = [_describe(m) for m in typing.get_args(bare) if m is not type(None)]
        return " or ".join(dict.fromkeys(words))
    if origin is typing.Literal:
        return "one of " + ", ".join(str(v) for v in typing.get_args(bare))
    return {int: "a whole number", float: "a number", bool: "true/false", str: "text"}.get(
        bare, f"a {getattr(bare, '__name__', 'value')}"
    )


def _check_values(path: str, annotation: Any, values: tuple[Any, ...]) -> None:
    """Each value of the axis is of the field's type (its range is the point's to check)."""
    bare = _bare(annotation)
    adapter = TypeAdapter(bare)
    for v in dict.fromkeys(values):
        problem = _scalar_problem(v, bare)
        if problem is None:
            try:
                adapter.validate_python(v)
            except ValidationError as e:
                problem = e.errors()[0]["msg"]
        if problem is not None:
            raise _Refused(f"{path} takes {_describe(bare)}, not {v!r}")


def _check_engines(problem: Problem, path: str, values: tuple[Any, ...]) -> None:
    """Each value of an ``engine`` axis (or of one role's, ``engine.main_decode``) names an
    engine profile with pass times for every chip its roles may use, and one that can hand
    the KV cache to the other roles' engines."""
    from pddplan.io.catalogs import engine_option

    role = path.removeprefix("engine").removeprefix(".")
    for v in values:
        given = f"{role}={v}" if role else str(v)
        if not role and "=" in given:
            raise _Refused(
                f"{v!r}: one engine's name for every role; vary one role's engine with "
                "--vary engine.ROLE=NAME,... (the scenario's engine given per role)"
            )
        try:
            engine_option(given, problem.scenario, problem.hardware, problem.engines)
        except InputError as e:
            raise _Refused(e.problems[-1].replace("serving_engine: ", "")) from None


def _near(data: dict[str, Any], path: str) -> str:
    """'; did you mean P?' for the scenario's path closest to ``path``, if one is close."""
    leaves = [p for p in _leaves(data) if p]
    near = difflib.get_close_matches(path, [*leaves, HIT_MEAN], n=1, cutoff=0.6)
    return f"; did you mean {near[0]}?" if near else ""


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


# --- what a path is, in words -----------------------------------------------------------------
def field_doc(path: str) -> str | None:
    """The docstring of the scenario field ``path`` ends in (``spec.base.field_docs``, its
    own class's or a base's), walked through the schema by name alone (a list index or a
    mapping key goes to the item's type; a union to its first section); None where the
    path is not a field or the field has no docstring."""
    from pddplan.spec.base import field_docs

    parts = _parts(path) if _PATH.match(path) else []
    annotation: Any = Scenario
    owner: type[BaseModel] | None = None
    name: str | None = None
    for part in parts:
        annotation = _section(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if not isinstance(part, str) or part not in annotation.model_fields:
                return None
            owner, name = annotation, part
            annotation = annotation.model_fields[part].annotation
        elif typing.get_origin(annotation) is dict:
            annotation = typing.get_args(annotation)[1]  # a key of a mapping: its value
        elif typing.get_origin(annotation) in (tuple, list) and isinstance(part, int):
            annotation = typing.get_args(annotation)[0]
        else:
            return None
    if owner is None or name is None:
        return None
    for base in owner.__mro__:
        if isinstance(base, type) and issubclass(base, BaseModel):
            doc = field_docs(base).get(name)
            if doc:
                return doc
    return None


def _section(annotation: Any) -> Any:
    """``annotation`` without ``Annotated`` and, for a union, its first section (a model, a
    list or a mapping), else itself."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for m in typing.get_args(annotation):
            m = _section(m)
            if not _scalar_type(m):
                return m
    return annotation
