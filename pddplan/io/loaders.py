"""Loading and validating catalog and scenario files. The only module that knows YAML.

Every problem becomes one line ``FILE:LINE: KEY.PATH: what is wrong (what is allowed)``;
all problems of a file are collected and raised together as one ``InputError``.
"""

from __future__ import annotations

import difflib
import json
import types
import typing
from collections.abc import Iterable, Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from pddplan.errors import InputError
from pddplan.model.instance import instance_fits
from pddplan.spec.calibration import resolve_calibration
from pddplan.spec.fleet import Fleet, md_cache_problem
from pddplan.spec.hardware import HardwareCatalog
from pddplan.spec.llm import ModelSpec, hf_config_to_entry
from pddplan.spec.scenario import ROLES, Scenario
from pddplan.workload.classes import workload_classes
from pddplan.workload.trace import TraceFit, fitted_workload

T = TypeVar("T", bound=BaseModel)
Loc = tuple[str | int, ...]


# --- YAML with line numbers ------------------------------------------------------------------
def read_yaml(path: Path) -> tuple[Any, dict[Loc, int]]:
    """Parse ``path``; return the data and the 1-based line of every key path."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read: {e}") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(e, "problem", None) or str(e)
        raise InputError(f"{where}: malformed YAML: {problem}") from None
    if node is None:
        raise InputError(f"{path}: the file is empty")
    lines: dict[Loc, int] = {}
    duplicates: list[str] = []
    _index_lines(node, (), lines, duplicates, path)
    if duplicates:
        raise InputError(duplicates)
    return yaml.load(text, Loader=yaml.SafeLoader), lines


def _index_lines(
    node: yaml.Node, loc: Loc, lines: dict[Loc, int], dups: list[str], path: Path
) -> None:
    lines.setdefault(loc, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = key_node.value
            if key in seen:
                dups.append(
                    f"{path}:{key_node.start_mark.line + 1}: {_fmt((*loc, key))}: "
                    f"duplicate key (a key may appear once per mapping)"
                )
            seen.add(key)
            lines[(*loc, key)] = key_node.start_mark.line + 1
            _index_lines(value_node, (*loc, key), lines, dups, path)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index_lines(item, (*loc, i), lines, dups, path)


# --- validation with located messages -------------------------------------------------------
def _fmt(loc: Iterable[str | int]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _line(lines: Mapping[Loc, int], loc: Loc) -> int | None:
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return None


def _where(path: Path, lines: Mapping[Loc, int], loc: Loc) -> str:
    line = _line(lines, loc)
    return f"{path}:{line}" if line else str(path)


def validate(cls: type[T], data: Any, path: Path, lines: Mapping[Loc, int], prefix: Loc = ()) -> T:
    """Validate ``data`` as ``cls``; on failure raise one ``InputError`` with every problem."""
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        raise InputError(_messages(cls, e, path, lines, prefix)) from None


def _messages(
    cls: type[BaseModel], err: ValidationError, path: Path, lines: Mapping[Loc, int], prefix: Loc
) -> list[str]:
    out = []
    for item in err.errors(include_url=False):
        loc: Loc = prefix + tuple(p for p in item["loc"] if not _is_union_tag(p))
        kind, msg = item["type"], item["msg"]
        if kind == "extra_forbidden":
            allowed = _allowed_keys(cls, loc[len(prefix) : -1])
            msg = f"unknown key '{loc[-1]}'"
            close = difflib.get_close_matches(str(loc[-1]), allowed, n=1, cutoff=0.5)
            if close:
                msg += f"; did you mean '{close[0]}'?"
            if allowed:
                msg += f"; allowed: {', '.join(allowed)}"
        elif kind == "missing":
            msg = f"missing required key '{loc[-1]}'"
        elif kind in ("value_error", "assertion_error"):
            msg = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
        else:
            msg = f"{msg[0].lower()}{msg[1:]}, got {item['input']!r}"
        out.append(f"{_where(path, lines, loc)}: {_fmt(loc)}: {msg}")
    return out


def _is_union_tag(part: str | int) -> bool:
    # pydantic adds the union member's type name to the location (e.g. "int", "literal[...]").
    return isinstance(part, str) and (
        part in ("int", "float", "str", "bool") or part.startswith(("literal[", "constrained-"))
    )


def _allowed_keys(cls: type[BaseModel], loc: Loc) -> list[str]:
    """The keys the model class at ``loc`` (under ``cls``) accepts."""
    target: Any = cls
    for part in loc:
        target = _step(target, part)
        if target is None:
            return []
    return list(target.model_fields) if _is_model(target) else []


def _step(tp: Any, part: str | int) -> Any:
    if _is_model(tp):
        field = tp.model_fields.get(part) if isinstance(part, str) else None
        return _unwrap(field.annotation) if field else None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (dict, Mapping):
        return _unwrap(args[1])
    if origin in (list, tuple) and args:
        return _unwrap(args[0])
    return None


def _unwrap(tp: Any) -> Any:
    """Strip Optional / Annotated down to the model or container type."""
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(tp) if a is not type(None)]
            models = [a for a in members if _is_model(a) or typing.get_origin(a)]
            tp = (models or members)[0]
        else:
            return tp


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


# --- catalogs -------------------------------------------------------------------------------
def _shipped(name: str) -> Path:
    return Path(str(resources.files("pddplan.catalogs") / name))


def _with_ids(data: Any, section: str, path: Path, lines: Mapping[Loc, int]) -> Any:
    """Copy each entry's mapping key into its ``id`` field."""
    if not isinstance(data, dict) or not isinstance(data.get(section), dict):
        raise InputError(f"{path}:1: {section}: expected a mapping of id -> entry")
    entries = {}
    for key, entry in data[section].items():
        if isinstance(entry, dict):
            if "id" in entry and entry["id"] != key:
                raise InputError(
                    f"{_where(path, lines, (section, key, 'id'))}: {section}.{key}.id: "
                    f"'{entry['id']}' differs from its key '{key}'"
                )
            entry = {"id": str(key), **entry}
        entries[str(key)] = entry
    return {**data, section: entries}


