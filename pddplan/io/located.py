"""Reading YAML with the line of every key, so that every problem can be reported as
``FILE:LINE: KEY.PATH: what is wrong``. The only module of the package, with the HF and
workload writers, that knows YAML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pddplan.errors import InputError
from pddplan.spec.source import Loc, SourceMap, fmt_loc

Loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML was built with it (it parses a catalog in a tenth of the
time), else the pure-Python one; both give the same data and the same marks."""


def read_text(path: Path) -> str:
    """``path``'s text (UTF-8), or one located ``InputError`` when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read: {e}") from None


def read_yaml(path: Path) -> tuple[Any, SourceMap]:
    """Parse ``path``; return the data and the 1-based line of every key path."""
    text = read_text(path)
    loader = Loader(text)
    try:  # one parse: the node tree gives the lines, then the data
        node = loader.get_single_node()
        if node is None:
            raise InputError(f"{path}: the file is empty")
        lines: dict[Loc, int] = {}
        duplicates: list[str] = []
        _index_lines(node, (), lines, duplicates, path)
        if duplicates:
            raise InputError(duplicates)
        data = loader.construct_document(node)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(e, "problem", None) or str(e)
        raise InputError(f"{where}: malformed YAML: {problem}") from None
    finally:
        loader.dispose()
    return data, SourceMap(path, lines)


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
                    f"{path}:{key_node.start_mark.line + 1}: {fmt_loc((*loc, key))}: "
                    f"duplicate key (a key may appear once per mapping)"
                )
            seen.add(key)
            lines[(*loc, key)] = key_node.start_mark.line + 1
            _index_lines(value_node, (*loc, key), lines, dups, path)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index_lines(item, (*loc, i), lines, dups, path)
