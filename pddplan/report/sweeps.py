"""A sweep's results as a rich table, CSV, JSON or Parquet (``pddplan sweep``).

CSV and Parquet hold ``pddplan.sweeps.analysis.rows``: one row per point and architecture,
without clock readings, so that the same sweep gives the same bytes however it ran. JSON
holds the sweep's identity, its run (engine, workers, seconds) and every point with its
clock readings (``wall_s``, ``solve_s``). Parquet needs pyarrow (``pip install
'pddplan[parquet]'``).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections import Counter
from typing import Any

from rich.console import Group
from rich.text import Text

from pddplan.errors import InputError
from pddplan.report.tables import grid
from pddplan.spec.status import PlanStatus, PointStatus, RowStatus
from pddplan.sweeps import analysis
from pddplan.sweeps.engine import SweepRun

MAX_TABLE_ROWS = 60
"""Rows a terminal table shows; the rest are counted (every row is in --format csv)."""


def default_metric(run: SweepRun) -> str:
    """The metric of the sweep's objective (cost for min-cost, bcr, capacity)."""
    return analysis.metric_of(run.job.settings.objective)


def _num(v: Any, digits: int = 4) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.{digits}g}" if math.isfinite(v) else "inf"
    return str(v)


def sweep_table(run: SweepRun, metric: str) -> Group:
    """The terminal report: a row per point and architecture, then the fleets it names,
    the break-even points and how the run went.

    Numbers are never cut: the fleets (long) are named in the rows by a short id (``F1``;
    ``N1`` for why a row has no plan) and spelled out once each below the table, so that it
    reads at 80 columns, and a fleet that holds across many points shows as one id."""
    paths = [a.path for a in run.job.axes]
    rows = analysis.rows(run)
    shown = rows[:MAX_TABLE_ROWS]
    fleets: dict[str, tuple[str, str]] = {}  # identity -> (id, text), in order of first use
    notes: dict[str, str] = {}

    def ref(r: dict[str, Any]) -> str:
        if r["status"] == RowStatus.OK and r["fleet"]:
            key = r.get("deployment_id") or r["fleet"]
            return fleets.setdefault(key, (f"F{len(fleets) + 1}", r["fleet"]))[0]
        text = r["reason"] or r["fleet"] or "-"
        return notes.setdefault(text, f"N{len(notes) + 1}")

    relaxed: dict[str, None] = {}  # what the starred rows relax, in order of first use

    def arch(label: str | None) -> str:
        """The architecture, its datacenter on a second line; a relaxation (the label's
        ``(if ...)``, as ``plan.compare`` writes it) as a star, spelled out below."""
        name, sep, why = (label or "-").partition(" (if ")
        if sep and why.endswith(")"):
            relaxed["if " + why[:-1]] = None
            name += " *"
        return name.replace(" in ", "\nin ", 1)

    cells = []
    for r in shown:
        cost = r["cost_per_month_usd"]
        stop: dict[str, str] = {
            PlanStatus.WORK_LIMIT: " (work limit)",
            PlanStatus.TIME_LIMIT: " (time limit)",
        }
        status = r["status"] + stop.get(r["solver_status"] or "", "")
        cells.append([
            *(_num(r[p], 6) for p in paths),
            arch(r["architecture"]),
            status,
            "-" if cost is None else f"{cost:,.0f}",
            _num(r["sla_capacity_rps"]),
            _num(r["bcr"]),
            _num(r["ttft_p99_s"], 3),
            ref(r),
        ])  # fmt: skip
    headers = [*(p.rpartition(".")[2] for p in paths), "architecture", "status", "$/month",
               "req/s", "BCR", "P99 s", "fleet"]  # fmt: skip
    # the architecture wraps (words); numbers, statuses and fleet ids never do: at a narrow
    # width the figures other than the metric's are left out first (BCR, P99, req/s, cost)
    words = len(paths)  # the architecture column
    kept = {"cost": "$/month", "bcr": "BCR", "capacity": "req/s", "ttft_p99": "P99 s"}.get(metric)
    drop = [headers.index(h) for h in ("BCR", "P99 s", "req/s", "$/month") if h != kept]
    t = grid(f"Sweep of {run.job.scenario}: {len(run.points):,} of {run.total:,} points",
             headers, text=words, left=-1, drop=drop)  # fmt: skip
    t.title_justify = "left"
    for name in ("status", "fleet"):
        t.columns[headers.index(name)].justify = "left"
    for c in cells:
        t.add_row(*c)
    lines: list[Any] = [t]
    texts = Counter(text for _, text in fleets.values())
    for identity, (key, text) in fleets.items():  # two deployments apart past the text's digits
        label = f"{text} ({identity})" if texts[text] > 1 else text
        lines.append(Text(f"{key:>4}  {label}"))
    for text, key in notes.items():
        lines.append(Text(f"{key:>4}  {text}"))
    lines.append(Text("F: the deployment planned (pools as role instances x GPUs chip@datacenter; "
                      "the link; the router; the handoff and decode-side cache where set: one id "
                      "per deployment); N: why there is no plan. req/s: SLA capacity; "
                      "BCR: req/s per USD/hour; P99 s: TTFT P99 at the demand. Varied: "
                      + "; ".join(
                          f"{p} ({analysis.axis_label(p)})" for p in paths), style="dim"))  # fmt: skip
    if relaxed:
        lines.append(Text("* relaxes the scenario: " + "; ".join(relaxed), style="dim"))
    if len(rows) > MAX_TABLE_ROWS:
        lines.append(Text(f"... {len(rows) - MAX_TABLE_ROWS:,} more rows (--format csv has all)",
                          style="dim"))  # fmt: skip
    for b in analysis.break_evens(run, metric):
        lines.append(Text(f"break-even ({metric}): {b.text()}"))
    lines += [Text(note) for note in run.notes]
    failed = sum(p.status != PointStatus.OK for p in run.points)
    rate = len(run.points) - run.resumed
    speed = f", {rate / run.wall_s:.2f} points/s" if run.wall_s > 0 and rate else ""
    lines.append(Text(
        (f"{run.pass_times} pass times; " if run.pass_times else "")
        + f"{run.engine} runner, {run.workers} worker(s): {rate:,} points in {run.wall_s:.1f} s"
        f"{speed}; {run.resumed:,} from the journal; {failed:,} invalid or failed"
        + ("; interrupted: run again with --resume" if run.interrupted else ""), style="dim"))  # fmt: skip
    return Group(*lines)


