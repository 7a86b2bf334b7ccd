"""A sweep's saved results read back (``pddplan sweep --format json --out FILE``), for
``pddplan report``: the sweep's identity (its scenario, axes and settings), how it ran and
every point, as the ``SweepRun`` the sweep returned, so that its figures are drawn again
from the file alone. The file is untrusted input: each point is checked as a journal line's
is (``journal.read_point``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

from pddplan.errors import InputError
from pddplan.io.located import read_json_file
from pddplan.io.plan_file import PlanFile, read_plan
from pddplan.spec.choices import Objective
from pddplan.sweeps.axes import Axis
from pddplan.sweeps.engine import SweepJob, SweepRun
from pddplan.sweeps.journal import read_point
from pddplan.sweeps.points import Settings

MAX_RESULTS_BYTES = 256 * 2**20
"""The largest results file read (a million points of one architecture is about 500 MB as
JSON: sweep that many in parts)."""
WRITTEN_BY = "`pddplan sweep ... --format json --out FILE`"
RUN_FIELDS: dict[str, type | tuple[type, ...]] = {
    "total": int,
    "interrupted": bool,
    "resumed": int,
    "wall_s": (int, float),
    "workers": int,
    "runner": str,
    "pass_times": str,
}
"""The results' ``run`` figures read back, with their types (``report.sweeps.sweep_json``)."""
RENAMED = {"runner": "engine"}
"""A ``run`` figure whose ``SweepRun`` field has another name."""


def read_sweep(path: Path) -> SweepRun:
    """The sweep results at ``path`` as a ``SweepRun``; ``InputError`` in one line for a
    file that is not one (CSV or Parquet results hold no sweep identity: the JSON does)."""
    path = Path(path)
    data = _load(path)
    if not is_sweep_results(data):
        raise InputError(
            f"{path}: not sweep results: no sweep and points (written by {WRITTEN_BY})"
        )
    return _run(path, data)


def read_plan_or_sweep(path: Path) -> PlanFile | SweepRun:
    """What ``pddplan report`` is given: a plan file (``read_plan``) or a sweep's saved
    results (``read_sweep``), told apart by their content; ``InputError`` in one line for a
    file that is neither."""
    path = Path(path)
    try:
        return read_plan(path)
    except InputError as e:
        not_a_plan = e
    try:
        data = _load(path)
    except InputError:  # not JSON, not there: what read_plan said
        raise not_a_plan from None
    if not is_sweep_results(data):
        raise InputError(
            f"{path}: neither a plan file (written by `pddplan solve SCENARIO --out PLAN`) nor "
            f"sweep results (written by {WRITTEN_BY})"
        )
    return _run(path, data)


def _load(path: Path) -> Any:
    return read_json_file(
        path,
        what="sweep results",
        max_bytes=MAX_RESULTS_BYTES,
        hint=f"JSON written by {WRITTEN_BY}; CSV and Parquet results cannot be read back",
    )


def is_sweep_results(data: Any) -> bool:
    """Whether parsed JSON has the shape of sweep results (not a plan file)."""
    return isinstance(data, dict) and isinstance(data.get("sweep"), dict) and "points" in data


def _run(path: Path, data: dict[str, Any]) -> SweepRun:
    job = data["sweep"]
    run: dict[str, Any] = data["run"] if isinstance(data.get("run"), dict) else {}
    try:
        axes = tuple(
            Axis(str(a["path"]), tuple(a["values"]), ",".join(str(v) for v in a["values"]))
            for a in job["axes"]
        )
        settings = job["settings"]
        objective: Objective | None = settings.get("objective")
        job_ = SweepJob(
            scenario=str(job["scenario"]),
            scenario_digest=str(job["scenario_digest"]),
            axes=axes,
            zipped=bool(job.get("zipped", False)),
            settings=Settings(
                objective=objective,
                architectures=tuple(str(x) for x in settings["architectures"]),
                solver=settings.get("solver"),
                time_limit_s=settings.get("time_limit_s"),
            ),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise InputError(
            f"{path}: sweep: not a sweep's identity ({type(e).__name__}: {e})"
        ) from None
    if objective is not None and objective not in get_args(Objective):
        raise InputError(f"{path}: sweep.settings.objective: unknown objective {objective!r}")
    if not axes or any(not a.values for a in axes):
        raise InputError(f"{path}: sweep.axes: no varied value")
    if not isinstance(data["points"], list):
        raise InputError(f"{path}: points: a list of points expected")
    points = []
    for i, raw in enumerate(data["points"]):
        point = read_point(raw)
        if point is None or set(point.values) != {a.path for a in axes}:
            raise InputError(f"{path}: points[{i}]: not a sweep point of this sweep's axes")
        points.append(point)
    fields: dict[str, Any] = {"total": len(points)}
    for key, kind in RUN_FIELDS.items():  # how it ran: kept where the file says it well
        v = run.get(key)
        if isinstance(v, kind) and (kind is bool or not isinstance(v, bool)):
            fields[RENAMED.get(key, key)] = v
    return SweepRun(
        job=job_,
        points=points,
        notes=[str(x) for x in data.get("notes") or []],
        **fields,
    )
