"""The discrete-event simulator: a plan's fleet serving sampled or traced requests.

It shares only the per-step cost functions with the analytic model (``Instance``'s prefill
pass, decode step and extend step, and the KV sizes); queueing, batching, link sharing,
caches, routing and handoffs are simulated. A request's life:

1. It arrives at a prefill datacenter (chosen in proportion to its prefill capacity) and
   joins that datacenter's FIFO queue. A free prefill instance fills its next
   chunked-prefill pass with up to ``prefill_chunk_tokens`` new tokens: first the requests
   it has started, then the queue's head (the last one cut to fit). A request's hit is
   looked up in the datacenter's prefix cache (LRU over blocks, ``block_tokens`` each, of
   ``p_cache_tokens``; by default unbounded, which is what a scenario's ``prefix_hit``
   takes for granted: a KV store, HBM plus host memory, that holds the sessions' working
   set) when an instance takes it, and its blocks enter the cache when its prefill ends.
2. The router picks a decode datacenter (in proportion to main-decode capacity), looks up the
   request's prefix in that datacenter's decode-side cache (LRU, ``md_cache_gb_per_gpu`` x
   its GPUs; unbounded when the scenario has no ``md_cache`` choice) and applies the plan's
   rule: relay when the WAN payload (the KV MD lacks plus the fixed state) exceeds
   ``relay_above_mb``; of those, finish on RLD when the output is at most
   ``singular_max_output_tokens`` (the request's output length stands in for its
   max_tokens).
3. P -> MD: the payload crosses the WAN link (``WanLink``); it is at MD half an RTT after
   its last byte is sent; MD admits it (``DecodeInstance``); its first token is back at the
   user's side half an RTT after MD makes it.
   P -> RLD -> MD: the whole KV goes to RLD by RDMA, RLD decodes while the payload crosses
   the WAN, then hands off: one-shot (RLD stops; MD runs one extend step over the eager
   tokens, stalling its batch) or, above ``catch_up_above_tokens``, catch-up (one chunk of
   ``chunk_tokens`` per MD step, RLD decoding until the last chunk; the tokens it made
   meanwhile ride in the last chunk). A request still queued at RLD when its KV reaches MD
   goes straight to MD. Singular requests, and relayed ones that finish on RLD first,
   finish there; their transfer still completes (the analytic model bills the link for it
   too) and warms MD's cache for the session's next turn.
4. Its KV enters MD's cache when MD has the whole context.
"""

from __future__ import annotations

import bisect
import functools
import gc
import math
from array import array
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from pddplan.errors import InputError
from pddplan.evaluation.fleet_model import FleetModel
from pddplan.model.network import rdma_transfer_s
from pddplan.model.problem import Problem
from pddplan.simulation.build import build_decode, build_links, build_prefill, cdf
from pddplan.simulation.cache import ChainCache
from pddplan.simulation.decode import DecodeInstance, DecodePool
from pddplan.simulation.events import Events
from pddplan.simulation.link import WanLink
from pddplan.simulation.prefill import PrefillInstance, PrefillSite, fill_pass
from pddplan.simulation.request import DIRECT, RELAY, SINGULAR, Req
from pddplan.spec.fleet import Fleet
from pddplan.workload.cache import PrefixCache
from pddplan.workload.sessions import BLOCK_TOKENS, SimRequest

GC_YOUNG_THRESHOLD = 100_000
"""Allocations between the cyclic garbage collector's young-generation passes during a run
(Python's default is 700): a run allocates millions of short-lived objects, few of them in
cycles, and every pass that moves objects up makes the older generations' passes, which
walk everything alive, come sooner."""


Counters = dict
"""``p``: each prefill instance's busy seconds; ``d``: each decode instance's (tokens,
stall seconds, sequence-seconds held); ``l``: each link's bytes sent."""


RECORD_FIELDS = (
    "index",
    "arrival_s",
    "ttft_s",
    "queue_s",
    "prefill_s",
    "transfer_s",
    "finish_s",
    "output_tokens",
    "rld_tokens",
    "path",
    "p_hit",
    "md_hit",
)
"""What is recorded per finished request, in this order (``SimRecord``'s fields)."""
FIRST_FIELDS = ("index", "ttft_s", "md_hit")
"""What is recorded per request as soon as its first token's time is known (when a decode
instance admits it), in this order: what the run-length checks need."""