def sweep_csv(run: SweepRun) -> str:
    rows = analysis.rows(run)
    buf = io.StringIO()
    columns = [a.path for a in run.job.axes] + list(analysis.COLUMNS)
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if v is None else repr(v) if isinstance(v, float) else v)
                    for k, v in r.items()})  # fmt: skip
    return buf.getvalue()


def sweep_json(run: SweepRun) -> str:
    data = {
        "sweep": run.job.identity(),
        "run": {
            "runner": run.engine,
            "pass_times": run.pass_times,
            "workers": run.workers,
            "wall_s": run.wall_s,
            "points": len(run.points),
            "total": run.total,
            "resumed": run.resumed,
            "interrupted": run.interrupted,
        },
        "notes": list(run.notes),
        "points": [p.to_json() for p in run.points],
    }
    return json.dumps(data, indent=1, sort_keys=True, default=float) + "\n"


def sweep_parquet(run: SweepRun) -> bytes:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(
            "--format parquet needs pyarrow: pip install 'pddplan[parquet]' (or pyarrow)"
        ) from None
    rows = analysis.rows(run)
    columns = [a.path for a in run.job.axes] + list(analysis.COLUMNS)
    table = pa.Table.from_pylist([{c: r.get(c) for c in columns} for r in rows])
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()
