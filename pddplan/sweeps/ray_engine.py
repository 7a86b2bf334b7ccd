"""Sweep points as Ray tasks: one task per chunk of consecutive points, on a running
cluster (``address``) or on a local instance started for the sweep. The only module that
imports ray (``pip install 'pddplan[ray]'``).

Each task gets the problem's inputs (scenario, hardware, model, engines: plain validated data, a
few kB), builds its own ``Problem`` and plans its chunk as a local worker does, with
``PYTHONHASHSEED=0`` and one BLAS thread in its runtime environment: the results are the
same bytes as the local engine's. Chunks are collected as they finish and journalled point
by point.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

from pddplan.errors import InputError
from pddplan.model.problem import Problem
from pddplan.spec.status import PointStatus
from pddplan.sweeps.engine import STOPPED, WORKER_ENV
from pddplan.sweeps.points import PointResult, PointRunner, Settings

INIT_TIMEOUT_S = 10.0
"""How long connecting to (or starting) a Ray instance may take."""
LOCAL_OBJECT_STORE_BYTES = 80 * 2**20
"""A local instance's object store: small, since /dev/shm may be (the tasks pass kB)."""


def _chunk(
    payload: tuple[Any, ...], chunk: list[tuple[int, dict[str, Any]]]
) -> list[dict[str, Any]]:
    scenario, hardware, model, engines, settings = payload
    runner = PointRunner(Problem(scenario, hardware, model, engines=engines), settings)
    out = []
    for index, values in chunk:
        try:
            out.append(runner.run(index, values).to_json())
        except Exception as e:  # a bug: the point says so, the sweep goes on
            out.append(
                PointResult(index, values, PointStatus.ERROR, f"{type(e).__name__}: {e}").to_json()
            )
    return out


@contextlib.contextmanager
def _native_stderr_quiet() -> Iterator[None]:
    """Ray's native code logs each failed connection attempt to file descriptor 2; while it
    connects, those lines go to a discarded file, so that a failure is the one line this
    module raises."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


class _InitTimeout(BaseException):
    """Raised by the alarm in ``ray.init``: a BaseException, since Ray's connection loop
    retries on every ``Exception``."""


def _probe(address: str, where: str) -> None:
    """A TCP connection to ``address`` (``HOST:PORT`` or ``ray://HOST:PORT``) within
    ``INIT_TIMEOUT_S``: a refused or unreachable address fails here, at once. Ray's own
    loop would retry it for ever in native code, where no alarm reaches it."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto", or a form Ray resolves itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=INIT_TIMEOUT_S).close()
    except TimeoutError:
        raise InputError(
            f"--runner ray: could not reach {where} within {INIT_TIMEOUT_S:g} s"
        ) from None
    except OSError as e:
        raise InputError(
            f"--runner ray: could not reach {where}: {e.strerror or type(e).__name__}"
        ) from None


def connect(address: str | None, *, num_cpus: int | None = None) -> Any:
    """``ray``, initialised on ``address`` (or a local instance) within ``INIT_TIMEOUT_S``;
    an ``InputError`` of one line when it is not installed or cannot be reached."""
    try:
        import ray
    except ImportError:
        raise InputError(
            "--runner ray needs ray: pip install 'pddplan[ray]' (or pip install 'ray>=2.40')"
        ) from None
    if ray.is_initialized():
        return ray
    env = {"env_vars": dict(WORKER_ENV)}
    kwargs: dict[str, Any] = {"runtime_env": env, "log_to_driver": False,
                              "include_dashboard": False, "configure_logging": False}  # fmt: skip
    if address is None:
        kwargs |= {"num_cpus": num_cpus, "object_store_memory": LOCAL_OBJECT_STORE_BYTES}
    where = f"the Ray cluster at {address}" if address else "a local Ray instance"
    if address is not None:
        _probe(address, where)

    def expired(signum: int, frame: Any) -> None:
        raise _InitTimeout

    old = signal.signal(signal.SIGALRM, expired)  # ray.init must run on the main thread
    signal.setitimer(signal.ITIMER_REAL, INIT_TIMEOUT_S)
    start = time.monotonic()
    ours = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with _native_stderr_quiet():
            ray.init(address=address, **kwargs)
    except _InitTimeout:
        with contextlib.suppress(Exception), _native_stderr_quiet():
            ray.shutdown()
        took = time.monotonic() - start
        late = f" (Ray's native connection attempt gave up after {took:.0f} s)" if took > (
            INIT_TIMEOUT_S + 1) else ""  # fmt: skip
        raise InputError(
            f"--runner ray: {where} did not answer as Ray within {INIT_TIMEOUT_S:g} s{late}"
        ) from None
    except Exception as e:
        first = str(e).strip().splitlines()
        raise InputError(
            f"--runner ray: could not reach {where}: {first[0] if first else e!r}"
        ) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        for signum, handler in ours.items():  # ray.init puts its own on SIGTERM (exit 1,
            if handler is not None:  # no cleanup): the caller's stay
                signal.signal(signum, handler)
    return ray


