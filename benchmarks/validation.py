"""`pddplan perf` against public measurements: the table of docs/validation.md.

    python benchmarks/validation.py [--points benchmarks/validation_points.json]

Each point of the file (the format `pddplan calibrate` reads) is predicted with the
profile of the engine that produced it (``ideal`` for a point that names none: DeepSeek's
own profile, RTP-LLM's report, DeepSeek's production averages), the point's own knobs
(e.g. a profile's perfect balance) held fixed, and printed beside its measured value, as a markdown table: ratio = pddplan / measured.
Capacity rows (benchmarks at full load) are checked against +-20%, average-load rows
(production averages, a lower bound on capacity) against ratio >= 0.9.
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

import pddplan  # noqa: E402
from pddplan.calibration.fit import predict  # noqa: E402
from pddplan.io.measurements import load_measurements  # noqa: E402
from pddplan.spec.engine import IDEAL, chip_knobs  # noqa: E402

CAPACITY_BAND = 0.2
AVERAGE_FLOOR = 0.9


def within(kind: str, ratio: float) -> bool:
    if kind == "average":
        return ratio >= AVERAGE_FLOOR
    return abs(ratio - 1) <= CAPACITY_BAND


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", default=str(ROOT / "benchmarks" / "validation_points.json"))
    args = parser.parse_args()
    catalogs = pddplan.load_catalogs()
    points = load_measurements([Path(args.points)], catalogs)
    print("| point | engine | kind | balance | metric | measured | pddplan | ratio | check |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for p in points:
        m = p.measurement
        engine = catalogs.engines.engines[m.engine or IDEAL]
        knobs = chip_knobs(engine, catalogs.hardware, m.chip).model_dump(exclude_none=True)
        value = predict(m, catalogs.model(m.model), catalogs.hardware, knobs)
        ratio = value / m.value
        check = "ok" if within(m.kind, ratio) else "**outside**"
        band = f"±{CAPACITY_BAND:.0%}" if m.kind == "capacity" else f">= {AVERAGE_FLOOR:g}"
        print(
            f"| {m.id} | {engine.id} | {m.kind} | {m.balance or ''} | {m.metric} | {m.value:,.0f} | "
            f"{value:,.0f} | {ratio:.2f} | {check} ({band}) |"
        )


if __name__ == "__main__":
    main()
