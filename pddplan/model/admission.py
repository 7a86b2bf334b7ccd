"""Main decode's admission: the wait for a decode slot (``md_admission``, Erlang C over the
pool's sequence slots), the first decode step a request joins (``first_decode_step_s``), the
probability that a request waits (``md_wait_probability``) and the grid of those
probabilities the planner's counts are read on (``ADMISSION_GRID``)."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from pddplan.model.queueing import erlang_c


class Admission(NamedTuple):
    """The wait for a decode slot at main decode (``md_admission``): with probability
    ``wait_prob``, exponential of mean ``mean_s``; ``applies`` per class (or per entry):
    whether the class waits there for its first token."""

    wait_prob: float
    mean_s: float
    applies: np.ndarray


def md_admission(
    *,
    batch: int,
    instances: int,
    utilization: float,
    mean_service_s: float,
    service_cv2: float,
    applies: np.ndarray,
    steps: tuple[np.ndarray, np.ndarray] | None = None,
) -> Admission | None:
    """Main decode's admission: ``instances x batch`` slots (the operating batch of each
    instance), each held for a request's decode, busy ``utilization`` at the operating
    step (``mean_service_s`` per request there, squared CV ``service_cv2`` over the
    classes).

    Continuous batching runs a part-full batch faster: with ``steps`` (batches, step
    seconds; ``Problem.decode_steps``) the pool is a birth-death chain whose departure rate
    at ``n`` running sequences (spread evenly over the instances) is
    ``mu(n) = (n / S) (step(batch) / step(n / instances)) lambda / utilization``, ``S`` the
    slots (``mu(S) = lambda / utilization``), and past ``S`` arrivals queue at ``mu(S)``:
    ``pi(n) ~ prod_(k <= n) lambda / mu(k)``, ``P(wait) = P(N >= S)`` (Poisson arrivals see
    the time average). Without ``steps`` every ``mu(n) = n mu(S) / S``: Erlang C. The wait
    of those that wait is exponential of mean ``(1 + cs2) / 2 x 1 / (mu(S) - lambda)``
    (Allen-Cunneen). None without load; saturated: a certain, unbounded wait."""
    slots = batch * instances
    if utilization <= 0 or slots < 1 or mean_service_s <= 0:
        return None
    if utilization >= 1:
        return Admission(1.0, math.inf, applies)
    mean = (1.0 + service_cv2) * mean_service_s / (2.0 * (1.0 - utilization) * slots)
    if steps is None:
        return Admission(erlang_c(slots, utilization * slots), mean, applies)
    wait = float(md_wait_probability(batch, instances, steps, np.array([utilization]))[0])
    return Admission(wait, mean, applies)


STEP_IN_PROGRESS = 0.5
"""The share of a decode step a request admitted to a busy instance waits before its own
step, on average: engines form their batch between steps, and a request arrives at a
random point of the step in progress (the residual of a fixed-length step: half of it)."""


def first_decode_step_s(
    batch: int, step_s: float, steps: tuple[np.ndarray, np.ndarray], utilization: float
) -> float:
    """The mean time from a request's admission at main decode to its first token: the rest
    of the step in progress (``STEP_IN_PROGRESS`` of a step) and one step, at the batch an
    instance runs when it is ``utilization`` busy at its operating point (``batch`` at
    ``step_s``, ``Problem.decode_point``).

    Busy ``u`` at the operating point, an instance makes ``u x batch / step_s`` tokens a
    second; a part-full batch steps faster, so the batch it runs is the ``b`` with
    ``b / step(b)`` equal to that (``steps``: ``Problem.decode_steps``), below ``u x batch``
    (the occupancy the operating step alone would give). The planner and the evaluator
    both take ``utilization`` at the utilization cap, the most any plan runs main decode
    at: a charge per main-decode option, the same in every plan that buys it."""
    batches, seconds = steps
    if batch < 1:  # nothing fits: a bound
        return (1.0 + STEP_IN_PROGRESS) * step_s
    if utilization <= 0:  # idle: no step in progress, one step of one sequence
        return float(np.interp(1.0, batches, seconds))
    made = np.maximum.accumulate(batches / seconds)  # tokens a second, by batch
    running = float(np.interp(utilization * batch / step_s, made, batches))
    return (1.0 + STEP_IN_PROGRESS) * float(np.interp(running, batches, seconds))


MD_CHAIN_SLOTS = 2048
"""Above this many slots ``md_wait_probability`` takes Erlang C instead of the chain (an
upper bound on it; near full load, where either is above a tail budget's share, the two
differ by a few percent: 16 x 163 H200 slots at 90% busy wait 4.3e-8 against 6.6e-8)."""


def md_wait_probability(
    batch: int, instances: int, steps: tuple[np.ndarray, np.ndarray], utilization: np.ndarray
) -> np.ndarray:
    """``md_admission``'s ``P(wait)`` at each of ``utilization`` (each in (0, 1)): the
    chain's ``pi(n) ~ u^n prod_(k <= n) (S / k) step(k / I) / step(batch)`` for n <= S,
    geometric at ``u`` past it, normalized in logs; past ``MD_CHAIN_SLOTS`` slots, Erlang C."""
    slots = batch * instances
    if slots > MD_CHAIN_SLOTS:  # Erlang C: a bound (every part-full batch at the full step)
        return np.array([erlang_c(slots, x * slots) for x in np.asarray(utilization)])
    batches, seconds = steps
    n = np.arange(1, slots + 1, dtype=float)
    full = float(np.interp(batch, batches, seconds))
    shape = np.cumsum(np.log(slots / n) + np.log(np.interp(n / instances, batches, seconds) / full))
    u = np.asarray(utilization, dtype=float)[:, None]
    log_pi = np.concatenate([np.zeros((len(u), 1)), n * np.log(u) + shape], axis=1)  # 0 .. S
    top = log_pi.max(axis=1, keepdims=True)
    pi = np.exp(log_pi - top)
    u = u[:, 0]
    queued = pi[:, -1] / (1.0 - u)  # n >= S: pi(S) (1 + u + u^2 + ...)
    return np.asarray(queued / (pi[:, :-1].sum(axis=1) + queued))


ADMISSION_GRID = np.concatenate([np.linspace(0.0, 0.9, 91)[1:], np.linspace(0.9, 0.999, 100)[1:]])
"""The utilizations the planner tabulates MD's wait probability at (``md_wait_probability``):
1% apart to 90%, 0.1% apart above; a load between two is charged the higher one's."""
