"""Workload variants (issue 24): the overlay of a variant on the base workload, the located
errors of every bad list, the shipped monthly example, and ``workload fit --window``."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml
from conftest import DATA, H100_H200, MONTHLY, run_main

from pddplan.errors import InputError
from pddplan.io.scenario import load_scenario
from pddplan.spec.scenario import (
    Scenario,
    WorkloadVariant,
    resolve_variant,
    variant_problems,
    variant_scenarios,
)

SLICE = DATA / "traces" / "conversation-2000.jsonl"

BASE = textwrap.dedent("""\
    name: t
    model: llama-3.1-8b
    datacenters:
      a: {chips: [h100-sxm], roles: [prefill, relay_decode]}
      b: {chips: [l40s], roles: [main_decode]}
    links:
      - between: [a, b]
        rtt_ms: 10
        tiers: [{gbps: 10, usd_per_month: 100}]
    workload:
      arrival_rps: 2
      input_tokens: {dist: fixed, value: 1000}
      output_tokens: {dist: fixed, value: 100}
      prefix_hit: {dist: beta, mean: 0.5, concentration: 2}
      md_prefix_hit: {dist: fixed, value: 0.3}
      turn_interval_s: 30
    sla: {ttft_p90_s: 1, ttft_p99_s: 2, tpot_ms: 50}
""")


def _write(tmp_path: Path, variants: str, base: str = BASE) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(
        base + "workload_variants:\n" + textwrap.indent(textwrap.dedent(variants), "  ")
    )
    return path


def _line(path: Path, text: str, nth: int = 0) -> int:
    """The 1-based line of the ``nth`` line of ``path`` that contains ``text``."""
    found = [i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    return found[nth]


def _errors(path: Path) -> list[str]:
    """``pddplan validate``'s error lines, after checking it failed cleanly (exit 2)."""
    result = run_main("validate", str(path))
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert all(line.startswith(f"Error: {path}:") for line in lines), lines
    return lines


# --- the overlay ------------------------------------------------------------------------------
def test_a_variant_changes_only_the_keys_it_gives(tmp_path):
    """By hand: m1 sets prefix_hit and arrival_rps, and keeps the base's lengths, its MD
    hit and its turn interval; m2 gives nothing but its weight, so it is the base."""
    path = _write(
        tmp_path,
        """\
        - name: m1
          weight: 0.25
          arrival_rps: 3
          prefix_hit: {dist: fixed, value: 0.9}
        - name: m2
          weight: 0.75
        """,
    )
    s = load_scenario(path).scenario
    (m1, s1), (m2, s2) = variant_scenarios(s)
    assert (m1.name, m2.name) == ("m1", "m2")
    w = s1.workload
    assert w.arrival_rps == 3
    assert w.prefix_hit is not None and w.prefix_hit.dist == "fixed" and w.prefix_hit.value == 0.9
    assert w.input_tokens == s.workload.input_tokens and w.output_tokens == s.workload.output_tokens
    assert w.md_prefix_hit == s.workload.md_prefix_hit and w.turn_interval_s == 30
    assert s2.workload == s.workload
    assert s1.name == "t/m1" and s1.workload_variants is None
    assert s1.sla == s.sla and s1.datacenters == s.datacenters
    assert s.workload.arrival_rps == 2  # the base is unchanged


def test_a_variant_that_gives_the_requests_another_way_drops_the_base_way():
    """Classes over a base given as distributions: the base's distributions (md_prefix_hit
    too) go, its arrival rate and turn interval stay."""
    s = Scenario.model_validate(yaml.safe_load(BASE))
    v = WorkloadVariant(
        name="mix",
        must_meet=True,
        classes=[{"weight": 1, "input_tokens": 500, "output_tokens": 50, "p_hit": 0.2}],
    )
    w = resolve_variant(s.workload, v)
    assert w.classes is not None and len(w.classes) == 1
    assert w.input_tokens is None and w.prefix_hit is None and w.md_prefix_hit is None
    assert w.arrival_rps == 2 and w.turn_interval_s == 30


