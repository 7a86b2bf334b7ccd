"""The evaluator: what a given deployment delivers, computed from the analytic model.

It shares only the per-instance cost functions (``pddplan.model.instance``), the
transfer-time model (``network``), the queueing formulas (``queueing``, ``admission``) and
the prefill pool model (``prefill_pool``) with the planner; it never looks at the MILP.
Given a fleet it finds, for the scenario's workload:

- the SLA capacity: the largest arrival rate at which every pool and link stays within its
  utilization cap, the TTFT tail masses meet the P90/P99 budgets, and the P99 inter-token
  gap (handoff stalls included) meets the TPOT bound (bisection: every limit is monotone
  in the rate);
- at the scenario's demand: the TTFT percentiles of the whole class mixture, the TPOT,
  the utilization of every pool and link, and the cost;
- which limit binds at the SLA capacity.

Semantics (``docs/model.md``, "Evaluating a deployment"): a request of class k waits at
prefill (M/G/c wait of its P pool), is prefilled (its passes alone), then either crosses the
WAN to MD (transfer at the link's share left by other flows, ``goodput x (1 - u)``), or goes
by RDMA to RLD; its first token comes from MD's or RLD's first decode step. Prefill traffic
splits across P pools in proportion to their capacity; decode traffic likewise.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from pddplan import units
from pddplan.errors import InputError
from pddplan.evaluation.fleet_model import CacheAt, FleetModel
from pddplan.evaluation.results import Evaluation, LinkResult, PoolResult
from pddplan.model.admission import Admission, md_admission
from pddplan.model.kv import session_working_set_bytes
from pddplan.model.network import TcpPath, link_bytes_per_s, rdma_transfer_s, wan_times
from pddplan.model.prefill_pool import PrefillPoolLoad
from pddplan.model.pricing import fleet_cost
from pddplan.model.problem import Problem
from pddplan.model.queueing import p99_gap, percentile
from pddplan.model.relay import eager_tokens
from pddplan.spec.engine import RELAY_ON_OTHER_ENGINE, RELAY_ON_PREFILL
from pddplan.spec.fleet import CacheSizes, Fleet, Routing
from pddplan.spec.scenario import TAIL_BUDGETS, Scenario
from pddplan.spec.status import EvalStatus
from pddplan.work import tally

MAX_RATE_RPS = 1e7
"""Capacity search gives up above this rate (reported as unbounded)."""
MAX_TTFT_S = 1e6
"""Percentile search gives up above this latency (reported as unbounded)."""
BISECT_STEPS = 60
"""The most steps the capacity and percentile searches take; both stop at their tolerance
first (``CAPACITY_TOLERANCE``, ``queueing.PERCENTILE_TOLERANCE``)."""
FIRST_RATE_RPS = 1e-9
"""The capacity search's first state: whether the fleet meets its limits at all."""
INTERPOLATE_BELOW = 1.2
"""The capacity search interpolates once its high end's ``excess`` is at most this (20%
over its limit), and bisects before (``_bisect_capacity``)."""
SLOW_STEPS = 4
"""The capacity search stops interpolating after this many steps in a row that did not
halve its bracket (``_bisect_capacity``): 3 before stop 67; 4 lets Anderson-Bjorck's
scaling close in on one end where a far other end holds the bracket open (the states of
`pdd-paper-fleets`' solve 453 -> 421, the monthly robust solve's 941 -> 886)."""
CAPACITY_TOLERANCE = 1e-6
"""The SLA capacity's bisection stops when its bracket is this narrow (relative) and reports
the bracket's low end; a capacity within it of a rate serves that rate (``serves``)."""


def serves(capacity_rps: float, rate_rps: float) -> bool:
    """Whether a deployment of SLA capacity ``capacity_rps`` serves ``rate_rps``: its
    capacity is at least the rate, to the bisection's tolerance. The planner confirms its
    plans and the evaluator reports ``below_demand`` by this one test."""
    return capacity_rps >= rate_rps * (1 - CAPACITY_TOLERANCE)


def wider(capacity_rps: float, other_rps: float) -> bool:
    """Whether SLA capacity ``capacity_rps`` is larger than ``other_rps`` by more than the
    capacity search resolves (each may sit up to ``CAPACITY_TOLERANCE`` below its
    deployment's boundary): the one test of "more capacity" wherever capacities are
    ranked (router settings, the tie rule), so equal capacities tie rather than differ by
    the search's rounding."""
    return capacity_rps > other_rps * (1 + 2 * CAPACITY_TOLERANCE)


def widest_router(
    incumbent: float,
    count: int,
    slack: Callable[[int, float], float | None],
    capacity: Callable[[int], float],
    *,
    least: float = 0.0,
) -> tuple[int, float]:
    """Of an incumbent of SLA capacity ``incumbent`` (index -1) and ``count`` candidates
    (0, 1, ...), the one of the largest SLA capacity, counting only candidates within every
    limit at ``least`` req/s; of equal capacities (none ``wider``), the first: the
    incumbent, then the lowest index.
    Returns its index and capacity. The one rule wherever router settings are ranked
    (``_best_routing``, the planner's ``router_settings``).

    ``slack(i, rate)`` is candidate ``i``'s ``_State.excess`` at ``rate`` if within every
    limit there, else None (one state); ``capacity(i)`` its capacity search. A candidate
    not within every limit just past the widest capacity so far cannot be wider (the
    limits grow with the rate but for rare kinks, which this reads as its capacity being
    below), so only those that are get a capacity search, the one with the most slack
    there first: the likeliest widest, which usually leaves none past it. Of the
    candidates in play when the widest was found, those before it that reach its capacity
    take precedence, the first of them."""
    best, best_capacity = -1, incumbent
    left = list(range(count))
    tied: list[int] = []  # in play at the step that found the widest
    while left and math.isfinite(best_capacity):
        floor = max(least, best_capacity * (1 + 2 * CAPACITY_TOLERANCE), FIRST_RATE_RPS)
        scored = [(x, i) for i in left if (x := slack(i, floor)) is not None]
        if not scored:
            break
        passed = [i for _, i in scored]
        i = min(scored)[1]  # the most slack; of equal slack, the first
        left = [j for j in passed if j != i]
        c = capacity(i)
        if wider(c, best_capacity):
            best, best_capacity, tied = i, c, passed
    # equal capacities: the first in order (a candidate before the widest that was in play
    # when it was found may reach its capacity to the search's resolution; an unbounded
    # one is not checked at an infinite rate, its capacity is searched)
    floor = max(least, best_capacity / (1 + 2 * CAPACITY_TOLERANCE))
    for i in sorted(j for j in tied if j < best):
        if math.isinf(floor) or slack(i, floor) is not None:
            c = capacity(i)
            if not wider(best_capacity, c):
                return i, c
    return best, best_capacity


