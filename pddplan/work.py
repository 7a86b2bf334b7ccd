"""Counted work: how many of each costly step a call took, as counts, not seconds; and the
wall-clock safety stop, checked between those steps.

A machine shared with other work can take twice as long for the same answer, so the
project's speed figures that tests assert, and the ones the benchmarks print beside their
times, are counts of the steps that cost: a prefill pool's TTFT tail, an evaluator state,
an SLA capacity search, a MILP solve, a planner count search, a reuse sample. Library code
calls ``tally`` at each such step; nothing is counted unless a caller asks:

    with counted() as work:
        pddplan.solve(problem)
    work["pool_tails"]  # how many prefill pool tails the solve evaluated

The searches stop on budgets of counted work (``docs/milp.md``, "Work budgets"), so an
answer does not depend on the machine's speed. The time limit is a safety stop only:
inside a ``deadline`` block, a ``tally`` of a step that starts a unit of work
(``CHECKED``) past the deadline raises ``TimeLimitReached``, which the search catches and
reports as ``time_limit``. Nothing is half-built when it is raised: each such step is
counted before its unit starts.

``ContextVar``s hold the counters and the deadline, so nested or concurrent callers
(threads, asyncio) each see their own; a ``tally`` outside any block costs two lookups.

May import: nothing.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import NamedTuple

STEPS = {
    "pool_tails": "prefill pool TTFT tails (PrefillPoolLoad.tail)",
    "states": "evaluator states: every limit of one fleet at one rate",
    "capacity_searches": "SLA capacity searches (one per deployment and router setting)",
    "count_searches": "planner count searches (prefill counts of one option and state)",
    "milp_solves": "MILP solver runs",
    "milp_nodes": "branch-and-bound nodes, summed over the MILP solves",
    "reuse_samples": "session reuse samples (one per grid rate)",
    "rate_points": "rates a search priced (minimum-cost points and relaxation probes)",
    "runner_up_bounds": "runner-up families bounded (a relaxation on each family's space)",
    "runner_up_plans": "runner-up families planned (a minimum-cost search each)",
}
"""The steps counted, with what each one is."""
CHECKED = frozenset({"count_searches", "capacity_searches", "milp_solves", "reuse_samples"})
"""The steps at whose start the deadline is checked: each is a unit of work tens of
milliseconds or more long, counted before anything of it is built."""


class TimeLimitReached(Exception):
    """The wall-clock safety stop of a ``deadline`` block passed."""


class _Deadline(NamedTuple):
    at: float
    clock: Callable[[], float]


_counters: ContextVar[tuple[Counter[str], ...]] = ContextVar("pddplan_work", default=())
_deadline: ContextVar[_Deadline | None] = ContextVar("pddplan_deadline", default=None)


@contextmanager
def counted() -> Iterator[Counter[str]]:
    """Count the steps taken inside the block, by name (``STEPS``); a step taken inside
    nested blocks counts in each of them."""
    work: Counter[str] = Counter()
    token = _counters.set((*_counters.get(), work))
    try:
        yield work
    finally:
        _counters.reset(token)


def tally(step: str, n: int = 1) -> None:
    """Count ``n`` of ``step`` into every enclosing ``counted`` block; past the deadline of
    an enclosing ``deadline`` block, a ``CHECKED`` step raises ``TimeLimitReached``."""
    for work in _counters.get():
        work[step] += n
    limit = _deadline.get()
    if limit is not None and step in CHECKED and limit.clock() > limit.at:
        raise TimeLimitReached


def wall_clock() -> float:
    """The wall clock every safety stop reads by default: ``time.perf_counter``, looked up
    at each call (so a test can make it run fast, as a slow machine would)."""
    return time.perf_counter()


@contextmanager
def deadline(at: float | None, clock: Callable[[], float] = wall_clock) -> Iterator[None]:
    """The wall-clock safety stop: inside the block, work started after ``clock()`` passes
    ``at`` raises ``TimeLimitReached`` (``tally``). ``at`` None: no stop (the block lifts
    any outer one, e.g. to finish evaluating a plan found in time)."""
    token = _deadline.set(None if at is None else _Deadline(at, clock))
    try:
        yield
    finally:
        _deadline.reset(token)
