"""Rich renderables for the terminal: the helpers every report's tables share (``grid``,
``ROLE_LABELS``); the tables of each subject are in ``catalog``, ``plan``, ``workload``,
``compare``, ``calibration``, ``simulation`` and ``sweeps``. Only this package and the CLI
know rich; every function returns a renderable and prints nothing."""

from __future__ import annotations

from collections.abc import Sequence

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
