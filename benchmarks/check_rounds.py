"""Check-and-cut rounds over demand sweeps of every shipped scenario (issue 47's figures).

    python benchmarks/check_rounds.py [--scenarios a,b] [--points 40] [--low 1] [--high 50]

For each scenario, the min-cost plan at ``--points`` demands spaced geometrically from
``--low`` to ``--high`` req/s (each solved as its own problem, the scenario's
``arrival_rps`` replaced). Printed per scenario: the points with a plan, the check-and-cut
rounds summed and the most at one point, whether the minimum cost never falls as the demand
rises, whether no demand is without a plan where a higher one has one, and whether every
plan's reported capacity equals the evaluator's capacity of its deployment (to 1e-9), with
the work counted (MILP solves, rates settled by the relaxation) and the wall time.
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

import pddplan  # noqa: E402
from pddplan.evaluation.evaluator import sla_capacity  # noqa: E402

SCENARIOS = (
    "small-llama-8b",
    "one-class-llama-70b",
    "domestic-910c-h20",
    "pdd-h100-h200",
    "pdd-paper-fleets",
)


def sweep(name: str, rates: np.ndarray) -> str:
    base = pddplan.load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    start = time.perf_counter()
    costs: list[float | None] = []
    rounds, most, solves, settled, exact = 0, 0, 0, 0, True
    for rate in rates:
        problem = base.derive({"workload.arrival_rps": float(rate)})
        plan = pddplan.solve(problem, objective="min-cost", explain=False)
        st = plan.stats
        rounds += st.check_rounds
        most = max(most, st.check_rounds)
        solves, settled = solves + st.milp_solves, settled + st.settled
        e = plan.evaluation
        if plan.fleet is None or e is None:
            costs.append(None)
            continue
        assert e.status == "ok", (name, rate, e.status)
        costs.append(e.cost_per_hour_usd)
        exact &= abs(sla_capacity(problem, plan.fleet) - e.sla_capacity_rps) <= 1e-9 * max(
            1.0, e.sla_capacity_rps
        )
    have = [c is not None for c in costs]
    gapless = all(not (not a and b) for a, b in itertools.pairwise(have))
    priced = [c for c in costs if c is not None]
    monotone = all(b >= a * (1 - 1e-9) for a, b in itertools.pairwise(priced))
    return (
        f"| {name} | {sum(have)} of {len(rates)} | {rounds} | {most} | "
        f"{'yes' if monotone else 'NO'} | {'yes' if gapless else 'NO'} | "
        f"{'yes' if exact else 'NO'} | {solves} | {settled} | {time.perf_counter() - start:,.0f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--points", type=int, default=40)
    parser.add_argument("--low", type=float, default=1.0)
    parser.add_argument("--high", type=float, default=50.0)
    args = parser.parse_args()
    rates = np.geomspace(args.low, args.high, args.points)
    print(
        "| scenario | plans | rounds | most at one demand | cost never falls | no gap | "
        "capacity = evaluator's | MILP solves | settled | wall s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in args.scenarios.split(","):
        print(sweep(name, rates), flush=True)


if __name__ == "__main__":
    main()