# --- the state at one arrival rate ------------------------------------------------------------
@dataclass(frozen=True)
class TtftTail:
    """The share of requests whose TTFT exceeds a bound, at one state: called with one
    bound (``percentile`` bisects on it), or ``many`` bounds in one pass over the pools."""

    many: Callable[[np.ndarray], list[float]]

    def __call__(self, bound_s: float) -> float:
        return self.many(np.array([bound_s]))[0]


@dataclass
class _State:
    ok: bool
    failures: list[str]
    tail90: float
    tail99: float
    ttft_tail: TtftTail
    tpot_p99_s: float
    step_md_s: float
    pool_util: list[float]
    link_util: dict[tuple[str, str], float]
    md_tokens: float
    rld_tokens: float
    decode_points: dict[int, tuple[int, float]]
    md_hit: float
    """The mean MD hit at this rate."""
    excess: float
    """The largest of every limited figure over its limit (utilization over its cap, the
    share above a TTFT bound over its budget, ...; inf for a limit no rate meets): at most
    1 exactly when ``ok``. The capacity search interpolates on it (``_bisect_capacity``)."""
    breakdown: Callable[[], dict[str, float]]
    """The mean TTFT by segment (``TTFT_SEGMENTS``), computed when asked (``_breakdown``)."""
    said: dict[str, tuple[str, float]]
    """Every limit, failed or not, by what a failure of it begins with (its words before
    the figure): what a failure would say, and its figure (``_Limits.said``)."""


TTFT_SEGMENTS = ("queue", "prefill", "transfer", "relay", "first_token")
"""The segments of a TTFT, in order: the wait for a prefill pass (``queue``), the request's
prefill passes with their company (``prefill``), its KV's way to main decode (``transfer``:
over the WAN, with the first token's hop back, or RDMA inside one datacenter) or to relay
decode (``relay``: RDMA beside prefill), each a mean over every request (0 for one that does
not take it), and the wait for a decode slot with the first decode step (``first_token``).
The simulator reports the same five (``pddplan.simulation.run``)."""


TTFT_FAILURE = "the TTFT P"
"""How a failure of a TTFT tail budget begins (the rest of ``_State.failures`` are other
limits): a robust plan's weighted variants keep those budgets on their mixture only."""


class _Limits:
    """The limits checked at one rate, in the order checked: the failures the report lists
    and every limited figure over its limit (``_State.excess``)."""

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.ratios: list[float] = []
        self.said: dict[str, tuple[str, float]] = {}
        """Every limit, failed or not: its words before the figure -> (what a failure says,
        the figure) (what ``binding_lines`` reads)."""

    def add(self, value: float, limit: float, failure: str) -> None:
        """A limited figure: it fails, as ``failure`` says, where ``value`` exceeds
        ``limit``; its ratio to the limit is kept either way."""
        self.said[failure.partition(" (")[0]] = (failure, value)
        if limit > 0:
            self.ratios.append(value / limit)
        else:
            self.ratios.append(math.inf if value > 0 else 0.0)
        if value > limit:
            self.failures.append(failure)


@dataclass(frozen=True)
class _Shares:
    """How one rate's requests spread: the datacenters of prefill and main decode, and the
    share of the requests each main-decode pool and each datacenter takes."""

    p_dcs: list[str]
    md_dcs: list[str]
    md_share: np.ndarray
    dc_share_p: dict[str, float]
    dc_share_md: dict[str, float]


@dataclass(frozen=True)
class _Loads:
    """One rate's loads, every limit but the TTFT tail's checked (``_loads``): what the
    tail (``_ttft_tail``) and the state (``_state``) are made of. Used once: ``_state``
    adds the TTFT limits to its ``limits``."""

    limits: _Limits
    loads: list[PrefillPoolLoad]
    shares: _Shares
    cache: CacheAt
    classes: tuple[np.ndarray, np.ndarray, np.ndarray]
    """Per class: the shares sent straight to MD, relayed, and singular."""
    link_util: dict[tuple[str, str], float]
    wan: tuple[dict, dict, dict]
    """Per link: the transfer time, its queueing part, and its spread (s^2)."""
    utilization: list[float]
    decode: _Decode


def _state(m: FleetModel, lam: float, routing: Routing, at: _Loads | None = None) -> _State:
    """Every limit of ``m``'s fleet at ``lam`` req/s with ``routing``: the loads (``_loads``,
    or ``at`` where computed already), then the TTFT tail."""
    tally("states")
    at = at or _loads(m, lam, routing)
    limits, loads, shares, decode = at.limits, at.loads, at.shares, at.decode
    ttft_tail = _ttft_tail(m, loads, shares, at.classes, decode, at.wan)
    bounds = (m.s.sla.ttft_p90_s, m.s.sla.ttft_p99_s)
    tails = ttft_tail.many(np.array(bounds))
    for (q, budget), bound, tail in zip(TAIL_BUDGETS, bounds, tails, strict=True):
        limits.add(
            tail,
            budget + 1e-12,
            f"{TTFT_FAILURE}{q * 100:.0f} bound {bound:g} s ({tail:.2%} of requests "
            f"above it, budget {budget:.0%})",
        )
    tail90, tail99 = tails

    def breakdown() -> dict[str, float]:
        return _breakdown(m, loads, shares, at.classes, decode, at.wan[0])

    return _State(
        not limits.failures,
        limits.failures,
        tail90,
        tail99,
        ttft_tail,
        decode.tpot_p99_s,
        decode.step_md_s,
        at.utilization,
        at.link_util,
        decode.md_tokens,
        decode.rld_tokens,
        m.md_points,
        float(m.w @ at.cache.mean_hit),
        max(limits.ratios, default=0.0),
        breakdown,
        limits.said,
    )


def _slack(m: FleetModel, lam: float, routing: Routing) -> float | None:
    """The state's ``excess`` (how near its limits the fleet runs: at most 1) if ``_state``
    would be ``ok``, else None; without the TTFT tail (most of a state's work) where another
    limit already fails: for the callers that need only that."""
    at = _loads(m, lam, routing)
    if at.limits.failures:
        tally("states")
        return None
    st = _state(m, lam, routing, at)
    return st.excess if st.ok else None


