"""The sweep journal as a database (issue 50): sealed lines, a cut last line mended before
anything is appended, a lock that keeps a second sweep off it, a write failure that names
it and blocks no rerun, and SIGTERM handled as SIGINT (the command line's ``signals``)."""

from __future__ import annotations

import errno
import fcntl
import os
import signal
from pathlib import Path

import pytest
from conftest import SMALL, run_main

from pddplan.errors import InputError
from pddplan.sweeps import journal as journal_module
from pddplan.sweeps.journal import Journal, seal, unseal
from pddplan.sweeps.points import PointResult

IDENTITY = {"scenario": "s.yaml", "axes": [{"path": "x", "values": [1, 2, 3, 4]}]}
GRID = [{"x": v} for v in (1, 2, 3, 4)]


def on_grid(point: PointResult) -> bool:
    return 0 <= point.index < len(GRID) and point.values == GRID[point.index]


def _open(path: Path, *, resume: bool = True) -> Journal:
    return Journal(path, IDENTITY, resume=resume, on_grid=on_grid)


def _point(i: int, status: str = "invalid") -> PointResult:
    return PointResult(i, GRID[i], status, f"point {i}")


# --- lines ------------------------------------------------------------------------------------
def test_a_sealed_line_verifies_and_any_change_to_it_does_not():
    line = seal({"grid": "g", "point": {"index": 1}})
    assert line.endswith(b"\n") and line.count(b"\t") == 1
    assert unseal(line[:-1]) == {"grid": "g", "point": {"index": 1}}
    assert unseal(line[:-1].replace(b'"index":1', b'"index":2')) is None
    assert unseal(line[:-2]) is None  # a digit of the checksum gone
    assert unseal(b"\xff\x00\t00") is None


def test_the_fingerprint_is_the_grids_not_the_scenario_files_name():
    other_name = IDENTITY | {"scenario": "elsewhere/s.yaml"}
    other_grid = IDENTITY | {"axes": [{"path": "x", "values": [1, 2, 3]}]}
    fp = journal_module.fingerprint
    assert fp(IDENTITY) == fp(other_name) != fp(other_grid)


# --- a cut last line --------------------------------------------------------------------------
def test_a_cut_last_line_is_cut_off_before_appending_and_a_second_crash_loses_nothing(tmp_path):
    path = tmp_path / "j.jsonl"
    log = _open(path, resume=False)
    log.add(_point(0))
    log.add(_point(1))
    log.close()
    whole = path.read_bytes()
    with path.open("ab") as f:  # a crash in the middle of the third point's line
        f.write(seal({"grid": log.grid, "point": _point(2).to_json()})[:25])
    log = _open(path)
    assert sorted(log.done) == [0, 1] and not log.warnings
    assert path.read_bytes() == whole  # cut back before anything is appended
    log.add(_point(2))
    log.close()
    with path.open("ab") as f:  # a second crash, the same way
        f.write(b'{"grid":"')
    log = _open(path)
    assert sorted(log.done) == [0, 1, 2] and not log.warnings
    log.add(_point(3))
    log.close()
    lines = path.read_bytes().splitlines()
    assert len(lines) == 5 and all(unseal(line) is not None for line in lines)


def test_a_whole_last_line_without_its_line_feed_is_kept_and_ended(tmp_path):
    path = tmp_path / "j.jsonl"
    log = _open(path, resume=False)
    log.add(_point(0))
    log.close()
    path.write_bytes(path.read_bytes()[:-1])  # an editor that drops the last line feed
    log = _open(path)
    assert sorted(log.done) == [0]
    log.add(_point(1))
    log.close()
    assert [unseal(line)["point"]["index"] for line in path.read_bytes().splitlines()[1:]] == [0, 1]


def test_lines_off_the_grid_are_counted_in_one_warning_and_left_out(tmp_path):
    path = tmp_path / "j.jsonl"
    log = _open(path, resume=False)
    grid = log.grid
    log.add(_point(0))
    log.close()
    bad = [
        {"grid": grid, "point": _point(1).to_json() | {"index": 7}},
        {"grid": grid, "point": _point(1).to_json() | {"values": {"x": 9}}},
        {"grid": "0" * 16, "point": _point(1).to_json()},
        {"grid": grid, "point": _point(1).to_json() | {"status": "fine"}},
    ]
    with path.open("ab") as f:
        for data in bad:
            f.write(seal(data))
        f.write(seal({"grid": grid, "point": _point(2).to_json()}).replace(b"point 2", b"point 3"))
    log = _open(path)
    log.close()
    assert sorted(log.done) == [0]
    assert (
        len(log.warnings) == 1 and "5 line(s)" in log.warnings[0] and str(path) in log.warnings[0]
    )


