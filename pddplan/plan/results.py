"""Result records: what ``pddplan evaluate`` and ``pddplan solve`` report. Plain frozen
dataclasses; ``pddplan.report.views`` turns them into JSON and ``pddplan.report.tables`` into tables."""

from __future__ import annotations

from dataclasses import dataclass, field

from pddplan.spec.fleet import Fleet


@dataclass(frozen=True, slots=True)
class PoolResult:
    datacenter: str
    role: str
    chip: str
    layout: str
    gpus_per_instance: int
    instances: int
    gpus: int
    cost_per_hour_usd: float | None
    utilization: float
    decode_batch: int | None = None
    decode_step_ms: float | None = None


@dataclass(frozen=True, slots=True)
class LinkResult:
    between: tuple[str, str]
    gbps: float
    utilization: float
    cost_per_hour_usd: float


@dataclass(frozen=True)
class Evaluation:
    """What a fleet delivers on a scenario."""

    fleet: str
    status: str
    """``ok`` (demand within SLA capacity), ``below_demand`` or ``sla_infeasible``."""
    demand_rps: float
    sla_capacity_rps: float
    cost_per_hour_usd: float | None
    bcr: float | None
    """SLA capacity (req/s) per dollar-hour."""
    usd_per_million_output_tokens: float | None
    ttft_s: dict[str, float]
    tpot_ms: dict[str, float]
    pools: list[PoolResult]
    links: list[LinkResult]
    routing: dict[str, float | int | None]
    pipelines: dict[str, dict[str, float]]
    rld_token_share: float
    binding: list[str]
    price_basis: dict[str, str]
    """Each chip's price basis: ``rent`` or ``buy`` (amortized capex plus running cost)."""
    owned_gpus: int
    """GPUs counted as owned inventory, at running cost only."""
    md_cache: dict[str, float | None]
    """The decode-side cache: ``gb_per_gpu`` reserved (None: not a decision) and the
    request-weighted ``mean_hit`` it gives."""
    notes: list[str] = field(default_factory=list)
    ttft_over_p99_bound: float | None = None
    """Share of requests whose TTFT exceeds the SLA's P99 bound, at the demand."""


@dataclass(frozen=True)
class SolveStats:
    objective: str
    solver: str
    status: str
    seconds: float
    milp_solves: int = 0
    variables: int = 0
    """Of the largest MILP solved."""
    constraints: int = 0
    gap: float | None = None
    """Relative optimality gap of the last MILP (min cost), or of the BCR search."""
    iterations: int = 0
    """Dinkelbach updates of the ratio (max BCR) or bisection steps (max capacity)."""
    bcr_bound: float | None = None
    """Proven upper bound on BCR (max BCR)."""
    candidates: int = 0
    """--method enumerate: candidates within the limits."""
    evaluated: int = 0
    """--method enumerate: candidates scored by the evaluator before the optimum was proven."""


@dataclass(frozen=True)
class Marginal:
    """What one change to the plan would do (evaluated, not estimated)."""

    change: str
    d_cost_per_hour_usd: float
    d_sla_capacity_rps: float
    bcr: float | None


@dataclass(frozen=True)
class Relaxation:
    """How far one family of limits would need to move for the scenario to be feasible."""

    family: str
    current: float
    """Always 1: the scenario's own limits."""
    factor: float | None
    """The smallest relaxation factor that makes the demand servable (limits x factor,
    demand / factor); None: relaxing this family alone does not help."""
    message: str
    """In the user's units, e.g. "needs TTFT P99 14.2 s; the scenario has TTFT P99 12 s"."""


@dataclass(frozen=True)
class PlanResult:
    scenario: str
    model: str
    status: str
    """optimal, time_limit, time_limit_no_incumbent, infeasible, not_converged."""
    stats: SolveStats
    fleet: Fleet | None = None
    evaluation: Evaluation | None = None
    marginals: list[Marginal] = field(default_factory=list)
    relaxations: list[Relaxation] = field(default_factory=list)
    method: str = "milp"