def test_a_scenario_without_variants_has_none():
    s = Scenario.model_validate(yaml.safe_load(BASE))
    assert s.workload_variants is None and variant_scenarios(s) == []
    assert variant_problems(None) == []


def test_problem_variants_share_the_workload_free_tables(tmp_path):
    """A variant of another rate only shares the request classes too (the demand is not
    their input); one of another mix does not."""
    path = _write(
        tmp_path,
        "- {name: hi, must_meet: true, arrival_rps: 5}\n"
        "- {name: mix, must_meet: true, classes: [{weight: 1, input_tokens: 500, "
        "output_tokens: 50, p_hit: 0.2}]}\n",
    )
    problem = load_scenario(path)
    [(v, p), (_, mix)] = problem.variants()
    assert v.name == "hi" and p.scenario.workload.arrival_rps == 5
    assert p._tables.instances is problem._tables.instances is mix._tables.instances
    assert p._tables.classes is problem._tables.classes
    assert mix._tables.classes is not problem._tables.classes


def test_a_trace_variant_is_fitted_on_load(tmp_path):
    """A variant with a trace is replaced by the trace's fitted classes and rate, as the
    base workload is; its arrival_rps, when given, overrides the trace's rate."""
    trace = f"{{file: {SLICE}, cache_tokens: 2000000}}"
    path = _write(
        tmp_path,
        f"""\
        - {{name: traced, weight: 0.5, trace: {trace}}}
        - {{name: faster, weight: 0.5, trace: {trace}, arrival_rps: 10}}
        """,
    )
    s = load_scenario(path).scenario
    (_, s1), (_, s2) = variant_scenarios(s)
    assert s1.workload.trace is None and s1.workload.classes
    assert s1.workload.arrival_rps == pytest.approx(2.988042, rel=1e-6)
    assert s2.workload.arrival_rps == 10 and s2.workload.classes == s1.workload.classes
    assert s1.workload.input_tokens is None and s1.workload.md_prefix_hit is None


# --- bad input: one located line each, exit 2 -------------------------------------------------
def test_an_unknown_key_in_a_variant(tmp_path):
    path = _write(tmp_path, "- {name: a, weight: 1, prefix_hits: {dist: fixed, value: 0.5}}\n")
    [line] = _errors(path)
    assert f"s.yaml:{_line(path, 'prefix_hits')}: workload_variants[0].prefix_hits: " in line
    assert "unknown key 'prefix_hits'; did you mean 'prefix_hit'?; allowed: " in line
    assert "must_meet" in line and "arrival_rps" in line


def test_duplicate_names(tmp_path):
    path = _write(
        tmp_path,
        """\
        - {name: m1, weight: 0.5}
        - {name: m2, must_meet: true}
        - {name: m1, weight: 0.5}
        """,
    )
    [line] = _errors(path)
    assert f"s.yaml:{_line(path, 'm1', 1)}: workload_variants[2].name: " in line
    assert "'m1' is the name of workload_variants[0] too" in line


def test_weights_that_do_not_sum_to_one(tmp_path):
    path = _write(
        tmp_path,
        """\
        - {name: a, weight: 0.5}
        - {name: b, weight: 0.4}
        - {name: c, must_meet: true}
        """,
    )
    [line] = _errors(path)
    assert f"s.yaml:{_line(path, 'workload_variants')}: workload_variants: " in line
    assert "weights sum to 0.9 (a 0.5, b 0.4); they must sum to 1 within 1e-06" in line


def test_no_must_meet_and_no_weights(tmp_path):
    path = _write(tmp_path, "- {name: a, arrival_rps: 3}\n- {name: b, must_meet: false}\n")
    [line] = _errors(path)
    assert f"s.yaml:{_line(path, 'workload_variants')}: workload_variants: " in line
    assert "no variant is must_meet and none has a weight" in line


