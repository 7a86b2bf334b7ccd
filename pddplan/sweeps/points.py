"""One sweep point: the scenario with the point's values, planned as each architecture.

A worker keeps the problem of the point it planned last and derives the next point's from
it (``Problem.with_scenario``), so that the request classes, instance tables and reuse
samples are rebuilt only when their inputs change (prices alone change nothing of them).
Everything a point returns is plain data (``PointResult``), the same bytes whichever
worker computed it; only ``wall_s`` and ``solve_s`` are clock readings.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pddplan.errors import InputError, PddplanError
from pddplan.io.plan_file import deployment_fingerprint
from pddplan.io.validation import validate
from pddplan.model.checks import scenario_problems
from pddplan.model.problem import Problem
from pddplan.spec.choices import Objective
from pddplan.spec.fleet import deployment_line, hardware_line
from pddplan.spec.scenario import Scenario
from pddplan.spec.source import SourceMap
from pddplan.spec.status import EvalStatus, PlanStatus, PointStatus, RowStatus
from pddplan.sweeps import knobs

ARCHITECTURES = ("pdd", "cross-dc-naive", "intra-dc-homogeneous", "intra-dc-heterogeneous",
                 "hypothetical")  # fmt: skip
"""The architectures a sweep can plan (``pddplan.plan.compare.KINDS``)."""
CLOCK_FIELDS = ("wall_s", "solve_s")
"""Fields that are clock readings: left out when results are compared for determinism."""


@dataclass(frozen=True)
class Settings:
    """What every point is asked (the same for the whole sweep)."""

    objective: Objective | None = None
    """Default: the scenario's."""
    architectures: tuple[str, ...] = ("pdd",)
    solver: str | None = None
    time_limit_s: float | None = None


@dataclass
class ArchResult:
    """One architecture planned at one point."""

    architecture: str
    """Its label (``PDD``, ``intra-DC h100-sxm in cluster-a``)."""
    kind: str
    status: str
    """A ``RowStatus``: ``ok``; ``below_demand``/``sla_infeasible`` (a plan that does not
    serve the demand); ``infeasible`` (no plan: ``reason`` says which limit binds);
    ``not_applicable`` (the scenario has no such architecture); ``error``."""
    cost_per_hour_usd: float | None = None
    sla_capacity_rps: float | None = None
    bcr: float | None = None
    ttft_p90_s: float | None = None
    ttft_p99_s: float | None = None
    """At the demand."""
    gpus: int | None = None
    fleet: str | None = None
    """The deployment, every part of it (``pddplan.spec.fleet.deployment_line``), e.g.
    ``P 2x8 h100-sxm@cluster-a + MD 4x8 h200-sxm@cluster-b; 100 Gbit/s; relay nothing``:
    two rows with the same text deploy the same thing."""
    deployment_id: str | None = None
    """Its identity (``pddplan.io.plan_file.deployment_fingerprint``, as a plan file's
    ``deployment_id``): the same for two rows exactly when they deploy the same thing."""
    hardware: str | None = None
    """What it buys: its pools, link and decode-side cache, without the router
    (``pddplan.spec.fleet.hardware_line``): what a demand study's steps compare."""
    binding: str | None = None
    solver_status: str | None = None
    time_limited: bool = False
    """The wall-clock safety stop ended the search: the plan is the best found (``gap``),
    and may differ on a faster machine (a work budget's stop is ``solver_status``
    ``work_limit``, the same on any machine)."""
    gap: float | None = None
    reason: str | None = None
    solve_s: float = 0.0


