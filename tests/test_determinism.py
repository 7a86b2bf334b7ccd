"""The same answer on a busy machine (issue 54): every search stops on counted work
(``docs/milp.md``, "Work budgets, the time limit and statuses"), so a run slowed down gives
byte-identical ``--json`` output, wall-clock fields aside.

Each case runs the command line twice in a fresh process: once as it is, once slowed, with
the wall clock the library reads (``pddplan.work.wall_clock``, i.e. ``time.perf_counter``)
running ten times fast, as on a machine ten times slower, while a process burns a core beside
it (one: CI runs these on both cores, and a second burner slowed the other worker's tests
as much as this one's). A search that still stopped on the clock would stop at another step in the
slowed run, and its output would differ. Every shipped scenario's default solve, the
README scenario's max-BCR solve and every shipped comparison are also checked against their
goldens with the clock running fast (``tests/test_golden.py``); the max-BCR solves of
``domestic-910c-h20`` (11 s a run) and ``pdd-paper-fleets`` (51 s) are not run here, to keep
CI within its time.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import H100_H200, ONE_CLASS, ROOT, SMALL

WALL_CLOCK = {"solve_seconds", "seconds", "wall_seconds", "events_per_second", "solve_s", "wall_s"}
"""JSON keys that measure this machine's speed, not the answer."""
HOW_IT_RAN = {"workers", "runner"}
"""A sweep's keys that say how it ran, not what it found."""
FAST = 10.0
"""How much faster the slowed run's clock runs."""
SLOWED = f"""
import sys, time
real = time.perf_counter
start = real()
time.perf_counter = lambda: start + {FAST} * (real() - start)
from pddplan.cli.app import main
main(sys.argv[1:])
"""
"""The slowed run's entry point: the clock patched before pddplan is imported."""


def _normalized(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: f"<{k}>" if k in WALL_CLOCK | HOW_IT_RAN else _normalized(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


def _run(args: list[str], *, slowed: bool) -> str:
    """The command's stdout with its wall-clock fields replaced, as JSON text."""
    entry = ["-c", SLOWED] if slowed else ["-m", "pddplan"]
    done = subprocess.run(
        [sys.executable, *entry, *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode in (0, 1), done.stderr
    return json.dumps(_normalized(json.loads(done.stdout)), indent=1)


@contextlib.contextmanager
def _busy_cores(n: int = 1) -> Iterator[None]:
    """``n`` processes burning a core each, for as long as the block runs."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in burners:
            p.kill()
            p.wait()


def _with_budget(tmp_path: Path, scenario: Path, usd_per_hour: float) -> Path:
    """A copy of ``scenario`` with a budget (no shipped scenario sets one), for max capacity."""
    copy = tmp_path / scenario.name
    copy.write_text(scenario.read_text() + f"\nbudget_usd_per_hour: {usd_per_hour}\n")
    return copy


def _same_slowed(args: list[str]) -> None:
    normal = _run(args, slowed=False)
    with _busy_cores():
        slowed = _run(args, slowed=True)
    assert slowed == normal, f"pddplan {' '.join(args)}: the slowed run's output differs"


SOLVES = [
    (SMALL, "min-cost"),
    (SMALL, "max-bcr"),
    (ONE_CLASS, "min-cost"),
    (ONE_CLASS, "max-bcr"),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("scenario", "objective"), SOLVES, ids=[f"{s.stem}-{o}" for s, o in SOLVES]
)
def test_a_solve_is_the_same_slowed_down(scenario, objective):
    _same_slowed(["solve", str(scenario), "--objective", objective, "--json"])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("scenario", "budget"), [(SMALL, 30.0), (H100_H200, 115.0)], ids=["small", "readme"]
)
def test_a_max_capacity_solve_is_the_same_slowed_down(tmp_path, scenario, budget):
    copy = _with_budget(tmp_path, scenario, budget)
    _same_slowed(["solve", str(copy), "--objective", "max-capacity", "--json"])


@pytest.mark.slow
def test_a_comparison_is_the_same_slowed_down():
    _same_slowed(["compare", str(SMALL), "--format", "json"])


RUNNERS = [["--workers", "2"]] + (
    [["--runner", "ray", "--workers", "2"]] if importlib.util.find_spec("ray") else []
)


@pytest.mark.slow
@pytest.mark.parametrize("runner", RUNNERS, ids=[" ".join(e) for e in RUNNERS])
def test_a_sweep_is_the_same_on_more_workers_and_slowed_down(runner):
    """One worker at normal speed against two workers (or Ray) slowed: the same rows."""
    vary = ["sweep", str(SMALL), "--vary", "workload.arrival_rps=2,5,11", "--format", "json"]
    vary += ["--architectures", "pdd,intra-dc-homogeneous"]
    normal = _run([*vary, "--workers", "1"], slowed=False)
    # Ray's own processes miss their heartbeats with both cores burnt (146 s a run against
    # 10 s): its run is slowed by the driver's clock only
    with _busy_cores(0 if "ray" in runner else 1):
        slowed = _run([*vary, *runner], slowed=True)
    assert slowed == normal
