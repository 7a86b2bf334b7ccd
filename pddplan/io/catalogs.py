"""Loading the hardware and model catalogs (the shipped ones, or files a scenario names)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from pddplan.errors import ArgumentError, InputError
from pddplan.io.located import read_yaml
from pddplan.io.validation import validate
from pddplan.spec.acquisition import AcquisitionCatalog
from pddplan.spec.engine import EngineCatalog, chip_knobs, handoff_problems
from pddplan.spec.hardware import ChipSpec, HardwareCatalog
from pddplan.spec.llm import ModelSpec
from pddplan.spec.readonly import ReadOnlyDict
from pddplan.spec.scenario import ENGINE_ROLE_KEYS, ROLES, EngineRoles, Scenario
from pddplan.spec.source import Loc, SourceMap


def _shipped(name: str) -> Path:
    import pddplan.catalogs  # the shipped files: a package, wherever it is installed

    return Path(pddplan.catalogs.__file__).parent / name


def _with_ids(data: Any, section: str, source: SourceMap) -> Any:
    """Copy each entry's mapping key into its ``id`` field."""
    if not isinstance(data, dict) or not isinstance(data.get(section), dict):
        raise InputError(f"{source.path}:1: {section}: expected a mapping of id -> entry")
    entries = {}
    for key, entry in data[section].items():
        if isinstance(entry, dict):
            if "id" in entry and entry["id"] != key:
                raise InputError(
                    f"{source.where((section, key, 'id'))}: {section}.{key}.id: "
                    f"'{entry['id']}' differs from its key '{key}'"
                )
            entry = {"id": str(key), **entry}
        entries[str(key)] = entry
    return {**data, section: entries}


def _identity(path: Path) -> tuple[Path, int, int]:
    """A catalog file as a cache key: its resolved path, modification time and size, so that
    an edited file is read again (a file that cannot be stat'ed or resolved, a loop of
    symbolic links, is read, and fails, there)."""
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):  # Python 3.11 raises RuntimeError on a loop
        return path, -1, -1
    try:
        st = resolved.stat()
    except OSError:
        return resolved, -1, -1
    return resolved, st.st_mtime_ns, st.st_size


@cache
def _load_hardware(file: tuple[Path, int, int]) -> HardwareCatalog:
    data, source = read_yaml(file[0])
    return validate(HardwareCatalog, _with_ids(data, "chips", source), source)


@cache
def _load_models(file: tuple[Path, int, int]) -> ReadOnlyDict[str, ModelSpec]:
    path = file[0]
    data, source = read_yaml(path)
    data = _with_ids(data, "models", source)
    extra = sorted(set(data) - {"models"})
    if extra:
        loc = (extra[0],)
        raise InputError(f"{source.where(loc)}: {extra[0]}: unknown key. Allowed: models")
    problems, out = [], {}
    for key, entry in data["models"].items():
        try:
            out[key] = validate(ModelSpec, entry, source, ("models", key))
        except InputError as e:
            problems += e.problems
    if problems:
        raise InputError(problems)
    return ReadOnlyDict(out)


@cache
def _load_engines(file: tuple[Path, int, int]) -> EngineCatalog:
    data, source = read_yaml(file[0])
    return validate(EngineCatalog, _with_ids(data, "engines", source), source)


@cache
def _load_acquisition(file: tuple[Path, int, int]) -> AcquisitionCatalog:
    data, source = read_yaml(file[0])
    return validate(AcquisitionCatalog, _with_ids(data, "chips", source), source)


def load_acquisition(path: Path | None = None) -> AcquisitionCatalog:
    """How each chip can be had over a horizon (owned, reserved), from ``path`` (default:
    the shipped ``catalogs/acquisition.yaml``): read once per version of the file and
    shared, as ``load_hardware``."""
    return _load_acquisition(_identity(path or _shipped("acquisition.yaml")))


def load_engines(path: Path | None = None) -> EngineCatalog:
    """The engine profiles at ``path`` (default: the shipped ``catalogs/engines.yaml``),
    read once per version of the file and shared, as ``load_hardware``."""
    return _load_engines(_identity(path or _shipped("engines.yaml")))


def load_hardware(path: Path | None = None) -> HardwareCatalog:
    """The hardware catalog at ``path`` (default: the shipped ``catalogs/hardware.yaml``),
    read once per version of the file (kept by path, modification time and size) and shared
    by every caller: read-only (its mappings refuse changes)."""
    return _load_hardware(_identity(path or _shipped("hardware.yaml")))


