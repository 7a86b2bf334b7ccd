"""The public API: docs/api.md's example runs as written, the CLI uses nothing else, and
``import pddplan`` stays light."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys

import pytest
from conftest import ROOT

import pddplan


@pytest.mark.slow
def test_the_documented_example_runs(monkeypatch, capsys):
    code = re.search(r"```python\n(.*?)```", (ROOT / "docs" / "api.md").read_text(), re.S)
    assert code is not None
    monkeypatch.chdir(ROOT)
    exec(compile(code.group(1), "docs/api.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("optimal ")
    assert len(printed) == 7
    assert printed[5].startswith("731 ")  # the sample trace's requests: a shipped file


def test_the_documented_example_reads_only_shipped_files():
    """Issue 51: the example read a test fixture, which a user of the package does not have;
    each file it names is one of the checkout's scenarios or fleets (the trace comes from
    ``pddplan.sample_trace()``)."""
    code = re.search(r"```python\n(.*?)```", (ROOT / "docs" / "api.md").read_text(), re.S)
    assert code is not None
    paths = re.findall(r"\"([^\"]+\.(?:yaml|json|jsonl))\"", code.group(1))
    assert paths and all(p.split("/")[0] in ("scenarios", "fleets") for p in paths), paths
    assert all((ROOT / p).is_file() for p in paths)
    assert "pddplan.sample_trace()" in code.group(1)


def test_every_exported_name_resolves_to_its_module():
    """``__all__`` is the export table, and each name is the object its module defines
    (a name listed in one and not the other, or pointing at the wrong module, fails)."""
    assert sorted(pddplan.__all__) == sorted(pddplan._EXPORTS)
    for name, module in pddplan._EXPORTS.items():
        assert getattr(pddplan, name) is getattr(importlib.import_module(module), name), name


def test_import_is_light():
    """The heavy libraries load where they are used, not on ``import pddplan``."""
    code = (
        "import sys, pddplan; p = pddplan.load_catalogs().hardware; "
        "print(sorted(m for m in ('scipy', 'pulp', 'matplotlib', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]", out.stdout


def test_every_exported_name_is_in_the_api_doc():
    """docs/api.md names every public name, as docs/cli.md does every command."""
    text = (ROOT / "docs" / "api.md").read_text()
    missing = [n for n in pddplan.__all__ if not re.search(rf"`[^`]*\b{re.escape(n)}\b", text)]
    assert not missing, f"docs/api.md does not name {missing}"