def test_a_variant_with_neither_or_both(tmp_path):
    """Decided: a variant is must_meet or weighted, never both (and never neither)."""
    path = _write(
        tmp_path,
        """\
        - {name: a, weight: 0.5}
        - {name: b, must_meet: true, weight: 0.5}
        - {name: c, arrival_rps: 3}
        """,
    )
    lines = _errors(path)
    assert len(lines) == 2, lines
    assert (
        f"s.yaml:{_line(path, 'name: b')}: workload_variants[1].weight: variant 'b' is " in lines[0]
    )
    assert "give one of the two" in lines[0]
    assert f"s.yaml:{_line(path, 'name: c')}: workload_variants[2]: variant 'c' has no " in lines[1]


@pytest.mark.parametrize(
    ("variant", "key", "message"),
    [
        ("- {name: a, weight: 1.5}\n", "workload_variants[0].weight", "less than or equal to 1"),
        ("- {name: a, weight: 0}\n", "workload_variants[0].weight", "greater than 0"),
        ("- {name: Jan 2026, weight: 1}\n", "workload_variants[0].name", "should match pattern"),
        ("- {weight: 1}\n", "workload_variants[0].name", "missing required key 'name'"),
        ("- {name: a, weight: true}\n", "workload_variants[0].weight", "not the boolean true"),
        ("[]\n", "workload_variants", "an empty list: give at least one variant"),
    ],
)
def test_bad_values(tmp_path, variant, key, message):
    path = _write(tmp_path, variant)
    [line] = _errors(path)
    assert f": {key}: " in line and message in line, line


def test_a_variant_that_makes_no_workload(tmp_path):
    """Over a base given as classes, a variant's prefix_hit alone is not a workload."""
    base = BASE.replace(
        """\
  input_tokens: {dist: fixed, value: 1000}
  output_tokens: {dist: fixed, value: 100}
  prefix_hit: {dist: beta, mean: 0.5, concentration: 2}
  md_prefix_hit: {dist: fixed, value: 0.3}
""",
        "  classes: [{weight: 1, input_tokens: 1000, output_tokens: 100, p_hit: 0.5}]\n",
    )
    assert "classes" in base
    path = _write(tmp_path, "- {name: a, weight: 1, prefix_hit: {dist: fixed, value: 0.9}}\n", base)
    [line] = _errors(path)
    assert (
        f"s.yaml:{_line(path, 'name: a')}: workload_variants[0]: over the base workload: " in line
    )
    assert "give input_tokens, output_tokens" in line


def test_a_variant_the_md_cache_refuses(tmp_path):
    """md_cache options with an MD hit per class need a variant with as many classes."""
    base = (
        BASE.replace(
            """\
  input_tokens: {dist: fixed, value: 1000}
  output_tokens: {dist: fixed, value: 100}
  prefix_hit: {dist: beta, mean: 0.5, concentration: 2}
  md_prefix_hit: {dist: fixed, value: 0.3}
""",
            "  classes: [{weight: 1, input_tokens: 1000, output_tokens: 100, p_hit: 0.5}]\n",
        )
        + "md_cache: [{gb_per_gpu: 10, md_hit: [0.4]}]\n"
    )
    classes = "[{weight: 0.5, input_tokens: 900, output_tokens: 90, p_hit: 0.5}, " * 1
    classes += "{weight: 0.5, input_tokens: 2000, output_tokens: 90, p_hit: 0.7}]"
    path = _write(tmp_path, f"- {{name: a, weight: 1, classes: {classes}}}\n", base)
    [line] = _errors(path)
    assert f"s.yaml:{_line(path, 'name: a')}: workload_variants[0]: " in line
    assert "md_hit has 1 values; the workload has 2 classes" in line


def test_a_variant_trace_file_that_is_missing(tmp_path):
    path = _write(tmp_path, "- {name: a, weight: 1, trace: {file: nope.jsonl}}\n")
    [line] = _errors(path)
    assert f"s.yaml:{_line(path, 'nope')}: workload_variants[0].trace.file: " in line
    assert "trace file not found" in line


