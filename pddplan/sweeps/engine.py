"""Running a sweep's points: in this process, on local worker processes, or as Ray tasks;
journalled point by point so that an interrupted sweep resumes where it stopped.

- **Workers** (``workers > 1``) are spawned processes, each started with ``PYTHONHASHSEED=0``
  and one BLAS thread, in a process group of its own (the terminal's Ctrl-C reaches only
  this process, which then kills each worker's group: the worker and its solver
  subprocess). Each takes a chunk of consecutive points (``chunk_size``): consecutive
  points differ in the last axes first, so a worker's points share the tables of the
  first axes' values. A worker sends every point back as it finishes.
- **The journal** (``pddplan.sweeps.journal``): a header line with the sweep's identity
  (``SweepJob.identity``) and its grid's fingerprint, then one line per finished point,
  each with a checksum, fsync'ed as it is written, the file locked while the sweep runs.
  ``resume`` keeps the journalled points (``ok`` and ``invalid``) that verify and lie on
  the grid, and runs the rest; a journal of another sweep is an error, never overwritten.
  A point cut short by Ctrl-C or SIGTERM is journalled as ``interrupted``, which a resume
  runs again.
- **Results** do not depend on the engine or the number of workers: a point is a pure
  function of the scenario, its values and the settings (``tests/test_sweep.py`` compares
  the bytes).
"""

from __future__ import annotations

import hashlib
import json
import math
import multiprocessing
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pddplan.errors import InputError
from pddplan.model.problem import Problem
from pddplan.progress import Progress
from pddplan.spec.status import PointStatus
from pddplan.sweeps.axes import Axis, points
from pddplan.sweeps.journal import JOURNALLED, Journal, fingerprint, signals_deferred
from pddplan.sweeps.points import PointResult, PointRunner, Settings

