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
import queue
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pddplan.errors import InputError
from pddplan.model.problem import Problem
from pddplan.spec.status import PointStatus
from pddplan.sweeps.axes import Axis, points
from pddplan.sweeps.journal import JOURNALLED, Journal, signals_deferred
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
Progress = Callable[[PointResult, int, int], None]
"""Told each finished point, with the points done and the total."""


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
    result (``SweepRun.close_journal``)."""
    if workers < 1:
        raise InputError(f"--workers must be 1 or more, got {workers}")
    grid = job.points()
    log = grid_journal(journal, job, resume=resume, grid=grid) if journal is not None else None
    done: dict[int, PointResult] = dict(log.done) if log is not None else {}
    resumed = len(done)
    todo = [(i, v) for i, v in enumerate(grid) if i not in done]
    start = time.perf_counter()

    def finished(point: PointResult) -> None:
        if point.status != PointStatus.INTERRUPTED:
            done[point.index] = point
        if log is not None:
            log.add(point)
        if progress is not None:
            progress(point, len(done), len(grid))

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
                   time.perf_counter() - start, workers, engine, pass_times=problem.engine.id,
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


def _worker_main(payload: tuple[Any, ...], tasks: Any, results: Any) -> None:
    """A worker: load the problem once, then plan each chunk it takes, point by point."""
    global _RUNNER
    os.setpgrp()  # its own group: the terminal's Ctrl-C goes to the parent alone
    _follow_parent()
    scenario, hardware, model, engines, settings = payload
    _RUNNER = PointRunner(Problem(scenario, hardware, model, engines=engines), settings)
    while True:
        chunk = tasks.get()
        if chunk is None:
            return
        for index, values in chunk:
            results.put(("start", os.getpid(), index))
            try:
                point = _RUNNER.run(index, values)
            except Exception as e:  # a bug: the point says so, the sweep goes on
                point = PointResult(index, values, PointStatus.ERROR, f"{type(e).__name__}: {e}")
            results.put(("done", os.getpid(), point.to_json()))


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


def _run_pool(
    problem: Problem,
    settings: Settings,
    todo: list[tuple[int, dict[str, Any]]],
    finished: Callable[[PointResult], None],
    workers: int,
    job: SweepJob,
) -> bool:
    ctx = multiprocessing.get_context("spawn")
    tasks, results = ctx.Queue(), ctx.Queue()
    size = chunk_size(len(todo), workers, job)
    for k in range(0, len(todo), size):
        tasks.put(todo[k : k + size])
    workers = min(workers, math.ceil(len(todo) / size))
    for _ in range(workers):
        tasks.put(None)
    payload = (problem.scenario, problem.hardware, problem.model, problem.engines, settings)
    values = dict(todo)
    procs = [ctx.Process(target=_worker_main, args=(payload, tasks, results), daemon=True)
             for _ in range(workers)]  # fmt: skip
    running: dict[int, int] = {}  # worker pid -> the point it is planning
    left = len(todo)
    try:
        for p in procs:  # whole: a worker cut off while it reads its start-up data would
            with _environment(WORKER_ENV), signals_deferred():  # print a traceback
                p.start()
        while left:
            try:
                kind, pid, data = results.get(timeout=1.0)
            except queue.Empty:
                dead = [p for p in procs if not p.is_alive() and p.exitcode not in (0, None)]
                for p in dead:
                    index = running.pop(p.pid, None) if p.pid is not None else None
                    if index is not None:
                        finished(PointResult(index, values[index], PointStatus.ERROR,
                                             f"its worker died (exit code {p.exitcode})"))  # fmt: skip
                        left -= 1
                    procs.remove(p)
                if not procs:
                    raise RuntimeError("every sweep worker died") from None
                continue
            if kind == "start":
                running[pid] = data
            else:
                running.pop(pid, None)
                finished(PointResult.from_json(data))
                left -= 1
    except KeyboardInterrupt:
        _kill(procs)
        for index in sorted(running.values()):
            finished(PointResult(index, values[index], PointStatus.INTERRUPTED, STOPPED))
        return True
    finally:
        _kill(procs)
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
