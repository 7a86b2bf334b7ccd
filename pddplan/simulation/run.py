"""Running a simulation end to end and summarizing it: percentiles with confidence
intervals, utilizations, and the analytic model's prediction beside each figure.

Confidence intervals use batch means: the measured requests, in arrival order, are cut into
``BATCHES`` consecutive batches, the percentile is taken in each, and the interval is the
Student-t interval of the batch values (queueing makes neighbouring requests correlated, so
an interval from the order statistics of all requests would be too narrow).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import special

from pddplan import units
from pddplan.errors import ArgumentError
from pddplan.evaluation.evaluator import Evaluator
from pddplan.evaluation.results import Evaluation
from pddplan.model.problem import Problem
from pddplan.simulation.decode import gap_seconds
from pddplan.simulation.engine import DIRECT, RELAY, SINGULAR, SimRaw, Simulation
from pddplan.simulation.requests import (
    BLOCK_TOKENS,
    SessionOptions,
    SessionSource,
    SimRequest,
    trace_requests,
)
from pddplan.spec.fleet import Fleet
from pddplan.spec.scenario import Scenario
from pddplan.workload.classes import workload_classes

BATCHES = 10
"""Batches for the batch-means confidence intervals."""
CONFIDENCE = 0.95
WARMUP_SHARE = 0.1
"""Share of sampled requests that only warm the system up (left out of every figure)."""


@dataclass(frozen=True)
class Figure:
    """One simulated figure, its confidence interval, and the analytic prediction."""

    simulated: float
    low: float | None = None
    high: float | None = None
    predicted: float | None = None

    @property
    def error(self) -> float | None:
        """(predicted - simulated) / simulated."""
        if self.predicted is None or not self.simulated or not math.isfinite(self.predicted):
            return None
        return (self.predicted - self.simulated) / self.simulated


@dataclass(frozen=True)
class SimResult:
    scenario: str
    fleet: str
    source: str
    """``sessions`` (sampled) or the trace's path."""
    rate_rps: float
    """Arrival rate simulated (the trace's mean rate for a trace)."""
    requests: int
    """Requests measured (after warm-up)."""
    warmup_requests: int
    seed: int
    ttft_s: dict[str, Figure]
    tpot_ms: dict[str, Figure]
    goodput_rps: Figure
    """Requests per second finished with TTFT within the P99 bound and their mean TPOT
    within the TPOT bound."""
    rld_token_share: Figure
    link_utilization: dict[str, Figure]
    pool_utilization: list[tuple[str, Figure]]
    pipelines: dict[str, float]
    """Share of measured requests on each pipeline."""
    p_hit: Figure
    """Mean prefill-side hit (predicted: the workload's)."""
    md_hit: Figure
    handoffs: int
    handoff_stall_ms: float
    """Mean MD stall per handoff."""
    sla: dict[str, float]
    sla_met: bool
    """Simulated TTFT P90, P99 and TPOT P99 all within the SLA."""
    misses: list[str]
    tail_breakdown: dict[str, float]
    """Mean seconds of each TTFT segment (``queue``: waiting for a prefill pass; ``prefill``:
    the passes; ``transfer``: KV to the decode instance; ``decode``: admission, first step
    and the return hop) over the requests above the simulated TTFT P90."""
    events: int
    wall_s: float


def _batch_ci(values: np.ndarray, q: float) -> tuple[float, float, float]:
    point = float(np.quantile(values, q))
    parts = [p for p in np.array_split(values, BATCHES) if len(p)]
    if len(parts) < 2:
        return point, point, point
    per = np.array([np.quantile(p, q) for p in parts])
    half = float(
        special.stdtrit(len(per) - 1, 0.5 + CONFIDENCE / 2) * per.std(ddof=1) / len(per) ** 0.5
    )
    return point, point - half, point + half


def _gap_percentile(gaps: dict[int, float], q: float) -> float:
    keys = sorted(k for k, v in gaps.items() if v > 0)
    if not keys:
        return math.nan
    weight = np.array([gaps[k] for k in keys])
    cum = np.cumsum(weight) / weight.sum()
    return gap_seconds(keys[int(np.searchsorted(cum, q))]) / units.MS


def simulate(
    problem: Problem,
    fleet: Fleet,
    *,
    requests: int = 20_000,
    rate_rps: float | None = None,
    trace: Path | None = None,
    skip_bad: bool = False,
    seed: int = 0,
    p_cache_tokens: int | None = None,
    setup_rtts: float = 0.0,
    progress: Callable[[int, int], None] | None = None,
) -> SimResult:
    """Simulate ``fleet`` on ``problem`` with ``requests`` sampled session requests at
    ``rate_rps`` (default: the fleet's SLA capacity, the load a plan is sized for), or with
    a Mooncake ``trace``; compare with the analytic evaluation at the same rate."""
    if trace is None and requests < 1:
        raise ArgumentError("requests", f"{{argument}} must be at least 1, got {requests}")
    scenario = problem.scenario
    analytic = Evaluator(problem, fleet)
    routing = analytic.routing
    fleet = fleet.model_copy(update={"routing": routing})
    warm: Iterable[Sequence[int]] = ()
    if trace is not None:
        source: Iterable[SimRequest] = trace_requests(trace, skip_bad=skip_bad)
        warmup, total, block = 0, None, BLOCK_TOKENS
    else:
        rate = rate_rps if rate_rps is not None else analytic.capacity
        if not rate or not math.isfinite(rate) or rate <= 0:
            raise ArgumentError(
                "rate_rps",
                f"fleet {fleet.name} has no SLA capacity to simulate at; give {{argument}}",
            )
        options = SessionOptions(
            rate_rps=rate,
            ready_after_s=scenario.sla.ttft_p90_s,
            tpot_s=scenario.sla.tpot_ms * units.MS,
        )
        gen = SessionSource(scenario.workload, requests, options, seed)
        source, warm, block = gen, gen.warm, gen.block_tokens
        warmup, total = int(requests * WARMUP_SHARE), requests
    sim = Simulation(
        problem,
        fleet,
        seed=seed,
        p_cache_tokens=p_cache_tokens,
        block_tokens=block,
        setup_rtts=setup_rtts,
        chain_ids=trace is None,
        fleet_model=analytic.model,
    )
    tick = (lambda done: progress(done, total or 0)) if progress is not None else None
    start = time.perf_counter()
    raw = sim.run(source, warm=warm, warmup=warmup, progress=tick)
    wall = time.perf_counter() - start
    measured = len(raw.records.index)
    if measured == 0:
        raise ArgumentError("requests", "no request was measured: give more {argument}")
    rate = measured / raw.window_s if trace is not None else rate
    predicted = analytic.report(rate)
    return _summarize(scenario, fleet, raw, predicted, rate, seed, wall, trace)