@cache
def _load_hardware(path: Path) -> HardwareCatalog:
    data, lines = read_yaml(path)
    return validate(HardwareCatalog, _with_ids(data, "chips", path, lines), path, lines)


@cache
def _load_models(path: Path) -> dict[str, ModelSpec]:
    data, lines = read_yaml(path)
    data = _with_ids(data, "models", path, lines)
    extra = sorted(set(data) - {"models"})
    if extra:
        loc = (extra[0],)
        raise InputError(f"{_where(path, lines, loc)}: {extra[0]}: unknown key. Allowed: models")
    problems, out = [], {}
    for key, entry in data["models"].items():
        try:
            out[key] = validate(ModelSpec, entry, path, lines, ("models", key))
        except InputError as e:
            problems += e.problems
    if problems:
        raise InputError(problems)
    return out


def load_hardware(path: Path | None = None) -> HardwareCatalog:
    """The hardware catalog at ``path`` (default: the shipped ``catalogs/hardware.yaml``)."""
    return _load_hardware((path or _shipped("hardware.yaml")).resolve())


def load_models(path: Path | None = None) -> dict[str, ModelSpec]:
    """The model catalog at ``path`` (default: the shipped ``catalogs/models.yaml``)."""
    return _load_models((path or _shipped("models.yaml")).resolve())


def unknown_id(kind: str, value: str, known: Iterable[str]) -> str:
    """'unknown chip 'h100' (close: h100-sxm, h100-pcie)' or the full list when none is close."""
    known = sorted(known)
    close = difflib.get_close_matches(value, known, n=4, cutoff=0.4)
    return f"unknown {kind} '{value}'" + (
        f"; close matches: {', '.join(close)}" if close else f"; known: {', '.join(known)}"
    )


