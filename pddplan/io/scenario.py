"""Loading a scenario and the catalogs it uses, with every cross-reference checked."""

from __future__ import annotations

import errno
import stat
from pathlib import Path
from typing import Any

from pddplan.errors import InputError
from pddplan.horizon.acquisition import acquisition_problems
from pddplan.io.catalogs import (
    engine_choice_problems,
    load_acquisition,
    load_engines,
    load_hardware,
    load_models,
    unknown_id,
)
from pddplan.io.located import read_yaml
from pddplan.io.validation import validate
from pddplan.model.checks import scenario_problems
from pddplan.model.problem import Problem
from pddplan.spec.acquisition import AcquisitionCatalog
from pddplan.spec.engine import EngineCatalog
from pddplan.spec.hardware import HardwareCatalog
from pddplan.spec.horizon import horizon_problems
from pddplan.spec.limits import MAX_VARIANTS
from pddplan.spec.llm import ModelSpec
from pddplan.spec.scenario import (
    WORKLOAD_SOURCES,
    Scenario,
    TraceRef,
    Workload,
    WorkloadVariant,
    resolve_variant,
    too_many_variants,
    variant_problems,
    variant_scenarios,
)
from pddplan.spec.source import Loc, SourceMap
from pddplan.workload.trace import fitted_workload


def load_scenario(path: Path) -> Problem:
    """Load ``path`` and the catalogs it uses, check every cross-reference, and return the
    planning problem (a trace workload is fitted into classes here).

    Raises ``InputError`` listing every problem: unknown keys and ids, bad values, and a
    model that fits no allowed chip configuration for a role.
    """
    data, source = read_yaml(path)
    raw = data.get("workload_variants") if isinstance(data, dict) else None
    if isinstance(raw, list) and len(raw) > MAX_VARIANTS:  # before each is validated
        raise InputError(source.problem(("workload_variants",), too_many_variants(len(raw))))
    try:
        scenario = validate(Scenario, data, source)
    except InputError as e:
        # Report the unknown ids and the variants' list rules too, so that one run lists
        # every problem of the file.
        more = _raw_id_checks(data, source) + _raw_variant_checks(data, source)
        problems = e.problems
        if any(LINK_END in p for p in more):  # said at the link's own line: not again at the top
            problems = [p for p in problems if UNLOCATED_LINK_END not in p]
        raise InputError(problems + more) from None
    variant_issues = [
        source.problem(loc, msg) for loc, msg in variant_problems(scenario.workload_variants)
    ]
    base = path.parent
    hw_path = scenario.catalogs.hardware and base / scenario.catalogs.hardware
    model_path = scenario.catalogs.models and base / scenario.catalogs.models
    engine_path = scenario.catalogs.engines and base / scenario.catalogs.engines
    hardware, models = load_hardware(hw_path), load_models(model_path)
    engines = load_engines(engine_path)
    problems = variant_issues + _cross_check(scenario, hardware, models, source)
    problems += _engine_problems(scenario, hardware, engines, source)
    if not problems:
        problems = _variant_resolution_problems(scenario, source)
    if problems:
        raise InputError(problems)
    fits: dict[str, Workload] = {}
    if scenario.workload_variants:
        scenario = _fit_variants(scenario, path, fits)
    if scenario.workload.trace is not None:
        scenario = scenario.model_copy(update={"workload": _fitted(scenario.workload, path, fits)})
    if scenario.workload_variants:  # against the fitted classes (md_cache's md_hit counts)
        problems = _variant_scenario_problems(scenario, source)
        if problems:
            raise InputError(problems)
    if scenario.horizon is not None:  # against the fitted rate
        problems = _horizon_problems(scenario, hardware, path, source)
        if problems:
            raise InputError(problems)
    problem = Problem(scenario, hardware, models[scenario.model], engines=engines, source=source)
    problems = scenario_problems(problem)
    if problems:
        raise InputError(problems)
    return problem


