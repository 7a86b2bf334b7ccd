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


class StackDistances:
    """Stack distances of block uses fed one request at a time (``add``), as a prefix cache
    sees them: a request looks all its blocks up first, then they enter the cache tail
    first, so that its first block is the most recently used (a radix cache evicts leaves
    before the prefixes they hang from, as ``pddplan.workload.cache.PrefixCache`` does).
    Block ids that name prefix chains (Mooncake's ``hash_ids``) keep such a cache
    prefix-closed, so the blocks that hit are each request's leading run. A Fenwick tree
    over use times marks each block's latest use; it doubles as uses come in."""

    def __init__(self) -> None:
        self._last: dict[int, int] = {}
        self._tree = [0] * 1025
        self._marks = bytearray(1024)
        self._t = 0
        self.counts: dict[int, int] = {}
        """Distance + 1 (the smallest capacity in blocks that hits) -> uses."""
        self.uses = 0

    def _grow(self, need: int) -> None:
        size = len(self._marks)
        while size < need:
            size *= 2
        self._marks.extend(bytes(size - len(self._marks)))
        tree = [0] * (size + 1)
        for i, m in enumerate(self._marks, start=1):  # O(n) rebuild from the marks
            if m:
                tree[i] += 1
            j = i + (i & -i)
            if j <= size:
                tree[j] += tree[i]
        self._tree = tree

    def _add(self, i: int, v: int) -> None:
        self._marks[i] += v
        tree, n = self._tree, len(self._marks)
        i += 1
        while i <= n:
            tree[i] += v
            i += i & -i

    def _prefix(self, i: int) -> int:  # marks at times < i
        tree, s = self._tree, 0
        while i > 0:
            s += tree[i]
            i -= i & -i
        return s

    def add(self, blocks: Sequence[int]) -> list[float]:
        """One request's blocks: their distances (``inf`` for a first use), in order."""
        if self._t + len(blocks) > len(self._marks):
            self._grow(self._t + len(blocks))
        last, counts, now = self._last, self.counts, self._prefix(self._t)
        out = []
        for b in blocks:
            prev = last.get(b)
            if prev is None:
                out.append(math.inf)
                continue
            d = now - self._prefix(prev + 1)  # distinct blocks used since prev
            counts[d + 1] = counts.get(d + 1, 0) + 1
            out.append(float(d))
        for k, b in enumerate(reversed(blocks)):  # the tail enters first
            prev = last.get(b)
            if prev is not None:
                self._add(prev, -1)
            self._add(self._t + k, 1)
            last[b] = self._t + k
        self._t += len(blocks)
        self.uses += len(blocks)
        return out

    def curve(self) -> HitCurve:
        """The hit rate at every capacity: a cache of ``n`` blocks hits the uses whose
        distance is below ``n``."""
        if not self.uses:
            return HitCurve(np.array([0.0]), np.array([0.0]), 0)
        sizes = np.array(sorted(self.counts), dtype=float)
        hits = np.cumsum([self.counts[int(k)] for k in sizes]) / self.uses
        return HitCurve(np.concatenate([[0.0], sizes]), np.concatenate([[0.0], hits]), self.uses)


def stack_distances(requests: Iterable[Sequence[int]]) -> np.ndarray:
    """Every block use's stack distance, request by request (``StackDistances``)."""
    counter = StackDistances()
    return np.array([d for r in requests for d in counter.add(r)], dtype=float)


def lru_hit_curve(requests: Iterable[Sequence[int]]) -> HitCurve:
    """The hit rate at every capacity from one pass of stack distances."""
    counter = StackDistances()
    for r in requests:
        counter.add(r)
    return counter.curve()
