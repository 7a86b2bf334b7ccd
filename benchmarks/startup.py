"""How long whole ``pddplan`` processes take, against ``python -c "import numpy"`` measured in
the same run (this machine's speed drifts, so only ratios within one run compare).

    python benchmarks/startup.py [--repeat 5]

Each command runs ``--repeat`` times as a fresh process, the commands taking turns (so that a
slow spell of the machine hits them alike); the table shows the fastest and the median wall
time and the fastest over numpy's fastest. The goals (issue 16):
``pddplan --help`` and ``pddplan catalog list`` within 3x numpy's import, and the README's
``pddplan solve scenarios/pdd-h100-h200.yaml`` under 1 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PDDPLAN = [sys.executable, "-m", "pddplan"]
COMMANDS: list[tuple[str, list[str], float | None]] = [
    ("python -c 'import numpy'", [sys.executable, "-c", "import numpy"], None),
    ("pddplan --help", [*PDDPLAN, "--help"], 3.0),
    ("pddplan catalog list", [*PDDPLAN, "catalog", "list"], 3.0),
    (
        "pddplan validate scenarios/pdd-h100-h200.yaml",
        [*PDDPLAN, "validate", "scenarios/pdd-h100-h200.yaml"],
        None,
    ),
    (
        "pddplan solve scenarios/pdd-h100-h200.yaml",
        [*PDDPLAN, "solve", "scenarios/pdd-h100-h200.yaml"],
        None,
    ),
]
"""(label, argv, goal as a multiple of numpy's import or None)."""
SOLVE_GOAL_S = 1.0


def wall(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for _, argv, _ in COMMANDS:
        wall(argv)  # warm the file cache
    times: list[list[float]] = [[] for _ in COMMANDS]
    for _ in range(args.repeat):
        for i, (_, argv, _) in enumerate(COMMANDS):
            times[i].append(wall(argv))
    rows = [
        (label, min(t), statistics.median(t), goal)
        for (label, _, goal), t in zip(COMMANDS, times, strict=True)
    ]
    numpy_s = rows[0][1]
    print("| command | best, s | median, s | best / numpy import | goal |")
    print("| --- | --- | --- | --- | --- |")
    for label, best, median, goal in rows:
        if goal is not None:
            target = f"<= {goal:g}x: {'met' if best <= goal * numpy_s else 'missed'}"
        elif label.startswith("pddplan solve"):
            target = f"< {SOLVE_GOAL_S:g} s: {'met' if best < SOLVE_GOAL_S else 'missed'}"
        else:
            target = ""
        print(f"| `{label}` | {best:.3f} | {median:.3f} | {best / numpy_s:.2f}x | {target} |")


if __name__ == "__main__":
    main()
