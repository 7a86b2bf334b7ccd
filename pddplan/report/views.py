"""Plain-dict views of catalog entries and results: what ``--json`` prints and what the
report tables show. No formatting here, only numbers and names."""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import TYPE_CHECKING, Any

from pddplan import units
from pddplan.spec.calibration import MIN_ERROR_POINTS
from pddplan.spec.choices import MIN_COST
from pddplan.spec.status import PlanStatus

if TYPE_CHECKING:
    from pddplan.calibration.fit import Calibration
    from pddplan.evaluation.results import Evaluation
    from pddplan.model.figures import InstancePerf
    from pddplan.model.pricing import FleetCost
    from pddplan.plan.alternatives import Family, RunnerUps
    from pddplan.plan.compare import Candidate, Comparison, Section
    from pddplan.plan.horizon import HorizonResult
    from pddplan.plan.results import PlanResult
    from pddplan.plan.robust import RobustResult
    from pddplan.simulation.day import DayReplay
    from pddplan.simulation.run import Figure, SimResult
    from pddplan.simulation.verify import Verification
    from pddplan.spec.acquisition import AcquisitionCatalog
    from pddplan.spec.fleet import Fleet
    from pddplan.spec.hardware import ChipSpec, HardwareCatalog
    from pddplan.spec.llm import KvDtype, ModelSpec
    from pddplan.sweeps.prices import Sweep
    from pddplan.workload.trace import HourlyProfile, TraceFit, WindowedFit

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


def acquisition_view(
    catalog: AcquisitionCatalog, hardware: HardwareCatalog
) -> list[dict[str, Any]]:
    """``pddplan catalog acquisition --json``: each chip the hardware catalog has, how it can
    be had (owned and reserved terms from the acquisition catalog, on demand from the
    hardware catalog), each figure with its source; an owned GPU-hour before power
    (amortized capex + hosting)."""
    rows = []
    for chip in hardware.chips.values():
        entry = catalog.terms(chip.id)
        row: dict[str, Any] = {"chip": chip.id, "owned": None, "reserved": []}
        if entry is not None:
            row.update(entry.model_dump(mode="json", exclude={"id", "notes"}))
            if entry.owned is not None:
                o = entry.owned
                capex_hour = o.capex_usd_per_gpu / (o.amortization_months * units.HOURS_PER_MONTH)
                row["owned_usd_per_gpu_hour_before_power"] = capex_hour + o.hosting_usd_per_gpu_hour
        row["on_demand_usd_per_gpu_hour"] = chip.price_usd_per_hour
        row.setdefault("sources", {})
        row["sources"] = {
            **row["sources"],
            "on_demand_usd_per_gpu_hour": chip.sources.get("price_usd_per_hour"),
        }
        rows.append(row)
    return rows


def model_view(model: ModelSpec, kv_dtype: KvDtype | None = None) -> dict[str, Any]:
    """A model with its derived KV and weight figures at ``kv_dtype`` (default: its own)."""
    from pddplan.model.kv import KvModel
    from pddplan.model.params import param_breakdown, weight_bytes

    kv = KvModel(model, kv_dtype or model.kv_dtype)
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
            "utilization_at_capacity": x.utilization_at_capacity,
            "cost_per_hour_usd": x.cost_per_hour_usd,
        }
        for x in e.links
    ]
    return _plain(out)


def plan_view(r: PlanResult) -> dict[str, Any]:
    """``pddplan solve --json`` and the plan file (``--out``): the evaluation's keys, plus the
    solver's figures, the router's rule in machine form and the deployment in fleet-file
    form (``pddplan evaluate --plan`` reads it back)."""
    out: dict[str, Any] = {
        "verdict": dataclasses.asdict(r.verdict) if r.verdict is not None else None,
        "scenario": r.scenario,
        "model": r.model,
        "status": r.status,
        "objective": r.stats.objective,
        "planned_rps": r.planned_rps,
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
            "kv_bytes_per_token": r.kv_bytes_per_token,
            "fixed_bytes": r.kv_fixed_bytes,
        }
        out["marginals"] = [dataclasses.asdict(m) for m in r.marginals]
        if r.bcr_steps:
            out["bcr_steps"] = [dataclasses.asdict(x) for x in r.bcr_steps]
    if r.fleet is not None:
        out["deployment"] = r.fleet.model_dump(mode="json")
    out["infeasibility"] = [dataclasses.asdict(x) for x in r.relaxations]
    out["idle_pools"] = list(r.idle)
    out["left_out"] = list(r.left_out)
    if r.runner_ups is not None:
        out["runner_ups"] = runner_ups_view(r.runner_ups)
    return _plain(out)