def _loads(m: FleetModel, lam: float, routing: Routing) -> _Loads:
    """Every limit of ``m``'s fleet at ``lam`` req/s with ``routing`` but the TTFT tail's,
    stage by stage: the prefill pools' load, the requests' spread over pools and
    datacenters, the WAN links and the transfers, the decode-side cache, relay decode (and
    the passes it stretches where prefill hosts it), main decode and the TPOT gap, the
    utilization caps."""
    w = m.w
    limits = _Limits()
    # prefill pools: each one's load and tail (``PrefillPoolLoad``, as the planner counts)
    loads = [
        PrefillPoolLoad(figures, passes, w, lam * share / pool.instances, pool.instances,
                        inst.attention_groups)
        for (pool, inst), figures, passes, share in zip(
            m.roles["prefill"], m.p_figures, m.p_passes, m.p_share, strict=True
        )
    ]  # fmt: skip
    shares = _shares(m, limits)
    cache = m.cache_at(lam, shares.dc_share_md)
    direct, relay, singular = m.pipelines(routing, cache.mean_hit)  # shares of each class
    link_util = _link_utilization(m, lam, shares, cache)
    # the requests sent straight to MD are the smaller payloads of their class: their
    # transfer at their own mean payload. The relayed ones' (what RLD decodes during) at
    # the class's mean, as the planner's counts take it: the planner does not count RLD
    # and the handoffs per threshold (RLD's busy share moved 14.0% -> 14.1% on
    # pdd-h100-h200 at the relayed part's own payloads; 13.9% simulated)
    direct_scale, direct_sd = m.direct_payloads(routing, cache.mean_hit)
    # rows: the direct requests' payloads, the class's mean (the relayed ones'), and the
    # direct ones one standard deviation up: their payloads spread within their class,
    # and so do their transfers, a normal term of the tail (variance, s^2)
    scales = np.stack([direct_scale, np.ones_like(direct_scale), direct_scale + direct_sd])
    times, queueings = _transfers(m, shares, cache, link_util, scales)
    wan_time = {k: t[0] for k, t in times.items()}
    wan_queueing = {k: q[0] for k, q in queueings.items()}
    relay_wan = {k: t[1] for k, t in times.items()}
    one_sd_up = {k: t[2] for k, t in times.items()}
    with np.errstate(invalid="ignore"):  # a saturated link: inf - inf
        spread = {
            k: np.nan_to_num((one_sd_up[k] - t) ** 2, posinf=np.inf) for k, t in wan_time.items()
        }
    _cache_holds_sessions(m, lam, shares, limits)
    for (a, b), u in link_util.items():
        limits.add(
            u, m.link_max, f"the {m.link_max:.0%} utilization cap of link {a}->{b} (busy {u:.1%})"
        )
    mean_wan = sum(
        shares.dc_share_p[a] * shares.dc_share_md[b] * relay_wan[(a, b)]
        for a in shares.p_dcs
        for b in shares.md_dcs
    )
    p_util = [load.utilization for load in loads]
    pace, r_util, eager = _relay_decode(m, lam, relay, singular, mean_wan, p_util, limits)
    # prefill instances that host relay decode: its tokens take a share of every pass
    for i, (j, point) in m.hosts.items():
        loads[j] = loads[j].with_stretch(point.stretch(pace[i][1]))
        p_util[j] = loads[j].utilization
    decode = _main_decode(m, lam, shares, direct, relay, singular, eager, pace, p_util, limits)
    for (pool, _), u in zip(
        m.roles["prefill"] + m.roles["relay_decode"] + m.roles["main_decode"],
        p_util + r_util + decode.m_util,
        strict=True,
    ):
        limits.add(
            u,
            m.rho_max,
            f"the {m.rho_max:.0%} utilization cap of {pool.role} {pool.chip} in "
            f"{pool.datacenter} (busy {u:.1%})",
        )
    return _Loads(
        limits,
        loads,
        shares,
        cache,
        (direct, relay, singular),
        link_util,
        (wan_time, wan_queueing, spread),
        p_util + r_util + decode.m_util,
        decode,
    )


def _shares(m: FleetModel, limits: _Limits) -> _Shares:
    """Prefill splits the requests over its pools by capacity (``FleetModel.p_share``), main
    decode by the requests its pools hold at their operating points; with a main decode
    that meets TPOT at no batch, evenly (and a failure)."""
    fleet, pools_m, pools_p = m.fleet, m.roles["main_decode"], m.roles["prefill"]
    md_caps = np.array(
        [
            pool.instances * b / t if b else 0.0
            for (pool, _), (b, t) in zip(pools_m, m.md_points.values(), strict=True)
        ]
    )
    if md_caps.sum() == 0:
        reason = "main decode cannot meet TPOT at any batch"
        if fleet.md_cache_gb_per_gpu:
            reason += (
                f" (its KV memory after weights and the {fleet.md_cache_gb_per_gpu:g} GB/GPU "
                "decode-side cache holds no request)"
            )
        limits.add(math.inf, 1.0, reason)
        md_caps = np.ones(len(pools_m))
    md_share = md_caps / md_caps.sum()
    md_dcs = sorted({p.datacenter for p, _ in pools_m})
    p_dcs = sorted({p.datacenter for p, _ in pools_p})
    dc_share_md = {
        dc: sum(sh for (p, _), sh in zip(pools_m, md_share, strict=True) if p.datacenter == dc)
        for dc in md_dcs
    }
    dc_share_p = {
        dc: sum(sh for (p, _), sh in zip(pools_p, m.p_share, strict=True) if p.datacenter == dc)
        for dc in p_dcs
    }
    return _Shares(p_dcs, md_dcs, md_share, dc_share_p, dc_share_md)


def _link_utilization(
    m: FleetModel, lam: float, shares: _Shares, cache: CacheAt
) -> dict[tuple[str, str], float]:
    """WAN links: flows from every P datacenter to every MD datacenter. Every request's
    payload counts, the singular path's too: its transfer starts before RLD finishes it."""
    link_util: dict[tuple[str, str], float] = {}
    for pdc in shares.p_dcs:
        for mdc in shares.md_dcs:
            if pdc != mdc:
                link, choice = _link(m.s, m.fleet, pdc, mdc)
                goodput = link_bytes_per_s(choice.gbps, link.tcp_efficiency)
                flow = (
                    lam
                    * shares.dc_share_p[pdc]
                    * shares.dc_share_md[mdc]
                    * float(m.w @ cache.payloads[mdc])
                )
                link_util[(pdc, mdc)] = flow / goodput  # full duplex: one direction
    return link_util


def _transfers(
    m: FleetModel,
    shares: _Shares,
    cache: CacheAt,
    link_util: dict[tuple[str, str], float],
    scale: np.ndarray,
) -> tuple[dict, dict]:
    """(p_dc, md_dc) -> per class, the seconds until its KV is complete at MD, and the part
    of them other flows add (mean, random), for payloads ``scale`` times the class's
    mean (``scale``: classes last; a row per set of payloads)."""
    pools_p = m.roles["prefill"]
    times, queueings = {}, {}
    for pdc in shares.p_dcs:
        for mdc in shares.md_dcs:
            payload = cache.payloads[mdc] * scale
            if pdc == mdc:  # inside one datacenter: RDMA at the sending chip's NIC
                nic = next(i for p, i in pools_p if p.datacenter == pdc).chip.nic_bytes_per_s
                sent = rdma_transfer_s(payload, nic_bytes_per_s=nic)
                queueing = np.zeros_like(sent)
            else:
                link, choice = _link(m.s, m.fleet, pdc, mdc)
                sent, queueing = wan_times(
                    payload,
                    path=TcpPath.of(link),
                    goodput_bytes_per_s=link_bytes_per_s(choice.gbps, link.tcp_efficiency),
                    utilization=link_util[(pdc, mdc)],
                )
            times[(pdc, mdc)] = _with_fetch(sent, cache.fetch[mdc])
            queueings[(pdc, mdc)] = queueing
    return times, queueings


