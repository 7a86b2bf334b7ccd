"""A day of a schedule, request by request: the simulator replays the daily profile through
the deployments a plan over time runs hour by hour, with instances joining and leaving at
the hours where the deployment changes (docs/simulate.md#a-day-of-a-schedule).

The day is one simulation of the *union* of the day's deployments: every pool any hour runs
(a pool is a role, datacenter, chip and layout), with the most instances any hour runs of
it. At each hour's start the hour's deployment is applied (``Simulation.scale``): of each
pool, its first ``n`` instances take requests and the rest leave. A leaving instance takes
nothing new and finishes what it holds (a prefill instance the prompts it has started, a
decode instance its sequences); a joining one takes work at once; the router's weights,
its thresholds and the handoff rule are the hour's deployment's. The decode-side cache is a
datacenter's (as in every simulation here), sized by the GPUs active there: room that joins
is empty (a joining instance brings no cached context), and when GPUs leave the least
recently used blocks go. The link runs at the bandwidth leased for the tranche.

Arrivals follow the profile: sampled sessions (``SessionSource``) at the day's mean rate,
their times mapped so that hour ``h`` arrives at its own rate (a Poisson process through a
time change is a Poisson process at the changed rate; sessions keep their turn order, so
the caches see the same reuse per request as at a steady rate). Each hour lasts
``hour_s`` simulated seconds (3,600: the real day; less compresses it, each hour at its
own rate, which leaves less time between the changes and so judges them more harshly).
Before hour 0 the day's last hour runs for ``warmup_s`` with its deployment (the day is a
cycle), after a warm start through the caches; its requests are not counted.

Each hour's requests (by arrival) give its TTFT percentiles, with the 95% intervals of
``simulation.steady``, and the inter-token gaps made in it give its TPOT P99. The SLA holds
in an hour when each percentile is within the band docs/simulate.md holds the model to
above its bound: +10% at P90, +15% at P99 (``verify.BANDS``), TPOT P99 included. Beside
each, the analytic model's figure for the hour's deployment at the hour's rate.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from pddplan import units
from pddplan.errors import ArgumentError, InputError
from pddplan.evaluation.evaluator import Evaluator
from pddplan.evaluation.fleet_model import FleetModel
from pddplan.model.problem import Problem
from pddplan.simulation.build import md_cache_tokens
from pddplan.simulation.engine import Checkpoint, Simulation
from pddplan.simulation.steady import Interval, gap_interval, log_interval, warm_start
from pddplan.simulation.verify import P90_BAND, P99_BAND
from pddplan.spec.fleet import Fleet, LinkChoice, Pool
from pddplan.spec.horizon import HOURS_PER_DAY
from pddplan.spec.scenario import Sla
from pddplan.workload.sessions import SessionOptions, SessionSource, SimRequest

HOUR_S = 3600.0
"""Simulated seconds an hour lasts by default: the real day."""
WARMUP_S = 900.0
"""Seconds the day's last hour runs before hour 0 by default (at most an hour): many times
what the queues and the running sequences take to settle after the warm start (a prefill
pass takes under a second; a sequence's decode, the median output at the TPOT bound, tens
of seconds), so that hour 0 starts from a running service."""
BATCHES = 20
"""Batches an hour's requests are cut into for its percentiles' intervals."""
MIN_REQUESTS = 10 * BATCHES
"""An hour with fewer requests gets its percentiles without an interval (a batch of fewer
than 10 requests has no P90 of its own)."""


@dataclass(frozen=True)
class HourPlan:
    """What the schedule runs in one hour of the day."""

    hour: int
    """0-23."""
    period: str
    """The period it belongs to (``q8.g2``)."""
    fleet: Fleet | None
    """The deployment it runs (None: no demand, nothing runs)."""
    rate_rps: float
    """Its arrival rate."""


@dataclass(frozen=True)
class HourResult:
    hour: int
    period: str
    rate_rps: float
    requests: int
    """Requests that arrived in it (and were served: the day runs until every one is)."""
    gpus: int
    """GPUs taking requests in it (leaving ones not counted)."""
    joined: int
    """Instances that joined at its start."""
    left: int
    """Instances that started leaving at its start."""
    ttft_s: dict[str, Interval]
    """p50, p90, p99 of its requests' TTFT (an interval of the point itself for a short
    hour)."""
    tpot_p99_ms: float
    """The 99th percentile of the inter-token gaps made in it."""
    analytic_ttft_s: dict[str, float]
    """The analytic model's p90 and p99 for its deployment at its rate."""
    holds: bool
    """Each percentile within its band above its bound (module docstring)."""
    misses: tuple[str, ...]
    """What is beyond its band, in words."""


