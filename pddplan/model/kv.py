"""KV-cache arithmetic: bytes per token by attention kind, the fixed per-request state,
what a decode step reads, and attention FLOPs.

- GQA/MHA: ``2 x layers x kv_heads x head_dim x bytes`` per token (K and V).
- MLA: ``layers x (kv_lora_rank + qk_rope_head_dim) x bytes`` (one latent per token).
  With a DSA indexer (``index_topk``) each token also caches one indexer key per layer.
- Compressed (DeepSeek-V4 CSA/HCA): a layer with ratio r keeps one entry per r tokens
  (amortized ``entry / r`` per token; CSA layers add one indexer key per entry), and every
  compressed layer keeps a sliding window of ``sliding_window`` raw entries: the fixed
  per-request state.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, overload

import numpy as np

from pddplan import units
from pddplan.model.numeric import Array, Value
from pddplan.spec.llm import KvDtype, ModelSpec

FP8_SCALE_BYTES_PER_128 = 4
"""FP8 caches carry one fp32 scale per 128 elements (DeepGEMM / FlashMLA FP8 layouts)."""


@dataclass(frozen=True)
class KvModel:
    """The KV-cache and attention cost model of one model at one KV dtype."""

    model: ModelSpec
    dtype: KvDtype

    # --- sizes ----------------------------------------------------------------------------
    @cached_property
    def element_bytes(self) -> float:
        return units.DTYPE_BYTES[self.dtype]

    @cached_property
    def entry_bytes(self) -> float:
        """Bytes of one cached entry in one layer (MLA latent / compressed entry / K+V)."""
        m = self.model
        if m.kv_entry_bytes and self.dtype in m.kv_entry_bytes:
            return m.kv_entry_bytes[self.dtype]
        if m.attention in ("mla", "compressed") and m.mla is not None:
            return (m.mla.kv_lora_rank + m.mla.qk_rope_head_dim) * self.element_bytes
        if m.attention == "compressed":
            return m.head_dim * self.element_bytes
        return 2 * m.num_key_value_heads * m.head_dim * self.element_bytes

    @cached_property
    def index_key_bytes(self) -> float:
        """Bytes of one lightning-indexer key (0 without an indexer)."""
        m = self.model
        if m.index_head_dim is None:
            return 0.0
        raw = m.index_head_dim * self.element_bytes
        if self.dtype == "fp8":
            raw += FP8_SCALE_BYTES_PER_128 * math.ceil(m.index_head_dim / 128)
        return raw

    @cached_property
    def _layers(self) -> tuple[tuple[int, int], ...]:
        """(compression ratio, number of layers with it), in first-seen order."""
        m = self.model
        return tuple(Counter(m.compress_ratios or (1,) * m.num_hidden_layers).items())

    @cached_property
    def _csa_ratio(self) -> int | None:
        compressed = [r for r, _ in self._layers if r > 1]
        return min(compressed) if compressed else None

    def _indexed(self, ratio: int) -> bool:
        """Whether a layer selects top-k entries through the indexer.

        DSA (MLA + ``index_topk``) indexes every layer; in compressed attention only the
        lightly compressed (CSA) layers do: those with the smallest ratio above 1.
        """
        m = self.model
        if m.index_topk is None:
            return False
        if m.attention != "compressed":
            return True
        return ratio > 1 and ratio == self._csa_ratio

    def _windowed(self, ratio: int) -> bool:
        """Whether a layer keeps a sliding window of raw entries (compressed layers do)."""
        return self.model.attention == "compressed" and ratio != 1

    @cached_property
    def bytes_per_token(self) -> float:
        """Amortized resident KV bytes per context token."""
        m = self.model
        if m.kv_bytes_per_token_override and self.dtype in m.kv_bytes_per_token_override:
            return m.kv_bytes_per_token_override[self.dtype]
        total = 0.0
        for r, n in self._layers:
            if r == 0:  # window-only layer: nothing grows with context
                continue
            per_entry = self.entry_bytes + (self.index_key_bytes if self._indexed(r) else 0.0)
            total += n * per_entry / r
        return total

    @cached_property
    def fixed_bytes(self) -> float:
        """KV bytes per request that do not scale with context (sliding-window state)."""
        windowed = sum(n for r, n in self._layers if self._windowed(r))
        return windowed * (self.model.sliding_window or 0) * self.entry_bytes

    @overload
    def resident_bytes(self, context_tokens: float) -> float: ...
    @overload
    def resident_bytes(self, context_tokens: Array) -> Array: ...
    @overload
    def resident_bytes(self, context_tokens: Value) -> Value: ...
    def resident_bytes(self, context_tokens: Value) -> Value:
        """KV bytes one request holds at ``context_tokens`` of context."""
        return self.fixed_bytes + self.bytes_per_token * context_tokens

    @overload
    def transfer_bytes(self, context_tokens: float, dest_hit_rate: float = 0.0) -> float: ...
    @overload
    def transfer_bytes(self, context_tokens: Value, dest_hit_rate: Value = 0.0) -> Value: ...
    def transfer_bytes(self, context_tokens: Value, dest_hit_rate: Value = 0.0) -> Value:
        """Bytes shipped to a destination whose cache already holds ``dest_hit_rate`` of the
        context: the missing tokens' KV plus the fixed per-request state."""
        return self.fixed_bytes + self.bytes_per_token * context_tokens * (1.0 - dest_hit_rate)

    # --- what attention touches -------------------------------------------------------------
    @overload
    def decode_read_bytes(self, context_tokens: float) -> float: ...
    @overload
    def decode_read_bytes(self, context_tokens: Array) -> Array: ...
    def decode_read_bytes(self, context_tokens: Value) -> Value:
        """KV bytes one sequence's decode step reads at ``context_tokens`` of context.

        Dense attention reads every entry; top-k attention reads ``index_topk`` entries plus
        every indexer key; HCA layers read all their (few) compressed entries.
        """
        m, c = self.model, context_tokens
        if m.kv_bytes_per_token_override and self.dtype in m.kv_bytes_per_token_override:
            return self.resident_bytes(c)
        total = c * 0.0
        minimum = np.minimum if isinstance(c, np.ndarray) else min
        for kind in self._kinds:
            attended, candidates = self._attended(kind, c, minimum)
            total += kind[1] * (self.entry_bytes * attended + self.index_key_bytes * candidates)
        return total

    @cached_property
    def _kinds(self) -> tuple[tuple[int, int, bool, bool], ...]:
        """Per kind of layer: (compression ratio, layers of it, windowed, indexed)."""
        return tuple((r, n, self._windowed(r), self._indexed(r)) for r, n in self._layers)

    def _attended(
        self,
        kind: tuple[int, int, bool, bool],
        context_tokens: Value,
        minimum: Callable[[Any, float], Any],
    ) -> tuple[Value, Value]:
        """(entries attention reads, indexer keys scored) for one query in one layer of a
        kind (``_kinds``); ``minimum``: ``min`` for a number of tokens, ``np.minimum`` for
        an array (chosen once by the caller: this runs millions of times in a simulation)."""
        ratio, _, windowed, indexed = kind
        c = context_tokens
        zero = c * 0.0
        window = minimum(c, self.model.sliding_window or 0) if windowed else zero
        if ratio == 0:
            return window, zero
        entries = c / ratio
        if indexed:
            return window + minimum(entries, self.model.index_topk or 0), entries
        return window + entries, zero

    @cached_property
    def _flops_per_entry(self) -> dict[bool, tuple[float, float]]:
        """(FLOPs per attended entry, per indexer candidate), for prefill and for decode."""
        m = self.model
        out: dict[bool, tuple[float, float]] = {}
        for prefill in (True, False):
            mla = m.mla
            if mla is not None:
                if prefill:
                    d = (mla.qk_nope_head_dim + mla.qk_rope_head_dim) + mla.v_head_dim
                else:
                    d = (mla.kv_lora_rank + mla.qk_rope_head_dim) + mla.kv_lora_rank
            else:
                d = 2 * m.head_dim
            per_entry = 2 * m.num_attention_heads * d
            per_index = 2 * (m.index_n_heads or 0) * (m.index_head_dim or 0)
            out[prefill] = (per_entry, per_index)
        return out

    @overload
    def attention_flops(self, context_tokens: float, *, prefill: bool) -> float: ...
    @overload
    def attention_flops(self, context_tokens: Array, *, prefill: bool) -> Array: ...
    @overload
    def attention_flops(self, context_tokens: Value, *, prefill: bool) -> Value: ...
    def attention_flops(self, context_tokens: Value, *, prefill: bool) -> Value:
        """Attention FLOPs for one query token at ``context_tokens`` of context, all layers.

        Per attended entry and head: ``2 x (d_qk + d_v)`` FLOPs (QK^T and PV). MLA runs
        non-absorbed in prefill (d_qk = nope + rope, d_v = v_head_dim) and absorbed in decode
        (d_qk = kv_lora + rope, d_v = kv_lora); the indexer adds ``2 x index_heads x
        index_head_dim`` per candidate.
        """
        per_entry, per_index = self._flops_per_entry[prefill]
        total = context_tokens * 0.0
        minimum = np.minimum if isinstance(context_tokens, np.ndarray) else min
        for kind in self._kinds:
            attended, candidates = self._attended(kind, context_tokens, minimum)
            total += kind[1] * (per_entry * attended + per_index * candidates)
        return total

    @property
    def splittable_heads(self) -> int:
        """KV heads that tensor parallelism can split across GPUs (1 for MLA/compressed:
        one latent per token cannot be split by head)."""
        m = self.model
        return 1 if m.attention in ("mla", "compressed") else m.num_key_value_heads


def session_working_set_bytes(
    rate_rps: float, turn_interval_s: float, context_bytes: float
) -> float:
    """Bytes a decode-side cache needs to keep every open session's context: ``rate x
    turn_interval`` sessions are open (Little's law: each comes back once per interval),
    each with a context of ``context_bytes`` (the mean KV of a request's whole input).

    A session's next turn hits only if its context is still cached; under LRU, with sessions
    returning at random, a cache of ``C`` bytes keeps about ``C / working set`` of them
    (Che's approximation with exponential return times), so a cache that holds the working
    set is what makes the scenario's MD hit rates hold."""
    return rate_rps * turn_interval_s * context_bytes
