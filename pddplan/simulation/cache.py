"""The simulator's prefix cache for the session generator's block ids: the same LRU as
``trace.PrefixCache``, in time that does not grow with a request's length.

The session generator (``pddplan.workload.sessions.SessionSource``) names blocks so that every id has
one fixed chain of ids before it (a context is a prefix of an older context plus fresh
ids), and ids increase along a chain. A cache that only ever holds whole prefixes of such
chains stays *prefix-closed*: with ``PrefixCache``'s LRU (a block's age is that of the
last request that touched it; within a request the tail goes first), a block is never
evicted before the blocks it hangs from, because every request that touches a block
touches its whole prefix. Two consequences make this cache fast:

- the cached part of any chain is a prefix of it, so a lookup is a binary search for its
  first missing block (``O(log n)`` probes, not ``n``);
- the blocks a logged request still owns (last touched by it) are a suffix of its blocks,
  so an eviction finds them by binary search too, and touches only the blocks it evicts.

Block ages live in an array indexed by block id (the ids are small dense integers), not a
dict, and ids increase along a chain, so a chain is a few runs of consecutive ids (the
fresh blocks of each turn it grew by): touching a request's blocks writes one slice per
run. ``tests/test_sim_cache.py`` checks that it returns exactly what ``PrefixCache``
returns on generated sessions. Traces keep ``PrefixCache``: their ids carry no such
guarantee.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Sequence

from pddplan.workload.cache import PrefixCache


class ChainCache:
    """A prefix cache of chain-named blocks: unbounded (``capacity_blocks`` None) or LRU
    with room for ``capacity_blocks`` blocks."""

    def __init__(self, capacity_blocks: int | None) -> None:
        self.capacity = capacity_blocks
        # per block id: 0 when not cached, else the number of the last insert touching it
        # (unbounded: 1); a byte is enough when nothing is ever evicted
        self._age = array("B" if capacity_blocks is None else "i")
        self._item = 1 if capacity_blocks is None else self._age.itemsize
        self._served = 0
        self._resident = 0  # bounded caches only
        self._log: deque[tuple[int, Sequence[int], int]] = deque()  # (insert, blocks, length)
        self._constants: dict[int, array] = {}
        self.evicted_blocks = 0
        """Blocks evicted so far (a bounded cache's turnover)."""

    @property
    def resident_blocks(self) -> int:
        """Blocks cached now."""
        return self._age.count(1) if self.capacity is None else self._resident

    def lookup(self, blocks: Sequence[int]) -> int:
        """Blocks of the leading run already cached (the cache does not change)."""
        age, size = self._age, len(self._age)
        n = len(blocks)
        last = blocks[-1] if n else -1
        if last < 0:
            return 0
        if last < size and age[last]:
            return n  # the whole chain (the common case once a session is warm)
        first = blocks[0]
        if first >= size or not age[first]:
            return 0
        lo, hi = 1, n - 1  # blocks[lo - 1] is cached, blocks[hi] is not
        while lo < hi:
            mid = (lo + hi) // 2
            b = blocks[mid]
            if b < size and age[b]:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def insert(self, blocks: Sequence[int], known: int = 0) -> None:
        """Every block enters the cache as the most recently used, evicting the least
        recently used ones beyond capacity. ``blocks`` must not change afterwards (the
        log keeps it). ``known``: what an earlier lookup of these blocks returned (an
        unbounded cache skips those blocks; a bounded one checks it before searching)."""
        if not blocks:
            return
        age = self._age
        if blocks[-1] >= len(age):  # the chain's largest id
            age.frombytes(bytes((max(blocks[-1] + 1, 2 * len(age)) - len(age)) * self._item))
        n = len(blocks)
        if self.capacity is None:  # nothing to count or evict: mark the rest
            _fill(age, blocks, known, n, self._constant(1, n - known))
            return
        if not (known < n and age[blocks[known]] == 0 and (known == 0 or age[blocks[known - 1]])):
            known = self.lookup(blocks)  # the hint is stale: some were cached or evicted since
        self._resident += n - known
        self._served += 1
        _fill(age, blocks, 0, n, array("i", [self._served]) * n)
        self._log.append((self._served, blocks, n))
        while self._resident > self.capacity:
            self._evict_oldest_entry()

    def resize(self, capacity_blocks: int) -> None:
        """A bounded cache to room for ``capacity_blocks`` blocks: added room is empty;
        beyond it, the least recently used blocks are evicted, as an insert evicts."""
        if self.capacity is None:
            raise ValueError("an unbounded cache has no size to change")
        self.capacity = capacity_blocks
        while self._resident > self.capacity:
            self._evict_oldest_entry()

    def _constant(self, value: int, length: int) -> array:
        """At least ``length`` copies of ``value`` (0 or 1), kept from call to call."""
        have = self._constants.get(value)
        if have is None or len(have) < length:
            have = self._constants[value] = array(self._age.typecode, [value]) * (2 * length)
        return have

    def _evict_oldest_entry(self) -> None:
        """Drop the oldest logged request's blocks that it still owns, tail first, until the
        cache is back to capacity (what is left of it goes back to the front of the log)."""
        age = self._age
        served, blocks, n = self._log.popleft()  # the entry is blocks[:n]
        # owned blocks (age == served) are the suffix after the re-touched ones (age > served)
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) // 2
            if age[blocks[mid]] > served:
                lo = mid + 1
            else:
                hi = mid
        keep = max(lo, n - (self._resident - (self.capacity or 0)))  # only a bounded cache evicts
        _fill(age, blocks, keep, n, self._constant(0, n - keep))
        self._resident -= n - keep
        self.evicted_blocks += n - keep
        if keep > lo:
            self._log.appendleft((served, blocks, keep))


def _fill(age: array, blocks: Sequence[int], lo: int, hi: int, fill: array) -> None:
    """``age[b] = fill[0]`` for the blocks ``blocks[lo:hi]`` (``fill``: at least ``hi - lo``
    copies of one value), one slice per run of consecutive ids (a chain is a few runs: the
    fresh blocks of each turn it grew by)."""
    while lo < hi:
        first = blocks[lo]
        end = hi  # blocks[lo:end] is one run when its ids span exactly its length
        if blocks[end - 1] - first != end - 1 - lo:
            a, b = lo, end - 1  # blocks[a] is in the run, blocks[b] is not
            while b - a > 1:
                mid = (a + b) // 2
                if blocks[mid] - first == mid - lo:
                    a = mid
                else:
                    b = mid
            end = b
        age[first : first + end - lo] = fill[: end - lo]
        lo = end


Cache = PrefixCache | ChainCache
"""Either cache: the simulator uses ``ChainCache`` for sampled sessions, ``PrefixCache``
for traces."""
