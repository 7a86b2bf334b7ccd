"""The closed lists of names the scenario, the API and the command line share: one
definition each, which the others read with ``typing.get_args`` (``tests/test_choices.py``
holds the command line's options to them). Plain ``Literal`` types, so that importing them
costs nothing."""

from __future__ import annotations

from typing import Final, Literal

Objective = Literal["max-bcr", "min-cost", "max-capacity"]
"""What ``solve`` plans for (``Scenario.objective``, ``--objective``)."""
MAX_BCR: Final[Objective] = "max-bcr"
MIN_COST: Final[Objective] = "min-cost"
MAX_CAPACITY: Final[Objective] = "max-capacity"
"""The objectives by name, for the code that tests which one it plans for (one each of
``Objective``'s, ``tests/test_choices.py``)."""
SolverName = Literal["cbc", "highs"]
"""The MILP backends (``solver.name``, ``--solver``)."""
Method = Literal["milp", "enumerate"]
"""How ``solve`` searches: the MILP, or brute force scored by the evaluator (``--method``)."""
Engine = Literal["local", "ray"]
"""Where a sweep's points run: local processes, or Ray (``--runner``)."""
Dtype = Literal["bf16", "fp8", "fp4"]
"""Weight dtypes (``weight_dtype``, ``--weight-dtype``)."""
KvDtype = Literal["bf16", "fp8"]
"""KV-cache dtypes (``kv_dtype``, ``--kv-dtype``)."""
