"""Progress: how a long call tells its caller how far it has got.

A call that may take more than a moment (``solve``, ``solve_robust``, ``compare``,
``price_sweep``, ``sweep``, ``study``, ``simulate``) takes ``progress: Progress | None =
None`` and calls it as its work goes, with ``(done, total, label)``:

- ``done``: the units of work finished (rates priced, rows planned, points, requests
  served), never fewer than at the call before;
- ``total``: the units in all, None where they are not known (a search that ends when its
  bound closes). It may be revised as the work learns more (a simulation's, from the
  precision reached so far; a demand study's, as it bisects), and is never below ``done``;
- ``label``: what it is doing now, a few words for a person.

The first call may come before any unit is done (a resumed sweep's points from its journal
count as done: the caller times only the rest), and the last, once the work is done, has
``done == total``. Progress is for people: it is never part of a result, and a call's
answer is the same with or without it. The command line draws it on stderr
(``pddplan.report.progress``).

May import: nothing.
"""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[int, int | None, str], None]
"""Told ``(done, total, label)`` as a long call's work goes (module docstring)."""
