"""The corpus of hostile sweep input (``tests/data/bad/sweep/``, issue 50): grid specs,
``--out`` targets and journals, each run through the command line as ``tests/test_bad_inputs.py``
runs its files.

- ``grid-*.args`` and ``out-*.args``: the arguments after ``pddplan sweep SCENARIO``, one
  a line, after two header lines: ``# expect:`` (a phrase the error must hold) and
  ``# names:`` (the option it must name). ``@DIR@`` is an empty folder, ``@FILE@`` a file,
  ``@READONLY@`` a read-only file. Each must end in exit 2, at most 3 lines each starting
  ``Error: `` (typer's usage errors add one ``see ... --help`` hint), before any planning:
  nothing is written, no journal is left.
- ``journal-*.jsonl``: a journal put where ``--out``'s goes, then ``--resume``d. Lines
  ending in ``<TAB>@SUM@`` are sealed with their true checksum, ``@GRID@`` is the grid's
  fingerprint and ``@IDENTITY@`` its identity, so that each file breaks one thing only.
  ``journal-ignored-*``: exit 0, one warning line naming the journal, and the output of an
  uninterrupted run (the line's point run again, never printed from the journal);
  ``journal-accepted-*``: the same with no warning; the others: one located error, exit 2.
  A folder, a FIFO, a link to ``/dev/zero`` and a loop of links are made here.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import SMALL, run_main

import pddplan
from pddplan.sweeps.axes import parse_vary
from pddplan.sweeps.engine import SweepJob, scenario_digest
from pddplan.sweeps.journal import CHECK_HEX, fingerprint
from pddplan.sweeps.points import Settings

BAD = Path(__file__).parent / "data" / "bad" / "sweep"
ARGS = sorted(BAD.glob("*.args"))
JOURNALS = sorted(BAD.glob("journal-*.jsonl"))
AXIS = "prices_usd_per_gpu_hour.h100-sxm=2,3"
"""The journals' grid: two points, a price apart (cheap: the counts are shared)."""
MADE = ("folder", "fifo", "link-to-dev-zero", "link-loop")
"""Journals made by the test: what a file cannot hold."""


def test_the_corpus_has_every_surface():
    kinds = {p.name.split("-")[0] for p in BAD.iterdir()}
    assert kinds == {"grid", "out", "journal"}
    assert len(list(BAD.iterdir())) >= 22
    assert len(ARGS) >= 22 and len(JOURNALS) >= 20
    outcome = {p.name.split("-")[1] for p in JOURNALS}
    assert {"ignored", "accepted"} <= outcome and len(outcome) > 2


def _check_error(output: str, code: int, named: str, expect: str, case: str) -> None:
    lines = output.strip().splitlines()
    errors = [line for line in lines if not line.startswith("see 'pddplan")]
    assert code == 2, (case, code, output)
    assert "Traceback" not in output, (case, output)
    assert 1 <= len(errors) <= 3 and len(lines) <= 3, (case, output)
    assert all(line.startswith("Error: ") for line in errors), (case, output)
    assert named in errors[0], (case, named, output)
    assert expect in output, (case, expect, output)


def _header(path: Path) -> tuple[str, str]:
    lines = path.read_text().splitlines()[:2]
    expect, names = (line.split(": ", 1)[1] for line in lines)
    return expect, names


@pytest.mark.parametrize("path", ARGS, ids=lambda p: p.stem)
def test_each_bad_grid_or_out_is_one_located_error_before_any_work(path, tmp_path):
    expect, names = _header(path)
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "a-file").write_text("x")
    readonly = tmp_path / "read-only.csv"
    readonly.write_text("x")
    readonly.chmod(0o444)
    places = {"@DIR@": str(work), "@FILE@": str(tmp_path / "a-file"), "@READONLY@": str(readonly)}
    args = []
    for line in path.read_text().splitlines()[2:]:
        for k, v in places.items():
            line = line.replace(k, v)
        args.append(line)
    if "--out" not in args:
        args += ["--out", str(work / "o.csv")]
    res = run_main("sweep", str(SMALL), "--workers", "1", *args)
    _check_error(res.output, res.exit_code, names, expect, path.name)
    assert not any(work.iterdir()), (path.name, list(work.iterdir()))  # no journal left
    assert {p.name for p in tmp_path.iterdir()} == {"work", "a-file", "read-only.csv"}


