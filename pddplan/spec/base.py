"""The base class of every validated input object, and the attribute docstrings that
describe their fields in the JSON Schema."""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

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
        """YAML's ``true``/``yes`` would pass as 1 in a number field, and a 41-digit
        integer would reach numpy as an object: both are refused here."""
        if isinstance(value, bool):
            if info.field_name is not None and not _takes_bool(
                cls.model_fields[info.field_name].annotation
            ):
                raise ValueError(
                    f"expected a number or a name, not the boolean {str(value).lower()}"
                )
        elif isinstance(value, int) and abs(value) > INT64_MAX:
            raise ValueError(f"integer out of range (at most {INT64_MAX:.3g} in magnitude)")
        return value


def _takes_bool(annotation: Any) -> bool:
    """Whether a field's type admits a boolean anywhere (``bool``, ``bool | None``, ...)."""
    if annotation is bool or annotation is Any or isinstance(annotation, bool):  # Literal[True]
        return True
    return any(_takes_bool(a) for a in typing.get_args(annotation) if not isinstance(a, str))


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
        docs = field_docs(classes[name]) if name in classes else {}
        for field, prop in part.get("properties", {}).items():
            if field in docs and "description" not in prop:
                prop["description"] = docs[field]
    return schema
