"""The calibration knobs of the analytic model and how scenario overrides resolve.

A chip's knobs are its family's catalog defaults (``efficiency_defaults``), then the
deployment defaults below, overridden by the scenario's ``calibration.default`` and then by
``calibration.per_chip.<chip>``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from pddplan.spec.base import Frozen
from pddplan.spec.hardware import Efficiency, HardwareCatalog

Fraction = Annotated[float, Field(gt=0, le=1)]

DEFAULT_EP_IMBALANCE = 1.3
"""Assumption: the busiest GPU of an expert-parallel group carries 1.3x the mean expert load
(tokens and touched experts). DeepSeek's EPLB exists because this ratio is well above 1 on
real traffic; measure it on your own deployment and override it."""
DEFAULT_HBM_USABLE_FRACTION = 0.9
"""vLLM's default ``gpu_memory_utilization`` (0.9): the rest is left for activations,
the CUDA context and fragmentation (vLLM engine arguments documentation)."""
DEFAULT_PREFILL_CHUNK_TOKENS = 8192
"""Tokens per chunked-prefill pass; 8192 is SGLang's ``chunked_prefill_size`` on large-memory
GPUs (SGLang server arguments documentation). Assumption for other engines."""


class Knobs(Frozen):
    """Deployment knobs that are not properties of the chip."""

    ep_imbalance: Annotated[float, Field(ge=1)] = DEFAULT_EP_IMBALANCE
    """Busiest GPU's expert load over the mean (1 = perfect balance)."""
    hbm_usable_fraction: Fraction = DEFAULT_HBM_USABLE_FRACTION
    """Fraction of HBM for weights + KV cache."""
    prefill_chunk_tokens: Annotated[int, Field(ge=1)] = DEFAULT_PREFILL_CHUNK_TOKENS
    """Tokens in one prefill forward pass (chunked prefill)."""
    comm_overlap: Annotated[float, Field(ge=0, le=1)] = 0.0
    """Fraction of collective time hidden behind compute (0 = none, e.g. no two-batch overlap)."""
    prefix_cache: Literal["hbm", "host"] = "hbm"
    """Where the prefill prefix cache lives; ``host`` pays the host-to-HBM load of hits."""


class CalibrationOverride(Frozen):
    """Any subset of the efficiency factors and knobs, as a scenario may give them."""

    prefill_mfu: Fraction | None = None
    decode_mfu: Fraction | None = None
    decode_hbm_efficiency: Fraction | None = None
    collective_efficiency: Fraction | None = None
    scaleup_latency_us: Annotated[float, Field(ge=0)] | None = None
    scaleout_latency_us: Annotated[float, Field(ge=0)] | None = None
    step_overhead_ms: Annotated[float, Field(ge=0)] | None = None
    ep_imbalance: Annotated[float, Field(ge=1)] | None = None
    hbm_usable_fraction: Fraction | None = None
    prefill_chunk_tokens: Annotated[int, Field(ge=1)] | None = None
    comm_overlap: Annotated[float, Field(ge=0, le=1)] | None = None
    prefix_cache: Literal["hbm", "host"] | None = None


class CalibrationSpec(Frozen):
    """The scenario's ``calibration:`` section."""

    default: CalibrationOverride = CalibrationOverride()
    per_chip: dict[str, CalibrationOverride] = Field(default_factory=dict)


class Calibration(Frozen):
    """Resolved knobs for one chip: what the performance model reads."""

    efficiency: Efficiency
    knobs: Knobs


def resolve_calibration(
    catalog: HardwareCatalog, chip_id: str, spec: CalibrationSpec | None = None
) -> Calibration:
    """The knobs for ``chip_id``: catalog family defaults, then scenario overrides."""
    eff = catalog.efficiency(chip_id).model_dump()
    knobs = Knobs().model_dump()
    spec = spec or CalibrationSpec()
    for layer in (spec.default, spec.per_chip.get(chip_id)):
        if layer is None:
            continue
        for key, value in layer.model_dump(exclude_none=True).items():
            (eff if key in eff else knobs)[key] = value
    return Calibration(efficiency=Efficiency(**eff), knobs=Knobs(**knobs))