def test_list_rules_are_reported_beside_other_problems(tmp_path):
    """Every problem of the file in one run: a bad SLA and the variants' weights."""
    path = _write(
        tmp_path, "- {name: a, weight: 0.3}\n", BASE.replace("tpot_ms: 50", "tpot_ms: -1")
    )
    lines = _errors(path)
    assert len(lines) == 2, lines
    assert any("sla.tpot_ms" in line for line in lines)
    assert any("weights sum to 0.3" in line for line in lines)


def test_variant_scenarios_refuses_bad_variants_built_in_code():
    data = yaml.safe_load(BASE)
    data["workload_variants"] = [{"name": "a", "weight": 0.5}]
    s = Scenario.model_validate(data)  # the list rules are checked where variants are used
    with pytest.raises(ValueError, match=r"weights sum to 0\.5"):
        variant_scenarios(s)


# --- the shipped example -------------------------------------------------------------------
def test_the_monthly_example_validates_and_keeps_the_base():
    result = run_main("validate", str(MONTHLY), "--json")
    assert result.exit_code == 0, result.output
    scenario = json.loads(result.stdout)["scenario"]
    variants = scenario["workload_variants"]
    assert [v["name"] for v in variants] == ["m1", "m2", "m3", "m4"]
    assert [v["must_meet"] for v in variants] == [True, False, True, False]
    assert [v["weight"] for v in variants if v["weight"]] == [0.5, 0.5]
    assert [v["prefix_hit"]["mean"] for v in variants] == [0.90, 0.85, 0.80, 0.93]
    problem = load_scenario(MONTHLY)
    base = load_scenario(H100_H200).scenario
    assert problem.scenario.workload == base.workload
    for _, p in problem.variants():
        assert p.scenario.workload.input_tokens == base.workload.input_tokens


def test_validate_shows_the_variants():
    result = run_main("validate", str(MONTHLY))
    assert result.exit_code == 0, result.output
    assert "variant m3" in result.stdout and "must meet; changes arrival_rps, prefix_hit" in (
        result.stdout
    )


def test_the_schema_has_the_key():
    result = run_main("schema")
    schema = json.loads(result.stdout)
    assert "workload_variants" in schema["properties"]
    variant = schema["$defs"]["WorkloadVariant"]["properties"]
    assert {"name", "weight", "must_meet", "prefix_hit", "classes", "trace"} <= set(variant)
    assert variant["prefix_hit"]["description"].startswith("Prefill-side")


def test_a_variant_has_every_workload_key():
    from pddplan.spec.scenario import Workload

    assert set(Workload.model_fields) < set(WorkloadVariant.model_fields)


def test_input_error_names_the_variant_in_code(tmp_path):
    """The loader's check: a scenario with variants that fail is an InputError."""
    path = _write(tmp_path, "- {name: a, weight: 0.5}\n")
    with pytest.raises(InputError, match=r"workload_variants: the variants' weights"):
        load_scenario(path)


# --- workload fit --window ------------------------------------------------------------------
DAY_MS = 86_400_000


