"""``solve --time-limit T`` ends within T + 5 s on any scenario that validates (issue 50):
the robust plan of a scenario with workload variants, its single-variant plans and their
cross-checks, and the explanation of a variant no plan serves, all within one limit; the
number of variants bounded (``MAX_VARIANTS``). Measured on a work clock, never the wall:
each read of the clock advances it one second, so "within T + 5" reads "at most 5 more
checks of the clock once the deadline has passed" (every unit of counted work reads it
before it starts, ``pddplan.work``), on any machine."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SMALL

import pddplan
from pddplan.errors import InputError
from pddplan.spec.limits import MAX_VARIANTS
from pddplan.work import counted

GRACE = 5.0
"""Seconds a solve may run past its time limit (the issue's bound)."""


class WorkClock:
    """A clock that advances one second at each read."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return float(self.reads)


def _with_variants(tmp_path: Path, count: int, name: str = "v.yaml") -> Path:
    """The small scenario with ``count`` must-meet variants at 10-19 req/s."""
    rows = "".join(
        f"  - {{name: v{i}, must_meet: true, arrival_rps: {10 + i % 10}}}\n" for i in range(count)
    )
    path = tmp_path / name
    path.write_text(SMALL.read_text() + "\nworkload_variants:\n" + rows)
    return path


def _solve(path: Path, limit: float) -> tuple[pddplan.RobustResult, WorkClock, dict[str, int]]:
    clock = WorkClock()
    with counted() as work:
        result = pddplan.solve_robust(pddplan.load_scenario(path), time_limit_s=limit, clock=clock)
    return result, clock, dict(work)


def test_a_robust_solve_stopped_early_ends_within_its_time_limit(tmp_path):
    """Stopped in its count tables or its variants' own plans: within T + 5 on the work
    clock, with no plan and a note that says so (no MILP is formulated past the deadline:
    each took as long as a short solve)."""
    path = _with_variants(tmp_path, 2)
    for limit in (5.0, 15.0):  # the whole solve reads the work clock 49 times
        r, clock, _ = _solve(path, limit)
        assert r.status == "time_limit" and not r.variants, (limit, r)
        assert clock.reads <= limit + GRACE, (limit, clock.reads)
        assert "stopped at the time limit" in r.notes[0]


@pytest.mark.slow
def test_a_robust_solve_ends_within_its_time_limit(tmp_path):
    """Stopped before its plan, with its plan but not its single plans, or finished: each
    ends within T + 5 on the work clock (the single plans and their cross-checks used to
    get a whole second limit of their own, and a formulation was built past the deadline
    for each variant)."""
    path = _with_variants(tmp_path, 2)
    full, clock, _ = _solve(path, 1e9)
    assert full.status == "optimal" and len(full.singles) == 2 and not full.notes
    total = clock.reads
    seen = set()
    for share in (0.1, 0.8):
        limit = total * share
        r, c, _ = _solve(path, limit)
        assert c.reads <= limit + GRACE, (share, limit, c.reads)
        seen.add((bool(r.variants), bool(r.singles)))
        if r.variants and not r.singles:
            assert "not finished within the time limit" in r.notes[-1]
    assert (False, False) in seen  # stopped before the plan
    assert (True, False) in seen  # the plan, its single plans cut


@pytest.mark.slow
def test_many_variants_stop_at_the_time_limit_too(tmp_path):
    """At the bound on variants, a short limit stops the count tables, whatever the
    variants' number: no more MILP solves than a handful, and within T + 5."""
    path = _with_variants(tmp_path, MAX_VARIANTS)
    for limit in (5.0, 40.0):
        r, clock, work = _solve(path, limit)
        assert r.status == "time_limit" and clock.reads <= limit + GRACE
        assert work.get("milp_solves", 0) <= limit


def test_more_variants_than_the_bound_are_one_line(tmp_path):
    path = _with_variants(tmp_path, MAX_VARIANTS + 1)
    with pytest.raises(InputError) as e:
        pddplan.load_scenario(path)
    assert e.value.problems == [
        f"{path}:{_line(path, 'workload_variants:')}: workload_variants: "
        f"{MAX_VARIANTS + 1} variants: at most {MAX_VARIANTS} (the robust plan's MILP grows "
        "faster than the variants, and each variant's own plan is checked under every "
        "other); merge similar windows (a longer workload fit --window)"
    ]
    assert pddplan.load_scenario(_with_variants(tmp_path, MAX_VARIANTS, "ok.yaml"))


def _line(path: Path, text: str) -> int:
    return next(n for n, row in enumerate(path.read_text().splitlines(), 1) if row == text)


class _CommandClock:
    """The command's own clock (``time`` in ``pddplan.cli.plan``, not the solve's): each
    read ``step`` seconds after the one before."""

    def __init__(self, step: float) -> None:
        self.now, self.step = -step, step

    def perf_counter(self) -> float:
        self.now += self.step
        return self.now


def _margin_limits(monkeypatch, step: float) -> tuple[list[float | None], object]:
    """The time limits ``solve`` gives the error margin, on a command clock of ``step``."""
    from conftest import run_main

    from pddplan.cli import plan as cli_plan

    limits: list[float | None] = []
    real = pddplan.error_margin

    def spy(*args, **kwargs):
        limits.append(kwargs.get("time_limit_s"))
        return real(*args, **kwargs)

    monkeypatch.setattr(pddplan, "error_margin", spy)
    monkeypatch.setattr(cli_plan, "time", _CommandClock(step))
    result = run_main("solve", str(SMALL), "--time-limit", "600")
    assert result.exit_code == 0, result.output
    return limits, result


@pytest.mark.slow
def test_the_error_margin_plans_in_what_is_left(monkeypatch):
    """``solve`` gives the error margin's second plan what is left of ``--time-limit`` (the
    plan took 100 s on the command's clock: 500 are left), not a second limit (the solve
    took 2 T where the plan was short at the 90th percentile)."""
    limits, _ = _margin_limits(monkeypatch, 100.0)
    assert limits == [500.0]


@pytest.mark.slow
def test_no_error_margin_is_priced_when_the_limit_is_spent(monkeypatch):
    limits, result = _margin_limits(monkeypatch, 700.0)
    assert not limits
    assert "the time limit (600 s) was spent on the plan" in result.stderr
