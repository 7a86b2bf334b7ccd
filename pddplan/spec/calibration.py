"""The calibration knobs of the analytic model and how scenario overrides resolve.

A chip's knobs are its family's catalog defaults (``efficiency_defaults``), then the
deployment defaults below, overridden by the scenario's ``calibration.default`` and then by
``calibration.per_chip.<chip>``.
"""

from __future__ import annotations

import itertools
from typing import Annotated, Literal

from pydantic import Field, model_validator

from pddplan.spec.base import Frozen
from pddplan.spec.hardware import Efficiency, HardwareCatalog
from pddplan.spec.limits import MAX_TOKENS

Fraction = Annotated[float, Field(gt=0, le=1)]

MAX_DRAFT_TOKENS = 16
"""The most draft tokens per step a scenario may set (engines run 1-7)."""

DEFAULT_EP_IMBALANCE = 1.3
"""Assumption: the busiest GPU of an expert-parallel group carries 1.3x the mean expert load
(tokens and touched experts). DeepSeek's EPLB exists because this ratio is well above 1 on
real traffic; measure it on your own deployment and override it."""
DEFAULT_HBM_USABLE_FRACTION = 0.9
"""vLLM's default ``gpu_memory_utilization`` (0.9): the rest is left for activations,
the CUDA context and fragmentation (vLLM engine arguments documentation)."""
DEFAULT_PREFILL_CHUNK_TOKENS = 8192
"""New tokens per attention rank (data-parallel attention group) in one chunked-prefill
pass; 8192 is SGLang's ``chunked_prefill_size`` on large-memory GPUs (SGLang server
arguments documentation; with data-parallel attention the deployments below ran 16,384 per
rank: ``--chunked-prefill-size 524288`` over DP32, sgl-project/sglang#6017). Assumption for
other engines."""
DEFAULT_PREFILL_COMM_HIDDEN = 0.92
"""Share of a prefill pass's expert-parallel all-to-all hidden behind the other micro-batch's
compute under two-batch overlap: DeepSeek's own profile (H800, EP32, 16,384 tokens per GPU,
two micro-batches; ``deepseek-ai/profile-data``), as broken down per layer in the LMSYS
large-scale EP blog (2025-05-05, "DeepSeek Profile" column): the communication stream is busy
30.55 ms a layer, of which 2.40 ms shows as a bubble on the compute stream: 1 - 2.40 / 30.55
= 0.92. (SGLang with simulated perfect EPLB: 0.96; with its default EPLB: 0.73.)"""
DEFAULT_DECODE_COMM_HIDDEN = 0.67
"""The same share in a decode step: SGLang's two-batch-overlap ablation at 256 tokens per
device (LMSYS blog, 2025-05-05): dispatch + combine 1.100 ms a layer without TBO, 0.365 ms
with it: 1 - 0.365 / 1.100 = 0.67."""
DEFAULT_PREFILL_OVERLAP_SLOWDOWN = 132 / 108
"""Prefill compute time under two-batch overlap over its time alone: a micro-batch computes
on the 108 of an H800's 132 SMs the other's all-to-all leaves (DeepSeek's profile schematic,
"Computation 108 SMs" / "Communication 24 SMs", ``deepseek-ai/profile-data`` README,
assets/prefill.jpg): 1.22. SGLang measured 1.21 on H100 (compute kernels 30.94 ms a layer with
TBO, 25.58 ms without; LMSYS blog, 2025-05-05)."""
DEFAULT_DECODE_OVERLAP_SLOWDOWN = 1.33
"""The same for a decode step, where the all-to-all uses no SMs once its RDMA is issued (same
README) but each micro-batch's GEMMs run at half the batch: SGLang's compute kernels at 256
tokens per device took 1.040 ms a layer with TBO (MoE 0.297, attention 0.329, GEMM 0.282,
other 0.132) and 0.781 ms without (0.232, 0.279, 0.179, 0.091; LMSYS blog TBO ablation):
1.33."""


