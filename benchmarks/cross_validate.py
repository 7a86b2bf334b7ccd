"""Fit the engine profiles to the public corpus, cross-validate them by source, and
(with ``--write``) write ``catalogs/engines.yaml``: the tables of docs/validation.md.

    python benchmarks/cross_validate.py [--folds 10] [--starts 3] [--write]

The corpus is every point of ``validation/*.json`` and the points of
``benchmarks/validation_points.json`` that name an engine. Per engine: the fit on all its
points (the shipped profile), grouped k-fold cross-validation (every point of one source in
one fold) and leave-one-source-out, each point's held-out ratio (predicted / measured
per-GPU throughput), and the summary by chip family and model family. The pass-time error
quantiles a profile ships (``solve --perf-quantile``) come from the k-fold held-out points
of its phase, pooled over every engine where the engine has fewer than ``MIN_CELL``.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pddplan  # noqa: E402
from pddplan.calibration.crossval import (  # noqa: E402
    FAMILY_KNOBS,
    Fit,
    HeldOut,
    Param,
    cross_validate,
    fit_engine,
    source_group,
    summarize,
)
from pddplan.calibration.fit import error_table as phase_error  # noqa: E402
from pddplan.io.measurements import load_exclusions, load_measurements  # noqa: E402
from pddplan.spec.calibration import CalibrationOverride  # noqa: E402
from pddplan.spec.measurement import Measurement  # noqa: E402

CORPUS = [
    *sorted((ROOT / "validation").glob("*.json")),
    ROOT / "benchmarks" / "validation_points.json",
]
ENGINES = {
    "sglang": {
        "name": "SGLang",
        "version": "0.4.6-0.5.x (the corpus's runs, 2025-05 to 2026-04)",
        "runs_on": ["hopper", "blackwell", "ampere", "ada", "cdna3", "cdna4"],
        "fixed": {"attention_bf16": True},
        "fixed_sources": {
            "attention_bf16": "LMSYS blog 'Deploying DeepSeek on GB200 NVL72 (part II)' "
            "(2025-09-25): 'Even with traditional BF16 attention and FP8 MoE'; FlashMLA's "
            "dense decode kernels are BF16/FP16 (deepseek-ai/FlashMLA README)",
        },
    },
    "vllm": {
        "name": "vLLM",
        "version": "0.6.3-0.11 (the corpus's runs, 2024-10 to 2026-04)",
        "runs_on": [
            "hopper",
            "blackwell",
            "ampere",
            "ada",
            "cdna3",
            "cdna4",
            "ascend-910b",
            "ascend-910c",
        ],
        "fixed": {"attention_bf16": True},
        "fixed_sources": {
            "attention_bf16": "vLLM docs, 'Quantized KV Cache': attention runs in FP8 only "
            "with the Flash Attention 3 backend and an FP8 KV cache; with the default (auto) "
            "KV dtype it runs in BF16",
        },
    },
    "trtllm": {
        "name": "TensorRT-LLM",
        "version": "0.21-1.2 (the corpus's runs, 2025-05 to 2026-03)",
        "runs_on": ["hopper", "blackwell", "ampere", "ada"],
        "fixed": {"attention_bf16": False},
        "fixed_sources": {
            "attention_bf16": "held-out choice: grouped 10-fold error with attention at the "
            "weights' FP8 peak beat BF16 attention (benchmarks/cross_validate.py, "
            "docs/validation.md#engine-profiles); TensorRT-LLM's attention takes FP8 inputs "
            "and an FP8 KV cache (TensorRT-LLM docs, 'Quantization')",
        },
    },
}
DEFAULT_ENGINE = "sglang"
MIN_CELL = 10
"""Held-out points of one engine and phase below which its error quantiles are pooled."""
BAND = 0.2


def family_of(m: Measurement) -> str:
    return CATALOGS.hardware.chips[m.chip].family


def model_family(m: Measurement) -> str:
    return "moe" if CATALOGS.model(m.model).is_moe else "dense"


def row(label: str, held: Sequence[HeldOut], loso: Sequence[HeldOut] | None = None) -> str:
    s = summarize(held, BAND)
    out = f"| {label} | {s.points} | {s.within:.0%} | {s.median:.2f} | {s.mape:.0%} |"
    if loso is not None:
        t = summarize(loso, BAND)
        out += f" {t.within:.0%} | {t.median:.2f} | {t.mape:.0%} |"
    return out


def table(title: str, rows: list[str], loso: bool = True) -> None:
    print(f"\n**{title}**\n")
    head = "| cell | points | within ±20% | median ratio | MAPE |"
    rule = "| --- | --- | --- | --- | --- |"
    if loso:
        head += " LOSO within | LOSO median | LOSO MAPE |"
        rule += " --- | --- | --- |"
    print(head)
    print(rule)
    for r in rows:
        print(r)


def knob_table(engine: str, fit: Fit) -> None:
    print(f"\n**{engine}: fitted knobs** (one standard error as a factor)\n")
    print("| knob | value | x/÷ | note |")
    print("| --- | --- | --- | --- |")
    for p in sorted(fit.values, key=lambda p: p.label):
        note = (
            "at its bound"
            if p in fit.at_bound
            else ("no point informs it" if p in fit.idle else "")
        )
        f = fit.factors.get(p, math.nan)
        print(f"| {p.label} | {fit.values[p]:.4g} | {f:.3g} | {note} |")


def profile_families(engine: str, fit: Fit, points: list[Measurement]) -> tuple[dict, dict]:
    """The profile's per-family knobs and their sources."""
    spec = ENGINES[engine]
    counts: dict[str, int] = defaultdict(int)
    for m in points:
        counts[family_of(m)] += 1
    own_families = {p.family for p in fit.values if p.family}
    families: dict[str, dict] = {}
    sources: dict[str, str] = {}
    here = f"benchmarks/cross_validate.py at {COMMIT} over validation/"
    for k in spec["fixed"]:
        sources[k] = spec["fixed_sources"][k]
    for p in fit.values:
        if p.family is None and p.knob not in FAMILY_KNOBS:
            sources[p.knob] = f"fit: {here}, {fit.points} {engine} points" + _quality(fit, p)
    for family in spec["runs_on"]:
        knobs = dict(spec["fixed"])
        if family in own_families or any(
            p.family is None and p.knob in FAMILY_KNOBS for p in fit.values
        ):
            values = fit.knobs_for(family)
            how = (
                f"{counts[family]} points on {family}"
                if family in own_families
                else f"pooled over the families with fewer than 5 points ({counts.get(family, 0)} on {family})"
            )
        else:  # no pooled values: the geometric mean of the families fitted
            values = {
                k: float(
                    np.exp(
                        np.mean(
                            [np.log(fit.values[p]) for p in fit.values if p.knob == k and p.family]
                        )
                    )
                )
                for k in FAMILY_KNOBS
            }
            values |= {p.knob: v for p, v in fit.values.items() if p.family is None}
            how = f"no {engine} point on {family}: the geometric mean of the fitted families"
        for k in FAMILY_KNOBS:
            knobs[k] = round(values[k], 4)
            param = next((p for p in fit.values if p.knob == k and p.family == family), None)
            param = param or next((p for p in fit.values if p.knob == k and p.family is None), None)
            sources[f"{family}.{k}"] = f"fit: {here}, {how}" + _quality(fit, param)
        for p, v in fit.values.items():
            if p.family is None and p.knob not in FAMILY_KNOBS:
                knobs[p.knob] = round(v, 3)
        families[family] = knobs
    return families, sources


