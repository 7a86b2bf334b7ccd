"""What each pool of a plan launches: read from a plan file alone (its deployment, and the
problem its scenario rebuilds), with the library's own layout object for each pool."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pddplan.errors import InputError
from pddplan.io.plan_file import PlanFile, check_scenario_file, plan_problem
from pddplan.model.instance import Layout
from pddplan.model.problem import Problem
from pddplan.spec.fleet import Fleet
from pddplan.spec.hardware import ChipSpec
from pddplan.spec.llm import AttentionKind
from pddplan.spec.scenario import Role

GPUS_PER_NODE = {"gb200": 4}
"""GPUs one host (one Kubernetes node) holds where it is fewer than the chip's scale-up
domain: a GB200 NVL72 compute tray holds 4 Blackwell GPUs (NVIDIA GB200 NVL72 product page:
"72 Blackwell GPUs ... 18 compute trays", each with 2 Grace CPUs and 4 GPUs). Any other chip:
its ``scaleup_domain_gpus``, at most ``MAX_NODE_GPUS``."""
MAX_NODE_GPUS = 8
"""The most GPUs of one server (an HGX/OAM board holds 8; a domain wider than that, as
Ascend's 384-NPU supernode, is still 8 to a server: Huawei CloudMatrix384, 48 servers of 8
NPUs)."""


@dataclass(frozen=True)
class PoolLaunch:
    """One pool of the plan as the engines see it."""

    name: str
    """``{role}-{datacenter}-{chip}``, lower case, a valid Kubernetes name."""
    role: str
    datacenter: str
    chip: ChipSpec
    instances: int
    layout: Layout
    """The instance's parallel layout (``pddplan.model.instance.Layout``)."""
    gpus_per_node: int
    kv_dtype: str
    """``bf16`` or ``fp8`` (the scenario's, else the model's)."""
    batch: int | None
    """The most sequences one instance decodes at once, as the plan assumed: main decode's
    operating batch (the plan's ``decode_batch``), relay decode's largest batch meeting the
    TPOT bound; None on prefill."""
    chunk_tokens: int
    """New tokens one attention group takes in a prefill pass (``prefill_chunk_tokens`` per
    rank, times the context-parallel ranks)."""
    hosts_relay_decode: bool
    attention: AttentionKind
    """The model's attention (what an engine's context-parallel limits depend on)."""

    @property
    def gpus(self) -> int:
        return self.layout.gpus

    @property
    def nodes(self) -> int:
        """Hosts one instance spans."""
        return math.ceil(self.gpus / self.gpus_per_node)

    @property
    def node_gpus(self) -> int:
        """GPUs one instance uses on each of its hosts."""
        return self.gpus // self.nodes

    @property
    def attention_dp(self) -> int:
        """Attention groups that each serve their own requests (data-parallel attention)."""
        return self.gpus // (self.layout.attn_tp * self.layout.cp)


@dataclass(frozen=True)
class LaunchPlan:
    """A plan file's deployment, pool by pool, with what every launch file needs."""

    path: Path
    plan: dict[str, Any]
    model_id: str
    """The model's Hugging Face id (the engines' ``--model-path``)."""
    model: str
    pools: tuple[PoolLaunch, ...]
    links: tuple[tuple[str, str, float, float | None], ...]
    """(datacenter, datacenter, Gbps bought, RTT in ms) for each link."""
    engine: str
    """The engine profile the plan assumed (``sglang``, ``vllm``, ``trtllm``, ``ideal``), or
    ``--engine``'s form of one per role (``prefill=sglang,...,main_decode=ideal``)."""
    engines: dict[str, str]
    """Each role's engine profile (``Problem.role_engines``)."""

    def pool_engine(self, pool: PoolLaunch) -> str:
        """The engine profile ``pool``'s role assumed."""
        return self.engines[pool.role]


def _k8s_name(*parts: str) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")
    return name[:63].rstrip("-")


def launch_plan(plan: PlanFile) -> LaunchPlan:
    """``plan``'s deployment pool by pool (``PoolLaunch``), from the scenario it carries;
    ``InputError`` for a plan from before plans carried their scenario, or whose scenario
    file has changed since (``check_scenario_file``)."""
    problem = plan_problem(plan)  # refuses a plan without its scenario first
    check_scenario_file(plan)
    data = plan.data
    if plan.over_horizon:
        raise InputError(
            f"{plan.path}: a plan over a horizon: each period runs its own deployment "
            "(periods[N].deployment, in fleet-file form); export covers a plan for one rate "
            "(save a period's deployment as a fleet file, or plan that period's rate alone)"
        )
    if data.get("robust"):
        raise InputError(
            f"{plan.path}: a plan for workload variants: one fleet with a router per variant; "
            "export covers a plan for one workload (plan one variant's workload alone, or "
            "take the shared fleet with `pddplan evaluate --plan PLAN --variant NAME`)"
        )
    fleet = Fleet.model_validate(data["deployment"])
    figures = {
        (p["datacenter"], p["role"], p["chip"], p["gpus_per_instance"]): p
        for p in data.get("pools") or []
    }
    pools = []
    for pool in fleet.pools:
        inst = problem.instance(
            pool.chip,
            pool.gpus_per_instance,
            pool.context_parallel,
            pool.attention_tp,
            role=pool.role,
        )
        chip = problem.hardware.chips[pool.chip]
        batch = _batch(problem, pool.role, pool.chip, pool.gpus_per_instance, figures, pool)
        node = GPUS_PER_NODE.get(pool.chip, min(chip.scaleup_domain_gpus, MAX_NODE_GPUS))
        pools.append(
            PoolLaunch(
                name=_k8s_name(pool.role.replace("_", "-"), pool.datacenter, pool.chip),
                role=pool.role,
                datacenter=pool.datacenter,
                chip=chip,
                instances=pool.instances,
                layout=inst.layout,
                gpus_per_node=min(node, pool.gpus_per_instance),
                kv_dtype=problem.kv.dtype,
                batch=batch,
                chunk_tokens=inst.cal.knobs.prefill_chunk_tokens * inst.layout.cp,
                hosts_relay_decode=pool.hosts_relay_decode,
                attention=problem.model.attention,
            )
        )
    rtts = {tuple(sorted(x.between)): x.rtt_ms for x in problem.scenario.links}
    links = tuple(
        (a, b, x.gbps, rtts.get(tuple(sorted((a, b))))) for x in fleet.links for a, b in [x.between]
    )
    said: dict[str, Any] = data.get("engine") or {}
    engine = str(said.get("id") or problem.engine_label)
    engines: dict[str, str] = {role: e.id for role, e in problem.role_engines.items()}
    roles = said.get("roles")
    if isinstance(roles, dict):  # the plan's record of each role's engine comes first
        engines.update({r: str(v["id"]) for r, v in roles.items() if r in engines and "id" in v})
    elif "=" not in engine:
        engines = dict.fromkeys(engines, engine)
    return LaunchPlan(
        plan.path, data, problem.model.hf_id, problem.model.id, tuple(pools), links, engine, engines
    )


def _batch(
    problem: Problem,
    role: Role,
    chip: str,
    gpus: int,
    figures: dict[tuple[str, str, str, int], dict[str, Any]],
    pool: Any,
) -> int | None:
    if role == "prefill":
        return None
    if role == "main_decode":
        shown = figures.get((pool.datacenter, role, chip, gpus), {}).get("decode_batch")
        if isinstance(shown, int) and shown > 0:
            return shown
    batch, _ = problem.decode_point(chip, gpus, role=role)
    return max(batch, 1)
