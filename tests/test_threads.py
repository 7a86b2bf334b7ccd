"""One BLAS thread while pddplan works (``pddplan.threads``): the command line limits its
own process before numpy loads; the library limits only its own calls."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

import pddplan
from pddplan import threads


def _blas_threads() -> set[int]:
    return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


def test_the_library_limits_its_calls_and_restores_the_callers_setting():
    seen = []

    @threads.one_blas_thread
    def work() -> float:
        seen.append(_blas_threads())
        return float(np.ones(3) @ np.ones(3))

    with threadpool_limits(limits=2, user_api="blas"):
        assert work() == 3.0
        assert seen == [{1}]
        assert _blas_threads() == {2}  # the caller's setting, untouched


def test_an_api_entry_point_runs_with_one_thread(monkeypatch):
    seen = []

    def fake(problem, fleet, demand_rps=None):
        seen.append(_blas_threads())

    monkeypatch.setattr("pddplan.evaluation.evaluator.evaluate", fake)
    with threadpool_limits(limits=2, user_api="blas"):
        pddplan.evaluate(None, None)  # type: ignore[arg-type]
        assert seen == [{1}] and _blas_threads() == {2}


def test_the_command_line_sets_one_thread_before_numpy_loads():
    code = (
        "import os, sys; from pddplan.cli.app import main; assert 'numpy' not in sys.modules; "
        "sys.argv = ['pddplan', '--help']\n"
        "try: main()\n"
        "except SystemExit: pass\n"
        "print(os.environ['OPENBLAS_NUM_THREADS'], os.environ['OMP_NUM_THREADS'])"
    )
    env = {k: v for k, v in __import__("os").environ.items() if not k.endswith("_NUM_THREADS")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.split()[-2:] == ["1", "1"]
    # a count the user set is kept
    env["OPENBLAS_NUM_THREADS"] = "2"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.split()[-2:] == ["2", "1"]
