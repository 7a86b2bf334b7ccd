"""Request classes: the workload discretized into weighted buckets of prefill-side hit,
decode-side hit, input length and output length, which the planner reasons about one by one.

Lengths and hits are taken as independent, except the two hit rates: a request that hits
well in P's cache is assumed to hit well in MD's too (comonotone coupling: the MD hit of a
P-hit quantile slice is MD's distribution over the same slice). Classes are finer where the
mass is small (the tails), because P90/P99 live there.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from pddplan.errors import InputError
from pddplan.spec.distributions import HitDist, LengthDist
from pddplan.spec.scenario import MdCacheOption, Scenario, Workload
from pddplan.workload.distributions import frozen_dist, slice_mean, slice_points

HIT_EDGES = (0.0, 0.2, 0.4, 0.7, 0.9, 0.95, 0.99, 1.0)
"""Default P-hit bucket edges: fine near 1, where agentic traffic concentrates."""
INPUT_QUANTILES = (0.0, 0.5, 0.8, 0.95, 0.99, 1.0)
"""Input-length classes by quantile: the long tail gets its own classes."""
OUTPUT_QUANTILES = (0.0, 0.5, 0.9, 0.99, 1.0)
"""Output-length classes by quantile."""
SPREAD_POINTS = 16
"""Quantile points per class for its spread of input lengths and of decode-side hits
(``RequestClass.input_points``, ``md_hit_points``): 16 x 16 payloads a class, enough to
place a relay threshold inside it to 1/256 of its requests' share."""
MIN_WEIGHT = 1e-9
"""Classes lighter than this are dropped (their weight is renormalized away)."""


@dataclass(frozen=True, slots=True)
class RequestClass:
    """One bucket of requests and its representative shape."""

    key: str
    """Stable id, e.g. ``h5.l2.o1`` (hit bucket, input class, output class)."""
    weight: float
    """Share of requests (the weights of all classes sum to 1)."""
    input_tokens: float
    output_tokens: float
    p_hit: float
    """Prefix-cache hit rate at prefill."""
    md_hit: float
    """Share of the context MD's cache already holds."""
    output_points: tuple[float, ...] = ()
    """Output lengths spread evenly over the class's quantile slice (their mean is
    ``output_tokens``): what a mean of ``min(output, x)`` needs (relay decode's eager
    tokens); empty where the class is one length."""
    input_points: tuple[float, ...] = ()
    """Input lengths spread evenly over the class's quantile slice (``SPREAD_POINTS``,
    scaled so that their mean is ``input_tokens``); empty where the class is one length."""
    md_hit_points: tuple[float, ...] = ()
    """Decode-side hit rates spread the same way over its hit slice (mean ``md_hit``).
    With ``input_points``, the spread of the WAN payloads a relay threshold is applied
    to, request by request (``pddplan.model.problem.Problem.relay_shares``)."""


def _hit_slices(d: HitDist, edges: tuple[float, ...]) -> list[tuple[float, float, int]]:
    """(q_lo, q_hi, bucket index) of each hit bucket with mass, as quantile slices."""
    if d.dist == "fixed":
        value = d.number("value")
        index = max(i for i, e in enumerate(edges[:-1]) if e <= value)
        return [(0.0, 1.0, index)]
    cdf = frozen_dist(d).cdf
    out = []
    for i, (lo, hi) in enumerate(itertools.pairwise(edges)):
        q_lo, q_hi = float(cdf(lo)), float(cdf(hi))
        if q_hi - q_lo > MIN_WEIGHT:
            out.append((q_lo, q_hi, i))
    return out


def request_classes(
    *,
    input_tokens: LengthDist,
    output_tokens: LengthDist,
    prefix_hit: HitDist,
    md_prefix_hit: HitDist | None = None,
    hit_edges: tuple[float, ...] = HIT_EDGES,
    input_quantiles: tuple[float, ...] = INPUT_QUANTILES,
    output_quantiles: tuple[float, ...] = OUTPUT_QUANTILES,
) -> list[RequestClass]:
    """The weighted classes of a workload; weights sum to 1.

    Each class's representative input/output length and hit rates are the means of the
    distributions over the class's quantile slice.
    """
    md = md_prefix_hit or prefix_hit
    lengths_in = _length_slices(input_tokens, input_quantiles)
    lengths_out = _length_slices(output_tokens, output_quantiles)
    points = _length_points(output_tokens, output_quantiles)
    spread_in = _spread(input_tokens, input_quantiles)
    out = []
    for q_lo, q_hi, h in _hit_slices(prefix_hit, hit_edges):
        p_hit, md_hit = slice_mean(prefix_hit, q_lo, q_hi), slice_mean(md, q_lo, q_hi)
        md_points = _spread_slice(md, q_lo, q_hi, md_hit)
        for (wi, li, i), (wo, lo, o) in itertools.product(lengths_in, lengths_out):
            weight = (q_hi - q_lo) * wi * wo
            if weight > MIN_WEIGHT:
                key = f"h{h}.l{i}.o{o}"
                out.append(
                    RequestClass(
                        key, weight, li, lo, p_hit, md_hit, points[o], spread_in[i], md_points
                    )
                )
    total = sum(c.weight for c in out)
    return [replace(c, weight=c.weight / total) for c in out]


