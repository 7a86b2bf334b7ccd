"""Model specs in Hugging Face ``config.json`` vocabulary (``pddplan.model.params`` splits
their parameters by how decode reads them)."""

from __future__ import annotations

from typing import Annotated, Literal, NamedTuple

from pydantic import Field, model_validator

from pddplan.spec.base import Frozen
from pddplan.spec.choices import Dtype, KvDtype
from pddplan.spec.limits import MAX_MODEL_DIM, MAX_PARAMS_B

__all__ = ["Dtype", "KvDtype"]  # re-exported: where the model's dtypes were always read
AttentionKind = Literal["mha", "gqa", "mla", "compressed"]
PosInt = Annotated[int, Field(ge=1, le=MAX_MODEL_DIM)]
NonNegInt = Annotated[int, Field(ge=0, le=MAX_MODEL_DIM)]

_MLA_KEYS = ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
_MOE_KEYS = ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size")


class MlaShape(NamedTuple):
    """Multi-head latent attention's dimensions (all given together)."""

    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int


class MoeShape(NamedTuple):
    """A mixture of experts' dimensions (all given together)."""

    n_routed_experts: int
    num_experts_per_tok: int
    moe_intermediate_size: int


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
    total_params_b: Annotated[float, Field(gt=0, le=MAX_PARAMS_B)]
    active_params_b: Annotated[float, Field(gt=0, le=MAX_PARAMS_B)]
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
        missing = [k for k in _MLA_KEYS if getattr(self, k) is None]
        if missing and self.attention == "mla":
            problems.append(f"attention 'mla' needs {', '.join(missing)}")
        elif missing and self.kv_lora_rank is not None:
            problems.append(f"kv_lora_rank (a latent KV) needs {', '.join(missing)}")
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
        moe = self.moe
        if moe is not None and moe.num_experts_per_tok > moe.n_routed_experts:
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
    def moe(self) -> MoeShape | None:
        """The experts' shape (None for a dense model)."""
        e, k, f = self.n_routed_experts, self.num_experts_per_tok, self.moe_intermediate_size
        return None if e is None or k is None or f is None else MoeShape(e, k, f)

    @property
    def mla(self) -> MlaShape | None:
        """The latent attention's shape (None without ``kv_lora_rank``)."""
        r, rope = self.kv_lora_rank, self.qk_rope_head_dim
        nope, v = self.qk_nope_head_dim, self.v_head_dim
        if r is None or rope is None or nope is None or v is None:
            return None
        return MlaShape(r, rope, nope, v)

    @property
    def moe_layers(self) -> int:
        return self.num_hidden_layers - self.first_k_dense_replace if self.is_moe else 0
