"""What ``solve`` reports: the plan's status, solver statistics, its deployment and
evaluation, marginal values and, for an infeasible scenario, the relaxations that would
make it feasible. Plain frozen dataclasses; ``pddplan.report`` turns them into JSON and
tables."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pddplan import units
from pddplan.evaluation.results import Evaluation
from pddplan.spec.choices import Objective
from pddplan.spec.fleet import Fleet
from pddplan.spec.status import PlanStatus

if TYPE_CHECKING:
    from pddplan.plan.alternatives import RunnerUps


@dataclass(frozen=True)
class SolveStats:
    objective: Objective
    solver: str
    status: PlanStatus
    seconds: float
    milp_solves: int = 0
    settled: int = 0
    """Rates whose relaxation's plan was the optimum, so no MILP ran there."""
    variables: int = 0
    """Of the largest MILP solved."""
    constraints: int = 0
    gap: float | None = None
    """Relative optimality gap of the last MILP (min cost), or of the BCR search."""
    iterations: int = 0
    """Dinkelbach updates of the ratio (max BCR) or rates tried (max capacity)."""
    bcr_bound: float | None = None
    """Proven upper bound on BCR (max BCR)."""
    bcr_best: float | None = None
    """The best BCR of any plan the search evaluated (max BCR); the plan returned is the
    cheapest within ``search.bcr_plateau`` of ``bcr_bound``."""
    gap_note: str | None = None
    """Why a plan stopped by the time limit has no ``gap`` (or, max BCR, no finite
    ``bcr_bound``); None where it has them, and for proven plans."""
    candidates: int = 0
    """--method enumerate: candidates within the limits."""
    evaluated: int = 0
    """--method enumerate: candidates scored by the evaluator before the optimum was proven."""
    check_rounds: int = 0
    """Check-and-cut rounds: plans the evaluator found short of the rate they were planned
    for, each excluded and the rate solved again (``docs/milp.md``, "Check and cut")."""
    rejected: tuple[RejectedPlan, ...] = ()
    """What the evaluator rejected in those rounds."""
    stop_reason: str | None = None
    """What stopped the search before it proved its answer (``work_limit``: the budget
    that ran out; ``time_limit``: the safety stop), in words; None for a finished search."""
    rate_points: int = 0
    """Rates the search priced (``docs/milp.md``, "Work budgets")..."""
    rate_point_budget: int = 0
    """...against this budget (``solver.rate_points``)."""
    milp_nodes: int = 0
    """Branch-and-bound nodes of the search's MILP solves, summed..."""
    node_limit: int = 0
    """...each solve at most this many (``solver.node_limit``; CBC's complete fathoming of
    small subtrees aside)."""


@dataclass(frozen=True)
class RejectedPlan:
    """A deployment the planner found and the evaluator rejected: short of the rate it was
    planned for under every router setting it may use."""

    rate_rps: float
    sla_capacity_rps: float
    deployment: str


@dataclass(frozen=True)
class BcrStep:
    """One plan the max-BCR search evaluated: what it costs and what it serves (the
    evaluator's SLA capacity of exactly this deployment), and the deployment."""

    cost_per_hour_usd: float
    sla_capacity_rps: float
    bcr: float
    deployment: str = ""
    """Its pools, link and relay cut in one line (``pddplan.plan.space.describe``)."""
    plan: bool = False
    """Whether it is the plan returned."""


@dataclass(frozen=True)
class Marginal:
    """What one change to the plan would do (evaluated, not estimated)."""

    change: str
    d_cost_per_hour_usd: float
    d_sla_capacity_rps: float
    bcr: float | None
    ttft_p99_s: float | None = None
    """The TTFT P99 at the demand after the change (None: it no longer meets the SLA at
    any rate)."""


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
    """In the user's units, e.g. "needs sla.ttft_p99_s 14.2 s; the scenario has
    sla.ttft_p99_s 12 s"."""
    keys: tuple[str, ...] = ()
    """Where the relaxed values live in the scenario (``sla.ttft_p99_s``,
    ``datacenters.dc-a.max_gpus``, ``links[0].tiers``)."""
    needed: tuple[float, ...] = ()
    """The values that make the scenario feasible, one per key (empty: none found)."""
    scenario_values: tuple[float, ...] = ()
    """The scenario's own values, one per key."""
    unit: str = ""
    verified: bool = False
    """Whether a minimum-cost solve of the scenario with exactly ``needed`` found a plan."""


