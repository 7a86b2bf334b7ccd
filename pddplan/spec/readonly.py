"""A mapping that refuses changes and still pickles: what a shared, cached value hands out."""

from __future__ import annotations

from typing import Any, NoReturn, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class ReadOnlyDict(dict[K, V]):
    """A ``dict`` whose every change raises ``TypeError`` (copy it with ``dict(...)`` to
    change the copy). A ``dict`` subclass, so it compares, serializes and reads like one,
    and pickles (``types.MappingProxyType`` does not, and a problem crosses processes).
    The catalogs are read once and shared by every caller (``pddplan.io.catalogs``): a
    change made by one would reach all."""

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("a catalog mapping is read-only; change a copy (dict(...))")

    __setitem__ = __delitem__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse
    __ior__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (dict(self),)
