"""The MILP's min-cost plan against brute force on random small scenarios: how much more the
planner's conservative count tables make it spend than the evaluator's own optimum.

    python benchmarks/milp_vs_brute.py [--seeds 0:20]

Each seed is ``tests/test_enumerate.py``'s random scenario (``random_scenario``): the MILP's
plan (``solve_plan``) and brute force's (``enumerate_plan``: every candidate scored by the
evaluator), each with its status and evaluated cost per hour; printed per seed with the
MILP's excess and its CPU seconds, then the mean and largest excess over the seeds where
both have a plan. The MILP never costs less (brute force is the evaluator's optimum), and
the two agree on whether there is a plan; a row that breaks either says so. Where the MILP
costs more, its tables left out a deployment the evaluator accepts.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from conftest import problem_of  # noqa: E402
from test_enumerate import random_scenario  # noqa: E402

from pddplan.io.catalogs import load_hardware, load_models  # noqa: E402
from pddplan.plan.brute_force import enumerate_plan  # noqa: E402
from pddplan.plan.search import solve_plan  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="0:20", help="START:STOP (a range of seeds)")
    args = parser.parse_args()
    start, stop = (int(x) for x in args.seeds.split(":"))
    hw, models = load_hardware(), load_models()
    excess = []
    print("| seed | MILP | brute force | MILP $/h | brute force $/h | MILP excess | MILP CPU s |")
    print("| ---: | --- | --- | ---: | ---: | ---: | ---: |")
    for seed in range(start, stop):
        s = random_scenario(seed)
        t = time.process_time()
        milp = solve_plan(problem_of(s, hw, models), explain=False)
        cpu = time.process_time() - t
        brute = enumerate_plan(problem_of(s, hw, models))
        mc = milp.evaluation.cost_per_hour_usd if milp.evaluation else None
        bc = brute.evaluation.cost_per_hour_usd if brute.evaluation else None
        if mc is not None and bc:
            excess.append(mc / bc - 1)
            cell = f"{excess[-1]:+.1%}" + (" (below brute force!)" if excess[-1] < -1e-9 else "")
        else:
            cell = "no plan" if mc is None and bc is None else "one side has no plan!"
        print(
            f"| {seed} | {milp.status} | {brute.status} | {mc or 0:.2f} | {bc or 0:.2f} "
            f"| {cell} | {cpu:.2f} |",
            flush=True,
        )
    if excess:
        print(
            f"\n{len(excess)} seeds with a plan: mean excess {sum(excess) / len(excess):+.1%}, "
            f"largest {max(excess):+.1%}, {sum(e > 1e-9 for e in excess)} above brute force"
        )


if __name__ == "__main__":
    main()