def _cache_holds_sessions(m: FleetModel, lam: float, shares: _Shares, limits: _Limits) -> None:
    """With a decode-side cache and a turn interval: the cache of each MD datacenter holds
    the contexts of the sessions open there."""
    fleet, interval = m.fleet, m.s.workload.turn_interval_s
    if not fleet.md_cache_gb_per_gpu or interval is None:
        return
    context = float(m.w @ m.rdma_bytes)
    for b in shares.md_dcs:
        gpus = sum(
            p.instances * p.gpus_per_instance
            for p, _ in m.roles["main_decode"]
            if p.datacenter == b
        )
        held = gpus * fleet.md_cache_gb_per_gpu * units.GB
        need = session_working_set_bytes(lam * shares.dc_share_md[b], interval, context)
        limits.add(
            need,
            held * (1 + 1e-9),
            f"the decode-side cache size in {b} (it holds {held / units.GB:,.0f} GB; "
            f"the open sessions' contexts need {need / units.GB:,.0f} GB)",
        )


def _relay_decode(
    m: FleetModel,
    lam: float,
    relay: np.ndarray,
    singular: np.ndarray,
    mean_wan: float,
    p_util: list[float],
    limits: _Limits,
) -> tuple[list[tuple[float, float]], list[float], np.ndarray]:
    """RLD: eager tokens while the WAN transfer runs, at RLD's own step (which its batch
    sets), or the whole output on the singular path. Per RLD pool its (step, batch), its
    utilization, and per class the eager tokens a relayed request brings to MD."""
    pools_r = m.roles["relay_decode"]
    eager = np.zeros_like(m.out)
    if not bool((relay + singular).any()):
        return [(0.0, 0.0) for _ in pools_r], [0.0 for _ in pools_r], eager
    if not pools_r:
        raise InputError(
            f"fleet {m.fleet.name}: routing relays requests but there is no relay_decode pool"
        )
    if m.rld_share.sum() == 0:
        limits.add(math.inf, 1.0, "relay decode cannot meet TPOT at any batch")
    pace = m.relay_pace(
        lam * float(m.w @ (relay * np.where(relay > 0, mean_wan, 0.0))),  # not inf x 0
        lam * float(m.w @ (singular * m.out)),
        p_util,
    )
    r_util: list[float] = []
    for (step, batch), (largest, _), share in zip(pace, m.rld_points, m.rld_share, strict=True):
        eager += share * eager_tokens(m.out, m.out_points, np.ceil(mean_wan / step))
        r_util.append(batch / largest if largest else (math.inf if batch > 0 else 0.0))
    return pace, r_util, eager


@dataclass(frozen=True)
class _Decode:
    """Main decode at one rate: per pool its utilization and its admission queue, the
    TPOT gap, the per-request tokens each decode role takes."""

    m_util: list[float]
    admissions: list[tuple[float, str, np.ndarray, Admission | None]]
    """Per MD pool: its share of its datacenter's requests, its datacenter, its first
    step (rows: direct, relayed) and its admission queue."""
    tpot_p99_s: float
    step_md_s: float
    md_tokens: float
    rld_tokens: float


def _main_decode(
    m: FleetModel,
    lam: float,
    shares: _Shares,
    direct: np.ndarray,
    relay: np.ndarray,
    singular: np.ndarray,
    eager: np.ndarray,
    pace: list[tuple[float, float]],
    p_util: list[float],
    limits: _Limits,
) -> _Decode:
    """Per request of each class, over its shares: RLD's tokens, then MD's and the extend
    steps that stall it (a relayed request hands its eager tokens over; singular: never);
    MD's utilization, the P99 inter-token gap (stalls and relay decode's own steps
    included) and MD's admission queue."""
    w, pools_m, md_points = m.w, m.roles["main_decode"], m.md_points
    rld_tokens_per_req = singular * m.out + relay * eager
    md_tokens_per_req = direct * m.out + relay * np.maximum(m.out - eager, 0.0)
    above = m.fleet.handoff.catch_up_above_tokens
    eager = np.where(relay > 0, eager, 0.0)
    catch_up = eager > above if above is not None else np.zeros_like(eager, dtype=bool)
    chunk = m.fleet.handoff.chunk_tokens
    stalls = relay * np.where(eager > 0, np.where(catch_up, np.ceil(eager / chunk), 1.0), 0.0)
    m_util, stall_rate_steps, stall_sizes = [], [], []
    for i, (pool, _inst) in enumerate(pools_m):
        batch, step = md_points[i]
        lam_i = lam * shares.md_share[i]
        token_time = lam_i * float(w @ md_tokens_per_req) * step / max(batch, 1)
        stall_s = m.stall_seconds(i, eager, catch_up)
        stall_time = lam_i * float(w @ (stalls * stall_s))
        m_util.append((token_time + stall_time) / pool.instances)
        # fraction of this pool's steps that carry a stall, by stall size
        stall_rate_steps.append(lam_i / pool.instances * w * stalls * step)
        stall_sizes.append(stall_s)
    # TPOT: the P99 inter-token gap, stalls included
    step_md = max(t for _, t in md_points.values())
    tpot_p99 = p99_gap(step_md, stall_rate_steps, stall_sizes, shares.md_share)
    # relay decode's steps are gaps too (on prefill instances: a mixed pass while prefill
    # is busy): the P99 is at least the longest of them that more than 1% of all output
    # tokens wait
    rld_share_of_tokens = float(w @ rld_tokens_per_req) / max(float(w @ m.out), 1e-12)
    rld_gaps = []
    for i, ((rld_step, rld_batch), share) in enumerate(zip(pace, m.rld_share, strict=True)):
        if i in m.hosts:
            j, point = m.hosts[i]
            rld_gaps += [(g, share * f) for g, f in point.gaps(rld_batch, min(p_util[j], 1.0))]
        elif rld_batch > 0:
            rld_gaps.append((rld_step, share))
    waited = 0.0
    for gap, share in sorted(rld_gaps, reverse=True):
        waited += share * rld_share_of_tokens
        if waited > 0.01:
            tpot_p99 = max(tpot_p99, gap)
            break
    limits.add(
        tpot_p99,
        m.tpot_s * (1 + 1e-9),
        f"the TPOT bound {m.s.sla.tpot_ms:g} ms (P99 inter-token gap {tpot_p99 / units.MS:.1f} ms)",
    )
    # MD's admission: a request that goes straight to MD waits for a decode slot there
    paths = [direct] if not (relay + singular).any() else [direct, 1.0 - direct]
    admits = np.arange(len(paths))[:, None] == 0  # only the direct row waits at MD
    # the first token: MD's first step (``Problem.first_step_s``) on the direct row, relay
    # decode's step, at most the TPOT bound, on the relayed one
    firsts = [np.array([[f], [m.tpot_s]][: len(paths)]) for f in m.md_first]
    admissions = []
    for i, (pool, _) in enumerate(pools_m):
        batch, step = md_points[i]
        # a slot's time per request at the operating step: a class's direct requests hold
        # it for their whole output, its relayed ones for what is left after RLD's
        whole, rest_of = m.out * step, np.maximum(m.out - eager, 0.0) * step
        mean_hold = float(w @ (direct * whole + relay * rest_of)) / float(w.sum())
        second = float(w @ (direct * whole**2 + relay * rest_of**2)) / float(w.sum())
        cv2 = second / mean_hold**2 - 1.0 if mean_hold else 0.0
        admissions.append(
            (
                shares.md_share[i] / max(shares.dc_share_md[pool.datacenter], 1e-300),
                pool.datacenter,
                firsts[i],
                md_admission(
                    batch=batch,
                    instances=pool.instances,
                    steps=m.md_steps[i],
                    utilization=m_util[i],
                    mean_service_s=mean_hold,
                    service_cv2=cv2,
                    applies=admits,
                ),
            )
        )
    return _Decode(
        m_util,
        admissions,
        tpot_p99,
        step_md,
        float(w @ md_tokens_per_req),
        float(w @ rld_tokens_per_req),
    )


