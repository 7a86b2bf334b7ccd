"""Loading the hardware and model catalogs (the shipped ones, or files a scenario names)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from pddplan.errors import InputError
from pddplan.io.located import Loc, read_yaml, where
from pddplan.io.validation import validate
from pddplan.spec.hardware import HardwareCatalog
from pddplan.spec.llm import ModelSpec


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
                    f"{where(path, lines, (section, key, 'id'))}: {section}.{key}.id: "
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
        raise InputError(f"{where(path, lines, loc)}: {extra[0]}: unknown key. Allowed: models")
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