@dataclass(frozen=True)
class SimRecord:
    """Per finished request (numpy arrays, one entry per request, in one order)."""

    index: np.ndarray
    """The request's place in arrival order."""
    arrival_s: np.ndarray
    ttft_s: np.ndarray
    queue_s: np.ndarray
    """Arrival to the first prefill pass (the datacenter queue)."""
    prefill_s: np.ndarray
    """Arrival to the end of prefill (queue and passes)."""
    transfer_s: np.ndarray
    """End of prefill to the KV at the decode instance that makes the first token (RLD by
    RDMA, or MD over the link)."""
    finish_s: np.ndarray
    output_tokens: np.ndarray
    rld_tokens: np.ndarray
    path: np.ndarray
    p_hit: np.ndarray
    md_hit: np.ndarray

    @classmethod
    def of(cls, table: np.ndarray) -> SimRecord:
        """From a table with one row per request and ``RECORD_FIELDS`` as its columns."""
        return cls(**{k: table[:, j] for j, k in enumerate(RECORD_FIELDS)})

    def select(self, keep: np.ndarray) -> SimRecord:
        """The requests ``keep`` (a mask or indices) selects."""
        return SimRecord(**{k: getattr(self, k)[keep] for k in RECORD_FIELDS})


@dataclass(frozen=True)
class CacheState:
    """A bounded prefix cache at one moment (``Checkpoint``)."""

    name: str
    """``prefill in <dc>`` or ``decode side in <dc>``."""
    capacity_blocks: int
    resident_blocks: int
    evicted_blocks: int
    """Since the start, the warm start's cache-only requests included."""

    @property
    def full(self) -> float:
        return self.resident_blocks / self.capacity_blocks

    @property
    def turned_over(self) -> float:
        """Evicted blocks per block of capacity."""
        return self.evicted_blocks / self.capacity_blocks


@dataclass(frozen=True)
class Checkpoint:
    """The simulation's counters at a moment: what utilizations, the inter-token gaps and
    the steadiness checks need between two of them."""

    time_s: float
    arrivals: int
    """Requests that had arrived."""
    counters: Counters
    gaps: dict[int, float]
    """The inter-token gap histogram so far (``decode.gap_seconds(key)`` -> tokens)."""
    caches: tuple[CacheState, ...]
    """The bounded prefix caches."""
    handoffs: int
    """RLD -> MD handoffs so far, and the MD stall seconds they cost."""
    stall_s: float


