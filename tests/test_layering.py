"""Each outside library stays in its own layer (STYLE.md): only the CLI knows typer, only
the CLI and the report know rich, only the solver layer knows PuLP, only the loaders know
YAML; matplotlib is only for plots and orjson only for reading traces."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pddplan"
ALLOWED = {
    "typer": {"cli.py", "cli_base.py", "cli_compare.py", "cli_simulate.py"},
    "rich": {
        "cli.py",
        "cli_base.py",
        "cli_compare.py",
        "cli_simulate.py",
        "report.py",
        "sim_report.py",
    },
    "pulp": {"milp.py", "solver.py"},
    "yaml": {"loaders.py"},
    "matplotlib": {"plot.py"},
    "orjson": {"trace.py"},
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("library", sorted(ALLOWED))
def test_library_stays_in_its_layer(library):
    offenders = [
        p.name
        for p in sorted(PACKAGE.rglob("*.py"))
        if library in _imports(p) and p.name not in ALLOWED[library]
    ]
    assert not offenders, f"{library} imported outside {sorted(ALLOWED[library])}: {offenders}"


def test_the_check_can_fail():
    assert "yaml" in _imports(PACKAGE / "loaders.py")
    assert "typer" in _imports(PACKAGE / "cli.py")
