"""Plain-dict views of catalog entries and results: what ``--json`` prints and what the
report tables show. No formatting here, only numbers and names."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from pddplan import units
from pddplan.hardware import ChipSpec, HardwareCatalog
from pddplan.kv import KvModel
from pddplan.llm import ModelSpec, param_breakdown, weight_bytes
from pddplan.perf import InstancePerf
from pddplan.results import Evaluation, PlanResult
from pddplan.trace import TraceFit

CHIP_FIGURES: tuple[tuple[str, str], ...] = (
    ("bf16_tflops", "TFLOPS (dense)"),
    ("fp8_tflops", "TFLOPS (dense)"),
    ("hbm_gb", "GB"),
    ("hbm_bandwidth_tb_s", "TB/s"),
    ("scaleup_bandwidth_gb_s", "GB/s per direction"),
    ("scaleup_domain_gpus", "GPUs"),
    ("nic_gbps", "Gbit/s per direction"),
    ("host_link_gb_s", "GB/s per direction"),
    ("tdp_w", "W"),
    ("purchase_unit_gpus", "GPUs"),
    ("price_usd_per_hour", "USD per GPU-hour"),
)
"""The chip's figures in display order, with their units."""


def chip_view(chip: ChipSpec, catalog: HardwareCatalog) -> dict[str, Any]:
    """A chip with its figures, sources, and its family's efficiency defaults."""
    out = chip.model_dump(mode="json")
    out["efficiency"] = catalog.efficiency(chip.id).model_dump(mode="json")
    return out


def model_view(model: ModelSpec, kv_dtype: str | None = None) -> dict[str, Any]:
    """A model with its derived KV and weight figures at ``kv_dtype`` (default: its own)."""
    kv = KvModel(model, kv_dtype or model.kv_dtype)  # type: ignore[arg-type]
    p = param_breakdown(model)
    out = model.model_dump(mode="json", exclude_none=True)
    out.update(
        kv_dtype=kv.dtype,
        kv_bytes_per_token=kv.bytes_per_token,
        kv_fixed_bytes_per_request=kv.fixed_bytes,
        weight_bytes=weight_bytes(model),
        params_b={
            "attention": p.attention / 1e9,
            "dense_mlp_and_shared_experts": p.dense_mlp / 1e9,
            "routed_experts": p.routed_experts / 1e9,
            "routed_active": p.routed_active / 1e9,
            "embeddings": p.embeddings / 1e9,
            "read_other": p.read_other / 1e9,
            "stored_other": p.stored_other / 1e9,
        },
    )
    return out


def perf_view(perf: InstancePerf) -> dict[str, Any]:
    out = dataclasses.asdict(perf)
    out["kv_transfer_gb"] = perf.kv_transfer_bytes / units.GB
    return out


def evaluation_view(e: Evaluation) -> dict[str, Any]:
    """``pddplan evaluate --json``: plain numbers, the keys ``pddplan solve`` will share."""
    out = dataclasses.asdict(e)
    out["fleet"] = [
        {k: p[k] for k in ("datacenter", "role", "chip", "gpus_per_instance", "instances")}
        for p in out["pools"]
    ]
    out["name"] = e.fleet
    out["total_gpus"] = sum(p.gpus for p in e.pools)
    out["links"] = [
        {
            "between": list(x.between),
            "gbps": x.gbps,
            "utilization": x.utilization,
            "cost_per_hour_usd": x.cost_per_hour_usd,
        }
        for x in e.links
    ]
    return _plain(out)


def plan_view(r: PlanResult, *, kv_bytes_per_token: float, fixed_bytes: float) -> dict[str, Any]:
    """``pddplan solve --json`` and the plan file (``--out``): the evaluation's keys, plus the
    solver's figures, the router's rule in machine form and the deployment in fleet-file
    form (``pddplan evaluate --plan`` reads it back)."""
    out: dict[str, Any] = {
        "scenario": r.scenario,
        "model": r.model,
        "status": r.status,
        "objective": r.stats.objective,
        "method": r.method,
        "solve_seconds": r.stats.seconds,
        "solver": dataclasses.asdict(r.stats),
    }
    if r.evaluation is not None:
        e = evaluation_view(r.evaluation)
        e.pop("status")  # the evaluation's own status (ok / below_demand) is kept apart
        out["evaluation_status"] = r.evaluation.status
        out |= e
        out["cost_per_month_usd"] = (
            r.evaluation.cost_per_hour_usd * units.HOURS_PER_MONTH
            if r.evaluation.cost_per_hour_usd is not None
            else None
        )
        routing = r.evaluation.routing
        out["router"] = {
            "relay_if_payload_mb_above": routing["relay_above_mb"],
            "singular_if_max_tokens_at_most": routing["singular_max_output_tokens"],
            "catch_up_if_eager_tokens_above": routing["catch_up_above_tokens"],
            "catch_up_chunk_tokens": routing["chunk_tokens"],
            "payload_mb": "(input_tokens x (1 - decode-side hit) x kv_bytes_per_token "
            "+ fixed_bytes) / 1e6",
            "kv_bytes_per_token": kv_bytes_per_token,
            "fixed_bytes": fixed_bytes,
        }
        out["marginals"] = [dataclasses.asdict(m) for m in r.marginals]
    if r.fleet is not None:
        out["deployment"] = r.fleet.model_dump(mode="json")
    out["infeasibility"] = [dataclasses.asdict(x) for x in r.relaxations]
    return _plain(out)


def _plain(value: Any) -> Any:
    """Numpy scalars to Python numbers; infinities to None (JSON has no infinity)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def trace_fit_view(fit: TraceFit) -> dict[str, Any]:
    """``pddplan workload fit --json``."""
    out = dataclasses.asdict(fit)
    out["mean_input_tokens"] = fit.input_tokens.mean
    out["mean_output_tokens"] = fit.output_tokens.mean
    out["bad_lines"] = [{"line": n, "problem": p} for n, p in fit.bad_lines]
    out["hit_over_time"] = [{"t_s": t, "mean_hit_rate": h} for t, h in fit.hit_over_time]
    return _plain(out)