def scenario_acquisition(scenario: Scenario, path: Path) -> AcquisitionCatalog:
    """The acquisition catalog ``scenario``'s horizon names (relative to ``path``, its file),
    or the shipped one."""
    named = scenario.horizon.acquisition_catalog if scenario.horizon is not None else None
    return load_acquisition(path.parent / named if named is not None else None)


def _horizon_problems(
    s: Scenario, hardware: HardwareCatalog, path: Path, source: SourceMap
) -> list[str]:
    """The horizon against the rest of the scenario, then against the acquisition catalog."""
    found = horizon_problems(s)
    if not found:
        found = acquisition_problems(s, hardware, scenario_acquisition(s, path))
    return [source.problem(loc, msg) for loc, msg in found]


LINK_END = "unknown datacenter"
"""The raw check's words for a link end that names no datacenter (at the link's line)."""
UNLOCATED_LINK_END = ".between names unknown datacenter"
"""The scenario validator's words for it, at the top level: dropped where the raw check
has said it at its line, so that one problem is one line."""


def _raw_variant_checks(data: Any, source: SourceMap) -> list[str]:
    """The variants' list rules (``variant_problems``) in a scenario that failed
    validation elsewhere, when every variant is valid on its own (else its own errors are
    already listed)."""
    raw = data.get("workload_variants") if isinstance(data, dict) else None
    if not isinstance(raw, list):
        return []
    try:
        variants = [WorkloadVariant.model_validate(v) for v in raw]
    except ValueError:
        return []
    return [source.problem(loc, msg) for loc, msg in variant_problems(variants)]


def _variant_resolution_problems(s: Scenario, source: SourceMap) -> list[str]:
    """Variants whose keys, laid over the base workload, make no valid workload."""
    out = []
    for i, v in enumerate(s.workload_variants or ()):
        try:
            resolve_variant(s.workload, v)
        except ValueError as e:
            out.append(source.problem(("workload_variants", i), f"over the base workload: {e}"))
    return out


def _variant_scenario_problems(s: Scenario, source: SourceMap) -> list[str]:
    """Variants whose whole workload the rest of the scenario refuses (an ``md_cache``
    option that needs distributions, or one MD hit per class of another count)."""
    try:
        variant_scenarios(s)
    except ValueError:
        pass
    else:
        return []
    out = []
    for i, v in enumerate(s.workload_variants or ()):
        try:
            variant_scenarios(s.model_copy(update={"workload_variants": (v,)}))
        except ValueError as e:
            reason = str(e).removeprefix("workload_variants[0]: ")
            out.append(source.problem(("workload_variants", i), reason))
    return out


def _fitted(
    workload: Workload, path: Path, fits: dict[str, Workload], key: str = "workload"
) -> Workload:
    """``fitted_workload``, once per trace, cache settings and rate in one load."""
    memo = workload.model_dump_json(include={"trace", "arrival_rps"})
    if memo not in fits:
        fits[memo] = fitted_workload(workload, path, key)
    return fits[memo]


def _fit_variants(s: Scenario, path: Path, fits: dict[str, Workload]) -> Scenario:
    """``s`` with every variant whose whole workload is a trace (its own, or the base's)
    given instead as that trace's fitted classes and rate, as the base workload is."""
    variants = []
    for i, v in enumerate(s.workload_variants or ()):
        whole = resolve_variant(s.workload, v)
        if whole.trace is not None:
            fitted = _fitted(whole, path, fits, f"workload_variants[{i}]")
            sources = dict.fromkeys(k for names in WORKLOAD_SOURCES.values() for k in names)
            v = v.model_copy(
                update={**sources, "classes": fitted.classes, "arrival_rps": fitted.arrival_rps}
            )
        variants.append(v)
    return s.model_copy(update={"workload_variants": tuple(variants)})


