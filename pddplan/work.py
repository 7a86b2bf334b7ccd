"""Counted work: how many of each costly step a call took, as counts, not seconds.

A machine shared with other work can take twice as long for the same answer, so the
project's speed figures that tests assert, and the ones the benchmarks print beside their
times, are counts of the steps that cost: a prefill pool's TTFT tail, an evaluator state,
an SLA capacity search, a MILP solve, a planner count search, a reuse sample. Library code
calls ``tally`` at each such step; nothing is counted unless a caller asks:

    with counted() as work:
        pddplan.solve(problem)
    work["pool_tails"]  # how many prefill pool tails the solve evaluated

A ``ContextVar`` holds the counter, so nested or concurrent callers (threads, asyncio) each
see their own; a ``tally`` outside any ``counted`` block costs one lookup.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

STEPS = {
    "pool_tails": "prefill pool TTFT tails (PrefillPoolLoad.tail)",
    "states": "evaluator states: every limit of one fleet at one rate",
    "capacity_searches": "SLA capacity searches (one per deployment and router setting)",
    "count_searches": "planner count searches (prefill counts of one option and state)",
    "milp_solves": "MILP solver runs",
    "reuse_samples": "session reuse samples (one per grid rate)",
}
"""The steps counted, with what each one is."""

_current: ContextVar[Counter[str] | None] = ContextVar("pddplan_work", default=None)


@contextmanager
def counted() -> Iterator[Counter[str]]:
    """Count the steps taken inside the block, by name (``STEPS``); nested blocks count
    into their own counter only."""
    work: Counter[str] = Counter()
    token = _current.set(work)
    try:
        yield work
    finally:
        _current.reset(token)


def tally(step: str, n: int = 1) -> None:
    """Count ``n`` of ``step`` into the innermost ``counted`` block, if any."""
    work = _current.get()
    if work is not None:
        work[step] += n
