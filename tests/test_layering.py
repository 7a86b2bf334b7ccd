"""The packages follow the data flow (STYLE.md, docs/architecture.md): each imports only
the packages below it, there are no cycles between packages (imports inside functions and
under ``TYPE_CHECKING`` count), and each outside library stays in its own layer."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pddplan"
FILES = sorted(PACKAGE.rglob("*.py"))


def _part(path: Path) -> str:
    """The package (or top-level module) a file belongs to."""
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _may_import(part: str) -> set[str]:
    """What ``part`` may import, from its docstring's "May import:" sentence (its
    ``__init__.py``'s for a package): the names in double backticks, ``pddplan`` meaning
    the public API (``__init__``), or "nothing". The rule is written there once."""
    path = PACKAGE / part / "__init__.py"
    if part == "__init__" or not path.exists():
        path = PACKAGE / f"{part}.py"
    doc = ast.get_docstring(_tree(path)) or ""
    found = re.search(r"May import:\s*(.*?)\.(?:\s|$)", " ".join(doc.split()))
    assert found, f"{path.relative_to(PACKAGE)}: its docstring has no 'May import:' sentence"
    if found.group(1).startswith("nothing"):
        return set()
    names = re.findall(r"``([a-z_]+)``", found.group(1))
    return {"__init__" if n == "pddplan" else n for n in names}


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A module parsed, once for every test here."""
    return ast.parse(path.read_text())


MAY_IMPORT: dict[str, set[str]] = {part: _may_import(part) for part in {_part(p) for p in FILES}}
"""What each part of the package may import, by the data flow (docs/architecture.md): ``spec``
-> ``workload`` -> ``model`` -> ``evaluation`` -> ``plan`` -> ``simulation``; ``io`` reads
files into the spec and builds a ``Problem``; ``sweeps`` plans many; ``report`` renders
results; the CLI sees only the public API (``pddplan/__init__.py``) and the report layer."""
LIBRARIES = {
    "typer": {"cli"},
    "rich": {"cli", "report"},
    "pulp": {"plan/milp.py", "plan/horizon_milp.py", "plan/solver.py"},
    "yaml": {"io"},
    "matplotlib": {"report/plots.py"},
    "orjson": {"workload/trace.py"},
    "ray": {"sweeps/ray_engine.py"},
    "pyarrow": {"report/sweeps.py"},
    "threadpoolctl": {"threads.py"},
}
"""Each outside library and the only places that may import it."""


def _imports(path: Path) -> list[tuple[str, int]]:
    """(imported module, line) for every import in ``path``, wherever it is."""
    found = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "pddplan":  # ``from pddplan import units``: the submodule
                found += [(f"pddplan.{a.name}", node.lineno) for a in node.names]
            else:
                found.append((node.module, node.lineno))
    return found


def _pddplan_part(module: str) -> str | None:
    """``pddplan.model.kv`` -> ``model``; ``pddplan`` itself -> ``__init__``."""
    if module == "pddplan":
        return "__init__"
    if module.startswith("pddplan."):
        return module.split(".")[1]
    return None


def test_every_part_states_what_it_may_import():
    """Every package and top-level module has a "May import:" sentence naming only parts
    that exist; the data flow's order holds (a part may import none that may import it)."""
    parts = set(MAY_IMPORT)
    for part, allowed in MAY_IMPORT.items():
        assert allowed <= parts | {"catalogs"}, (part, allowed - parts)
        assert part not in allowed
    assert MAY_IMPORT["spec"] == {"errors", "units"} and MAY_IMPORT["cli"] >= {"__init__"}


@pytest.mark.parametrize("path", FILES, ids=[p.relative_to(PACKAGE).as_posix() for p in FILES])
def test_imports_follow_the_data_flow(path):
    part = _part(path)
    bad = []
    for module, line in _imports(path):
        target = _pddplan_part(module)
        if target is not None and target != part and target not in MAY_IMPORT[part]:
            bad.append(f"line {line}: {module}")
    assert not bad, f"{part} may import only {sorted(MAY_IMPORT[part])}: {bad}"


def test_no_cycles_between_packages():
    edges = {part: set() for part in MAY_IMPORT}
    for path in FILES:
        for module, _ in _imports(path):
            target = _pddplan_part(module)
            if target is not None and target != _part(path):
                edges[_part(path)].add(target)

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in edges[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    cycles = sorted(p for p in edges if p in reach(p))
    assert not cycles, f"packages on an import cycle: {cycles}"


@pytest.mark.parametrize("library", sorted(LIBRARIES))
def test_library_stays_in_its_layer(library):
    offenders = []
    for path in FILES:
        rel = path.relative_to(PACKAGE).as_posix()
        allowed = LIBRARIES[library]
        if any(m.split(".")[0] == library for m, _ in _imports(path)) and not any(
            rel == a or rel.startswith(f"{a}/") for a in allowed
        ):
            offenders.append(rel)
    assert not offenders, f"{library} imported outside {sorted(LIBRARIES[library])}: {offenders}"


def test_the_checks_can_fail():
    assert any(m == "yaml" for m, _ in _imports(PACKAGE / "io" / "located.py"))
    assert _pddplan_part("pddplan.model.kv") == "model" and _part(PACKAGE / "api.py") == "api"
    assert "plan" not in MAY_IMPORT["model"]
