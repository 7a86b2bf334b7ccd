"""Simulator speed: requests and events per second, and memory, against run length.

    python benchmarks/simulate_speed.py [--requests 10000,30000,100000] [--repeat K] [--million]

For each shipped scenario it plans (``--objective max-bcr``, CBC: the largest plans), then simulates the plan at its SLA
capacity with a fixed number of sampled requests (``RunLength(requests=n)``: the warm start
through the caches, then ``n`` served requests), and prints wall time, events per second,
microseconds per request and the peak resident memory of this process. ``--million`` adds
one run of a million requests on the small scenario, to show that memory stays bounded
(requests leave the simulator when they finish; per request, its 16 figures, 128 bytes,
are kept).

This machine is shared and noisy: compare ratios measured in one run, not absolute times
across runs. ``--repeat K`` runs each size K times (the same seed, so the same events) and
reports the fastest and the median wall time; the fastest is the least disturbed.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

import pddplan  # noqa: E402
from pddplan.simulation.run import simulate  # noqa: E402
from pddplan.simulation.steady import RunLength  # noqa: E402

SCENARIOS = ("small-llama-8b", "domestic-910c-h20", "pdd-paper-fleets", "pdd-h100-h200")


def machine_speed_s() -> float:
    """Seconds for a fixed pure-Python loop (best of 3): how fast this machine is running
    right now, to read the table's times against (a shared machine's speed drifts)."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        total = 0
        for i in range(10_000_000):
            total += i * i
        best = min(best, time.perf_counter() - start)
    return best


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(name: str, counts: list[int], repeat: int) -> None:
    problem = pddplan.load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    plan = pddplan.solve(problem, objective="max-bcr")
    assert plan.fleet is not None and plan.evaluation is not None
    rate = plan.evaluation.sla_capacity_rps
    for n in counts:
        walls = []
        for _ in range(repeat):
            start = time.perf_counter()
            r = simulate(problem, plan.fleet, rate_rps=rate, length=RunLength(requests=n))
            walls.append(time.perf_counter() - start)
        wall = min(walls)
        print(
            f"| {name} | {rate:,.1f} | {n:,} | {wall:,.2f} | {statistics.median(walls):,.2f} | "
            f"{r.events:,} | {r.events / wall:,.0f} | {wall / n * 1e6:,.0f} | "
            f"{peak_rss_mb():,.0f} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", default="10000,30000,100000")
    parser.add_argument("--million", action="store_true")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--repeat", type=int, default=1, help="runs per size (best and median)")
    args = parser.parse_args()
    counts = [int(x) for x in args.requests.split(",")]
    print(f"machine speed: a fixed 10M-step Python loop takes {machine_speed_s():.2f} s\n")
    print(
        "| scenario | load req/s | requests | wall s (best) | wall s (median) | events "
        "| events/s | us/request | peak RSS MB |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in args.scenarios.split(","):
        run(name, counts, args.repeat)
    if args.million:
        run("small-llama-8b", [1_000_000], 1)
    sys.exit(0)


if __name__ == "__main__":
    main()