def _ttft_tail(
    m: FleetModel,
    loads: list[PrefillPoolLoad],
    shares: _Shares,
    classes: tuple[np.ndarray, np.ndarray, np.ndarray],
    decode: _Decode,
    wan: tuple[dict, dict, dict],
) -> TtftTail:
    """The share of requests whose TTFT exceeds T: per class, a mixture over P pools (wait
    + prefill) and decode datacenters. Rows: a request sent straight to MD (its WAN
    transfer, queueing and MD's admission on the way to its first token), and, where any
    class relays, one sent to RLD (RDMA)."""
    direct, relay, singular = classes
    wan_time, wan_queueing, spread = wan
    pools_p, w = m.roles["prefill"], m.w
    rdma = rdma_transfer_s(m.rdma_bytes, nic_bytes_per_s=pools_p[0][1].chip.nic_bytes_per_s)
    paths = [direct] if not (relay + singular).any() else [direct, 1.0 - direct]
    rest, extra, spread_rows = {}, {}, {}
    for a in shares.p_dcs:
        for b in shares.md_dcs:
            queueing = wan_queueing[(a, b)]
            with np.errstate(invalid="ignore"):  # a saturated link: inf - inf
                fixed = np.where(np.isfinite(queueing), wan_time[(a, b)] - queueing, np.inf)
            rest[(a, b)] = np.stack([fixed, rdma][: len(paths)])
            extra[(a, b)] = np.stack([queueing, np.zeros_like(queueing)][: len(paths)])
            spread_rows[(a, b)] = np.stack([spread[(a, b)], np.zeros_like(queueing)][: len(paths)])

    def many(bounds_s: np.ndarray) -> list[float]:
        """The share above each of ``bounds_s``, every bound in one tail per pool pair."""
        at = np.asarray(bounds_s, dtype=float).reshape(-1, 1, 1)
        total = [0.0] * len(at)
        for (pool, _), load, share in zip(pools_p, loads, m.p_share, strict=True):
            a = pool.datacenter
            for md_part, b, first, admission in decode.admissions:
                tail = load.tail(
                    at - rest[(a, b)] - first,
                    extra_mean_s=extra[(a, b)],
                    extra_var_s2=spread_rows[(a, b)],
                    admission=admission,
                )  # bounds x rows x classes
                for k, rows in enumerate(tail):
                    per_class = sum(p * t for p, t in zip(paths, rows, strict=True))
                    total[k] += share * shares.dc_share_md[b] * md_part * float(w @ per_class)
        return total

    return TtftTail(many)


def _breakdown(
    m: FleetModel,
    loads: list[PrefillPoolLoad],
    shares: _Shares,
    classes: tuple[np.ndarray, np.ndarray, np.ndarray],
    decode: _Decode,
    wan_time: dict[tuple[str, str], np.ndarray],
) -> dict[str, float]:
    """The mean of each TTFT segment (``TTFT_SEGMENTS``) over the request mix, with the
    terms and weights ``_ttft_tail`` sums: per prefill pool its wait and passes
    (``PrefillPoolLoad.mean_parts``), per decode datacenter and main-decode pool the
    transfer (a direct request's WAN time, queueing included; a relayed one's RDMA to relay
    decode) and the first token (a direct request's admission wait and MD's first step; a
    relayed one's relay-decode step, at most the TPOT bound). Their sum is the mean TTFT.
    A segment whose queue grows without bound at this rate (a pool or link past saturation)
    is infinite."""
    direct, relay, singular = classes
    pools_p, w = m.roles["prefill"], m.w / float(m.w.sum())
    relayed = 1.0 - direct if (relay + singular).any() else np.zeros_like(direct)
    rdma = rdma_transfer_s(m.rdma_bytes, nic_bytes_per_s=pools_p[0][1].chip.nic_bytes_per_s)
    out = dict.fromkeys(TTFT_SEGMENTS, 0.0)

    def add(key: str, weight: float, values: np.ndarray | float) -> None:
        """``weight`` x the request-weighted mean of ``values`` into ``out[key]``; a part no
        request takes (weight 0, or a share 0) adds nothing, even where it is infinite."""
        if weight <= 0:
            return
        v = np.broadcast_to(np.asarray(values, dtype=float), w.shape)
        taken = w > 0
        if np.isinf(v[taken]).any():
            out[key] = math.inf
        else:
            out[key] += weight * float(w[taken] @ v[taken])

    for (pool, _), load, share in zip(pools_p, loads, m.p_share, strict=True):
        wait, passes = load.mean_parts()
        add("queue", share, wait)
        add("prefill", share, passes)
        for md_part, b, first, admission in decode.admissions:
            x = share * shares.dc_share_md[b] * md_part
            admit = 0.0
            if admission is not None and admission.wait_prob > 0:
                admit = admission.wait_prob * admission.mean_s
            on_relay = first[1, 0] if len(first) > 1 else 0.0
            with np.errstate(invalid="ignore"):  # 0 x inf where a path takes no request
                to_md = np.where(direct > 0, direct * wan_time[(pool.datacenter, b)], 0.0)
                firsts = np.where(direct > 0, direct * (first[0, 0] + admit), 0.0)
                firsts = firsts + np.where(relayed > 0, relayed * on_relay, 0.0)
            add("transfer", x, to_md)
            add("relay", x, relayed * rdma)
            add("first_token", x, firsts)
    return out


