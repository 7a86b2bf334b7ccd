"""How fast, and in how little memory, hostile inputs are refused (issue 22).

    python benchmarks/hostile_inputs.py [--repeat 3]

Three figures, each against its goal:

- a 1 MB valid scenario (4,000 explicit classes, each with a comment) validates in under
  1 s: ``load_scenario`` in this process, best of ``--repeat``, with libyaml and with the
  pure-Python loader;
- an expansion bomb (10^9 values) and a 10,000-deep file are refused in under 1 s each, in
  process and as a whole ``pddplan validate`` process;
- the peak memory (max RSS) of a ``pddplan`` process on every file of ``tests/data/bad/``
  stays within 100 MB of ``python -c "import pddplan"``'s, both measured in this run.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from test_bad_inputs import CORPUS, command  # noqa: E402

import pddplan.io.located as located  # noqa: E402
from pddplan.errors import InputError  # noqa: E402
from pddplan.io.scenario import load_scenario  # noqa: E402

CLASSES = 4_000
VALIDATE_GOAL_S = 1.0
REFUSE_GOAL_S = 1.0
MEMORY_GOAL_MB = 100.0


def big_scenario(folder: Path) -> Path:
    """The small shipped scenario with ``CLASSES`` explicit classes, padded by a comment per
    class to 1 MB (what ``workload fit`` writes, with provenance notes)."""
    base = (ROOT / "scenarios" / "small-llama-8b.yaml").read_text()
    head, tail = base.split("  input_tokens:")[0], base[base.index("sla:") :]
    weight = 1 / CLASSES
    rows = []
    for i in range(CLASSES):
        rows.append(
            f"    - {{weight: {weight!r}, input_tokens: {1000 + i}, output_tokens: {100 + i % 50}, "
            f"p_hit: {i % 100 / 100}}}  # class {i}: " + "n" * 160 + "\n"
        )
    path = folder / "big.yaml"
    path.write_text(head + "  classes:\n" + "".join(rows) + "\n" + tail)
    return path


def bomb(folder: Path) -> Path:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    path = folder / "bomb.yaml"
    path.write_text("\n".join(lines) + "\nname: *a8\n")
    return path


def deep(folder: Path) -> Path:
    path = folder / "deep.yaml"
    path.write_text("name: " + "[" * 10_000 + "]" * 10_000 + "\n")
    return path


def best_of(repeat: int, f: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def refused(path: Path) -> Callable[[], None]:
    def run() -> None:
        try:
            load_scenario(path)
        except InputError:
            return
        raise AssertionError(f"{path} was not refused")

    return run


# The child is started from a small fresh interpreter: Linux carries the RSS high-water mark of
# the image a process replaces at exec into its rusage, so a child forked straight from this
# benchmark (already ~130 MB) would report at least this benchmark's size.
_RUN_AND_MEASURE = (
    "import resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL,"
    " stderr=subprocess.DEVNULL).returncode\n"
    "s = time.perf_counter() - t\n"
    "print(s, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, code)\n"
)


def process(argv: list[str]) -> tuple[float, float, int]:
    """(wall seconds, max RSS in MB, exit code) of one fresh process."""
    out = subprocess.run(
        [sys.executable, "-c", _RUN_AND_MEASURE, *argv], capture_output=True, text=True, check=True
    ).stdout.split()
    return float(out[0]), int(out[1]) / 1024, int(out[2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        big, laughs, nested = big_scenario(folder), bomb(folder), deep(folder)
        print(f"valid scenario: {big.stat().st_size / 1e6:.2f} MB, {CLASSES:,} classes")
        libyaml = located.Loader is not yaml.SafeLoader
        loaders = [("libyaml", located.Loader)] if libyaml else []
        loaders.append(("pure Python", yaml.SafeLoader))
        print(f"\n{'in process':<34}{'loader':>12}{'best s':>9}{'goal s':>8}")
        for name, loader in loaders:
            located.Loader = loader
            for label, f, goal in (
                ("validate the 1 MB scenario", lambda: load_scenario(big), VALIDATE_GOAL_S),
                ("refuse the expansion bomb", refused(laughs), REFUSE_GOAL_S),
                ("refuse the 10,000-deep file", refused(nested), REFUSE_GOAL_S),
            ):
                s = best_of(args.repeat, f)
                flag = "" if s < goal else "  MISSED"
                print(f"{label:<34}{name:>12}{s:>9.3f}{goal:>8.1f}{flag}")
        located.Loader = loaders[0][1]

        py = [sys.executable]
        base_s, base_mb, _ = min(process([*py, "-c", "import pddplan"]) for _ in range(3))
        help_s, help_mb, _ = min(process([*py, "-m", "pddplan", "--help"]) for _ in range(3))
        print(f"\n{'process':<44}{'wall s':>8}{'max RSS MB':>12}{'exit':>6}")
        print(f"{'python -c import pddplan':<44}{base_s:>8.2f}{base_mb:>12.1f}{'':>6}")
        print(f"{'pddplan --help':<44}{help_s:>8.2f}{help_mb:>12.1f}{'':>6}")
        for label, path in (("validate the bomb", laughs), ("validate the 10,000-deep", nested)):
            s, mb, code = process([*py, "-m", "pddplan", "validate", str(path)])
            print(f"{label:<44}{s:>8.2f}{mb:>12.1f}{code:>6}")
        worst = (0.0, "")
        for path in CORPUS:
            _, mb, code = process([*py, "-m", "pddplan", *command(path)])
            assert code == 2, (path.name, code)
            worst = max(worst, (mb, path.name))
        delta = worst[0] - base_mb
        flag = "" if delta < MEMORY_GOAL_MB else "  MISSED"
        print(
            f"\nworst of the {len(CORPUS)} corpus files: {worst[1]}, max RSS {worst[0]:.1f} MB, "
            f"{delta:+.1f} MB over the bare import (goal < {MEMORY_GOAL_MB:.0f}){flag}"
        )


if __name__ == "__main__":
    main()
