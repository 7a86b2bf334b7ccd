"""What ``evaluate`` reports about a deployment: its SLA capacity, cost, latency and each
pool's and link's load. Plain frozen dataclasses; ``pddplan.report`` turns them into JSON
and tables."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
    """Busy fraction at the demand."""
    decode_batch: int | None = None
    decode_step_ms: float | None = None
    utilization_at_capacity: float | None = None
    """Busy fraction at the fleet's SLA capacity (None: no finite capacity)."""


@dataclass(frozen=True, slots=True)
class LinkResult:
    between: tuple[str, str]
    gbps: float
    utilization: float
    """Busy fraction at the demand (the busier direction)."""
    cost_per_hour_usd: float
    utilization_at_capacity: float | None = None
    """Busy fraction at the fleet's SLA capacity."""


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
    md_cache: dict[str, Any]
    """The decode-side cache: ``gb_per_gpu`` reserved (None: not a decision), ``tiers``
    (a tiered cache's ``dram_gb_per_gpu`` and ``ssd_gb_per_gpu``; None otherwise) and the
    request-weighted ``mean_hit`` it gives at the demand."""
    notes: list[str] = field(default_factory=list)
    ttft_over_p99_bound: float | None = None
    """Share of requests whose TTFT exceeds the SLA's P99 bound, at the demand."""
    planned_rps: float = 0.0
    """The demand x (1 + the scenario's headroom): the load a plan is sized for."""
    ttft_planned_s: dict[str, float] | None = None
    """TTFT percentiles at ``planned_rps`` (None when it is the demand)."""
    usd_per_million_output_tokens_at_capacity: float | None = None
    """The cost per million output tokens were the fleet run at its SLA capacity (its
    floor: ``usd_per_million_output_tokens`` is at the demand)."""
    ttft_breakdown_s: dict[str, float] | None = None
    """The mean TTFT by segment at the demand (``evaluator.TTFT_SEGMENTS``: ``queue``,
    ``prefill``, ``transfer``, ``first_token``); they add up to the mean TTFT."""
    ttft_breakdown_at_capacity_s: dict[str, float] | None = None
    """The same at the SLA capacity (None without one)."""
    engine: dict[str, Any] = field(default_factory=dict)
    """The pass times these figures assume: the engine profile's ``id``, ``name`` and
    ``version``, the ``perf_quantile`` of the model's error and the ``time_factors`` it
    gives (prefill, decode)."""
