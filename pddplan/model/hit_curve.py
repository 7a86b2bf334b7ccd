"""A prefix cache's hit rate as a curve of its capacity (LRU), two ways.

- **From the sessions' return times** (``che_hit_rate``): Che's characteristic-time
  approximation. Under LRU, an item stays cached for about ``t_C`` after its last use, the
  same ``t_C`` for every item, set by the capacity: the bytes held are what the uses of
  the last ``t_C`` seconds brought in,

      C = r x E[bytes] x E[min(X, t_C)],

  where ``r`` is the use rate (req/s), ``E[bytes]`` a use's context and ``X`` the time to
  the same context's next use (infinite when the session ends there). A use hits when its
  context was used less than ``t_C`` ago: ``hit = P(X < t_C)``. Exponential returns (mean
  ``T``, every session going on) give ``C = r E[bytes] T hit``, the linear rule; periodic
  returns (every ``T`` exactly) give the LRU cliff: no hit below ``r T E[bytes]``, all
  above it (Che, Tung and Wang 2002; Fricker, Robert and Roberts 2012 for its accuracy).
- **From a trace** (``lru_hit_curve``): Mattson's stack distances (Mattson et al. 1970)
  over the trace's block hashes. A use of block ``b`` hits an LRU cache of ``n`` blocks iff
  fewer than ``n`` distinct blocks were used since ``b``'s previous use, so one pass that
  counts those (a Fenwick tree over use times, O(N log N)) gives the hit rate at every
  capacity at once: the share of prefix blocks found, what trace replay with a cache of
  that size finds (``workload fit --md-cache-tokens``), for every size.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq


def che_hit_rate(
    capacity_bytes: float,
    rate_rps: float,
    bytes_per_use: float,
    returns_s: np.ndarray,
) -> float:
    """The LRU hit rate of a cache of ``capacity_bytes`` (module docstring). ``returns_s``:
    samples of the time from a use to its context's next use, ``inf`` where there is none
    (the session ended); their empirical distribution stands for ``X``."""
    x = np.sort(np.asarray(returns_s, dtype=float))
    if capacity_bytes < 0 or rate_rps <= 0 or bytes_per_use <= 0 or len(x) == 0:
        raise ValueError("che_hit_rate needs capacity >= 0, rate > 0, bytes > 0 and samples")
    if capacity_bytes == 0:
        return 0.0
    load = rate_rps * bytes_per_use  # bytes brought in per second

    def held(t: float) -> float:  # bytes held when items live t after their last use
        return load * float(np.minimum(x, t).mean()) - capacity_bytes

    finite = x[np.isfinite(x)]
    top = float(finite.max()) if len(finite) else 0.0
    if held(top) <= 0:  # items outlive the longest return: every return hits
        return len(finite) / len(x)
    t_c = brentq(held, 0.0, top, xtol=1e-12 * max(top, 1.0)) if top > 0 else 0.0
    return float(np.searchsorted(x, t_c, side="left")) / len(x)


@dataclass(frozen=True)
class HitCurve:
    """An LRU cache's hit rate against its capacity in blocks: ``hits[i]`` at
    ``blocks[i]`` (both increasing; the hit rate is a step function between them)."""

    blocks: np.ndarray
    hits: np.ndarray
    uses: int
    """Block uses the curve was measured on."""

    def at(self, capacity_blocks: float) -> float:
        """The hit rate of a cache holding ``capacity_blocks`` blocks."""
        i = int(np.searchsorted(self.blocks, capacity_blocks, side="right")) - 1
        return float(self.hits[i]) if i >= 0 else 0.0


def stack_distances(requests: Iterable[Sequence[int]]) -> np.ndarray:
    """Per block use, request by request: how many distinct blocks were used since the same
    block's previous use (``inf`` for a first use), as a prefix cache sees it. A request
    looks all its blocks up first, then they enter the cache tail first, so that its first
    block is the most recently used (a radix cache evicts leaves before the prefixes they
    hang from, as ``pddplan.workload.cache.PrefixCache`` does). Block ids that name prefix
    chains (Mooncake's ``hash_ids``) keep such a cache prefix-closed, so the blocks that hit
    are each request's leading run."""
    last: dict[int, int] = {}
    requests = [list(r) for r in requests]
    n = sum(len(r) for r in requests)
    tree = [0] * (n + 1)  # Fenwick tree: 1 at each block's latest use time

    def add(i: int, v: int) -> None:
        i += 1
        while i <= n:
            tree[i] += v
            i += i & -i

    def prefix(i: int) -> int:  # markers at times < i
        s = 0
        while i > 0:
            s += tree[i]
            i -= i & -i
        return s

    out = np.full(n, math.inf)
    t = 0
    for r in requests:
        now = prefix(t)
        for k, b in enumerate(r):
            prev = last.get(b)
            if prev is not None:
                out[t + k] = now - prefix(prev + 1)  # distinct blocks used since prev
        for k, b in enumerate(reversed(r)):  # the tail enters first
            prev = last.get(b)
            if prev is not None:
                add(prev, -1)
            add(t + k, 1)
            last[b] = t + k
        t += len(r)
    return out


def lru_hit_curve(requests: Iterable[Sequence[int]]) -> HitCurve:
    """The hit rate at every capacity from one pass of stack distances: a cache of ``n``
    blocks hits the uses whose distance is below ``n``."""
    d = stack_distances(requests)
    finite = np.sort(d[np.isfinite(d)])
    if len(d) == 0:
        return HitCurve(np.array([0.0]), np.array([0.0]), 0)
    sizes, counts = np.unique(finite + 1, return_counts=True)  # distance k hits from k + 1
    blocks = np.concatenate([[0.0], sizes])
    hits = np.concatenate([[0.0], np.cumsum(counts) / len(d)])
    return HitCurve(blocks, hits, len(d))
