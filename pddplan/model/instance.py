"""Per-instance analytic performance: parallel layout, prefill passes, decode steps, the
largest batch, and KV transfer sizes.

An *instance* is ``g`` GPUs of one chip that together hold the weights. Every time is a
roofline over the work that runs side by side, plus what cannot overlap:

    max(compute, memory, hidden x collectives) + (1 - hidden) x collectives + latency + overhead

- compute = FLOPs on the busiest GPU / (peak x mfu)
- memory  = bytes the busiest GPU reads / (HBM bandwidth x efficiency)
- collectives = ring all-reduce / all-to-all volume / (link x efficiency), on the scale-up
  link when the group fits one scale-up domain, otherwise on the (slower) NIC; latency is the
  collectives' per-message latency.
- hidden: under two-batch overlap (the default for expert-parallel layouts: SGLang's TBO,
  DeepSeek's dual micro-batch) the share of collective volume one micro-batch's compute
  hides of the other's (``prefill_comm_hidden``, ``decode_comm_hidden``); 0 without it. The
  overlap has two costs: compute runs slower (prefill: on the SMs the all-to-all leaves;
  decode: GEMMs at half the batch; ``prefill_overlap_slowdown``, ``decode_overlap_slowdown``),
  and each micro-batch reads the weights it needs.

All quantities are SI (bytes, seconds, FLOP/s).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, cast

import numpy as np
import numpy.typing as npt

from pddplan import units
from pddplan.errors import WeightsDoNotFitError
from pddplan.model.kv import KvModel
from pddplan.model.numeric import Array, Num, Value, greater, lesser
from pddplan.model.params import ParamBreakdown, param_breakdown, weight_dtypes
from pddplan.spec.calibration import Calibration
from pddplan.spec.hardware import ChipSpec
from pddplan.spec.llm import Dtype, KvDtype, ModelSpec, MoeShape

ACTIVATION_BYTES = units.DTYPE_BYTES["bf16"]
"""Activations exchanged by collectives are BF16."""
DISPATCH_BYTES_LOW_PRECISION = units.DTYPE_BYTES["fp8"]
"""FP8/FP4 models dispatch tokens to experts in FP8 and combine in BF16 (DeepSeek-V3
technical report, arXiv 2412.19437, section 3.3; DeepEP)."""
MAX_BATCH_SEARCH = 1 << 20
"""Upper end of the batch-size search (sequences per instance)."""


@dataclass(frozen=True, slots=True)
class Layout:
    """How an instance's ``gpus`` split the model.

    Dense models use tensor parallelism over all GPUs. MoE models spread routed experts over
    all GPUs (expert parallelism, ``ep``) and keep the dense parts tensor-parallel inside one
    scale-up domain; MLA / compressed-attention models run attention data-parallel
    (``attn_tp`` = 1, attention weights replicated) because one latent per token cannot be
    split by head.
    """

    gpus: int
    attn_tp: int
    dense_tp: int
    ep: int
    cp: int = 1
    """Context parallelism: attention ranks one prompt's attention is split across (its
    tokens' queries spread over them, the context's KV passed around a ring each layer); 1:
    a prompt's attention stays on one attention group."""

    @property
    def attn_width(self) -> int:
        """GPUs one prompt's attention runs on: ``attn_tp x cp``."""
        return self.attn_tp * self.cp

    @property
    def label(self) -> str:
        if self.ep == 1:
            return f"TP{self.dense_tp}"
        groups = self.gpus // self.attn_tp  # attention data-parallel groups
        if self.cp > 1:
            attn = f"CP{self.cp}" if self.attn_tp == 1 else f"CP{self.cp}xTP{self.attn_tp}"
        elif self.attn_tp == 1:
            attn = f"DP{groups}"
        else:
            attn = f"TP{self.attn_tp}" if groups == 1 else f"DP{groups}xTP{self.attn_tp}"
        return f"{attn}+EP{self.ep}"


def layout_for(
    model: ModelSpec,
    chip: ChipSpec,
    gpus: int,
    *,
    context_parallel: bool = False,
    attention_tp: int | None = None,
) -> Layout:
    """The parallel layout of ``gpus`` GPUs of ``chip`` for ``model`` (see ``Layout``); with
    ``context_parallel``, every attention group works on each prompt together (``cp`` = the
    instance's attention groups); ``attention_tp`` sets an MoE model's attention
    tensor-parallel width instead (a measured run's ``--tp`` without data-parallel
    attention: an MLA latent then replicated on each rank). ``ValueError`` for a layout
    that has one attention group (nothing to split a prompt across), or an
    ``attention_tp`` that does not divide ``gpus``."""
    if gpus < 1:
        raise ValueError(f"gpus must be >= 1, got {gpus}")
    if attention_tp is not None and (attention_tp < 1 or gpus % attention_tp):
        raise ValueError(f"attention_tp {attention_tp} does not divide {gpus} GPUs")
    if not model.is_moe:
        lay = Layout(gpus=gpus, attn_tp=gpus, dense_tp=gpus, ep=1)
    else:
        inside = min(gpus, chip.scaleup_domain_gpus)
        if attention_tp is not None:
            attn_tp = attention_tp
        elif model.attention in ("mla", "compressed"):
            attn_tp = 1
        else:  # no wider than the KV heads (wider only replicates KV); a power of two
            attn_tp = 1 << (min(inside, model.num_key_value_heads).bit_length() - 1)
        lay = Layout(gpus=gpus, attn_tp=attn_tp, dense_tp=max(inside, attn_tp), ep=gpus)
    if not context_parallel:
        return lay
    groups = lay.gpus // lay.attn_tp
    if groups < 2:
        raise ValueError(f"{lay.label} has one attention group: no context parallelism")
    return Layout(lay.gpus, lay.attn_tp, lay.dense_tp, lay.ep, cp=groups)


