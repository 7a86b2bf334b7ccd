"""The base class of every validated input object, and the attribute docstrings that
describe their fields in the JSON Schema."""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap
from typing import Any

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """A validated, immutable value. Unknown keys are errors, so typos cannot pass silently."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", validate_default=True, allow_inf_nan=False
    )
    # Field docstrings are read when a schema is asked for (``with_field_docs``), not at
    # class creation: pydantic's use_attribute_docstrings parses every class's source on
    # import, a sixth of the command line's start-up.


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
