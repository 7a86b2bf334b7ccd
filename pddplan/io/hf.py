"""Hugging Face ``config.json`` import: a model catalog entry from a config, and adding it
to a catalog file without losing the file's text."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from pddplan.atomic import atomic_write_text
from pddplan.errors import ArgumentError, InputError
from pddplan.io.catalogs import load_models
from pddplan.io.located import read_text, read_yaml
from pddplan.io.validation import validate
from pddplan.model.params import param_breakdown
from pddplan.spec.llm import ModelSpec
from pddplan.spec.source import SourceMap, quote

_HF_ALIASES = {"num_experts": "n_routed_experts", "n_group_experts": "n_routed_experts"}
"""Hugging Face key spellings that mean one of our fields (Qwen-MoE says ``num_experts``)."""


_SHAPES = ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")
"""The shapes every entry needs (the KV and weight sizes are computed from them); the other
required fields have defaults derived from these."""


def read_hf_config(path: Path) -> tuple[dict[str, Any], SourceMap]:
    """A Hugging Face ``config.json`` as a dict, with the line of each key (the first line
    that spells it), or one located ``InputError``: a directory (with its ``config.json``
    named when it has one), a file past the input limit, bytes that are not UTF-8, malformed
    JSON, the non-standard ``NaN``/``Infinity`` literals, nesting too deep to read, or JSON
    that is not an object."""
    if path.is_dir():
        inside = path / "config.json"
        hint = f"; give {inside}" if inside.is_file() else " (expected a config.json)"
        raise InputError(f"{path}: is a directory{hint}")
    text = read_text(path, what="Hugging Face config.json")

    def refuse(literal: str) -> None:
        raise _NonFinite(literal)

    try:
        config = json.loads(text, parse_constant=refuse)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{e.lineno}: malformed JSON: {e.msg}") from None
    except _NonFinite as e:
        line = next((n for n, t in enumerate(text.splitlines(), 1) if e.literal in t), 1)
        raise InputError(
            f"{path}:{line}: {e.literal} is not a JSON number (every figure must be finite)"
        ) from None
    except RecursionError:
        raise InputError(f"{path}: nested too deeply to be a config.json") from None
    if not isinstance(config, dict):
        raise InputError(
            f"{path}:1: expected a JSON object (a config.json), got a {type(config).__name__}"
        )
    lines: dict[tuple[str | int, ...], int] = {}
    for n, row in enumerate(text.splitlines(), 1):
        for key in _JSON_KEY.findall(row):
            lines.setdefault((key,), n)
    for alias, name in _HF_ALIASES.items():
        if (alias,) in lines:
            lines.setdefault((name,), lines[(alias,)])
    return config, SourceMap(path, lines)


class _NonFinite(ValueError):
    def __init__(self, literal: str) -> None:
        super().__init__(literal)
        self.literal = literal


_JSON_KEY = re.compile(r'"([A-Za-z_]\w*)"\s*:')


def hf_config_to_entry(
    config: dict[str, Any],
    model_id: str,
    *,
    source: str,
    total_params_b: float | None = None,
    active_params_b: float | None = None,
    where: SourceMap | None = None,
) -> dict[str, Any]:
    """A catalog entry (plain dict, no ``id``) from a Hugging Face ``config.json`` dict.

    Keys the schema knows are copied (with Qwen-style aliases mapped); the attention kind is
    inferred (``compress_ratios`` -> compressed, ``kv_lora_rank`` -> MLA, fewer KV heads ->
    GQA). Parameter counts, when not given, are computed from the shapes and marked so. A
    field of the wrong type or a missing shape is one ``InputError`` located in ``where``
    (the config's file and lines) before anything is computed from it.
    """
    where = where or SourceMap(Path("config.json"))
    text_config = config.get("text_config")
    cfg = dict(text_config if isinstance(text_config, dict) and text_config else config)
    for alias, name in _HF_ALIASES.items():
        if alias in cfg and name not in cfg:
            cfg[name] = cfg[alias]
    missing = [k for k in _SHAPES if cfg.get(k) is None]
    if missing:
        raise InputError(
            f"{where.path}: the config lacks {', '.join(missing)}, which the KV and weight "
            "sizes are computed from (is this the model's config.json?)"
        )
    _check_shapes(cfg, where)
    heads = cfg["num_attention_heads"]
    if (
        cfg.get("num_key_value_heads") is None
    ):  # left out, or null: one KV head per attention head (MHA)
        cfg["num_key_value_heads"] = heads
    if isinstance(cfg.get("compress_ratios"), list):
        attention = "compressed"
        cfg["compress_ratios"] = cfg["compress_ratios"][: cfg["num_hidden_layers"]]  # no MTP
    elif cfg.get("kv_lora_rank"):
        attention = "mla"
    elif cfg.get("num_key_value_heads", heads) != heads:
        attention = "gqa"
    else:
        attention = "mha"
    if not cfg.get("head_dim"):
        cfg["head_dim"] = cfg["hidden_size"] // heads
    quant = cfg.get("quantization_config") or config.get("quantization_config") or {}
    method = quant.get("quant_method", "") if isinstance(quant, dict) else ""
    weight_dtype = "fp8" if "fp8" in str(method).lower() else "bf16"
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
    entry: dict[str, Any] = {
        "hf_id": quote(str(cfg.get("_name_or_path") or model_id), 200, quotes=False),
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
    try:  # every copied field checked (and located) before it is computed with
        probe = validate(
            ModelSpec,
            {
                "id": model_id,
                "total_params_b": total_params_b or 1.0,
                "active_params_b": active_params_b or (total_params_b or 1.0),
                **entry,
            },
            where,
        )
    except InputError as e:
        raise InputError(fold(e.problems)) from None
    if total_params_b is None or active_params_b is None:
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


_SHAPE_KEYS = (
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
)
"""The shapes the conversion computes with (``head_dim`` and ``num_key_value_heads`` may be
left out, or null: the conversion derives them)."""
MAX_LINES = 3
"""The most lines one bad config is reported in: every bad value is named, the ones past
the first two on the third line."""


def _check_shapes(cfg: dict[str, Any], where: SourceMap) -> None:
    """The shapes the conversion computes with are positive integers (JSON strings such as
    ``"4096"`` or booleans are refused, as the schema would, but before the arithmetic),
    and the attention's shape holds together: KV heads at most the attention heads and
    dividing them (each KV head serves a whole group), and, without ``head_dim``, the
    hidden size a multiple of the heads. Every bad value is named (``MAX_LINES``)."""
    problems = []
    for key in _SHAPE_KEYS:
        value = cfg.get(key)
        if (key == "head_dim" and not value) or (key == "num_key_value_heads" and value is None):
            continue  # derived: head_dim from the hidden size, KV heads as the heads
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            problems.append(
                where.problem((key,), f"expected a positive integer, got {quote(value)}")
            )
    if not problems:
        heads, hidden = cfg["num_attention_heads"], cfg["hidden_size"]
        kv = cfg.get("num_key_value_heads") or heads
        if kv > heads:
            problems.append(
                where.problem(
                    ("num_key_value_heads",),
                    f"{kv} KV heads for {heads} attention heads: at most {heads} (a KV head "
                    "serves one or more attention heads)",
                )
            )
        elif heads % kv:
            problems.append(
                where.problem(
                    ("num_attention_heads",),
                    f"{heads} attention heads do not divide into the {kv} KV heads' groups "
                    "(num_attention_heads must be a multiple of num_key_value_heads)",
                )
            )
        if not cfg.get("head_dim") and hidden % heads:
            problems.append(
                where.problem(
                    ("hidden_size",),
                    f"{hidden} is not a multiple of num_attention_heads {heads}, and no "
                    "head_dim is given (give head_dim, or check both)",
                )
            )
    if problems:
        raise InputError(fold(problems))


def fold(problems: list[str], lines: int = MAX_LINES) -> list[str]:
    """``problems`` in at most ``lines`` lines: the first ``lines - 1`` as they are, the
    rest named on the last (their ``FILE:LINE:`` prefix dropped after the first)."""
    if len(problems) <= lines:
        return problems
    head, rest = problems[: lines - 1], problems[lines - 1 :]
    first = rest[0]
    others = [p.split(": ", 1)[1] if ": " in p else p for p in rest[1:]]
    return [*head, f"{first}; and {len(others)} more: " + "; ".join(others)]


def import_hf_config(
    path: Path,
    model_id: str,
    *,
    total_params_b: float | None = None,
    active_params_b: float | None = None,
) -> str:
    """A models.yaml entry (YAML text) from a Hugging Face ``config.json``."""
    config, where = read_hf_config(path)
    entry = hf_config_to_entry(
        config,
        model_id,
        source=f"imported from {path.name}",
        total_params_b=total_params_b,
        active_params_b=active_params_b,
        where=where,
    )
    try:
        validate(ModelSpec, {"id": model_id, **entry}, where)
    except InputError as e:
        raise InputError(fold(e.problems)) from None
    return yaml.safe_dump({"models": {model_id: entry}}, sort_keys=False, width=100)


def add_model_entry(catalog: Path, entry_yaml: str) -> None:
    """Add the entry in ``entry_yaml`` (as ``import_hf_config`` returns it) to a model
    catalog file, creating the file if needed. An existing file keeps its text and comments:
    the entry is appended under its ``models:`` mapping, and the result must load, or the
    file is left untouched."""
    new = yaml.safe_load(entry_yaml)["models"]
    if not catalog.exists():
        _write(catalog, entry_yaml)
        return
    try:
        old_text = catalog.read_text(encoding="utf-8")
    except OSError as e:
        raise ArgumentError(
            "catalog", f"{{argument}}: cannot read {catalog}: {e.strerror}"
        ) from None
    data, _ = read_yaml(catalog)
    if not isinstance(data, dict) or set(data) != {"models"}:
        raise InputError(f"{catalog}: not a model catalog (expected one top-level key, models)")
    clash = sorted(set(new) & set(data["models"] or {}))
    if clash:
        raise ArgumentError(
            "model_id", f"{catalog}: models.{clash[0]} already exists; choose another {{argument}}"
        )
    body = entry_yaml.split("\n", 1)[1]  # drop the "models:" line, keep the indented entry
    _write(catalog, old_text.rstrip("\n") + "\n" + body)
    try:
        load_models(catalog)  # the file changed: its new version is read
    except InputError:
        _write(catalog, old_text)
        raise


def _write(catalog: Path, text: str) -> None:
    """Replace the catalog's text atomically: a failed write leaves the old file whole."""
    try:
        atomic_write_text(catalog, text)
    except OSError as e:
        raise ArgumentError(
            "catalog", f"{{argument}}: cannot write {catalog}: {e.strerror}"
        ) from None