def context_parallel_possible(model: ModelSpec, chip: ChipSpec, gpus: int) -> bool:
    """Whether ``gpus`` x ``chip`` has two or more attention groups to split a prompt over."""
    lay = layout_for(model, chip, gpus)
    return lay.gpus // lay.attn_tp >= 2


@dataclass(frozen=True, slots=True)
class Instance:
    """A model on ``layout.gpus`` GPUs of one chip, with its calibration. Build with
    ``make_instance``, which refuses sizes that cannot hold the weights."""

    model: ModelSpec
    chip: ChipSpec
    layout: Layout
    cal: Calibration
    kv: KvModel
    weight_dtype: Dtype
    """Dtype of the non-expert weights."""
    expert_weight_dtype: Dtype
    params: ParamBreakdown
    # constants of the cost functions, computed once (they run millions of times in a
    # simulation): dense peak FLOP/s, HBM and host-link bytes/s, KV copies
    _peak: float = field(init=False, repr=False, compare=False)
    _hbm_rate: float = field(init=False, repr=False, compare=False)
    _host_rate: float = field(init=False, repr=False, compare=False)
    _kv_copies: float = field(init=False, repr=False, compare=False)
    _moe: MoeShape = field(init=False, repr=False, compare=False)
    _fixed_s: float = field(init=False, repr=False, compare=False)
    """What every pass and step pays whatever it carries: ``step_overhead_ms`` plus
    ``layer_overhead_us`` per layer."""
    _score_scale: float = field(init=False, repr=False, compare=False)
    """Attention-score FLOPs over weight FLOPs at the same time: the weights' peak over the
    BF16 peak under ``attention_bf16`` (FP8 weights), else 1."""
    _micro: int = field(init=False, repr=False, compare=False)
    """Micro-batches a prefill pass runs as: 2 under two-batch overlap, else 1."""
    _hidden_prefill: float = field(init=False, repr=False, compare=False)
    _prefill_slowdown: float = field(init=False, repr=False, compare=False)
    """Prefill compute time under two-batch overlap over its time without it (1 without)."""
    _decode_modes: tuple[_Overlap, ...] = field(init=False, repr=False, compare=False)
    """The ways a decode step may run; a step takes the fastest (``overlap: auto`` on an
    expert-parallel layout: with and without two-batch overlap, as an engine enables it
    only above a batch size)."""
    """The experts' shape; for a dense model, experts of size 0 (no instance routes to
    them: its layout has no expert parallelism)."""
    _by_batch: dict[tuple[int, int], tuple[tuple[float, float, float, float], ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """``decode_step_s``'s terms that depend on a whole-number batch (and the tokens per
    sequence a step runs) alone, per decode mode
    (weights read, the hidden and the serial collective time, the compute slowdown): a
    simulation asks for the same batches at many contexts."""

    def __post_init__(self) -> None:
        dtype: Literal["bf16", "fp8"] = "bf16" if self.weight_dtype == "bf16" else "fp8"
        lay = self.layout
        knobs = self.cal.knobs
        alone = _Overlap(1, 0.0, 1.0)
        prefill_tbo = _Overlap(2, knobs.prefill_comm_hidden, knobs.prefill_overlap_slowdown)
        decode_tbo = _Overlap(2, knobs.decode_comm_hidden, knobs.decode_overlap_slowdown)
        auto = knobs.overlap == "auto" and lay.ep > 1
        decode_modes: tuple[_Overlap, ...]
        if knobs.overlap == "two-batch":
            prefill, decode_modes = prefill_tbo, (decode_tbo,)
        elif auto:
            prefill, decode_modes = prefill_tbo, (alone, decode_tbo)
        else:
            prefill, decode_modes = alone, (alone,)
        constants = {
            "_micro": prefill.micro_batches,
            "_hidden_prefill": prefill.hidden,
            "_prefill_slowdown": prefill.slowdown,
            "_decode_modes": decode_modes,
            "_peak": self.chip.peak_flops(dtype),
            "_hbm_rate": self.chip.hbm_bytes_per_s * self.cal.efficiency.decode_hbm_efficiency,
            "_host_rate": self.chip.host_link_bytes_per_s,
            "_kv_copies": lay.attn_tp / min(lay.attn_tp, self.kv.splittable_heads),
            "_moe": self.model.moe or MoeShape(1, 1, 0),
            "_fixed_s": self.cal.efficiency.step_overhead_ms * units.MS
            + self.model.num_hidden_layers * knobs.layer_overhead_us * units.US,
            "_score_scale": (
                self.chip.peak_flops(dtype) / self.chip.peak_flops("bf16")
                if knobs.attention_bf16
                else 1.0
            ),
        }
        for name, value in constants.items():
            object.__setattr__(self, name, value)
        if auto:  # prefill overlaps where a full pass is faster for it (nearly always)
            full = [[(float(self.chunk_tokens), 0.0, 0.0)]] * self.attention_groups
            with_it = self.batched_pass_s(full)
            for name, value in zip(
                ("_micro", "_hidden_prefill", "_prefill_slowdown"), alone, strict=True
            ):
                object.__setattr__(self, name, value)
            if self.batched_pass_s(full) > with_it:
                for name, value in zip(
                    ("_micro", "_hidden_prefill", "_prefill_slowdown"), prefill_tbo, strict=True
                ):
                    object.__setattr__(self, name, value)

    # --- memory -----------------------------------------------------------------------------
    def _bytes(self, params: float, *, expert: bool = False) -> float:
        dtype = self.expert_weight_dtype if expert else self.weight_dtype
        return params * units.DTYPE_BYTES[dtype]

    @property
    def weight_bytes_per_gpu(self) -> float:
        """Weights one GPU stores (the largest share, where parts are replicated)."""
        p, lay = self.params, self.layout
        return (
            self._bytes(p.attention) / lay.attn_tp
            + self._bytes(p.dense_mlp) / lay.dense_tp
            + self._bytes(p.embeddings + p.read_other + p.stored_other) / lay.gpus
            + self._bytes(p.routed_experts, expert=True) / lay.ep
        )

    @property
    def usable_hbm_per_gpu(self) -> float:
        return self.chip.hbm_bytes * self.cal.knobs.hbm_usable_fraction

    @property
    def kv_replication(self) -> float:
        """Copies of each KV entry: tensor parallelism wider than the KV heads replicates."""
        return self._kv_copies

    def kv_capacity_bytes(self, reserved_bytes: float = 0.0) -> float:
        """Instance-wide HBM left for (unreplicated) KV after weights and a reservation."""
        free = self.layout.gpus * (self.usable_hbm_per_gpu - self.weight_bytes_per_gpu)
        return max(0.0, free - reserved_bytes) / self.kv_replication

    # --- the roofline pieces ----------------------------------------------------------------
    def _link(self, group: int) -> tuple[float, float]:
        """(bytes/s, latency s) of the slowest link a group of ``group`` GPUs spans."""
        eff = self.cal.efficiency
        if group <= self.chip.scaleup_domain_gpus:
            bw, lat = self.chip.scaleup_bytes_per_s, eff.scaleup_latency_us * units.US
        else:
            bw, lat = self.chip.nic_bytes_per_s, eff.scaleout_latency_us * units.US
        return bw * eff.collective_efficiency, lat

    def _experts_touched_per_gpu(self, tokens: Value) -> Value:
        """Routed experts the busiest GPU reads per MoE layer when ``tokens`` tokens route.

        Expected distinct experts hit by ``tokens`` tokens with top-k of E is
        ``E x (1 - (1 - k/E)^tokens)``; the busiest of ``ep`` GPUs sees ``ep_imbalance``
        times its even share, capped at the experts it hosts.
        """
        e, k, _ = self._moe
        hosted = e / self.layout.ep
        share = hosted * (1.0 - (1.0 - k / e) ** tokens)
        return lesser(hosted, share * self.cal.knobs.ep_imbalance)

    def _weights_read_per_gpu(self, tokens: Value) -> Value:
        p, lay, m = self.params, self.layout, self.model
        read: Value = (
            self._bytes(p.attention) / lay.attn_tp
            + self._bytes(p.dense_mlp) / lay.dense_tp
            + self._bytes(m.vocab_size * m.hidden_size + p.read_other) / lay.gpus  # LM head;
        )  # the input embedding is a row gather, negligible next to the matrices
        if m.is_moe:
            expert = 3 * m.hidden_size * self._moe.moe_intermediate_size
            touched = self._experts_touched_per_gpu(tokens)
            read += m.moe_layers * touched * self._bytes(expert, expert=True)
        return read

    def _compute_s(self, tokens: Value, attn_flops: Value, mfu: float, *, groups: Value) -> Value:
        """Seconds of math on the busiest GPU for ``tokens`` tokens plus ``attn_flops`` of
        attention scores. Layers run one after another: attention (projections and scores),
        the dense MLPs, then the routed experts. With many requests every part spreads over
        all GPUs; a request ``alone`` keeps its attention on one attention group
        (``attn_tp`` GPUs: one rank under data-parallel attention) and its dense MLPs on one
        tensor-parallel group, while its experts still spread over all GPUs. ``groups`` says
        how many attention groups a request's attention is charged over (1: alone; the
        instance's ``attention_groups``: spread over every GPU); its dense MLPs spread over
        as many GPUs, and at least one tensor-parallel group."""
        p, lay, m = self.params, self.layout, self.model
        active = m.active_params_b * 1e9
        attention = 2 * tokens * p.attention + attn_flops * self._score_scale
        dense = 2 * tokens * max(0.0, active - p.routed_active - p.attention)
        experts = 2 * tokens * p.routed_active * self.cal.knobs.ep_imbalance
        attn_gpus = lay.attn_width * groups
        dense_gpus = lesser(greater(attn_gpus, lay.dense_tp), lay.gpus)
        per_gpu = attention / attn_gpus + dense / dense_gpus + experts / lay.gpus
        pad = self.cal.knobs.expert_pad_tokens
        if pad and m.is_moe:  # each touched expert's GEMM computes ``pad`` rows more
            expert = 3 * m.hidden_size * self._moe.moe_intermediate_size
            per_gpu = per_gpu + 2 * m.moe_layers * expert * pad * self._experts_touched_per_gpu(
                tokens
            )
        return per_gpu / (self._peak * mfu)

    def _collectives_s(self, tokens: Value) -> tuple[Value, float]:
        """(volume seconds, latency seconds) of collectives in one pass over ``tokens``."""
        m, lay = self.model, self.layout
        volume: Value = 0.0
        latency = 0.0
        if lay.attn_tp > 1:  # one all-reduce after attention per layer
            v, lat = self._allreduce_s(tokens, lay.attn_tp)
            volume, latency = volume + m.num_hidden_layers * v, latency + m.num_hidden_layers * lat
        dense_layers = m.first_k_dense_replace if m.is_moe else m.num_hidden_layers
        if lay.dense_tp > 1 and dense_layers:  # one all-reduce after each dense MLP
            v, lat = self._allreduce_s(tokens, lay.dense_tp)
            volume, latency = volume + dense_layers * v, latency + dense_layers * lat
        if lay.ep > 1:  # dispatch + combine per MoE layer
            v, lat = self._all_to_all_s(tokens)
            volume, latency = volume + m.moe_layers * v, latency + m.moe_layers * 2 * lat
        return volume, latency

    def _all_to_all_s(self, tokens: Value) -> tuple[Value, float]:
        """(volume seconds, latency of one collective) of one MoE layer's dispatch + combine.

        Each token goes to ``k`` experts: dispatch in the weights' dtype (FP8 for FP8 models,
        as DeepSeek-V3 does), combine in BF16. Inside one scale-up domain every remote expert
        costs a copy. Across nodes the NIC carries one copy per remote *node* holding any of
        the token's experts, forwarded inside the node over the scale-up link (DeepEP's
        hierarchical kernels); the two links work in parallel, so the slower one sets the time.
        """
        m, lay, chip = self.model, self.layout, self.chip
        k, ep, h = self._moe.num_experts_per_tok, lay.ep, m.hidden_size
        low = self.weight_dtype in ("fp8", "fp4")
        per_copy = h * (
            (DISPATCH_BYTES_LOW_PRECISION if low else ACTIVATION_BYTES) + ACTIVATION_BYTES
        )
        tokens_per_gpu = tokens / lay.gpus * self.cal.knobs.ep_imbalance
        eff = self.cal.efficiency.collective_efficiency
        scaleup_bw = chip.scaleup_bytes_per_s * eff
        inside = min(ep, chip.scaleup_domain_gpus)
        local_copies = k * (inside - 1) / ep
        if ep <= chip.scaleup_domain_gpus:
            lat = self.cal.efficiency.scaleup_latency_us * units.US
            return tokens_per_gpu * local_copies * per_copy / scaleup_bw, lat
        nodes = ep / chip.scaleup_domain_gpus
        remote_nodes = (nodes - 1) * (1 - (1 - 1 / nodes) ** k)
        nic_s = tokens_per_gpu * remote_nodes * per_copy / (chip.nic_bytes_per_s * eff)
        forward_s = tokens_per_gpu * k * per_copy / scaleup_bw
        return greater(nic_s, forward_s), self.cal.efficiency.scaleout_latency_us * units.US

    def _allreduce_s(self, tokens: Value, group: int) -> tuple[Value, float]:
        """Ring all-reduce of the activations of ``tokens`` tokens in a TP group."""
        bw, lat = self._link(group)
        tokens_per_group = tokens * group / self.layout.gpus
        msg = tokens_per_group * self.model.hidden_size * ACTIVATION_BYTES
        return 2 * (group - 1) / group * msg / bw, lat

    def _ring_s(self, context_kv: Value) -> Value:
        """Context parallelism's pass-KV ring: each rank receives the other ranks' share of
        the context's KV (``context_kv`` bytes, every layer together) once per pass, over
        the link the ranks span. 0 without context parallelism."""
        cp = self.layout.cp
        if cp == 1:
            return 0.0
        bw, _ = self._link(self.layout.attn_width)
        return context_kv * (cp - 1) / cp / bw

    # --- decode -----------------------------------------------------------------------------
    def decode_step_s(self, batch: float, context_tokens: float) -> float:
        """Seconds of one decode step for ``batch`` sequences at ``context_tokens`` each;
        with speculative decoding (``mtp_draft_tokens`` = k > 0), per token a sequence
        gains: the step verifies ``1 + k`` tokens per sequence (weights, collectives and
        math at ``batch (1 + k)`` tokens, attention ``1 + k`` queries over each context,
        whose KV is read once), the draft module runs one layer's share of a one-token
        step per draft token, and a step yields ``mtp_acceptance_length`` tokens per
        sequence: ``(step(1 + k) + k x step(1) / layers) / acceptance_length``."""
        knobs = self.cal.knobs
        k = knobs.mtp_draft_tokens
        step = self._verify_step_s(batch, context_tokens, 1 + k)
        if k:
            one = self._verify_step_s(batch, context_tokens, 1)
            step = (step + k * one / self.model.num_hidden_layers) / knobs.mtp_acceptance_length
        return step * knobs.decode_time_factor

    def _verify_step_s(self, batch: float, context_tokens: float, per_seq: int) -> float:
        """Seconds of a decode step that runs ``per_seq`` tokens of each of ``batch``
        sequences at ``context_tokens`` each (1: a plain step)."""
        eff, lay = self.cal.efficiency, self.layout
        tokens = batch * per_seq
        key = (batch, per_seq) if isinstance(batch, int) else None
        terms = self._by_batch.get(key) if key is not None else None
        if terms is None:
            volume, latency = (cast(float, x) for x in self._collectives_s(tokens))
            terms = tuple(
                (
                    mode.micro_batches  # each micro-batch reads the weights its tokens need
                    * cast(float, self._weights_read_per_gpu(tokens / mode.micro_batches)),
                    mode.hidden * volume,
                    (1 - mode.hidden) * volume + latency,
                    mode.slowdown,
                )
                for mode in self._decode_modes
            )
            if key is not None:
                self._by_batch[key] = terms
        kv_read = batch * self.kv.decode_read_bytes(context_tokens) * self._kv_copies / lay.gpus
        attn = tokens * self.kv.attention_flops(context_tokens, prefill=False)
        compute = cast(
            float, self._compute_s(tokens, attn, eff.decode_mfu, groups=self.attention_groups)
        )  # scalars in, a scalar out
        step = min(
            max((weights + kv_read) / self._hbm_rate, compute * slowdown, hidden) + serial
            for weights, hidden, serial, slowdown in terms
        )
        return step + self._fixed_s

    def max_batch(
        self, context_tokens: float, *, tpot_s: float | None = None, reserved_bytes: float = 0.0
    ) -> int:
        """Largest batch whose KV fits HBM (after weights and ``reserved_bytes``) and, when
        ``tpot_s`` is given, whose decode step takes at most ``tpot_s``. 0 if none."""
        per_seq = self.kv.resident_bytes(context_tokens)
        by_memory = int(min(self.kv_capacity_bytes(reserved_bytes) // per_seq, MAX_BATCH_SEARCH))
        if tpot_s is None or by_memory == 0:
            return by_memory
        if self.decode_step_s(1, context_tokens) > tpot_s:
            return 0
        lo, hi = 1, by_memory  # step time is non-decreasing in batch: bisect
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.decode_step_s(mid, context_tokens) <= tpot_s:
                lo = mid
            else:
                hi = mid - 1
        return lo

    # --- prefill ----------------------------------------------------------------------------
    def _pass_cost(
        self,
        new_tokens: Value,
        prefix_tokens: Value,
        share: Value,
        host_tokens: Value = 0.0,
        *,
        groups: Value,
    ) -> _Cost:
        """The cost of ``new_tokens`` tokens on top of ``prefix_tokens`` earlier ones.

        Attention reads the KV of the whole context up to the chunk's end (the prefix's, and
        the chunk's own, written then read). ``share`` is the fraction of one pass's fixed
        costs (weight read, collective latency, overhead) the chunk carries; 1 means the
        chunk runs alone. ``groups`` is the number of attention groups (data-parallel
        attention ranks) the chunk's attention and KV reads are charged over: 1 alone, all
        of them when every group is busy with requests like it. ``host_tokens`` cached
        tokens are first loaded from host memory (``prefix_cache: host``).
        """
        eff = self.cal.efficiency
        gpus = self.layout.attn_width * groups  # who reads this request's KV
        ctx_mean = prefix_tokens + new_tokens / 2
        attn = new_tokens * self.kv.attention_flops(ctx_mean, prefill=True)
        context_kv = self.kv.resident_bytes(prefix_tokens + new_tokens) * self._kv_copies
        kv_read = context_kv / gpus
        host: Value = self.kv.resident_bytes(host_tokens) * self._kv_copies / gpus
        if isinstance(host_tokens, np.ndarray):
            host = np.where(host_tokens > 0, host, 0.0)
        elif not host_tokens:
            host = 0.0
        volume, latency = self._collectives_s(new_tokens)
        volume = volume + self._ring_s(context_kv)
        m, hidden = self._micro, self._hidden_prefill
        compute = self._compute_s(new_tokens, attn, eff.prefill_mfu, groups=groups)
        return _Cost(
            compute_s=compute * self._prefill_slowdown,
            hbm_bytes=kv_read + share * m * self._weights_read_per_gpu(new_tokens / (share * m)),
            host_bytes=host,
            comm_s=hidden * volume,
            serial_s=(1 - hidden) * volume + share * (latency + self._fixed_s),
        )

    def _seconds(self, cost: _Cost) -> Value:
        host = cost.host_bytes / self._host_rate
        side_by_side = greater(greater(cost.compute_s, cost.hbm_bytes / self._hbm_rate), host)
        return (greater(side_by_side, cost.comm_s) + cost.serial_s) * (
            self.cal.knobs.prefill_time_factor
        )

    def prefill_pass_s(self, new_tokens: Num, prefix_tokens: Num) -> Num:
        """Seconds of one forward pass over ``new_tokens`` tokens on top of a cached prefix of
        ``prefix_tokens``. Weights are read once per pass; so is the context's KV. Takes
        numbers or equal-shape arrays (elementwise)."""
        cost = self._pass_cost(new_tokens, prefix_tokens, 1.0, groups=1.0)
        return cast(Num, self._seconds(cost))  # in kind: arrays if the tokens are

    def batched_pass_s(
        self,
        ranks: list[list[tuple[float, float, float]]],
        memo: dict[float, tuple[Value, float, Value]] | None = None,
    ) -> float:
        """Seconds of one pass that carries chunks on several attention groups (ranks of
        data-parallel attention): per busy rank, its chunks as (new tokens, tokens before
        it, tokens first loaded from host memory). The pass reads the weights once and
        pays one collective latency and overhead; the experts spread over every GPU and
        the dense MLPs over the busy ranks' GPUs (at least a tensor-parallel group);
        attention runs on each rank by itself, so the busiest rank's attention math and KV
        reads set the pass's. One chunk on one rank is ``prefill_pass_s``. The simulator
        prices its prefill passes with this; it passes a ``memo`` (one per instance) that
        keeps the terms that depend on the pass's total tokens alone (collectives, weight
        reads): full passes repeat the same totals, and those terms are most of the cost."""
        eff, lay, kv, repl = self.cal.efficiency, self.layout, self.kv, self._kv_copies
        width = lay.attn_width
        per_token = 2 * self.params.attention
        total = attn_sum = host_bytes = 0.0
        load_max = load_sum = read_max = 0.0
        for rank in ranks:
            load = read = 0.0
            for new, prefix, host in rank:
                scores = new * kv.attention_flops(prefix + new / 2, prefill=True)
                attn_sum += scores
                load += per_token * new + scores * self._score_scale
                read += kv.resident_bytes(prefix + new) * repl
                if host:
                    host_bytes += kv.resident_bytes(host) * repl
                total += new
            load_max, load_sum, read_max = max(load_max, load), load_sum + load, max(read_max, read)
        busy = len(ranks)
        even = cast(float, self._compute_s(total, attn_sum, eff.prefill_mfu, groups=busy))
        busiest = (load_max - load_sum / busy) / width / (self._peak * eff.prefill_mfu)
        terms = memo.get(total) if memo is not None else None
        if terms is None:
            m = self._micro  # each micro-batch reads the weights its tokens need
            terms = (*self._collectives_s(total), m * self._weights_read_per_gpu(total / m))
            if memo is not None:
                memo[total] = terms
        volume, latency, weights = (cast(float, x) for x in terms)  # scalar tokens: scalars
        volume += cast(float, self._ring_s(read_max))  # one rank's context under CP
        # ``_seconds`` of the pass's cost, spelled out (scalars: no _Cost to build)
        compute_s = (even + busiest) * self._prefill_slowdown
        hbm_s = (read_max / width + weights) / self._hbm_rate
        host_s = host_bytes / (width * busy) / self._host_rate
        hidden = self._hidden_prefill * volume
        return (
            max(compute_s, hbm_s, host_s, hidden) + (volume - hidden + latency + self._fixed_s)
        ) * self.cal.knobs.prefill_time_factor

    @property
    def attention_groups(self) -> int:
        """Attention groups (data-parallel attention ranks) of the instance: those that take
        prompts of their own (one under context parallelism: every rank works on each)."""
        return self.layout.gpus // self.layout.attn_width

    @property
    def chunk_tokens(self) -> int:
        """New tokens one attention group takes in a pass: ``prefill_chunk_tokens`` per rank,
        so under context parallelism a prompt's chunk spans every rank's budget."""
        return self.cal.knobs.prefill_chunk_tokens * self.layout.cp

    def prefill_chunks(self, input_tokens: float, hit_rate: float) -> list[tuple[float, float]]:
        """The (new tokens, tokens before it) of each pass that prefills one request.

        Chunks of ``prefill_chunk_tokens`` are cut back from the end of the input, so the
        partial chunk comes first: the same number of passes as cutting from the front, and
        a higher hit rate only ever shrinks or removes the first chunk.
        """
        # a full hit still computes the last token: its logits give the first output token
        hit = min(math.floor(input_tokens * hit_rate), math.ceil(input_tokens) - 1)
        chunk = self.chunk_tokens
        out, end = [], float(input_tokens)
        while end > hit:
            start = max(float(hit), end - chunk)
            out.append((end - start, start))
            end = start
        return out[::-1]

    def _request_costs(
        self, input_tokens: float, hit_rate: float, *, full_passes: bool
    ) -> list[_Cost]:
        chunk = self.chunk_tokens
        host_hit = (
            math.floor(input_tokens * hit_rate) if self.cal.knobs.prefix_cache == "host" else 0
        )
        costs = []
        per_pass = chunk * self.attention_groups  # a full pass: a chunk on every rank
        for i, (t, p) in enumerate(self.prefill_chunks(input_tokens, hit_rate)):
            share = t / per_pass if full_passes else 1.0
            spread = self.attention_groups if full_passes else 1.0
            costs.append(self._pass_cost(t, p, share, host_hit if i == 0 else 0.0, groups=spread))
        return costs

    def prefill_latency_s(self, input_tokens: float, hit_rate: float) -> float:
        """Seconds to prefill one request alone (its own passes, nothing batched with it)."""
        costs = self._request_costs(input_tokens, hit_rate, full_passes=False)
        return sum(cast(float, self._seconds(c)) for c in costs)  # scalar chunks

    def prefill_figures(self, input_tokens: Array, hit_rates: Array) -> PrefillFigures:
        """Per request: ``prefill_latency_s`` and ``prefill_service_s``, every pass of every
        request costed at once, and each pass alone (the planner and the evaluator both
        use this)."""
        chunk = self.chunk_tokens
        host = self.cal.knobs.prefix_cache == "host"
        new: list[float] = []
        before: list[float] = []
        owner: list[int] = []
        cached: list[float] = []
        for k, (length, hit) in enumerate(zip(input_tokens, hit_rates, strict=True)):
            host_hit = math.floor(length * hit) if host else 0
            for i, (chunk_new, chunk_before) in enumerate(
                self.prefill_chunks(float(length), float(hit))
            ):
                new.append(chunk_new)
                before.append(chunk_before)
                owner.append(k)
                cached.append(host_hit if i == 0 else 0.0)
        t, p = np.array(new, dtype=float), np.array(before, dtype=float)
        h = np.array(cached, dtype=float)
        n = len(input_tokens)
        owner_ = np.asarray(owner, dtype=int)  # converted once: per_request runs ~20 x 30 times

        def per_request(x: Value) -> Array:
            weights = np.broadcast_to(x, t.shape)
            return np.bincount(owner_, weights=weights, minlength=n).astype(float)

        alone = self._seconds(self._pass_cost(t, p, 1.0, h, groups=1.0))
        latency = per_request(alone)
        per_pass = chunk * self.attention_groups  # a full pass: a chunk on every rank
        full = self._pass_cost(t, p, t / per_pass, h, groups=self.attention_groups)
        service = self._seconds(
            _Cost(
                per_request(full.compute_s),
                per_request(full.hbm_bytes),
                per_request(full.host_bytes),
                per_request(full.comm_s),
                per_request(full.serial_s),
            )
        )
        new_tokens = per_request(t)
        room = np.bincount(owner_, minlength=n) * float(chunk) - new_tokens
        # the same passes when they carry only ``x`` tokens of company on each chunk's
        # attention group (``PassFill``): the first chunk apart from the rest
        first = np.zeros(len(owner), dtype=bool)
        first[np.unique(owner_, return_index=True)[1]] = True
        groups = self.attention_groups

        def fill_table(
            width: float, share: Callable[[Array], Value], spread: Callable[[Array], Value]
        ) -> tuple[Array, Array, Array]:
            """``PassFill``'s grid, first and rest: a class's chunks' seconds when ``x`` tokens
            of company share their passes, ``x`` on a grid from 0 to ``width``; a chunk of
            ``t`` then carries ``share(t + x)`` of its pass's fixed costs, its attention
            spread over ``spread(t + x)`` groups."""
            grid = np.concatenate([[0.0], np.geomspace(1.0, width, FILL_GRID_POINTS)])
            parts: list[list[Array]] = [[], []]
            for x in grid:
                cost = self._pass_cost(t, p, share(t + x), h, groups=spread(t + x))
                for part, keep in zip(parts, (first, ~first), strict=True):
                    part.append(
                        np.asarray(
                            self._seconds(
                                _Cost(*(per_request(np.where(keep, c, 0.0)) for c in cost.parts()))
                            )
                        )
                    )
            return grid, np.stack(parts[0], axis=1), np.stack(parts[1], axis=1)

        # per attention group, every group as busy: company on the chunk's own group
        fill = PassFill(
            *fill_table(
                float(chunk), lambda tx: t / (groups * np.minimum(chunk, tx)), lambda _: groups
            ),
            float(chunk),
            groups,
        )
        # per instance: company anywhere on it, keeping as many groups busy as it fills
        width = groups * float(chunk)
        whole = (
            PassFill(
                *fill_table(
                    width,
                    lambda tx: t / np.minimum(width, tx),
                    lambda tx: np.clip(tx / chunk, 1.0, groups),
                ),
                width,
                1,
            )
            if groups > 1
            else None
        )
        return PrefillFigures(
            latency, np.asarray(service), np.asarray(alone), owner_, new_tokens, room, fill, whole
        )

    def prefill_service_s(self, input_tokens: float, hit_rate: float) -> float:
        """Instance-seconds one request costs when every pass is full of requests like it
        (``prefill_chunk_tokens`` on each attention group, the simulator's scheduler's
        budget per rank): its own math and KV reads, plus its token share of each pass's
        weight read, collective latency and overhead. Every attention group (data-parallel
        attention rank) is busy in such passes, each with requests of its own, so attention
        spreads over all GPUs."""
        costs = self._request_costs(input_tokens, hit_rate, full_passes=True)
        return cast(float, self._seconds(sum(costs, _Cost(0.0, 0.0, 0.0, 0.0, 0.0))))


class _Overlap(NamedTuple):
    """How a pass or step runs: as ``micro_batches`` micro-batches, with ``hidden`` of its
    collective volume behind compute, and compute ``slowdown`` times as long."""

    micro_batches: int
    hidden: float
    slowdown: float


FILL_GRID_POINTS = 32
"""Points of ``PassFill``'s grid of company tokens, geometric from 1 to a chunk (and 0)."""


class PassFill(NamedTuple):
    """A request's prefill service when its passes are part-full (``prefill_queue.filled_service``):
    per class, the seconds of its first chunk and of its other chunks when each carries its
    own tokens plus ``grid[g]`` tokens of other requests on its attention group, every
    group as busy, so that it carries ``t / (groups x min(chunk, t + x))`` of each pass's
    fixed costs (weight read, collective latency, overhead) instead of a full pass's
    ``t / (groups x chunk)``. ``grid[-1]`` is a full chunk: ``first + rest`` there is the
    full-pass service time."""

    grid: Array
    first: Array
    """Classes x grid."""
    rest: Array
    """Classes x grid."""
    chunk: float
    """New tokens an attention group takes in a pass (``Instance.chunk_tokens``)."""
    groups: int


class PrefillFigures(NamedTuple):
    """Per request of a list: prefill latency alone and service time (``Instance``'s
    ``prefill_latency_s`` and ``prefill_service_s``), and every pass that prefills them:
    its time alone and the request it belongs to; the tokens it prefills, and the room its
    passes leave on its attention group for other requests' tokens (``chunk_tokens`` per
    pass less its own; None: not known, no company on its group is counted)."""

    latency: Array
    service: Array
    pass_s: Array
    pass_owner: npt.NDArray[np.int64]
    new_tokens: Array | None = None
    room_tokens: Array | None = None
    fill: PassFill | None = None
    """The service when passes run part-full (``PassFill``); None: always full."""
    whole: PassFill | None = None
    """The same with the instance as one server (``PassFill.groups`` 1, ``chunk`` the
    instance's chunks on all its groups): company anywhere on the instance, a lone chunk
    paying all of a pass's fixed costs, its attention on the groups the pass fills. The
    instance's busy time (its passes back to back, whatever they carry), which an arrival
    waits behind: its attention groups run in one pass. None with one attention group
    (``fill`` is that)."""


@dataclass(frozen=True, slots=True)
class _Cost:
    """Additive pieces of prefill work on the busiest GPU."""

    compute_s: Value
    hbm_bytes: Value
    host_bytes: Value
    comm_s: Value
    """Collective volume hidden behind the other micro-batch: it runs side by side with the
    roofline terms."""
    serial_s: Value
    """Collectives that cannot overlap, their latency, and the overhead."""

    def parts(self) -> tuple[Value, Value, Value, Value, Value]:
        """The pieces, in field order (``_Cost(*parts)`` makes it again)."""
        return self.compute_s, self.hbm_bytes, self.host_bytes, self.comm_s, self.serial_s

    def __add__(self, other: _Cost) -> _Cost:
        return _Cost(
            self.compute_s + other.compute_s,
            self.hbm_bytes + other.hbm_bytes,
            self.host_bytes + other.host_bytes,
            self.comm_s + other.comm_s,
            self.serial_s + other.serial_s,
        )


def make_instance(
    model: ModelSpec,
    chip: ChipSpec,
    gpus: int,
    cal: Calibration,
    *,
    kv_dtype: KvDtype | None = None,
    weight_dtype: Dtype | None = None,
    context_parallel: bool = False,
    attention_tp: int | None = None,
) -> Instance:
    """An instance of ``gpus`` GPUs, or ``WeightsDoNotFitError`` naming the smallest size
    that does fit. ``weight_dtype`` overrides the model's dtypes (experts included);
    ``context_parallel`` splits each prompt's attention over the instance's attention
    groups, ``attention_tp`` sets its attention's tensor-parallel width
    (``layout_for``)."""
    inst = _build(model, chip, gpus, cal, kv_dtype, weight_dtype, context_parallel, attention_tp)
    if inst.weight_bytes_per_gpu > inst.usable_hbm_per_gpu:
        smallest = smallest_fitting_gpus(model, chip, cal, weight_dtype=weight_dtype)
        hint = (
            f"the smallest power-of-two size that fits is {smallest} GPUs"
            if smallest
            else "no size up to 1024 GPUs fits (replicated parts alone exceed one GPU)"
        )
        dtypes: str = inst.weight_dtype
        if inst.expert_weight_dtype != inst.weight_dtype:
            dtypes += f", {inst.expert_weight_dtype} experts"
        raise WeightsDoNotFitError(
            f"{model.id} ({dtypes} weights) does not fit {gpus} x {chip.id} "
            f"({inst.layout.label}): {inst.weight_bytes_per_gpu / units.GB:.1f} GB of weights "
            f"per GPU > {inst.usable_hbm_per_gpu / units.GB:.1f} GB usable "
            f"({chip.hbm_gb:g} GB x {cal.knobs.hbm_usable_fraction:g}); {hint}"
        )
    return inst


def instance_fits(
    model: ModelSpec,
    chip: ChipSpec,
    gpus: int,
    cal: Calibration,
    *,
    weight_dtype: Dtype | None = None,
) -> bool:
    """Whether ``gpus`` GPUs of ``chip`` hold the model's weights."""
    inst = _build(model, chip, gpus, cal, None, weight_dtype, False)
    return inst.weight_bytes_per_gpu <= inst.usable_hbm_per_gpu


def smallest_fitting_gpus(
    model: ModelSpec,
    chip: ChipSpec,
    cal: Calibration,
    *,
    weight_dtype: Dtype | None = None,
    max_gpus: int = 1024,
) -> int | None:
    """The smallest power-of-two instance size whose per-GPU weights fit, or None."""
    g = 1
    while g <= max_gpus:
        if instance_fits(model, chip, g, cal, weight_dtype=weight_dtype):
            return g
        g *= 2
    return None


def _build(
    model: ModelSpec,
    chip: ChipSpec,
    gpus: int,
    cal: Calibration,
    kv_dtype: KvDtype | None,
    weight_dtype: Dtype | None,
    context_parallel: bool,
    attention_tp: int | None = None,
) -> Instance:
    kv = KvModel(model, kv_dtype or model.kv_dtype)
    dense_dtype, expert_dtype = weight_dtypes(model, weight_dtype)
    return Instance(
        model,
        chip,
        layout_for(model, chip, gpus, context_parallel=context_parallel, attention_tp=attention_tp),
        cal,
        kv,
        dense_dtype,
        expert_dtype,
        param_breakdown(model),
    )
