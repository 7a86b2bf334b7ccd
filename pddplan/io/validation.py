"""Validating parsed data against the spec's models, with every problem as one located
line: ``FILE:LINE: KEY.PATH: what is wrong (what is allowed)``."""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from pddplan.errors import InputError
from pddplan.spec.limits import CEILINGS
from pddplan.spec.source import Loc, SourceMap, quote

T = TypeVar("T", bound=BaseModel)


def validate(cls: type[T], data: Any, source: SourceMap, prefix: Loc = ()) -> T:
    """Validate ``data`` as ``cls``; on failure raise one ``InputError`` with every problem."""
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        raise InputError(_messages(cls, e, source, prefix)) from None


def _messages(
    cls: type[BaseModel], err: ValidationError, source: SourceMap, prefix: Loc
) -> list[str]:
    """One located line per problem: the unknown keys of one mapping on one line (with the
    keys allowed there), its missing keys on one line, and no "too short" for a list whose
    items have problems of their own (pydantic counts only the items that passed)."""
    items = err.errors(include_url=False)
    locs = [prefix + tuple(p for p in item["loc"] if not _is_union_tag(p)) for item in items]
    unknown: dict[Loc, list[Loc]] = {}
    missing: dict[Loc, list[Loc]] = {}
    for item, loc in zip(items, locs, strict=True):
        if item["type"] == "extra_forbidden":
            unknown.setdefault(loc[:-1], []).append(loc)
        elif item["type"] == "missing":
            missing.setdefault(loc[:-1], []).append(loc)
    out = []
    for item, loc in zip(items, locs, strict=True):
        kind, msg = item["type"], item["msg"]
        if kind == "extra_forbidden":
            group = unknown[loc[:-1]]
            if loc != group[0]:
                continue  # said on the group's first key's line
            allowed = _allowed_keys(cls, loc[len(prefix) : -1])
            if len(group) == 1:
                msg = f"unknown key {quote(str(loc[-1]))}"
                import difflib

                close = difflib.get_close_matches(str(loc[-1]), allowed, n=1, cutoff=0.5)
                if close:
                    msg += f"; did you mean '{close[0]}'?"
            else:
                names = ", ".join(quote(str(g[-1]), 40) for g in group[:12])
                more = f" and {len(group) - 12} more" if len(group) > 12 else ""
                msg = f"{len(group)} unknown keys: {names}{more}"
                loc = loc[:-1]
                out.append(f"{source.where(group[0])}: {_fmt(loc)}: {msg}" + (
                    f"; allowed: {', '.join(allowed)}" if allowed else ""
                ))  # fmt: skip
                continue
            if allowed:
                msg += f"; allowed: {', '.join(allowed)}"
        elif kind == "missing":
            group = missing[loc[:-1]]
            if loc != group[0]:
                continue
            if len(group) == 1:
                msg = f"missing required key '{loc[-1]}'"
            else:
                keys = ", ".join(f"'{g[-1]}'" for g in group)
                loc, msg = loc[:-1], f"missing required keys {keys}"
        elif kind == "too_short" and any(
            other[: len(loc)] == loc and len(other) > len(loc) for other in locs
        ):
            continue  # its items' own problems are the news
        elif kind in ("value_error", "assertion_error"):
            msg = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
        else:
            msg = f"{msg[0].lower()}{msg[1:]}, got {quote(item['input'])}"
            if kind == "less_than_equal" and item.get("ctx", {}).get("le") in CEILINGS:
                msg += " (a ceiling far above any real deployment; docs/scenarios.md#input-limits)"
        out.append(source.problem(loc, msg))
    return out


def _fmt(loc: Loc) -> str:
    """A key path as a message names it (``(top level)`` for none)."""
    from pddplan.spec.source import fmt_loc

    return quote(fmt_loc(loc), 120, quotes=False)


def _is_union_tag(part: str | int) -> bool:
    # pydantic adds the union member's type name to the location (e.g. "int", "literal[...]"),
    # or a tagged union's tag (the spec's tags start "union:").
    return isinstance(part, str) and (
        part in ("int", "float", "str", "bool")
        or part.startswith(("literal[", "constrained-", "union:"))
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
            members = [_unwrap(a) for a in typing.get_args(tp) if a is not type(None)]
            models = [a for a in members if _is_model(a) or typing.get_origin(a)]
            return (models or members)[0]
        else:
            return tp


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)