# --- journals ---------------------------------------------------------------------------------
def _identity() -> dict:
    """The identity ``pddplan sweep SMALL --vary AXIS`` gives its journal."""
    problem = pddplan.load_scenario(SMALL)
    settings = Settings(problem.scenario.objective, ("pdd",), None, None)
    job = SweepJob(str(SMALL), scenario_digest(problem), (parse_vary(AXIS),), False, settings)
    return job.identity()


def _sealed(template: bytes, identity: dict) -> bytes:
    grid = fingerprint(identity)
    text = template.replace(b"@GRID@", grid.encode())
    text = text.replace(b"@IDENTITY@", json.dumps(identity, sort_keys=True).encode())
    out = []
    for line in text.split(b"\n"):
        if line.endswith(b"\t@SUM@"):
            payload = line[: -len(b"\t@SUM@")]
            line = payload + b"\t" + hashlib.sha256(payload).hexdigest()[:CHECK_HEX].encode()
        out.append(line)
    return b"\n".join(out)


def _sweep(out: Path, *more: str):
    return run_main("sweep", str(SMALL), "--vary", AXIS, "--workers", "1", "--format", "csv",
                    "--out", str(out), *more)  # fmt: skip


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[dict, bytes]:
    """The journals' identity, and the output of the sweep run once, uninterrupted."""
    out = tmp_path_factory.mktemp("reference") / "o.csv"
    res = _sweep(out)
    assert res.exit_code == 0, res.output
    return _identity(), out.read_bytes()


def _journal_cases() -> list:
    """Each journal template; those read (ignored lines, or accepted) plan the rest of the
    sweep, about 0.5 s each: the default run keeps the first of each kind, the slow run the
    rest (the default suite's time)."""
    kept: set[str] = set()
    out = []
    for path in JOURNALS:
        kind = "-".join(path.stem.split("-")[:2])
        planned = kind in ("journal-ignored", "journal-accepted")
        marks = [pytest.mark.slow] if planned and kind in kept else []
        kept.add(kind)
        out.append(pytest.param(path, marks=marks, id=path.stem))
    return out


@pytest.mark.slow  # the default run stays under 90 s on a shared machine
@pytest.mark.parametrize("path", _journal_cases())
def test_each_hostile_journal_is_refused_or_read_as_untrusted(path, tmp_path, reference):
    identity, want = reference
    out = tmp_path / "o.csv"
    journal = Path(f"{out}.journal.jsonl")
    journal.write_bytes(_sealed(path.read_bytes(), identity))
    res = _sweep(out, "--resume")
    outcome = path.name.split("-")[1]
    if outcome in ("ignored", "accepted"):
        assert res.exit_code == 0, (path.name, res.output)
        assert "Traceback" not in res.output and "Error" not in res.output, res.output
        warnings = [line for line in res.stderr.splitlines() if line.startswith("Warning: ")]
        assert len(warnings) == (outcome == "ignored"), (path.name, res.stderr)
        if warnings:
            assert str(journal) in warnings[0] and "1 line(s)" in warnings[0], warnings
        assert out.read_bytes() == want, path.name  # nothing printed from a line ignored
        assert not journal.exists()  # its points are in the output: removed
    else:
        _check_error(res.output, res.exit_code, str(journal), "", path.name)
        assert not out.exists()
        assert journal.read_bytes() == _sealed(path.read_bytes(), identity)  # left as it was


@pytest.mark.parametrize("kind", MADE)
def test_a_journal_that_is_no_file_is_one_located_error(kind, tmp_path):
    out = tmp_path / "o.csv"
    journal = Path(f"{out}.journal.jsonl")
    if kind == "folder":
        journal.mkdir()
    elif kind == "fifo":
        os.mkfifo(journal)  # opened, it would wait for a writer for ever
    elif kind == "link-to-dev-zero":
        journal.symlink_to("/dev/zero")
    else:
        journal.symlink_to(tmp_path / "loop")
        (tmp_path / "loop").symlink_to(journal)
    for more in (["--resume"], []):
        res = _sweep(out, *more)
        _check_error(res.output, res.exit_code, str(journal), "", kind)
    assert not out.exists()
    if kind == "folder":
        shutil.rmtree(journal)
