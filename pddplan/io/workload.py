"""Writing a fitted workload as a ``workload:`` block a scenario can include."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pddplan.workload.trace import TraceFit


def workload_yaml(fit: TraceFit) -> str:
    """The fitted workload as a commented ``workload:`` block a scenario can include."""
    md = f"{fit.md_cache_tokens} tokens" if fit.md_cache_tokens else "none (MD hit = P hit)"
    header = [
        f"# Fitted by `pddplan workload fit` from {Path(fit.path).name}: {fit.requests} requests "
        f"over {fit.duration_s:,.0f} s"
        + (f" ({fit.arrival_rps:.4g} req/s)." if fit.arrival_rps is not None else "."),
        f"# Prefill-side cache: {fit.cache_tokens}; decode-side cache: {md}; "
        f"blocks of {fit.block_tokens} tokens.",
        f"# Mean hit rate {fit.mean_hit_rate:.4f} (token-weighted {fit.token_weighted_hit_rate:.4f}).",
        "# Each class is a P-hit bucket x input-length quantile x output-length quantile, with",
        "# its requests' mean lengths and hit rates, so the trace's joint shape is kept.",
    ]
    classes: list[dict[str, Any]] = [
        {
            "key": c.key,
            "weight": round(c.weight, 8),
            "input_tokens": round(c.input_tokens, 1),
            "output_tokens": round(c.output_tokens, 1),
            "p_hit": round(c.p_hit, 6),
            "md_hit": round(c.md_hit, 6),
        }
        for c in fit.classes
    ]
    total = sum(c["weight"] for c in classes)
    classes[0]["weight"] = round(classes[0]["weight"] + 1.0 - total, 8)  # exact sum after rounding
    if fit.arrival_rps is None:
        header.append("# The trace spans no time: set arrival_rps before using this block.")
    rate = round(fit.arrival_rps, 6) if fit.arrival_rps is not None else None
    body = yaml.safe_dump(
        {"workload": {"arrival_rps": rate, "classes": classes}},
        sort_keys=False,
        width=200,
        default_flow_style=None,
    )
    return "\n".join(header) + "\n" + body
