"""Reading measured points for ``pddplan calibrate``: a CSV or JSON file of points in the
``Measurement`` format, or the result file of a serving benchmark (vLLM's
``benchmark_serving --save-result``, SGLang's ``bench_serving``, NVIDIA genai-perf's
``profile_export_genai_perf.json``), which becomes one ``serving_output_tokens_per_s_per_gpu``
point for the deployment given alongside it. Every problem is one located line.

Every source goes through the same checks: each point is validated as a ``Measurement``
(its GPUs, tokens, batch and value within the ceilings of ``pddplan.spec.limits``, finite),
a benchmark result's raw figures first (finite, non-negative, a whole count of requests);
the points of one run are counted as they are read and refused past ``max_points``; a CSV
row with more cells than its header is refused (a cell is never dropped); points repeated
exactly are merged (``merge_duplicates``): a run copied twice is one piece of evidence."""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pddplan.calibration.fit import Calibration
from pddplan.errors import InputError
from pddplan.io.catalogs import Catalogs, unknown_id
from pddplan.io.located import read_text, read_yaml
from pddplan.io.validation import validate
from pddplan.spec.calibration import MIN_ERROR_POINTS
from pddplan.spec.limits import MAX_CALIBRATION_POINTS, MAX_MEASURED, MAX_TOKENS
from pddplan.spec.measurement import Exclusion, Measurement
from pddplan.spec.source import Loc, SourceMap, quote


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


class _Budget:
    """The points a run may still read (``max_points`` in all, over every file): a file
    that holds more is refused at the first point past it, before it is validated."""

    def __init__(self, limit: int) -> None:
        self.limit, self.used = limit, 0

    def take(self, where: str) -> None:
        """Count one more point read at ``where``; past the limit, one ``InputError``."""
        self.used += 1
        if self.used > self.limit:
            raise InputError(
                f"{where}: more than {self.limit:,} points (the limit of one calibrate run; "
                "raise it with --max-points, or fit a sample of the points)"
            )


def load_measurements(
    paths: list[Path],
    catalogs: Catalogs,
    deployment: Deployment | None = None,
    *,
    max_points: int = MAX_CALIBRATION_POINTS,
) -> list[Point]:
    """Every point of every file, checked against the catalogs. A benchmark result file
    needs ``deployment``. More than ``max_points`` points in all is one ``InputError``
    (raised at the first point past it, before the rest are read)."""
    points: list[Point] = []
    problems: list[str] = []
    budget = _Budget(max_points)
    for path in paths:
        try:
            points += _read(path, deployment, budget)
        except InputError as e:
            problems += e.problems
            if budget.used > budget.limit:
                break
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


PROVENANCE = frozenset({"id", "source", "url", "date", "raw", "mapping", "balance"})
"""A point's fields that say where it came from, not what was measured: two points equal in
every other field are the same measurement."""


def merge_duplicates(points: list[Point]) -> tuple[list[Point], list[str]]:
    """``points`` with each exact repeat dropped (the same deployment, request shape, metric
    and value as an earlier point, whatever its id or source), and one warning per point
    dropped naming the point it repeats: a result file given twice, or a row copied, is one
    run, and fitted twice it would count as two independent runs and shrink the reported
    uncertainty."""
    first: dict[str, Point] = {}
    kept, notes = [], []
    for p in points:
        key = p.measurement.model_dump_json(exclude=set(PROVENANCE))
        seen = first.get(key)
        if seen is None:
            first[key] = p
            kept.append(p)
        else:
            twice = " (the file given twice?)" if p.where == seen.where else ""
            notes.append(
                f"{p.where}: the same point as {seen.where}{twice} (merged: a repeated run "
                "is not independent evidence)"
            )
    return kept, notes


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


def _read(path: Path, deployment: Deployment | None, budget: _Budget) -> list[Point]:
    if path.suffix.lower() == ".csv":
        return _read_csv(path, budget)
    if path.suffix.lower() == ".jsonl":  # SGLang's bench_serving: one result per line
        return _read_jsonl(path, deployment, budget)
    data, source = read_yaml(path)  # JSON is YAML: the loader gives every key's line
    bench = _bench_point(data, path, source, (), deployment)
    if bench is not None:
        budget.take(bench.where)
        return [bench]
    items = data.get("points") if isinstance(data, dict) else data
    prefix = ("points",) if isinstance(data, dict) else ()
    if isinstance(items, list) and not items:
        raise InputError(f"{path}: the list of points is empty: give at least one point")
    if not isinstance(items, list):
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
        budget.take(source.where((*prefix, i)))
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


