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
from functools import cached_property

import numpy as np


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
    from scipy.optimize import brentq  # here: scipy.optimize takes 0.3 s to import

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


@dataclass(frozen=True)
class ReuseCurve:
    """A request stream's reuse times, for Che's approximation at any capacity and rate.

    Measured on the session generator's sample of the workload over ``2 x horizon_s``
    (``of_sessions``; ``measure`` is the same from any stream of prefix block ids, one sort
    of every block use, the definition the per-request measure is checked against):

    - ``returns_s``: for every block use in the first half, the time to the same block's
      next use, ``inf`` when there is none within ``horizon_s`` (the session ended, or the
      next turn reused less of the context). Che's occupancy is ``r x tokens x
      E[min(X, t_C)]`` over these.
    - ``gaps_s``: for every request of the second half that continues a context (its first
      block was used before), the time since that context's last use. A request's reused
      blocks were all touched by its context's last use, so they share that age: under LRU
      they are cached together exactly when it is below ``t_C``, and ``kept(t_C)`` is the
      share of the reuses a cache keeps.

    Exact for characteristic times up to ``horizon_s``: a longer one is treated as
    infinite (every return within the horizon hits)."""

    returns_s: np.ndarray
    """The distinct finite returns of the first half's block uses, ascending."""
    return_counts: np.ndarray
    """How many block uses return after each of ``returns_s`` (a session's next turn
    returns to every block it reuses at once: 118 to 521 uses a distinct return at the
    rates the README scenario's max-BCR search samples)."""
    uses: int
    """Block uses of the first half (finite returns and ``inf``)."""
    gaps_s: np.ndarray
    """Sorted ages of the second half's reused contexts."""
    tokens_per_request: float
    """Mean tokens a request's blocks hold (what a use brings into the cache)."""
    horizon_s: float

    @classmethod
    def measure(
        cls,
        stream: Iterable[tuple[float, Sequence[int]]],
        *,
        block_tokens: int,
        known: Iterable[int] = (),
    ) -> ReuseCurve:
        """Reuse times of ``stream`` ((arrival s, block ids), in time order), per block
        use (16 bytes a use, sorted); ``known``: block ids cached before the stream starts
        (the generator's warm contexts)."""
        times: list[float] = []
        ids: list[Sequence[int]] = []
        for t, blocks in stream:
            if len(blocks):
                times.append(t)
                ids.append(blocks)
        if not ids:
            raise ValueError("ReuseCurve.measure needs a stream with at least one block")
        lengths = np.fromiter((len(b) for b in ids), dtype=np.int64, count=len(ids))
        total = int(lengths.sum())
        id_all = np.concatenate(ids).astype(np.int64, copy=False)
        firsts = id_all[np.cumsum(lengths) - lengths]  # each request's first block
        use_of = np.repeat(np.arange(len(ids), dtype=np.int32), lengths)  # request of a use
        starts = np.asarray(times)
        # a block id names a prefix (a context's first blocks), so a request's first block
        # is only ever a first block: its previous use is its context's last. Per request:
        # the time since it (nan: a fresh context, inf: a warm one never used in the stream)
        by_first = np.argsort(firsts, kind="stable")  # by context, then in time
        again = firsts[by_first][1:] == firsts[by_first][:-1]
        last = np.full(len(ids), np.nan)
        last[by_first[1:][again]] = starts[by_first[:-1][again]]
        ages = starts - last
        warm = np.fromiter(known, dtype=np.int64)
        ages[np.isnan(last) & np.isin(firsts, warm)] = math.inf
        t_all = starts[use_of]
        end = float(times[-1])
        horizon = end / 2
        order = np.argsort(id_all, kind="stable")  # by block, then in time
        same = id_all[order][1:] == id_all[order][:-1]
        nxt = np.full(len(id_all), np.inf)
        nxt[order[:-1][same]] = t_all[order][1:][same] - t_all[order][:-1][same]
        x = nxt[t_all <= horizon]
        x = np.sort(np.where(x <= horizon, x, np.inf))
        second = (starts > horizon) & ~np.isnan(ages)
        returns, counts = np.unique(x[np.isfinite(x)], return_counts=True)
        return cls(
            returns_s=returns,
            return_counts=counts,
            uses=len(x),
            gaps_s=np.sort(ages[second]),
            tokens_per_request=block_tokens * total / len(ids),
            horizon_s=horizon,
        )

    @classmethod
    def of_sessions(
        cls,
        times_s: np.ndarray,
        sessions: np.ndarray,
        reused: np.ndarray,
        blocks: np.ndarray,
        *,
        block_tokens: int,
    ) -> ReuseCurve:
        """``measure`` of a stream of session turns, per request, not per block use: what
        ``measure`` gives on the same stream (``tests/test_hit_curve.py`` holds the two
        equal to the bit), at any size.

        Request ``j`` (in time order) at ``times_s[j]`` continues or opens session
        ``sessions[j]``, reuses the first ``reused[j]`` blocks of that session's context
        (0: it opens the session) and leaves a context of ``blocks[j]`` blocks. A block is
        held by one context only (a session's next turn copies its prefix, the rest is new),
        so the next use of each of turn ``j``'s blocks is the session's next turn ``s``,
        for its first ``reused[s]`` blocks, and none for the rest: ``reused[s]`` returns of
        ``times_s[s] - times_s[j]``, ``blocks[j] - reused[s]`` uses that never return. A
        turn that reuses blocks with no earlier turn of its session in the stream continues
        a context from before the stream (age ``inf``)."""
        n = len(times_s)
        if n == 0:
            raise ValueError("ReuseCurve.of_sessions needs at least one request")
        order = np.argsort(sessions, kind="stable")  # by session, then in time
        same = sessions[order][1:] == sessions[order][:-1]
        after = np.full(n, -1)
        after[order[:-1][same]] = order[1:][same]  # each turn's session's next turn
        before = np.full(n, -1)
        before[order[1:][same]] = order[:-1][same]
        horizon = float(times_s[-1]) / 2
        first = times_s <= horizon
        back = first & (after >= 0)
        x = times_s[after[back]] - times_s[back]
        count = reused[after[back]]
        within = x <= horizon
        x, count = x[within], count[within]
        returns, at = np.unique(x[count > 0], return_inverse=True)
        counts = np.bincount(at, weights=count[count > 0], minlength=len(returns))
        ages = np.where(before >= 0, times_s - times_s[before], np.nan)
        ages[(before < 0) & (reused > 0)] = math.inf
        second = (times_s > horizon) & ~np.isnan(ages)
        return cls(
            returns_s=returns,
            return_counts=counts.astype(np.int64),
            uses=int(blocks[first].sum()),
            gaps_s=np.sort(ages[second]),
            tokens_per_request=block_tokens * int(blocks.sum()) / n,
            horizon_s=horizon,
        )

    def held_tokens(self, t_s: float, rate_rps: float) -> float:
        """Tokens an LRU cache holds when contexts stay ``t_s`` after their last use, at
        ``rate_rps`` requests a second: ``r x tokens x E[min(X, t)]``."""
        x, c = self.returns_s, self.return_counts
        i = int(np.searchsorted(x, t_s, side="left"))
        below = float(x[:i] @ c[:i])
        mean = (below + t_s * (self.uses - int(c[:i].sum()))) / self.uses
        return rate_rps * self.tokens_per_request * mean

    @cached_property
    def _occupancy(self) -> tuple[np.ndarray, np.ndarray]:
        """Breakpoints of ``held_tokens`` at rate 1: (times, tokens), piecewise linear."""
        x, c = self.returns_s, self.return_counts
        below = np.cumsum(x * c)
        n_below = np.cumsum(c)
        t = np.concatenate([[0.0], x, [self.horizon_s]])
        before = np.concatenate([[0.0], below, [float(below[-1]) if len(x) else 0.0]])
        n_before = np.concatenate([[0], n_below, [int(n_below[-1]) if len(x) else 0]])
        held = (before + t * (self.uses - n_before)) / self.uses * self.tokens_per_request
        return t, held

    def retention_s(self, capacity_tokens: float, rate_rps: float) -> float:
        """Che's characteristic time: how long a context stays after its last use in an
        LRU cache of ``capacity_tokens`` at ``rate_rps`` (``inf`` past the horizon)."""
        t, held = self._occupancy
        want = capacity_tokens / rate_rps
        if want >= held[-1]:
            return math.inf
        return float(np.interp(want, held, t))

    def kept(self, t_s: float) -> float:
        """The share of reused contexts younger than ``t_s``: those the cache still holds."""
        if len(self.gaps_s) == 0:
            return 1.0
        return float(np.searchsorted(self.gaps_s, t_s, side="left")) / len(self.gaps_s)

    def hit_share(self, capacity_tokens: float, rate_rps: float) -> float:
        """The share of reused contexts an LRU cache of ``capacity_tokens`` keeps."""
        return self.kept(self.retention_s(capacity_tokens, rate_rps))

    def capacity_for(self, share: float, rate_rps: float) -> float:
        """The fewest tokens of LRU cache that keep ``share`` of the reused contexts."""
        if share <= 0:
            return 0.0
        gaps = self.gaps_s
        k = min(max(math.ceil(share * len(gaps)), 1), len(gaps))
        t = float(gaps[k - 1]) if len(gaps) else 0.0
        t = t * (1 + 1e-9) + 1e-9  # kept counts gaps strictly below t, past rounding
        return self.held_tokens(min(t, self.horizon_s), rate_rps)


@dataclass(frozen=True)
class RateBlend:
    """Hit shares between two samples of one workload's reuse, taken at rates ``r_lo <=
    r_hi`` around the rate asked for: ``(1 - weight) x low + weight x high``, with
    ``weight`` the rate's place between them in log rate (``Problem.reuse_between``)."""

    low: ReuseCurve
    high: ReuseCurve
    weight: float

    def hit_share(self, capacity_tokens: float, rate_rps: float) -> float:
        """The share of reused contexts an LRU cache of ``capacity_tokens`` keeps."""
        lo = self.low.hit_share(capacity_tokens, rate_rps)
        if self.weight <= 0:
            return lo
        return (1 - self.weight) * lo + self.weight * self.high.hit_share(capacity_tokens, rate_rps)
