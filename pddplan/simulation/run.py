"""Running a simulation end to end and summarizing it: percentiles with confidence
intervals, utilizations, the SLA verdict, and the analytic model's prediction beside each
figure. How long a run lasts, and the intervals, are ``simulation.steady``'s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pddplan import units
from pddplan.errors import ArgumentError
from pddplan.evaluation.evaluator import Evaluator
from pddplan.evaluation.results import Evaluation
from pddplan.model.problem import Problem
from pddplan.progress import Progress
from pddplan.simulation.decode import gap_seconds
from pddplan.simulation.engine import Simulation
from pddplan.simulation.request import DIRECT, RELAY, SINGULAR
from pddplan.simulation.steady import (
    MIN_BATCH,
    Interval,
    RunLength,
    Steadiness,
    SteadyRun,
    run_steady,
)
from pddplan.spec.fleet import Fleet
from pddplan.spec.scenario import MdCacheOption, Scenario, Workload
from pddplan.spec.status import SIM_TIME_LIMIT, EvalStatus
from pddplan.work import wall_clock
from pddplan.workload.classes import workload_classes
from pddplan.workload.sessions import (
    BLOCK_TOKENS,
    SessionOptions,
    SessionSource,
    SimRequest,
    trace_requests,
)

CDF_PROBABILITIES = (
    *(round(0.01 * i, 2) for i in range(100)),
    *(round(0.99 + 0.001 * i, 3) for i in range(10)),
    1.0,
)
"""Where the TTFT distribution is sampled for ``SimResult.ttft_cdf_s``: every percent, then
every tenth of a percent above 99% (the tail the SLA's P99 judges), and the maximum."""


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
    predicted_from: str
    """What the analytic column models: the scenario's workload, or the workload fitted
    from the trace (its classes, hits from replaying it through caches of the fleet's
    sizes)."""
    rate_rps: float
    """Arrival rate simulated (the trace's mean rate over the measured window)."""
    requests: int
    """Requests measured (after warm-up)."""
    warmup_requests: int
    seed: int
    verdict: str
    """On the SLA: ``confirmed`` (every upper confidence bound within it), ``missed`` (a
    lower bound above it, or overloaded) or ``inconclusive``; ``time_limit`` when the
    wall-clock safety stop ended the run: no verdict."""
    reasons: list[str]
    """What keeps the verdict from ``confirmed``, one phrase each."""
    steadiness: Steadiness
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
    misses: list[str]
    """The SLA bounds the simulated percentiles (their point values) exceed."""
    tail_breakdown: dict[str, float]
    """Mean seconds of each TTFT segment (``queue``: waiting for a prefill pass; ``prefill``:
    the passes; ``transfer``: KV to the decode instance; ``decode``: admission, first step
    and the return hop) over the requests above the simulated TTFT P90."""
    breakdown: dict[str, float]
    """Mean seconds of each TTFT segment over every measured request, keyed as the
    evaluator's (``evaluator.TTFT_SEGMENTS``: the KV's way split by where it goes, main
    decode or relay decode; ``first_token`` is ``decode`` above), with the analytic figures
    at the same rate in ``predicted_breakdown``."""
    predicted_breakdown: dict[str, float] | None
    events: int
    wall_s: float
    engine: str = ""
    """The engine profile whose pass times both the simulator and the analytic column use."""
    ttft_cdf_s: tuple[float, ...] = ()
    """The measured requests' TTFT at each probability of ``CDF_PROBABILITIES`` (the
    empirical distribution, for a plot; empty for a run that measured none)."""

    @property
    def confirmed(self) -> bool:
        return self.verdict == "confirmed"

    @property
    def stopped(self) -> bool:
        """Whether the wall-clock safety stop ended the run (no verdict)."""
        return self.verdict == SIM_TIME_LIMIT


def simulate(
    problem: Problem,
    fleet: Fleet,
    *,
    length: RunLength | None = None,
    rate_rps: float | None = None,
    trace: Path | None = None,
    skip_bad: bool = False,
    seed: int = 0,
    p_cache_tokens: int | None = None,
    setup_rtts: float = 0.0,
    clock: Callable[[], float] = wall_clock,
    progress: Progress | None = None,
) -> SimResult:
    """Simulate ``fleet`` on ``problem`` with sampled sessions at ``rate_rps`` (default:
    the fleet's SLA capacity, the load a plan is sized for) or a Mooncake ``trace``, for
    as long as ``length`` says (``simulation.steady``); compare with the analytic
    evaluation at the same rate (for a trace, of the workload fitted from it)."""
    length = length if length is not None else RunLength()
    check_length(length)
    scenario = problem.scenario
    analytic = Evaluator(problem, fleet)
    fleet = fleet.model_copy(update={"routing": analytic.routing})
    requests: SessionSource | Iterator[SimRequest]
    if trace is not None:
        requests = trace_requests(trace, skip_bad=skip_bad)
        block = BLOCK_TOKENS
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
        requests = SessionSource(scenario.workload, None, options, seed)
        block = requests.block_tokens
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
    steady = run_steady(sim, requests, scenario.sla, length, clock=clock, progress=progress)
    first, last = steady.window
    if trace is not None:
        rate = steady.steadiness.measured_requests / max(last.time_s - first.time_s, 1e-9)
        fitted = _trace_problem(problem, fleet, trace, p_cache_tokens, skip_bad, rate)
        predicted = Evaluator(fitted, fleet).report(rate)
        predicted_from = "the workload fitted from the trace"
        classes = workload_classes(fitted.scenario.workload)
    else:
        predicted = analytic.report(rate)
        predicted_from = "the scenario's workload"
        classes = workload_classes(scenario.workload)
    p_hit = sum(c.weight * c.p_hit for c in classes)
    return _summarize(
        scenario, fleet, sim, steady, predicted, p_hit, rate, seed, trace, predicted_from
    )


def check_length(length: RunLength) -> None:
    """``ArgumentError`` for a run length no run can have."""
    if length.requests is not None and length.requests < MIN_BATCH:
        raise ArgumentError(
            "requests",
            f"{{argument}} must be at least one batch, {MIN_BATCH:,}, got {length.requests:,}",
        )
    if not 0 < length.precision < 1:
        raise ArgumentError(
            "precision", f"{{argument}} must be between 0 and 1, got {length.precision:g}"
        )
    if length.max_wall_s is not None and not length.max_wall_s > 0:
        raise ArgumentError(
            "max_wall_s", f"{{argument}} must be above 0 seconds, got {length.max_wall_s:g}"
        )
    if length.max_requests < MIN_BATCH:
        raise ArgumentError(
            "max_requests",
            f"{{argument}} must be at least one batch, {MIN_BATCH:,}, got {length.max_requests:,}",
        )


def _trace_problem(
    problem: Problem,
    fleet: Fleet,
    trace: Path,
    p_cache_tokens: int | None,
    skip_bad: bool,
    rate: float,
) -> Problem:
    """``problem`` with the workload fitted from ``trace``: its classes, their prefill-side
    hits from replaying it through the simulated prefill cache, and their decode-side hits
    through one cache of the fleet's decode-side size (all decode datacenters' together)."""
    from pddplan.workload.trace import class_specs, fit_trace

    s = problem.scenario
    md_tokens: int | str = "unbounded"
    if fleet.md_cache_gb_per_gpu is not None:
        kv = Evaluator(problem, fleet).model.roles["main_decode"][0][1].kv
        gpus = sum(
            p.instances * p.gpus_per_instance for p in fleet.pools if p.role == "main_decode"
        )
        md_tokens = int(fleet.md_cache_gb_per_gpu * units.GB * gpus / kv.bytes_per_token)
    fit = fit_trace(
        trace,
        block_tokens=BLOCK_TOKENS,
        cache_tokens=p_cache_tokens if p_cache_tokens is not None else "unbounded",
        md_cache_tokens=md_tokens if md_tokens else None,
        skip_bad=skip_bad,
    )
    workload = Workload(arrival_rps=rate, classes=class_specs(fit))
    update: dict[str, Any] = {"workload": workload}
    if s.md_cache is not None and fleet.md_cache_gb_per_gpu is not None:
        hits = tuple(c.md_hit for c in fit.classes)
        update["md_cache"] = (MdCacheOption(gb_per_gpu=fleet.md_cache_gb_per_gpu, md_hit=hits),)
    return problem.with_scenario(s.model_copy(update=update))


def _figure(x: Interval, predicted: float | None) -> Figure:
    return Figure(x.value, x.low, x.high, predicted)


def _summarize(
    s: Scenario,
    fleet: Fleet,
    sim: Simulation,
    steady: SteadyRun,
    predicted: Evaluation,
    p_hit: float,
    rate: float,
    seed: int,
    trace: Path | None,
    predicted_from: str,
) -> SimResult:
    rec = steady.records
    first, last = steady.window
    window = max(last.time_s - first.time_s, 1e-9)
    ttft_fig = {k: _figure(x, predicted.ttft_s.get(k)) for k, x in steady.ttft.items()}
    tpot = {
        "p50": Figure(_gap_percentile(steady.gaps, 0.5), predicted=predicted.tpot_ms["step"]),
        "p99": _figure(steady.tpot_p99_ms, predicted.tpot_ms["p99"]),
    }
    out = rec.output_tokens
    decode_s = rec.finish_s - (rec.arrival_s + rec.ttft_s)
    mean_tpot = np.where(out > 1, decode_s / np.maximum(out - 1, 1), 0.0)
    tpot_bound = s.sla.tpot_ms * units.MS
    good = (rec.ttft_s <= s.sla.ttft_p99_s) & (mean_tpot <= tpot_bound * (1 + 1e-9))
    over = predicted.ttft_over_p99_bound or 0.0
    goodput = Figure(
        float(good.sum()) / window,
        predicted=rate * (1 - over) if predicted.status != EvalStatus.SLA_INFEASIBLE else 0.0,
    )
    rld_share = float(rec.rld_tokens.sum() / max(out.sum(), 1)) if len(out) else math.nan
    pool_util, link_util = sim.utilizations(first, last)
    links = {}
    for (a, b), u in link_util.items():
        pred = next((x.utilization for x in predicted.links if set(x.between) == {a, b}), None)
        links[f"{a}->{b}"] = Figure(u, predicted=pred)
    pools = []
    for (dc, role, chip, u), p in zip(pool_util, predicted.pools, strict=True):
        pools.append((f"{role} {chip} in {dc}", Figure(u, predicted=p.utilization)))
    paths = {
        name: _mean(rec.path == code)
        for name, code in (("p_md", DIRECT), ("p_rld_md", RELAY), ("singular", SINGULAR))
    }
    sla = {"ttft_p90_s": s.sla.ttft_p90_s, "ttft_p99_s": s.sla.ttft_p99_s, "tpot_ms": s.sla.tpot_ms}
    misses = []
    if ttft_fig["p90"].simulated > s.sla.ttft_p90_s:
        misses.append(f"TTFT P90 {ttft_fig['p90'].simulated:.2f} s above {s.sla.ttft_p90_s:g} s")
    if ttft_fig["p99"].simulated > s.sla.ttft_p99_s:
        misses.append(f"TTFT P99 {ttft_fig['p99'].simulated:.2f} s above {s.sla.ttft_p99_s:g} s")
    if tpot["p99"].simulated > s.sla.tpot_ms * (1 + 1e-9):
        misses.append(f"TPOT P99 {tpot['p99'].simulated:.1f} ms above {s.sla.tpot_ms:g} ms")
    slow = rec.ttft_s >= ttft_fig["p90"].simulated

    def segments(at: np.ndarray | slice, last: str) -> dict[str, float]:
        return {
            "queue": _mean(rec.queue_s[at]),
            "prefill": _mean((rec.prefill_s - rec.queue_s)[at]),
            "transfer": _mean(rec.transfer_s[at]),
            last: _mean((rec.ttft_s - rec.prefill_s - rec.transfer_s)[at]),
        }

    tail = segments(slow, "decode")
    direct = rec.path == DIRECT  # the KV to main decode; the rest's, to relay decode
    mean_segments = {
        "queue": _mean(rec.queue_s),
        "prefill": _mean(rec.prefill_s - rec.queue_s),
        "transfer": _mean(np.where(direct, rec.transfer_s, 0.0)),
        "relay": _mean(np.where(direct, 0.0, rec.transfer_s)),
        "first_token": _mean(rec.ttft_s - rec.prefill_s - rec.transfer_s),
    }
    handoffs = last.handoffs - first.handoffs
    stall = last.stall_s - first.stall_s
    st = steady.steadiness
    return SimResult(
        engine=predicted.engine.get("id", ""),
        scenario=s.name,
        fleet=fleet.name,
        source=str(trace) if trace is not None else "sessions",
        predicted_from=predicted_from,
        rate_rps=rate,
        requests=len(rec.index),
        warmup_requests=st.warmup_requests,
        seed=seed,
        verdict=steady.verdict,
        reasons=list(steady.reasons),
        steadiness=st,
        ttft_s=ttft_fig,
        tpot_ms=tpot,
        goodput_rps=goodput,
        rld_token_share=Figure(rld_share, predicted=predicted.rld_token_share),
        link_utilization=links,
        pool_utilization=pools,
        pipelines=paths,
        p_hit=Figure(_mean(rec.p_hit), predicted=p_hit),
        md_hit=Figure(_mean(rec.md_hit), predicted=predicted.md_cache.get("mean_hit")),
        handoffs=handoffs,
        handoff_stall_ms=stall / handoffs / units.MS if handoffs else 0.0,
        sla=sla,
        misses=misses,
        tail_breakdown=tail,
        breakdown=mean_segments,
        predicted_breakdown=predicted.ttft_breakdown_s,
        ttft_cdf_s=(
            tuple(float(x) for x in np.quantile(rec.ttft_s, CDF_PROBABILITIES))
            if len(rec.ttft_s)
            else ()
        ),
        events=sim.ev.count,
        wall_s=st.wall_s,
    )


def _gap_percentile(gaps: dict[int, float], q: float) -> float:
    """Percentile ``q`` of the inter-token gap histogram ``gaps``, in ms."""
    keys = sorted(k for k, v in gaps.items() if v > 0)
    if not keys:
        return math.nan
    weight = np.array([gaps[k] for k in keys])
    cum = np.cumsum(weight) / weight.sum()
    return gap_seconds(keys[int(np.searchsorted(cum, q))]) / units.MS


def _mean(x: np.ndarray) -> float:
    """The mean; NaN for no values (an overloaded run may finish none it measured)."""
    return float(x.mean()) if len(x) else math.nan