@dataclass(frozen=True)
class DayReplay:
    scenario: str
    hours: list[HourResult]
    hour_s: float
    warmup_s: float
    seed: int
    requests: int
    """Requests over the day (the warm-up hour's not counted)."""
    events: int
    """The simulator's events, the warm-up included: the run's work."""
    pools: int
    """Pools of the union of the day's deployments."""
    ttft_p90_s: float
    ttft_p99_s: float
    tpot_ms: float
    """The SLA's bounds."""
    tranche: str
    """Which tranche's day, in words."""

    @property
    def holds(self) -> bool:
        return all(h.holds for h in self.hours)


def check_hour(hour_s: float) -> None:
    """``ArgumentError`` for an hour no day can have."""
    if not (isinstance(hour_s, int | float) and math.isfinite(hour_s) and hour_s > 0):
        raise ArgumentError("hour_s", f"{{argument}} must be above 0 seconds, got {hour_s:g}")


def replay_day(
    problem: Problem,
    hours: Sequence[HourPlan],
    *,
    links_gbps: dict[frozenset[str], float] | None = None,
    hour_s: float = HOUR_S,
    warmup_s: float | None = None,
    seed: int = 0,
    tranche: str = "",
) -> DayReplay:
    """Replay one day of ``hours`` (24, hour 0 first) on ``problem`` (module docstring).
    ``links_gbps``: each link's leased bandwidth (by its two datacenters; default: the most
    any hour's deployment uses); ``tranche``: which tranche's day, in words."""
    if len(hours) != HOURS_PER_DAY or [h.hour for h in hours] != list(range(HOURS_PER_DAY)):
        raise ValueError("hours must be the 24 hours of a day, hour 0 first")
    check_hour(hour_s)
    warm = min(WARMUP_S, hour_s) if warmup_s is None else warmup_s
    if not (math.isfinite(warm) and warm >= 0):
        raise ArgumentError("warmup_s", f"{{argument}} must be 0 seconds or more, got {warm:g}")
    if not any(h.fleet is not None and h.rate_rps > 0 for h in hours):
        raise InputError("the day has no demand: nothing to replay")
    sla = problem.scenario.sla
    routed, evaluators = _routed(problem, hours)
    union, counts = _union(routed, links_gbps)
    model = FleetModel(problem, union)
    options = SessionOptions(
        rate_rps=float(np.mean([h.rate_rps for h in hours])),
        ready_after_s=sla.ttft_p90_s,
        tpot_s=sla.tpot_ms * units.MS,
    )
    source = SessionSource(problem.scenario.workload, None, options, seed)
    sim = Simulation(
        problem,
        union,
        seed=seed,
        block_tokens=source.block_tokens,
        chain_ids=True,
        fleet_model=model,
    )
    day = _Day(sim, model, problem, routed, counts, evaluators)
    last = hours[-1]
    day.apply(last)  # the warm-up runs the day's last hour (the day is a cycle)
    requests, _, _ = warm_start(sim, source)
    bounds = [warm + h * hour_s for h in range(HOURS_PER_DAY + 1)]
    rates = [last.rate_rps] + [h.rate_rps for h in hours]
    marks: list[Checkpoint] = []
    changes: list[tuple[int, int]] = []

    def at_hour(h: int) -> None:
        changes.append(day.apply(hours[h]))
        marks.append(sim.checkpoint())

    for h in range(HOURS_PER_DAY):
        sim.ev.at(bounds[h], at_hour, h)
    sim.ev.at(bounds[-1], lambda _: marks.append(sim.checkpoint()))
    sim.start(_timed(requests, [0.0, *bounds], rates, options.rate_rps))
    sim.advance()
    events = sim.ev.count
    _, _, rows = sim.take_records()
    sim.close()
    rows = rows[np.argsort(rows[:, 0], kind="stable")]
    arrival, ttft = rows[:, 1], rows[:, 2]
    out = []
    for h, plan in enumerate(hours):
        keep = (arrival >= bounds[h]) & (arrival < bounds[h + 1])
        values = ttft[keep]
        figures = {
            q: _percentile(values, p) for q, p in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
        }
        tpot = gap_interval([marks[h].gaps, marks[h + 1].gaps], 0.99).value
        analytic = day.analytic(plan)
        misses = _misses(figures, tpot, sla) if len(values) else ()
        joined, left = changes[h]
        out.append(
            HourResult(
                plan.hour, plan.period, plan.rate_rps, int(keep.sum()), day.gpus(plan), joined,
                left, figures, tpot, analytic, not misses, misses,
            )
        )  # fmt: skip
    return DayReplay(
        problem.scenario.name,
        out,
        hour_s,
        warm,
        seed,
        sum(x.requests for x in out),
        events,
        len(union.pools),
        sla.ttft_p90_s,
        sla.ttft_p99_s,
        sla.tpot_ms,
        tranche,
    )