def _length_points(d: LengthDist, quantiles: tuple[float, ...]) -> list[tuple[float, ...]]:
    """Per quantile slice, its evenly spread lengths (``RequestClass.output_points``)."""
    if d.dist == "fixed":
        return [()]
    return [tuple(slice_points(d, lo, hi)) for lo, hi in itertools.pairwise(quantiles)]


def _spread(d: LengthDist, quantiles: tuple[float, ...]) -> list[tuple[float, ...]]:
    """Per quantile slice, ``_spread_slice`` of ``d`` over it."""
    if d.dist == "fixed":
        return [()]
    return [
        _spread_slice(d, lo, hi, slice_mean(d, lo, hi)) for lo, hi in itertools.pairwise(quantiles)
    ]


def _spread_slice(d: LengthDist | HitDist, q_lo: float, q_hi: float, mean: float) -> tuple:
    """``SPREAD_POINTS`` values of ``d`` spread evenly over [q_lo, q_hi], scaled to
    ``mean`` (the class's representative, taken on a finer grid); () if ``d`` is fixed."""
    if d.dist == "fixed":
        return ()
    x = slice_points(d, q_lo, q_hi, SPREAD_POINTS)
    total = float(x.mean())
    return tuple(float(v) for v in (x * (mean / total) if total > 0 else x))


def _length_slices(d: LengthDist, quantiles: tuple[float, ...]) -> list[tuple[float, float, int]]:
    """(weight, representative tokens, index) per quantile slice; one slice if fixed."""
    if d.dist == "fixed":
        return [(1.0, d.number("value"), 0)]
    return [
        (hi - lo, slice_mean(d, lo, hi), i)
        for i, (lo, hi) in enumerate(itertools.pairwise(quantiles))
    ]


def output_class_edges(workload: Workload) -> tuple[float, ...]:
    """The output lengths between the output classes of ``workload``'s distributions (the
    upper end of each quantile slice but the last), shortest first; empty where the classes
    are single lengths (explicit ``classes``, a fitted trace, a fixed output length).

    A router that finishes a request on relay decode when its output is at most ``x``
    takes a whole class there, as the classes' means do, only at one of these ``x``: a cut
    inside a slice (at its mean, say) sends part of the class each way, and the model
    would take all of it as going one way."""
    d = workload.output_tokens
    if workload.classes is not None or d is None or d.dist == "fixed":
        return ()
    ppf = frozen_dist(d).ppf
    return tuple(float(ppf(q)) for q in OUTPUT_QUANTILES[1:-1])


def workload_classes(workload: Workload) -> list[RequestClass]:
    """The classes of a scenario's workload: its explicit ``classes``, or its distributions
    discretized by ``request_classes``. (A trace is fitted into classes on load.)"""
    if workload.classes is not None:
        return [
            RequestClass(
                c.key or f"c{i}",
                c.weight,
                c.input_tokens,
                c.output_tokens,
                c.p_hit,
                c.p_hit if c.md_hit is None else c.md_hit,
            )
            for i, c in enumerate(workload.classes)
        ]
    if (
        workload.input_tokens is None
        or workload.output_tokens is None
        or workload.prefix_hit is None
    ):
        raise ValueError("the workload has neither classes nor distributions (fit its trace first)")
    return request_classes(
        input_tokens=workload.input_tokens,
        output_tokens=workload.output_tokens,
        prefix_hit=workload.prefix_hit,
        md_prefix_hit=workload.md_prefix_hit,
    )


def md_cache_hits(workload: Workload, options: tuple[MdCacheOption, ...]) -> list[list[float]]:
    """Per decode-side cache option, the MD hit rate of each class of ``workload`` (in the
    order of ``workload_classes``)."""
    classes = workload_classes(workload)
    out = []
    for i, option in enumerate(options):
        if option.md_hit is not None:
            if len(option.md_hit) != len(classes):
                raise InputError(
                    f"md_cache[{i}].md_hit has {len(option.md_hit)} values; the workload has "
                    f"{len(classes)} classes"
                )
            out.append(list(option.md_hit))
            continue
        w = workload
        assert w.input_tokens and w.output_tokens and w.prefix_hit
        again = request_classes(
            input_tokens=w.input_tokens,
            output_tokens=w.output_tokens,
            prefix_hit=w.prefix_hit,
            md_prefix_hit=option.md_prefix_hit,
        )
        out.append([c.md_hit for c in again])
    return out


def md_caches(scenario: Scenario) -> list[tuple[float | None, list[float]]]:
    """The decode-side cache choices: (HBM GB reserved per MD GPU, each class's MD hit).
    Without ``md_cache`` options, one choice: no reserve, the workload's MD hits."""
    if scenario.md_cache is None:
        return [(None, [c.md_hit for c in workload_classes(scenario.workload)])]
    hits = md_cache_hits(scenario.workload, scenario.md_cache)
    return [(o.gb_per_gpu, h) for o, h in zip(scenario.md_cache, hits, strict=True)]
