"""The decode-side (MD) prefix cache: the choices a plan has, the capacity each gives, and
the hit rate that capacity buys.

A **tiered** cache (``md_cache`` options without a measured hit) is an LRU radix cache as
SGLang's HiCache keeps it: HBM pages shared with running requests (the instance's KV
memory: running requests' contexts are the most recently used entries), then the host
DRAM and SSD a main-decode GPU is given. The tiers are nested LRU: a context lives in HBM
while it is among the most recent ``C_HBM`` tokens, in DRAM until ``C_HBM + C_DRAM``, on SSD
until all of it.

Its hit rate is a curve of its capacity: Che's characteristic time over the workload's
reuse times (``pddplan.workload.hit_curve.ReuseCurve``). A cache of ``C`` tokens at ``r``
requests a second keeps a context for ``t_C`` after its last use, and a request that
continues a context finds it when the context's age is below ``t_C``: its MD hit is its
prefill-side hit times ``kept(t_C)``, the share of reuses the cache keeps.

The planner cannot know the capacity before it counts the instances, so it sizes for a
share instead: each tiered option comes with the shares in ``KEPT_SHARES``, and a plan
that picks share ``q`` must hold ``ReuseCurve.capacity_for(q, rate)`` tokens in its MD
instances (``pddplan.plan.counts``). Its hits are then at least ``q`` x the prefill-side
hits at that rate; the evaluator and the simulator take the capacity the plan has.

Fetching a hit from DRAM or SSD into HBM (at the tier's read bandwidth per GPU) runs while
the missing suffix crosses the WAN: the KV is complete at the later of the two.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pddplan import units
from pddplan.errors import InputError
from pddplan.spec.hardware import ChipSpec, HardwareCatalog
from pddplan.spec.scenario import MdCacheOption
from pddplan.workload.hit_curve import RateBlend, ReuseCurve

Array = npt.NDArray[np.float64]

KEPT_SHARES = (0.0, 0.9, 0.99)
"""The shares of reused contexts a tiered cache may be sized to keep (0: sized for
nothing, every hit a bonus the plan does not count on)."""


@dataclass(frozen=True)
class CacheChoice:
    """One decode-side cache choice of a plan."""

    option: int | None
    """Its ``md_cache`` option (None: the scenario has none; MD hits are the workload's)."""
    hits: Array
    """Each class's MD hit rate the plan counts on."""
    reserve_gb: float | None = None
    """Measured-hit options: HBM reserved per MD GPU (None: nothing reserved)."""
    kept: float | None = None
    """Tiered options: the share of reused contexts the plan's capacity must keep."""
    dram_gb: float = 0.0
    ssd_gb: float = 0.0
    usd_per_gpu_hour: float = 0.0
    """The tiers' price per MD GPU-hour."""

    @property
    def tiered(self) -> bool:
        return self.kept is not None

    @property
    def key(self) -> str:
        if self.option is None:
            return ""
        if self.tiered:
            return f".md{self.option}k{self.kept:g}"
        return f".md{self.reserve_gb:g}GB"


def tier_price(
    hw: HardwareCatalog, tier: str, override: Mapping[Any, float] | None = None
) -> float | None:
    """A tier's USD per GB-month: the scenario's ``cache_tier_prices_usd_per_gb_month``,
    else the hardware catalog's (None: unpriced)."""
    if override and tier in override:
        return override[tier]
    return getattr(hw.cache_tiers, tier).usd_per_gb_month if hw.cache_tiers else None


def tiers_usd_per_gpu_hour(
    hw: HardwareCatalog,
    dram_gb: float,
    ssd_gb: float,
    override: Mapping[Any, float] | None = None,
) -> float:
    """What ``dram_gb`` of host DRAM and ``ssd_gb`` of SSD cost per GPU-hour (an unpriced
    tier of size 0 costs nothing; ``checks.scenario_problems`` refuses a priced-less one in
    use)."""
    total = 0.0
    for gb, tier in ((dram_gb, "dram"), (ssd_gb, "ssd")):
        if gb:
            price = tier_price(hw, tier, override)
            if price is None:
                raise InputError(
                    f"{gb:g} GB of {tier} per main-decode GPU needs a price: the hardware "
                    f"catalog has no cache_tiers.{tier}.usd_per_gb_month"
                )
            total += gb * price / units.HOURS_PER_MONTH
    return total


def choices(
    options: tuple[MdCacheOption, ...] | None,
    p_hits: Array,
    measured_hits: list[list[float]],
    hw: HardwareCatalog,
    prices: Mapping[Any, float] | None = None,
) -> list[CacheChoice]:
    """The plan's cache choices: one per measured-hit option; per tiered option, one per
    share of ``KEPT_SHARES``; without options, one with the workload's MD hits
    (``measured_hits[0]``)."""
    if options is None:
        return [CacheChoice(None, np.array(measured_hits[0]))]
    out = []
    for i, o in enumerate(options):
        if o.measured:
            out.append(CacheChoice(i, np.array(measured_hits[i]), reserve_gb=o.gb_per_gpu))
            continue
        price = tiers_usd_per_gpu_hour(hw, o.dram_gb, o.ssd_gb, prices)
        out += [
            CacheChoice(i, p_hits * q, kept=q, dram_gb=o.dram_gb, ssd_gb=o.ssd_gb,
                        usd_per_gpu_hour=price)
            for q in KEPT_SHARES
        ]  # fmt: skip
    return out


@dataclass(frozen=True)
class Tiers:
    """A datacenter's tiered decode-side cache: its capacity per tier (tokens, all its MD
    instances together) and how fast each tier reaches HBM (bytes/s per GPU)."""

    hbm_tokens: float
    dram_tokens: float
    ssd_tokens: float
    dram_read: float
    ssd_read: float

    @property
    def tokens(self) -> float:
        return self.hbm_tokens + self.dram_tokens + self.ssd_tokens

    def nested(self) -> tuple[float, float, float]:
        """The capacities of the nested LRU caches: HBM, HBM+DRAM, all."""
        return self.hbm_tokens, self.hbm_tokens + self.dram_tokens, self.tokens


def tier_reads(hw: HardwareCatalog, chip: ChipSpec) -> tuple[float, float]:
    """(DRAM, SSD) read bandwidth into ``chip``'s HBM, bytes/s per GPU (0 without tiers in
    the catalog)."""
    if hw.cache_tiers is None:
        return 0.0, 0.0
    return hw.cache_tiers.dram.read_bytes_per_s(chip), hw.cache_tiers.ssd.read_bytes_per_s(chip)


def instance_tiers(
    hbm_kv_bytes: float, gpus: int, dram_gb: float, ssd_gb: float, bytes_per_token: float
) -> tuple[float, float, float]:
    """One MD instance's (HBM, DRAM, SSD) cache capacity in tokens: all its KV memory
    (shared with running requests), then the tiers its GPUs are given."""
    per_gb = units.GB / bytes_per_token
    return hbm_kv_bytes / bytes_per_token, gpus * dram_gb * per_gb, gpus * ssd_gb * per_gb


@dataclass(frozen=True)
class TierHits:
    """What a tiered cache gives at one rate: the share of reuses it keeps, and of those
    the shares found in each tier."""

    kept: float
    shares: tuple[float, float, float]
    """(HBM, DRAM, SSD) shares of the kept reuses."""


def tier_hits(curve: ReuseCurve | RateBlend, tiers: Tiers, rate_rps: float) -> TierHits:
    """Che's approximation on the nested tiers at ``rate_rps`` (the datacenter's rate)."""
    if rate_rps <= 0:
        return TierHits(1.0, (1.0, 0.0, 0.0))
    kept = [curve.hit_share(c, rate_rps) for c in tiers.nested()]
    if kept[2] <= 0:
        return TierHits(0.0, (1.0, 0.0, 0.0))
    hbm, dram, ssd = kept[0], kept[1] - kept[0], kept[2] - kept[1]
    return TierHits(kept[2], (hbm / kept[2], dram / kept[2], ssd / kept[2]))


def fetch_seconds(
    hit_bytes: Array, tiers: Tiers, shares: tuple[float, float, float]
) -> list[tuple[float, Array]]:
    """Per tier with hits: (its share of the hits, each class's fetch into HBM)."""
    out = [(shares[0], np.zeros_like(hit_bytes))]
    for share, read in ((shares[1], tiers.dram_read), (shares[2], tiers.ssd_read)):
        if share > 0:
            out.append((share, hit_bytes / read if read > 0 else np.full_like(hit_bytes, np.inf)))
    return out