def run_ray(
    problem: Problem,
    settings: Settings,
    todo: list[tuple[int, dict[str, Any]]],
    finished: Callable[[PointResult], None],
    *,
    address: str | None,
    chunk: int,
    num_cpus: int | None = None,
) -> bool:
    """Plan ``todo`` as Ray tasks of ``chunk`` points; tell ``finished`` each point. True
    when Ctrl-C or SIGTERM (a ``KeyboardInterrupt``) stopped it: the running tasks are
    cancelled and an instance this sweep started is shut down, its agents with it, even
    when the stop comes while it connects; a second signal does not cut the shutdown."""
    installed: Any = None
    with contextlib.suppress(ImportError):
        import ray as installed
    started = installed is None or not installed.is_initialized()
    ray: Any = None
    try:
        ray = connect(address, num_cpus=num_cpus)  # not installed: says how to install it
        # a local instance's shutdown ends its tasks; a cluster's must be cancelled
        return _run(ray, problem, settings, todo, finished, chunk, cancel=address is not None)
    except KeyboardInterrupt:  # while connecting: nothing ran
        return True
    finally:
        if started and (ray is not None or installed is not None):
            with _signals_ignored():  # an instance this sweep started (or connected): let it go
                (ray or installed).shutdown()


@contextlib.contextmanager
def _signals_ignored() -> Iterator[None]:
    """SIGINT and SIGTERM ignored for the block (a second Ctrl-C must not cut Ray's
    shutdown), their handlers put back after it."""
    held = (signal.SIGINT, signal.SIGTERM)
    old = {s: signal.getsignal(s) for s in held}
    for s in held:
        signal.signal(s, signal.SIG_IGN)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _run(
    ray: Any,
    problem: Problem,
    settings: Settings,
    todo: list[tuple[int, dict[str, Any]]],
    finished: Callable[[PointResult], None],
    chunk: int,
    *,
    cancel: bool = True,
) -> bool:
    task = ray.remote(num_cpus=1, max_retries=0)(_chunk)
    payload = ray.put(
        (problem.scenario, problem.hardware, problem.model, problem.engines, settings)
    )
    pending = {task.remote(payload, todo[k : k + chunk]): todo[k : k + chunk]
               for k in range(0, len(todo), chunk)}  # fmt: skip
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                points = pending.pop(ref)
                try:
                    results = [PointResult.from_json(d) for d in ray.get(ref)]
                except ray.exceptions.RayError as e:
                    reason = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
                    why = f"its Ray task failed: {reason}"
                    results = [PointResult(i, v, PointStatus.ERROR, why) for i, v in points]
                for p in results:
                    finished(p)
    except KeyboardInterrupt:
        with _signals_ignored():  # a second Ctrl-C must not cut the cleanup
            for ref, points in pending.items():
                if cancel:  # Ray may abort on a force-cancel racing its task's end: only
                    ray.cancel(ref, force=True)  # where no shutdown of ours ends the task
                for i, v in points:
                    finished(PointResult(i, v, PointStatus.INTERRUPTED, STOPPED))
        return True
    return False