def _with_fetch(sent: np.ndarray, fetch: list[tuple[float, np.ndarray]]) -> np.ndarray:
    """The KV complete at MD: the later of the suffix's transfer and the hit's fetch from
    the tier it is in, over the tiers by their shares."""
    return sum((share * np.maximum(sent, f) for share, f in fetch), np.zeros_like(sent))


def _link(s: Scenario, fleet: Fleet, a: str, b: str):
    pair = {a, b}
    link = next((x for x in s.links if set(x.between) == pair), None)
    choice = next((x for x in fleet.links if set(x.between) == pair), None)
    if link is None:
        raise InputError(
            f"fleet {fleet.name}: datacenters {a} and {b} have no link in the scenario"
        )
    if choice is None:
        raise InputError(f"fleet {fleet.name}: links: no bandwidth chosen between {a} and {b}")
    return link, choice


# --- the public entry points ------------------------------------------------------------------
class Evaluator:
    """One fleet on one problem: its router's rule (the fleet's, or the relay threshold
    that serves the most), its SLA capacity, and its report at any demand, each computed
    once."""

    def __init__(self, problem: Problem, fleet: Fleet) -> None:
        self.problem, self.fleet = problem, fleet

    @cached_property
    def model(self) -> FleetModel:
        """The fleet's rate-independent figures, built on first use: a capacity or a served
        rate the problem keeps already (``_capacity``, ``meets``) needs none (the router's
        setting of a planned fleet is its own)."""
        return FleetModel(self.problem, self.fleet)

    @cached_property
    def routing(self) -> Routing:
        return self.fleet.routing or _best_routing(self.model)

    @cached_property
    def capacity(self) -> float:
        """The SLA capacity: the largest arrival rate within every limit (req/s)."""
        return _capacity(self.problem, self.fleet, self.routing, lambda: self.model)

    def state(self, rate_rps: float) -> _State:
        """Every limit at ``rate_rps`` with the fleet's router: whether all hold, those that
        fail, and the shares of requests above the TTFT P90 and P99 bounds."""
        return _state(self.model, rate_rps, self.routing)

    def meets(self, rate_rps: float) -> bool:
        """Whether the fleet serves ``rate_rps`` within every limit (``slack``)."""
        return self.slack(rate_rps) is not None

    def slack(self, rate_rps: float) -> float | None:
        """How near its limits the fleet runs at ``rate_rps`` (``_State.excess``, at most 1)
        if within every limit there, else None; kept on the problem beside the capacities
        (``_capacity``): it depends on no price either, and the planner asks it of the same
        deployments at the same rates at every price of a sweep."""
        routing = self.routing
        key = ("slack", _fleet_key(self.fleet), routing.model_dump_json(), rate_rps)
        return self.problem.memo("capacities", key, lambda: _slack(self.model, rate_rps, routing))

    def report(self, demand_rps: float | None = None) -> Evaluation:
        """Everything ``evaluate`` reports, at ``demand_rps`` (default: the scenario's)."""
        m, routing = self.model, self.routing
        scenario = self.problem.scenario
        demand = demand_rps if demand_rps is not None else (scenario.workload.arrival_rps or 0.0)
        capacity = self.capacity
        at_demand = _state(m, demand, routing)
        notes: list[str] = []
        if capacity == 0.0:
            status = EvalStatus.SLA_INFEASIBLE
            notes += _state(m, FIRST_RATE_RPS, routing).failures
        elif not serves(capacity, demand):
            status = EvalStatus.BELOW_DEMAND
        else:
            status = EvalStatus.OK
        at_capacity = _state(m, capacity, routing) if 0 < capacity < math.inf else None
        if capacity > 0:
            above = _state(m, capacity * (1 + 1e-6) + 1e-12, routing)
            binding = binding_lines(above, at_capacity)
        else:
            binding = list(notes)
        planned = demand * (1 + scenario.headroom)
        at_planned = _state(m, planned, routing) if planned > demand else None
        return _report(
            m,
            self.fleet,
            routing,
            (demand, capacity, planned),
            (at_demand, at_capacity, at_planned),
            status,
            binding,
            notes,
        )


def evaluate(problem: Problem, fleet: Fleet, *, demand_rps: float | None = None) -> Evaluation:
    """Evaluate ``fleet`` on ``problem``'s workload and SLA (see the module docstring), at
    ``demand_rps`` req/s (default: the scenario's ``arrival_rps``)."""
    return Evaluator(problem, fleet).report(demand_rps)


def ttft_p99(problem: Problem, fleet: Fleet, rate_rps: float) -> float:
    """Only the P99 TTFT of ``fleet`` at ``rate_rps`` (what ``evaluate`` reports as
    ``ttft_s["p99"]`` at that demand), without the capacity search."""
    ev = Evaluator(problem, fleet)
    st = _state(ev.model, rate_rps, ev.routing)
    hi = problem.scenario.sla.ttft_p99_s
    return percentile(st.ttft_tail, 0.99, hi, at_most=MAX_TTFT_S, steps=BISECT_STEPS)


def meets_sla(problem: Problem, fleet: Fleet, rate_rps: float) -> bool:
    """Whether ``fleet`` (with its routing, or the best threshold) serves ``rate_rps``
    within every limit."""
    return Evaluator(problem, fleet).meets(rate_rps)


def sla_capacity(problem: Problem, fleet: Fleet) -> float:
    """Only the SLA capacity of ``fleet`` (what ``evaluate`` reports as ``sla_capacity_rps``)."""
    return Evaluator(problem, fleet).capacity


def capacity_if_serving(problem: Problem, fleet: Fleet, rate_rps: float) -> float | None:
    """``fleet``'s SLA capacity if it is within every limit at ``rate_rps``, else None: one
    state decides whether the capacity search runs, for a candidate that matters only if it
    reaches that rate."""
    ev = Evaluator(problem, fleet)
    return ev.capacity if ev.meets(rate_rps) else None


def cost_and_capacity(problem: Problem, fleet: Fleet) -> tuple[float | None, float]:
    """Only the cost per hour and the SLA capacity of ``fleet`` (what ``evaluate`` reports as
    ``cost_per_hour_usd`` and ``sla_capacity_rps``), without the TTFT percentiles and the
    binding limits, which take longer than both."""
    ev = Evaluator(problem, fleet)
    demand = problem.scenario.workload.arrival_rps or 0.0
    return _priced(ev.model, fleet, _state(ev.model, demand, ev.routing)).total, ev.capacity


def _capacity(
    problem: Problem, fleet: Fleet, routing: Routing, model: Callable[[], FleetModel]
) -> float:
    """The largest arrival rate whose state is within every limit (0 if none), kept on the
    problem (``Problem.memo``): it depends on no price, so a sweep over prices bisects
    each fleet's once (``model`` gives the fleet's figures where it is not kept)."""
    key = (_fleet_key(fleet), routing.model_dump_json())
    return problem.memo("capacities", key, lambda: _bisect_capacity(model(), routing))


