"""Rich renderables for the terminal: the helpers every report's tables share (``grid``);
the tables of each subject are in ``catalog``, ``plan``, ``workload``, ``compare``,
``calibration``, ``simulation`` and ``sweeps``. Only this package and the CLI know rich;
every function returns a renderable and prints nothing."""

from __future__ import annotations

import copy
import dataclasses
import textwrap
from collections.abc import Iterable, Mapping, Sequence

from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Column, Table

_UNBOUNDED = 1_000_000
"""A width no terminal has: a table measured at it shows its natural width."""


class Grid(Table):
    """A ``Table`` that fits the width it is printed at without cutting a word: when its
    no-wrap columns (numbers, ids) and the longest word of its text column do not fit, it
    breaks its headers at their spaces (never inside a word), then leaves out its ``drop``
    columns, least important first, and names them in its caption. At a width where it
    fits, it is printed as built."""

    def __init__(self, *args: object, drop: Sequence[int] = (), **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.drop = tuple(drop)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from Table.__rich_console__(self.fitted(console, options), console, options)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Table.__rich_measure__(self.fitted(console, options), console, options)

    def fitted(self, console: Console, options: ConsoleOptions) -> Table:
        """This table as it is printed at ``options.max_width``: itself where it fits."""
        width = options.max_width
        if _needed(self, console, options) <= width:
            return self
        wide = options.update_width(_UNBOUNDED)
        columns = {i: _short_header(c, console, wide) for i, c in enumerate(self.columns)}
        t = _with_columns(self, list(columns.values()))
        left_out = []
        for i in self.drop:
            if _needed(t, console, options) <= width:
                break
            del columns[i]
            t = _with_columns(self, list(columns.values()))
            left_out.append(" ".join(str(self.columns[i].header).split()))
        if left_out:
            note = (
                f"Left out at {width} columns: {', '.join(left_out)}; a wider terminal shows them."
            )
            t.caption = f"{t.caption}\n{note}" if t.caption else note
        return t


def _cell_widths(cells: Iterable[object], console: Console, options: ConsoleOptions) -> Measurement:
    """The widest cell's (minimum, maximum) width: its longest word, its longest line."""
    found = [Measurement.get(console, options, c) for c in cells]  # type: ignore[arg-type]
    return Measurement(max(m.minimum for m in found), max(m.maximum for m in found))


def _needed(t: Table, console: Console, options: ConsoleOptions) -> int:
    """The narrowest ``t`` prints without cutting a word: every no-wrap column at its widest
    cell, every wrapping one at its longest word."""
    wide = options.update_width(_UNBOUNDED)
    natural = Table.__rich_measure__(t, console, wide).maximum  # as built, never fitted
    for c in t.columns:
        if not c.no_wrap:
            m = _cell_widths([c.header, *c.cells], console, wide)
            natural -= m.maximum - m.minimum
    return natural


def _short_header(c: Column, console: Console, options: ConsoleOptions) -> Column:
    """``c`` with its header broken at spaces into at most two lines, as narrow as its
    cells allow; a header already broken by hand, one word, or a wrapping column's, kept."""
    header = c.header
    if not c.no_wrap or not isinstance(header, str) or "\n" in header or " " not in header:
        return c
    cells = list(c.cells)
    widest = _cell_widths(cells, console, options).maximum if cells else 0
    target = max(widest, *(len(w) for w in header.split()))
    while True:
        lines = textwrap.wrap(header, target, break_long_words=False, break_on_hyphens=False)
        if len(lines) <= 2:
            return dataclasses.replace(c, header="\n".join(lines))
        target += 1


def _with_columns(t: Table, columns: list[Column]) -> Table:
    """A copy of ``t`` (a plain table, printed as it is) with these columns."""
    out = copy.copy(t)
    out.__class__ = Table
    out.columns = [dataclasses.replace(c, _index=i) for i, c in enumerate(columns)]
    return out


def grid(
    title: str,
    headers: Sequence[str],
    text: int | None = 0,
    *,
    left: int | None = None,
    drop: Sequence[int] = (),
) -> Grid:
    """A compact table: numbers and ids never wrap; a narrow terminal wraps the text column
    (``text``, left-aligned; ``None``: there is none) instead, then breaks the headers at
    their spaces, then leaves out the ``drop`` columns (indexes, least important first).
    The columns up to ``left`` (default: up to the text column, or the first) and the text
    column are left-aligned, the others right-aligned."""
    t = Grid(
        title=title or None,
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        pad_edge=False,
        collapse_padding=True,
        drop=drop,
    )
    if left is None:
        left = 0 if text is None else text
    for i, col in enumerate(headers):
        t.add_column(col, justify="left" if i <= left or i == text else "right", no_wrap=i != text,
                     overflow="fold")  # fmt: skip
    return t


SEGMENT_LABELS = {
    "queue": "prefill queue",
    "prefill": "prefill passes",
    "transfer": "KV to main decode",
    "relay": "KV to relay decode",
    "first_token": "first token",
}
"""The TTFT's segments (``pddplan.evaluation.evaluator.TTFT_SEGMENTS``) as reports name them."""


def breakdown_table(
    title: str, columns: Mapping[str, Mapping[str, float | None] | Mapping[str, float] | None]
) -> Table:
    """The mean TTFT by segment, one column per condition (``at the demand``, ``analytic``
    ...), with their sum last; a column without figures is left out."""
    shown = {k: v for k, v in columns.items() if v is not None}
    t = grid(title, ("segment", *shown))
    for key, label in SEGMENT_LABELS.items():
        t.add_row(label, *(_seconds(v.get(key)) for v in shown.values()))
    t.add_row("mean TTFT", *(_seconds(_total(v)) for v in shown.values()), style="bold")
    return t


def _seconds(x: float | None) -> str:
    """Seconds; a dash for none, and for a queue that grows without bound (infinite)."""
    return "—" if x is None or not x < float("inf") else f"{x:,.2f} s"


def _total(v: Mapping[str, float | None]) -> float | None:
    parts = [v.get(k) for k in SEGMENT_LABELS]
    return None if any(x is None for x in parts) else sum(x for x in parts if x is not None)