def runner_ups_view(ru: RunnerUps) -> dict[str, Any]:
    """``solve --json``'s runner-ups: each family's cheapest deployment at the demand (its
    fleet in fleet-file form, cost, SLA capacity, TTFT at the demand), the families without
    a plan, and whether the search stopped early."""

    def family(f: Family) -> dict[str, Any]:
        return {
            "architecture": f.architecture,
            "label": f.label,
            "prefill": list(f.prefill),
            "relay_decode": list(f.relay) if isinstance(f.relay, tuple) else f.relay,
            "main_decode": list(f.main),
        }

    return {
        "families": ru.families,
        "rows": [
            {
                "family": family(x.family),
                "deployment_text": x.deployment,
                "cost_per_hour_usd": x.evaluation.cost_per_hour_usd,
                "cost_per_month_usd": x.evaluation.cost_per_hour_usd * units.HOURS_PER_MONTH
                if x.evaluation.cost_per_hour_usd is not None
                else None,
                "sla_capacity_rps": x.evaluation.sla_capacity_rps,
                "ttft_s": x.evaluation.ttft_s,
                "status": x.evaluation.status,
                "deployment": x.fleet.model_dump(mode="json"),
            }
            for x in ru.rows
        ],
        "unserved": [family(f) for f in ru.unserved],
        "stopped": ru.stopped,
    }


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


def trace_windows_view(windowed: WindowedFit) -> dict[str, Any]:
    """``pddplan workload fit --window --json``: one row per window, each with its fit."""
    head = {k: v for k, v in dataclasses.asdict(windowed).items() if k != "windows"}
    rows = []
    for w in windowed.windows:
        row = {k: getattr(w, k) for k in ("name", "start_s", "end_s", "windows", "weight")}
        row["requests"] = w.fit.requests
        row["arrival_rps"] = w.arrival_rps
        row["fit"] = trace_fit_view(w.fit)
        rows.append(row)
    return _plain({**head, "windows": rows})


def hourly_profile_view(profile: HourlyProfile) -> dict[str, Any]:
    """``pddplan workload fit --by-hour --json``: the rate and factor of each hour."""
    return _plain(
        {
            "path": profile.path,
            "requests": profile.requests,
            "skipped_lines": profile.skipped_lines,
            "duration_s": profile.duration_s,
            "peak_hour": profile.peak_hour,
            "peak_rps": profile.peak_rps,
            "mean_rps": profile.mean_rps,
            "daily_profile": list(profile.factors),
            "hours": [
                {"hour": h, "requests": c, "seconds": sec, "rps": r, "factor": f}
                for h, (c, sec, r, f) in enumerate(
                    zip(profile.counts, profile.seconds, profile.rps, profile.factors, strict=True)
                )
            ],
        }
    )


def candidate_view(c: Candidate) -> dict[str, Any]:
    """One row of a ``pddplan compare`` section."""
    e = c.plan.evaluation if c.plan is not None else None
    out: dict[str, Any] = {
        "kind": c.kind,
        "label": c.label,
        "datacenter": c.datacenter,
        "chip": c.chip,
        "status": c.plan.status if c.ok and c.plan is not None else PlanStatus.INFEASIBLE,
        "reason": c.reason,
        "relaxes": c.relaxes,
    }
    if e is None or not c.ok:
        return out
    gpus: dict[str, int] = {}
    for p in e.pools:
        gpus[p.chip] = gpus.get(p.chip, 0) + p.gpus
    cost = e.cost_per_hour_usd
    verdict = c.plan.verdict if c.plan is not None else None
    out |= {
        "fleet": [
            {
                "datacenter": p.datacenter,
                "role": p.role,
                "chip": p.chip,
                "gpus_per_instance": p.gpus_per_instance,
                "instances": p.instances,
                "cost_per_hour_usd": p.cost_per_hour_usd,
            }
            for p in e.pools
        ],
        "gpus_by_chip": dict(sorted(gpus.items())),
        "total_gpus": sum(gpus.values()),
        "cost_per_hour_usd": cost,
        "cost_per_month_usd": None if cost is None else cost * units.HOURS_PER_MONTH,
        "sla_capacity_rps": e.sla_capacity_rps,
        "bcr": e.bcr,
        "ttft_s": {k: e.ttft_s[k] for k in ("p50", "p90", "p99")},
        "wan_gbps": sum(x.gbps for x in e.links),
        "link_tiers": [f"{'-'.join(x.between)} {x.gbps:g} Gbps" for x in e.links],
        "link_cost_per_month_usd": (
            sum(x.cost_per_hour_usd for x in e.links) * units.HOURS_PER_MONTH if e.links else None
        ),
        "link_utilization_at_capacity": max(
            (x.utilization_at_capacity for x in e.links if x.utilization_at_capacity is not None),
            default=None,
        ),
        "rld_token_share": e.rld_token_share,
        "usd_per_million_output_tokens": e.usd_per_million_output_tokens,
        "md_cache_gb_per_gpu": e.md_cache["gb_per_gpu"],
        "md_cache_tiers": e.md_cache.get("tiers"),
        "limit": verdict.limit if verdict is not None else None,
    }
    if c.ttft_at_common_s is not None:
        out["ttft_at_common_rate_s"] = c.ttft_at_common_s
    if c.ttft_p99_at_shares is not None:
        from pddplan.plan.compare import LOAD_SHARES

        out["ttft_p99_at_capacity_share_s"] = {
            f"{share:g}": t for share, t in zip(LOAD_SHARES, c.ttft_p99_at_shares, strict=True)
        }
    return out


