"""The corpus of hostile and malformed inputs (``tests/data/bad/``, issue 22): every file
kind the tool reads (scenario, fleet, plan, hardware and model catalog, Hugging Face config,
trace) times every failure class (syntax, encoding, size, structure, type, range,
reference). Each must end in exit code 2 with at most 3 lines that name the file, and no
traceback. Files are named ``KIND-CLASS-WHAT.EXT``; a ``size`` file is run with
``--max-input-mb 0.004`` (4 KB; the scenario they are read with is 1.6 KB, the shipped catalogs
are not bounded), so the
corpus stays small.

A trace's size class (one line past 1 MB, and ``/dev/zero``) is in ``test_trace.py``, where
the over-long line is generated rather than shipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import SMALL, run_main

BAD = Path(__file__).parent / "data" / "bad"
CORPUS = sorted(p for p in BAD.iterdir() if p.is_file())
SCENARIO = str(SMALL)
CLASSES = ("syntax", "encoding", "size", "structure", "type", "range", "reference", "order")


def command(path: Path) -> list[str]:
    """The command line that reads ``path`` as the kind its name says."""
    kind, failure = path.name.split("-")[:2]
    f = str(path)
    args = {
        "scenario": ["validate", f],
        "fleet": ["evaluate", SCENARIO, "--fleet", f],
        "plan": ["evaluate", SCENARIO, "--plan", f],
        "catalog": ["catalog", "list", "--hardware", f],
        "models": ["model", "list", "--models", f],
        "hf": ["model", "import", f, "--id", "x"],
        "trace": ["workload", "fit", f],
    }[kind]
    return (["--max-input-mb", "0.004"] if failure == "size" else []) + args


def check(path: Path, code: int, output: str) -> None:
    lines = output.strip().splitlines()
    assert code == 2, (path.name, code, output)
    assert "Traceback" not in output, (path.name, output)
    assert 1 <= len(lines) <= 3, (path.name, output)
    assert all(line.startswith("Error: ") for line in lines), (path.name, output)
    assert str(path) in lines[0], (path.name, output)
    assert all(len(line) <= 800 for line in lines), (
        path.name,
        output,
    )  # unknown keys list the allowed


def test_the_corpus_covers_every_kind_and_failure_class():
    cells = defaultdict(set)
    for path in CORPUS:
        kind, failure = path.name.split("-")[:2]
        assert failure in CLASSES, path.name
        cells[kind].add(failure)
    assert len(CORPUS) >= 40
    assert set(cells) == {"scenario", "fleet", "plan", "catalog", "models", "hf", "trace"}
    assert cells["scenario"] == set(CLASSES) - {"order"}
    for kind in ("fleet", "plan", "catalog", "hf", "trace"):
        assert len(cells[kind]) >= 5, (kind, cells[kind])


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_each_bad_input_is_one_located_error(path):
    result = run_main(*command(path))
    check(path, result.exit_code, result.output)


@pytest.mark.slow  # the default run stays under 90 s on a shared machine
@pytest.mark.parametrize(
    "name",
    [
        "scenario-structure-billion-laughs.yaml",
        "scenario-structure-python-tag.yaml",
        "scenario-structure-deep-nesting.yaml",
        "hf-encoding-binary.json",
        "trace-range-timestamp-1e308.jsonl",
        "fleet-size-over-limit.yaml",
    ],
)
def test_a_real_process_fails_cleanly_too(name):
    """Through the installed entry point as a user runs it: no traceback on stderr either."""
    path = BAD / name
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.run(
        [sys.executable, "-m", "pddplan", *command(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    check(path, proc.returncode, proc.stdout + proc.stderr)
