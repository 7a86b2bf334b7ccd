"""Building a simulation's parts from a fleet (``Simulation.__init__`` calls these): the
prefill datacenters with their instances and caches (``build_prefill``), the decode pools
with their instances, decode-side caches and tiers (``build_decode``), and one WAN link per
direction used (``build_links``). What runs them is ``pddplan.simulation.engine``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pddplan import units
from pddplan.evaluation.fleet_model import FleetModel
from pddplan.model.network import TcpPath, link_bytes_per_s
from pddplan.simulation.cache import Cache
from pddplan.simulation.decode import DecodeInstance, DecodePool
from pddplan.simulation.events import Events
from pddplan.simulation.link import WanLink
from pddplan.simulation.prefill import PrefillInstance, PrefillSite
from pddplan.simulation.request import Req
from pddplan.spec.fleet import Fleet
from pddplan.spec.scenario import Scenario


@dataclass
class PrefillSide:
    """The prefill datacenters (``build_prefill``)."""

    sites: dict[str, PrefillSite]
    by_pool: list[list[PrefillInstance]]
    """Each prefill pool's instances, in the fleet model's order."""
    dcs: list[str]
    """The datacenters, sorted: the router's choices."""
    weights: np.ndarray
    """Each datacenter's share of the prefill capacity: the router's weights."""