# --- the union of the day's deployments ------------------------------------------------------
def _routed(
    problem: Problem, hours: Sequence[HourPlan]
) -> tuple[dict[str, Fleet], dict[str, Evaluator]]:
    """Each distinct deployment of the day (by its content) with the router's thresholds
    its evaluator sets, and its evaluator."""
    fleets: dict[str, Fleet] = {}
    evaluators: dict[str, Evaluator] = {}
    for h in hours:
        if h.fleet is None:
            continue
        key = h.fleet.model_dump_json()
        if key not in fleets:
            ev = Evaluator(problem, h.fleet)
            evaluators[key] = ev
            fleets[key] = h.fleet.model_copy(update={"routing": ev.routing})
    return fleets, evaluators


def _pool_key(pool: Pool) -> Pool:
    return pool.model_copy(update={"instances": 1})


def _union(
    fleets: dict[str, Fleet], links_gbps: dict[frozenset[str], float] | None
) -> tuple[Fleet, dict[str, list[int]]]:
    """The union of ``fleets`` (module docstring), and per fleet its instances of each of
    the union's pools (0 where it has none)."""
    order: list[Pool] = []
    most: dict[Pool, int] = {}
    for fleet in fleets.values():
        for pool in fleet.pools:
            key = _pool_key(pool)
            if key not in most:
                order.append(key)
            most[key] = max(most.get(key, 0), pool.instances)
    first = next(iter(fleets.values()))
    caches = {f.md_cache_gb_per_gpu for f in fleets.values()}
    if len(caches) > 1:
        raise InputError(
            "the day's deployments keep different decode-side caches in HBM "
            f"({', '.join(str(c) for c in sorted(caches, key=str))} GB per GPU): a replay "
            "needs one (the decode instances' batch depends on it)"
        )
    gbps: dict[frozenset[str], float] = {}
    for fleet in fleets.values():
        for link in fleet.links:
            k = frozenset(link.between)
            gbps[k] = max(gbps.get(k, 0.0), link.gbps)
    for k, g in (links_gbps or {}).items():
        gbps[k] = max(gbps.get(k, 0.0), g)
    union = first.model_copy(
        update={
            "name": "the day's deployments",
            "pools": tuple(p.model_copy(update={"instances": most[p]}) for p in order),
            "links": tuple(
                LinkChoice(between=tuple(sorted(k)), gbps=g)
                for k, g in sorted(gbps.items(), key=lambda kv: sorted(kv[0]))
            ),
        }
    )
    counts = {}
    for name, fleet in fleets.items():
        have = {_pool_key(p): p.instances for p in fleet.pools}
        counts[name] = [have.get(p, 0) for p in order]
    return union, counts


