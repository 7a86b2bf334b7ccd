"""Rich renderables for the terminal: the helpers every report's tables share (``grid``,
``ROLE_LABELS``); the tables of each subject are in ``catalog``, ``plan``, ``workload``,
``compare``, ``calibration``, ``simulation`` and ``sweeps``. Only this package and the CLI
know rich; every function returns a renderable and prints nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich import box
from rich.table import Table


def grid(title: str, headers: Sequence[str], text: int = 0) -> Table:
    """A compact table: numbers never wrap; a narrow terminal wraps the text column
    (``text``, left-aligned; the ones before it are left-aligned too) instead."""
    t = Table(
        title=title or None,
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        pad_edge=False,
        collapse_padding=True,
    )
    for i, col in enumerate(headers):
        t.add_column(col, justify="left" if i <= text else "right", no_wrap=i != text,
                     overflow="fold")  # fmt: skip
    return t


ROLE_LABELS = {"prefill": "P", "relay_decode": "RLD", "main_decode": "MD"}


SEGMENT_LABELS = {
    "queue": "prefill queue",
    "prefill": "prefill passes",
    "transfer": "KV transfer",
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
    return "—" if x is None else f"{x:,.2f} s"


def _total(v: Mapping[str, float | None]) -> float | None:
    parts = [v.get(k) for k in SEGMENT_LABELS]
    return None if any(x is None for x in parts) else sum(x for x in parts if x is not None)
