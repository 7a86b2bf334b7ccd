"""Relay decode's pace: the step it runs at, which its batch sets.

A relayed request decodes on RLD while its KV crosses the WAN (``T`` seconds), then hands
over to MD; a singular one decodes its whole output there. With ``n`` RLD instances,
relayed requests bringing ``R`` seconds of transfer per second and singular ones ``S``
output tokens per second, the requests RLD holds (Little's law) make its batch per instance

    b = (R + S x step(b)) / n

and each relayed request makes ``T / step(b)`` eager tokens. ``step`` grows with ``b``, so
the fixed point is reached from below, from ``b`` at batch 1's step; it converges in a few
iterations, since one more sequence adds a small fraction of a step. A batch past the
largest that meets TPOT is an overload: the iteration stops there and the utilization
(``b`` over that largest batch) says so.
"""

from __future__ import annotations

import numpy as np

from pddplan.model.numeric import Array

ITERATIONS = 60
"""At most this many fixed-point steps (the shipped scenarios take 2-6)."""


def step_at(table: tuple[Array, Array], batch: Array | float) -> Array:
    """The step at each (fractional) batch from a table of (batches, steps), interpolated;
    below its first batch the first step, past its last the last."""
    batches, steps = table
    out: Array = np.asarray(np.interp(np.asarray(batch, dtype=float), batches, steps), dtype=float)
    return out


def relay_pace(
    steps: tuple[Array, Array],
    relay_seconds: Array | float,
    singular_tokens: Array | float,
    instances: Array | float,
) -> tuple[Array, Array]:
    """RLD's step seconds and batch per instance at the fixed point (module docstring),
    elementwise over equal-shape (or broadcast) ``relay_seconds`` (``R``),
    ``singular_tokens`` (``S``) and ``instances`` (``n``); ``steps``: the (batches, step
    seconds) table of its instance (``Problem.decode_steps``)."""
    r = np.asarray(relay_seconds, dtype=float)
    s = np.asarray(singular_tokens, dtype=float)
    n = np.asarray(instances, dtype=float)
    largest = float(steps[0][-1])
    step = np.broadcast_to(steps[1][0], np.broadcast(r, s, n).shape).astype(float)
    batch = (r + s * step) / n
    for _ in range(ITERATIONS):
        step = step_at(steps, np.minimum(batch, largest))
        again = (r + s * step) / n
        with np.errstate(invalid="ignore"):  # an infinite load (a saturated link): inf - inf
            settled = np.abs(again - batch) <= 1e-9 * np.maximum(batch, 1.0)
        batch = again
        if bool(np.all(settled | (batch > largest))):  # inf > largest: overloaded
            break
    return step, batch


def eager_tokens(out: Array, out_points: Array, limit: Array) -> Array:
    """Per class, the mean eager tokens when each request stops at ``limit`` tokens (its
    KV's crossing over RLD's step) or at its own output, whichever comes first:
    ``E[min(O, limit)]`` over the class's output lengths (``out_points``, a row per class),
    at most the class's mean output ``out``. Taking ``min(E[O], limit)`` instead would
    overstate it (``min`` is concave)."""
    lim = np.asarray(limit, dtype=float)
    mean = np.minimum(out_points, lim[..., None]).mean(axis=-1)
    return np.asarray(np.minimum(out, mean), dtype=float)