# --- scenarios ------------------------------------------------------------------------------
def load_scenario(path: Path) -> tuple[Scenario, HardwareCatalog, dict[str, ModelSpec]]:
    """Load ``path`` and the catalogs it uses; check every cross-reference.

    Raises ``InputError`` listing every problem: unknown keys and ids, bad values, and a
    model that fits no allowed chip configuration for a role.
    """
    data, lines = read_yaml(path)
    try:
        scenario = validate(Scenario, data, path, lines)
    except InputError as e:
        # Report the unknown ids too, so that one run lists every problem of the file.
        raise InputError(e.problems + _raw_id_checks(data, path, lines)) from None
    base = path.parent
    hw_path = scenario.catalogs.hardware and base / scenario.catalogs.hardware
    model_path = scenario.catalogs.models and base / scenario.catalogs.models
    hardware, models = load_hardware(hw_path), load_models(model_path)
    problems = _cross_check(scenario, hardware, models, path, lines)
    if problems:
        raise InputError(problems)
    if scenario.workload.trace is not None:
        scenario = scenario.model_copy(
            update={"workload": fitted_workload(scenario.workload, path)}
        )
    classes = len(workload_classes(scenario.workload))
    for i, option in enumerate(scenario.md_cache or ()):
        if option.md_hit is not None and len(option.md_hit) != classes:
            loc = ("md_cache", i, "md_hit")
            raise InputError(
                f"{_where(path, lines, loc)}: {_fmt(loc)}: {len(option.md_hit)} values; the "
                f"workload has {classes} classes (one MD hit rate per class, in class order)"
            )
    return scenario, hardware, models


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
    classes = [
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


def _raw_id_checks(data: Any, path: Path, lines: Mapping[Loc, int]) -> list[str]:
    """Unknown model, chip and datacenter ids in a scenario that failed validation, checked
    against the catalogs it names (or the shipped ones). Skipped if those catalogs fail to
    load: their own errors come first."""
    if not isinstance(data, dict):
        return []
    paths = data.get("catalogs") if isinstance(data.get("catalogs"), dict) else {}
    try:
        hw_file, model_file = paths.get("hardware"), paths.get("models")
        chips = load_hardware(path.parent / hw_file if isinstance(hw_file, str) else None).chips
        models = load_models(path.parent / model_file if isinstance(model_file, str) else None)
    except InputError:
        return []
    out = []

    def bad(loc: Loc, msg: str) -> None:
        out.append(f"{_where(path, lines, loc)}: {_fmt(loc)}: {msg}")

    if isinstance(data.get("model"), str) and data["model"] not in models:
        bad(("model",), unknown_id("model", data["model"], models))
    dcs = data.get("datacenters") if isinstance(data.get("datacenters"), dict) else {}
    for dc_id, dc in dcs.items():
        listed = dc.get("chips") if isinstance(dc, dict) else None
        for i, chip in enumerate(listed if isinstance(listed, list) else []):
            if isinstance(chip, str) and chip not in chips:
                bad(("datacenters", dc_id, "chips", i), unknown_id("chip", chip, chips))
    links = data.get("links") if isinstance(data.get("links"), list) else []
    for i, link in enumerate(links):
        ends = link.get("between") if isinstance(link, dict) else None
        for end in ends if isinstance(ends, list) else []:
            if isinstance(end, str) and end not in dcs:
                bad(
                    ("links", i, "between"),
                    f"unknown datacenter '{end}' (datacenters: {', '.join(map(str, dcs))})",
                )
    calibration = data.get("calibration") if isinstance(data.get("calibration"), dict) else {}
    per_chip = calibration.get("per_chip") if isinstance(calibration.get("per_chip"), dict) else {}
    for chip in per_chip:
        if chip not in chips:
            bad(("calibration", "per_chip", chip), unknown_id("chip", str(chip), chips))
    return out


def _cross_check(
    s: Scenario,
    hw: HardwareCatalog,
    models: dict[str, ModelSpec],
    path: Path,
    lines: Mapping[Loc, int],
) -> list[str]:
    problems = []

    def bad(loc: Loc, msg: str) -> None:
        problems.append(f"{_where(path, lines, loc)}: {_fmt(loc)}: {msg}")

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
    if s.workload.trace is not None:
        trace = path.parent / s.workload.trace.file
        if not trace.is_file():
            bad(("workload", "trace", "file"), f"trace file not found: {trace}")
    if problems or s.model not in models:
        return problems
    model = models[s.model]
    sizes = s.search.sizes()
    for role in ROLES:
        placed = s.chips_for(role)
        if not placed:
            continue
        fits = any(
            instance_fits(
                model,
                hw.chips[chip],
                g,
                resolve_calibration(hw, chip, s.calibration),
                weight_dtype=s.weight_dtype,
            )
            for chip in {c for _, c in placed}
            for g in sizes
        )
        if not fits:
            chips = ", ".join(sorted({c for _, c in placed}))
            bad(
                ("datacenters",),
                f"{model.id} fits no allowed configuration for role '{role}': chips {chips} at "
                f"{', '.join(map(str, sizes))} GPUs per instance (allow larger instances in "
                "search, or a larger-memory chip)",
            )
    return problems


# --- Hugging Face config import -------------------------------------------------------------
def import_hf_config(
    path: Path,
    model_id: str,
    *,
    total_params_b: float | None = None,
    active_params_b: float | None = None,
) -> str:
    """A models.yaml entry (YAML text) from a Hugging Face ``config.json``."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{e.lineno}: malformed JSON: {e.msg}") from None
    if not isinstance(config, dict):
        raise InputError(f"{path}:1: expected a JSON object (a config.json)")
    entry = hf_config_to_entry(
        config,
        model_id,
        source=f"imported from {path.name}",
        total_params_b=total_params_b,
        active_params_b=active_params_b,
    )
    validate(ModelSpec, {"id": model_id, **entry}, path, {}, ())
    return yaml.safe_dump({"models": {model_id: entry}}, sort_keys=False, width=100)


def add_model_entry(catalog: Path, entry_yaml: str) -> None:
    """Add the entry in ``entry_yaml`` (as ``import_hf_config`` returns it) to a model
    catalog file, creating the file if needed. An existing file keeps its text and comments:
    the entry is appended under its ``models:`` mapping, and the result must load, or the
    file is left untouched."""
    new = yaml.safe_load(entry_yaml)["models"]
    try:
        if not catalog.exists():
            catalog.write_text(entry_yaml, encoding="utf-8")
            return
        old_text = catalog.read_text(encoding="utf-8")
    except OSError as e:
        raise InputError(f"--out: cannot write {catalog}: {e.strerror}") from None
    data, _ = read_yaml(catalog)
    if not isinstance(data, dict) or set(data) != {"models"}:
        raise InputError(f"{catalog}: not a model catalog (expected one top-level key, models)")
    clash = sorted(set(new) & set(data["models"] or {}))
    if clash:
        raise InputError(f"{catalog}: models.{clash[0]} already exists; choose another --id")
    body = entry_yaml.split("\n", 1)[1]  # drop the "models:" line, keep the indented entry
    catalog.write_text(old_text.rstrip("\n") + "\n" + body, encoding="utf-8")
    try:
        _load_models.cache_clear()
        load_models(catalog)
    except InputError:
        catalog.write_text(old_text, encoding="utf-8")
        raise


def load_fleet(path: Path, scenario: Scenario, hardware: HardwareCatalog) -> Fleet:
    """Load a fleet file (or the ``deployment`` of a plan file written by ``pddplan solve
    --out``, whose model must be the scenario's) and check it against the scenario: every pool's datacenter, role
    and chip must be allowed there, every link must be one of the scenario's links and its
    bandwidth one of that link's tiers."""
    data, lines = read_yaml(path)
    prefix: Loc = ()
    if isinstance(data, dict) and "deployment" in data:  # a plan file from `pddplan solve`
        planned_for = data.get("model")
        if planned_for is not None and planned_for != scenario.model:
            raise InputError(
                f"{_where(path, lines, ('model',))}: model: the plan is for '{planned_for}', "
                f"the scenario serves '{scenario.model}'"
            )
        data, prefix = data["deployment"], ("deployment",)
    fleet = validate(Fleet, data, path, lines, prefix)
    problems = []

    def bad(loc: Loc, msg: str) -> None:
        loc = (*prefix, *loc)
        problems.append(f"{_where(path, lines, loc)}: {_fmt(loc)}: {msg}")

    for i, pool in enumerate(fleet.pools):
        dc = scenario.datacenters.get(pool.datacenter)
        if dc is None:
            bad(
                ("pools", i, "datacenter"),
                f"unknown datacenter '{pool.datacenter}' "
                f"(scenario datacenters: {', '.join(scenario.datacenters)})",
            )
            continue
        if pool.role not in dc.roles:
            bad(
                ("pools", i, "role"),
                f"role '{pool.role}' is not allowed in {pool.datacenter} "
                f"(allowed: {', '.join(dc.roles)})",
            )
        allowed = (dc.role_chips or {}).get(pool.role, dc.chips)
        if pool.chip not in allowed:
            close = (
                unknown_id("chip", pool.chip, hardware.chips)
                if pool.chip not in hardware.chips
                else ""
            )
            bad(
                ("pools", i, "chip"),
                f"chip '{pool.chip}' is not allowed in {pool.datacenter}"
                + (f" for {pool.role}" if allowed != dc.chips else "")
                + f" (allowed: {', '.join(allowed)})"
                + (f"; {close}" if close else ""),
            )
    prefill_dcs = {p.datacenter for p in fleet.pools if p.role == "prefill"}
    for i, pool in enumerate(fleet.pools):
        if pool.role == "relay_decode" and pool.datacenter not in prefill_dcs:
            bad(
                ("pools", i, "datacenter"),
                f"relay decode must sit beside prefill (RDMA); "
                f"{pool.datacenter} has no prefill pool",
            )
    for dc_id, dc in scenario.datacenters.items():
        used = sum(p.gpus_per_instance * p.instances for p in fleet.pools if p.datacenter == dc_id)
        if dc.max_gpus is not None and used > dc.max_gpus:
            bad(("pools",), f"{used} GPUs in {dc_id} exceed its max_gpus ({dc.max_gpus})")
    seen_pairs: set[frozenset[str]] = set()
    for i, choice in enumerate(fleet.links):
        if frozenset(choice.between) in seen_pairs:
            bad(
                ("links", i, "between"),
                f"a second entry for {choice.between[0]}-{choice.between[1]}; "
                "give one bandwidth per link",
            )
        seen_pairs.add(frozenset(choice.between))
        link = next((x for x in scenario.links if set(x.between) == set(choice.between)), None)
        if link is None:
            bad(
                ("links", i, "between"),
                f"the scenario has no link between {choice.between[0]} and {choice.between[1]}",
            )
        elif choice.gbps not in {t.gbps for t in link.tiers}:
            bad(
                ("links", i, "gbps"),
                f"{choice.gbps:g} Gbps is not a tier of that link "
                f"(tiers: {', '.join(f'{t.gbps:g}' for t in link.tiers)})",
            )
    problem = md_cache_problem(scenario, fleet)
    if problem:
        bad(("md_cache_gb_per_gpu",), problem)
    if problems:
        raise InputError(problems)
    return fleet
