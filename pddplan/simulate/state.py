"""The simulator's state records: a request in flight, a prefill instance and site, a
decode pool, and what a run measured (``pddplan.simulate.engine`` moves them; nothing here has
behaviour of its own)."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pddplan.model.instance import Instance
from pddplan.simulate.cache import Cache
from pddplan.simulate.parts import DecodeInstance

DIRECT, RELAY, SINGULAR = 0, 1, 2
"""A request's pipeline: P -> MD, P -> RLD -> MD, P -> RLD (singular)."""


class Req:
    __slots__ = (
        "blocks",
        "cross",
        "done",
        "finished",
        "first",
        "flow",
        "gone_md",
        "hit_md",
        "hit_p",
        "i",
        "inp",
        "md_dc",
        "md_run",
        "out",
        "p_dc",
        "path",
        "prefilled",
        "ready",
        "rld",
        "rld_made",
        "run",
        "t0",
        "taken",
    )

    def __init__(self, i: int, t0: float, inp: int, out: int, blocks: Sequence[int]) -> None:
        self.i, self.t0, self.inp, self.out, self.blocks = i, t0, inp, out, blocks
        self.done = self.run = self.md_run = 0
        self.prefilled = self.ready = self.taken = 0.0
        self.hit_p = self.hit_md = 0.0
        self.path = DIRECT
        self.first = math.nan
        self.flow: Any = None
        self.rld: DecodeInstance | None = None
        self.finished = False
        self.cross = False
        self.rld_made = 0
        self.gone_md = False


class PrefillInstance:
    """A prefill instance: one FIFO of started requests per attention rank."""

    __slots__ = ("busy", "busy_s", "chunk", "host", "inst", "pass_memo", "pool", "ranks")

    def __init__(self, inst: Instance, pool: int, pass_memo: dict | None = None) -> None:
        self.inst, self.pool = inst, pool
        self.chunk = inst.cal.knobs.prefill_chunk_tokens  # new tokens per rank and pass
        self.host = inst.cal.knobs.prefix_cache == "host"  # cached KV loads from host memory
        self.pass_memo = {} if pass_memo is None else pass_memo
        """``Instance.batched_pass_s``'s memo: shared by a pool's instances (one model and
        chip); bounded, as a pass's total tokens are whole numbers up to its chunk budget."""
        self.busy = False
        self.ranks: list[deque[Req]] = [deque() for _ in range(inst.attention_groups)]
        self.busy_s = 0.0


class PrefillSite:
    def __init__(self, cache: Cache | None) -> None:
        self.queue: deque[Req] = deque()
        self.instances: list[PrefillInstance] = []
        self.cache = cache


class DecodePool:
    def __init__(self, role: str, index: int) -> None:
        self.role, self.index = role, index
        self.instances: list[DecodeInstance] = []
        # (request, tokens, stall) waiting for a seat; finished requests, and on a relay
        # pool those that went straight to MD (``Req.gone_md``), leave it at its head
        self.queue: deque[tuple[Req, int, float]] = deque()
        self.op_batch, self.op_step = 1, 0.0


@dataclass(frozen=True)
class SimRecord:
    """Per finished request, in completion order (numpy arrays)."""

    index: np.ndarray
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


@dataclass(frozen=True)
class SimRaw:
    """What one run measured, before statistics (``pddplan.simulate.run``)."""

    records: SimRecord
    window_s: float
    """Arrival window measured (after warm-up), for rates and utilizations."""
    pool_util: list[tuple[str, str, str, float]]
    """(datacenter, role, chip, utilization) per pool, in the fleet's order."""
    link_util: dict[tuple[str, str], float]
    gaps: dict[int, float]
    """Inter-token gap histogram (``sim_parts.gap_seconds(key)`` -> tokens), after warm-up."""
    handoffs: int
    stall_s: float
    events: int
    warmup_requests: int