def load_models(path: Path | None = None) -> ReadOnlyDict[str, ModelSpec]:
    """The model catalog at ``path`` (default: the shipped ``catalogs/models.yaml``), by
    model id: read once per version of the file and shared, as ``load_hardware``."""
    return _load_models(_identity(path or _shipped("models.yaml")))


def checked_engine(
    engines: EngineCatalog,
    hardware: HardwareCatalog,
    engine_id: str | None,
    chips: Iterable[str] = (),
) -> str:
    """``engine_id`` (default: ``engines``' default), checked to exist and to have a
    profile for the family of each of ``chips``; ``ArgumentError`` for ``--engine`` if
    not."""
    name = engine_id or engines.default
    if "=" in name:
        raise ArgumentError(
            "serving_engine",
            f"{{argument}}: '{name}': one engine's name here (an instance runs one engine); "
            "ROLE=NAME is for a scenario's roles",
        )
    if name not in engines.engines:
        raise ArgumentError("serving_engine", f"{{argument}}: {unknown_engine(name, engines)}")
    for chip in chips:
        try:
            chip_knobs(engines.engines[name], hardware, chip)
        except ValueError as e:
            raise ArgumentError("serving_engine", f"{{argument}}: {e}") from None
    return name


def unknown_engine(name: str, engines: EngineCatalog) -> str:
    """'unknown engine 'x'; close matches: ...; profiles: ...' (every profile named)."""
    said = unknown_id("engine", name, engines.engines)
    if "; known:" in said:
        return said.replace("; known:", "; profiles:")
    return f"{said}; profiles: {', '.join(sorted(engines.engines))}"


def engine_choice_problems(
    s: Scenario, hardware: HardwareCatalog, engines: EngineCatalog
) -> list[tuple[Loc, str]]:
    """What is wrong with the scenario's ``engine`` against the engine profiles, each with
    the key that says it: an engine that is not a profile; a role's engine without a
    profile for the family of a chip the role may use (at that chip where the scenario
    names no engine for the role); roles that hand each other the KV cache on engines no
    released software connects (``handoff_problems``), at the taking role's key."""
    out: list[tuple[Loc, str]] = []
    e = s.engine
    named: dict[str, Loc] = {}  # the key that names each role's engine
    if isinstance(e, str):
        named = dict.fromkeys(ROLES, ("engine",))
        given: list[tuple[Loc, str]] = [(("engine",), e)]
    elif isinstance(e, EngineRoles):
        given = [(("engine", k), v) for k in ENGINE_ROLE_KEYS if (v := getattr(e, k)) is not None]
        for role in ROLES:
            key = role if getattr(e, role) is not None else "default" if e.default else None
            if key is not None:
                named[role] = ("engine", key)
    else:
        given = []
    for loc, name in given:
        if name not in engines.engines:
            out.append((loc, unknown_engine(name, engines)))
    if out:
        return out
    roles = s.role_engines(engines.default)
    said: set[tuple[str, str]] = set()
    for role in ROLES:
        name = roles[role]
        for dc_id, chip in s.chips_for(role):
            if chip not in hardware.chips or (name, chip) in said:
                continue
            try:
                chip_knobs(engines.engines[name], hardware, chip)
            except ValueError as err:
                said.add((name, chip))
                dc = s.datacenters[dc_id]
                where = named.get(role)
                if where is None:
                    where = ("datacenters", dc_id, "chips", dc.chips.index(chip))
                why = str(err)
                out.append((where, why if len(set(roles.values())) == 1 else f"{role}: {why}"))
    if out:
        return out
    for taker, why in handoff_problems(engines, roles, s.roles_run()):
        out.append((named.get(taker, ("engine",)), why))
    return out


