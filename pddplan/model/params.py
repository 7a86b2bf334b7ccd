"""The parameter breakdown the performance model needs: which weights every token reads,
which only routed tokens read, and their bytes."""

from __future__ import annotations

from dataclasses import dataclass

from pddplan import units
from pddplan.spec.llm import Dtype, ModelSpec


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
    dense: float
    routed: float
    routed_active: float
    moe = m.moe
    if moe is not None:
        expert = 3 * h * moe.moe_intermediate_size
        dense = m.first_k_dense_replace * 3 * h * m.intermediate_size
        dense += m.moe_layers * m.n_shared_experts * expert
        routed = m.moe_layers * moe.n_routed_experts * expert
        routed_active = m.moe_layers * moe.num_experts_per_tok * expert
    else:
        dense, routed, routed_active = L * 3 * h * m.intermediate_size, 0.0, 0.0
    emb = m.vocab_size * h * (1 if m.tie_word_embeddings else 2)
    read_other = max(0.0, m.active_params_b * 1e9 - routed_active - attn - dense - emb)
    stored_other = max(0.0, m.total_params_b * 1e9 - routed - attn - dense - emb - read_other)
    return ParamBreakdown(attn, dense, routed, routed_active, emb, read_other, stored_other)


def _attention_params_per_layer(m: ModelSpec) -> float:
    h, heads = m.hidden_size, m.num_attention_heads
    mla = m.mla
    if mla is not None:
        qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        q = h * m.q_lora_rank + m.q_lora_rank * heads * qk if m.q_lora_rank else h * heads * qk
        kv = h * (mla.kv_lora_rank + mla.qk_rope_head_dim)
        kv += mla.kv_lora_rank * heads * (mla.qk_nope_head_dim + mla.v_head_dim)
        return q + kv + heads * mla.v_head_dim * h
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