def _quality(fit: Fit, param: Param | None) -> str:
    """How well the points pin a fitted value down, for its source line."""
    if param is None:
        return ""
    if param in fit.idle:
        return "; no point informs it: the catalog's default"
    f = fit.factors.get(param, math.nan)
    out = f" (x/÷ {f:.2f})" if math.isfinite(f) else " (unbounded by the points)"
    if math.isfinite(f) and f > 10:
        out += "; barely informed: the points hardly move it"
    if param in fit.at_bound:
        out += "; at its bound"
    return out


def error_table(held_by_engine: dict[str, list[HeldOut]]) -> dict[str, dict]:
    """Per engine and phase, the quantiles of measured / predicted pass time."""
    out: dict[str, dict] = {}
    every = [h for held in held_by_engine.values() for h in held]
    for engine, held in held_by_engine.items():
        out[engine] = {}
        for phase in ("prefill", "decode"):
            mine = [h for h in held if h.phase == phase]
            pooled = None
            source = mine
            if len(mine) < MIN_CELL:
                source = [h for h in every if h.phase == phase]
                pooled = (
                    f"{len(mine)} held-out {engine} {phase} points: pooled over every engine "
                    f"({len(source)} points)"
                )
            table = phase_error([1.0 / h.ratio for h in source], pooled)
            entry = table.model_dump(exclude_none=True)
            out[engine][phase] = entry
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folds", type=int, default=10)
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="write catalogs/engines.yaml")
    args = parser.parse_args()
    points = [(p.measurement, p.where) for p in load_measurements(CORPUS, CATALOGS)]
    exclusions = load_exclusions(CORPUS)
    print(
        f"corpus: {len(points)} points ({sum(1 for m, _ in points if m.engine)} with an engine), "
        f"{len(exclusions)} exclusions, commit {COMMIT}"
    )
    models = dict(CATALOGS.models)
    held_by_engine: dict[str, list[HeldOut]] = {}
    loso_by_engine: dict[str, list[HeldOut]] = {}
    profiles: dict[str, dict] = {}
    for engine, spec in ENGINES.items():
        mine = [(m, w) for m, w in points if m.engine == engine]
        fixed = CalibrationOverride(**spec["fixed"])
        groups = len({source_group(m) for m, _ in mine})
        folds = min(args.folds, groups)
        fit = fit_engine(mine, models, CATALOGS.hardware, fixed=fixed, starts=args.starts)
        held = cross_validate(
            mine, models, CATALOGS.hardware, folds=folds, fixed=fixed, starts=args.starts
        )
        loso = cross_validate(
            mine, models, CATALOGS.hardware, folds=groups, fixed=fixed, starts=args.starts
        )
        held_by_engine[engine], loso_by_engine[engine] = held, loso
        print(
            f"\n### {spec['name']} ({engine}): {len(mine)} points from {groups} sources, {folds}-fold"
        )
        knob_table(engine, fit)
        loso_of = {id(h.measurement): h for h in loso}
        cells: dict[str, list[HeldOut]] = defaultdict(list)
        for h in held:
            cells[f"{family_of(h.measurement)}"].append(h)
            cells[f"{model_family(h.measurement)}"].append(h)
        rows = [row("all", held, loso)]
        for label in sorted(cells):
            lo = [loso_of[id(h.measurement)] for h in cells[label]]
            rows.append(
                row(label + (" (fewer than 5)" if len(cells[label]) < 5 else ""), cells[label], lo)
            )
        table(f"{engine}: held-out, {folds}-fold by source (LOSO beside)", rows)
        families, sources = profile_families(engine, fit, [m for m, _ in mine])
        profiles[engine] = {
            "name": spec["name"],
            "version": spec["version"],
            "families": families,
            "sources": sources,
        }
    every = [h for held in held_by_engine.values() for h in held]
    every_loso = [h for held in loso_by_engine.values() for h in held]
    table("every engine: held-out", [row("all", every, every_loso)])
    print("\n**each held-out point** (ratio = predicted / measured per-GPU throughput)\n")
    print("| engine | point | chip | phase | ratio (k-fold) |")
    print("| --- | --- | --- | --- | --- |")
    for engine, held in held_by_engine.items():
        for h in sorted(held, key=lambda h: h.ratio):
            print(
                f"| {engine} | {h.measurement.id} | {h.measurement.chip} | {h.phase} | {h.ratio:.2f} |"
            )
    errors = error_table(held_by_engine)
    if args.write:
        write_catalog(profiles, errors)


