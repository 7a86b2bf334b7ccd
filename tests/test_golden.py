"""Golden outputs of the main jobs on every shipped scenario: ``solve --json`` and
``compare --format md``. They pin behaviour across refactors: numbers are compared to
1e-9 relative, text exactly, wall-clock fields left out.

A change that is meant to move a figure refreshes the files on purpose, in its own commit
whose message explains each changed figure::

    pytest tests/test_golden.py -m "slow or not slow" --update-golden
"""

from __future__ import annotations

import json
import time

import pytest
from conftest import (
    HORIZON_GOLDEN,
    PLANNED,
    ROOT,
    check_golden,
    golden_differences,
    quick_or_slow,
    run_main,
)

WALL_CLOCK = {"solve_seconds", "seconds", "wall_seconds", "events_per_second"}
"""JSON keys that measure this machine's speed, not the plan."""

FAST_CLOCK = 4.0
"""The goldens are checked with the wall clock running this many times fast, as on a machine
that much slower: the searches stop on counted work, so the output is the golden all the
same (``tests/test_determinism.py`` runs the same check at 10x beside busy cores, on cases
that take seconds). 4x keeps the slowest case here, the README's max-BCR solve, far from the
600 s safety stop even on a loaded CI machine."""


@pytest.fixture(autouse=True)
def _fast_clock(monkeypatch):
    real = time.perf_counter
    start = real()
    monkeypatch.setattr(time, "perf_counter", lambda: start + FAST_CLOCK * (real() - start))


def _normalized(value):
    """``value`` with every wall-clock field replaced by a placeholder."""
    if isinstance(value, dict):
        return {k: "<wall clock>" if k in WALL_CLOCK else _normalized(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


@pytest.mark.parametrize(
    "scenario",
    quick_or_slow(PLANNED),
)
def test_solve_json_is_unchanged(scenario, request, monkeypatch):
    monkeypatch.chdir(ROOT)  # the outputs name the scenario file as the user gave it
    result = run_main("solve", f"scenarios/{scenario.name}", "--json")
    assert result.exit_code == 0, result.output
    text = json.dumps(_normalized(json.loads(result.stdout)), indent=2) + "\n"
    check_golden(f"solve-{scenario.stem}.json", text, request)


@pytest.mark.slow
def test_solve_max_bcr_json_is_unchanged(request, monkeypatch):
    """The max-BCR search (Dinkelbach, then the cheapest plan in the plateau)."""
    monkeypatch.chdir(ROOT)
    args = ["solve", "scenarios/pdd-h100-h200.yaml", "--objective", "max-bcr", "--json"]
    result = run_main(*args)
    assert result.exit_code == 0, result.output
    text = json.dumps(_normalized(json.loads(result.stdout)), indent=2) + "\n"
    check_golden("solve-max-bcr-pdd-h100-h200.json", text, request)


@pytest.mark.slow
def test_solve_horizon_json_is_unchanged(horizon_solved, request):
    """The shipped plan over time (the session's solve, ``conftest.horizon_solved``): its
    plan file is what ``solve --json`` prints, and what the default run's horizon tests
    read (``HORIZON_GOLDEN``)."""
    assert horizon_solved.run.exit_code == 0, horizon_solved.run.output
    text = json.dumps(_normalized(json.loads(horizon_solved.plan.read_text())), indent=2) + "\n"
    check_golden(HORIZON_GOLDEN.name, text, request)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", PLANNED, ids=[p.stem for p in PLANNED])
def test_compare_markdown_is_unchanged(scenario, request, monkeypatch):
    monkeypatch.chdir(ROOT)
    result = run_main("compare", f"scenarios/{scenario.name}", "--format", "md")
    assert result.exit_code == 0, result.output
    check_golden(f"compare-{scenario.stem}.md", result.stdout, request)


def test_the_comparison_can_fail():
    assert golden_differences({"a": 1.0, "b": [1, 2]}, {"a": 1.0 + 1e-6, "b": [1, 2]}) == [
        ".a: 1.000001, expected 1.0"
    ]
    assert not golden_differences({"a": 1.0}, {"a": 1.0 + 1e-12})
    assert _normalized({"stats": {"seconds": 3.2, "x": 1}}) == {
        "stats": {"seconds": "<wall clock>", "x": 1}
    }
