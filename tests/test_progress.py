"""Progress (issue 51, item 4): the library reports (done, total, label) on every long call
(``pddplan.progress``), the command line draws it on stderr (``pddplan.report.progress``):
a bar on a terminal, a plain line every 10 s when piped, nothing with --quiet. A sweep
without --out keeps its journal in the user's cache folder, and a 2-worker sweep stopped
with Ctrl-C leaves no "leaked semaphore" warning. Times come from a fake clock; the
library's reports are checked as counters."""

from __future__ import annotations

import io
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import MONTHLY, SMALL, run_main
from rich.console import Console

import pddplan
from pddplan.report import progress as drawn
from pddplan.report.progress import ProgressView


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _view(*, terminal: bool = False, quiet: bool = False, unit: str = "points"):
    buf = io.StringIO()
    console = Console(file=buf, width=200, force_terminal=terminal, color_system=None)
    clock = FakeClock()
    view = ProgressView(console, "sweep", unit, quiet=quiet, terminal=terminal, clock=clock)
    return view, clock, buf


def test_piped_progress_is_a_line_every_10_s_with_count_elapsed_and_time_left():
    view, clock, buf = _view()
    with view:
        for second in range(36):  # a point a second, 40 in all
            clock.now = 100.0 + second
            view(second, 40, "")
        clock.now = 136.0
    lines = buf.getvalue().splitlines()
    # 10, 20 and 30 s in: 10 points in 10 s, 30 left -> 30 s; then where it ended
    assert lines == [
        "sweep: 10/40 points (25%), 0:10 elapsed, about 0:30 left",
        "sweep: 20/40 points (50%), 0:20 elapsed, about 0:20 left",
        "sweep: 30/40 points (75%), 0:30 elapsed, about 0:10 left",
        "sweep: 35/40 points (88%), 0:36 elapsed, about 0:05 left",
    ]


def test_the_pace_is_this_runs_own_and_an_unknown_total_has_no_time_left():
    view, clock, buf = _view()
    with view:
        view(30, 40, "")  # a resumed run: 30 points from its journal, at the start
        clock.now += 12
        view(32, 40, "1 failed")  # 2 points in 12 s: 8 left -> 48 s
        assert view.eta_s() == pytest.approx(48.0)
    assert buf.getvalue().splitlines()[0] == (
        "sweep: 32/40 points (80%), 0:12 elapsed, about 0:48 left; 1 failed"
    )
    view, clock, buf = _view(unit="rates priced")
    with view:
        view(0, None, "max-bcr")
        clock.now += 11
        view(36, None, "max-bcr: 3 MILP solves")
        assert view.eta_s() is None
    assert buf.getvalue().splitlines()[0] == (
        "sweep: 36 rates priced, 0:11 elapsed; max-bcr: 3 MILP solves"
    )


def test_quiet_and_short_runs_print_nothing():
    view, clock, buf = _view(quiet=True)
    with view:
        for second in range(30):
            clock.now += 1
            view(second, 30, "")
    assert buf.getvalue() == ""
    view, clock, buf = _view()  # under 10 s: no line, and no closing line
    with view:
        clock.now += 9
        view(5, 5, "done")
    assert buf.getvalue() == ""


def test_on_a_terminal_the_bar_shows_from_2_s_with_the_count_and_time_left():
    view, clock, _ = _view(terminal=True)
    with view:
        view(0, 10, "")
        bar = view._bar
        assert bar is not None and list(bar.get_renderables()) == []  # under 2 s: hidden
        clock.now += 3
        view(3, 10, "planning")
        out = Console(record=True, width=200, color_system=None, file=io.StringIO())
        out.print(*bar.get_renderables())
        text = out.export_text()
    assert "3/10 points" in text and "0:03 elapsed" in text and "about 0:07 left" in text
    assert "planning" in text


def _reports(calls: list[tuple[int, int | None, str]]) -> None:
    """What every long call's reports hold to: counts that never fall, a total never
    below the count, and a last report of the whole work done."""
    assert calls, "no progress reported"
    dones = [d for d, _, _ in calls]
    assert dones == sorted(dones), dones
    assert all(t is None or t >= d for d, t, _ in calls), calls
    done, total, _ = calls[-1]
    assert total == done, calls[-1]
    assert all(isinstance(label, str) for _, _, label in calls)


