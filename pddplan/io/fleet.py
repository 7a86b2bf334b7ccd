"""Loading a fleet file, or the deployment of a plan file written by ``solve --out``, and
checking it against the scenario."""

from __future__ import annotations

from pathlib import Path

from pddplan.errors import InputError
from pddplan.io.catalogs import unknown_id
from pddplan.io.located import read_yaml
from pddplan.io.plan_file import is_horizon_plan
from pddplan.io.validation import validate
from pddplan.model.problem import Problem
from pddplan.spec.fleet import Fleet, md_cache_problem
from pddplan.spec.source import Loc

PLAN_KEYS = frozenset({"verdict", "status", "objective", "deployment", "evaluation_status"})
"""Keys of a plan file (``solve --out``) that no fleet file has: a file with one of them is
read as a plan."""


def load_fleet(path: Path, problem: Problem, variant: str | None = None) -> Fleet:
    """Load a fleet file (or the ``deployment`` of a plan file written by ``pddplan solve
    --out``, whose model must be the scenario's) and check it against the problem's
    scenario: every pool's datacenter, role and chip must be allowed there, every link must
    be one of the scenario's links and its bandwidth one of that link's tiers. ``variant``:
    a robust plan's workload variant, whose routing replaces the deployment's."""
    scenario, hardware = problem.scenario, problem.hardware
    data, source = read_yaml(path)
    prefix: Loc = ()
    routing = None
    if isinstance(data, dict) and "deployment" in data:  # a plan file from `pddplan solve`
        planned_for = data.get("model")
        if planned_for is not None and planned_for != scenario.model:
            raise InputError(
                f"{source.where(('model',))}: model: the plan is for '{planned_for}', "
                f"the scenario serves '{scenario.model}'"
            )
        if variant is not None:
            routed = data.get("variants") or {}
            if not isinstance(routed, dict) or not isinstance(routed.get(variant), dict):
                known = ", ".join(routed) if isinstance(routed, dict) else ""
                raise InputError(
                    f"{source.where(('variants',))}: variants: no variant '{variant}' "
                    f"in the plan (its variants: {known or 'none: it is not a robust plan'})"
                )
            routing = routed[variant].get("routing")
        data, prefix = data["deployment"], ("deployment",)
    elif is_horizon_plan(data):
        raise InputError(
            f"{source.where(('periods',))}: periods: a plan over a horizon holds a deployment "
            "per period (periods[N].deployment, in fleet-file form), not one: save the "
            "period's as a fleet file and give it with --fleet"
        )
    elif isinstance(data, dict) and PLAN_KEYS & set(data):  # a plan file without its fleet
        raise InputError(
            f"{source.where(())}: deployment: missing: a plan file written by `pddplan solve "
            "--out` holds its fleet there (a plan with no fleet, an infeasible one, is not "
            "written); give the plan file whole, or a fleet file with --fleet"
        )
    elif variant is not None:
        raise InputError(f"{path}: --variant needs a robust plan file (pddplan solve --out)")
    if routing is not None and isinstance(data, dict):
        data = {**data, "routing": routing}
    fleet = validate(Fleet, data, source, prefix)
    problems = []

    def bad(loc: Loc, msg: str) -> None:
        loc = (*prefix, *loc)
        problems.append(source.problem(loc, msg))

    for i, pool in enumerate(fleet.pools):
        dc = scenario.datacenters.get(pool.datacenter)
        if dc is None:
            bad(
                ("pools", i, "datacenter"),
                f"unknown datacenter '{pool.datacenter}' "
                f"(scenario datacenters: {', '.join(scenario.datacenters)})",
            )
            continue
        if pool.role not in dc.roles:
            bad(
                ("pools", i, "role"),
                f"role '{pool.role}' is not allowed in {pool.datacenter} "
                f"(allowed: {', '.join(dc.roles)})",
            )
        allowed = (dc.role_chips or {}).get(pool.role, dc.chips)
        if pool.chip not in allowed:
            close = (
                unknown_id("chip", pool.chip, hardware.chips)
                if pool.chip not in hardware.chips
                else ""
            )
            bad(
                ("pools", i, "chip"),
                f"chip '{pool.chip}' is not allowed in {pool.datacenter}"
                + (f" for {pool.role}" if allowed != dc.chips else "")
                + f" (allowed: {', '.join(allowed)})"
                + (f"; {close}" if close else ""),
            )
    prefill_dcs = {p.datacenter for p in fleet.pools if p.role == "prefill"}
    for i, pool in enumerate(fleet.pools):
        if pool.role == "relay_decode" and pool.datacenter not in prefill_dcs:
            bad(
                ("pools", i, "datacenter"),
                f"relay decode must sit beside prefill (RDMA); "
                f"{pool.datacenter} has no prefill pool",
            )
    for dc_id, dc in scenario.datacenters.items():
        used = sum(p.gpus_per_instance * p.instances for p in fleet.pools if p.datacenter == dc_id)
        if dc.max_gpus is not None and used > dc.max_gpus:
            bad(("pools",), f"{used} GPUs in {dc_id} exceed its max_gpus ({dc.max_gpus})")
    seen_pairs: set[frozenset[str]] = set()
    for i, choice in enumerate(fleet.links):
        if frozenset(choice.between) in seen_pairs:
            bad(
                ("links", i, "between"),
                f"a second entry for {choice.between[0]}-{choice.between[1]}; "
                "give one bandwidth per link",
            )
        seen_pairs.add(frozenset(choice.between))
        link = next((x for x in scenario.links if set(x.between) == set(choice.between)), None)
        if link is None:
            bad(
                ("links", i, "between"),
                f"the scenario has no link between {choice.between[0]} and {choice.between[1]}",
            )
        elif choice.gbps not in {t.gbps for t in link.tiers}:
            bad(
                ("links", i, "gbps"),
                f"{choice.gbps:g} Gbps is not a tier of that link "
                f"(tiers: {', '.join(f'{t.gbps:g}' for t in link.tiers)})",
            )
    cache_problem = md_cache_problem(scenario, fleet)
    if cache_problem:
        bad((cache_problem[0],), cache_problem[1])
    if problems:
        raise InputError(problems)
    return fleet
