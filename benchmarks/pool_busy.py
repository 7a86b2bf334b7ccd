"""Every pool's and link's busy share, analytic against simulated, on every shipped plan, at
the demand and at the SLA capacity (issue 47's figure: relay decode within 15% relative or
1 percentage point, whichever is larger).

    python benchmarks/pool_busy.py [--scenarios a,b] [--max-requests 120000]

For each scenario: its min-cost plan, simulated with sampled sessions (seed 0) at the
demand x (1 + headroom) and at the plan's SLA capacity, each to the simulator's default run
length (or ``--max-requests``). One markdown row per pool or link and rate: simulated /
analytic, the difference, and whether it is within the band. The simulator's busy share of
a relay-decode pool is the batch slots its sequences hold over its largest batch's
(``simulation.engine.utilizations``), as the analytic model counts it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

import pddplan  # noqa: E402

SCENARIOS = (
    "small-llama-8b",
    "one-class-llama-70b",
    "domestic-910c-h20",
    "pdd-paper-fleets",
    "pdd-h100-h200",
)
BAND_REL, BAND_PP = 0.15, 0.01


def rows(name: str, max_requests: int) -> list[str]:
    problem = pddplan.load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    plan = pddplan.solve(problem, objective="min-cost")
    assert plan.fleet is not None and plan.evaluation is not None
    e = plan.evaluation
    out = []
    for what, rate in (("demand", e.planned_rps or e.demand_rps), ("capacity", e.sla_capacity_rps)):
        r = pddplan.simulate(problem, plan.fleet, rate_rps=rate, seed=0, max_requests=max_requests)
        figures = [(label, f) for label, f in r.pool_utilization]
        figures += [(f"link {k}", f) for k, f in r.link_utilization.items()]
        for label, f in figures:
            if f.predicted is None:
                continue
            diff = f.predicted - f.simulated
            within = abs(diff) <= max(BAND_PP, BAND_REL * f.simulated)
            out.append(
                f"| {name} | {what} {rate:,.2f} | {label} | {f.simulated:.1%} / "
                f"{f.predicted:.1%} | {diff * 100:+.1f} pp | {'yes' if within else 'NO'} |"
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--max-requests", type=int, default=120_000)
    args = parser.parse_args()
    print(
        "| scenario | rate req/s | pool or link | busy simulated / analytic | difference | within |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for name in args.scenarios.split(","):
        for line in rows(name, args.max_requests):
            print(line, flush=True)


if __name__ == "__main__":
    main()
