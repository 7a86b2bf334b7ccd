"""The router's rules as data (``router.json``) and the pure function that applies them.

The rules are the plan's: a request whose WAN payload (the KV main decode lacks plus the
fixed per-request state) is above ``relay_if_payload_mb_above`` goes prefill -> relay decode
-> main decode, unless its max_tokens is at most ``singular_if_max_tokens_at_most``, when it
finishes on relay decode (singular); every other request goes prefill -> main decode. It is
the simulator's rule (``pddplan.simulation.engine``, ``Simulation._dispatch``), which
``tests/test_export.py`` holds ``route`` to on random requests.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from pddplan.errors import InputError

ROUTER_FORMAT = "pddplan-router/1"
"""``router.json``'s format (docs/export.md#routerjson)."""

Path_ = Literal["p_md", "p_rld_md", "singular"]
PATHS: tuple[Path_, ...] = ("p_md", "p_rld_md", "singular")
"""A request's path: prefill -> main decode, prefill -> relay decode -> main decode,
prefill -> relay decode only (singular)."""


def router_rules(plan: Mapping[str, Any]) -> dict[str, Any]:
    """``router.json`` for a plan file's JSON (``plan``): the thresholds, the payload's
    terms and the handoff (docs/export.md#routerjson)."""
    router = plan.get("router")
    deployment = plan.get("deployment") or {}
    if not isinstance(router, dict):
        raise InputError("the plan has no router section: re-run `pddplan solve --out`")
    handoff = deployment.get("handoff") or {}
    return {
        "format": ROUTER_FORMAT,
        "deployment_id": plan.get("deployment_id"),
        "scenario_fingerprint": (plan.get("scenario_file") or {}).get("fingerprint"),
        "payload": {
            "kv_bytes_per_token": router["kv_bytes_per_token"],
            "fixed_bytes": router["fixed_bytes"],
            "formula": "payload_mb = (fixed_bytes + kv_bytes_per_token x (input_tokens - "
            "decode-side cached tokens)) / 1e6",
        },
        "relay_if_payload_mb_above": router["relay_if_payload_mb_above"],
        "singular_if_max_tokens_at_most": router["singular_if_max_tokens_at_most"],
        "handoff": {
            "catch_up_if_eager_tokens_above": handoff.get("catch_up_above_tokens"),
            "chunk_tokens": handoff.get("chunk_tokens", 64),
        },
    }


def payload_mb(request: Mapping[str, Any], rules: Mapping[str, Any]) -> float:
    """The request's WAN payload in MB (1e6 bytes): the fixed state plus the KV of the input
    tokens main decode does not hold. The request gives ``input_tokens`` and its decode-side
    hit as ``cached_tokens`` (tokens of its prefix main decode holds) or ``md_hit`` (their
    share of the input); neither: no hit."""
    inp = _count(request, "input_tokens")
    missing: float
    if "cached_tokens" in request:
        missing = inp - min(_count(request, "cached_tokens"), inp)
    else:
        hit = float(request.get("md_hit", 0.0))
        if not 0.0 <= hit <= 1.0:
            raise InputError(f"request md_hit must be within 0..1, got {hit}")
        missing = inp * (1.0 - hit)
    terms = rules["payload"]
    return (float(terms["fixed_bytes"]) + float(terms["kv_bytes_per_token"]) * missing) / 1e6


def route(request: Mapping[str, Any], rules: Mapping[str, Any]) -> Path_:
    """The path of ``request`` (``input_tokens``; ``max_tokens`` or ``output_tokens``;
    ``cached_tokens`` or ``md_hit``, see ``payload_mb``) under ``rules`` (``router.json``):
    ``"p_md"``, ``"p_rld_md"`` or ``"singular"``."""
    if rules.get("format") != ROUTER_FORMAT:
        raise InputError(f"router rules: format must be {ROUTER_FORMAT}, got {rules.get('format')}")
    above = rules["relay_if_payload_mb_above"]
    if above is None or not payload_mb(request, rules) > float(above):
        return "p_md"
    key = "max_tokens" if "max_tokens" in request else "output_tokens"
    if _count(request, key) <= int(rules["singular_if_max_tokens_at_most"]):
        return "singular"
    return "p_rld_md"


def handoff_mode(eager_tokens: int, rules: Mapping[str, Any]) -> Literal["one-shot", "catch-up"]:
    """How relay decode hands a request with ``eager_tokens`` made to main decode: in one
    extend step (one-shot), or in chunks of ``handoff.chunk_tokens`` (catch-up) when it made
    more than ``catch_up_if_eager_tokens_above`` and more than one chunk."""
    h = rules["handoff"]
    above, chunk = h["catch_up_if_eager_tokens_above"], int(h["chunk_tokens"])
    if above is None or eager_tokens <= above or eager_tokens <= chunk:
        return "one-shot"
    return "catch-up"


def _count(request: Mapping[str, Any], key: str) -> int:
    if key not in request:
        raise InputError(f"request: {key} is missing")
    value = request[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputError(f"request {key} must be a number of tokens, got {value!r}")
    if value < 0:
        raise InputError(f"request {key} must be >= 0, got {value}")
    return int(value)
