"""What a finished sweep says: its rows (one per point and architecture), the metric each
objective ranks by, the winner at each point and the break-even points between them."""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from typing import Any

from pddplan import units
from pddplan.spec.choices import MAX_BCR, MAX_CAPACITY, MIN_COST, Objective
from pddplan.spec.status import PlanStatus, PointStatus, RowStatus
from pddplan.sweeps.engine import SweepRun
from pddplan.sweeps.points import PointResult

STOPPED = tuple(s for s in PlanStatus if s.stopped)
"""Solver statuses of a search that stopped before it proved its answer."""

METRICS = {
    "cost": ("cost_per_hour_usd", "cost, USD/hour", "low"),
    "bcr": ("bcr", "BCR, req/s per USD/hour", "high"),
    "capacity": ("sla_capacity_rps", "SLA capacity, req/s", "high"),
    "ttft_p99": ("ttft_p99_s", "TTFT P99 at the demand, s", "low"),
}
"""Name -> (result field, axis label with its unit, which way is better)."""
OBJECTIVE_METRIC: dict[str, str] = {MIN_COST: "cost", MAX_BCR: "bcr", MAX_CAPACITY: "capacity"}
COLUMNS = ("architecture", "status", "cost_per_hour_usd", "cost_per_month_usd",
           "sla_capacity_rps", "bcr", "ttft_p90_s", "ttft_p99_s", "gpus", "fleet",
           "deployment_id", "binding",
           "solver_status", "time_limited", "gap", "reason")  # fmt: skip
"""The columns of a row after the varied values (no clock readings: rows are the same
bytes whatever ran them)."""


def rows(run: SweepRun) -> list[dict[str, Any]]:
    """One row per point and architecture (an invalid or interrupted point: one row with
    its reason), the varied values first."""
    out = []
    paths = [a.path for a in run.job.axes]
    for p in run.points:
        head = {path: p.values.get(path) for path in paths}
        if p.status != PointStatus.OK:
            out.append(head | dict.fromkeys(COLUMNS) | {"status": p.status, "reason": p.reason})
            continue
        for r in p.results:
            cost = r.cost_per_hour_usd
            row = {
                "architecture": r.architecture,
                "status": r.status,
                "cost_per_hour_usd": cost,
                "cost_per_month_usd": None if cost is None else cost * units.HOURS_PER_MONTH,
                "sla_capacity_rps": r.sla_capacity_rps,
                "bcr": r.bcr,
                "ttft_p90_s": r.ttft_p90_s,
                "ttft_p99_s": r.ttft_p99_s,
                "gpus": r.gpus,
                "fleet": r.fleet,
                "deployment_id": r.deployment_id,
                "binding": r.binding,
                "solver_status": r.solver_status,
                "time_limited": r.time_limited,
                "gap": r.gap,
                "reason": r.reason,
            }
            out.append(head | row)
    return out


def metric_of(objective: Objective | None) -> str:
    return OBJECTIVE_METRIC.get(objective or MIN_COST, "cost")


def value_of(point: PointResult, architecture: str, metric: str) -> float | None:
    """``metric`` of ``architecture`` at ``point``; None where it has no plan that
    serves the demand."""
    field = METRICS[metric][0]
    for r in point.results:
        if r.architecture == architecture and r.status == RowStatus.OK:
            v = getattr(r, field)
            return None if v is None or not math.isfinite(v) else float(v)
    return None


def fleet_of(point: PointResult, architecture: str) -> str | None:
    """``architecture``'s fleet at ``point``; None where it has no plan that serves the
    demand."""
    return next((r.fleet for r in point.results
                 if r.architecture == architecture and r.status == RowStatus.OK), None)  # fmt: skip


def architectures(run: SweepRun) -> list[str]:
    """The architectures' labels, in the order they were planned."""
    seen: dict[str, None] = {}
    for p in run.points:
        for r in p.results:
            if r.kind != "hypothetical" or len(run.job.settings.architectures) == 1:
                seen.setdefault(r.architecture, None)
    return list(seen)


def winner(point: PointResult, metric: str) -> str | None:
    """The architecture best at ``metric`` at ``point`` (the hypothetical datacenter never
    wins: it does not exist); PDD first among equals."""
    best: tuple[float, bool, str] | None = None
    sign = 1 if METRICS[metric][2] == "low" else -1
    for r in point.results:
        if r.kind == "hypothetical":
            continue
        v = value_of(point, r.architecture, metric)
        if v is None:
            continue
        key = (sign * v, r.kind != "pdd", r.architecture)
        if best is None or key < best:
            best = key
    return best[2] if best is not None else None


@dataclass(frozen=True)
class BreakEven:
    """Where the best architecture changes between two consecutive values of one axis."""

    path: str
    lo: Any
    hi: Any
    before: str | None
    after: str | None

    def text(self) -> str:
        return (f"{self.path} between {self.lo:g} and {self.hi:g}: {self.before or 'none'} "
                f"-> {self.after or 'none'}")  # fmt: skip


