"""Running a MILP: backend choice (CBC bundled with PuLP, or HiGHS), node limit, time limit,
gap, and a status that says what the answer is worth. The only module besides the
formulation that knows PuLP.

Statuses: ``optimal`` (proven within the gap), ``node_limit`` (the branch and bound stopped
at its node limit with a feasible solution; ``gap`` says how far from proven),
``time_limit`` (the same, stopped by the wall-clock safety stop), each ``..._no_incumbent``
when it stopped before any solution, ``infeasible``, ``unbounded``. The node limit is
counted work: a solve it stops stops at the same node on any machine, so its answer is the
same; the time limit is not (``docs/milp.md``, "Work budgets, the time limit and
statuses"). HiGHS prints a banner from C code straight to file descriptor 1; the solve runs
with fd 1 pointed at stderr so that ``--json`` output stays clean.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pulp

from pddplan.errors import PddplanError
from pddplan.spec.scenario import SolverOptions
from pddplan.spec.status import MilpStatus
from pddplan.work import tally

NODE_LIMIT: int = SolverOptions.model_fields["node_limit"].default
"""Branch-and-bound nodes a MILP solve may take, by default (``solver.node_limit``)."""
_CBC_NODES = re.compile(r"Enumerated nodes:\s+(\d+)")
_CBC_BOUND = re.compile(r"best possible\s+(-?[\d.eE+-]+)|Lower bound:\s+(-?[\d.eE+-]+)")


class SolverError(PddplanError):
    """The requested solver is not available, or failed."""


@dataclass(frozen=True)
class SolveResult:
    status: MilpStatus
    objective: float | None
    """Objective of the returned solution (None without one)."""
    bound: float | None
    """Best proven bound on the optimum (None when the backend does not report it)."""
    gap: float | None
    """Relative gap |objective - bound| / max(1, |objective|); 0 when proven optimal."""
    seconds: float
    values: dict[str, float] = field(default_factory=dict)
    """Every variable's value, by name."""
    nodes: int | None = None
    """Branch-and-bound nodes the solve took (None when the backend does not say)."""


def solve(
    problem: pulp.LpProblem,
    *,
    solver: str = "cbc",
    time_limit_s: float = 60.0,
    mip_gap: float = 1e-4,
    node_limit: int = NODE_LIMIT,
    warm_start: bool = False,
    preprocess: bool = True,
) -> SolveResult:
    """Solve ``problem`` in place and report what came back. ``node_limit``: the
    branch-and-bound nodes it may take (counted work, the same on any machine);
    ``time_limit_s``: the wall-clock safety stop. ``warm_start``: start CBC from the
    variables' initial values (a feasible solution; HiGHS ignores them). ``preprocess``:
    CBC's preprocessing (HiGHS presolves either way), which strengthens rows pass after
    pass; what it gains depends on the MILP (``min_cost`` turns it off for a robust
    plan's)."""
    tally("milp_solves")
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "solver.log"
        backend = _backend(solver, time_limit_s, mip_gap, node_limit, log, warm_start, preprocess)
        start = time.perf_counter()
        with _stdout_to_stderr(), children_stopped_on_interrupt():
            try:
                problem.solve(backend)
            except pulp.PulpSolverError as e:
                raise SolverError(f"solver {solver} failed: {e}") from None
        seconds = time.perf_counter() - start
        log_text = log.read_text(errors="replace") if log.exists() else ""
    nodes = _nodes(problem, log_text)
    if nodes is not None:
        tally("milp_nodes", nodes)
    on_nodes = _stopped_on_nodes(problem, log_text)
    has_solution = problem.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
    if problem.status == pulp.LpStatusInfeasible:
        return SolveResult(MilpStatus.INFEASIBLE, None, None, None, seconds, nodes=nodes)
    if problem.status == pulp.LpStatusUnbounded:
        return SolveResult(MilpStatus.UNBOUNDED, None, None, None, seconds, nodes=nodes)
    if not has_solution:
        no_incumbent = (
            MilpStatus.NODE_LIMIT_NO_INCUMBENT if on_nodes else MilpStatus.TIME_LIMIT_NO_INCUMBENT
        )
        return SolveResult(no_incumbent, None, None, None, seconds, nodes=nodes)
    objective = pulp.value(problem.objective)
    objective = float(objective) if objective is not None else 0.0
    values = {v.name: float(v.varValue) for v in problem.variables() if v.varValue is not None}
    if problem.sol_status == pulp.LpSolutionOptimal:
        return SolveResult(MilpStatus.OPTIMAL, objective, objective, 0.0, seconds, values, nodes)
    bound = _bound(problem, log_text)
    gap = abs(objective - bound) / max(1.0, abs(objective)) if bound is not None else None
    status = MilpStatus.NODE_LIMIT if on_nodes else MilpStatus.TIME_LIMIT
    return SolveResult(status, objective, bound, gap, seconds, values, nodes)


