"""A measured point of one deployment, as ``pddplan calibrate`` reads it: which model on how
many GPUs of which chip, the request shape, what was measured and its value."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import Field, model_validator

from pddplan.spec.base import Frozen
from pddplan.spec.calibration import CalibrationOverride
from pddplan.spec.limits import MAX_BATCH, MAX_INSTANCE_GPUS, MAX_MEASURED, MAX_TOKENS
from pddplan.spec.llm import Dtype, KvDtype

Metric = Literal[
    "prefill_tokens_per_s_per_gpu",
    "prefill_input_tokens_per_s_per_gpu",
    "decode_tokens_per_s_per_gpu",
    "decode_step_ms",
    "serving_output_tokens_per_s_per_gpu",
]
Regime = Literal[
    "aggregated-low-concurrency",
    "aggregated-high-concurrency",
    "disaggregated-prefill",
    "disaggregated-decode",
    "offline-max-throughput",
    "long-context-prefill",
]
REGIMES: tuple[str, ...] = get_args(Regime)
"""The kinds of run a corpus point may come from: an aggregated server (prefill and decode
on the same GPUs) at low (1-16 requests per instance) or high concurrency, one role of a
disaggregated deployment, an offline maximum-throughput run, a long-context prefill."""
METRICS: tuple[str, ...] = get_args(Metric)
"""What a point may measure: prefill throughput in computed (uncached) tokens or in input
tokens per second per GPU, with passes full of such requests; decode tokens per second per
GPU at ``batch`` or at the largest batch meeting ``tpot_ms``; the decode step at that batch
(ms); or, for an engine that prefills and decodes on the same GPUs (a benchmark of an
aggregated server), output tokens per second per GPU, compared with ``O / (I / P + O / D)``
(a request costs ``I / P`` GPU-seconds of prefill and ``O / D`` of decode)."""


class Measurement(Frozen):
    """One measured figure of one deployment."""

    id: str | None = None
    """A name for the point in reports (default: its place in the file)."""
    model: str
    """A model id of the model catalog."""
    chip: str
    """A chip id of the hardware catalog."""
    gpus: Annotated[int, Field(ge=1, le=MAX_INSTANCE_GPUS)]
    """GPUs of one instance (its layout follows, as ``pddplan perf`` builds it); at most
    ``MAX_INSTANCE_GPUS``."""
    input_tokens: Annotated[int, Field(ge=1, le=MAX_TOKENS)]
    output_tokens: Annotated[int, Field(ge=1, le=MAX_TOKENS)] = 1
    hit_rate: Annotated[float, Field(ge=0, le=1)] = 0.0
    """Prefix-cache hit rate of the input at prefill."""
    batch: Annotated[int, Field(ge=1, le=MAX_BATCH)] | None = None
    """Decode sequences per instance (default: the largest meeting ``tpot_ms``, or memory)."""
    tpot_ms: Annotated[float, Field(gt=0, le=MAX_MEASURED)] | None = None
    kv_dtype: KvDtype | None = None
    weight_dtype: Dtype | None = None
    context_parallel: bool = False
    attention_tp: Annotated[int, Field(ge=1, le=MAX_INSTANCE_GPUS)] | None = None
    """The run's attention tensor-parallel width where it differs from pddplan's layout for
    the model: an MoE model served with ``--tp N`` and no data-parallel attention (an MLA
    latent then replicated on every rank). None: pddplan's layout."""
    metric: Metric
    value: Annotated[float, Field(gt=0, le=MAX_MEASURED)]
    """In the metric's unit: tokens per second per GPU, or ms for ``decode_step_ms``."""
    kind: Literal["capacity", "average"] = "capacity"
    """``capacity``: a benchmark at full load, what the model predicts; ``average``: a
    production average over varying load, a lower bound on capacity."""
    balance: str | None = None
    """What the source says of the experts' load balance (e.g. ``perfect (simulated)``)."""
    source: str | None = None
    """The figure as the source prints it (a quote or paraphrase with the raw number)."""
    engine: str | None = None
    """The serving engine that produced the figure (an engine profile's id); None: not
    stated (fitted and predicted with the profile a command names)."""
    engine_version: str | None = None
    url: str | None = None
    """Where the figure is published."""
    date: str | None = None
    """When it was published (YYYY-MM or YYYY-MM-DD)."""
    regime: Regime | None = None
    """What kind of run it is (``REGIMES``)."""
    mapping: str | None = None
    """How the run becomes this point: what became the batch, the lengths, the per-GPU
    figure."""
    raw: dict[str, Any] = Field(default_factory=dict)
    """The run's figures as printed (concurrency, throughputs, parallelism, ...)."""
    calibration: CalibrationOverride = CalibrationOverride()
    """Knobs known for this deployment, held fixed for it whatever is fitted (e.g.
    ``ep_imbalance: 1.0`` for a profile with perfectly balanced routing)."""

    @model_validator(mode="after")
    def _decode_needs_a_batch_rule(self) -> Measurement:
        if self.batch is not None and self.tpot_ms is not None:
            raise ValueError("give batch or tpot_ms, not both")
        return self


class Exclusion(Frozen):
    """A run found but not kept as a point: where it is, and why it cannot map like with
    like (a model not in the catalog, no per-GPU figure, a chart without numbers)."""

    id: str
    url: str | None = None
    excluded: str
    """The reason."""
    source: str | None = None
    engine: str | None = None
    raw: dict[str, Any] = Field(default_factory=dict)