def _fleet_key(fleet: Fleet) -> str:
    """A fleet as a key of the problem's kept results: everything but its name."""
    return fleet.model_dump_json(exclude={"name"})


def _bisect_capacity(m: FleetModel, routing: Routing) -> float:
    """``_capacity``: doubling from 1 req/s until a rate is not within every limit, then the
    bracket narrowed to ``CAPACITY_TOLERANCE``: by regula falsi on the log of the state's
    ``excess`` once the high end is within ``INTERPOLATE_BELOW`` of its limit (nearer the
    capacity a state's excess is nearly linear in the rate: utilization is, the log of an
    exponential tail is; past it, a tail saturates at 1), by bisection before, and for
    good once ``SLOW_STEPS`` interpolated steps in a row have not halved the bracket (the
    capacity is where the excess jumps: a limit that changes form, such as relay decode's
    longest gap on the prefill passes it shares). The Anderson-Bjorck rule scales the
    value of an end kept twice, so both ends close in; each step stays half a tolerance
    inside the bracket, and an interpolated one aims half a tolerance past its estimate,
    away from the end that moved last (below it after a failing rate, above it after one
    within every limit): an estimate that is right then closes the bracket, where aiming
    below after the low end moved crept up on the capacity until ``SLOW_STEPS`` sent the
    search to bisection (27-28 states on three of `pdd-paper-fleets`' searches, 12-13 now).
    The low end is always a rate within every limit and the high end one that is not, so
    the answer is a bisection's: in about half its states where the excess is smooth (11-13
    against 26 on half of the README solve's searches), in at most ``SLOW_STEPS`` more
    where it jumps (``tests/test_evaluate.py`` counts them). The steps depend on nothing
    but the fleet, so one deployment has one capacity wherever it is asked for (a search's
    hint would move the result within the tolerance, and a table would print two figures
    for one fleet)."""
    tally("capacity_searches")
    lo, hi = 0.0, 1.0
    first = _state(m, FIRST_RATE_RPS, routing)
    if not first.ok:
        return 0.0
    at_lo = first
    while (at_hi := _state(m, hi, routing)).ok:
        lo, hi, at_lo = hi, 2 * hi, at_hi
        if hi > MAX_RATE_RPS:
            return math.inf
    f_lo, f_hi, over = _log_excess(at_lo), _log_excess(at_hi), at_hi.excess
    kept = 0  # +1: the low end moved last, -1: the high end
    slow = 0  # interpolated steps in a row that did not halve the bracket
    for _ in range(BISECT_STEPS):
        width = hi - lo
        if width <= CAPACITY_TOLERANCE * max(hi, 1e-9):
            break
        interpolate = (
            slow < SLOW_STEPS and over <= INTERPOLATE_BELOW and math.isfinite(f_lo) and f_hi > f_lo
        )
        # interpolated: aimed half a tolerance past the estimated capacity, away from the
        # end that moved last, so that an estimate that is right ends the search on this
        # state (the ends within the tolerance) instead of creeping onto it from one side
        inset = min(0.5 * CAPACITY_TOLERANCE * hi, width / 4)
        aim = inset if kept == 1 else -inset
        x = lo - f_lo * width / (f_hi - f_lo) + aim if interpolate else lo + width / 2
        x = min(max(x, lo + inset), hi - inset)
        st = _state(m, x, routing)
        f = _log_excess(st)
        if st.ok:
            if kept == 1:  # Anderson-Bjorck: the high end's value scaled down
                scale = 1 - f / f_lo if f_lo else 0.5
                f_hi *= scale if scale > 0 else 0.5
            lo, f_lo, kept = x, f, 1
        else:
            if kept == -1:
                scale = 1 - f / f_hi if f_hi else 0.5
                f_lo *= scale if scale > 0 else 0.5
            hi, f_hi, over, kept = x, f, st.excess, -1
        if interpolate:
            slow = slow + 1 if hi - lo > width / 2 else 0
    return lo


def binding_lines(above: _State, at_capacity: _State | None) -> list[str]:
    """The limits that fail just past the SLA capacity (``above``), each with its figure
    there; where the figure at the capacity itself differs by more than ``JUMP`` (a limit
    that jumps, such as the P99 gap when relay decode's step starts to count), both: ``the
    TPOT bound 50 ms (P99 inter-token gap 49.8 ms at the capacity, 150.2 ms just above
    it)``."""
    out = []
    for failure in above.failures:
        head, _, figure = failure.partition(" (")
        there = at_capacity.said.get(head) if at_capacity is not None else None
        now = above.said.get(head, (failure, math.nan))[1]
        if there is None or not abs(now - there[1]) > JUMP * max(abs(there[1]), 1e-12):
            out.append(failure)  # the same figure on both sides
            continue
        at = there[0].partition(" (")[2].removesuffix(")")
        number = _NUMBER.search(at)
        words = at[: number.start()] if number else ""
        shown = figure.removesuffix(")").removeprefix(words) if words.strip() else figure
        out.append(f"{head} ({at} at the capacity, {shown.removesuffix(')')} just above it)")
    return out


JUMP = 0.05
"""A binding limit's figure that moves more than this share between the SLA capacity and
just above it is shown at both (``binding_lines``)."""


_NUMBER = re.compile(r"(?<![A-Za-z\d.])-?\d[\d,]*\.?\d*")
"""A number standing alone (not the 99 of ``P99``): where a figure's words end."""


def _log_excess(st: _State) -> float:
    """The log of a state's ``excess`` (-inf for none: a state with no limit in play)."""
    return math.log(st.excess) if st.excess > 0 else -math.inf


def _best_routing(m: FleetModel) -> Routing:
    """The relay threshold (on WAN payload) that gives the largest SLA capacity; ties (none
    ``wider``) go to the threshold that relays the fewest requests (``widest_router``).
    Candidates: relay nothing, then each class's payload as the cut (classes above it
    relay), down to 0 (relay everything)."""
    if not m.roles["relay_decode"]:
        return Routing()
    payloads_mb = sorted({float(x) for x in m.payload / 1e6}, reverse=True)
    routings = [Routing(relay_above_mb=cut) for cut in [None, *payloads_mb, 0.0]]

    def capacity(i: int) -> float:
        return _capacity(m.problem, m.fleet, routings[i], lambda: m)

    def slack(i: int, rate: float) -> float | None:
        return _slack(m, rate, routings[i])

    i, _ = widest_router(
        capacity(0), len(routings) - 1, lambda i, r: slack(i + 1, r), lambda i: capacity(i + 1)
    )
    return routings[i + 1]


def _priced(m: FleetModel, fleet: Fleet, st: _State):
    """The fleet's cost, its links' egress billed on their flows in state ``st``."""
    flows = {}
    for choice in fleet.links:
        a, b = choice.between
        link, _ = _link(m.s, fleet, a, b)
        util = max(st.link_util.get((a, b), 0.0), st.link_util.get((b, a), 0.0))
        flows[frozenset(choice.between)] = util * link_bytes_per_s(choice.gbps, link.tcp_efficiency)
    return fleet_cost(m.problem, fleet, flows)


