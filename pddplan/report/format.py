"""How numbers read in every report (terminal tables and documents alike): a missing value
is a dash, money has a dollar sign and thousands separators."""

from __future__ import annotations

MISSING = "—"
"""What a report shows for a value it does not have."""


def num(value: float | None, fmt: str = ",.4g") -> str:
    return MISSING if value is None else format(value, fmt)


def money(value: float | None, digits: int = 2) -> str:
    return MISSING if value is None else f"${value:,.{digits}f}"


def sig(x: float | None) -> str:
    """Three significant figures with their trailing zeros (``4.00``, ``10.6``, ``123``),
    so figures in one column read alike."""
    if x is None or x != x:
        return MISSING
    if abs(x) < 10:
        return f"{x:.2f}"
    if abs(x) < 100:
        return f"{x:.1f}"
    return f"{x:,.0f}"


def readable(x: float | None) -> str:
    """Four significant figures without an exponent where one is not needed: ``22,710``
    (not ``2.271e+04``) beside ``3,450``, ``12.35``, ``0.0042``; an exponent only below
    1e-4."""
    if x is None or x != x:
        return MISSING
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if x == 0 or abs(x) >= 1e-4:
        return f"{x:.4g}"
    return f"{x:.3e}"