def write_catalog(profiles: dict[str, dict], errors: dict[str, dict]) -> None:
    path = ROOT / "pddplan" / "catalogs" / "engines.yaml"
    # what each release can launch is read from its source, not fitted: kept as it is
    launch = {
        engine: profile["launch"]
        for engine, profile in yaml.safe_load(path.read_text())["engines"].items()
        if "launch" in profile
    }
    head = path.read_text().split("\nengines:\n")[0]
    head = head.replace("default: ideal", f"default: {DEFAULT_ENGINE}").rstrip() + "\n"
    data = {
        "ideal": {
            "name": "ideal (the hardware catalog's best-case figures)",
            "version": "-",
            "families": "any",
            "notes": (
                "No engine's overheads: the hardware catalog's efficiency defaults, fitted to "
                "the best published runs (DeepSeek's own profile with perfectly balanced "
                "routing, SGLang's 96-GPU large-EP blog, RTP-LLM's report, TensorRT-LLM's "
                "offline tables). Reproduces the plans pddplan gave before it knew engines."
            ),
        }
    }
    for engine, profile in profiles.items():
        data[engine] = profile | {"error": errors[engine]}
        if engine in launch:
            data[engine]["launch"] = launch[engine]
    body = yaml.safe_dump(data, sort_keys=False, width=100, indent=2, allow_unicode=True)
    body = "\n".join("  " + line if line else line for line in body.splitlines())
    path.write_text(head + "\nengines:\n" + body + "\n")
    print(f"\nwrote {path.relative_to(ROOT)}")


CATALOGS = pddplan.load_catalogs()
COMMIT = (
    subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    or "unknown"
)

if __name__ == "__main__":
    main()
