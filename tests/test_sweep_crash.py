"""A sweep killed at random and resumed until it is done gives the bytes of an uninterrupted
run (issue 50): SIGKILL, SIGINT and SIGTERM after seeded random delays, on one process or
two workers. Whatever point a signal lands on, the journal never loses a finished point nor
holds one twice, and the final output is the same. ``PDDPLAN_CRASH_SEED`` replays a seed."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import SMALL

from pddplan.sweeps.journal import unseal

AXES = ("workload.arrival_rps=10,13,16,19", "prices_usd_per_gpu_hour.h100-sxm=2,2.5,3,3.5,4")
"""20 points: each demand counted afresh (about 0.6 s on one core), then its prices cheaply,
so that a run of a few seconds is stopped while it starts, inside a point, between points,
while it writes the journal or the output."""
POINTS = 20
MAX_KILLS = 50
SIGNALS = (signal.SIGKILL, signal.SIGINT, signal.SIGTERM)


def _command(out: Path, workers: int, *more: str) -> list[str]:
    return [sys.executable, "-m", "pddplan", "sweep", str(SMALL), "--vary", AXES[0], "--vary",
            AXES[1], "--format", "csv", "--workers", str(workers), "--out", str(out), "--quiet",
            *more]  # fmt: skip


def _sigint_as_ctrl_c() -> None:
    """In the child: SIGINT as a terminal's Ctrl-C, even where this test runs with it
    ignored (a background job)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _journalled(journal: Path) -> list[int]:
    """The indexes of the finished points (ok or invalid) the journal holds, in order."""
    if not journal.exists():
        return []
    done = []
    for line in journal.read_bytes().splitlines()[1:]:
        data = unseal(line)
        if data is not None and data["point"]["status"] in ("ok", "invalid"):
            done.append(data["point"]["index"])
    return done


@pytest.mark.slow
def test_a_sweep_killed_at_random_and_resumed_gives_the_uninterrupted_bytes(tmp_path):
    seed = int(os.environ.get("PDDPLAN_CRASH_SEED", "50"))
    rng = random.Random(seed)
    why = f"replay with PDDPLAN_CRASH_SEED={seed}"
    ref = tmp_path / "ref.csv"
    start = time.monotonic()
    subprocess.run(_command(ref, 1), check=True, capture_output=True, timeout=300)
    whole_s = time.monotonic() - start  # sets the delays' scale only: no assertion on it
    out = tmp_path / "o.csv"
    journal = Path(f"{out}.journal.jsonl")
    kills, before, finished = [], 0, False
    for _ in range(rng.randint(MAX_KILLS // 2, MAX_KILLS)):
        workers, delay, signum = (
            rng.choice((1, 1, 1, 2)),
            rng.uniform(0.05, 0.7) * whole_s,
            rng.choice(SIGNALS),
        )
        proc = subprocess.Popen(_command(out, workers, "--resume"), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                preexec_fn=_sigint_as_ctrl_c)  # fmt: skip
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.send_signal(signum)
        _, err = proc.communicate(timeout=300)
        code = proc.returncode
        kills.append((signum.name, round(delay, 2), workers, code))
        where = f"{why}; runs so far (signal, delay s, workers, exit): {kills}"
        assert code in (0, 128 + signum, -signum), (err, where)
        ours = [line for line in err.splitlines() if line.startswith("Warning: ")]
        assert not ours, (err, where)  # no line a crash left is ever bad
        if code == 128 + signum:  # handled: one line, no traceback
            assert "Traceback" not in err and len(err.strip().splitlines()) == 1, (err, where)
        if out.exists() and not journal.exists():  # done (and maybe stopped as it ended)
            finished = True
            break
        done = _journalled(journal)
        assert len(done) == len(set(done)), (done, where)  # no point planned twice
        assert len(done) >= before, (done, before, where)  # no finished point lost
        before = len(done)
    if not finished:  # the delays never let it end: once more, to the end
        subprocess.run(_command(out, 1, "--resume"), check=True, capture_output=True,
                       timeout=300)  # fmt: skip
    assert out.read_bytes() == ref.read_bytes(), why
    assert not journal.exists(), why
    rows = out.read_text().splitlines()[1:]
    assert len(rows) == POINTS and len({tuple(r.split(",")[:2]) for r in rows}) == POINTS, why
