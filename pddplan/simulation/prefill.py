"""Prefill in the simulator: instances, the datacenter's queue, and how a pass is filled.

A prefill instance runs chunked-prefill passes. Each attention rank (group) holds a FIFO of
the requests it has started; a pass gives each rank up to ``chunk_tokens`` new tokens: first
its started requests', in order, then the datacenter queue's head, one request at a time, to
the rank with the fewest tokens in the pass (a free rank first), the last one cut to fit
(``fill_pass``); an instance that is leaving (not ``active``) only finishes its started
requests. A request's prefix is looked up in the datacenter's cache when a rank takes
it; the cached part is not prefilled again (at least its last token is).
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import TYPE_CHECKING

from pddplan.model.instance import Instance
from pddplan.simulation.request import Req

if TYPE_CHECKING:
    from pddplan.simulation.cache import Cache
    from pddplan.simulation.decode import DecodeInstance

Part = tuple[float, float, float]
"""One request's share of a rank's pass: (new tokens, tokens before them, of those the ones
loaded from host memory): what ``Instance.batched_pass_s`` prices."""
Member = tuple[Req, int, deque[Req]]
"""A request in a pass: (request, new tokens it gets, the rank's FIFO it is in)."""


class PrefillInstance:
    """A prefill instance: one FIFO of started requests per attention rank."""

    __slots__ = (
        "active", "busy", "busy_s", "chunk", "host", "hosted", "inst", "pass_memo", "pool",
        "ranks",
    )  # fmt: skip

    def __init__(self, inst: Instance, pool: int, pass_memo: dict | None = None) -> None:
        self.inst, self.pool = inst, pool
        self.chunk = inst.chunk_tokens  # new tokens per attention group and pass
        self.host = inst.cal.knobs.prefix_cache == "host"  # cached KV loads from host memory
        self.pass_memo = {} if pass_memo is None else pass_memo
        """``Instance.batched_pass_s``'s memo: shared by a pool's instances (one model and
        chip); bounded, as a pass's total tokens are whole numbers up to its chunk budget."""
        self.busy = False
        self.ranks: list[deque[Req]] = [deque() for _ in range(inst.attention_groups)]
        self.busy_s = 0.0
        self.hosted: DecodeInstance | None = None
        """The relay decode it hosts: one token of each of its sequences rides every pass."""
        self.active = True
        """It takes requests from the queue; False: it is leaving (``Simulation.scale``),
        and finishes the requests it has started."""


class PrefillSite:
    """A prefill datacenter: its FIFO queue of requests not yet taken, its instances and
    its prefix cache (None: no cache)."""

    def __init__(self, cache: Cache | None) -> None:
        self.queue: deque[Req] = deque()
        self.instances: list[PrefillInstance] = []
        self.cache = cache


def fill_pass(
    site: PrefillSite, pi: PrefillInstance, now_s: float, block_tokens: int
) -> tuple[list[Member], list[list[Part]]]:
    """The next pass of ``pi`` at ``now_s`` (module docstring): the requests in it and each
    rank's parts. A request taken from ``site``'s queue joins its rank's FIFO, with its
    cache hit (``p_hit_blocks`` of ``block_tokens``, at most all but its last token) counted
    as prefilled and the time it was taken. Empty when there is nothing to run."""
    chunk, host = pi.chunk, pi.host
    members: list[Member] = []
    parts: list[list[Part]] = [[] for _ in pi.ranks]
    taking = pi.active and site.queue
    if not taking and not any(pi.ranks):
        return members, parts
    loads = []
    for k, running in enumerate(pi.ranks):
        budget = chunk
        for r in running:
            if budget <= 0:
                break
            take = min(r.inp - r.prefilled_tokens, budget)
            parts[k].append((float(take), float(r.prefilled_tokens), 0.0))
            members.append((r, take, running))
            budget -= take
        loads.append((chunk - budget, k))
    heapq.heapify(loads)
    while taking and site.queue and loads[0][0] < chunk:
        load, k = loads[0]
        r = site.queue.popleft()
        hit = site.cache.lookup(r.blocks) if site.cache is not None else 0
        r.p_hit_blocks = hit
        r.taken_s = now_s
        r.prefilled_tokens = min(hit * block_tokens, r.inp - 1)
        r.hit_p = r.prefilled_tokens / r.inp
        take = min(r.inp - r.prefilled_tokens, chunk - load)
        cached = float(r.prefilled_tokens)
        parts[k].append((float(take), cached, cached if host else 0.0))
        members.append((r, take, pi.ranks[k]))
        pi.ranks[k].append(r)
        heapq.heapreplace(loads, (load + take, k))
    return members, parts
