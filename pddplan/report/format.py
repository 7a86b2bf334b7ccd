"""How numbers read in every report (terminal tables and documents alike): a missing value
is a dash, money has a dollar sign and thousands separators."""

from __future__ import annotations

MISSING = "—"
"""What a report shows for a value it does not have."""


def num(value: float | None, fmt: str = ",.4g") -> str:
    return MISSING if value is None else format(value, fmt)


def money(value: float | None, digits: int = 2) -> str:
    return MISSING if value is None else f"${value:,.{digits}f}"
