"""The prefix cache that trace replay and the simulator use: blocks of a request's prefix,
unbounded or LRU (``PrefixCache``)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from functools import partial
from itertools import repeat, takewhile
from operator import getitem, setitem

import numpy as np

MAX_BITMAP_ID = 1 << 26
"""Block ids below this (64 MB of byte map at most) are tracked in a byte map; a trace with
other ids (negative, or large hashes) uses a set."""


class PrefixCache:
    """A prefix cache of blocks: unbounded (``capacity_blocks`` None) or LRU.

    Unbounded: one byte per block id in a growing bytearray (Mooncake's hash ids are small
    dense integers), a set for other ids. LRU: each block maps to the sequence number of the
    request that last touched it, and a log keeps every request's blocks; evicting walks the
    log from the oldest request and drops the blocks whose last touch is that entry. Within
    one request the tail blocks go first, as a radix cache evicts leaves before the prefixes
    they hang from. This is exact LRU when a request's block ids are distinct (they name its
    successive prefix blocks). The loops run inside C
    (``takewhile``, ``dict.update``, ``map`` drained by a zero-length deque): a
    million-request trace touches tens of millions of blocks. The byte map is read and
    written through ``operator.getitem`` / ``setitem`` rather than the bytearray's own
    ``__getitem__`` / ``__setitem__``, which are slot wrappers that build an argument tuple
    per call (about twice as slow per block).
    """

    def __init__(self, capacity_blocks: int | None) -> None:
        self.capacity = capacity_blocks
        self._last: dict[int, int] = {}
        self._log: deque[tuple[int, Sequence[int]]] = deque()
        self._served = 0
        self._seen: bytearray | None = bytearray(1 << 16)
        self._has = partial(getitem, self._seen)  # the byte map grows in place: stays valid
        self._other: set[int] = set()
        self.evicted_blocks = 0
        """Blocks evicted so far (a bounded cache's turnover)."""

    @property
    def resident_blocks(self) -> int:
        """Blocks cached now (a bounded cache; an unbounded one counts what it holds)."""
        if self.capacity is not None:
            return len(self._last)
        if self._seen is None:
            return len(self._other)
        return self._seen.count(1)

    def replay(self, hash_ids: list[int]) -> int:
        """Blocks of the leading run already cached; then every block enters the cache."""
        if self.capacity is None:
            return self._replay_unbounded(hash_ids)
        run = self.lookup(hash_ids)
        self.insert(hash_ids)
        return run

    def lookup(self, hash_ids: Sequence[int]) -> int:
        """Blocks of the leading run already cached (the cache does not change)."""
        if self.capacity is not None:
            return len(list(takewhile(self._last.__contains__, hash_ids)))
        seen = self._seen
        if seen is None:
            return len(list(takewhile(self._other.__contains__, hash_ids)))
        # a negative id would index the byte map from its end, so they take the slow path;
        # an id past its end was never inserted (IndexError: the slow path says so)
        if hash_ids and min(hash_ids) >= 0:
            try:
                return len(list(takewhile(self._has, hash_ids)))
            except IndexError:
                pass
        return len(list(takewhile(lambda h: 0 <= h < len(seen) and seen[h], hash_ids)))

    def insert(self, hash_ids: Sequence[int], known: int = 0) -> None:
        """Every block enters the cache as the most recently used, evicting the least
        recently used ones beyond capacity. ``known``: what a lookup of these blocks
        returned since the last eviction (an unbounded cache skips those blocks)."""
        if self.capacity is None:
            hash_ids = hash_ids[known:] if known else hash_ids
            seen = self._seen
            if seen is not None and _is_range(hash_ids) and hash_ids[-1] < len(seen):
                # a run of fresh consecutive ids (a sampled request's new blocks): one slice
                seen[hash_ids[0] : hash_ids[-1] + 1] = b"\x01" * len(hash_ids)
                return
            if seen is not None and hash_ids and min(hash_ids) >= 0:
                try:
                    _drain(map(setitem, repeat(seen), hash_ids, repeat(1)))
                    return
                except IndexError:  # an id past the byte map: grow it (below)
                    pass
            self._replay_unbounded(hash_ids)
            return
        last = self._last
        self._served += 1
        last.update(dict.fromkeys(hash_ids, self._served))
        self._log.append((self._served, hash_ids[::-1]))  # within a request, the tail goes first
        while len(last) > self.capacity:
            self._evict_oldest_entry()

    def _evict_oldest_entry(self) -> None:
        """Drop the oldest log entry's still-resident blocks, in order, until the cache is
        back to capacity (the rest of the entry goes back to the front of the log)."""
        last, capacity = self._last, self.capacity
        if capacity is None:  # an unbounded cache never evicts
            return
        served, blocks = self._log.popleft()
        owned = [h for h in blocks if last.get(h) == served]
        over = len(last) - capacity
        if len(owned) > over:
            self._log.appendleft((served, owned[over:]))
            owned = owned[:over]
        self.evicted_blocks += len(owned)
        _drain(map(last.pop, owned))  # dict.pop is a fast call; __delitem__ is a slot wrapper

    def _replay_unbounded(self, hash_ids: Sequence[int]) -> int:
        if not hash_ids:
            return 0
        if self._seen is not None:
            lo, hi = min(hash_ids), max(hash_ids)
            if lo >= 0 and hi < MAX_BITMAP_ID:
                seen = self._seen
                if hi >= len(seen):
                    seen.extend(bytes(min(max(hi + 1, 2 * len(seen)), MAX_BITMAP_ID) - len(seen)))
                run = len(list(takewhile(self._has, hash_ids)))
                _drain(map(setitem, repeat(seen), hash_ids, repeat(1)))
                return run
            # an id the byte map cannot hold: move every cached id to the set, for good
            self._other.update(np.flatnonzero(np.frombuffer(self._seen, dtype=np.uint8)).tolist())
            self._seen = None
        other = self._other
        run = len(list(takewhile(other.__contains__, hash_ids)))
        other.update(hash_ids)
        return run


def _drain(iterator: Iterator[object]) -> None:
    deque(iterator, maxlen=0)


def _is_range(ids: Sequence[int]) -> bool:
    """Whether ``ids`` (a list: other sequences take the general path) are ``first, first +
    1, ...`` from a ``first`` >= 0 (the comparison runs in C, several times faster than
    writing the ids one by one)."""
    if not ids or ids[0] < 0 or ids[-1] != ids[0] + len(ids) - 1:
        return False
    return ids == list(range(ids[0], ids[-1] + 1))
