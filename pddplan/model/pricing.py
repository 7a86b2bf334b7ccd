"""What GPUs and links cost per hour, on a rent or a buy basis.

- **Rent**: ``prices_usd_per_gpu_hour[chip]``, else the catalog's list price.
- **Buy** (``gpu_purchase[chip]``): capex / (amortization years x 8,760 h), plus power
  (TDP x the datacenter's PUE x ``electricity_usd_per_kwh``), plus hosting.
- **Owned inventory** (``datacenters.<dc>.inventory``): GPUs already there cost only their
  running cost (power and hosting); their capex is sunk. GPUs beyond the inventory cost the
  chip's full price.
- **Links**: a tier's ``usd_per_month`` / 730 h, plus ``usd_per_gb`` x the GB per hour the
  link carries at the demand.

The planner and the evaluator both price through this module, so their costs agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from pddplan import units
from pddplan.errors import InputError
from pddplan.model.md_cache import tiers_usd_per_gpu_hour
from pddplan.model.problem import Problem
from pddplan.spec.fleet import Fleet
from pddplan.spec.scenario import LinkTier, Scenario

HOURS_PER_YEAR = 8760.0


@dataclass(frozen=True)
class GpuPrice:
    """One chip's hourly price in one datacenter."""

    full: float
    """USD per GPU-hour of a GPU not already owned (rent, or amortized buy plus running)."""
    running: float
    """USD per GPU-hour of an owned GPU: power plus hosting."""
    basis: str
    """``rent`` or ``buy``."""


def gpu_price(problem: Problem, chip: str, dc: str) -> GpuPrice:
    """The price of ``chip`` in datacenter ``dc``. Raises ``InputError`` without one."""
    s, hw = problem.scenario, problem.hardware
    kw = hw.chips[chip].tdp_w / 1000 * s.datacenters[dc].pue
    power = kw * (s.electricity_usd_per_kwh or 0.0)
    buy = s.gpu_purchase.get(chip)
    if buy is not None:
        hosting = (
            buy.hosting_usd_per_gpu_hour
            if buy.hosting_usd_per_gpu_hour is not None
            else s.hosting_usd_per_gpu_hour
        )
        capex = buy.capex_usd_per_gpu / (buy.amortization_years * HOURS_PER_YEAR)
        return GpuPrice(capex + power + hosting, power + hosting, "buy")
    rent = s.prices_usd_per_gpu_hour.get(chip, hw.chips[chip].price_usd_per_hour)
    if rent is None:
        raise InputError(
            f"scenario {s.name}: chip {chip} has no price: set prices_usd_per_gpu_hour.{chip} "
            f"(rent) or gpu_purchase.{chip} (buy) in the scenario"
        )
    return GpuPrice(rent, power + s.hosting_usd_per_gpu_hour, "rent")


def owned_discount(problem: Problem, dc: str, chip: str) -> float:
    """USD per GPU-hour an owned GPU saves against buying or renting one (0 if none owned)."""
    if chip not in problem.scenario.datacenters[dc].inventory:
        return 0.0
    p = gpu_price(problem, chip, dc)
    return max(0.0, p.full - p.running)


def link_usd_per_hour(tier: LinkTier, bytes_per_s: float) -> float:
    """A tier's monthly price per hour plus its egress at ``bytes_per_s``."""
    return tier.usd_per_month / units.HOURS_PER_MONTH + tier.usd_per_gb * bytes_per_s * 3600 / 1e9


def bases(scenario: Scenario, chips: set[str]) -> dict[str, str]:
    """Each chip's price basis (``rent`` or ``buy``), for reports."""
    return {c: "buy" if c in scenario.gpu_purchase else "rent" for c in sorted(chips)}


@dataclass(frozen=True)
class FleetCost:
    """A fleet's cost per hour, piece by piece."""

    pools: list[float | None]
    """USD per hour of each pool (in the fleet's order); None without a price."""
    owned_gpus: list[int]
    """GPUs of each pool counted as owned inventory (at running cost)."""
    links: list[float]
    """USD per hour of each link choice (in the fleet's order)."""
    total: float | None
    """None when a chip has no price."""
    missing: list[str]
    """Chips without a price."""
    basis: dict[str, str]
    """Each chip's price basis: ``rent`` or ``buy``."""


def fleet_cost(
    problem: Problem,
    fleet: Fleet,
    link_bytes_per_s: dict[frozenset[str], float] | None = None,
) -> FleetCost:
    """Price ``fleet``: owned inventory goes to the pools in the fleet's order; egress is
    billed on ``link_bytes_per_s`` per link (none given: no egress)."""
    scenario = problem.scenario
    left = {
        (dc_id, chip): n
        for dc_id, dc in scenario.datacenters.items()
        for chip, n in dc.inventory.items()
    }
    pools: list[float | None] = []
    owned_gpus: list[int] = []
    missing: list[str] = []
    for pool in fleet.pools:
        gpus = pool.gpus_per_instance * pool.instances
        try:
            price = gpu_price(problem, pool.chip, pool.datacenter)
        except InputError:
            pools.append(None)
            owned_gpus.append(0)
            missing.append(pool.chip)
            continue
        key = (pool.datacenter, pool.chip)
        owned = min(gpus, left.get(key, 0))
        if owned:
            left[key] -= owned
        owned_gpus.append(owned)
        tiers = fleet.md_cache_tiers if pool.role == "main_decode" else None
        extra = 0.0
        if tiers is not None:  # the decode-side cache's DRAM and SSD
            extra = gpus * tiers_usd_per_gpu_hour(
                problem.hardware,
                tiers.dram_gb_per_gpu,
                tiers.ssd_gb_per_gpu,
                scenario.cache_tier_prices_usd_per_gb_month,
            )
        pools.append(price.full * (gpus - owned) + price.running * owned + extra)
    links = []
    for choice in fleet.links:
        link = next(x for x in scenario.links if set(x.between) == set(choice.between))
        tier = next(t for t in link.tiers if t.gbps == choice.gbps)
        flow = (link_bytes_per_s or {}).get(frozenset(choice.between), 0.0)
        links.append(link_usd_per_hour(tier, flow))
    total = None if missing else sum(p for p in pools if p is not None) + sum(links)
    chips = {p.chip for p in fleet.pools}
    return FleetCost(pools, owned_gpus, links, total, sorted(set(missing)), bases(scenario, chips))
