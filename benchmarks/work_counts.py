"""The work each shipped scenario's solve takes, counted (``pddplan.work``), with its time.

    python benchmarks/work_counts.py [--scenarios a,b] [--objective min-cost] [--compare]

Per scenario (default: every shipped one, its own objective; one with workload variants is
planned robust, one with a horizon over its periods whatever ``--objective`` says):
the counted steps (prefill pool tails, evaluator states, SLA capacity searches, planner
count searches, MILP solves, reuse samples) and the process CPU seconds of the call, in
one process (imports and the first catalog load not included). The counts do not depend on
the machine; the seconds do, so compare seconds only within one run.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

import pddplan  # noqa: E402
from pddplan.work import STEPS, counted  # noqa: E402

SCENARIOS = sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml"))
"""Every shipped scenario."""


def run(name: str, objective: str | None, compare: bool) -> tuple[str, dict[str, int], float]:
    problem = pddplan.load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    start = time.process_time()
    with counted() as work:
        if compare:
            pddplan.compare(problem)
            what = "compare"
        elif problem.scenario.horizon is not None:
            pddplan.solve_horizon(problem)
            what = "solve (horizon)"
        elif problem.scenario.workload_variants and objective is None:
            pddplan.solve_robust(problem)
            what = "solve (robust)"
        else:
            pddplan.solve(problem, objective=objective)
            what = f"solve {objective or problem.scenario.objective}"
    return what, dict(work), time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--objective", default=None)
    parser.add_argument("--compare", action="store_true", help="time compare, not solve")
    args = parser.parse_args()
    steps = list(STEPS)
    print("| scenario | call | " + " | ".join(steps) + " | CPU s |")
    print("|---|---|" + "---:|" * (len(steps) + 1))
    for name in args.scenarios.split(","):
        what, work, cpu = run(name, args.objective, args.compare)
        cells = " | ".join(f"{work.get(s, 0):,}" for s in steps)
        print(f"| {name} | {what} | {cells} | {cpu:.2f} |", flush=True)


if __name__ == "__main__":
    main()
