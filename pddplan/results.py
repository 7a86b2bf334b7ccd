"""Result records: what ``pddplan evaluate`` (and later ``solve``) report. Plain frozen
dataclasses; ``pddplan.views`` turns them into JSON and ``pddplan.report`` into tables."""

from __future__ import annotations

from dataclasses import dataclass, field


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
    notes: list[str] = field(default_factory=list)