@dataclass(frozen=True)
class ErrorMargin:
    """What a plan made at the model's central pass times would need at ``quantile`` of
    its error (``pddplan.api.error_margin``)."""

    quantile: float
    engine: str
    capacity_rps: float
    """This plan's SLA capacity with pass times at ``quantile``."""
    demand_rps: float
    extra_gpus: int | None
    """GPUs the plan made at ``quantile`` buys beyond this one (None: no plan there)."""
    extra_cost_per_hour_usd: float | None

    @property
    def extra_cost_per_month_usd(self) -> float | None:
        h = self.extra_cost_per_hour_usd
        return None if h is None else h * units.HOURS_PER_MONTH

    @property
    def text(self) -> str:
        head = f"At the {self.quantile * 100:g}th percentile of the model's error ({self.engine})"
        holds = f"this plan serves {self.capacity_rps:,.3g} req/s" + (
            " (below the demand)" if self.capacity_rps < self.demand_rps else ""
        )
        if self.extra_gpus is None or self.extra_cost_per_month_usd is None:
            return f"{head}: {holds}, and no plan serves the demand."
        if self.capacity_rps >= self.demand_rps:
            return f"{head}: {holds}, still above the {self.demand_rps:,.3g} req/s demand."
        usd = self.extra_cost_per_month_usd
        return (
            f"{head}: {holds}; the plan for it buys {self.extra_gpus:+,} GPUs, "
            f"{'+' if usd >= 0 else '-'}${abs(usd):,.0f}/month."
        )


@dataclass(frozen=True)
class Verdict:
    """A plan in one line: what to buy, what it costs, what it serves against the demand,
    what stops it growing, and, for a plan far above the demand, why and what to do."""

    text: str
    buy: str
    """What to acquire, per datacenter, in the words of each chip's price basis (rent, buy,
    use the owned ones) and the link tiers to lease (``explain.procurement``)."""
    cost_per_month_usd: float | None
    capacity_rps: float
    demand_rps: float
    planned_rps: float
    """The demand x (1 + headroom)."""
    limit: str | None
    """The limit that binds at the SLA capacity (what stops it growing)."""
    oversized: bool
    """Capacity above ``OVERSIZED`` x the planned load."""
    reason: str | None = None
    """Why the capacity is so far above the planned load."""
    advice: str | None = None
    """How to size for the demand."""


@dataclass(frozen=True)
class PlanResult:
    scenario: str
    model: str
    status: PlanStatus
    """``optimal`` (proven and confirmed), ``time_limit`` (the best confirmed plan found,
    with its gap, or none) or ``infeasible``."""
    stats: SolveStats
    fleet: Fleet | None = None
    evaluation: Evaluation | None = None
    marginals: list[Marginal] = field(default_factory=list)
    relaxations: list[Relaxation] = field(default_factory=list)
    method: str = "milp"
    kv_bytes_per_token: float | None = None
    """What the router needs to compute a request's WAN payload: KV bytes per context token
    the destination lacks, plus ``kv_fixed_bytes`` per request."""
    kv_fixed_bytes: float | None = None
    planned_rps: float = 0.0
    """The rate the plan is sized for: the demand x (1 + headroom) (max capacity: the
    capacity the budget buys)."""
    bcr_steps: list[BcrStep] = field(default_factory=list)
    """max BCR: every plan evaluated, cheapest first (BCR against cost)."""
    verdict: Verdict | None = None
    idle: list[str] = field(default_factory=list)
    """Why each pool under ``explain.IDLE_SHARE`` busy at the SLA capacity is that large."""
    left_out: list[str] = field(default_factory=list)
    """The layouts the engine's release cannot launch, left out of the search
    (``Space.left_out_lines``)."""
    runner_ups: RunnerUps | None = None
    """The cheapest deployment of each other family at the demand (``solve --top``);
    None when not asked for, or without a plan."""
