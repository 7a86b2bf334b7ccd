"""The base class of every validated input object, and the attribute docstrings that
describe their fields in the JSON Schema."""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap
import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

from pddplan.spec.source import quote

INT64_MAX = 2**63 - 1
"""The largest integer an input may hold: what numpy's int64 and the solvers take."""


class Frozen(BaseModel):
    """A validated, immutable value. Unknown keys are errors, so typos cannot pass silently."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", validate_default=True, allow_inf_nan=False
    )
    # Field docstrings are read when a schema is asked for (``with_field_docs``), not at
    # class creation: pydantic's use_attribute_docstrings parses every class's source on
    # import, a sixth of the command line's start-up.

    @field_validator("*", mode="before")
    @classmethod
    def _no_coerced_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        """Pydantic's lax mode would read YAML's ``true``/``yes`` as 1 in a number field,
        ``4.0`` or ``"4"`` as 4 in an integer one, and pass a 41-digit integer to numpy as
        an object: each is refused here, in lists and mappings too."""
        if info.field_name is not None:
            problem = _scalar_problem(value, cls.model_fields[info.field_name].annotation)
            if problem is not None:
                raise ValueError(problem)
        return value


def _scalar_problem(value: Any, annotation: Any, *, in_union: bool = False) -> str | None:
    """Why ``value`` is not, without coercion, a value of ``annotation`` where that is a
    number (or a container of numbers); None where it is, or where pydantic decides."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _scalar_problem(value, args[0], in_union=in_union)
    if origin in (typing.Union, types.UnionType):
        problems = [_scalar_problem(value, a, in_union=True) for a in args]
        if None in problems:
            return None
        numeric = [p for a, p in zip(args, problems, strict=True) if _is_number(a)]
        return (numeric or problems)[0]
    if annotation is type(None):
        return None if value is None or not in_union else "expected nothing"
    if origin is typing.Literal:
        if any(type(value) is type(a) and value == a for a in args):
            return None
        if in_union or isinstance(value, bool):
            return f"expected one of {', '.join(map(repr, args))}, got {quote(value)}"
        return None  # pydantic names the allowed values
    if origin in (tuple, list) and isinstance(value, list | tuple):
        item = args[0] if args else Any
        for i, v in enumerate(value):
            problem = _scalar_problem(v, item)
            if problem is not None:
                return f"item {i}: {problem}"
        return None
    if origin is dict and isinstance(value, dict) and len(args) == 2:
        for k, v in value.items():
            problem = _scalar_problem(v, args[1])
            if problem is not None:
                return f"{k}: {problem}"
        return None
    if annotation is int:
        if isinstance(value, bool):
            return f"expected an integer, not the boolean {str(value).lower()}"
        if isinstance(value, float | str):
            return f"expected an integer, got {quote(value)}"
        if isinstance(value, int) and abs(value) > INT64_MAX:
            return f"integer out of range (at most {INT64_MAX:.3g} in magnitude)"
        return None
    if annotation is float:
        if isinstance(value, bool):
            return f"expected a number, not the boolean {str(value).lower()}"
        if isinstance(value, str):
            return f"expected a number, got the text {quote(value)}"
        if isinstance(value, int) and abs(value) > INT64_MAX:
            return f"integer out of range (at most {INT64_MAX:.3g} in magnitude)"
        return None
    if isinstance(value, bool) and annotation not in (bool, Any):
        return f"expected a number or a name, not the boolean {str(value).lower()}"
    if in_union and annotation is str and not isinstance(value, str):
        return f"expected a name, got {quote(value)}"
    return None


def _is_number(annotation: Any) -> bool:
    """Whether ``annotation`` is ``int`` or ``float``, constrained or not."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation in (int, float)


def field_docs(cls: type) -> dict[str, str]:
    """The docstring written under each field of ``cls`` (its own fields, not inherited)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs = {}
    for node, after in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def with_field_docs(schema: dict[str, Any], root: type[BaseModel]) -> dict[str, Any]:
    """``schema`` (of ``root``) with each field's docstring as its ``description``."""
    classes = {}
    todo = [Frozen]
    while todo:
        cls = todo.pop()
        classes[cls.__name__] = cls
        todo += cls.__subclasses__()
    targets = [(root.__name__, schema), *schema.get("$defs", {}).items()]
    for name, part in targets:
        docs: dict[str, str] = {}  # a field declared on a base class keeps its docstring
        for base in reversed(classes[name].__mro__) if name in classes else ():
            if issubclass(base, Frozen) and base is not Frozen:
                docs.update(field_docs(base))
        for field, prop in part.get("properties", {}).items():
            if field in docs and "description" not in prop:
                prop["description"] = docs[field]
    return schema
