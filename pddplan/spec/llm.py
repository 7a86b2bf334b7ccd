"""Model specs in Hugging Face ``config.json`` vocabulary, and the parameter breakdown the
performance model needs (which weights every token reads, which only routed tokens read)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field, model_validator

from pddplan import units
from pddplan.spec.base import Frozen

Dtype = Literal["bf16", "fp8", "fp4"]
KvDtype = Literal["bf16", "fp8"]
AttentionKind = Literal["mha", "gqa", "mla", "compressed"]
PosInt = Annotated[int, Field(ge=1)]
NonNegInt = Annotated[int, Field(ge=0)]

_MLA_KEYS = ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
_MOE_KEYS = ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size")


class ModelSpec(Frozen):
    """One model. Field names follow Hugging Face ``config.json`` (DeepSeek vocabulary for
    MoE and MLA); ``total_params_b`` / ``active_params_b`` come from the model card."""

    id: str
    hf_id: str
    source: str
    attention: AttentionKind
    num_hidden_layers: PosInt
    hidden_size: PosInt
    intermediate_size: PosInt
    num_attention_heads: PosInt
    num_key_value_heads: PosInt
    head_dim: PosInt
    vocab_size: PosInt
    tie_word_embeddings: bool = False
    total_params_b: Annotated[float, Field(gt=0)]
    active_params_b: Annotated[float, Field(gt=0)]
    weight_dtype: Dtype
    expert_weight_dtype: Dtype | None = None
    """Dtype of the routed experts where it differs from ``weight_dtype`` (mixed releases)."""
    kv_dtype: KvDtype
    # MoE
    n_routed_experts: PosInt | None = None
    num_experts_per_tok: PosInt | None = None
    n_shared_experts: NonNegInt = 0
    moe_intermediate_size: PosInt | None = None
    first_k_dense_replace: NonNegInt = 0
    # MLA
    q_lora_rank: PosInt | None = None
    kv_lora_rank: PosInt | None = None
    qk_rope_head_dim: PosInt | None = None
    qk_nope_head_dim: PosInt | None = None
    v_head_dim: PosInt | None = None
    o_lora_rank: PosInt | None = None
    """Rank of a low-rank (grouped) output projection (DeepSeek-V4)."""
    o_groups: PosInt | None = None
    # Sparse attention (DSA lightning indexer)
    index_topk: PosInt | None = None
    index_head_dim: PosInt | None = None
    index_n_heads: PosInt | None = None
    # Compressed attention (DeepSeek-V4 CSA/HCA)
    compress_ratios: tuple[NonNegInt, ...] | None = None
    """Per layer: 1 = full KV, r > 1 = one entry per r tokens, 0 = sliding window only."""
    sliding_window: PosInt | None = None
    kv_entry_bytes: dict[KvDtype, Annotated[float, Field(gt=0)]] | None = None
    """Explicit bytes per KV entry per layer for a dtype (e.g. the FlashMLA FP8 layout)."""
    kv_bytes_per_token_override: dict[KvDtype, Annotated[float, Field(gt=0)]] | None = None
    notes: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        problems = []
        if self.active_params_b > self.total_params_b:
            problems.append(
                f"active_params_b ({self.active_params_b}) exceeds total_params_b "
                f"({self.total_params_b})"
            )
        if self.attention in ("mla", "compressed"):
            missing = [k for k in _MLA_KEYS if getattr(self, k) is None]
            if missing and self.attention == "mla":
                problems.append(f"attention 'mla' needs {', '.join(missing)}")
        if self.attention == "compressed":
            if self.compress_ratios is None or self.sliding_window is None:
                problems.append("attention 'compressed' needs compress_ratios and sliding_window")
            elif len(self.compress_ratios) != self.num_hidden_layers:
                problems.append(
                    f"compress_ratios has {len(self.compress_ratios)} entries, "
                    f"num_hidden_layers is {self.num_hidden_layers}"
                )
        if self.attention == "mha" and self.num_key_value_heads != self.num_attention_heads:
            problems.append("attention 'mha' needs num_key_value_heads == num_attention_heads")
        moe_given = [k for k in _MOE_KEYS if getattr(self, k) is not None]
        if moe_given and len(moe_given) != len(_MOE_KEYS):
            problems.append(f"an MoE model needs all of {', '.join(_MOE_KEYS)}")
        if self.is_moe and self.num_experts_per_tok > self.n_routed_experts:  # type: ignore[operator]
            problems.append("num_experts_per_tok exceeds n_routed_experts")
        if self.first_k_dense_replace > self.num_hidden_layers:
            problems.append("first_k_dense_replace exceeds num_hidden_layers")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def is_moe(self) -> bool:
        return self.n_routed_experts is not None

    @property
    def moe_layers(self) -> int:
        return self.num_hidden_layers - self.first_k_dense_replace if self.is_moe else 0


@dataclass(frozen=True, slots=True)
class ParamBreakdown:
    """Parameter counts (not bytes), split by how decode reads them."""

    attention: float
    """Attention projections, all layers."""
    dense_mlp: float
    """Dense MLP layers plus shared experts: read by every token."""
    routed_experts: float
    """All routed experts, all MoE layers."""
    routed_active: float
    """Routed expert parameters one token activates."""
    embeddings: float
    """Input embedding and LM head."""
    read_other: float
    """Stated active minus the shapes above: norms, routers, indexers (read every step)."""
    stored_other: float
    """Stated total minus everything above: stored but not read per token (e.g. an MTP block
    with MTP off)."""

    @property
    def stored(self) -> float:
        """Every parameter held in memory (the parts above, not the card's rounded total)."""
        return (
            self.attention
            + self.dense_mlp
            + self.routed_experts
            + self.embeddings
            + self.read_other
            + self.stored_other
        )

    @property
    def always_read(self) -> float:
        """Parameters every decode step reads whatever the batch: all but routed experts."""
        return self.attention + self.dense_mlp + self.embeddings + self.read_other


def param_breakdown(m: ModelSpec) -> ParamBreakdown:
    """Split the stated totals into parts from the config's shapes.

    Attention and MLP shapes follow the standard Llama / DeepSeek layouts (SwiGLU MLPs have
    3 matrices). The model card's ``active_params_b`` and ``total_params_b`` stay
    authoritative: what the shapes do not explain is ``read_other`` (within the active
    count) or ``stored_other`` (outside it), each clamped at zero.
    """
    h, L = m.hidden_size, m.num_hidden_layers
    attn = L * _attention_params_per_layer(m)
    if m.is_moe:
        expert = 3 * h * m.moe_intermediate_size  # type: ignore[operator]
        dense = m.first_k_dense_replace * 3 * h * m.intermediate_size
        dense += m.moe_layers * m.n_shared_experts * expert
        routed = m.moe_layers * m.n_routed_experts * expert  # type: ignore[operator]
        routed_active = m.moe_layers * m.num_experts_per_tok * expert  # type: ignore[operator]
    else:
        dense, routed, routed_active = L * 3 * h * m.intermediate_size, 0.0, 0.0
    emb = m.vocab_size * h * (1 if m.tie_word_embeddings else 2)
    read_other = max(0.0, m.active_params_b * 1e9 - routed_active - attn - dense - emb)
    stored_other = max(0.0, m.total_params_b * 1e9 - routed - attn - dense - emb - read_other)
    return ParamBreakdown(attn, dense, routed, routed_active, emb, read_other, stored_other)


def _attention_params_per_layer(m: ModelSpec) -> float:
    h, heads = m.hidden_size, m.num_attention_heads
    if m.kv_lora_rank is not None:  # MLA
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim  # type: ignore[operator]
        q = h * m.q_lora_rank + m.q_lora_rank * heads * qk if m.q_lora_rank else h * heads * qk
        kv = h * (m.kv_lora_rank + m.qk_rope_head_dim)  # type: ignore[operator]
        kv += m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)  # type: ignore[operator]
        return q + kv + heads * m.v_head_dim * h  # type: ignore[operator]
    hd = m.head_dim
    q = h * m.q_lora_rank + m.q_lora_rank * heads * hd if m.q_lora_rank else h * heads * hd
    kv_mats = 1 if m.attention == "compressed" else 2  # compressed attention shares K = V
    kv = kv_mats * h * m.num_key_value_heads * hd
    if m.o_lora_rank:  # grouped low-rank output: heads*hd -> groups*rank -> hidden
        o = heads * hd * m.o_lora_rank + (m.o_groups or 1) * m.o_lora_rank * h
    else:
        o = heads * hd * h
    return q + kv + o