class _Day:
    """Applies an hour's deployment to the simulation, and what it needs to: the union's
    pools by role (``FleetModel.roles``' order), each deployment's decode-side cache
    sizes."""

    def __init__(
        self,
        sim: Simulation,
        model: FleetModel,
        problem: Problem,
        fleets: dict[str, Fleet],
        counts: dict[str, list[int]],
        evaluators: dict[str, Evaluator],
    ) -> None:
        self.sim, self.problem = sim, problem
        self.fleets, self.counts, self.evaluators = fleets, counts, evaluators
        union = model.fleet
        self.slots: list[tuple[str, int]] = []  # each union pool's (role, index)
        seen = {"prefill": 0, "relay_decode": 0, "main_decode": 0}
        for pool in union.pools:
            self.slots.append((pool.role, seen[pool.role]))
            seen[pool.role] += 1
        self.hosted = {j: k for k, (j, _) in model.hosts.items()}  # prefill -> hosted RLD
        self.active: list[int] = [p.instances for p in union.pools]

    def apply(self, hour: HourPlan) -> tuple[int, int]:
        """``hour``'s deployment: its pools' instances active, the rest leaving; its router
        and handoff; the decode-side caches sized by its GPUs. Returns the instances that
        joined and the ones that started leaving."""
        key = hour.fleet.model_dump_json() if hour.fleet is not None else None
        want = self.counts[key] if key is not None else [0] * len(self.active)
        joined = sum(max(n - a, 0) for n, a in zip(want, self.active, strict=True))
        left = sum(max(a - n, 0) for n, a in zip(want, self.active, strict=True))
        active: dict[tuple[str, int], int] = {}
        for slot, n in zip(self.slots, want, strict=True):
            active[slot] = n
            if slot[0] == "prefill" and slot[1] in self.hosted:
                active[("relay_decode", self.hosted[slot[1]])] = n
        self.sim.scale(active)
        self.active = list(want)
        if key is not None:
            fleet = self.fleets[key]
            assert fleet.routing is not None  # set by its evaluator (``_routed``)
            self.sim.routing, self.sim.handoff = fleet.routing, fleet.handoff
            self._size_caches(fleet, self.evaluators[key])
        return joined, left

    def _size_caches(self, fleet: Fleet, ev: Evaluator) -> None:
        """Each of ``fleet``'s decode datacenters' cache at its size for ``fleet``."""
        m = ev.model
        if m.tiers:
            for dc, tiers in m.tiers.items():
                self.sim.resize_md_cache(dc, tuple(tiers.nested()))
            return
        gb = fleet.md_cache_gb_per_gpu
        if gb is None:
            return
        bpt = self.problem.kv.bytes_per_token
        for dc in m.md_dcs:
            gpus = sum(
                p.instances * p.gpus_per_instance
                for p in fleet.pools
                if p.role == "main_decode" and p.datacenter == dc
            )
            self.sim.resize_md_cache(dc, (md_cache_tokens(gb, gpus, bpt),))

    def gpus(self, hour: HourPlan) -> int:
        if hour.fleet is None:
            return 0
        return sum(p.instances * p.gpus_per_instance for p in hour.fleet.pools)

    def analytic(self, hour: HourPlan) -> dict[str, float]:
        if hour.fleet is None or hour.rate_rps <= 0:
            return {}
        ev = self.evaluators[hour.fleet.model_dump_json()]
        ttft = ev.report(hour.rate_rps).ttft_s
        return {"p90": ttft["p90"], "p99": ttft["p99"]}


# --- arrivals through the day ----------------------------------------------------------------
def _timed(
    requests: Iterator[SimRequest], bounds: list[float], rates: list[float], mean_rps: float
) -> Iterator[SimRequest]:
    """``requests``, sampled at ``mean_rps``, with their times changed so that segment ``k``
    (``bounds[k]`` to ``bounds[k + 1]`` s) receives them at ``rates[k]``; ends at the last
    bound. The time change: the sampled clock ``u`` runs at ``rate / mean_rps`` of the real
    one in each segment."""
    u_at = [0.0]
    for k, rate in enumerate(rates):
        u_at.append(u_at[-1] + rate * (bounds[k + 1] - bounds[k]) / mean_rps)
    end = u_at[-1]
    for u, inp, out, blocks in requests:
        if u >= end:
            return
        k = bisect.bisect_right(u_at, u) - 1  # a segment without arrivals has no width in u
        t = bounds[k] + (u - u_at[k]) * mean_rps / rates[k]
        yield t, inp, out, blocks


def _percentile(values: np.ndarray, q: float) -> Interval:
    if len(values) == 0:
        return Interval(math.nan, math.nan, math.nan)
    if len(values) < MIN_REQUESTS:
        x = float(np.quantile(values, q))
        return Interval(x, x, x)
    return log_interval(values, q, BATCHES)


def _misses(ttft: dict[str, Interval], tpot_ms: float, sla: Sla) -> tuple[str, ...]:
    """Each percentile beyond its band above its bound, in words."""
    out = []
    for name, x, bound, band, unit in (
        ("TTFT P90", ttft["p90"].value, sla.ttft_p90_s, P90_BAND, "s"),
        ("TTFT P99", ttft["p99"].value, sla.ttft_p99_s, P99_BAND, "s"),
        ("TPOT P99", tpot_ms, sla.tpot_ms, P99_BAND, "ms"),
    ):
        if math.isfinite(x) and x > bound * (1 + band):
            out.append(f"{name} {x:.3g} {unit} above {bound:g} {unit} + {band:.0%}")
    return tuple(out)


__all__ = ["HOUR_S", "DayReplay", "HourPlan", "HourResult", "check_hour", "replay_day"]