WORKER_ENV = {
    "PYTHONHASHSEED": "0",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
"""The environment every worker starts with: string hashing and BLAS threads fixed."""


@dataclass(frozen=True)
class SweepJob:
    """What a sweep asks: the scenario, its axes and the settings of every point."""

    scenario: str
    """The scenario's file (as given) or name."""
    scenario_digest: str
    """SHA-256 of the scenario as validated: a resume must sweep the same scenario."""
    axes: tuple[Axis, ...]
    zipped: bool = False
    settings: Settings = field(default_factory=Settings)

    def points(self) -> list[dict[str, Any]]:
        return points(list(self.axes), zipped=self.zipped)

    def identity(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "scenario_digest": self.scenario_digest,
            "axes": [{"path": a.path, "values": list(a.values)} for a in self.axes],
            "zipped": self.zipped,
            "settings": asdict(self.settings)
            | {"architectures": list(self.settings.architectures)},
        }


def scenario_digest(problem: Problem) -> str:
    data = json.dumps(problem.scenario.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(data.encode()).hexdigest()


@dataclass
class SweepRun:
    """A sweep's points, in point order, and how the run went."""

    job: SweepJob
    points: list[PointResult]
    total: int
    """Points in the grid; fewer in ``points`` when the run was interrupted."""
    interrupted: bool = False
    resumed: int = 0
    """Points taken from the journal."""
    wall_s: float = 0.0
    workers: int = 1
    engine: str = "local"
    notes: list[str] = field(default_factory=list)
    """What a study found (the demand study's steps)."""
    pass_times: str = ""
    """The engine profile whose pass times every point assumes."""
    warnings: list[str] = field(default_factory=list)
    """What reading the journal found and ignored (one line each)."""
    journal: Journal | None = None
    """The journal, still open and locked, where the caller asked to hold it."""

    def close_journal(self, *, remove: bool = False) -> None:
        """Close a held journal and let its lock go; ``remove``: delete it first (once its
        points are in the written output)."""
        if self.journal is not None:
            self.journal.close(remove=remove)
            self.journal = None

    @property
    def complete(self) -> bool:
        return (
            not self.interrupted
            and len(self.points) == self.total
            and all(p.status in JOURNALLED for p in self.points)
        )


STOPPED = "stopped by Ctrl-C or SIGTERM"
"""The reason an interrupted point gives."""


# --- the journal ------------------------------------------------------------------------------
def grid_journal(
    path: Path, job: SweepJob, *, resume: bool, grid: list[dict[str, Any]] | None = None
) -> Journal:
    """The journal of ``job``'s grid at ``path`` (``pddplan.sweeps.journal``): a point read
    back must be the grid's point at its index, values and all (``grid``: the job's points,
    where the caller has made them already)."""
    points = job.points() if grid is None else grid

    def on_grid(point: PointResult) -> bool:
        return 0 <= point.index < len(points) and _canonical(point.values) == _canonical(
            points[point.index]
        )

    return Journal(path, job.identity(), resume=resume, on_grid=on_grid)


def journal_in(folder: Path, job: SweepJob) -> Path:
    """Where ``job``'s journal goes in a folder of journals (the user's cache, for a sweep
    run without an output file): a file named by its grid's fingerprint, so that the same
    sweep run again finds it (``--resume``) and another sweep never does. The folder is
    made if it does not exist."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"{folder}: cannot keep the sweep's journal there: {e.strerror}") from None
    return folder / f"{fingerprint(job.identity())}.journal.jsonl"


def _canonical(values: dict[str, Any]) -> str:
    return json.dumps(values, sort_keys=True)


# --- engines ----------------------------------------------------------------------------------
def run_sweep(
    problem: Problem,
    job: SweepJob,
    *,
    workers: int = 1,
    engine: str = "local",
    address: str | None = None,
    journal: Path | None = None,
    resume: bool = False,
    hold_journal: bool = False,
    progress: Progress | None = None,
) -> SweepRun:
    """Every point of ``job`` on ``problem`` (module docstring). ``workers``: processes (1:
    this one); ``engine``: ``local`` or ``ray`` (``address``: a running cluster's, else a
    local instance). Ctrl-C (or SIGTERM, where the caller turns it into
    ``KeyboardInterrupt``) ends the run with ``interrupted`` set: what finished is in the
    journal and in the result. ``hold_journal``: the journal stays open and locked in the
    result (``SweepRun.close_journal``). ``progress`` (``pddplan.progress``) hears the
    points done (the journal's first) and the failures so far, at the start and as each
    point finishes."""
    if workers < 1:
        raise InputError(f"--workers must be 1 or more, got {workers}")
    grid = job.points()
    log = grid_journal(journal, job, resume=resume, grid=grid) if journal is not None else None
    done: dict[int, PointResult] = dict(log.done) if log is not None else {}
    resumed = len(done)
    todo = [(i, v) for i, v in enumerate(grid) if i not in done]
    start = time.perf_counter()
    failed = sum(p.failed for p in done.values())

    def tell() -> None:
        if progress is not None:
            progress(len(done), len(grid), f"{failed:,} failed" if failed else "")

    def finished(point: PointResult) -> None:
        nonlocal failed
        if point.status != PointStatus.INTERRUPTED:
            done[point.index] = point
            failed += point.failed
        if log is not None:
            log.add(point)
        tell()

    tell()

    interrupted = False
    held = False
    try:
        if engine == "ray":
            from pddplan.sweeps.ray_engine import run_ray

            interrupted = run_ray(problem, job.settings, todo, finished, address=address,
                                  chunk=chunk_size(len(todo), workers, job),
                                  num_cpus=None if address else workers)  # fmt: skip
        elif workers == 1 or len(todo) <= 1:
            interrupted = _run_here(problem, job.settings, todo, finished)
        else:
            interrupted = _run_pool(problem, job.settings, todo, finished, workers, job)
        held = hold_journal
    except KeyboardInterrupt:  # before an engine's own handling began: nothing was running
        interrupted = True
        held = hold_journal
    finally:
        if log is not None and not held:
            log.close()
    run = SweepRun(job, [done[i] for i in sorted(done)], len(grid), interrupted, resumed,
                   time.perf_counter() - start, workers, engine, pass_times=problem.engine_label,
                   warnings=list(log.warnings) if log else [],
                   journal=log if held else None)  # fmt: skip
    return run


def chunk_size(points: int, workers: int, job: SweepJob) -> int:
    """Points a worker takes at a time: the last axes' grid (points that share the first
    axes' tables), at most an eighth of each worker's share so that the workers finish
    together, and at least 1."""
    inner = math.prod(len(a.values) for a in job.axes[1:]) if not job.zipped else 1
    return max(1, min(inner, math.ceil(points / (8 * workers))))


def _run_here(
    problem: Problem,
    settings: Settings,
    todo: list[tuple[int, dict[str, Any]]],
    finished: Callable[[PointResult], None],
) -> bool:
    runner = PointRunner(problem, settings)
    for index, values in todo:
        try:
            point = runner.run(index, values)
        except KeyboardInterrupt:
            finished(PointResult(index, values, PointStatus.INTERRUPTED, STOPPED))
            return True
        except Exception as e:  # a bug: the point says so, the sweep goes on (as a worker's)
            point = PointResult(index, values, PointStatus.ERROR, f"{type(e).__name__}: {e}")
        finished(point)
    return False


# --- local worker processes -------------------------------------------------------------------
_RUNNER: PointRunner | None = None


def _worker_main(payload: tuple[Any, ...], conn: Any) -> None:
    """A worker: load the problem once, then ask for a chunk, plan it point by point
    (each point's start and result sent back), and ask again; ``None`` ends it."""
    global _RUNNER
    os.setpgrp()  # its own group: the terminal's Ctrl-C goes to the parent alone
    _follow_parent()
    scenario, hardware, model, engines, settings = payload
    _RUNNER = PointRunner(Problem(scenario, hardware, model, engines=engines), settings)
    try:
        while True:
            conn.send(("ready", None))
            chunk = conn.recv()
            if chunk is None:
                return
            for index, values in chunk:
                conn.send(("start", index))
                try:
                    point = _RUNNER.run(index, values)
                except Exception as e:  # a bug: the point says so, the sweep goes on
                    point = PointResult(
                        index, values, PointStatus.ERROR, f"{type(e).__name__}: {e}"
                    )
                conn.send(("done", point.to_json()))
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return  # the parent is gone (a second Ctrl-C ends it at once): nothing to tell


def _follow_parent(every_s: float = 1.0) -> None:
    """Watch the parent from a thread: a parent gone without stopping this worker (killed
    with SIGKILL, which it cannot handle) takes the worker's group with it (the worker and
    its solver subprocess), so that no orphan plans on."""
    import threading

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        os.killpg(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="follow-parent", daemon=True).start()


@contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextmanager
def _ctrl_c_blocked() -> Iterator[None]:
    """SIGINT blocked in this thread for the block: a process started in it (a worker)
    inherits the mask and never takes the terminal's Ctrl-C, even while it starts, before
    it leaves the terminal's process group; one that reaches this process meanwhile waits
    and is delivered when the block ends."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _run_pool(
    problem: Problem,
    settings: Settings,
    todo: list[tuple[int, dict[str, Any]]],
    finished: Callable[[PointResult], None],
    workers: int,
    job: SweepJob,
) -> bool:
    """``todo`` on ``workers`` spawned processes, a chunk at a time to whichever asks.
    Each worker has a pipe of its own: no queue, lock or semaphore is shared, so nothing
    is left for Python's resource tracker to clean up (and warn of, as "leaked
    semaphore") however the run ends, a second Ctrl-C included. A worker that dies ends
    its point as an ``error``; the rest of its chunk goes to the others."""
    from multiprocessing.connection import wait

    ctx = multiprocessing.get_context("spawn")
    size = chunk_size(len(todo), workers, job)
    chunks = deque(todo[k : k + size] for k in range(0, len(todo), size))
    workers = min(workers, len(chunks))
    payload = (problem.scenario, problem.hardware, problem.model, problem.engines, settings)
    values = dict(todo)
    procs: list[Any] = []
    conns: dict[Any, Any] = {}  # the parent's end of each worker's pipe -> its process
    held: dict[Any, list[tuple[int, dict[str, Any]]]] = {}  # its chunk's points not done
    running: dict[Any, int] = {}  # the point each worker is planning
    left = len(todo)

    def dead(conn: Any) -> None:
        """A worker gone without being told to stop: its point an error, the rest of its
        chunk back in line."""
        nonlocal left
        p = conns.pop(conn)
        conn.close()
        p.join(timeout=5)
        index = running.pop(conn, None)
        rest = [x for x in held.pop(conn, []) if x[0] != index]
        if index is not None:
            finished(PointResult(index, values[index], PointStatus.ERROR,
                                 f"its worker died (exit code {p.exitcode})"))  # fmt: skip
            left -= 1
        if rest:
            chunks.appendleft(rest)

    try:
        for _ in range(workers):
            here, there = ctx.Pipe()
            p = ctx.Process(target=_worker_main, args=(payload, there), daemon=True)
            procs.append(p)
            # whole: a worker cut off while it reads its start-up data would print a traceback
            with _environment(WORKER_ENV), signals_deferred(), _ctrl_c_blocked():
                p.start()
            there.close()
            conns[here] = p
        while left:
            if not conns:
                raise RuntimeError("every sweep worker died")
            ready: list[Any] = wait(list(conns), timeout=1.0)
            for conn in ready:
                try:
                    kind, data = conn.recv()
                except (EOFError, OSError):
                    dead(conn)
                    continue
                if kind == "ready":
                    chunk = chunks.popleft() if chunks else None
                    try:
                        conn.send(chunk)
                    except OSError:
                        if chunk is not None:
                            chunks.appendleft(chunk)
                        dead(conn)
                        continue
                    if chunk is None:  # nothing left for it: it ends
                        conns.pop(conn)
                        conn.close()
                    else:
                        held[conn] = list(chunk)
                elif kind == "start":
                    running[conn] = data
                else:
                    point = PointResult.from_json(data)
                    running.pop(conn, None)
                    held[conn] = [x for x in held.get(conn, []) if x[0] != point.index]
                    finished(point)
                    left -= 1
    except KeyboardInterrupt:
        _kill(procs)
        for index in sorted(running.values()):
            finished(PointResult(index, values[index], PointStatus.INTERRUPTED, STOPPED))
        return True
    finally:
        _kill(procs)
        for conn in conns:
            conn.close()
    return False


def _kill(procs: list[Any]) -> None:
    """Each worker's process group (the worker and its solver subprocess), killed; one
    not started yet is left alone."""
    for p in procs:
        if p.pid is None:
            continue
        if p.is_alive():
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                p.kill()
        p.join(timeout=5)
