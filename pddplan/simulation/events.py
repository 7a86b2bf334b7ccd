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
        self._paused = False

    def at(self, t: float, fn: Callable[[Any], None], arg: Any = None) -> None:
        heapq.heappush(self._heap, (t, next(self._seq), fn, arg))

    def pause(self) -> None:
        """Make ``run`` return after the event now running."""
        self._paused = True

    def clear(self) -> None:
        """Drop every event not run yet."""
        self._heap.clear()

    def run(self) -> bool:
        """Run events until none is left (False) or one calls ``pause`` (True)."""
        heap, pop = self._heap, heapq.heappop
        self._paused = False
        count = 0
        while heap:
            t, _, fn, arg = pop(heap)
            self.now = t
            count += 1
            fn(arg)
            if self._paused:
                break
        self.count += count
        return self._paused