def _read_csv(path: Path, budget: _Budget) -> list[Point]:
    """A header row of ``Measurement`` fields (``calibration.<knob>`` for a point's own
    knobs); an empty cell is a field left out. A header naming a column twice, and a row
    with more cells than the header, are refused (a cell is never dropped)."""
    text = read_text(path)
    try:
        # a stream, not split lines: a quoted cell that spans lines keeps its line break
        # (split lines would join "10" and "24" into 1024), and the check below names it
        reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
        fieldnames = reader.fieldnames
    except csv.Error as e:
        raise InputError(f"{path}:1: malformed CSV: {e}") from None
    if not fieldnames:
        raise InputError(f"{path}: the file is empty")
    names = [name.strip() for name in fieldnames]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(
            f"{path}:1: column {quote(twice[0], 60)} is named twice in the header (each field once)"
        )
    out, problems = [], []
    rows = iter(reader)
    i = -1
    while True:
        try:
            row = next(rows)
        except StopIteration:
            break
        except csv.Error as e:  # the reader counts the lines of a row only once it ends
            problems.append(
                f"{path}:{reader.line_num + 1}: malformed CSV: {e} (a quote opened and not closed?)"
            )
            break
        i += 1
        line = reader.line_num
        if None in row:  # DictReader's restkey: the cells past the header
            extra = row[None]
            problems.append(
                f"{path}:{line}: {len(names) + len(extra)} cells, the header names "
                f"{len(names)}: {quote(','.join(extra), 60)} past the last column (quote a "
                "value that holds a comma, or add the column to the header)"
            )
            continue
        budget.take(f"{path}:{line}")
        item: dict[str, Any] = {}
        knobs: dict[str, int | float | str] = {}
        for key, cell in row.items():
            if key is None or cell is None or not cell.strip():
                continue
            if "\n" in cell or "\r" in cell:
                problems.append(
                    f"{path}:{line}: {key.strip()}: a line break inside a quoted cell "
                    f"({quote(cell, 40)}); a value is on one line"
                )
                break
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


def _read_jsonl(path: Path, deployment: Deployment | None, budget: _Budget) -> list[Point]:
    lines = read_text(path).splitlines()
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line, parse_constant=_refuse_constant)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}:{n}: malformed JSON: {e.msg}") from None
        except ValueError as e:  # NaN, Infinity
            raise InputError(f"{path}:{n}: {e} (every figure must be finite)") from None
        except RecursionError:
            raise InputError(f"{path}:{n}: nested too deeply to be a result") from None
        point = _bench_point(data, path, SourceMap(path, {(): n}), (), deployment)
        if point is None:
            raise InputError(f"{path}:{n}: not an SGLang bench_serving result (no 'completed')")
        budget.take(point.where)
        out.append(point)
    if not out:
        raise InputError(f"{path}: the file is empty")
    return out


def _refuse_constant(literal: str) -> None:
    raise ValueError(f"{literal} is not a JSON number")


def _bench_point(
    data: Any, path: Path, source: SourceMap, loc: Loc, deployment: Deployment | None
) -> Point | None:
    """A benchmark result as a serving point, or None when ``data`` is not one. Its raw
    figures are checked first (each a finite number, counts whole and non-negative, the
    means within the token ceiling), then the point as any other (``Measurement``)."""
    if not isinstance(data, dict):
        return None
    where = source.where(loc)

    def number(parent: Any, key: str, *path_: str) -> float:
        at = (*loc, *path_, key)
        value = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(source.problem(at, f"expected a number, got {quote(value)}"))
        if not math.isfinite(value) or value < 0:
            raise InputError(
                source.problem(at, f"expected a finite number >= 0, got {quote(value)}")
            )
        return float(value)

    if "completed" in data and "output_throughput" in data:  # vLLM and SGLang
        tool = "SGLang bench_serving" if "input_throughput" in data else "vLLM benchmark_serving"
        completed = number(data, "completed")
        if completed != int(completed) or completed < 1:
            raise InputError(
                source.problem(
                    (*loc, "completed"),
                    f"expected a whole number of requests >= 1, got {quote(data['completed'])}",
                )
            )
        mean_in = number(data, "total_input_tokens") / completed
        mean_out = number(data, "total_output_tokens") / completed
        throughput = number(data, "output_throughput")
        shapes = {"total_input_tokens": mean_in, "total_output_tokens": mean_out}
    elif isinstance(data.get("output_token_throughput"), dict):  # genai-perf
        tool = "genai-perf"
        throughput = number(data["output_token_throughput"], "avg", "output_token_throughput")
        mean_in = number(data.get("input_sequence_length"), "avg", "input_sequence_length")
        mean_out = number(data.get("output_sequence_length"), "avg", "output_sequence_length")
        shapes = {"input_sequence_length": mean_in, "output_sequence_length": mean_out}
    else:
        return None
    if deployment is None:
        raise InputError(
            f"{where}: a {tool} result does not say what it ran on: give --model, --chip and "
            "--gpus (the GPUs of the deployment that served it)"
        )
    if min(throughput, mean_in, mean_out) <= 0:
        raise InputError(f"{where}: the {tool} result measured no tokens")
    for key, mean in shapes.items():
        if mean < 1:
            raise InputError(
                source.problem(
                    (*loc, key),
                    f"{mean:.3g} tokens a request: a request has at least one (is the request "
                    "count right?)",
                )
            )
        if mean > MAX_TOKENS:
            raise InputError(
                source.problem(
                    (*loc, key),
                    f"{mean:.3g} tokens a request: at most {MAX_TOKENS:,} (the longest context "
                    "of any released model; docs/scenarios.md#input-limits)",
                )
            )
    if throughput / deployment.gpus > MAX_MEASURED:
        raise InputError(
            f"{where}: output_throughput: {throughput:.3g} tokens/s over {deployment.gpus} "
            f"GPUs: at most {MAX_MEASURED:g} a GPU (a ceiling far above any real chip)"
        )
    item = {
        "id": f"{path.name} ({tool})",
        "model": deployment.model,
        "chip": deployment.chip,
        "gpus": deployment.gpus,
        "input_tokens": max(1, round(mean_in)),
        "output_tokens": max(1, round(mean_out)),
        "metric": "serving_output_tokens_per_s_per_gpu",
        "value": throughput / deployment.gpus,
        "source": tool,
    }
    m = validate(Measurement, item, SourceMap(path, {(): source.line(loc) or 1}))
    return Point(m, where)


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
