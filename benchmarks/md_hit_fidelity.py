"""The decode-side (MD) hit rate, analytic against simulated, on every shipped scenario.

    python benchmarks/md_hit_fidelity.py [--scenarios a,b] [--max-requests 250000] [--objective min-cost]

For each scenario: its plan for ``--objective`` (minimum cost unless told; CBC), simulated with sampled sessions at the
plan's SLA capacity for at most ``--max-requests`` served requests (seed 0), against the evaluator at the
same rate; for a scenario with tiers, the same plan with its cache cut to HBM alone and to
HBM + 32 GB of DRAM per GPU too (the curve's steep part). A tiered cache's analytic hit is Che's approximation on the workload's reuse
curve at the fleet's capacity; the simulator keeps nested LRU caches of that capacity. A
scenario without ``md_cache`` takes the workload's MD hits, and the simulator's cache is
unbounded. Printed as the markdown table of docs/simulate.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

import pddplan  # noqa: E402
from pddplan.spec.fleet import CacheSizes, Fleet  # noqa: E402

SCENARIOS = ("small-llama-8b", "domestic-910c-h20", "pdd-paper-fleets", "pdd-h100-h200")


def rows(name: str, max_requests: int, objective: str) -> list[str]:
    problem = pddplan.load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    plan = pddplan.solve(problem, objective=objective, explain=False)
    assert plan.fleet is not None and plan.evaluation is not None
    fleets = [plan.fleet]
    if plan.fleet.md_cache_tiers is not None:
        fleets += [
            plan.fleet.model_copy(update={"md_cache_tiers": CacheSizes(dram_gb_per_gpu=gb)})
            for gb in (0.0, 32.0)
            if gb != plan.fleet.md_cache_tiers.dram_gb_per_gpu
        ]
    return [row(problem, name, fleet, max_requests) for fleet in fleets]


def row(problem: pddplan.Problem, name: str, fleet: Fleet, max_requests: int) -> str:
    if fleet.md_cache_tiers is not None:
        t = fleet.md_cache_tiers
        cache = "HBM" + "".join(
            f" + {gb:g} GB {name}"
            for gb, name in ((t.dram_gb_per_gpu, "DRAM"), (t.ssd_gb_per_gpu, "SSD"))
            if gb
        )
    elif fleet.md_cache_gb_per_gpu is not None:
        cache = f"{fleet.md_cache_gb_per_gpu:g} GB reserved"
    else:
        cache = "none (workload's MD hits)"
    md = next(p for p in fleet.pools if p.role == "main_decode")
    sim = pddplan.simulate(problem, fleet, max_requests=max_requests, seed=0)
    hit = sim.md_hit
    predicted = hit.predicted if hit.predicted is not None else float("nan")
    points = 100 * (predicted - hit.simulated)
    return (
        f"| `{name}` | {md.instances} x {md.gpus_per_instance} {md.chip} | {cache} | "
        f"{sim.rate_rps:.2f} | {hit.simulated:.1%} | {predicted:.1%} | {points:+.1f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--max-requests", type=int, default=250_000)
    parser.add_argument("--objective", default="min-cost", choices=("min-cost", "max-bcr"))
    args = parser.parse_args()
    print(
        "| scenario | main decode | decode-side cache | rate (req/s) | MD hit simulated | "
        "analytic | points |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in args.scenarios.split(","):
        for line in rows(name, args.max_requests, args.objective):
            print(line, flush=True)


if __name__ == "__main__":
    main()
