"""The output's medium failing: a closed pipe ends quietly, a full stdout is one line.

Real subprocesses: the pipe and /dev/full are the operating system's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

COMMAND = [sys.executable, "-m", "pddplan", "schema"]  # ~40 KB of JSON, no solve


@pytest.mark.slow  # the default run stays under 90 s on a shared machine
def test_a_reader_that_leaves_ends_the_run_quietly() -> None:
    proc = subprocess.Popen(COMMAND, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before the child writes: its first write meets EPIPE
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1  # click's exit for EPIPE, no traceback
    assert stderr == ""


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_a_full_stdout_is_one_line_and_exit_2() -> None:
    with open("/dev/full", "w") as full:
        proc = subprocess.run(COMMAND, stdout=full, stderr=subprocess.PIPE, timeout=120)
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 2
    assert lines == ["Error: cannot write the output: No space left on device"]