def section_view(s: Section) -> dict[str, Any]:
    """One question of ``pddplan compare``: its rows, ranking and verdict."""
    ranked = s.ranked
    best = ranked[0] if ranked else None
    rows = []
    for c in s.rows:
        row = candidate_view(c)
        if c.ok and best is None:
            row["rank"] = row["vs_best"] = None  # the hypothetical row alone
        elif c.ok and best is not None:
            row["rank"] = ranked.index(c) + 1 if c in ranked else None  # hypothetical: none
            mine, top = (
                (c.cost_per_hour, best.cost_per_hour)
                if s.at == "demand"
                else (c.capacity_rps, best.capacity_rps)
            )
            # against a best of 0 (a fleet of owned GPUs at no running cost) no ratio exists
            row["vs_best"] = mine / top - 1 if top else (0.0 if mine == top else None)
        rows.append(row)
    return {
        "at": s.at,
        "objective": s.objective,
        "demand_rps": s.demand_rps,
        "planned_rps": s.planned_rps,
        "budget_usd_per_hour": s.budget_usd_per_hour,
        "budget_source": s.budget_source,
        "common_rate_rps": s.common_rps,
        "ranking": [c.label for c in ranked],
        "rows": rows,
        "verdict": s.verdict,
    }


def comparison_view(c: Comparison, sweep: Sweep | None = None) -> dict[str, Any]:
    """``pddplan compare --format json``."""
    out: dict[str, Any] = {
        "scenario": c.scenario.name,
        "model": c.scenario.model,
        "demand_rps": c.scenario.workload.arrival_rps,
        "headroom": c.scenario.headroom,
        "engine": c.engine,
        "sections": [section_view(s) for s in c.sections],
    }
    if sweep is not None:
        out["price_sweep"] = sweep_view(sweep)
    return _plain(out)


def sweep_view(sweep: Sweep) -> dict[str, Any]:
    return _plain(
        {
            "chip": sweep.chip,
            "points": [
                {
                    "price_usd_per_gpu_hour": p.price,
                    "pdd_cost_per_hour_usd": p.pdd_cost_per_hour,
                    "cheapest_baseline": p.baseline,
                    "cheapest_baseline_cost_per_hour_usd": p.baseline_cost_per_hour,
                    "pdd_wins": p.pdd_wins,
                }
                for p in sweep.points
            ],
            "break_even_usd_per_gpu_hour": sweep.break_even,
            "bracket": list(sweep.bracket) if sweep.bracket else None,
        }
    )


def cost_view(fleet: Fleet, cost: FleetCost) -> dict[str, Any]:
    """``pddplan evaluate --cost-only --json``."""
    total = cost.total
    return _plain(
        {
            "name": fleet.name,
            "pools": [
                {
                    "datacenter": p.datacenter,
                    "role": p.role,
                    "chip": p.chip,
                    "gpus_per_instance": p.gpus_per_instance,
                    "instances": p.instances,
                    "gpus": p.gpus_per_instance * p.instances,
                    "owned_gpus": owned,
                    "cost_per_hour_usd": c,
                }
                for p, c, owned in zip(fleet.pools, cost.pools, cost.owned_gpus, strict=True)
            ],
            "links": [
                {"between": list(x.between), "gbps": x.gbps, "cost_per_hour_usd": c}
                for x, c in zip(fleet.links, cost.links, strict=True)
            ],
            "total_gpus": sum(p.gpus_per_instance * p.instances for p in fleet.pools),
            "cost_per_hour_usd": total,
            "cost_per_month_usd": None if total is None else total * units.HOURS_PER_MONTH,
            "price_basis": cost.basis,
            "missing_prices": cost.missing,
            "egress": "not included: --cost-only has no traffic to bill",
        }
    )


