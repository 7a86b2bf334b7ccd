"""Robust plans: problem size against solve time (issue 24).

    python benchmarks/robust_scaling.py [--solvers cbc,highs] [--sizes 1,2,3,4] [--covering]

Plans ``scenarios/pdd-h100-h200-monthly.yaml`` over its first 1, 2, 3 and 4 workload
variants (``--sizes 4,16,64``: past its four, copies of them at rates 0.85-1.15x their own) (the weights of the weighted ones scaled to sum to 1) as ``solve`` does
(``pddplan.plan.robust.robust_milp``: every variant's counts, each variant's own plan, the
robust MILP bounded below by them) and prints, per size, the count tables (a must-meet
variant has one, a weighted one one per tail scale), the options kept after cross-variant
dominance, the robust MILP's variables and constraints, the seconds in all and in the robust
MILP (its formulation included), and the cost. One process, one run per row: compare rows
of one run (the machine is noisy).

``--covering`` plans instead four variants of the same scenario that no variant's own plan
serves together (a prefill-heavy month, a long-output one, and two weighted ones): the robust
MILP then starts from no solution and must close the gap to the lower bound itself.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pddplan  # noqa: E402
from pddplan.plan import milp  # noqa: E402
from pddplan.plan.robust import robust_milp  # noqa: E402
from pddplan.spec.scenario import ROLES  # noqa: E402

SCENARIO = ROOT / "scenarios" / "pdd-h100-h200-monthly.yaml"
COVERING = """\
workload_variants:
  - name: heavy-prefill
    must_meet: true
    prefix_hit: {dist: beta, mean: 0.70, concentration: 10}
  - name: long-output
    must_meet: true
    arrival_rps: 5
    output_tokens: {dist: lognormal, median: 1600, sigma: 0.8, max: 8192}
    prefix_hit: {dist: beta, mean: 0.97, concentration: 20}
  - name: w1
    weight: 0.5
    prefix_hit: {dist: beta, mean: 0.75, concentration: 10}
  - name: w2
    weight: 0.5
    arrival_rps: 4.5
    output_tokens: {dist: lognormal, median: 1000, sigma: 0.8, max: 8192}

"""


def covering_scenario(folder: Path) -> Path:
    """The monthly scenario with ``COVERING`` for its variants."""
    text = SCENARIO.read_text()
    start, end = text.index("workload_variants:"), text.index("md_cache:")
    path = folder / "pdd-h100-h200-covering.yaml"
    path.write_text(text[:start] + COVERING + text[end:])
    return path


def variants(problem: pddplan.Problem, k: int) -> list:
    """The scenario's first ``k`` variants; past its own, copies of them in turn, each at
    its rate times a factor spread geometrically over [0.85, 1.15] (so that no two are
    alike), named ``<name>-<copy>``."""
    own = problem.variants()
    if k <= len(own):
        return own[:k]
    factors = [0.85 * (1.15 / 0.85) ** (i / (k - 1)) for i in range(k)]
    out = []
    for i, f in zip(range(k), factors[1::2] + factors[0::2], strict=True):
        v, vp = own[i % len(own)]
        rate = vp.scenario.workload.arrival_rps or 1.0
        out.append(
            (
                v.model_copy(update={"name": f"{v.name}-{i // len(own)}"}),
                vp.derive({"workload.arrival_rps": rate * f}),
            )
        )
    return out


def row(scenario: Path, k: int, solver: str) -> str:
    problem = pddplan.load_scenario(scenario)  # fresh: no table shared between rows
    pairs = variants(problem, k)
    total = sum(v.weight or 0.0 for v, _ in pairs)
    pairs = [
        (v.model_copy(update={"weight": v.weight / total}) if v.weight is not None else v, vp)
        for v, vp in pairs
    ]
    start = time.perf_counter()
    m = robust_milp(problem, pairs, solver, start + 600)
    seconds = time.perf_counter() - start
    out = m.outcome
    f = milp.Formulation(variants=m.variants)  # its counts are memoized: only to report
    kept = "/".join(str(len(f.by_role[r])) for r in ROLES)
    names = ",".join(v.name for v, _ in pairs) if k <= 4 else f"{k} copies"
    tables = sum(len(v.tables) for v in m.variants)
    return (
        f"| {k} ({names}) | {tables} | {kept} | {out.variables:,} | {out.constraints:,} | "
        f"{seconds:.1f} | {out.seconds:.1f} | {solver} | {out.status} | "
        f"{out.cost_per_hour:,.2f} |"
    )


def table(scenario: Path, solvers: str, sizes: str) -> None:
    """The markdown table: a row per solver and number of variants."""
    print(
        "| variants | count tables | options kept (P/RLD/MD) | variables | constraints | "
        "total s | robust MILP s | solver | status | $/hour |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for solver in solvers.split(","):
        for k in (int(x) for x in sizes.split(",")):
            print(row(scenario, k, solver), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solvers", default="cbc,highs")
    parser.add_argument("--sizes", default="1,2,3,4")
    parser.add_argument("--covering", action="store_true", help="variants no own plan covers")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        scenario = covering_scenario(Path(folder)) if args.covering else SCENARIO
        table(scenario, args.solvers, args.sizes)


if __name__ == "__main__":
    main()