class Knobs(Frozen):
    """Deployment knobs that are not properties of the chip."""

    ep_imbalance: Annotated[float, Field(ge=1)] = DEFAULT_EP_IMBALANCE
    """Busiest GPU's expert load over the mean (1 = perfect balance)."""
    hbm_usable_fraction: Fraction = DEFAULT_HBM_USABLE_FRACTION
    """Fraction of HBM for weights + KV cache."""
    prefill_chunk_tokens: Annotated[int, Field(ge=1)] = DEFAULT_PREFILL_CHUNK_TOKENS
    """Tokens in one prefill forward pass (chunked prefill)."""
    overlap: Literal["auto", "two-batch", "none"] = "auto"
    """Two-batch (micro-batch) overlap of communication with compute: ``auto`` uses it for
    expert-parallel layouts (SGLang's TBO, DeepSeek's dual micro-batch) and not otherwise."""
    prefill_comm_hidden: Annotated[float, Field(ge=0, le=1)] = DEFAULT_PREFILL_COMM_HIDDEN
    """Under two-batch overlap: share of a prefill pass's collective volume hidden."""
    decode_comm_hidden: Annotated[float, Field(ge=0, le=1)] = DEFAULT_DECODE_COMM_HIDDEN
    """Under two-batch overlap: share of a decode step's collective volume hidden."""
    prefill_overlap_slowdown: Annotated[float, Field(ge=1)] = DEFAULT_PREFILL_OVERLAP_SLOWDOWN
    """Under two-batch overlap: prefill compute time over its time without it."""
    decode_overlap_slowdown: Annotated[float, Field(ge=1)] = DEFAULT_DECODE_OVERLAP_SLOWDOWN
    """Under two-batch overlap: decode compute time over its time without it."""
    prefix_cache: Literal["hbm", "host"] = "hbm"
    """Where the prefill prefix cache lives; ``host`` pays the host-to-HBM load of hits."""
    layer_overhead_us: Annotated[float, Field(ge=0)] = 0.0
    """Fixed time per layer in every prefill pass and decode step (kernel launches and
    synchronisation a layer's kernels pay whatever the batch), beside ``step_overhead_ms``:
    ``num_hidden_layers x layer_overhead_us``. 0: none (``ideal``)."""
    expert_pad_tokens: Annotated[float, Field(ge=0)] = 0.0
    """MoE expert GEMMs: the rows each expert a GPU touches costs beyond its tokens (a
    grouped GEMM computes whole tiles of rows, so an expert that receives ``t`` tokens
    costs about ``t + pad``): an expert GEMM's efficiency is ``t / (t + pad)``. 0: every
    expert GEMM at the MFU (``ideal``)."""
    attention_bf16: bool = False
    """Attention scores computed at the chip's BF16 peak even where the weights are FP8
    (engines run MLA and FlashAttention in BF16); False: at the weights' peak (``ideal``)."""
    mtp_draft_tokens: Annotated[int, Field(ge=0, le=MAX_DRAFT_TOKENS)] = 0
    """Speculative decoding (DeepSeek's multi-token prediction, EAGLE): tokens drafted per
    sequence per decode step and verified in the step (0: off). A step then runs
    ``1 + mtp_draft_tokens`` tokens per sequence through the model, and the draft module
    one layer per draft token."""
    mtp_acceptance_length: Annotated[float, Field(ge=1)] = 1.0
    """Mean tokens a sequence gains per step with drafts on, the verified token included
    (engines print it as "accept length"): 1 to ``1 + mtp_draft_tokens``."""
    prefill_time_factor: Annotated[float, Field(gt=0)] = 1.0
    """Every prefill pass's time multiplied by this: the engine profile's error at the
    scenario's ``perf_quantile`` (1 at 0.5, the fit itself)."""
    decode_time_factor: Annotated[float, Field(gt=0)] = 1.0
    """Every decode step's time multiplied by this, likewise."""

    @model_validator(mode="after")
    def _acceptance_within_drafts(self) -> Knobs:
        if self.mtp_acceptance_length > self.mtp_draft_tokens + 1:
            raise ValueError(
                f"mtp_acceptance_length {self.mtp_acceptance_length:g} exceeds 1 + "
                f"mtp_draft_tokens ({self.mtp_draft_tokens}): a step verifies at most "
                f"{self.mtp_draft_tokens + 1} token{'s' if self.mtp_draft_tokens else ''} "
                "per sequence"
            )
        return self


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
    prefill_chunk_tokens: Annotated[int, Field(ge=1, le=MAX_TOKENS)] | None = None
    overlap: Literal["auto", "two-batch", "none"] | None = None
    prefill_comm_hidden: Annotated[float, Field(ge=0, le=1)] | None = None
    decode_comm_hidden: Annotated[float, Field(ge=0, le=1)] | None = None
    prefill_overlap_slowdown: Annotated[float, Field(ge=1)] | None = None
    decode_overlap_slowdown: Annotated[float, Field(ge=1)] | None = None
    prefix_cache: Literal["hbm", "host"] | None = None
    layer_overhead_us: Annotated[float, Field(ge=0)] | None = None
    expert_pad_tokens: Annotated[float, Field(ge=0)] | None = None
    attention_bf16: bool | None = None
    mtp_draft_tokens: Annotated[int, Field(ge=0, le=MAX_DRAFT_TOKENS)] | None = None
    mtp_acceptance_length: Annotated[float, Field(ge=1)] | None = None


