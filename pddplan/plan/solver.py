"""Running a MILP: backend choice (CBC bundled with PuLP, or HiGHS), time limit, gap, and a
status that says what the answer is worth. The only module besides the formulation that
knows PuLP.

Statuses: ``optimal`` (proven within the gap), ``time_limit`` (stopped with a feasible
solution; ``gap`` says how far from proven), ``time_limit_no_incumbent``, ``infeasible``,
``unbounded``. HiGHS prints a banner from C code straight to file descriptor 1; the solve
runs with fd 1 pointed at stderr so that ``--json`` output stays clean.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pulp

from pddplan.errors import PddplanError
from pddplan.work import tally

Status = Literal["optimal", "time_limit", "time_limit_no_incumbent", "infeasible", "unbounded"]
_CBC_BOUND = re.compile(r"best possible\s+(-?[\d.eE+-]+)|Lower bound:\s+(-?[\d.eE+-]+)")


class SolverError(PddplanError):
    """The requested solver is not available, or failed."""


@dataclass(frozen=True)
class SolveResult:
    status: Status
    objective: float | None
    """Objective of the returned solution (None without one)."""
    bound: float | None
    """Best proven bound on the optimum (None when the backend does not report it)."""
    gap: float | None
    """Relative gap |objective - bound| / max(1, |objective|); 0 when proven optimal."""
    seconds: float
    values: dict[str, float] = field(default_factory=dict)
    """Every variable's value, by name."""


def solve(
    problem: pulp.LpProblem,
    *,
    solver: str = "cbc",
    time_limit_s: float = 60.0,
    mip_gap: float = 1e-4,
    warm_start: bool = False,
    preprocess: bool = True,
) -> SolveResult:
    """Solve ``problem`` in place and report what came back. ``warm_start``: start CBC from
    the variables' initial values (a feasible solution; HiGHS ignores them).
    ``preprocess``: CBC's preprocessing (HiGHS presolves either way), which strengthens
    rows pass after pass; what it gains depends on the MILP (``min_cost`` turns it off for
    a robust plan's)."""
    tally("milp_solves")
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "solver.log"
        backend = _backend(solver, time_limit_s, mip_gap, log, warm_start, preprocess)
        start = time.perf_counter()
        with _stdout_to_stderr():
            try:
                problem.solve(backend)
            except pulp.PulpSolverError as e:
                raise SolverError(f"solver {solver} failed: {e}") from None
        seconds = time.perf_counter() - start
        log_text = log.read_text(errors="replace") if log.exists() else ""
    has_solution = problem.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
    if problem.status == pulp.LpStatusInfeasible:
        return SolveResult("infeasible", None, None, None, seconds)
    if problem.status == pulp.LpStatusUnbounded:
        return SolveResult("unbounded", None, None, None, seconds)
    if not has_solution:
        return SolveResult("time_limit_no_incumbent", None, None, None, seconds)
    objective = pulp.value(problem.objective)
    objective = float(objective) if objective is not None else 0.0
    values = {v.name: float(v.varValue) for v in problem.variables() if v.varValue is not None}
    if problem.sol_status == pulp.LpSolutionOptimal:
        return SolveResult("optimal", objective, objective, 0.0, seconds, values)
    bound = _bound(problem, log_text)
    gap = abs(objective - bound) / max(1.0, abs(objective)) if bound is not None else None
    return SolveResult("time_limit", objective, bound, gap, seconds, values)


def _backend(
    name: str,
    time_limit_s: float,
    mip_gap: float,
    log: Path,
    warm_start: bool = False,
    preprocess: bool = True,
) -> pulp.LpSolver:
    if name == "cbc":
        return pulp.PULP_CBC_CMD(
            msg=False,
            timeLimit=time_limit_s,
            gapRel=mip_gap,
            logPath=str(log),
            cuts=False,
            options=["heuristicsOnOff off"] + ([] if preprocess else ["preprocess off"]),
            warmStart=warm_start,
            _skip_v4_deprecation=True,
        )
    if name == "highs":
        if "HiGHS" not in pulp.listSolvers(onlyAvailable=True):
            raise SolverError("solver 'highs' needs highspy: pip install 'pddplan[highs]'")
        return pulp.HiGHS(msg=False, timeLimit=time_limit_s, gapRel=mip_gap)
    raise SolverError(f"unknown solver '{name}'; choose cbc or highs")


def _bound(problem: pulp.LpProblem, cbc_log: str) -> float | None:
    """The best proven bound: from HiGHS's info, or the last one CBC logged."""
    model = getattr(problem, "solverModel", None)
    if model is not None and hasattr(model, "getInfo"):
        bound = float(model.getInfo().mip_dual_bound)
        return bound if math.isfinite(bound) else None
    found = [a or b for a, b in _CBC_BOUND.findall(cbc_log)]
    return float(found[-1]) if found else None


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 at stderr while a solver runs (C code ignores sys.stdout)."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no real fd 1 (e.g. captured by a test runner): nothing to protect
        yield
        return
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
