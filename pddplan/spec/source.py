"""Where an input came from: a file and the line of every key path in it, so that a check
made anywhere (the loader, the performance model, the planner) reports the problem as
``FILE:LINE: KEY.PATH: what is wrong``."""

from __future__ import annotations

import reprlib
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
        return f"{self.where(loc)}: {quote(fmt_loc(loc), 120, quotes=False)}: {message}"


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 80
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 6
_REPR.maxlevel = 3


def quote(value: object, limit: int = 80, *, quotes: bool = True) -> str:
    """``value`` as a message shows it: a string in quotes, anything else as its ``repr``,
    cut to about ``limit`` characters with the full length said (a bad value may be a
    megabyte long, and a message is one line). Built with ``reprlib``, so a huge list is
    never rendered whole to be cut."""
    if isinstance(value, str):
        text = value.replace("\n", "\\n")
        if len(text) > limit:
            text = f"{text[: limit - 3]}... ({len(value):,} characters)"
        return f"'{text}'" if quotes else text
    text = _REPR.repr(value).replace("\n", "\\n")
    return text if len(text) <= limit + 20 else f"{text[:limit]}..."
