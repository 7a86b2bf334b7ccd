"""Where an input came from: a file and the line of every key path in it, so that a check
made anywhere (the loader, the performance model, the planner) reports the problem as
``FILE:LINE: KEY.PATH: what is wrong``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

Loc = tuple[str | int, ...]
"""A key path in a document: mapping keys and sequence indexes."""


def fmt_loc(loc: Iterable[str | int]) -> str:
    """``('links', 0, 'rtt_ms')`` as ``links[0].rtt_ms``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


@dataclass(frozen=True)
class SourceMap:
    """A file and the 1-based line of each key path in it (the nearest enclosing key's line
    stands in for a path the file does not spell out)."""

    path: Path
    lines: Mapping[Loc, int] = field(default_factory=dict, repr=False, compare=False)

    def line(self, loc: Loc) -> int | None:
        for n in range(len(loc), -1, -1):
            if loc[:n] in self.lines:
                return self.lines[loc[:n]]
        return None

    def where(self, loc: Loc) -> str:
        """``FILE:LINE`` of ``loc``, or ``FILE`` when no line is known."""
        line = self.line(loc)
        return f"{self.path}:{line}" if line else str(self.path)

    def problem(self, loc: Loc, message: str) -> str:
        """One located line: ``FILE:LINE: KEY.PATH: message``."""
        return f"{self.where(loc)}: {fmt_loc(loc)}: {message}"
