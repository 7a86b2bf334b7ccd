"""A 1,000-point sweep of the paper scenario on local workers and on a local Ray instance.

    python benchmarks/sweep_speed.py [--quick] [--workers 2] [--no-ray]
    python benchmarks/sweep_speed.py --sharing

The grid (issue 23's figure): 40 mean prefix hits (0.60-0.99) x 25 H200 prices (2.69-4.30
USD per GPU-hour, log-spaced: 1.0-1.6x the H100's), min cost, PDD, on
scenarios/pdd-paper-fleets.yaml. ``--quick``: 8 x 5 points.

For each engine it prints the wall time, points per second, and where the time went:

- ``solve``: the points' planning (``solve_s``, summed over the workers' points);
- ``derive``: each point's scenario applied, validated and its problem derived
  (``wall_s - solve_s`` of each point);
- ``outside``: everything else of ``workers x wall`` (starting the workers or Ray and
  loading the problem in each, scheduling, the parent's bookkeeping, idle cores at the end).

``derive + outside`` is the time outside solve. The two engines' results are compared as
bytes (clock fields excluded). This machine is shared and noisy: compare the ratios of one
run, not absolute times across runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

import pddplan  # noqa: E402
from pddplan.sweeps.points import CLOCK_FIELDS  # noqa: E402

SCENARIO = ROOT / "scenarios" / "pdd-paper-fleets.yaml"


def grid(quick: bool) -> list[str]:
    if quick:
        return [
            "workload.prefix_hit.mean=0.60:0.95:0.05",
            "prices_usd_per_gpu_hour.h200-sxm=2.69:4.30:x5",
        ]
    return [
        "workload.prefix_hit.mean=0.60:0.99:0.01",
        "prices_usd_per_gpu_hour.h200-sxm=2.69:4.30:x25",
    ]


def stripped(run: pddplan.SweepRun) -> str:
    """The results as JSON without clock readings (what must be equal across engines)."""
    out = []
    for p in run.points:
        d = {k: v for k, v in p.to_json().items() if k not in CLOCK_FIELDS}
        d["results"] = [{k: v for k, v in r.items() if k not in CLOCK_FIELDS} for r in d["results"]]
        out.append(d)
    return json.dumps(out, sort_keys=True)


def measure(engine: str, vary: list[str], workers: int) -> tuple[pddplan.SweepRun, dict]:
    problem = pddplan.load_scenario(SCENARIO)
    start = time.perf_counter()
    run = pddplan.sweep(problem, vary, objective="min-cost", workers=workers, engine=engine)  # type: ignore[arg-type]
    wall = time.perf_counter() - start
    solve = sum(r.solve_s for p in run.points for r in p.results)
    points_wall = sum(p.wall_s for p in run.points)
    core_s = workers * wall
    figures = {
        "engine": engine,
        "points": len(run.points),
        "ok": sum(p.status == "ok" for p in run.points),
        "wall_s": wall,
        "points_per_s": len(run.points) / wall,
        "solve": solve / core_s,
        "derive": (points_wall - solve) / core_s,
        "outside": 1 - points_wall / core_s,
    }
    return run, figures


def sharing() -> None:
    """Price points with the counts and capacities shared (as shipped), then recomputed at
    every price (``TABLE_INPUTS`` of both keyed on the prices, as before they were shared)."""
    from pddplan.model import problem as problem_module

    vary = ["workload.prefix_hit.mean=0.90,0.95", "prices_usd_per_gpu_hour.h200-sxm=2.69:4.30:x25"]
    print(f"{SCENARIO.name}: {' x '.join(vary)}, min-cost, one process")
    for shared in (True, False):
        if not shared:
            for table in ("counts", "capacities"):
                inputs = problem_module.TABLE_INPUTS[table]
                problem_module.TABLE_INPUTS[table] = (*inputs, "prices_usd_per_gpu_hour")
        problem = pddplan.load_scenario(SCENARIO)
        start = time.perf_counter()
        run = pddplan.sweep(problem, vary, objective="min-cost")
        wall = time.perf_counter() - start
        first = [p.wall_s for p in run.points if p.index % 25 == 0]
        rest = [p.wall_s for p in run.points if p.index % 25 != 0]
        print(f"{'shared' if shared else 'recomputed'}: {len(run.points)} points in {wall:.1f} s;"
              f" first point of each hit {sum(first) / len(first):.2f} s, a price point "
              f"{sum(rest) / len(rest):.3f} s")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="8 x 5 points instead of 40 x 25")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-ray", action="store_true", help="the local engine only")
    ap.add_argument("--sharing", action="store_true",
                    help="instead: 2 hits x 25 prices in one process, with the counts and "
                    "capacities shared across prices and recomputed at every price")  # fmt: skip
    args = ap.parse_args()
    if args.sharing:
        sharing()
        return
    vary = grid(args.quick)
    engines = ["local"] if args.no_ray else ["local", "ray"]
    runs, walls = {}, {}
    print(f"{SCENARIO.name}: {' x '.join(vary)}, min-cost, {args.workers} workers")
    print(f"{'engine':<7} {'points':>6} {'ok':>5} {'wall s':>8} {'pts/s':>6} "
          f"{'solve':>6} {'derive':>6} {'outside':>7} {'vs local':>8}")  # fmt: skip
    for engine in engines:
        run, f = measure(engine, vary, args.workers)
        runs[engine] = run
        ratio = f["wall_s"] / walls["local"] if engine != "local" else 1.0
        print(f"{engine:<7} {f['points']:>6} {f['ok']:>5} {f['wall_s']:>8.1f} "
              f"{f['points_per_s']:>6.2f} {f['solve']:>6.1%} {f['derive']:>6.1%} "
              f"{f['outside']:>7.1%} {ratio:>7.2f}x")  # fmt: skip
        walls[engine] = f["wall_s"]
        sys.stdout.flush()
    if "ray" in runs:
        same = stripped(runs["local"]) == stripped(runs["ray"])
        print(f"ray's results {'equal' if same else 'DIFFER FROM'} the local engine's (bytes)")
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