def engine_option(
    text: str | Mapping[str, str], s: Scenario, hardware: HardwareCatalog, engines: EngineCatalog
) -> str | dict[str, str]:
    """``--engine``'s value as the scenario's new ``engine``: one profile's name for every
    role, or ``ROLE=NAME,...`` (or a mapping) over the engines the scenario's roles run
    (``default=NAME`` for the roles neither names); one name where every role then runs
    the same engine. ``ArgumentError`` for a bad form, an unknown role or engine, a profile
    missing for a chip a role may use, or roles no released software connects."""
    if isinstance(text, str) and "=" not in text:
        choice: str | dict[str, str] = text.strip()
    else:
        pairs = _engine_pairs(text)
        base = s.engine
        if isinstance(base, EngineRoles):
            merged = {k: v for k in ENGINE_ROLE_KEYS if (v := getattr(base, k)) is not None}
        else:  # one engine for every role, named or not (``Scenario.role_engines``)
            merged = {"default": s.role_engines(engines.default)["prefill"]}
        merged.update(pairs)
        choice = merged
    from pydantic import ValidationError

    try:
        scenario = Scenario.model_validate({**s.model_dump(mode="json"), "engine": choice})
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        msg = str(first["msg"]).removeprefix("Value error, ")
        raise ArgumentError("serving_engine", f"{{argument}}: {msg}") from None
    found = engine_choice_problems(scenario, hardware, engines)
    if found:
        raise ArgumentError("serving_engine", "{argument}: " + "; ".join(m for _, m in found))
    roles = scenario.role_engines(engines.default)
    if len(set(roles.values())) == 1:
        return next(iter(roles.values()))
    return choice


def _engine_pairs(text: str | Mapping[str, str]) -> dict[str, str]:
    """``prefill=sglang,main_decode=vllm`` as a mapping; ``ArgumentError`` for a part
    without ``=``, an unknown role or a role given twice."""
    if not isinstance(text, str):
        items = list(text.items())
    else:
        items = []
        for part in text.split(","):
            key, eq, value = part.partition("=")
            if not eq or not key.strip() or not value.strip():
                raise ArgumentError(
                    "serving_engine",
                    f"{{argument}}: '{part.strip()}': give NAME (every role) or ROLE=NAME,... "
                    f"(roles: {', '.join(ENGINE_ROLE_KEYS)})",
                )
            items.append((key.strip(), value.strip()))
    out: dict[str, str] = {}
    for key, value in items:
        if key not in ENGINE_ROLE_KEYS:
            raise ArgumentError(
                "serving_engine",
                f"{{argument}}: unknown role '{key}'; roles: {', '.join(ENGINE_ROLE_KEYS)}",
            )
        if key in out:
            raise ArgumentError("serving_engine", f"{{argument}}: '{key}' given twice")
        out[key] = value
    return out


def unknown_id(kind: str, value: str, known: Iterable[str]) -> str:
    """'unknown chip 'h100' (close: h100-sxm, h100-pcie)' or the full list when none is close."""
    known = sorted(known)
    import difflib

    close = difflib.get_close_matches(value, known, n=4, cutoff=0.4)
    return f"unknown {kind} '{value}'" + (
        f"; close matches: {', '.join(close)}" if close else f"; known: {', '.join(known)}"
    )


class Catalogs:
    """The hardware, model and engine catalogs (each read when first used), with lookups
    that name what is close to a wrong id."""

    def __init__(
        self,
        hardware: Path | None = None,
        models: Path | None = None,
        engines: Path | None = None,
    ) -> None:
        self.hardware_path, self.models_path, self.engines_path = hardware, models, engines

    @cached_property
    def engines(self) -> EngineCatalog:
        return load_engines(self.engines_path)

    def engine(self, engine_id: str | None, chips: Iterable[str] = ()) -> str:
        """``engine_id`` (default: the catalog's default engine), checked to exist and to
        have a profile for each of ``chips``; ``ArgumentError`` for ``--engine`` if not."""
        return checked_engine(self.engines, self.hardware, engine_id, chips)

    @cached_property
    def hardware(self) -> HardwareCatalog:
        return load_hardware(self.hardware_path)

    @cached_property
    def models(self) -> ReadOnlyDict[str, ModelSpec]:
        return load_models(self.models_path)

    def chip(self, chip_id: str) -> ChipSpec:
        if chip_id not in self.hardware.chips:
            known = unknown_id("chip", chip_id, self.hardware.chips)
            raise ArgumentError("chip", f"{{argument}}: {known}")
        return self.hardware.chips[chip_id]

    def model(self, model_id: str) -> ModelSpec:
        if model_id not in self.models:
            known = unknown_id("model", model_id, self.models)
            raise ArgumentError("model", f"{{argument}}: {known}")
        return self.models[model_id]


def load_catalogs(
    hardware: Path | None = None,
    models: Path | None = None,
    *,
    engines: Path | None = None,
    base: Path | None = None,
) -> Catalogs:
    """The hardware, model and engine catalogs at these paths (default: the shipped ones),
    read when first used; relative paths are taken from ``base`` (a scenario file's
    folder)."""

    def at(p: Path | None) -> Path | None:
        return base / p if (p is not None and base is not None) else p

    return Catalogs(at(hardware), at(models), at(engines))
