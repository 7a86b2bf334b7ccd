"""Robust plans: problem size against solve time (issue 24).

    python benchmarks/robust_scaling.py [--solvers cbc,highs]

Plans ``scenarios/pdd-h100-h200-monthly.yaml`` over its first 1, 2, 3 and 4 workload
variants (the weights of the weighted ones scaled to sum to 1) and prints, per size, the
count tables (a must-meet variant has one, a weighted one one per tail scale), the options
kept after cross-variant dominance, the MILP's variables and constraints, the seconds spent
counting (every variant's minimum counts, which the dominance test needs) and in the MILP,
and the cost. One process, one run per row: compare rows of one run (the machine is noisy).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pddplan  # noqa: E402
from pddplan.plan import milp  # noqa: E402
from pddplan.plan.counts import Requirements  # noqa: E402
from pddplan.plan.robust import TAIL_SCALES  # noqa: E402
from pddplan.plan.space import Space  # noqa: E402
from pddplan.spec.scenario import ROLES  # noqa: E402

SCENARIO = ROOT / "scenarios" / "pdd-h100-h200-monthly.yaml"


def row(k: int, solver: str) -> str:
    problem = pddplan.load_scenario(SCENARIO)  # fresh: no table shared between rows
    pairs = problem.variants()[:k]
    weighted = [v for v, _ in pairs if v.weight is not None]
    total = sum(v.weight or 0.0 for v in weighted)
    start = time.perf_counter()
    variants = []
    for v, vp in pairs:
        space = Space(vp)
        rate = vp.scenario.workload.arrival_rps or 0.0
        scales = TAIL_SCALES if v.weight is not None else (1.0,)
        tables = {x: Requirements(space, rate, x) for x in scales}
        weight = (v.weight or 0.0) / total if v.weight is not None else None
        variants.append(milp.Variant(v.name, tables, weight))
    f = milp.Formulation(variants=variants)  # the dominance test counts every row
    counted = time.perf_counter() - start
    kept = "/".join(str(len(f.by_role[r])) for r in ROLES)
    out = milp.min_cost(variants=variants, solver=solver, time_limit_s=600)
    solved = time.perf_counter() - start - counted
    names = ",".join(v.name for v, _ in pairs)
    tables = sum(len(v.tables) for v in variants)
    return (
        f"| {k} ({names}) | {tables} | {kept} | {out.variables:,} | {out.constraints:,} | "
        f"{counted:.1f} | {solved:.1f} | {solver} | {out.status} | {out.cost_per_hour:,.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solvers", default="cbc,highs")
    parser.add_argument("--sizes", default="1,2,3,4")
    args = parser.parse_args()
    print(
        "| variants | count tables | options kept (P/RLD/MD) | variables | constraints | "
        "counts s | MILP s | solver | status | $/hour |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for solver in args.solvers.split(","):
        for k in (int(x) for x in args.sizes.split(",")):
            print(row(k, solver), flush=True)


if __name__ == "__main__":
    main()