def test_an_empty_journal_blocks_neither_a_rerun_nor_a_resume(tmp_path):
    path = tmp_path / "j.jsonl"
    for resume in (False, True):
        path.write_bytes(b"")
        log = _open(path, resume=resume)
        log.close()
        assert unseal(path.read_bytes().splitlines()[0])["journal"] == journal_module.VERSION


# --- the lock ---------------------------------------------------------------------------------
def test_a_second_sweep_on_a_journal_in_use_is_refused(tmp_path):
    path = tmp_path / "j.jsonl"
    first = _open(path, resume=False)
    with pytest.raises(InputError, match="another pddplan sweep is running on this journal"):
        _open(path)
    first.add(_point(0))
    first.close()
    second = _open(path)  # the lock went with the first
    assert sorted(second.done) == [0]
    second.close(remove=True)
    assert not path.exists()


def test_the_command_line_refuses_a_journal_another_process_holds(tmp_path):
    out = tmp_path / "o.csv"
    path = Path(f"{out}.journal.jsonl")
    log = _open(path, resume=False)  # any holder of the lock, as a running sweep
    try:
        res = run_main("sweep", str(SMALL), "--vary", "sla.ttft_p99_s=1,2", "--out", str(out),
                       "--resume", "--workers", "1")  # fmt: skip
    finally:
        log.close()
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
    assert res.output.startswith(f"Error: {path}") and "another pddplan sweep" in res.output


def test_flock_is_what_holds_it(tmp_path):
    """The lock is the kernel's (``fcntl.flock``): a process that holds it keeps others off."""
    path = tmp_path / "j.jsonl"
    log = _open(path, resume=False)
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        log.close()
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)


# --- a write that fails -----------------------------------------------------------------------
ARGS = ("sweep", str(SMALL), "--vary", "prices_usd_per_gpu_hour.h100-sxm=2,3", "--workers", "1",
        "--format", "csv")  # fmt: skip
"""A two-point sweep: the first point counts, the second only re-prices (cheap)."""


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> bytes:
    """``ARGS``' output, run once uninterrupted."""
    out = tmp_path_factory.mktemp("reference") / "ref.csv"
    assert run_main(*ARGS, "--out", str(out)).exit_code == 0
    return out.read_bytes()


