"""Relay decode hosted on prefill instances (co-location).

A prefill instance that hosts relay decode runs its RLD sequences as decode tokens
piggybacked on its chunked-prefill passes (SGLang's mixed chunked prefill, Sarathi-Serve's
stall-free batching): every pass carries one token of each hosted sequence, so the pass is
the hosted sequences' step, and it must meet the TPOT bound. That caps the chunk:

- **batch**: the most hosted sequences one instance holds. Their KV shares HBM with the
  prompts being prefilled (one per attention group, at the decode context) and with the
  prefill prefix cache; the batch is what is left after weights and those prompts, and is
  smaller where one token of each would not fit the TPOT bound beside a ``MIN_CHUNK``-token
  chunk per attention group.
- **chunk**: the largest number of new tokens per attention group (at most the knob
  ``prefill_chunk_tokens``) whose full pass, a chunk on every group at the end of the
  longest prompt (the dearest attention a pass has) plus one token of each of ``batch``
  sequences, takes at most the TPOT bound: every pass meets it.
- **mixed pass** ``T(b)``: the full pass with ``b`` hosted sequences and the chunks at the
  decode context (a mean pass). While prefill is
  busy, hosted sequences step at ``T(b)``; while it is idle, at the plain decode step.
  Prefill's service time stretches by ``T(b) / T(0)``: the share of each pass the hosted
  tokens take.

Hosted sequences need no GPUs of their own, which is what lets a model whose weights need
16 GPUs per instance keep a relay tier of a few sequences: a separate relay pool would need
16 GPUs more. What their KV takes from HBM comes out of the prefill prefix cache; the
prefill-side hit rates stay the workload's (``docs/model.md``, limits).

All quantities are SI (bytes, seconds).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from pddplan.model.instance import Instance, PrefillFigures
from pddplan.model.numeric import Array

if TYPE_CHECKING:
    from pddplan.model.prefill_queue import PassOrder

MIN_CHUNK = 64
"""New tokens per attention group the batch leaves room for in a pass within the TPOT
bound: below this a pass is mostly fixed cost (weights, collectives, overhead)."""


_Batch = TypeVar("_Batch", float, Array)

TABLE_POINTS = 17
"""Batches ``HostPoint`` prices its passes at, 0 and the largest included."""


@dataclass(frozen=True)
class HostPoint:
    """How a prefill instance hosts relay decode (the module docstring)."""

    chunk_tokens: int
    """New tokens per attention group and pass while it hosts."""
    batch: int
    """Most hosted sequences per instance."""
    batches: Array
    """Batches from 0 to ``batch`` (the tables' rows, ``TABLE_POINTS`` of them, evenly
    spread; steps between are interpolated)."""
    mixed_s: Array
    """Per batch: the full mixed pass."""
    decode_s: Array
    """Per batch: the plain decode step (prefill idle; batch 0: 0)."""
    kv_bytes_per_sequence: float
    """HBM one hosted sequence takes (at the decode context)."""

    def stretch(self, batch: _Batch) -> _Batch:
        """Prefill's service over its service without hosted sequences, at ``batch`` of
        them per instance (a number, or an array of them): ``T(batch) / T(0)``."""
        at = np.interp(np.minimum(batch, float(self.batch)), self.batches, self.mixed_s)
        out = at / float(self.mixed_s[0])
        return float(out) if np.ndim(out) == 0 else out  # type: ignore[return-value]

    def gaps(self, batch: float, prefill_busy: float) -> list[tuple[float, float]]:
        """Hosted decode's inter-token gaps at ``batch`` sequences per instance, as
        (seconds, share of its tokens): the mixed pass while prefill is busy, the plain
        decode step while it is idle (more tokens come in the faster steps)."""
        b = min(max(batch, 1.0), float(self.batch))
        busy = min(max(prefill_busy, 0.0), 1.0)
        mixed = float(np.interp(b, self.batches, self.mixed_s))
        plain = float(np.interp(b, self.batches[1:], self.decode_s[1:]))
        rate_busy, rate_idle = busy / mixed, (1 - busy) / plain
        in_mixed = rate_busy / (rate_busy + rate_idle)
        return [(mixed, in_mixed), (plain, 1 - in_mixed)]

    def steps(self, prefill_busy: float) -> tuple[Array, Array]:
        """Hosted decode's (batches, step seconds) from 1 to ``batch`` when prefill is busy
        a ``prefill_busy`` share of the time: ``busy x T(b) + (1 - busy) x decode(b)``,
        the table ``pddplan.model.relay.relay_pace`` reads."""
        busy = min(max(prefill_busy, 0.0), 1.0)
        seconds = busy * self.mixed_s + (1 - busy) * self.decode_s
        return self.batches[1:], seconds[1:]


def mixed_pass_s(
    inst: Instance, chunk: int, batch: int, context_tokens: float, prefix_tokens: float
) -> float:
    """A full pass on ``inst``: ``chunk`` new tokens on every attention group, each after
    ``prefix_tokens`` earlier ones, plus one decode token of each of ``batch`` sequences at
    ``context_tokens``, spread over the groups as evenly as they go."""
    groups = inst.attention_groups
    ranks: list[list[tuple[float, float, float]]] = []
    for g in range(groups):
        decode = batch // groups + (1 if g < batch % groups else 0)
        rank = [(1.0, context_tokens, 0.0)] * decode
        if chunk > 0:
            rank = [(float(chunk), prefix_tokens, 0.0), *rank]
        if rank:
            ranks.append(rank)
    return inst.batched_pass_s(ranks) if ranks else 0.0


def host_point(
    inst: Instance, context_tokens: float, longest_prompt: float, tpot_s: float
) -> HostPoint | None:
    """How ``inst`` hosts relay decode at the decode context ``context_tokens`` under the
    TPOT bound, which every pass must meet: the chunk is sized for a pass whose chunks all
    end the ``longest_prompt`` (the dearest attention), its table priced with chunks at the
    decode context (a mean pass), or where that is longer, at the longest prefix a chunk
    can have (``longest_prompt`` less a chunk: a chunk long beside the prompts), so that
    no pass of the table is longer than the one sized. None when it cannot host (no
    sequence fits beside the prompts, or one decode token beside a ``MIN_CHUNK`` chunk
    already takes longer than the bound)."""
    per_seq = inst.kv.resident_bytes(context_tokens)
    prompts = inst.attention_groups * per_seq  # one prompt in flight per attention group
    by_memory = int(max(inst.kv_capacity_bytes() - prompts, 0.0) // per_seq)
    floor = min(MIN_CHUNK, inst.chunk_tokens)

    def within(chunk: int, batch: int) -> bool:
        prefix = max(longest_prompt - chunk, 0.0)  # the last chunk of the longest prompt
        return mixed_pass_s(inst, chunk, batch, context_tokens, prefix) <= tpot_s

    if by_memory < 1 or not within(floor, 1):
        return None
    batch = _largest(1, by_memory, lambda b: within(floor, b))
    chunk = _largest(floor, inst.chunk_tokens, lambda c: within(c, batch))
    # the pass is close to affine in the batch (each sequence adds its KV reads): a few
    # rows, interpolated between (``stretch``, ``steps``)
    grid = np.rint(np.linspace(0, batch, min(batch, TABLE_POINTS - 1) + 1))
    batches = np.unique(np.concatenate([[0.0, 1.0], grid]))
    mean_prefix = min(context_tokens, max(longest_prompt - chunk, 0.0))
    mixed = np.array(
        [mixed_pass_s(inst, chunk, int(b), context_tokens, mean_prefix) for b in batches]
    )
    decode = np.array([inst.decode_step_s(int(b), context_tokens) if b else 0.0 for b in batches])
    return HostPoint(chunk, batch, batches, mixed, decode, per_seq)


def at_chunk(inst: Instance, chunk_tokens: int) -> Instance:
    """``inst`` with its prefill passes at ``chunk_tokens`` new tokens per attention group
    (the ``prefill_chunk_tokens`` knob, per context-parallel rank)."""
    knobs = inst.cal.knobs.model_copy(
        update={"prefill_chunk_tokens": chunk_tokens // inst.layout.cp}
    )
    return replace(inst, cal=inst.cal.model_copy(update={"knobs": knobs}))


def _largest(lo: int, hi: int, ok: Callable[[int], bool]) -> int:
    """The largest n in [lo, hi] with ``ok(n)``, given ``ok(lo)`` and ``ok`` monotone."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


_Timed = TypeVar("_Timed", PrefillFigures, "PassOrder")


def stretched(figures: _Timed, stretch: float) -> _Timed:
    """Prefill figures or a pass order with every time ``stretch`` times longer: a host's
    passes, each carrying its hosted decode tokens (``HostPoint.stretch``)."""
    if stretch == 1.0:
        return figures
    if isinstance(figures, PrefillFigures):
        fill, whole = figures.fill, figures.whole
        return figures._replace(
            latency=figures.latency * stretch,
            service=figures.service * stretch,
            pass_s=figures.pass_s * stretch,
            fill=fill._replace(first=fill.first * stretch, rest=fill.rest * stretch)
            if fill is not None
            else None,
            whole=whole._replace(first=whole.first * stretch, rest=whole.rest * stretch)
            if whole is not None
            else None,
        )
    return figures._replace(x=figures.x * stretch, nxt=figures.nxt * stretch)
