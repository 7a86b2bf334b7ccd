"""The simulator's event queue."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any


class Events:
    """A discrete-event queue: callbacks at times, run in time order (ties in the order
    they were scheduled, so a run is deterministic)."""

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, int, Callable[[Any], None], Any]] = []
        self._seq = itertools.count()
        self.count = 0

    def at(self, t: float, fn: Callable[[Any], None], arg: Any = None) -> None:
        heapq.heappush(self._heap, (t, next(self._seq), fn, arg))

    def run(self) -> None:
        heap, pop = self._heap, heapq.heappop
        count = 0
        while heap:
            t, _, fn, arg = pop(heap)
            self.now = t
            count += 1
            fn(arg)
        self.count += count