def day_view(r: DayReplay) -> dict[str, Any]:
    """``pddplan simulate --json`` on a scenario with a horizon: a day of its plan over time,
    hour by hour: demand, GPUs taking requests, instances joining and leaving, simulated
    TTFT percentiles with their 95% intervals beside the analytic ones, TPOT P99, and
    whether the SLA holds within the docs' bands."""
    return _plain(
        {
            "scenario": r.scenario,
            "kind": "day",
            "tranche": r.tranche,
            "holds": r.holds,
            "hour_s": r.hour_s,
            "warmup_s": r.warmup_s,
            "seed": r.seed,
            "requests": r.requests,
            "events": r.events,
            "pools": r.pools,
            "sla": {"ttft_p90_s": r.ttft_p90_s, "ttft_p99_s": r.ttft_p99_s, "tpot_ms": r.tpot_ms},
            "hours": [
                {
                    "hour": h.hour,
                    "period": h.period,
                    "rate_rps": h.rate_rps,
                    "requests": h.requests,
                    "gpus": h.gpus,
                    "joined": h.joined,
                    "left": h.left,
                    "ttft_s": {k: dataclasses.asdict(v) for k, v in h.ttft_s.items()},
                    "analytic_ttft_s": h.analytic_ttft_s,
                    "tpot_p99_ms": h.tpot_p99_ms,
                    "holds": h.holds,
                    "misses": list(h.misses),
                }
                for h in r.hours
            ],
        }
    )


def simulation_view(r: SimResult) -> dict[str, Any]:
    """``pddplan simulate --json``: the verdict on the SLA, how the run reached steady state,
    the simulated figures, the analytic prediction of each at the same rate
    (``predicted``), the relative error (predicted - simulated) / simulated, and the 95%
    batch-means intervals of the TTFT percentiles and of the inter-token gap's P99."""

    def pick(attr: str) -> dict[str, Any]:
        def get(f: Figure) -> float | None:
            return getattr(f, attr)

        return {
            "ttft_s": {k: get(f) for k, f in r.ttft_s.items()},
            "tpot_ms": {k: get(f) for k, f in r.tpot_ms.items()},
            "goodput_rps": get(r.goodput_rps),
            "rld_token_share": get(r.rld_token_share),
            "link_utilization": {k: get(f) for k, f in r.link_utilization.items()},
            "pool_utilization": {k: get(f) for k, f in r.pool_utilization},
            "p_hit": get(r.p_hit),
            "md_hit": get(r.md_hit),
        }

    out: dict[str, Any] = {
        "scenario": r.scenario,
        "fleet": r.fleet,
        "source": r.source,
        "predicted_from": r.predicted_from,
        "engine": r.engine,
        "rate_rps": r.rate_rps,
        "requests": r.requests,
        "warmup_requests": r.warmup_requests,
        "seed": r.seed,
        "verdict": r.verdict,
        "reasons": r.reasons,
        "steady_state": dataclasses.asdict(r.steadiness),
        **pick("simulated"),
        "ttft_ci_s": {k: [f.low, f.high] for k, f in r.ttft_s.items()},
        "tpot_ci_ms": {"p99": [r.tpot_ms["p99"].low, r.tpot_ms["p99"].high]},
        "predicted": pick("predicted"),
        "relative_error": pick("error"),
        "pipelines": r.pipelines,
        "handoffs": r.handoffs,
        "handoff_stall_ms": r.handoff_stall_ms,
        "sla": r.sla,
        "misses": r.misses,
        "ttft_tail_breakdown_s": r.tail_breakdown,
        "ttft_breakdown_s": {
            k: {"simulated": v, "analytic": (r.predicted_breakdown or {}).get(k)}
            for k, v in r.breakdown.items()
        },
        "events": r.events,
        "wall_seconds": r.wall_s,
        "events_per_second": r.events / r.wall_s if r.wall_s else None,
    }
    return _plain(out)


