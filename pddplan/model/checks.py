"""What makes a scenario impossible before any planning, found with the model: a role whose
allowed chips hold the weights at no searched size, decode-side cache options whose hits do
not give one value per class, a cache tier without a price, a measured hit curve that falls
as the cache grows. One located line each (``Problem.located``)."""

from __future__ import annotations

import itertools

import numpy as np

from pddplan.model.md_cache import tier_price
from pddplan.model.problem import Problem
from pddplan.spec.scenario import ROLES
from pddplan.workload.classes import md_caches


def scenario_problems(problem: Problem) -> list[str]:
    """What makes the scenario impossible before any planning, one located line each:
    a role whose allowed chips hold the weights at no searched size, and decode-side
    cache options whose MD hits do not give one value per class."""
    s, out = problem.scenario, []
    sizes = s.search.sizes()
    for role in ROLES:
        chips = sorted({c for _, c in s.chips_for(role)})
        if chips and not any(problem.fits(c, g, role=role) for c in chips for g in sizes):
            out.append(
                problem.located(
                    ("datacenters",),
                    f"{problem.model.id} fits no allowed configuration for role '{role}': "
                    f"chips {', '.join(chips)} at {', '.join(map(str, sizes))} GPUs per "
                    "instance (allow larger instances in search, or a larger-memory chip)",
                )
            )
    n = len(problem.classes)
    for i, option in enumerate(s.md_cache or ()):
        if option.md_hit is not None and len(option.md_hit) != n:
            out.append(
                problem.located(
                    ("md_cache", i, "md_hit"),
                    f"{len(option.md_hit)} values; the workload has {n} classes (one MD "
                    "hit rate per class, in class order)",
                )
            )
    if not out:
        out += _md_cache_problems(problem)
    return out


def _md_cache_problems(problem: Problem) -> list[str]:
    """Tiers without a price, and measured hits that fall as the cache grows."""
    s, out, tiers = problem.scenario, [], problem.hardware.cache_tiers
    options = s.md_cache or ()
    prices = s.cache_tier_prices_usd_per_gb_month
    for i, o in enumerate(options):
        for name, gb in (("dram", o.dram_gb), ("ssd", o.ssd_gb)):
            if gb and tier_price(problem.hardware, name, prices) is None:
                where = "has no cache_tiers" if tiers is None else (
                    f"gives cache_tiers.{name}.usd_per_gb_month as null"
                )  # fmt: skip
                out.append(
                    problem.located(
                        ("md_cache", i, f"{name}_gb_per_gpu"),
                        f"{gb:g} GB of {name} per GPU needs a price, and the hardware "
                        f"catalog {where} (give a $/GB-month there or in the scenario's "
                        "cache_tier_prices_usd_per_gb_month, or size it 0)",
                    )
                )
    measured = [(o.gb_per_gpu, i) for i, o in enumerate(options) if o.measured]
    if len(measured) > 1:
        w = problem.arrays.w
        hits = md_caches(s)
        mean = {i: float(w @ np.array(hits[i][1])) for _, i in measured}
        ordered = sorted(measured)
        for (gb_a, a), (gb_b, b) in itertools.pairwise(ordered):
            if mean[b] < mean[a] - 1e-9:
                key = "md_prefix_hit" if options[b].md_prefix_hit is not None else "md_hit"
                out.append(
                    problem.located(
                        ("md_cache", b, key),
                        f"a hit curve must not fall as the cache grows: mean MD hit "
                        f"{mean[b]:.1%} at {gb_b:g} GB/GPU is below {mean[a]:.1%} at "
                        f"{gb_a:g} GB/GPU (md_cache[{a}])",
                    )
                )
    return out