def _report(
    m: FleetModel,
    fleet: Fleet,
    routing: Routing,
    rates: tuple[float, float, float],
    states: tuple[_State, _State | None, _State | None],
    status: str,
    binding: list[str],
    notes: list[str],
) -> Evaluation:
    """The evaluation at (demand, SLA capacity, planned load) from the states there."""
    s, hw = m.s, m.hw
    demand, capacity, planned = rates
    st, at_capacity, at_planned = states
    pools: list[PoolResult] = []
    priced = _priced(m, fleet, st)
    pool_costs = {id(p): c for p, c in zip(fleet.pools, priced.pools, strict=True)}
    order = m.roles["prefill"] + m.roles["relay_decode"] + m.roles["main_decode"]
    hosted = {id(m.roles["relay_decode"][i][0]) for i in m.hosts}
    problem = m.problem
    for pool, inst in order:
        lay = inst.layout
        # a hosted relay decode runs on its host's prefill instance: the prefill's engine
        role = "prefill" if id(pool) in hosted else pool.role
        launch, engine = problem.engine_for(role).launch, problem.engine_for(role).label
        hosting = pool.hosts_relay_decode
        why = [
            RELAY_ON_PREFILL
            if hosting
            and not all(
                problem.engine_for(r).launch.relay_decode_on_prefill
                for r in ("prefill", "relay_decode")
            )
            else None,
            RELAY_ON_OTHER_ENGINE
            if hosting and problem.engine_for("relay_decode").id != problem.engine_for(role).id
            else None,
            launch.context_parallel(m.problem.model.attention, lay.gpus) if lay.cp > 1 else None,
            launch.attention_groups(lay.gpus, lay.attn_tp) if lay.ep > 1 else None,
        ]
        notes += [
            f"{engine} cannot launch {w}: {lay.label} on {pool.chip}" for w in why if w is not None
        ]
        if id(pool) in hosted:
            continue
        unit = hw.chips[pool.chip].purchase_unit_gpus
        if (pool.gpus_per_instance * pool.instances) % unit:
            notes.append(
                f"{pool.role} uses {pool.gpus_per_instance * pool.instances} {pool.chip}, "
                f"not a multiple of its purchase unit ({unit} GPUs)"
            )
    busy_at_capacity = at_capacity.pool_util if at_capacity is not None else [None] * len(order)
    for i, ((pool, inst), util, full) in enumerate(
        zip(order, st.pool_util, busy_at_capacity, strict=True)
    ):
        on_host = id(pool) in hosted  # its GPUs and their cost are the prefill pool's
        gpus = 0 if on_host else pool.instances * pool.gpus_per_instance
        pool_cost = 0.0 if on_host else pool_costs[id(pool)]
        md_index = i - len(m.roles["prefill"]) - len(m.roles["relay_decode"])
        batch, step = (
            st.decode_points.get(md_index, (None, None)) if md_index >= 0 else (None, None)
        )
        pools.append(
            PoolResult(
                pool.datacenter,
                pool.role,
                pool.chip,
                f"on prefill ({inst.layout.label})" if on_host else inst.layout.label,
                pool.gpus_per_instance,
                pool.instances,
                gpus,
                pool_cost,
                util,
                batch,
                step / units.MS if step else None,
                full,
            )
        )
    links = []
    for choice, link_cost in zip(fleet.links, priced.links, strict=True):
        a, b = choice.between
        util = max(st.link_util.get((a, b), 0.0), st.link_util.get((b, a), 0.0))
        full = None
        if at_capacity is not None:
            full = max(
                at_capacity.link_util.get((a, b), 0.0), at_capacity.link_util.get((b, a), 0.0)
            )
        links.append(LinkResult((a, b), choice.gbps, util, link_cost, full))
    if priced.missing:
        notes.append(
            f"no price for {', '.join(priced.missing)}: set prices_usd_per_gpu_hour (rent) "
            "or gpu_purchase (buy) in the scenario"
        )
    cost_value = priced.total
    direct, relay, singular = m.pipelines(routing)
    w, out = m.w, m.out
    out_tokens = float(w @ out)
    pipelines = {
        name: {"requests": float(w @ mask), "output_tokens": float(w @ (mask * out)) / out_tokens}
        for name, mask in (("p_md", direct), ("p_rld_md", relay), ("singular", singular))
    }
    ttft = _percentiles(st, s.sla.ttft_p99_s)
    per_million = at_capacity_per_million = None
    if cost_value is not None and demand > 0:
        per_million = cost_value / (demand * out_tokens * 3600) * 1e6
    if cost_value is not None and capacity > 0:
        at_capacity_per_million = cost_value / (capacity * out_tokens * 3600) * 1e6
    return Evaluation(
        fleet=fleet.name,
        status=status,
        demand_rps=demand,
        sla_capacity_rps=capacity,
        cost_per_hour_usd=cost_value,
        bcr=capacity / cost_value if cost_value else None,
        usd_per_million_output_tokens=per_million,
        ttft_s=ttft,
        tpot_ms={"step": st.step_md_s / units.MS, "p99": st.tpot_p99_s / units.MS},
        pools=pools,
        links=links,
        routing={
            "relay_above_mb": routing.relay_above_mb,
            "singular_max_output_tokens": routing.singular_max_output_tokens,
            "catch_up_above_tokens": fleet.handoff.catch_up_above_tokens,
            "chunk_tokens": fleet.handoff.chunk_tokens,
        },
        pipelines=pipelines,
        rld_token_share=st.rld_tokens / out_tokens,
        binding=binding,
        price_basis=priced.basis,
        owned_gpus=sum(priced.owned_gpus),
        md_cache={
            "gb_per_gpu": fleet.md_cache_gb_per_gpu,
            "tiers": None if not m.tiered else (fleet.md_cache_tiers or CacheSizes()).model_dump(),
            "mean_hit": st.md_hit,
        },
        notes=notes,
        ttft_over_p99_bound=st.tail99,
        planned_rps=planned,
        ttft_planned_s=_percentiles(at_planned, s.sla.ttft_p99_s) if at_planned else None,
        usd_per_million_output_tokens_at_capacity=at_capacity_per_million,
        ttft_breakdown_s=st.breakdown(),
        ttft_breakdown_at_capacity_s=at_capacity.breakdown() if at_capacity is not None else None,
        engine=m.problem.engine_summary(),
    )


def _percentiles(st: _State, hi: float) -> dict[str, float]:
    """TTFT P50, P90 and P99 of the class mixture in state ``st``."""
    return {
        f"p{int(q * 100)}": percentile(st.ttft_tail, q, hi, at_most=MAX_TTFT_S, steps=BISECT_STEPS)
        for q in (0.5, 0.9, 0.99)
    }
