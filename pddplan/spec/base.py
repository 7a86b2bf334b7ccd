"""The base class of every validated input object."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """A validated, immutable value. Unknown keys are errors, so typos cannot pass silently."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", validate_default=True, use_attribute_docstrings=True
    )