def verification_view(v: Verification) -> dict[str, Any]:
    """The ``verification`` part of ``pddplan solve --verify --json``."""
    steps = []
    for st in v.steps:
        e = st.plan.evaluation
        steps.append(
            {
                "iteration": st.iteration,
                "planning_factors": dataclasses.asdict(st.tightening),
                "status": st.plan.status,
                "gpus": sum(p.gpus for p in e.pools) if e is not None else None,
                "cost_per_hour_usd": e.cost_per_hour_usd if e is not None else None,
                "planned_capacity_rps": e.sla_capacity_rps if e is not None else None,
                "load_rps": st.load_rps,
                "simulation": simulation_view(st.sim) if st.sim is not None else None,
                "confirmed": st.confirmed,
                "note": st.note,
            }
        )
    check = v.at_capacity
    at_capacity = None
    if check is not None:
        at_capacity = {
            "rate_rps": check.rate_rps,
            "what": "the confirmed plan at the SLA capacity its verdict claims: the analytic "
            "TTFT against the simulated, within the bands or not (no SLA verdict: at the "
            "capacity the tail sits on the bound)",
            "ttft_s": {
                key: {
                    "simulated": check.sim.ttft_s[key].simulated,
                    "low": check.sim.ttft_s[key].low,
                    "high": check.sim.ttft_s[key].high,
                    "analytic": check.sim.ttft_s[key].predicted,
                    "error": check.sim.ttft_s[key].error,
                    "band": band,
                    "within": check.within[key],
                }
                for key, band in check.bands
            },
            "stopped": check.sim.steadiness.stopped,
            "measured_requests": check.sim.requests,
        }
    return _plain(
        {
            "confirmed": v.confirmed,
            "message": v.message,
            "iterations": steps,
            "at_capacity": at_capacity,
        }
    )


def calibration_view(fit: Calibration) -> dict[str, Any]:
    """``pddplan calibrate --json``: each knob fitted, each point before and after."""
    return _plain(
        {
            "rms_log_residual_before": fit.rms_before,
            "rms_log_residual_after": fit.rms_after,
            "ridge": fit.ridge,
            "starts": fit.starts,
            "notes": list(fit.notes),
            "knobs": [
                {
                    "name": k.name,
                    "default": k.default,
                    "value": k.value,
                    "one_sigma_factor": k.factor,
                    "at_bound": k.at_bound,
                }
                for k in fit.knobs
            ],
            "points": [
                {
                    "id": p.measurement.id or p.where,
                    "where": p.where,
                    "kind": p.measurement.kind,
                    "metric": p.measurement.metric,
                    "measured": p.measurement.value,
                    "predicted_before": p.before,
                    "predicted_after": p.after,
                    "residual_before": p.residual_before,
                    "residual_after": p.residual_after,
                }
                for p in fit.points
            ],
            "held_out": _held_out_view(fit),
        }
    )


def _held_out_view(fit: Calibration) -> dict[str, Any]:
    """The fit's held-out error: each capacity point predicted by the fit on the folds that
    do not hold it, summarized, and the error table per phase a scenario then plans its
    ``perf_quantile`` with (a phase with too few points has none)."""
    ratios = [1.0 / h.time_ratio for h in fit.held_out]
    out: dict[str, Any] = {
        "folds": fit.error_folds,
        "points": len(ratios),
        "min_points": MIN_ERROR_POINTS,
        "error": {ph: e.model_dump(mode="json") for ph, e in fit.error.items()},
    }
    if ratios:
        out |= {
            "within_20pct": sum(abs(r - 1) <= 0.2 for r in ratios) / len(ratios),
            "median_ratio": statistics.median(ratios),
            "mape": sum(abs(r - 1) for r in ratios) / len(ratios),
            "phase_points": {
                ph: sum(h.phase == ph for h in fit.held_out) for ph in ("prefill", "decode")
            },
        }
    return out


