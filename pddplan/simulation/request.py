"""A simulated request: what it is, where the router sent it, and the moments of its life,
each a named field in seconds of simulated time (``nan``/0 until it happens)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pddplan.simulation.decode import DecodeInstance

DIRECT, RELAY, SINGULAR = 0, 1, 2
"""A request's pipeline: P -> MD, P -> RLD -> MD, P -> RLD (singular)."""


class Req:
    """One request through the fleet (``pddplan.simulation.engine``)."""

    __slots__ = (
        "arrival_s",
        "blocks",
        "crosses_wan",
        "fetched_s",
        "finished",
        "first_token_s",
        "flow",
        "gone_to_md",
        "hit_md",
        "hit_p",
        "i",
        "inp",
        "md_dc",
        "md_hit_blocks",
        "md_ready_s",
        "out",
        "p_dc",
        "p_hit_blocks",
        "path",
        "prefilled_s",
        "prefilled_tokens",
        "rld",
        "rld_tokens",
        "taken_s",
    )

    def __init__(self, i: int, arrival_s: float, inp: int, out: int, blocks: Sequence[int]) -> None:
        # what it is
        self.i = i
        """Its place in arrival order."""
        self.inp, self.out = inp, out
        """Input and output tokens."""
        self.blocks = blocks
        """Its prefix block ids (``pddplan.workload.sessions.SimRequest``)."""
        # where it goes
        self.p_dc = self.md_dc = ""
        """Its prefill and main-decode datacenters, set when the router picks them."""
        self.path = DIRECT
        """``DIRECT``, ``RELAY`` or ``SINGULAR``."""
        self.crosses_wan = False
        """Whether its prefill and main-decode datacenters differ."""
        self.rld: DecodeInstance | None = None
        """The relay-decode instance that holds it, if any."""
        self.flow: Any = None
        """Its WAN transfer while one is under way (``WanLink``)."""
        # what it found in the caches
        self.p_hit_blocks = 0
        """Blocks of its prefix the prefill datacenter's cache held."""
        self.hit_p = 0.0
        """Share of its input it did not prefill (``prefilled_tokens`` at the start)."""
        self.md_hit_blocks = 0
        """Blocks of its prefix the decode-side cache held."""
        self.hit_md = 0.0
        """Share of its context main decode had (the WAN payload is the rest)."""
        # its progress
        self.prefilled_tokens = 0
        """Input tokens prefilled (or found cached) so far."""
        self.rld_tokens = 0
        """Output tokens relay decode made before the handoff (or all, singular)."""
        self.finished = False
        self.gone_to_md = False
        """A relayed request whose KV reached MD while it still queued at RLD."""
        # the moments of its life, in simulated seconds
        self.arrival_s = arrival_s
        """When it arrived at prefill."""
        self.taken_s = 0.0
        """When a prefill instance took it from the queue."""
        self.prefilled_s = 0.0
        """When its last prefill pass ended."""
        self.fetched_s = 0.0
        """When its decode-side hit is in HBM (a tiered cache's DRAM or SSD read)."""
        self.md_ready_s = 0.0
        """When main decode has its context and may take it."""
        self.first_token_s = math.nan
        """When its first token reaches the user."""