# --- the engine ------------------------------------------------------------------------------
class Simulation:
    """One run of ``fleet`` (with ``routing`` set) on ``scenario``; see the module doc.

    ``chain_ids``: the requests' block ids name prefix chains, as the session generator's
    do (``pddplan.simulation.cache``); the caches are then ``ChainCache``, the same LRU in
    less time.
    """

    def __init__(
        self,
        problem: Problem,
        fleet: Fleet,
        *,
        seed: int = 0,
        setup_rtts: float = 0.0,
        p_cache_tokens: int | None = None,
        block_tokens: int = BLOCK_TOKENS,
        chain_ids: bool = False,
        fleet_model: FleetModel | None = None,
    ) -> None:
        if fleet.routing is None:
            raise ValueError("simulate a fleet with its routing set")
        scenario = problem.scenario
        self.s, self.fleet, self.routing = scenario, fleet, fleet.routing
        self.m = m = fleet_model if fleet_model is not None else FleetModel(problem, fleet)
        self.block = block = block_tokens
        cache_of = ChainCache if chain_ids else PrefixCache
        self.ev = Events()
        self.rng = np.random.default_rng(seed + 1)
        self.kv = m.roles["main_decode"][0][1].kv
        self.bpt, self.fixed = self.kv.bytes_per_token, self.kv.fixed_bytes
        self.gaps: dict[int, float] = {}
        prefill = build_prefill(m, p_cache_tokens=p_cache_tokens, block=block, cache_of=cache_of)
        self.prefill = prefill.sites
        self._p_by_pool = prefill.by_pool
        self.p_dcs, self.p_weights = prefill.dcs, prefill.weights
        self.p_cdf = cdf(self.p_weights)
        decode = build_decode(
            m,
            fleet,
            prefill,
            events=self.ev,
            gaps=self.gaps,
            on_leave=self._finished,
            block=block,
            cache_of=cache_of,
        )
        self.md, self.rld, self.md_cache = decode.md, decode.rld, decode.md_cache
        self.md_tiers, self.tier_reads = decode.md_tiers, decode.tier_reads
        self._pool_of = decode.pool_of
        self._decode = [dp for g in (self.md, self.rld) for pools in g.values() for dp in pools]
        for dp in self._decode:
            dp.live = len(dp.instances)
        self.md_dcs = sorted(self.md)
        w = np.array([decode.md_capacity[d] for d in self.md_dcs])
        self.md_weights = w if w.sum() > 0 else np.ones(len(w))
        self.md_cdf = cdf(self.md_weights)
        self.loss_rng = np.random.default_rng([seed, 6298])  # RTOs: their own stream
        self.links, self.paths = build_links(
            scenario, fleet, self.p_dcs, self.md_dcs, events=self.ev, setup_rtts=setup_rtts
        )
        self.handoff = fleet.handoff
        self.stall_s = 0.0
        self.handoffs = 0
        self._rec = array("d")  # RECORD_FIELDS per finished request
        self._firsts = array("d")  # FIRST_FIELDS per request whose first token is timed
        self._arrival_s = array("d")  # per request that arrived, in arrival order
        self._arrived = 0

    # --- running ---------------------------------------------------------------------------
    def warm_caches(self, contexts: Iterable[Sequence[int]]) -> None:
        """Place ``contexts`` (block ids, oldest first) in the caches before time 0: the
        prefill side's, and one decode-side cache's (picked as the router would)."""
        for blocks in contexts:
            for dc in self.prefill.values():
                if dc.cache is not None:
                    dc.cache.insert(blocks)
            self._md_insert(self._pick(self.md_dcs, self.md_cdf), blocks)

    def pass_through_caches(self, request: SimRequest) -> None:
        """One request before time 0 through the caches only (no queue, no service): its
        blocks are looked up and inserted where the router would place it, on the prefill
        side and on the decode side. The warm start (``simulation.steady``) uses it to
        bring bounded caches to their stationary content."""
        blocks = request[3]
        dc = self.prefill[self._pick(self.p_dcs, self.p_cdf)]
        if dc.cache is not None:
            dc.cache.insert(blocks, known=dc.cache.lookup(blocks))
        md_dc = self._pick(self.md_dcs, self.md_cdf)
        cache = self.md_cache[md_dc]
        self._md_insert(md_dc, blocks, cache.lookup(blocks) if cache is not None else 0)

    def _md_insert(self, md_dc: str, blocks: Sequence[int], known: int = 0) -> None:
        """``blocks`` into ``md_dc``'s decode-side cache, every tier of a tiered one."""
        for tier in self.md_tiers.get(md_dc, ())[:2]:
            tier.insert(blocks)
        cache = self.md_cache[md_dc]
        if cache is not None:
            cache.insert(blocks, known=known)

    def start(self, requests: Iterable[SimRequest]) -> None:
        """Serve ``requests`` (in arrival order, from time 0 on) as ``advance`` runs."""
        self._source = iter(requests)
        self._count = 0
        self._pause_at = 0
        self._next_arrival()

    def advance(self, arrivals: int | None = None) -> bool:
        """Run until ``arrivals`` requests have arrived (True), or until the requests have
        run out and every one has finished (False)."""
        self._pause_at = arrivals if arrivals is not None else 0
        if arrivals is not None and self._arrived >= arrivals:
            return True
        with _few_collections():
            return self.ev.run()

    def checkpoint(self) -> Checkpoint:
        """The counters now (decode instances are brought up to now first)."""
        now = self.ev.now
        return Checkpoint(
            now,
            self._arrived,
            read_counters(self.prefill, self._decode, self.links, now),
            dict(self.gaps),
            self.cache_states(),
            self.handoffs,
            self.stall_s,
        )

    def cache_states(self) -> tuple[CacheState, ...]:
        named = [(f"prefill in {dc}", site.cache) for dc, site in self.prefill.items()]
        named += [(f"decode side in {dc}", c) for dc, c in self.md_cache.items()]
        named += [
            (f"decode side's {tier} in {dc}", c)
            for dc, nested in self.md_tiers.items()
            for tier, c in zip(("HBM", "HBM + DRAM"), nested[:2], strict=False)
        ]
        return tuple(
            CacheState(name, c.capacity, c.resident_blocks, c.evicted_blocks)
            for name, c in named
            if c is not None and c.capacity is not None
        )

    def take_records(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Since the last call: the arrival times of the requests that arrived, the requests
        whose first token got timed (``FIRST_FIELDS``) and the requests that finished
        (``RECORD_FIELDS``), one row each."""
        arrivals = np.array(self._arrival_s, dtype=np.float64)
        firsts = np.array(self._firsts, dtype=np.float64).reshape(-1, len(FIRST_FIELDS))
        rows = np.array(self._rec, dtype=np.float64).reshape(-1, len(RECORD_FIELDS))
        self._arrival_s, self._firsts, self._rec = array("d"), array("d"), array("d")
        return arrivals, firsts, rows

    def utilizations(
        self, c0: Checkpoint, c1: Checkpoint
    ) -> tuple[list[tuple[str, str, str, float]], dict[tuple[str, str], float]]:
        """Per pool and per link between two checkpoints (``utilizations``)."""
        window = max(c1.time_s - c0.time_s, 1e-9)
        return utilizations(
            self.m, self.prefill, self._decode, self.links, c0.counters, c1.counters, window
        )

    def close(self) -> None:
        """Drop the events still queued and the references back to this simulation, so
        that it is freed when its caller lets go (a cycle would wait for a full
        collection)."""
        self.ev.clear()
        for link in self.links.values():
            link.clear()
        for site in self.prefill.values():
            site.queue.clear()
            for pi in site.instances:
                pi.ranks = [deque() for _ in pi.ranks]
        for dp in self._decode:
            dp.queue.clear()
            for inst in dp.instances:
                inst.on_leave = _finished_late
                inst.clear()

    # --- instances joining and leaving (a day's schedule: ``simulation.day``) ---------------
    def scale(self, active: dict[tuple[str, int], int]) -> None:
        """Pool ``(role, index)`` of the fleet model (``FleetModel.roles``) to its first
        ``active[(role, index)]`` instances taking requests, the others leaving (pools not
        named keep theirs). A leaving instance takes nothing new and finishes what it holds
        (a prefill instance its started prompts, a decode instance its sequences); a joining
        one takes work at once, a prefill instance from its datacenter's queue, a decode
        instance from its pool's. A relay decode pool hosted on prefill instances follows
        its hosts. The routers' weights follow the active capacity; requests waiting where
        no instance is active any more move to where one is."""
        joined_p: list[tuple[PrefillSite, PrefillInstance]] = []
        joined_d: list[tuple[DecodePool, DecodeInstance]] = []
        by_role = {(dp.role, dp.index): dp for dp in self._decode}
        for (role, j), n in active.items():
            if role == "prefill":
                site = self.prefill[self.m.roles["prefill"][j][0].datacenter]
                for k, pi in enumerate(self._p_by_pool[j]):
                    was, pi.active = pi.active, k < n
                    if pi.active and not was:
                        joined_p.append((site, pi))
                    if pi.hosted is not None:
                        pi.hosted.active = pi.active
                continue
            dp = by_role[(role, j)]
            for k, inst in enumerate(dp.instances):
                was, inst.active = inst.active, k < n
                if inst.active and not was:
                    joined_d.append((dp, inst))
        for dp in self._decode:
            dp.live = sum(1 for i in dp.instances if i.active)
        self._reweigh()
        for site, pi in joined_p:
            if not pi.busy:
                self._start_pass(site, pi)
        for dp, inst in joined_d:
            self._seat(dp, inst)
        self._rehome()

    def _reweigh(self) -> None:
        """The routers' weights from the active instances: a prefill datacenter's share of
        the active prefill capacity, a decode datacenter's of the active decode capacity
        (``build_prefill``, ``build_decode``; unchanged where nothing is active)."""
        p = dict.fromkeys(self.p_dcs, 0.0)
        for j, ((pool, _), share) in enumerate(
            zip(self.m.roles["prefill"], self.m.p_share, strict=True)
        ):
            live = sum(1 for pi in self._p_by_pool[j] if pi.active)
            p[pool.datacenter] += float(share) * live / pool.instances
        w = np.array([p[d] for d in self.p_dcs])
        if w.sum() > 0:
            self.p_weights, self.p_cdf = w, cdf(w)
        md = dict.fromkeys(self.md_dcs, 0.0)
        for dc, pools in self.md.items():
            for dp in pools:
                md[dc] += dp.live * dp.tokens_per_s
        w = np.array([md[d] for d in self.md_dcs])
        if w.sum() > 0:
            self.md_weights, self.md_cdf = w, cdf(w)

    def _rehome(self) -> None:
        """Requests queued at a prefill datacenter with no active instance go to one drawn
        by the router's weights; requests waiting for a seat in a decode pool with none
        active are admitted again in their datacenter (a leaving instance still takes
        them where no pool there has an active one)."""
        for site in self.prefill.values():
            if not site.queue or any(pi.active for pi in site.instances):
                continue
            moved, site.queue = site.queue, deque()
            for r in moved:
                r.p_dc = self._pick(self.p_dcs, self.p_cdf)
                self.prefill[r.p_dc].queue.append(r)
            for other in self.prefill.values():
                for pi in other.instances:
                    if other.queue and pi.active and not pi.busy:
                        self._start_pass(other, pi)
        for dp in self._decode:
            if dp.live or not dp.queue:
                continue
            waiting, dp.queue = dp.queue, deque()
            relay = dp.role == "relay_decode"
            pools = (self.rld if relay else self.md)[self._decode_dc(dp)]
            for r, tokens, stall in waiting:
                if not (r.finished or (relay and r.gone_to_md)):
                    self._admit(self._pool(pools), r, tokens, stall)

    def _decode_dc(self, dp: DecodePool) -> str:
        return self.m.roles[dp.role][dp.index][0].datacenter

    def resize_md_cache(self, md_dc: str, tokens: Sequence[float]) -> None:
        """``md_dc``'s decode-side cache to hold ``tokens`` (one figure; a tiered cache's
        three: HBM, HBM + DRAM, all): room that joins is empty, a cache that shrinks evicts
        its least recently used blocks. An unbounded cache stays so."""
        caches = self.md_tiers.get(md_dc) or (self.md_cache.get(md_dc),)
        for cache, t in zip(caches, tokens, strict=True):
            if isinstance(cache, ChainCache) and cache.capacity is not None:
                cache.resize(max(int(t / self.block), 1))

    def _next_arrival(self) -> None:
        nxt = next(self._source, None)
        if nxt is None:
            return
        t, inp, out, blocks = nxt
        self.ev.at(t, self._arrive, Req(self._count, t, inp, out, blocks))
        self._count += 1

    # --- arrivals and prefill ---------------------------------------------------------------
    def _arrive(self, r: Req) -> None:
        self._arrived = r.i + 1
        self._arrival_s.append(r.arrival_s)
        if self._arrived == self._pause_at:
            self.ev.pause()
        self._next_arrival()
        r.p_dc = self._pick(self.p_dcs, self.p_cdf)
        dc = self.prefill[r.p_dc]
        dc.queue.append(r)
        for pi in dc.instances:
            if not pi.busy and pi.active:
                self._start_pass(dc, pi)
                if not dc.queue:
                    break

    def _pick(self, names: list[str], cdf: list[float]) -> str:
        """A name drawn with the weights ``cdf`` was made from (``_cdf``): the draw, and
        the random stream it uses, of ``rng.choice(len(names), p=weights / weights.sum())``
        without its per-call numpy overhead."""
        if len(names) == 1:
            return names[0]
        return names[bisect.bisect_right(cdf, self.rng.random())]

    def _start_pass(self, dc: PrefillSite, pi: PrefillInstance) -> None:
        """``pi``'s next pass (``fill_pass``), with one token of each sequence of the relay
        decode it hosts; it ends at ``_end_pass``. An instance with nothing to run idles."""
        members, parts = fill_pass(dc, pi, self.ev.now, self.block)
        hosted = pi.hosted
        if not members:
            pi.busy = False
            if hosted is not None:
                hosted.pace(None)
            return
        pi.busy = True
        busy = sum(1 for x in parts if x)
        if hosted is not None and hosted.n:  # one token of each hosted sequence
            ctx = hosted.context()
            for k in range(hosted.n):
                parts[k % len(parts)].append((1.0, ctx, 0.0))
        seconds = pi.inst.batched_pass_s([x for x in parts if x], pi.pass_memo)
        pi.busy_s += seconds * busy / len(pi.ranks)  # attention groups prefilling
        if hosted is not None:
            hosted.pace(seconds)
        self.ev.at(self.ev.now + seconds, self._end_pass, (dc, pi, members))

    def _end_pass(
        self, arg: tuple[PrefillSite, PrefillInstance, list[tuple[Req, int, deque]]]
    ) -> None:
        dc, pi, members = arg
        for r, take, running in members:
            r.prefilled_tokens += take
            if r.prefilled_tokens >= r.inp:
                r.prefilled_s = self.ev.now
                running.remove(r)
                if dc.cache is not None:
                    dc.cache.insert(r.blocks, known=r.p_hit_blocks)
                self._dispatch(r)
        self._start_pass(dc, pi)

    # --- routing and transfers --------------------------------------------------------------
    def _dispatch(self, r: Req) -> None:
        now = self.ev.now
        r.md_dc = self._pick(self.md_dcs, self.md_cdf)
        cache = self.md_cache[r.md_dc]
        r.md_hit_blocks = cache.lookup(r.blocks) if cache else 0
        if r.md_hit_blocks and r.md_dc in self.md_tiers:  # fetched from DRAM or SSD meanwhile
            hbm, dram, _ = self.md_tiers[r.md_dc]
            in_hbm, above_ssd = hbm.lookup(r.blocks), dram.lookup(r.blocks)
            dram_read, ssd_read = self.tier_reads[r.md_dc]
            nbytes = self.bpt * self.block
            r.fetched_s = now + (above_ssd - in_hbm) * nbytes / dram_read + (
                r.md_hit_blocks - above_ssd
            ) * nbytes / ssd_read  # fmt: skip
        hit_tokens = min(r.md_hit_blocks * self.block, r.inp)
        r.hit_md = hit_tokens / r.inp
        payload = self.fixed + self.bpt * (r.inp - hit_tokens)
        rule = self.routing
        if rule.relay_above_mb is not None and payload / 1e6 > rule.relay_above_mb:
            r.path = SINGULAR if r.out <= rule.singular_max_output_tokens else RELAY
        r.crosses_wan = r.p_dc != r.md_dc
        if r.path != DIRECT:
            pools = self.rld.get(r.p_dc)
            if not pools:
                raise InputError(
                    f"fleet {self.fleet.name}: routing relays requests but {r.p_dc} has no "
                    "relay_decode pool"
                )
            full = self.fixed + self.bpt * r.inp
            nic = self.prefill[r.p_dc].instances[0].inst.chip.nic_bytes_per_s
            self.ev.at(now + rdma_transfer_s(full, nic_bytes_per_s=nic), self._at_rld, r)
        if r.crosses_wan:
            link = self.links[(r.p_dc, r.md_dc)]
            path = self.paths[(r.p_dc, r.md_dc)]
            q = path.tail_loss_probability(payload)
            rto = path.min_rto_s if q and self.loss_rng.random() < q else 0.0
            r.flow = link.start(payload, functools.partial(self._kv_sent, r, rto))
        else:
            nic = self.prefill[r.p_dc].instances[0].inst.chip.nic_bytes_per_s
            self.ev.at(now + rdma_transfer_s(payload, nic_bytes_per_s=nic), self._at_md, r)

    def _kv_sent(self, r: Req, rto_s: float, t: float) -> None:
        """The last byte sent (and, after a tail loss, resent ``rto_s`` later): the KV is at
        MD half an RTT on."""
        r.flow = None
        self.ev.at(t + rto_s + self.links[(r.p_dc, r.md_dc)].rtt / 2, self._at_md, r)

    def _at_rld(self, r: Req) -> None:
        if r.finished or r.gone_to_md:
            return  # the KV reached MD first (the request went straight there)
        r.md_ready_s = self.ev.now
        self._admit(self._pool(self.rld[r.p_dc]), r, max(r.out, 1), 0.0)

    def _at_md(self, r: Req) -> None:
        if r.fetched_s > self.ev.now:  # the suffix is here; the hit is still on its way up
            self.ev.at(r.fetched_s, self._at_md, r)
            r.fetched_s = 0.0
            return
        self._md_insert(r.md_dc, r.blocks, r.md_hit_blocks)
        if r.finished or r.path == SINGULAR:
            return  # RLD finishes it; the KV still fills MD's cache for the next turn
        pool = self._pool(self.md[r.md_dc])
        if r.path == DIRECT or r.rld is None:
            if r.path == RELAY:  # not on RLD yet: go straight to MD (RLD's queue skips it)
                r.gone_to_md = True
            if math.isnan(r.first_token_s):
                r.md_ready_s = self.ev.now
            self._admit(pool, r, max(r.out, 1), 0.0)
            return
        self._handoff(pool, r)

    def _pool(self, pools: list[DecodePool]) -> DecodePool:
        """The pool with the most free seats on its active instances (a pool with none
        active only where no pool has one)."""
        if len(pools) == 1:
            return pools[0]
        free = [
            sum(i.max_seqs - i.n for i in p.instances if i.active) if p.live else -1 for p in pools
        ]
        return pools[int(np.argmax(free))]

    # --- decode and handoff -----------------------------------------------------------------
    def _admit(self, pool: DecodePool, r: Req, tokens: int, stall: float) -> None:
        need = self._kv_need(r)
        best = None
        anyone = not pool.live  # no instance is active: the leaving ones take it
        for inst in pool.instances:  # the least loaded active instance that fits (inst.fits)
            if (
                (inst.active or anyone)
                and inst.n < inst.max_seqs
                and need <= inst.kv_free
                and (best is None or inst.n < best.n)
            ):
                best = inst
        if best is None:
            pool.queue.append((r, tokens, stall))
            return
        self._join(pool, best, r, tokens, stall, need)

    def _kv_need(self, r: Req) -> float:
        """KV bytes a sequence is admitted against: its context at the middle of its output,
        the memory it holds on average when pages are allocated as tokens come (the
        context the analytic operating point is sized at)."""
        return self.fixed + self.bpt * (r.inp + r.out / 2)

    def _join(
        self,
        pool: DecodePool,
        inst: DecodeInstance,
        r: Req,
        tokens: int,
        stall: float,
        need: float,
    ) -> None:
        if stall > 0:
            inst.stall(stall)
            self.stall_s += stall
        first = inst.join(r, float(r.inp + r.out - tokens), tokens, need)
        if pool.role == "relay_decode":
            r.rld = inst
        if math.isnan(r.first_token_s):
            back = (
                self.links[(r.p_dc, r.md_dc)].rtt / 2
                if pool.role == "main_decode" and r.crosses_wan
                else 0
            )
            r.first_token_s = first + back
            self._firsts.extend((r.i, r.first_token_s - r.arrival_s, r.hit_md))  # FIRST_FIELDS

    def _handoff(self, pool: DecodePool, r: Req) -> None:
        rld = r.rld
        assert rld is not None
        eager = rld.tokens_done(r)
        above = self.handoff.catch_up_above_tokens
        chunk = self.handoff.chunk_tokens
        inst = self.m.roles["main_decode"][pool.index][1]
        self.handoffs += 1
        if above is None or eager <= above or eager <= chunk:
            made = rld.remove(r)
            r.rld = None
            r.rld_tokens = made
            stall = inst.prefill_pass_s(float(max(made, 1)), float(r.inp)) if made else 0.0
            if made < r.out:
                self._admit(pool, r, r.out - made, stall)
            else:
                self._record(r, self.ev.now)
            return
        # catch-up: one chunk per MD step, RLD decoding until the last one
        chunks = math.ceil(eager / chunk)
        extend = inst.prefill_pass_s(float(chunk), float(r.inp))
        target = min((i for i in pool.instances if i.active or not pool.live), key=lambda i: i.n)
        step = target.step or pool.op_step
        for c in range(chunks):
            self.ev.at(self.ev.now + c * (step + extend), self._catch_up_chunk, (target, extend))
        self.ev.at(self.ev.now + chunks * (step + extend), self._catch_up_done, (pool, target, r))

    def _catch_up_chunk(self, arg: tuple[DecodeInstance, float]) -> None:
        inst, extend = arg
        inst.stall(extend)
        self.stall_s += extend

    def _catch_up_done(self, arg: tuple[DecodePool, DecodeInstance, Req]) -> None:
        pool, target, r = arg
        if r.finished or r.rld is None:
            return
        made = r.rld.remove(r)
        r.rld = None
        r.rld_tokens = made
        if made >= r.out:
            self._record(r, self.ev.now)
        elif target.fits(self._kv_need(r)):  # the instance the chunks went to
            self._join(pool, target, r, r.out - made, 0.0, self._kv_need(r))
        else:
            self._admit(pool, r, r.out - made, 0.0)

    def _finished(self, inst: DecodeInstance, r: Req, t: float) -> None:
        if r.rld is inst:  # finished on RLD (its transfer runs on, into MD's cache)
            r.rld = None
            r.rld_tokens = r.out
        self._record(r, t)
        dp = self._pool_of[id(inst)]
        if inst.active or not dp.live:  # a leaving instance seats no one new
            self._seat(dp, inst)

    def _seat(self, dp: DecodePool, inst: DecodeInstance) -> None:
        """Requests waiting in ``dp``'s queue onto ``inst``, from the head, while they fit."""
        relay = dp.role == "relay_decode"
        while dp.queue:
            q, tokens, stall = dp.queue[0]
            # a request that went straight to MD leaves RLD's queue here, at its head
            gone = q.finished or (relay and q.gone_to_md)
            need = self._kv_need(q)
            if not gone and not inst.fits(need):
                break
            dp.queue.popleft()
            if not gone:
                self._join(dp, inst, q, tokens, stall, need)

    def _record(self, r: Req, t: float) -> None:
        r.finished = True
        self._rec.extend(  # RECORD_FIELDS, in order
            (
                r.i,
                r.arrival_s,
                r.first_token_s - r.arrival_s,
                r.taken_s - r.arrival_s,
                r.prefilled_s - r.arrival_s,
                r.md_ready_s - r.prefilled_s,
                t,
                r.out,
                r.rld_tokens,
                r.path,
                r.hit_p,
                r.hit_md,
            )
        )


