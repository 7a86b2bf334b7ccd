"""The model's cost functions take a number or an array of numbers (one per request class,
pass or rate) and answer in kind: a number costs a Python float, fast in the simulator's
loops; an array is one numpy call for a whole table. ``Num`` types such a function."""

from __future__ import annotations

from typing import Any, TypeVar, overload

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]
"""A float array (one value per class, per pass, per rate...)."""
Num = TypeVar("Num", float, Array)
"""A number or an array of them; a function typed with it answers in kind."""
Value = float | Array
"""A number or an array, where a function mixes both (a scalar share of an array of
tokens): the result is an array if any argument is."""


@overload
def lesser(a: float, b: float) -> float: ...
@overload
def lesser(a: Array, b: Array | float) -> Array: ...
@overload
def lesser(a: float, b: Array) -> Array: ...
@overload
def lesser(a: Value, b: Value) -> Value: ...
def lesser(a: Any, b: Any) -> Any:
    """Elementwise minimum: ``min`` for two numbers (fast), ``np.minimum`` for arrays."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.minimum(a, b)
    return min(a, b)


@overload
def greater(a: float, b: float) -> float: ...
@overload
def greater(a: Array, b: Array | float) -> Array: ...
@overload
def greater(a: float, b: Array) -> Array: ...
@overload
def greater(a: Value, b: Value) -> Value: ...
def greater(a: Any, b: Any) -> Any:
    """Elementwise maximum: ``max`` for two numbers (fast), ``np.maximum`` for arrays."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.maximum(a, b)
    return max(a, b)