Phase = Literal["prefill", "decode"]
"""The phases whose pass times the model's error scales: a prefill pass, a decode step."""


class PhaseError(Frozen):
    """The model's error on one phase with one engine profile or one user calibration:
    held-out (cross-validated) ratios of
    measured to predicted pass time, as quantiles."""

    points: Annotated[int, Field(ge=0)]
    """Held-out points the quantiles come from."""
    quantiles: dict[float, Annotated[float, Field(gt=0)]]
    """``q -> ratio``: the q-quantile of measured / predicted pass time, ascending in q;
    must hold 0.5 (the fit's own centre)."""
    pooled: str | None = None
    """Where the points are pooled over chip or model families (a cell with fewer than 10
    points), what was pooled."""

    @model_validator(mode="after")
    def _ordered(self) -> PhaseError:
        qs = sorted(self.quantiles)
        if any(not 0 < q < 1 for q in qs):
            raise ValueError("quantiles: each q must lie in (0, 1)")
        if 0.5 not in self.quantiles:
            raise ValueError("quantiles: must hold 0.5, the fit's centre")
        ratios = [self.quantiles[q] for q in qs]
        if any(b < a for a, b in itertools.pairwise(ratios)):
            raise ValueError("quantiles: ratios must not fall as q rises")
        return self

    def factor(self, q: float) -> float:
        """How much longer a pass is at the q-quantile of the error than at the fit's
        centre: ``ratio(q) / ratio(0.5)``, linear in q between the quantiles given, flat
        beyond them (1 at q = 0.5)."""
        qs = sorted(self.quantiles)
        centre = self.quantiles[0.5]
        if q <= qs[0]:
            return self.quantiles[qs[0]] / centre
        for lo, hi in itertools.pairwise(qs):
            if q <= hi:
                w = (q - lo) / (hi - lo)
                return ((1 - w) * self.quantiles[lo] + w * self.quantiles[hi]) / centre
        return self.quantiles[qs[-1]] / centre


MIN_ERROR_POINTS = 10
"""Held-out points of one phase below which a calibration of a user's own points carries
no error table for that phase (``CalibrationSpec.error``)."""
FITTED_KNOBS = (
    "prefill_mfu",
    "decode_mfu",
    "decode_hbm_efficiency",
    "collective_efficiency",
    "layer_overhead_us",
    "expert_pad_tokens",
)
"""The knobs a fit to measured runs sets (``pddplan calibrate``'s defaults and the engine
profiles' fitted knobs): a calibration that sets one of them was fitted on top of some
engine's pass times, and means nothing on top of another's."""


class CalibrationSpec(Frozen):
    """The scenario's ``calibration:`` section."""

    default: CalibrationOverride = CalibrationOverride()
    per_chip: dict[str, CalibrationOverride] = Field(default_factory=dict)
    error: dict[Phase, PhaseError] = Field(default_factory=dict)
    """The model's held-out error per phase with these knobs, as ``pddplan calibrate``
    measured it on the user's own points (cross-validated; a phase with fewer than
    ``MIN_ERROR_POINTS`` held-out points has none): where a phase has one,
    ``perf_quantile`` reads it instead of the engine profile's."""

    def fitted_knobs(self) -> list[str]:
        """The ``FITTED_KNOBS`` this section sets, in ``default`` or for any chip."""
        layers = [self.default, *self.per_chip.values()]
        return [k for k in FITTED_KNOBS if any(getattr(x, k) is not None for x in layers)]


class Calibration(Frozen):
    """Resolved knobs for one chip: what the performance model reads."""

    efficiency: Efficiency
    knobs: Knobs


def resolve_calibration(
    catalog: HardwareCatalog,
    chip_id: str,
    spec: CalibrationSpec | None = None,
    *,
    engine: CalibrationOverride | None = None,
    time_factors: tuple[float, float] = (1.0, 1.0),
) -> Calibration:
    """The knobs for ``chip_id``: catalog family defaults, then ``engine`` (the engine
    profile's knobs for the chip's family), then scenario overrides; ``time_factors``
    (prefill, decode) scale pass and step times (``perf_quantile``)."""
    eff = catalog.efficiency(chip_id).model_dump()
    knobs = Knobs().model_dump()
    knobs["prefill_time_factor"], knobs["decode_time_factor"] = time_factors
    spec = spec or CalibrationSpec()
    for layer in (engine, spec.default, spec.per_chip.get(chip_id)):
        if layer is None:
            continue
        for key, value in layer.model_dump(exclude_none=True).items():
            (eff if key in eff else knobs)[key] = value
    return Calibration(efficiency=Efficiency(**eff), knobs=Knobs(**knobs))