def robust_view(r: RobustResult) -> dict[str, Any]:
    """``pddplan solve --json`` (and ``--out``) for a scenario with workload variants: the
    shared hardware (``deployment``, the first variant's routing), each variant's routing
    and figures at the shared fleet, the mixture, and the single-variant plans."""
    out: dict[str, Any] = {
        "scenario": r.scenario,
        "model": r.model,
        "status": r.status,
        "objective": MIN_COST,
        "robust": True,
        "solver": {
            "solver": r.solver,
            "seconds": r.seconds,
            "gap": r.gap,
            "bound_usd_per_hour": r.bound,
            "variables": r.variables,
            "constraints": r.constraints,
        },
        "cost_per_hour_usd": r.cost_per_hour_usd,
        "cost_per_month_usd": (
            r.cost_per_hour_usd * units.HOURS_PER_MONTH if r.cost_per_hour_usd is not None else None
        ),
        "confirmed": r.confirmed,
        "price_of_robustness_usd_per_hour": r.price_of_robustness_usd_per_hour,
        "mixture_tail": (
            {"above_ttft_p90": r.mixture[0], "above_ttft_p99": r.mixture[1]}
            if r.mixture is not None
            else None
        ),
        "notes": r.notes,
    }
    if r.variants:
        out["deployment"] = r.variants[0].fleet.model_dump(mode="json")
        out["variants"] = {
            v.name: {
                "weight": v.weight,
                "must_meet": v.must_meet,
                "planned_rps": v.rate_rps,
                "tail_scale": v.tail_scale,
                "meets": v.meets,
                "share_above_ttft_p90": v.tail_masses[0],
                "share_above_ttft_p99": v.tail_masses[1],
                "routing": v.fleet.routing.model_dump(mode="json") if v.fleet.routing else None,
                "evaluation": evaluation_view(v.evaluation),
            }
            for v in r.variants
        }
    out["single_variant_plans"] = [
        {
            "variant": p.name,
            "status": p.status,
            "cost_per_hour_usd": p.cost_per_hour_usd,
            "deployment": p.fleet.model_dump(mode="json") if p.fleet is not None else None,
            "under": [dataclasses.asdict(c) for c in p.under],
        }
        for p in r.singles
    ]
    return _plain(out)


def horizon_view(r: HorizonResult) -> dict[str, Any]:
    """``pddplan solve --json`` (and ``--out``) for a scenario with a horizon: the total and
    the policies, the purchases, reservations and link leases, each period's demand, hours,
    deployment (fleet file form), the GPUs it holds by how they are had (sunk ones run,
    owned held, reserved in force, rented), its cost per hour and TTFT, the monthly costs,
    and the pass times assumed (``engine``)."""
    periods = []
    engine: dict[str, Any] | None = None
    for pp in r.periods:
        p, d, e = pp.period, pp.deployment, pp.evaluation
        if engine is None and e is not None:
            engine = e.engine
        periods.append(
            {
                "name": p.name,
                "tranche": p.tranche.index + 1,
                "months": [p.tranche.first_month, p.tranche.last_month],
                "hours_of_day": list(p.hours),
                "rps": p.rps,
                "hours_per_month": p.hours_per_month,
                "hours": p.weight_hours,
                "family": d.family.label if d is not None else None,
                "deployment": d.fleet.model_dump(mode="json") if d is not None else None,
                "gpus": _chip_gpus(d.gpus) if d is not None else {},
                "sunk_gpus": _chip_gpus(pp.sunk),
                "owned_gpus": _chip_gpus(pp.owned),
                "reserved_gpus": _chip_gpus(pp.reserved),
                "rented_gpus": _chip_gpus(pp.rented),
                "usd_per_hour": pp.usd_per_hour,
                "ttft_s": e.ttft_s if e is not None else None,
                "tpot_ms": e.tpot_ms if e is not None else None,
                "sla_capacity_rps": d.capacity_rps if d is not None else None,
            }
        )
    return _plain(
        {
            "scenario": r.scenario,
            "model": r.model,
            "kind": "horizon",
            "status": str(r.status),
            "total_usd": r.total_usd,
            "bound_usd": r.bound_usd,
            "gap": r.gap,
            "months": r.months,
            "policies": [dataclasses.asdict(p) for p in r.policies],
            "purchases": [dataclasses.asdict(p) for p in r.purchases],
            "reservations": [dataclasses.asdict(x) for x in r.reservations],
            "link_leases": [dataclasses.asdict(x) for x in r.leases],
            "periods": periods,
            "monthly_usd": r.monthly_usd,
            "engine": engine,
            "solver": {
                "deployments": r.deployments,
                "family_plans": r.family_plans,
                "variables": r.variables,
                "constraints": r.constraints,
            },
            "notes": r.notes,
        }
    )


def _chip_gpus(gpus: dict[tuple[str, str], int]) -> dict[str, int]:
    return {f"{dc}/{chip}": n for (dc, chip), n in sorted(gpus.items())}
