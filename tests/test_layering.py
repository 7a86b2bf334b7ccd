"""Each outside library stays in its own layer (STYLE.md): only the CLI knows typer, only
the CLI and the report know rich, only the solver layer knows PuLP, only the loaders know
YAML; matplotlib is only for plots and orjson only for reading traces."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pddplan"
ALLOWED = {
    "typer": {"cli/"},
    "rich": {"cli/", "report/tables.py", "report/simulation.py"},
    "pulp": {"plan/milp.py", "plan/solver.py"},
    "yaml": {"io/located.py", "io/hf.py", "io/workload.py"},
    "matplotlib": {"report/plots.py"},
    "orjson": {"workload/trace.py"},
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
        name
        for p in sorted(PACKAGE.rglob("*.py"))
        if library in _imports(p)
        and not any(
            (name := p.relative_to(PACKAGE).as_posix()).startswith(a) for a in ALLOWED[library]
        )
    ]
    assert not offenders, f"{library} imported outside {sorted(ALLOWED[library])}: {offenders}"


def test_the_check_can_fail():
    assert "yaml" in _imports(PACKAGE / "io" / "located.py")
    assert "typer" in _imports(PACKAGE / "cli" / "app.py")