def _raw_id_checks(data: Any, source: SourceMap) -> list[str]:
    """Unknown model, chip and datacenter ids in a scenario that failed validation, checked
    against the catalogs it names (or the shipped ones). Skipped if those catalogs fail to
    load: their own errors come first."""
    if not isinstance(data, dict):
        return []
    paths = _mapping(data.get("catalogs"))
    try:
        hw_file, model_file = paths.get("hardware"), paths.get("models")
        base = source.path.parent
        chips = load_hardware(base / hw_file if isinstance(hw_file, str) else None).chips
        models = load_models(base / model_file if isinstance(model_file, str) else None)
    except InputError:
        return []
    out = []

    def bad(loc: Loc, msg: str) -> None:
        out.append(source.problem(loc, msg))

    if isinstance(data.get("model"), str) and data["model"] not in models:
        bad(("model",), unknown_id("model", data["model"], models))
    dcs = _mapping(data.get("datacenters"))
    for dc_id, dc in dcs.items():
        listed = dc.get("chips") if isinstance(dc, dict) else None
        for i, chip in enumerate(listed if isinstance(listed, list) else []):
            if isinstance(chip, str) and chip not in chips:
                bad(("datacenters", dc_id, "chips", i), unknown_id("chip", chip, chips))
    links = data.get("links")
    # without a datacenters mapping every link end is "unknown": the missing key says it all
    links = links if isinstance(links, list) and dcs else []
    for i, link in enumerate(links):
        ends = link.get("between") if isinstance(link, dict) else None
        for end in ends if isinstance(ends, list) else []:
            if isinstance(end, str) and end not in dcs:
                bad(
                    ("links", i, "between"),
                    f"unknown datacenter '{end}' (datacenters: {', '.join(map(str, dcs))})",
                )
    per_chip = _mapping(_mapping(data.get("calibration")).get("per_chip"))
    for chip in per_chip:
        if chip not in chips:
            bad(("calibration", "per_chip", chip), unknown_id("chip", str(chip), chips))
    return out


def _cross_check(
    s: Scenario, hw: HardwareCatalog, models: dict[str, ModelSpec], source: SourceMap
) -> list[str]:
    """The scenario's ids against the catalogs, and its trace file."""
    problems = []

    def bad(loc: Loc, msg: str) -> None:
        problems.append(source.problem(loc, msg))

    if s.model not in models:
        bad(("model",), unknown_id("model", s.model, models))
    for dc_id, dc in s.datacenters.items():
        for i, chip in enumerate(dc.chips):
            if chip not in hw.chips:
                bad(("datacenters", dc_id, "chips", i), unknown_id("chip", chip, hw.chips))
    for chip in s.calibration.per_chip:
        if chip not in hw.chips:
            bad(("calibration", "per_chip", chip), unknown_id("chip", chip, hw.chips))
    for chip in s.prices_usd_per_gpu_hour:
        if chip not in hw.chips:
            bad(("prices_usd_per_gpu_hour", chip), unknown_id("chip", chip, hw.chips))
    traces: list[tuple[Loc, TraceRef | None]] = [(("workload",), s.workload.trace)]
    traces += [(("workload_variants", i), v.trace) for i, v in enumerate(s.workload_variants or ())]
    for loc, ref in traces:
        if ref is None:
            continue
        path = source.path.parent / ref.file
        try:
            kind = path.stat().st_mode
        except OSError as e:
            looped = e.errno == errno.ELOOP
            bad(
                (*loc, "trace", "file"),
                f"{path}: cannot read: a loop of symbolic links"
                if looped
                else f"trace file not found: {path}",
            )
            continue
        if stat.S_ISFIFO(kind):
            continue  # a pipe: read as it comes, with the pipes' bounded wait
        if not stat.S_ISREG(kind):
            bad((*loc, "trace", "file"), f"{path}: not a regular file (a folder or a device)")
    return problems


def _engine_problems(
    s: Scenario, hw: HardwareCatalog, engines: EngineCatalog, source: SourceMap
) -> list[str]:
    """The scenario's engines against the engine profiles (``engine_choice_problems``):
    known, with a profile for the family of every chip each role may use, and roles that
    hand each other the KV cache on engines that can."""
    return [source.problem(loc, msg) for loc, msg in engine_choice_problems(s, hw, engines)]


def _mapping(value: Any) -> dict[Any, Any]:
    """``value`` if it is a mapping, else an empty one (for checks of a file that failed
    validation: any part may have any shape)."""
    return value if isinstance(value, dict) else {}
