"""Reading measured points for ``pddplan calibrate``: a CSV or JSON file of points in the
``Measurement`` format, or the result file of a serving benchmark (vLLM's
``benchmark_serving --save-result``, SGLang's ``bench_serving``, NVIDIA genai-perf's
``profile_export_genai_perf.json``), which becomes one ``serving_output_tokens_per_s_per_gpu``
point for the deployment given alongside it. Every problem is one located line."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pddplan.calibration.fit import Calibration
from pddplan.errors import InputError
from pddplan.io.catalogs import Catalogs, unknown_id
from pddplan.io.located import read_text, read_yaml
from pddplan.io.validation import validate
from pddplan.spec.calibration import MIN_ERROR_POINTS
from pddplan.spec.measurement import Exclusion, Measurement
from pddplan.spec.source import Loc, SourceMap


@dataclass(frozen=True)
class Deployment:
    """What a benchmark result file does not say: the model, chip and GPUs it ran on."""

    model: str
    chip: str
    gpus: int


@dataclass(frozen=True)
class Point:
    """A measurement and where it was read (``FILE:LINE``, for reports and errors)."""

    measurement: Measurement
    where: str


def load_measurements(
    paths: list[Path], catalogs: Catalogs, deployment: Deployment | None = None
) -> list[Point]:
    """Every point of every file, checked against the catalogs. A benchmark result file
    needs ``deployment``."""
    points: list[Point] = []
    problems: list[str] = []
    for path in paths:
        try:
            points += _read(path, deployment)
        except InputError as e:
            problems += e.problems
    for p in points:
        m = p.measurement
        if m.chip not in catalogs.hardware.chips:
            problems.append(
                f"{p.where}: chip: {unknown_id('chip', m.chip, catalogs.hardware.chips)}"
            )
        if m.model not in catalogs.models:
            problems.append(f"{p.where}: model: {unknown_id('model', m.model, catalogs.models)}")
    if problems:
        raise InputError(problems)
    return points


def load_exclusions(paths: list[Path]) -> list[tuple[Exclusion, str]]:
    """The runs a corpus file lists as found but not kept (rows with ``excluded``), each
    with where it was read."""
    out = []
    for path in paths:
        data, source = read_yaml(path)
        items = data.get("points") if isinstance(data, dict) else data
        for i, item in enumerate(items if isinstance(items, list) else []):
            if isinstance(item, dict) and "excluded" in item:
                loc = ("points", i) if isinstance(data, dict) else (i,)
                out.append((validate(Exclusion, item, source, loc), source.where(loc)))
    return out


def _read(path: Path, deployment: Deployment | None) -> list[Point]:
    if path.suffix.lower() == ".csv":
        return _read_csv(path)
    if path.suffix.lower() == ".jsonl":  # SGLang's bench_serving: one result per line
        return _read_jsonl(path, deployment)
    data, source = read_yaml(path)  # JSON is YAML: the loader gives every key's line
    bench = _bench_point(data, path, source.where(()), deployment)
    if bench is not None:
        return [bench]
    items = data.get("points") if isinstance(data, dict) else data
    prefix = ("points",) if isinstance(data, dict) else ()
    if not isinstance(items, list) or not items:
        raise InputError(
            f"{path}: expected a list of points (or {{points: [...]}}), or a vLLM, SGLang or "
            "genai-perf benchmark result"
        )
    out, problems = [], []
    for i, item in enumerate(items):
        if isinstance(item, dict) and "excluded" in item:  # a run found, not kept
            try:
                validate(Exclusion, item, source, (*prefix, i))
            except InputError as e:
                problems += e.problems
            continue
        try:
            m = validate(Measurement, item, source, (*prefix, i))
        except InputError as e:
            problems += e.problems
            continue
        out.append(Point(m, source.where((*prefix, i))))
    if problems:
        raise InputError(problems)
    return out


def _cell(text: str) -> int | float | str:
    """A CSV cell as the number it spells (the schema takes no numbers as text), else its
    text."""
    text = text.strip()
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _read_csv(path: Path) -> list[Point]:
    """A header row of ``Measurement`` fields (``calibration.<knob>`` for a point's own
    knobs); an empty cell is a field left out."""
    text = read_text(path)
    reader = csv.DictReader(text.splitlines())
    if not reader.fieldnames:
        raise InputError(f"{path}: the file is empty")
    out, problems = [], []
    for i, row in enumerate(reader):
        line = reader.line_num
        item: dict[str, Any] = {}
        knobs: dict[str, int | float | str] = {}
        for key, cell in row.items():
            if key is None or cell is None or not cell.strip():
                continue
            if key.startswith("calibration."):
                knobs[key.removeprefix("calibration.")] = _cell(cell)
            else:
                item[key.strip()] = _cell(cell)
        if knobs:
            item["calibration"] = knobs
        lines: dict[Loc, int] = {(i,): line}
        lines.update({(i, k): line for k in item})
        source = SourceMap(path, lines)
        try:
            m = validate(Measurement, item, source, (i,))
        except InputError as e:
            problems += e.problems
            continue
        out.append(Point(m, f"{path}:{line}"))
    if problems:
        raise InputError(problems)
    if not out:
        raise InputError(f"{path}: no points (a header row and one row per point)")
    return out


def _read_jsonl(path: Path, deployment: Deployment | None) -> list[Point]:
    lines = read_text(path).splitlines()
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}:{n}: malformed JSON: {e.msg}") from None
        point = _bench_point(data, path, f"{path}:{n}", deployment)
        if point is None:
            raise InputError(f"{path}:{n}: not an SGLang bench_serving result (no 'completed')")
        out.append(point)
    if not out:
        raise InputError(f"{path}: the file is empty")
    return out


def _bench_point(data: Any, path: Path, where: str, deployment: Deployment | None) -> Point | None:
    """A benchmark result as a serving point, or None when ``data`` is not one."""
    if not isinstance(data, dict):
        return None
    if "completed" in data and "output_throughput" in data:  # vLLM and SGLang
        tool = "SGLang bench_serving" if "input_throughput" in data else "vLLM benchmark_serving"
        completed = _number(data, "completed", where)
        mean_in = _number(data, "total_input_tokens", where) / max(completed, 1)
        mean_out = _number(data, "total_output_tokens", where) / max(completed, 1)
        throughput = _number(data, "output_throughput", where)
    elif isinstance(data.get("output_token_throughput"), dict):  # genai-perf
        tool = "genai-perf"
        throughput = _number(data["output_token_throughput"], "avg", where)
        mean_in = _number(data.get("input_sequence_length", {}), "avg", where)
        mean_out = _number(data.get("output_sequence_length", {}), "avg", where)
    else:
        return None
    if deployment is None:
        raise InputError(
            f"{where}: a {tool} result does not say what it ran on: give --model, --chip and "
            "--gpus (the GPUs of the deployment that served it)"
        )
    if min(throughput, mean_in, mean_out) <= 0:
        raise InputError(f"{where}: the {tool} result measured no tokens")
    m = Measurement(
        id=f"{path.name} ({tool})",
        model=deployment.model,
        chip=deployment.chip,
        gpus=deployment.gpus,
        input_tokens=max(1, round(mean_in)),
        output_tokens=max(1, round(mean_out)),
        metric="serving_output_tokens_per_s_per_gpu",
        value=throughput / deployment.gpus,
        source=tool,
    )
    return Point(m, where)


def _number(data: Any, key: str, where: str) -> float:
    value = data.get(key) if isinstance(data, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{where}: {key}: expected a number, got {value!r}")
    return float(value)


def calibration_yaml(fit: Calibration, sources: list[str]) -> str:
    """The fitted knobs as a commented ``calibration:`` block a scenario can include."""
    import yaml

    header = [
        f"# Fitted by `pddplan calibrate` to {len(fit.points)} points "
        f"({', '.join(sources)}): RMS log residual {fit.rms_before:.3f} with the defaults, "
        f"{fit.rms_after:.3f} fitted (ridge {fit.ridge:g}, {fit.starts} starts).",
    ]
    for k in fit.knobs:
        spread = f"x/÷ {k.factor:.3f}" if k.factor != float("inf") else "unbounded by the points"
        bound = "; at its bound" if k.at_bound else ""
        header.append(
            f"# {k.name}: {k.value:.4g} ({spread} at one sigma; default {k.default:g}{bound})"
        )
    header.append(
        f"# On top of the engine profile '{fit.engine}': a scenario that includes this block "
        "plans with that engine."
    )
    block: dict[str, Any] = {"default": {k.name: round(k.value, 6) for k in fit.knobs}}
    if fit.error:
        block["error"] = {ph: e.model_dump(exclude_none=True) for ph, e in fit.error.items()}
        header.append(
            f"# error: measured / predicted pass time of the points held out over "
            f"{fit.error_folds} folds, per phase with {MIN_ERROR_POINTS} points or more "
            "(--perf-quantile reads it; a phase without one, the engine profile's)."
        )
    else:
        header.append(
            f"# No error table: fewer than {MIN_ERROR_POINTS} held-out points per phase; "
            "--perf-quantile uses the engine profile's."
        )
    body = yaml.safe_dump({"engine": fit.engine, "calibration": block}, sort_keys=False)
    return "\n".join(header) + "\n" + body