def _full_disk(monkeypatch, path: Path, *, after: int = 0) -> None:
    """``os.write`` to ``path`` fails as on a full disk after ``after`` successful writes."""
    real, writes = os.write, [0]

    def write(fd: int, data: bytes) -> int:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if target == str(path):
            writes[0] += 1
            if writes[0] > after:
                return real(fd, bytes(data)[: len(data) // 2]) and _raise()
        return real(fd, data)

    def _raise() -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(journal_module.os, "write", write)


def test_a_journal_that_cannot_be_started_leaves_nothing(tmp_path, monkeypatch):
    out = tmp_path / "o.csv"
    path = Path(f"{out}.journal.jsonl")
    _full_disk(monkeypatch, path)
    res = run_main("sweep", str(SMALL), "--vary", "sla.ttft_p99_s=1,2", "--out", str(out),
                   "--workers", "1")  # fmt: skip
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
    assert res.output.startswith(f"Error: {path}: cannot write the sweep's journal: No space")
    assert not any(tmp_path.iterdir())  # no 0-byte journal to refuse the next run


@pytest.mark.slow  # over 1 s: the default run's time (README)
def test_a_write_that_fails_names_the_journal_and_a_resume_finishes(
    tmp_path, monkeypatch, reference
):
    out = tmp_path / "o.csv"
    path = Path(f"{out}.journal.jsonl")
    with monkeypatch.context() as m:
        _full_disk(m, path, after=2)  # the header and the first point, then a full disk
        res = run_main(*ARGS, "--out", str(out))
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert res.output.startswith(f"Error: {path}: cannot write the sweep's journal: No space")
    assert "finished point(s) it holds are kept" in res.output
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines) == 2 and all(line.endswith(b"\n") for line in lines)  # cut back
    res = run_main(*ARGS, "--out", str(out), "--resume")
    assert res.exit_code == 0 and "Warning" not in res.output, res.output
    assert out.read_bytes() == reference and not path.exists()


# --- SIGTERM as SIGINT --------------------------------------------------------------------------
def test_sigterm_stops_a_command_with_one_line_exit_143_and_no_file(tmp_path, monkeypatch):
    import pddplan

    def solve(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # as `kill PID` would, mid-command
        raise AssertionError("the signal did not stop the command")

    monkeypatch.setattr(pddplan, "solve", solve)
    out = tmp_path / "plan.json"
    before = signal.getsignal(signal.SIGTERM)
    res = run_main("solve", str(SMALL), "--out", str(out))
    assert res.exit_code == 143, res.output
    assert res.stderr.strip().splitlines() == ["stopped by SIGTERM; no file was left half-written"]
    assert not any(tmp_path.iterdir())
    assert signal.getsignal(signal.SIGTERM) == before  # the handlers put back


@pytest.mark.slow  # a sweep stopped and resumed, twice: the default run's time (README)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_mid_sweep_journals_what_finished_and_a_resume_finishes(
    tmp_path, monkeypatch, signum, reference
):
    from pddplan.sweeps.points import PointRunner

    real, planned = PointRunner.run, []

    def run(self, index, values):
        planned.append(index)
        if len(planned) == 2:  # as `kill PID` (or Ctrl-C) would, in the second point
            os.kill(os.getpid(), signum)
        return real(self, index, values)

    out = tmp_path / "o.csv"
    with monkeypatch.context() as m:
        m.setattr(PointRunner, "run", run)
        # Ctrl-C in a terminal: a run started in the background (CI's, say) begins with
        # SIGINT ignored, which the CLI keeps ignored, as a background job's should be
        m.setattr(signal, "getsignal", _foreground(signal.getsignal))
        res = run_main(*ARGS, "--out", str(out))
    assert res.exit_code == 128 + signum, res.output
    name = "SIGTERM" if signum == signal.SIGTERM else "SIGINT (Ctrl-C)"
    assert (
        res.stderr.strip()
        .splitlines()[-1]
        .startswith(
            f"interrupted by {name} after 1 of 2 points; run the same command again with --resume"
        )
    ), res.stderr
    assert not out.exists()
    res = run_main(*ARGS, "--out", str(out), "--resume")
    assert res.exit_code == 0, res.output
    assert out.read_bytes() == reference


def _foreground(getsignal):
    """``signal.getsignal`` as a foreground process sees it: SIGINT not ignored."""

    def seen(signum):
        handler = getsignal(signum)
        if signum == signal.SIGINT and handler == signal.SIG_IGN:
            return signal.default_int_handler
        return handler

    return seen


def _ray_processes(marker: str) -> list[str]:
    """The processes whose command line names ``marker`` (a Ray temp folder of one run)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if proc.name.isdigit() and marker.encode() in cmdline:
            found.append(proc.name)
    return found


@pytest.mark.slow
def test_sigterm_shuts_down_the_ray_instance_a_sweep_started(tmp_path):
    """Ray's own SIGTERM handler (exit 1, Ray left running) does not replace the command
    line's: the sweep journals, says how to resume, exits 143 and leaves no Ray process."""
    import shutil
    import subprocess
    import sys
    import tempfile
    import time

    pytest.importorskip("ray")
    ray_tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths
    out = tmp_path / "o.csv"
    journal = Path(f"{out}.journal.jsonl")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pddplan", "sweep", str(SMALL), "--vary",
         "workload.arrival_rps=10:20:0.5", "--runner", "ray", "--workers", "1", "--format",
         "csv", "--out", str(out)],
        env=os.environ | {"RAY_TMPDIR": ray_tmp}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300  # a bound on waiting for a condition, not a timing
        while time.monotonic() < deadline and proc.poll() is None:
            if journal.exists() and len(journal.read_bytes().splitlines()) >= 2:
                break
            time.sleep(0.2)
        assert _ray_processes(ray_tmp), "Ray was not running mid-sweep"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        left = _ray_processes(ray_tmp)  # shut down before the command returned
    finally:
        if proc.poll() is None:
            proc.kill()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert proc.returncode == 143, err
    assert "Traceback" not in err, err
    assert any(line.startswith("interrupted by SIGTERM after") for line in err.splitlines()), err
    assert not left, err
