"""The keys a workload is given by (a scenario's ``workload``, each ``workload_variants``
entry and each horizon overlay lay them over one another): its rate, its length and hit
distributions, explicit request classes, or a trace. ``pddplan.spec.scenario`` checks that
they make one whole workload (``Workload``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from pddplan.spec.base import Frozen
from pddplan.spec.distributions import HitDist, LengthDist
from pddplan.spec.limits import MAX_ARRIVAL_RPS, MAX_TOKENS

Positive = Annotated[float, Field(gt=0)]
Tokens = Annotated[float, Field(ge=0, le=MAX_TOKENS)]


class TraceRef(Frozen):
    """A request trace (Mooncake JSONL) the workload is fitted from."""

    file: Path
    cache_tokens: Annotated[int, Field(ge=1)] | Literal["unbounded"] = "unbounded"
    md_cache_tokens: Annotated[int, Field(ge=1)] | Literal["unbounded"] | None = None
    block_size: Annotated[int, Field(ge=1)] = 512
    """Tokens per prefix block (Mooncake traces: 512)."""
    skip_bad: bool = False
    """Skip (and count) malformed lines instead of refusing the trace."""


class ClassSpec(Frozen):
    """One request class given explicitly (``pddplan workload fit`` writes these)."""

    weight: Annotated[float, Field(gt=0, le=1)]
    input_tokens: Annotated[float, Field(gt=0, le=MAX_TOKENS)]
    output_tokens: Tokens
    p_hit: Annotated[float, Field(ge=0, le=1)]
    md_hit: Annotated[float, Field(ge=0, le=1)] | None = None
    """Decode-side hit; defaults to ``p_hit``."""
    key: str | None = None


class _WorkloadKeys(Frozen):
    """The keys of a workload, every one optional: a ``Workload`` checks that they make one
    whole workload, a ``WorkloadVariant`` holds the ones it changes."""

    arrival_rps: Annotated[float, Field(gt=0, le=MAX_ARRIVAL_RPS)] | None = None
    input_tokens: LengthDist | None = None
    output_tokens: LengthDist | None = None
    prefix_hit: HitDist | None = None
    """Prefill-side (P) prefix-cache hit rate."""
    md_prefix_hit: HitDist | None = None
    """Decode-side (MD) cache hit rate; defaults to ``prefix_hit``."""
    classes: tuple[ClassSpec, ...] | None = None
    """Request classes given explicitly, instead of the four distributions."""
    trace: TraceRef | None = None
    turn_interval_s: Positive | None = None
    """Mean seconds between the starts of a session's consecutive requests: how long its
    context must stay in the decode-side cache for its next turn to hit there. With it, a
    plan's MD cache must hold every open session's context (``kv.session_working_set_bytes``);
    without it, the MD hit rates are taken as given at any load."""