def _children() -> set[int]:
    """This process's child processes (Linux: ``/proc/self/task/*/children``; an empty set
    where the system does not say)."""
    out: set[int] = set()
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return out
    for task in tasks:
        try:
            out.update(int(p) for p in Path(f"/proc/self/task/{task}/children").read_text().split())
        except (OSError, ValueError):
            continue
    return out


@contextlib.contextmanager
def children_stopped_on_interrupt() -> Iterator[None]:
    """Around a solve that runs its backend as a child process (PuLP's CBC): where the
    block is interrupted (``KeyboardInterrupt``: SIGINT, or SIGTERM through the command
    line's handler), the children it started get SIGTERM, so a solver is not left running
    to its own time limit after the command has stopped. A terminal's Ctrl-C reaches the
    whole process group anyway; a SIGTERM sent to this process alone does not."""
    before = _children()
    try:
        yield
    except KeyboardInterrupt:
        for pid in _children() - before:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        raise


def _backend(
    name: str,
    time_limit_s: float,
    mip_gap: float,
    node_limit: int,
    log: Path,
    warm_start: bool = False,
    preprocess: bool = True,
) -> pulp.LpSolver:
    if name == "cbc":
        return pulp.PULP_CBC_CMD(
            msg=False,
            timeLimit=time_limit_s,
            gapRel=mip_gap,
            maxNodes=node_limit,
            logPath=str(log),
            cuts=False,
            options=["heuristicsOnOff off"] + ([] if preprocess else ["preprocess off"]),
            warmStart=warm_start,
            _skip_v4_deprecation=True,
        )
    if name == "highs":
        if "HiGHS" not in pulp.listSolvers(onlyAvailable=True):
            raise SolverError("solver 'highs' needs highspy: pip install 'pddplan[highs]'")
        return _highs()(msg=False, timeLimit=time_limit_s, gapRel=mip_gap, mip_max_nodes=node_limit)
    raise SolverError(f"unknown solver '{name}'; choose cbc or highs")


def _highs() -> type[pulp.LpSolver]:
    """PuLP's HiGHS, reading a solve stopped at its node limit as one stopped at its time
    limit (PuLP 3.3 has no entry for HiGHS's ``kSolutionLimit`` and raises ``KeyError``)."""
    import highspy

    class HiGHS(pulp.HiGHS):
        def findSolutionValues(self, lp: pulp.LpProblem) -> tuple[int, int]:
            model = lp.solverModel
            if model.getModelStatus() != highspy.HighsModelStatus.kSolutionLimit:
                return super().findSolutionValues(lp)
            values = list(model.getSolution().col_value)
            if not math.isfinite(model.getInfo().objective_function_value) or not values:
                return pulp.LpStatusNotSolved, pulp.LpSolutionNoSolutionFound
            for var in lp.variables():
                var.varValue = values[var.index]
            return pulp.LpStatusOptimal, pulp.LpSolutionIntegerFeasible

    return HiGHS


def _nodes(problem: pulp.LpProblem, cbc_log: str) -> int | None:
    """Branch-and-bound nodes the solve took: HiGHS's info, or CBC's log."""
    model = getattr(problem, "solverModel", None)
    if model is not None and hasattr(model, "getInfo"):
        return int(model.getInfo().mip_node_count)
    found = _CBC_NODES.findall(cbc_log)
    return int(found[-1]) if found else None


def _stopped_on_nodes(problem: pulp.LpProblem, cbc_log: str) -> bool:
    """Whether the solve stopped at its node limit (rather than its time limit)."""
    model = getattr(problem, "solverModel", None)
    if model is not None and hasattr(model, "getModelStatus"):
        import highspy

        return bool(model.getModelStatus() == highspy.HighsModelStatus.kSolutionLimit)
    return "Stopped on node limit" in cbc_log or "Exiting on maximum nodes" in cbc_log


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