def _trace(tmp_path: Path, per_day: list[int]) -> Path:
    """A synthetic trace: ``per_day[d]`` requests spread over day d, each of 1,000 tokens in
    two blocks; every other request repeats the previous one's first block."""
    rows, n = [], 0
    for day, count in enumerate(per_day):
        for i in range(count):
            first = n - 1 if n % 2 else n
            rows.append(
                {
                    "timestamp": day * DAY_MS + i * (DAY_MS // max(count, 1)),
                    "input_length": 1000,
                    "output_length": 100 + day,
                    "hash_ids": [first * 2, n * 2 + 1],
                }
            )
            n += 1
    path = tmp_path / "days.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_windows_by_day_and_their_variants_yaml(tmp_path):
    """Three days of 150, 300 and 250 requests: three variants with their shares as
    weights, summing to 1, that validate pasted under workload_variants."""
    trace = _trace(tmp_path, [150, 300, 250])
    out = tmp_path / "variants.yaml"
    result = run_main("workload", "fit", str(trace), "--window", "1d", "--out", str(out))
    assert result.exit_code == 0, result.output
    table = result.stdout
    assert "w1" in table and "w3" in table and "1d 00:00" in table and "2d 00:00" in table
    variants = yaml.safe_load(out.read_text())
    assert [v["name"] for v in variants] == ["w1", "w2", "w3"]
    weights = [v["weight"] for v in variants]
    assert weights[:2] == [round(150 / 700, 6), round(300 / 700, 6)]
    assert round(sum(weights), 9) == 1
    assert variants[0]["arrival_rps"] == pytest.approx(150 / 86400, rel=1e-5)
    assert {c["output_tokens"] for c in variants[2]["classes"]} == {102}
    scenario = tmp_path / "s.yaml"
    scenario.write_text(BASE + "workload_variants:\n" + out.read_text())
    pairs = variant_scenarios(load_scenario(scenario).scenario)
    assert [s.workload.arrival_rps for _, s in pairs] == [v["arrival_rps"] for v in variants]
    assert all(s.workload.classes and s.workload.input_tokens is None for _, s in pairs)


def test_small_windows_are_merged(tmp_path):
    """Day 0 has 40 requests (< 100): merged forward into day 1; day 3's 10 into day 2;
    day 4 is empty and left out."""
    trace = _trace(tmp_path, [40, 200, 150, 10])
    result = run_main("workload", "fit", str(trace), "--window", "1d", "--json")
    assert result.exit_code == 0, result.output
    view = json.loads(result.stdout)
    assert view["merged"] == 2 and view["min_requests"] == 100
    rows = [(w["name"], w["requests"], w["windows"]) for w in view["windows"]]
    assert rows == [("w1", 240, 2), ("w2", 160, 2)]
    assert view["windows"][0]["start_s"] == 0 and view["windows"][0]["end_s"] == 2 * 86400
    assert sum(w["weight"] for w in view["windows"]) == pytest.approx(1)


def test_windows_of_the_shipped_trace_slice():
    """The first 2,000 Mooncake requests span 669 s: 5-minute windows give three; the cache
    carries over, so the later windows hit more than the first."""
    result = run_main("workload", "fit", str(SLICE), "--window", "5m", "--json")
    assert result.exit_code == 0, result.output
    view = json.loads(result.stdout)
    windows = view["windows"]
    assert [w["start_s"] for w in windows] == [0, 300, 600]
    assert sum(w["requests"] for w in windows) == 2000
    first, second = windows[0]["fit"], windows[1]["fit"]
    assert second["mean_hit_rate"] > first["mean_hit_rate"]
    assert windows[0]["arrival_rps"] == pytest.approx(windows[0]["requests"] / 300)


@pytest.mark.parametrize(("window", "seconds"), [("30m", 1800), ("12h", 43_200), ("7d", 604_800)])
def test_window_units_accepted(tmp_path, window, seconds):
    trace = _trace(tmp_path, [120])
    result = run_main("workload", "fit", str(trace), "--window", window, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["window_s"] == seconds


@pytest.mark.parametrize("window", ["1w", "0d", "1.5h", "d", "10", "-1h", "１d"])
def test_window_units_refused(tmp_path, window):
    trace = _trace(tmp_path, [120])
    result = run_main("workload", "fit", str(trace), "--window", window)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: --window: '{window}' is not allowed")


def test_a_variant_trace_without_a_rate_names_the_variant(tmp_path):
    one = tmp_path / "one.jsonl"
    one.write_text(
        json.dumps({"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}) + "\n"
    )
    path = _write(tmp_path, "- {name: a, weight: 1, trace: {file: one.jsonl}}\n")
    result = run_main("validate", str(path))
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (
        f"Error: {path}: workload_variants[0].trace: one.jsonl spans no time, so it gives no "
        "arrival rate; set workload_variants[0].arrival_rps"
    )