def test_solve_sweep_and_simulate_report_counts_that_end_at_their_total():
    problem = pddplan.load_scenario(SMALL)
    calls: list = []
    plan = pddplan.solve(problem, progress=lambda *a: calls.append(a))
    _reports(calls)
    assert calls[0][1] is None  # a search's total is not known until it ends
    calls = []  # points refused at once (invalid): the counts without the planning
    pddplan.sweep(problem, ["workload.arrival_rps=-1,-2"], progress=lambda *a: calls.append(a))
    assert calls == [(0, 2, ""), (1, 2, "1 failed"), (2, 2, "2 failed")]
    calls = []
    pddplan.simulate(problem, plan.fleet, requests=2000, progress=lambda *a: calls.append(a))
    _reports(calls)
    assert calls[-1][0] == 2000 and all(t == 2000 for _, t, _ in calls)


@pytest.mark.slow
def test_compare_price_sweep_and_robust_report_counts_that_end_at_their_total():
    problem = pddplan.load_scenario(SMALL)
    calls: list = []
    pddplan.compare(problem, at="demand", progress=lambda *a: calls.append(a))
    _reports(calls)
    assert [d for d, _, _ in calls] == list(range(len(calls)))  # one row at a time
    calls = []
    pddplan.price_sweep(problem, "l40s", [1.0, 2.0], progress=lambda *a: calls.append(a))
    _reports(calls)
    monthly = pddplan.load_scenario(MONTHLY)
    calls = []
    pddplan.solve_robust(monthly, progress=lambda *a: calls.append(a))
    _reports(calls)
    n = len(monthly.scenario.workload_variants or ())
    assert calls[-1][1] == n + 1 + n + n * n


def test_progress_lines_go_to_stderr_and_never_change_stdout(monkeypatch):
    monkeypatch.setattr(drawn, "EVERY_S", 0.0)  # a line at every report
    args = (
        "sweep",
        str(SMALL),
        "--vary",
        "workload.arrival_rps=-1,-2",
        "--workers",
        "1",
        "--format",
        "csv",
    )  # the table says how long it took: rows alone
    loud = run_main(*args)
    quiet = run_main(*args, "--quiet")
    assert loud.exit_code == quiet.exit_code == 0, loud.output
    assert loud.stdout == quiet.stdout
    assert "sweep: 1/2 points" in loud.stderr and "2 failed" in loud.stderr
    assert "sweep:" not in quiet.stderr


def test_a_sweep_without_out_keeps_its_journal_in_the_cache_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    problem = pddplan.load_scenario(SMALL)
    vary = ["workload.arrival_rps=-1,-2"]  # refused at once (invalid), and journalled
    run = pddplan.sweep(problem, vary, journal_dir=tmp_path / "pddplan", hold_journal=True)
    journal = run.journal.path
    assert journal.parent == tmp_path / "pddplan"
    assert journal.name == f"{pddplan.sweeps.journal.fingerprint(run.job.identity())}.journal.jsonl"
    run.close_journal()  # as if it stopped before its output
    again = pddplan.sweep(problem, vary, journal_dir=tmp_path / "pddplan", resume=True)
    assert again.resumed == 2 and again.complete  # nothing planned twice
    journal.unlink()
    res = run_main("sweep", str(SMALL), "--vary", vary[0], "--workers", "1")
    assert res.exit_code == 0, res.output
    assert f"journal: {tmp_path / 'pddplan'}" in res.stderr and "--resume" in res.stderr
    assert list((tmp_path / "pddplan").iterdir()) == []  # the output printed: gone


@pytest.mark.slow
def test_ctrl_c_on_a_two_worker_sweep_leaves_no_leaked_semaphore(tmp_path):
    """Twice, as an impatient user does: the second signal ends the process at once
    (``cli.signals``), so nothing that needs cleaning up at exit may be left. Where the
    first one's cleanup is done before the second comes (10 ms later: a race the test
    cannot order), the second meets the handler the process started with (here the
    default) and ends it by the signal: Ctrl-C's end either way, and the same checks."""
    out = tmp_path / "o.csv"
    journal = Path(f"{out}.journal.jsonl")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pddplan", "sweep", str(SMALL), "--vary",
         "workload.arrival_rps=2:40:2", "--workers", "2", "--format", "csv", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    for _ in range(600):  # until the workers have sent a point back
        if journal.exists() and len(journal.read_bytes().splitlines()) > 1:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)  # the resource tracker's stderr included
    assert proc.returncode in (128 + signal.SIGINT, -signal.SIGINT), err
    assert "leaked semaphore" not in err and "Traceback" not in err, err