def weight_bytes(m: ModelSpec, weight_dtype: Dtype | None = None) -> float:
    """Bytes of all weights: routed experts at ``expert_weight_dtype`` where set, the rest
    at ``weight_dtype`` (the argument overrides both)."""
    p = param_breakdown(m)
    dense_dtype, expert_dtype = weight_dtypes(m, weight_dtype)
    dense = (p.stored - p.routed_experts) * units.DTYPE_BYTES[dense_dtype]
    return dense + p.routed_experts * units.DTYPE_BYTES[expert_dtype]


def weight_dtypes(m: ModelSpec, override: Dtype | None = None) -> tuple[Dtype, Dtype]:
    """(dtype of the non-expert weights, dtype of the routed experts); ``override`` sets both."""
    if override is not None:
        return override, override
    return m.weight_dtype, m.expert_weight_dtype or m.weight_dtype


_HF_ALIASES = {"num_experts": "n_routed_experts", "n_group_experts": "n_routed_experts"}
"""Hugging Face key spellings that mean one of our fields (Qwen-MoE says ``num_experts``)."""


def hf_config_to_entry(
    config: dict,
    model_id: str,
    *,
    source: str,
    total_params_b: float | None = None,
    active_params_b: float | None = None,
) -> dict:
    """A catalog entry (plain dict, no ``id``) from a Hugging Face ``config.json`` dict.

    Keys the schema knows are copied (with Qwen-style aliases mapped); the attention kind is
    inferred (``compress_ratios`` -> compressed, ``kv_lora_rank`` -> MLA, fewer KV heads ->
    GQA). Parameter counts, when not given, are computed from the shapes and marked so.
    """
    cfg = dict(config.get("text_config") or config)
    for alias, name in _HF_ALIASES.items():
        if alias in cfg and name not in cfg:
            cfg[name] = cfg[alias]
    heads = cfg.get("num_attention_heads")
    if "compress_ratios" in cfg:
        attention = "compressed"
        layers = cfg.get("num_hidden_layers", 0)
        cfg["compress_ratios"] = list(cfg["compress_ratios"])[:layers]  # drop MTP entries
    elif cfg.get("kv_lora_rank"):
        attention = "mla"
    elif cfg.get("num_key_value_heads", heads) != heads:
        attention = "gqa"
    else:
        attention = "mha"
    cfg.setdefault("num_key_value_heads", heads)
    if heads and cfg.get("hidden_size") and not cfg.get("head_dim"):
        cfg["head_dim"] = cfg["hidden_size"] // heads
    quant = cfg.get("quantization_config") or config.get("quantization_config") or {}
    weight_dtype = "fp8" if "fp8" in str(quant.get("quant_method", "")).lower() else "bf16"
    known = set(ModelSpec.model_fields) - {
        "id",
        "hf_id",
        "source",
        "attention",
        "weight_dtype",
        "kv_dtype",
        "total_params_b",
        "active_params_b",
    }
    entry: dict = {
        "hf_id": str(cfg.get("_name_or_path") or model_id),
        "source": source,
        "attention": attention,
    }
    entry.update(
        {k: cfg[k] for k in ModelSpec.model_fields if k in known and cfg.get(k) is not None}
    )
    entry.setdefault("intermediate_size", cfg.get("moe_intermediate_size") or 1)
    if "n_shared_experts" in entry and entry["n_shared_experts"] is None:
        entry["n_shared_experts"] = 0
    entry.update(weight_dtype=weight_dtype, kv_dtype="bf16")  # BF16 KV: the safe default
    if total_params_b is None or active_params_b is None:
        probe = ModelSpec(
            id=model_id, total_params_b=1.0, active_params_b=1.0, **_without_notes(entry)
        )
        p = param_breakdown(probe)
        shapes = p.attention + p.dense_mlp + p.routed_experts + p.embeddings
        computed = " and ".join(
            name
            for name, given in (("total", total_params_b), ("active", active_params_b))
            if given is None
        )
        total_params_b = total_params_b or round(shapes / 1e9, 2)
        active_params_b = active_params_b or round(
            (shapes - p.routed_experts + p.routed_active) / 1e9, 2
        )
        entry["notes"] = (
            f"{computed} params computed from the config's shapes (norms and routers excluded); "
            "replace with the model card's figures"
        )
    entry.update(total_params_b=total_params_b, active_params_b=active_params_b)
    return entry


def _without_notes(entry: dict) -> dict:
    return {k: v for k, v in entry.items() if k != "notes"}
