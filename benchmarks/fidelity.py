"""The analytic model against the simulator at steady state, on every shipped scenario.

    python benchmarks/fidelity.py [--scenarios a,b] [--objective max-bcr]

For each scenario: the plan for the objective (default: the scenario's own; CBC), simulated
with sampled sessions at the plan's SLA capacity (the load the planner says it can carry)
until TTFT P90 and P99 are known to +-5% (``pddplan.simulate``'s default run length), seed
0. Printed as the markdown table of docs/simulate.md: TTFT percentiles simulated [95%
interval] / analytic (error = (analytic - simulated) / simulated), the inter-token gap's
P99, the hits simulated / assumed, the segment the slow requests spend longest in, the
verdict, and the run's length.
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


def row(name: str, objective: str | None) -> str:
    problem = pddplan.load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    plan = pddplan.solve(problem, objective=objective)
    assert plan.fleet is not None and plan.evaluation is not None
    e = plan.evaluation
    r = pddplan.simulate(problem, plan.fleet, rate_rps=e.sla_capacity_rps, seed=0)
    pools = ", ".join(
        f"{p.role.replace('main_decode', 'MD').replace('relay_decode', 'RLD').replace('prefill', 'P')} "
        f"{p.instances} x {p.gpus_per_instance} {p.chip}"
        for p in plan.fleet.pools
    )
    cells = []
    for k in ("p50", "p90", "p99"):
        f = r.ttft_s[k]
        err = f"{f.error:+.0%}" if f.error is not None else "—"
        cells.append(f"{f.simulated:.2f} [{f.low:.2f}, {f.high:.2f}] / {f.predicted:.2f} ({err})")
    gap = r.tpot_ms["p99"]
    md = f"{r.md_hit.simulated:.2f} / {r.md_hit.predicted:.2f}" if r.md_hit.predicted else "—"
    slow = max(r.tail_breakdown, key=lambda k: r.tail_breakdown[k])
    st = r.steadiness
    return (
        f"| {name} ({pools}) | {r.rate_rps:,.2f} | {' | '.join(cells)} | "
        f"{gap.simulated:.1f} / {gap.predicted:.1f} | {r.p_hit.simulated:.2f} / "
        f"{r.p_hit.predicted:.2f} | {md} | {slow} {r.tail_breakdown[slow]:.2f} s | "
        f"{r.verdict} | {st.measured_requests:,} in {st.measured_s:,.0f} s |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--objective", default=None)
    args = parser.parse_args()
    print(
        "| scenario (plan) | load, req/s | TTFT P50 s | TTFT P90 s | TTFT P99 s | gap P99 ms "
        "| P hit | MD hit | slow requests wait longest in | verdict | measured |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in args.scenarios.split(","):
        print(row(name, args.objective), flush=True)


if __name__ == "__main__":
    main()
