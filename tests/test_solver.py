"""The solver layer: statuses, gaps, backends, and a clean stdout (issue #3 groundwork)."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pulp
import pytest
from conftest import ROOT

from pddplan.plan.solver import SolverError, solve

BACKENDS = ["cbc"] + (["highs"] if "HiGHS" in pulp.listSolvers(onlyAvailable=True) else [])


def knapsack() -> pulp.LpProblem:
    """Values 10, 13, 7; weights 4, 6, 3; capacity 9. By hand: {a, b} weighs 10 (too
    much), {b, c} is worth 20 at weight 9, {a, c} 17 at 7: the optimum is 20, b and c."""
    p = pulp.LpProblem("knapsack", pulp.LpMaximize)
    take = p.add_variable_dict("take", ["a", "b", "c"], cat="Binary")
    p += 10 * take["a"] + 13 * take["b"] + 7 * take["c"], "value"
    p += 4 * take["a"] + 6 * take["b"] + 3 * take["c"] <= 9, "capacity"
    return p


def market_split(m: int, n: int, seed: int) -> pulp.LpProblem:
    """Cornuejols-Dawande market split with slacks: tiny, and notoriously hard for branch and
    bound, so a one-second limit stops it with a feasible solution and an open gap."""
    rng = random.Random(seed)
    a = [[rng.randrange(100) for _ in range(n)] for _ in range(m)]
    p = pulp.LpProblem("market_split", pulp.LpMinimize)
    x = p.add_variable_dict("x", range(n), cat="Binary")
    over = p.add_variable_dict("over", range(m), lowBound=0)
    under = p.add_variable_dict("under", range(m), lowBound=0)
    p += pulp.lpSum(over.values()) + pulp.lpSum(under.values()), "imbalance"
    for i in range(m):
        p += (
            pulp.lpSum(a[i][j] * x[j] for j in range(n)) + under[i] - over[i] == sum(a[i]) // 2,
            f"split_{i}",
        )
    return p


@pytest.mark.parametrize("backend", BACKENDS)
def test_hand_solvable_optimum(backend):
    result = solve(knapsack(), solver=backend)
    assert result.status == "optimal" and result.gap == 0.0
    assert result.objective == pytest.approx(20.0)
    assert {k: round(v) for k, v in result.values.items()} == {
        "take_a": 0,
        "take_b": 1,
        "take_c": 1,
    }


@pytest.mark.parametrize("preprocess", [True, False])
def test_cbc_without_preprocessing_finds_the_same_optimum(preprocess, monkeypatch):
    """``preprocess=False`` reaches CBC's command line (a robust plan's MILPs run so) and
    changes the time, not the answer."""
    sent: list[list[str]] = []
    original = pulp.PULP_CBC_CMD.solve_CBC

    def spy(self, lp, use_mps=True):
        sent.append(list(self.options))
        return original(self, lp, use_mps)

    monkeypatch.setattr(pulp.PULP_CBC_CMD, "solve_CBC", spy)
    result = solve(knapsack(), solver="cbc", preprocess=preprocess)
    assert result.status == "optimal" and result.objective == pytest.approx(20.0)
    assert ("preprocess off" in sent[0]) is not preprocess


@pytest.mark.parametrize("backend", BACKENDS)
def test_infeasible(backend):
    p = knapsack()
    p += p.variablesDict()["take_a"] + p.variablesDict()["take_b"] >= 2, "both_heavy_items"
    assert solve(p, solver=backend).status == "infeasible"


@pytest.mark.slow  # over 0.7 s each; the default run stays under 90 s
@pytest.mark.parametrize("backend", BACKENDS)
def test_time_limit_returns_the_best_plan_and_its_gap(backend):
    result = solve(market_split(5, 50, seed=1), solver=backend, time_limit_s=1.0)
    assert result.status == "time_limit"
    assert result.objective is not None and result.values
    assert result.bound is not None and result.bound <= result.objective
    assert result.gap is not None and result.gap > 0
    assert result.seconds < 10


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_node_limit_stops_the_solve_at_the_same_node_every_time(backend):
    """The node limit is counted work: a hard MILP it stops returns its best solution with
    an open gap, and the same solution, bound and node count on every run (CBC's complete
    fathoming of small subtrees is not counted against ``maxNodes``, so its node count can
    pass the limit; HiGHS's stops at it)."""
    runs = [solve(market_split(4, 30, seed=1), solver=backend, node_limit=200) for _ in range(2)]
    first = runs[0]
    assert first.status == "node_limit" and first.gap is not None and first.gap > 0
    assert first.nodes is not None and first.nodes >= 200
    assert [(r.objective, r.bound, r.nodes, r.values) for r in runs[1:]] == [
        (first.objective, first.bound, first.nodes, first.values)
    ]
    unlimited = solve(knapsack(), solver=backend, node_limit=1)  # solved at the root
    assert unlimited.status == "optimal" and unlimited.objective == pytest.approx(20.0)


def test_unknown_solver():
    with pytest.raises(SolverError, match="unknown solver 'gurobi'; choose cbc or highs"):
        solve(knapsack(), solver="gurobi")


@pytest.mark.skipif("highs" not in BACKENDS, reason="highspy not installed")
def test_highs_banner_stays_off_stdout():
    """HiGHS prints a banner from C code to fd 1; a --json consumer must see only JSON."""
    code = (
        "import json, sys; sys.path.insert(0, 'tests'); from test_solver import knapsack; "
        "from pddplan.plan.solver import solve; "
        "r = solve(knapsack(), solver='highs'); print(json.dumps({'objective': r.objective}))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"objective": 20.0}
    assert "HiGHS" in proc.stderr


def test_an_interrupted_solve_stops_the_children_it_started():
    """A KeyboardInterrupt (SIGINT, or SIGTERM through the command line's handler) inside a
    solve stops the child processes the solve started (CBC), and only those."""
    from pathlib import Path

    from pddplan.plan.solver import children_stopped_on_interrupt

    if not Path("/proc/self/task").exists():
        pytest.skip("no /proc: the children are not known on this system")
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    older = subprocess.Popen(sleep)  # started before the solve: left alone
    try:
        with pytest.raises(KeyboardInterrupt), children_stopped_on_interrupt():
            child = subprocess.Popen(sleep)
            raise KeyboardInterrupt
        assert child.wait(timeout=10) == -15
        assert older.poll() is None
    finally:
        older.kill()
        older.wait()
