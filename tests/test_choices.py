"""One vocabulary: every closed list of names is defined once in ``pddplan.spec.choices``;
the scenario's fields, the API's checks and the command line's options are held to it."""

from __future__ import annotations

from typing import get_args

import pytest

import pddplan.api as api
from pddplan.cli import common
from pddplan.cli import sweep as cli_sweep
from pddplan.spec import choices
from pddplan.spec.scenario import Scenario, SolverOptions

# the command line's options (StrEnums, which typer lists in --help) against the spec's
CLI = [
    (common.Objective, choices.Objective),
    (common.Solver, choices.SolverName),
    (common.Method, choices.Method),
    (common.KvDtype, choices.KvDtype),
    (common.WeightDtype, choices.Dtype),
    (cli_sweep.Engine, choices.Engine),
]


@pytest.mark.parametrize(("option", "names"), CLI, ids=[o.__name__ for o, _ in CLI])
def test_the_command_line_offers_exactly_the_specs_names(option, names):
    assert tuple(v.value for v in option) == get_args(names)


def test_the_api_and_the_scenario_read_the_same_lists():
    assert get_args(choices.Objective) == api.OBJECTIVES
    assert get_args(choices.SolverName) == api.SOLVERS
    assert get_args(choices.Method) == api.METHODS
    assert get_args(choices.Engine) == api.ENGINES
    assert Scenario.model_fields["objective"].annotation == choices.Objective
    assert SolverOptions.model_fields["name"].annotation == choices.SolverName


def test_a_name_outside_the_list_is_refused_by_the_api():
    with pytest.raises(api.ArgumentError, match="choose one of max-bcr, min-cost, max-capacity"):
        api._choice("objective", "max-profit", api.OBJECTIVES)


def test_the_objective_constants_are_the_objectives():
    assert get_args(choices.Objective) == (choices.MAX_BCR, choices.MIN_COST, choices.MAX_CAPACITY)


@pytest.mark.slow  # over 0.7 s each; the default run stays under 90 s
def test_status_and_objective_names_are_spelled_only_in_spec():
    """Code names an objective or a status by its constant (``spec/choices.py``,
    ``spec/status.py``), never by a string literal: a renamed status cannot leave a
    comparison that is silently always false. The command line's own option enum
    (``cli/common.py``), docstrings and a mapping's keys are the exceptions."""
    import ast
    from pathlib import Path

    from pddplan.spec.status import EvalStatus, PlanStatus, PointStatus, RowStatus

    # ("ok" and "error" are every vocabulary's words, and "error" a column's; a MILP's
    # "node_limit" is also an option's name)
    statuses = {*PlanStatus, *EvalStatus, *PointStatus, *RowStatus}
    names = {*get_args(choices.Objective), *statuses} - {"ok", "error"}
    package = Path(api.__file__).parent
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel.startswith("spec/") or rel == "cli/common.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        # a JSON field of that name (``"interrupted": run.interrupted``) is not a status
        docstrings |= {
            id(key) for node in ast.walk(tree) if isinstance(node, ast.Dict) for key in node.keys
        }
        found += [
            f"{rel}:{node.lineno}: {node.value!r}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in names and id(node) not in docstrings
        ]
    assert found == []