# --- what a run measures besides its requests ------------------------------------------------


def read_counters(
    prefill: dict[str, PrefillSite],
    decode: list[DecodePool],
    links: dict[tuple[str, str], WanLink],
    t: float,
) -> Counters:
    """The counters at time ``t`` (decode instances are brought up to ``t`` first)."""
    instances = [inst for dp in decode for inst in dp.instances]
    for inst in instances:
        inst._advance(t)
    return {
        "p": [pi.busy_s for dc in prefill.values() for pi in dc.instances],
        "d": [(inst.tokens, inst.stall_s, inst.held_s) for inst in instances],
        "l": {k: x.bytes_sent for k, x in links.items()},
    }


def utilizations(
    m: FleetModel,
    prefill: dict[str, PrefillSite],
    decode: list[DecodePool],
    links: dict[tuple[str, str], WanLink],
    c0: Counters,
    c1: Counters,
    window: float,
) -> tuple[list[tuple[str, str, str, float]], dict[tuple[str, str], float]]:
    """(datacenter, role, chip, utilization) per pool in the fleet's order, and per link,
    between the counters ``c0`` and ``c1`` taken ``window`` seconds apart. A prefill pool:
    its attention groups' busy share; a main-decode pool: its tokens times the operating
    point's seconds per token plus its stalls, per instance-second; a relay-decode pool:
    the batch slots its sequences held (sequence-seconds) over its largest batch's, per
    instance-second, as the analytic model counts it (a relayed request holds a slot while
    its KV crosses, whatever the step: at the small batches relay decode runs, its steps
    are far shorter than the operating point's, and its tokens would understate the slots
    by that ratio); a link: bytes sent over goodput x time."""
    busy: dict[int, float] = {}
    k = 0
    for dc in prefill.values():
        for pi in dc.instances:
            busy[pi.pool] = busy.get(pi.pool, 0.0) + c1["p"][k] - c0["p"][k]
            k += 1
    out: list[tuple[str, str, str, float]] = []
    for j, (pool, _) in enumerate(m.roles["prefill"]):
        out.append((pool.datacenter, pool.role, pool.chip, busy[j] / (pool.instances * window)))
    k = 0
    work_of: dict[tuple[str, int], float] = {}
    for dp in decode:
        work = 0.0
        for _ in dp.instances:
            (t0, s0, h0), (t1, s1, h1) = c0["d"][k], c1["d"][k]
            if dp.role == "relay_decode":
                work += (h1 - h0) / dp.op_batch
            else:
                work += (t1 - t0) * dp.op_step / dp.op_batch + (s1 - s0)
            k += 1
        work_of[(dp.role, dp.index)] = work / (len(dp.instances) * window)
    for role in ("relay_decode", "main_decode"):
        for j, (pool, _) in enumerate(m.roles[role]):
            out.append((pool.datacenter, pool.role, pool.chip, work_of[(role, j)]))
    per_link = {
        key: float(c1["l"][key] - c0["l"][key]) / (window * x.goodput) for key, x in links.items()
    }
    return out, per_link


def _finished_late(inst: DecodeInstance, r: Req, t: float) -> None:
    raise RuntimeError("a decode instance finished a request after its simulation ended")


@contextmanager
def _few_collections() -> Iterator[None]:
    """Run with the cyclic collector's young generation collected every
    ``GC_YOUNG_THRESHOLD`` allocations (restored after). Not ``gc.freeze()``: it would keep
    an earlier run's cyclic garbage (a finished ``Simulation`` and its caches) for good."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], GC_YOUNG_THRESHOLD), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
