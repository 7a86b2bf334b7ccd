"""What the runner-ups cost a solve: each shipped scenario planned with ``top=0`` and with
``top=3`` (``solve``'s default), in one process, each pair back to back.

    python benchmarks/runner_ups.py [--scenarios a,b] [--top 3] [--repeats 3]

Per scenario: the families the scenario allows, the runner-ups found and the families
without a plan; the process CPU seconds of the solve without and with them (the median of
``--repeats``, each on a freshly loaded problem) and their ratio (issue 51's figure: at
most 2); the runner-ups' counted work (families bounded, families planned). Seconds depend
on the machine: compare the ratio, measured in one run.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

import pddplan  # noqa: E402
from pddplan.work import counted  # noqa: E402


def _single_plan(path: Path) -> bool:
    """Whether ``solve`` plans the scenario at one rate (a robust plan over workload
    variants and a plan over a horizon have no runner-ups)."""
    scenario = pddplan.load_scenario(path).scenario
    return scenario.horizon is None and not scenario.workload_variants


SCENARIOS = sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml") if _single_plan(p))
"""Every shipped scenario planned at one rate."""


def timed(name: str, top: int) -> tuple[float, pddplan.PlanResult, dict[str, int]]:
    problem = pddplan.load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    start = time.process_time()
    with counted() as work:
        result = pddplan.solve(problem, top=top)
    return time.process_time() - start, result, dict(work)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--top", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{'scenario':24} {'families':>8} {'shown':>5} {'unserved':>8} {'bounded':>7} "
          f"{'planned':>7} {'top 0 s':>8} {'top N s':>8} {'ratio':>6}")  # fmt: skip
    for name in args.scenarios.split(","):
        without, with_ = [], []
        for _ in range(args.repeats):
            without.append(timed(name, 0)[0])
            seconds, result, work = timed(name, args.top)
            with_.append(seconds)
        ru = result.runner_ups
        a, b = statistics.median(without), statistics.median(with_)
        families = ru.families if ru else 0
        shown = len(ru.rows) if ru else 0
        unserved = len(ru.unserved) if ru else 0
        print(
            f"{name:24} {families:8} {shown:5} {unserved:8} {work.get('runner_up_bounds', 0):7} "
            f"{work.get('runner_up_plans', 0):7} {a:8.2f} {b:8.2f} {b / a:6.2f}"
        )


if __name__ == "__main__":
    main()