def _summarize(
    s: Scenario,
    fleet: Fleet,
    raw: SimRaw,
    predicted: Evaluation,
    rate: float,
    seed: int,
    wall: float,
    trace: Path | None,
) -> SimResult:
    rec = raw.records
    order = np.argsort(rec.index, kind="stable")
    ttft = rec.ttft_s[order]
    ttft_fig = {}
    for q in (0.5, 0.9, 0.99):
        key = f"p{int(q * 100)}"
        point, lo, hi = _batch_ci(ttft, q)
        ttft_fig[key] = Figure(point, lo, hi, predicted.ttft_s.get(key))
    tpot = {
        "p50": Figure(_gap_percentile(raw.gaps, 0.5), predicted=predicted.tpot_ms["step"]),
        "p99": Figure(_gap_percentile(raw.gaps, 0.99), predicted=predicted.tpot_ms["p99"]),
    }
    out = rec.output_tokens
    decode_s = rec.finish_s - (rec.arrival_s + rec.ttft_s)
    mean_tpot = np.where(out > 1, decode_s / np.maximum(out - 1, 1), 0.0)
    tpot_bound = s.sla.tpot_ms * units.MS
    good = (rec.ttft_s <= s.sla.ttft_p99_s) & (mean_tpot <= tpot_bound * (1 + 1e-9))
    over = predicted.ttft_over_p99_bound or 0.0
    goodput = Figure(
        float(good.sum()) / raw.window_s,
        predicted=rate * (1 - over) if predicted.status != "sla_infeasible" else 0.0,
    )
    rld_share = float(rec.rld_tokens.sum() / max(out.sum(), 1))
    links = {}
    for (a, b), u in raw.link_util.items():
        pred = next((x.utilization for x in predicted.links if set(x.between) == {a, b}), None)
        links[f"{a}->{b}"] = Figure(u, predicted=pred)
    pools = []
    for (dc, role, chip, u), p in zip(raw.pool_util, predicted.pools, strict=True):
        pools.append((f"{role} {chip} in {dc}", Figure(u, predicted=p.utilization)))
    paths = {
        name: float(np.mean(rec.path == code))
        for name, code in (("p_md", DIRECT), ("p_rld_md", RELAY), ("singular", SINGULAR))
    }
    classes = workload_classes(s.workload)
    p_hit = sum(c.weight * c.p_hit for c in classes)
    sla = {"ttft_p90_s": s.sla.ttft_p90_s, "ttft_p99_s": s.sla.ttft_p99_s, "tpot_ms": s.sla.tpot_ms}
    misses = []
    if ttft_fig["p90"].simulated > s.sla.ttft_p90_s:
        misses.append(f"TTFT P90 {ttft_fig['p90'].simulated:.2f} s above {s.sla.ttft_p90_s:g} s")
    if ttft_fig["p99"].simulated > s.sla.ttft_p99_s:
        misses.append(f"TTFT P99 {ttft_fig['p99'].simulated:.2f} s above {s.sla.ttft_p99_s:g} s")
    if tpot["p99"].simulated > s.sla.tpot_ms * (1 + 1e-9):
        misses.append(f"TPOT P99 {tpot['p99'].simulated:.1f} ms above {s.sla.tpot_ms:g} ms")
    slow = rec.ttft_s >= ttft_fig["p90"].simulated
    tail = {
        "queue": float(rec.queue_s[slow].mean()),
        "prefill": float((rec.prefill_s - rec.queue_s)[slow].mean()),
        "transfer": float(rec.transfer_s[slow].mean()),
        "decode": float((rec.ttft_s - rec.prefill_s - rec.transfer_s)[slow].mean()),
    }
    return SimResult(
        scenario=s.name,
        fleet=fleet.name,
        source=str(trace) if trace is not None else "sessions",
        rate_rps=rate,
        requests=len(ttft),
        warmup_requests=raw.warmup_requests,
        seed=seed,
        ttft_s=ttft_fig,
        tpot_ms=tpot,
        goodput_rps=goodput,
        rld_token_share=Figure(rld_share, predicted=predicted.rld_token_share),
        link_utilization=links,
        pool_utilization=pools,
        pipelines=paths,
        p_hit=Figure(float(rec.p_hit.mean()), predicted=p_hit),
        md_hit=Figure(float(rec.md_hit.mean()), predicted=predicted.md_cache.get("mean_hit")),
        handoffs=raw.handoffs,
        handoff_stall_ms=raw.stall_s / raw.handoffs / units.MS if raw.handoffs else 0.0,
        sla=sla,
        sla_met=not misses,
        misses=misses,
        tail_breakdown=tail,
        events=raw.events,
        wall_s=wall,
    )
