"""Accelerator specs and achievable-efficiency factors (the hardware catalog's entries).

Catalog keys carry their units; the properties ending in SI units (``peak_flops``,
``hbm_bytes``, ...) are what the model math uses.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, model_validator

from pddplan import units
from pddplan.spec.base import Frozen
from pddplan.spec.limits import MAX_USD
from pddplan.spec.readonly import ReadOnlyDict

Positive = Annotated[float, Field(gt=0)]
Fraction = Annotated[float, Field(gt=0, le=1)]

_PRICE_DATE = re.compile(r"^\d{4}-\d{2}(-\d{2})?$")


class Efficiency(Frozen):
    """Achievable fractions of peak, and fixed latencies, for one chip family.

    These are the calibration knobs of the analytic model; a scenario may override any of
    them per chip (``calibration:``), so users can fit them to their own measurements.
    """

    prefill_mfu: Fraction
    """Fraction of dense peak FLOP/s reached by prefill passes."""
    decode_mfu: Fraction
    """Fraction of dense peak FLOP/s reached by decode-step compute."""
    decode_hbm_efficiency: Fraction
    """Fraction of peak HBM bandwidth reached streaming weights and KV in decode."""
    collective_efficiency: Fraction
    """Fraction of link peak bandwidth reached by all-reduce / all-to-all."""
    scaleup_latency_us: Annotated[float, Field(ge=0)]
    """Fixed latency of one collective inside the scale-up domain."""
    scaleout_latency_us: Annotated[float, Field(ge=0)]
    """Fixed latency of one collective across nodes."""
    step_overhead_ms: Annotated[float, Field(ge=0)]
    """Fixed host/launch/scheduler time per decode step or prefill pass."""
    sources: dict[str, str] = Field(default_factory=dict)
    notes: str | None = None

    @model_validator(mode="after")
    def _every_factor_is_sourced(self) -> Efficiency:
        missing = [k for k in _numeric_fields(self) if k not in self.sources]
        if missing:
            raise ValueError(f"sources is missing a citation for: {', '.join(missing)}")
        return self


class ChipSpec(Frozen):
    """One accelerator. Compute figures are dense (no 2:4 sparsity); bandwidths are per GPU
    and per direction; GB are decimal (1e9 bytes)."""

    id: str
    name: str
    vendor: str
    family: str
    bf16_tflops: Positive
    fp8_tflops: Positive | None
    hbm_gb: Positive
    hbm_bandwidth_tb_s: Positive
    scaleup_bandwidth_gb_s: Positive
    scaleup_domain_gpus: Annotated[int, Field(ge=1)]
    nic_gbps: Positive
    host_link_gb_s: Positive
    tdp_w: Positive
    purchase_unit_gpus: Annotated[int, Field(ge=1)]
    price_usd_per_hour: Annotated[float, Field(gt=0, le=MAX_USD)] | None
    price_date: str | None = None
    sources: dict[str, str]
    uncertain: dict[str, str] = Field(default_factory=dict)
    notes: str | None = None

    @model_validator(mode="after")
    def _check_sources_and_price_date(self) -> ChipSpec:
        missing = [k for k in _numeric_fields(self) if k not in self.sources]
        if missing:
            raise ValueError(f"sources is missing a citation for: {', '.join(missing)}")
        if self.price_usd_per_hour is not None and not self.price_date:
            raise ValueError("price_date (YYYY-MM) is required when price_usd_per_hour is set")
        if self.price_date and not _PRICE_DATE.match(self.price_date):
            raise ValueError(f"price_date must look like YYYY-MM or YYYY-MM-DD: {self.price_date}")
        return self

    # --- SI views used by the model math ---------------------------------------------------
    def peak_flops(self, dtype: Literal["bf16", "fp8"]) -> float:
        """Dense peak FLOP/s at ``dtype``; FP8 falls back to BF16 on chips without FP8."""
        if dtype == "fp8" and self.fp8_tflops is not None:
            return self.fp8_tflops * units.TFLOPS
        return self.bf16_tflops * units.TFLOPS

    @property
    def hbm_bytes(self) -> float:
        return self.hbm_gb * units.GB

    @property
    def hbm_bytes_per_s(self) -> float:
        return self.hbm_bandwidth_tb_s * units.TB

    @property
    def scaleup_bytes_per_s(self) -> float:
        return self.scaleup_bandwidth_gb_s * units.GB

    @property
    def nic_bytes_per_s(self) -> float:
        return self.nic_gbps * units.GBIT

    @property
    def host_link_bytes_per_s(self) -> float:
        return self.host_link_gb_s * units.GB


class CacheTier(Frozen):
    """A memory tier behind HBM that a main-decode instance's prefix cache may spill to."""

    usd_per_gb_month: Annotated[float, Field(ge=0, le=MAX_USD)] | None
    """What a GB of it costs per month (null: unpriced, so the planner may not buy it)."""
    read_efficiency: Fraction | None = None
    """Host DRAM: the share of the chip's ``host_link_gb_s`` a copy to HBM reaches."""
    read_gb_s_per_gpu: Positive | None = None
    """SSD: the read bandwidth behind each GPU (GB/s), capped by its host link."""
    sources: dict[str, str] = Field(default_factory=dict)

    def read_bytes_per_s(self, chip: ChipSpec) -> float:
        """How fast a prefix in this tier reaches ``chip``'s HBM."""
        host = chip.host_link_bytes_per_s
        if self.read_gb_s_per_gpu is not None:
            return min(self.read_gb_s_per_gpu * units.GB, host)
        return host * (self.read_efficiency if self.read_efficiency is not None else 1.0)


class CacheTiers(Frozen):
    """The decode-side cache's tiers below HBM: host DRAM, then local SSD."""

    dram: CacheTier
    ssd: CacheTier


class HardwareCatalog(Frozen):
    """``catalogs/hardware.yaml``: chips by id, efficiency defaults by chip family, and the
    tiers a decode-side prefix cache may spill to."""

    efficiency_defaults: dict[str, Efficiency]
    chips: dict[str, ChipSpec]
    cache_tiers: CacheTiers | None = None

    @model_validator(mode="after")
    def _families_have_defaults(self) -> HardwareCatalog:
        unknown = sorted({c.family for c in self.chips.values()} - set(self.efficiency_defaults))
        if unknown:
            raise ValueError(
                f"chip families without efficiency_defaults: {', '.join(unknown)}; "
                f"defined: {', '.join(sorted(self.efficiency_defaults))}"
            )
        # a catalog is shared by every problem read from its file: its mappings read-only
        for name in ("efficiency_defaults", "chips"):
            object.__setattr__(self, name, ReadOnlyDict(getattr(self, name)))
        return self

    def efficiency(self, chip_id: str) -> Efficiency:
        """The catalog's default efficiency factors for ``chip_id``'s family."""
        return self.efficiency_defaults[self.chips[chip_id].family]


def _numeric_fields(obj: Frozen) -> list[str]:
    """Names of the numeric fields that hold a value (these need a citation)."""
    out = []
    for name in type(obj).model_fields:
        value = getattr(obj, name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out.append(name)
    return out