def build_prefill(
    m: FleetModel, *, p_cache_tokens: int | None, block: int, cache_of: type[Cache]
) -> PrefillSide:
    """Each prefill datacenter's instances (a pool's share one pass-price memo) and its
    prefix cache: ``p_cache_tokens`` in blocks of ``block`` (None: unbounded; under a
    block: none)."""
    sites: dict[str, PrefillSite] = {}
    capacity: dict[str, float] = {}
    by_pool: list[list[PrefillInstance]] = []
    for j, ((pool, inst), share) in enumerate(zip(m.roles["prefill"], m.p_share, strict=True)):
        site = sites.setdefault(pool.datacenter, PrefillSite(None))
        pass_memo: dict = {}  # one per pool: its instances price passes alike
        by_pool.append([PrefillInstance(inst, j, pass_memo) for _ in range(pool.instances)])
        site.instances += by_pool[-1]
        capacity[pool.datacenter] = capacity.get(pool.datacenter, 0.0) + share
    for site in sites.values():
        if p_cache_tokens is None:
            site.cache = cache_of(None)
        elif p_cache_tokens >= block:
            site.cache = cache_of(p_cache_tokens // block)
    dcs = sorted(sites)
    return PrefillSide(sites, by_pool, dcs, np.array([capacity[d] for d in dcs]))


@dataclass
class DecodeSide:
    """The decode pools (``build_decode``)."""

    md: dict[str, list[DecodePool]]
    rld: dict[str, list[DecodePool]]
    md_cache: dict[str, Cache | None]
    """Each main-decode datacenter's decode-side cache (the whole of a tiered one)."""
    md_tiers: dict[str, tuple[Cache, Cache, Cache]] = field(default_factory=dict)
    """A tiered cache's nested LRUs: HBM, HBM + DRAM, all."""
    tier_reads: dict[str, tuple[float, float]] = field(default_factory=dict)
    """A tiered cache's DRAM and SSD read bytes per second."""
    pool_of: dict[int, DecodePool] = field(default_factory=dict)
    """Each decode instance's pool, by the instance's id."""
    md_capacity: dict[str, float] = field(default_factory=dict)
    """Each main-decode datacenter's tokens per second at its operating points."""


def build_decode(
    m: FleetModel,
    fleet: Fleet,
    prefill: PrefillSide,
    *,
    events: Events,
    gaps: dict[int, float],
    on_leave: Callable[[DecodeInstance, Req, float], None],
    block: int,
    cache_of: type[Cache],
) -> DecodeSide:
    """Each decode pool's instances at its operating point (a relay pool hosted on prefill
    passes gets the HBM its prompts leave, and its instances ride the host pool's), and each
    main-decode datacenter's decode-side cache: ``md_cache_gb_per_gpu`` of every GPU there
    (unbounded without one), or the nested tiers of a tiered one."""
    side = DecodeSide({}, {}, {})
    bytes_per_token = m.roles["main_decode"][0][1].kv.bytes_per_token
    reserve = (fleet.md_cache_gb_per_gpu or 0.0) * units.GB
    steps_memo: dict[tuple[str, int], dict] = {}
    for role, points, pools, out in (
        ("main_decode", list(m.md_points.values()), m.roles["main_decode"], side.md),
        ("relay_decode", m.rld_points, m.roles["relay_decode"], side.rld),
    ):
        for j, ((pool, inst), (batch, step)) in enumerate(zip(pools, points, strict=True)):
            dp = DecodePool(role, j)
            dp.op_batch, dp.op_step = max(batch, 1), step
            dp.tokens_per_s = batch / step if batch else 0.0
            res = reserve * pool.gpus_per_instance if role == "main_decode" else 0.0
            kv_bytes = inst.kv_capacity_bytes(res)
            host = m.hosts.get(j) if role == "relay_decode" else None
            if host is not None:  # hosted: the HBM its prompts leave (``colocation``)
                kv_bytes = host[1].batch * host[1].kv_bytes_per_sequence
            steps = steps_memo.setdefault((pool.chip, pool.gpus_per_instance), {})
            for _ in range(pool.instances):
                dp.instances.append(
                    DecodeInstance(
                        events,
                        inst,
                        max_seqs=max(batch, 1),
                        kv_bytes=kv_bytes,
                        step_memo=steps,
                        gaps=gaps,
                        on_leave=on_leave,
                    )
                )
            if host is not None:
                for pi, di in zip(prefill.by_pool[host[0]], dp.instances, strict=True):
                    pi.hosted = di
            out.setdefault(pool.datacenter, []).append(dp)
            side.pool_of.update((id(i), dp) for i in dp.instances)
            if role == "main_decode":
                side.md_capacity[pool.datacenter] = (
                    side.md_capacity.get(pool.datacenter, 0.0) + pool.instances * dp.tokens_per_s
                )
                if fleet.md_cache_gb_per_gpu is None:
                    side.md_cache[pool.datacenter] = cache_of(None)
                else:
                    gpus = pool.gpus_per_instance * pool.instances
                    blocks = (
                        md_cache_tokens(fleet.md_cache_gb_per_gpu, gpus, bytes_per_token) / block
                    )
                    side.md_cache[pool.datacenter] = _grow(
                        side.md_cache.get(pool.datacenter), blocks, cache_of
                    )
    # a tiered decode-side cache: nested LRU caches (HBM, HBM + DRAM, all), whose
    # contents are each tier's and above by LRU's inclusion
    for md_dc, tiers in m.tiers.items():
        nested = [cache_of(max(int(t / block), 1)) for t in tiers.nested()]
        side.md_tiers[md_dc] = (nested[0], nested[1], nested[2])
        side.md_cache[md_dc] = nested[2]
        side.tier_reads[md_dc] = (tiers.dram_read, tiers.ssd_read)
    return side


def build_links(
    scenario: Scenario,
    fleet: Fleet,
    p_dcs: list[str],
    md_dcs: list[str],
    *,
    events: Events,
    setup_rtts: float,
) -> tuple[dict[tuple[str, str], WanLink], dict[tuple[str, str], TcpPath]]:
    """One WAN link per direction a request may take (each prefill datacenter to each
    other main-decode one), at the fleet's bandwidth, with its TCP path."""
    links: dict[tuple[str, str], WanLink] = {}
    paths: dict[tuple[str, str], TcpPath] = {}
    for a in p_dcs:
        for b in md_dcs:
            if a == b:
                continue
            link = next(x for x in scenario.links if set(x.between) == {a, b})
            gbps = next(c.gbps for c in fleet.links if set(c.between) == {a, b})
            path = paths[(a, b)] = TcpPath.of(link)
            goodput = link_bytes_per_s(gbps, link.tcp_efficiency)
            flow_cap = min(path.flow_cap_bytes_per_s, goodput)
            links[(a, b)] = WanLink(
                events,
                goodput,
                path.rtt_s,
                path.initial_window_bytes(flow_cap),
                setup_rtts,
                flow_cap,
            )
    return links, paths


def md_cache_tokens(gb_per_gpu: float, gpus: int, bytes_per_token: float) -> float:
    """Tokens of KV a decode-side cache of ``gb_per_gpu`` on each of ``gpus`` GPUs holds."""
    return gb_per_gpu * units.GB * gpus / bytes_per_token


def cdf(weights: np.ndarray) -> list[float]:
    """The cumulative distribution numpy's ``Generator.choice`` draws from for
    ``p=weights / weights.sum()`` (it then takes ``searchsorted(random(), side="right")``)."""
    out = (weights / weights.sum()).cumsum()
    out /= out[-1]
    return list(out.tolist())


def _grow(cache: Cache | None, blocks: float, cache_of: type[Cache]) -> Cache | None:
    """A cache ``blocks`` bigger than ``cache`` (None: no cache yet)."""
    if cache is None:
        total = int(blocks)
    elif cache.capacity is None:
        return cache
    else:
        total = cache.capacity + int(blocks)
    return cache_of(total) if total > 0 else None
