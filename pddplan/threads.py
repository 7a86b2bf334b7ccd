"""BLAS threads: one per process while pddplan works.

pddplan's numerical work is many small numpy operations (arrays of a few dozen request
classes, count tables of a few hundred cells). A BLAS library that starts one thread per
core for each of them spends more time waking and joining threads than computing, and when
other work shares the cores the threads fight over them: on this project's 2-core machine
``pddplan solve scenarios/pdd-paper-fleets.yaml`` took 90 s of CPU (70 s of wall time) with
OpenBLAS's default threads, and 25.5 s with one (docs/milp.md, "Time limits and
statuses").

Two ways, for the two kinds of caller:

- the command line owns its process: ``limit_process`` sets the usual thread-count
  variables (``OPENBLAS_NUM_THREADS`` and its kin) to 1 before numpy is loaded, unless the
  user set them, so the BLAS library starts with one thread and child processes (sweep
  workers) inherit it;
- the library does not own its caller's process: ``one_blas_thread`` limits BLAS to one
  thread around the library's own entry points (``threadpoolctl``, which finds the BLAS
  libraries loaded and restores their thread counts on exit), and never changes the
  caller's settings beyond that call.

May import: nothing.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

THREAD_VARIABLES = (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)
"""The environment variables BLAS libraries read for their thread count when they load."""

P = ParamSpec("P")
R = TypeVar("R")


def limit_process() -> None:
    """For a process pddplan owns (the command line): one BLAS thread, unless the user set a
    count. Set before numpy loads, the variables are what the BLAS library starts with; if
    numpy is already loaded, its BLAS is limited at once as well."""
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, "1")
    if "numpy" in sys.modules and os.environ["OPENBLAS_NUM_THREADS"] == "1":
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")


def one_blas_thread(function: Callable[P, R]) -> Callable[P, R]:
    """``function`` run with one BLAS thread, the caller's thread counts restored after it:
    for the library's entry points, whose work is many small array operations."""

    @functools.wraps(function)
    def limited(*args: P.args, **kwargs: P.kwargs) -> R:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            return function(*args, **kwargs)

    return limited
