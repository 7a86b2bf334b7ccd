"""Steady-state verification of every shipped scenario: how long each run had to be, and
whether a confirmed plan holds in a run five times longer with another seed.

    python benchmarks/steady_state.py [--scenarios a,b] [--max-requests 400000]

For each scenario: its own objective's plan (CBC), ``pddplan.verify`` at the load the plan
claims (the demand x (1 + headroom) for min cost, the SLA capacity otherwise), each
simulation running until its verdict is decided or its TTFT P90/P99 are known to +-5%.
Printed per scenario: the iterations, the verdict, the final plan's GPUs and $/hour, and of
its last simulation the warm start (requests through the caches, simulated seconds), the
warm-up, the measured requests and simulated seconds, and the wall time of the whole
verify. Then, for a confirmed plan, one more run of five times as many served requests
with seed + 1, and its verdict. The markdown tables go into docs/simulate.md.

This machine is shared and noisy: the wall times are for reading orders of magnitude.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

import pddplan  # noqa: E402

SCENARIOS = ("small-llama-8b", "domestic-910c-h20", "pdd-paper-fleets", "pdd-h100-h200")


def run(name: str, max_requests: int) -> None:
    problem = pddplan.load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    start = time.perf_counter()
    v = pddplan.verify(problem, max_requests=max_requests)
    wall = time.perf_counter() - start
    final = v.final
    assert final is not None and final.sim is not None and final.plan.evaluation is not None
    sim, e = final.sim, final.plan.evaluation
    st = sim.steadiness
    gpus = sum(p.gpus for p in e.pools)
    verdict = "confirmed" if v.confirmed else sim.verdict
    print(
        f"| {name} | {final.plan.stats.objective} | {len(v.steps)} | {verdict} | {gpus:,} | "
        f"{e.cost_per_hour_usd:,.2f} | {final.load_rps:,.2f} | "
        f"{st.warm_start_requests:,} ({st.warm_start_s:,.0f} s) | "
        f"{st.warmup_requests:,} ({st.warmup_s:,.0f} s) | "
        f"{st.measured_requests:,} ({st.measured_s:,.0f} s) | {st.stopped} | {wall:,.1f} |",
        flush=True,
    )
    if not v.confirmed:
        print(f"|  | not confirmed: {v.message} |", flush=True)
        return
    longer = 5 * st.served_requests
    start = time.perf_counter()
    again = pddplan.simulate(
        problem,
        final.plan.fleet,
        rate_rps=final.load_rps,
        requests=longer,
        seed=sim.seed + 1,
        max_requests=10 * max_requests,
    )
    p90, p99 = again.ttft_s["p90"], again.ttft_s["p99"]
    print(
        f"|  | 5x longer, seed {sim.seed + 1}: {longer:,} requests, {again.verdict}; TTFT P90 "
        f"{p90.simulated:.3g} [{p90.low:.3g}, {p90.high:.3g}] s, P99 {p99.simulated:.3g} "
        f"[{p99.low:.3g}, {p99.high:.3g}] s; {time.perf_counter() - start:,.1f} s |",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--max-requests", type=int, default=400_000)
    args = parser.parse_args()
    print(
        "| scenario | objective | iterations | verdict | GPUs | $/hour | load req/s | warm start "
        "| warm-up | measured | stopped | verify wall s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in args.scenarios.split(","):
        run(name, args.max_requests)


if __name__ == "__main__":
    main()