def break_evens(run: SweepRun, metric: str) -> list[BreakEven]:
    """On a sweep of one axis, each change of winner between consecutive values that have
    one (a value where no architecture has a plan is passed over: nothing wins there, and
    nothing breaks even with it)."""
    if len(run.job.axes) != 1:
        return []
    path = run.job.axes[0].path
    won = [(p, w) for p in run.points if p.status == PointStatus.OK and (w := winner(p, metric))]
    out = []
    for (a, wa), (b, wb) in itertools.pairwise(won):
        if wa != wb:
            out.append(BreakEven(path, a.values[path], b.values[path], wa, wb))
    return out


def stopped_early(point: PointResult, architecture: str) -> bool:
    """Whether ``architecture``'s plan at ``point`` is the best found when a work budget or
    the time limit stopped the search (not a proven optimum)."""
    return any(r.architecture == architecture and r.solver_status in STOPPED for r in point.results)


_UNITS = (
    ("usd_per_gpu_hour", "$/GPU-hour"), ("usd_per_month", "$/month"),
    ("usd_per_hour", "$/hour"), ("_rps", "req/s"), ("_ms", "ms"), ("_us", "µs"), ("_s", "s"),
    ("gbps", "Gbit/s"), ("_gb_per_gpu", "GB per GPU"), ("_gb", "GB"), ("_bytes", "bytes"),
    ("tokens", "tokens"),
)  # fmt: skip
"""A field name's ending -> its unit, as the tables write it."""
_NAMES = {
    "workload.arrival_rps": ("demand", "req/s"),
    "workload.prefix_hit.mean": ("mean prefix hit rate", ""),
    "sla.ttft_p90_s": ("TTFT P90 bound", "s"),
    "sla.ttft_p99_s": ("TTFT P99 bound", "s"),
    "sla.tpot_ms": ("TPOT bound", "ms"),
    "headroom": ("headroom", "share of the demand"),
    "budget_usd_per_hour": ("budget", "$/hour"),
}
"""Paths whose field has no docstring, or a name better than its docstring's."""
_KEYS = {
    "rtt_ms": "round-trip time",
    "gbps": "link speed",
    "usd_per_month": "link price",
    "arrival_rps": "demand",
}
"""Field names without a docstring, in words, wherever they are."""


def axis_name(path: str) -> tuple[str, str]:
    """A varied path as a person reads it: (name, unit), e.g. ``workload.prefix_hit.mean``
    -> ("mean prefix hit rate", ""), ``links[0].rtt_ms`` -> ("round-trip time of
    links[0]", "ms"). The name is the field's description (the first clause of its
    docstring, ``knobs.field_doc``) where no better one is written here; the unit is the
    one the field's name ends in, as the tables write it."""
    from pddplan.sweeps.knobs import field_doc

    if path in _NAMES:
        return _NAMES[path]
    m = re.match(r"prices_usd_per_gpu_hour\.(.+)$", path)
    if m:
        return f"{m[1]} price", "$/GPU-hour"
    parent, _, key = path.rpartition(".")
    unit = next((u for suffix, u in _UNITS if _ends(key, suffix)), "")
    if key in _STATISTICS and parent:  # a distribution's parameter: of what, in its unit
        of = parent.rpartition(".")[2]
        name = f"{key} {_words(of)}"
        unit = unit or next((u for suffix, u in _UNITS if _ends(of, suffix)), "")
    else:
        name = _KEYS.get(key) or _clause(field_doc(path) or "") or _words(key)
    if "[" in parent:  # which link, tier or option
        name += f" ({parent})"
    return name, unit


_STATISTICS = frozenset({"mean", "median", "p50", "p90", "p99", "cv", "std", "sigma", "mu"})
"""A distribution's parameters, named with what they describe."""


def _ends(key: str, suffix: str) -> bool:
    """Whether the field name ``key`` ends in the unit ``suffix`` (or is it)."""
    return key.endswith(suffix) or key == suffix.lstrip("_")


def _clause(doc: str, most: int = 60) -> str:
    """A docstring's first clause as a short name: its first sentence, without asides in
    parentheses or code, the part after a colon where the part before is a qualifier of
    one or two words; cut at a word to at most ``most`` characters."""
    text = " ".join(doc.split())
    text = re.split(r"(?<=[a-z0-9)])\. ", text, maxsplit=1)[0].rstrip(".")
    text = re.sub(r"\s*\([^)]*\)", "", text)
    text = re.sub(r"\s*``[^`]*``", "", text)
    head, colon, rest = text.partition(": ")
    text = rest if colon and len(head.split()) < 3 else head
    text = text.split(";")[0].strip()
    if len(text) > most:
        text = text[:most].rsplit(" ", 1)[0].rstrip(",") + " ..."
    if text[:1].isupper() and not text[1:2].isupper():
        text = text[0].lower() + text[1:]
    return text


def _words(key: str) -> str:
    """A field name without its unit's ending, in words."""
    for suffix, _ in _UNITS:
        if key.endswith(suffix) and key != suffix.lstrip("_"):
            key = key[: -len(suffix)]
            break
    return key.strip("_").replace("_", " ")


def axis_label(path: str) -> str:
    """A plot's or table's label for a varied path: its name and unit (``axis_name``)."""
    name, unit = axis_name(path)
    return f"{name}, {unit}" if unit else name
