"""Plans over time: the number of periods against solve time (issue 53), and the schedule's
MILP against brute force.

    python benchmarks/horizon_scaling.py [--grid 12:0.2,18:0.2,24:0.4,24:0.2,24:0.1,36:0.2]
                                         [--brute 2,4,6,8]

**Scaling.** Plans ``scenarios/pdd-h100-h200-horizon.yaml`` (2 datacenters, 4 chips, a
24-hour profile, quarterly tranches) with ``horizon.months`` and ``horizon.group_share`` set
from each ``MONTHS:SHARE`` of ``--grid`` (fewer months, fewer tranches; a smaller share,
more hour groups), as ``solve`` does (``pddplan.solve_horizon``), and prints per row: the
periods, the family plans the menus took and the deployments in them, the schedule MILP's
variables and rows, its status and proven gap, the total cost, and the CPU seconds (user +
sys of this process and of the MILP solver's) in all and in the three MILPs (the plan and the two policies; the rest
is the menus). One process, one run per row: compare the rows of one run.

**Brute force.** Random schedules of 2 tranches, ``N`` periods and 2 chips (the generator of
``tests/test_horizon_milp.py``, reservations off so that brute force covers every choice):
the MILP's cost and time against enumerating every deployment per period and every purchase
of 0-3 units per (chip, tranche), ``tests/test_horizon_milp.py::_brute``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import pddplan  # noqa: E402
from pddplan.plan import horizon as horizon_plan  # noqa: E402
from pddplan.plan import horizon_milp as hm  # noqa: E402

SCENARIO = ROOT / "scenarios" / "pdd-h100-h200-horizon.yaml"


def _cpu() -> float:
    """CPU seconds of this process and of the children it waited for (the MILP solver runs
    as one)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def scaling(grid: list[tuple[int, float]]) -> None:
    milp_s = [0.0]
    schedule = hm.schedule

    def timed(*args: object, **kwargs: object) -> hm.Schedule:
        start = _cpu()
        try:
            return schedule(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            milp_s[0] += _cpu() - start

    horizon_plan.hm.schedule = timed  # type: ignore[assignment]
    data = yaml.safe_load(SCENARIO.read_text())
    print(
        "| months | group share | periods | family plans | deployments | MILP variables | "
        "MILP rows | status | gap | total USD | CPU s | CPU s in MILPs |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for months, share in grid:
            data["horizon"]["months"] = months
            data["horizon"]["group_share"] = share
            path = Path(tmp) / f"h-{months}-{share}.yaml"
            path.write_text(yaml.safe_dump(data, sort_keys=False))
            problem = pddplan.load_scenario(path)
            milp_s[0] = 0.0
            start = _cpu()
            r = pddplan.solve_horizon(problem)
            took = _cpu() - start
            total = f"{r.total_usd:,.0f}" if r.total_usd is not None else "-"
            gap = f"{r.gap:.2%}" if r.gap is not None else "-"
            print(
                f"| {months} | {share:g} | {len(r.periods)} | {r.family_plans} | "
                f"{r.deployments} | {r.variables} | {r.constraints} | {r.status} | {gap} | "
                f"{total} | {took:.1f} | {milp_s[0]:.1f} |",
                flush=True,
            )
    horizon_plan.hm.schedule = schedule  # type: ignore[assignment]


def brute(sizes: list[int], seeds: int = 2) -> None:
    from test_horizon_milp import _brute, random_case

    print(
        "| periods | seed | MILP USD | brute force USD | equal | MILP CPU s | brute force CPU s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for n in sizes:
        for seed in range(seeds):
            m = random_case(seed, n, terms=False)
            start = _cpu()
            got = hm.schedule(m)
            t_milp = _cpu() - start
            start = _cpu()
            best = _brute(m, 3)
            t_brute = _cpu() - start
            assert got.total_usd is not None
            same = abs(got.total_usd - best) <= 1e-6 * best
            print(
                f"| {n} | {seed} | {got.total_usd:,.2f} | {best:,.2f} | {same} | "
                f"{t_milp:.2f} | {t_brute:.2f} |",
                flush=True,
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", default="12:0.2,18:0.2,24:0.4,24:0.2,24:0.1,36:0.2")
    ap.add_argument("--brute", default="2,4,6,8")
    args = ap.parse_args()
    grid = [(int(m), float(s)) for m, s in (x.split(":") for x in args.grid.split(",") if x)]
    if grid:
        scaling(grid)
        print()
    sizes = [int(x) for x in args.brute.split(",") if x]
    if sizes:
        brute(sizes)


if __name__ == "__main__":
    main()
