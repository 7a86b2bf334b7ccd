"""Solve time against problem size, and the MILP against brute force.

    python benchmarks/solve_scaling.py [--solver cbc|highs] [--quick]

Prints three tables:

1. The shipped paper scenario (scenarios/pdd-h100-h200.yaml): min cost and max BCR.
2. Synthetic 4-datacenter scenarios (two prefill-capable, two decode-capable, a link with a
   tier choice between every prefill and decode datacenter), growing in chip types, link
   tiers and request classes, up to 16 chip types, 6 tiers and 200 classes.
3. Brute force (``--method enumerate``) against the MILP on growing random scenarios (the
   generator of tests/test_enumerate.py with more options), until enumeration passes 60 s:
   the speed-up on the largest case enumeration finishes, and the crossover.

This machine is shared and noisy: compare ratios measured in one run, not absolute times
across runs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import pddplan  # noqa: E402
from pddplan.io.catalogs import load_engines, load_hardware, load_models  # noqa: E402
from pddplan.model.problem import Problem  # noqa: E402
from pddplan.spec.scenario import Scenario  # noqa: E402

CHIPS_16 = [
    "h100-sxm",
    "h100-pcie",
    "h200-sxm",
    "h800",
    "h20",
    "a100-80g-sxm",
    "b200",
    "gb200",
    "b300",
    "l40s",
    "l20",
    "mi300x",
    "mi325x",
    "mi355x",
    "ascend-910b",
    "ascend-910c",
]
PRICE_FILL = 2.0
"""Benchmark-only price for chips whose catalog price is null (assumption)."""
TIERS = [10, 25, 50, 100, 200, 400]


def four_dc_scenario(chips: int, tiers: int, classes: int, objective: str) -> Scenario:
    """Llama-3.1-70B on a 4-datacenter layout with ``chips`` chip types allowed everywhere."""
    hw = load_hardware()
    allowed = [c for c in CHIPS_16 if c in hw.chips][:chips]
    rng = np.random.default_rng(7)
    k = classes
    weights = rng.dirichlet(np.ones(k))
    weights = np.round(weights, 9)
    weights[-1] = 1 - weights[:-1].sum()
    rows = [
        {
            "weight": float(w),
            "input_tokens": float(rng.choice([1000, 4000, 16000, 32000])),
            "output_tokens": float(rng.choice([50, 300, 1000])),
            "p_hit": round(float(rng.uniform(0.5, 0.98)), 3),
        }
        for w in weights
    ]
    prefill_dcs, decode_dcs = ["p1", "p2"], ["d1", "d2"]
    datacenters = {
        dc: {"chips": allowed, "roles": ["prefill", "relay_decode"], "max_gpus": 512}
        for dc in prefill_dcs
    } | {dc: {"chips": allowed, "roles": ["main_decode"], "max_gpus": 512} for dc in decode_dcs}
    links = [
        {
            "between": [a, b],
            "rtt_ms": 10 + 20 * i,
            "tiers": [{"gbps": g, "usd_per_month": 300 * g**0.7} for g in TIERS[-tiers:]],
        }
        for i, (a, b) in enumerate((a, b) for a in prefill_dcs for b in decode_dcs)
    ]
    prices = {c: hw.chips[c].price_usd_per_hour or PRICE_FILL for c in allowed}
    return Scenario.model_validate(
        {
            "name": f"4dc-{chips}chips-{tiers}tiers-{classes}classes",
            "engine": "ideal",  # every chip family of the catalog: only ideal covers them all
            "model": "llama-3.1-70b",
            "datacenters": datacenters,
            "links": links,
            "workload": {"arrival_rps": 5.0, "classes": rows},
            "sla": {"ttft_p90_s": 3.0, "ttft_p99_s": 10.0, "tpot_ms": 50},
            "search": {"gpus_per_instance": [4, 8], "catch_up_above_tokens": [None, 0]},
            "prices_usd_per_gpu_hour": prices,
            "objective": objective,
            "solver": {"time_limit_s": 120},
        }
    )


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def cold(s: Scenario, hw, models) -> Problem:
    """A problem with no table computed yet, so that every timed solve starts alike."""
    return Problem(s, hw, models[s.model], engines=load_engines())


def paper(solver: str) -> None:
    loaded = pddplan.load_scenario(ROOT / "scenarios" / "pdd-h100-h200.yaml")
    s, hw, models = loaded.scenario, loaded.hardware, {loaded.model.id: loaded.model}
    print("\n1. Paper scenario (pdd-h100-h200)")
    print(
        f"{'objective':<10} {'status':<14} {'seconds':>8} {'MILP solves':>12} {'BCR':>8} {'$/h':>9}"
    )
    for objective in ("min-cost", "max-bcr"):
        r, t = timed(
            lambda o=objective: pddplan.solve(cold(s, hw, models), objective=o, solver=solver)
        )
        e = r.evaluation
        print(
            f"{objective:<10} {r.status:<14} {t:>8.2f} {r.stats.milp_solves:>12} "
            f"{e.bcr:>8.4f} {e.cost_per_hour_usd:>9.2f}"
        )


def four_dc(solver: str, quick: bool) -> None:
    hw, models = load_hardware(), load_models()
    print("\n2. Four datacenters (2 prefill-capable, 2 decode-capable, a tier choice per pair)")
    print(
        f"{'chips':>5} {'tiers':>5} {'classes':>7} {'objective':<9} {'status':<14} "
        f"{'seconds':>8} {'solves':>6} {'vars':>6} {'rows':>6}"
    )
    sizes = [(2, 2, 25), (4, 4, 50), (8, 6, 100), (16, 6, 200)]
    if quick:
        sizes = sizes[:2]
    for chips, tiers, classes in sizes:
        for objective in ("min-cost", "max-bcr"):
            s = four_dc_scenario(chips, tiers, classes, objective)
            r, t = timed(
                lambda s=s: pddplan.solve(cold(s, hw, models), solver=solver, explain=False)
            )
            st = r.stats
            print(
                f"{chips:>5} {tiers:>5} {classes:>7} {objective:<9} {r.status:<14} {t:>8.2f} "
                f"{st.milp_solves:>6} {st.variables:>6} {st.constraints:>6}"
            )


def brute_force(quick: bool) -> None:
    from test_enumerate import random_scenario

    from pddplan.plan.brute_force import enumerate_plan

    hw, models = load_hardware(), load_models()
    print("\n3. Brute force (evaluator) against the MILP, min cost")
    print(
        f"{'sizes':<9} {'GPUs/pool':>9} {'candidates':>11} {'enum s':>8} {'MILP s':>8} "
        f"{'speed-up':>9} {'same':>5}"
    )
    base = random_scenario(8)  # one prefill and one decode datacenter, relaying pays
    largest = crossover = None
    cases = [((8,), 8), ((8,), 16), ((4, 8), 16), ((1, 2, 4, 8), 8)]
    cases += [((1, 2, 4, 8), g) for g in (16, 32, 48, 64, 96)]
    for sizes, pool_gpus in cases:
        search = base.search.model_copy(
            update={"max_gpus_per_pool": pool_gpus, "gpus_per_instance": sizes}
        )
        s = base.model_copy(update={"search": search})
        m, tm = timed(lambda s=s: pddplan.solve(cold(s, hw, models), objective="min-cost"))
        b, tb = timed(
            lambda s=s: enumerate_plan(
                cold(s, hw, models), objective="min-cost", max_candidates=10**9
            )
        )
        same = (m.fleet is None and b.fleet is None) or (
            m.fleet is not None
            and b.fleet is not None
            and abs(m.evaluation.cost_per_hour_usd - b.evaluation.cost_per_hour_usd) < 1e-6
        )
        label = ",".join(str(x) for x in sizes)
        print(
            f"{label:<9} {pool_gpus:>9} {b.stats.candidates:>11,} {tb:>8.2f} {tm:>8.2f} "
            f"{tb / tm:>8.1f}x {'yes' if same else 'NO':>5}"
        )
        if crossover is None and tb > tm:
            crossover = f"{b.stats.candidates:,} candidates"
        if tb <= 60:
            largest = (f"{b.stats.candidates:,} candidates", tb / tm)
        if tb > 60 or quick:
            break
    if crossover is not None:
        print(f"crossover: the MILP is faster from {crossover} on")
    if largest:
        print(
            f"largest case brute force finishes in 60 s ({largest[0]}): "
            f"MILP {largest[1]:,.0f}x faster"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solver", default="cbc", choices=["cbc", "highs"])
    parser.add_argument("--quick", action="store_true", help="smallest sizes only")
    args = parser.parse_args()
    paper(args.solver)
    four_dc(args.solver, args.quick)
    brute_force(args.quick)


if __name__ == "__main__":
    main()