@dataclass
class PointResult:
    """One point: its values and each architecture's result (``status`` ``ok``), or why
    it has none (``PointStatus``)."""

    index: int
    values: dict[str, Any]
    status: str
    reason: str | None = None
    results: list[ArchResult] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def failed(self) -> bool:
        """Whether it, or one of its rows, has no answer because something went wrong
        (``invalid``, ``error``, ``interrupted``), as against a row with no plan."""
        return self.status != PointStatus.OK or any(
            r.status == RowStatus.ERROR for r in self.results
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PointResult:
        results = [ArchResult(**r) for r in data.get("results", [])]
        return cls(**{**data, "results": results})


def _values_text(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())


class PointRunner:
    """Plans points of one sweep, each derived from the previous one's problem."""

    def __init__(self, problem: Problem, settings: Settings) -> None:
        self.base, self.settings = problem, settings
        self.data = problem.scenario.model_dump(mode="json")
        self.source = SourceMap(
            problem.source.path if problem.source else Path(problem.scenario.name)
        )
        self.last: Problem = problem

    def scenario(self, values: dict[str, Any]) -> Scenario:
        """The point's scenario, validated; ``InputError`` naming the values if not."""
        try:
            scenario = validate(Scenario, knobs.apply(self.data, values), self.source)
        except InputError as e:
            raise InputError(f"at {_values_text(values)}: {'; '.join(e.problems)}") from None
        hw = self.base.hardware.chips
        unknown = sorted(
            {c for dc in scenario.datacenters.values() for c in dc.chips if c not in hw}
            | {c for c in scenario.prices_usd_per_gpu_hour if c not in hw}
        )
        if unknown:
            raise InputError(f"at {_values_text(values)}: unknown chip {', '.join(unknown)}")
        return scenario

    def run(self, index: int, values: dict[str, Any]) -> PointResult:
        start = time.perf_counter()
        try:
            problem = self.last.with_scenario(self.scenario(values))
            problems = scenario_problems(problem)
            if problems:
                raise InputError(f"at {_values_text(values)}: {'; '.join(problems)}")
        except InputError as e:
            return PointResult(index, values, PointStatus.INVALID, str(e),
                               wall_s=time.perf_counter() - start)  # fmt: skip
        self.last = problem
        results = [r for kind in self.settings.architectures for r in self._plan(problem, kind)]
        return PointResult(
            index, values, PointStatus.OK, None, results, time.perf_counter() - start
        )

    def _plan(self, problem: Problem, kind: str) -> list[ArchResult]:
        from pddplan.plan.compare import _why, architectures
        from pddplan.plan.search import solve_plan

        rows = [r for r in architectures(problem.scenario) if r.kind == kind]
        out: list[ArchResult] = []  # no such architecture here (no mixed datacenter): no rows
        s = self.settings
        for row in rows:
            start = time.perf_counter()
            try:
                sub = problem if kind == "pdd" else problem.with_scenario(row.build())
                plan = solve_plan(
                    sub,
                    objective=s.objective,
                    solver=s.solver,
                    time_limit_s=s.time_limit_s,
                    explain=True,
                    marginals=False,  # a point keeps its cost, capacity and verdict only
                )
            except PddplanError as e:
                out.append(ArchResult(row.label, kind, RowStatus.NOT_APPLICABLE, reason=str(e),
                                      solve_s=time.perf_counter() - start))  # fmt: skip
                continue
            out.append(_result(row.label, kind, plan, _why(plan, below_demand_ok=True),
                               time.perf_counter() - start))  # fmt: skip
        return out


def _float(v: Any) -> float | None:
    return None if v is None else float(v)


def _result(label: str, kind: str, plan: Any, why: str | None, seconds: float) -> ArchResult:
    stats, e = plan.stats, plan.evaluation
    time_limited = stats.status == PlanStatus.TIME_LIMIT
    base = {
        "architecture": label,
        "kind": kind,
        "solver_status": stats.status,
        "time_limited": time_limited,
        "gap": _float(stats.gap),
        "solve_s": seconds,
    }
    if e is None or plan.fleet is None:
        return ArchResult(
            status=RowStatus.INFEASIBLE, reason=why or f"no plan ({stats.status})", **base
        )
    return ArchResult(
        status=e.status,
        cost_per_hour_usd=_float(e.cost_per_hour_usd),
        sla_capacity_rps=_float(e.sla_capacity_rps),
        bcr=_float(e.bcr),
        ttft_p90_s=_float(e.ttft_s.get("p90")),
        ttft_p99_s=_float(e.ttft_s.get("p99")),
        gpus=sum(p.gpus for p in e.pools),
        fleet=deployment_line(plan.fleet),
        deployment_id=deployment_fingerprint(plan.fleet),
        hardware=hardware_line(plan.fleet),
        binding="; ".join(e.binding) or None,
        reason=why if e.status != EvalStatus.OK else None,
        **base,
    )
