"""Scenario loading: the shipped files, and every kind of user mistake (issue #2)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA, ROOT, SCENARIOS, triple

from pddplan.errors import InputError
from pddplan.io.scenario import load_scenario
from pddplan.spec.scenario import Scenario, scenario_json_schema

GOOD = textwrap.dedent("""\
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
      arrival_rps: 1
      input_tokens: {dist: fixed, value: 1000}
      output_tokens: {dist: fixed, value: 100}
      prefix_hit: {dist: beta, mean: 0.5, concentration: 2}
    sla: {ttft_p90_s: 1, ttft_p99_s: 2, tpot_ms: 50}
""")


def _load(tmp_path: Path, text: str) -> Scenario:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return load_scenario(path).scenario


def _problems(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(InputError) as err:
        _load(tmp_path, text)
    return err.value.problems


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_shipped_scenarios_load(path):
    scenario, hardware, models = triple(load_scenario(path))
    assert scenario.model in models
    assert all(c in hardware.chips for dc in scenario.datacenters.values() for c in dc.chips)


def test_at_least_two_scenarios_ship():
    assert len(SCENARIOS) >= 2


def test_scenarios_are_frozen(tmp_path):
    s = _load(tmp_path, GOOD)
    with pytest.raises(Exception, match="frozen"):
        s.name = "other"  # type: ignore[misc]


def test_every_problem_of_a_file_is_reported_together():
    with pytest.raises(InputError) as err:
        load_scenario(DATA / "bad-many.yaml")
    problems = err.value.problems
    expected = [
        "bad-many.yaml:6: datacenters.a.roles[1]: input should be 'prefill', 'relay_decode' or 'main_decode', got 'relay'",
        "bad-many.yaml:7: datacenters.a.max_gpus: input should be greater than or equal to 1, got -4",
        "bad-many.yaml:13: links[0].rtt_ms: input should be greater than 0, got 0",
        "bad-many.yaml:17: workload.input_tokens: dist 'lognormal' needs sigma",
        "bad-many.yaml:19: workload.prefix_hit: bucket shares sum to 1.1; they must sum to 1; bucket hi 1.2 is above 1",
        "bad-many.yaml:21: sla.ttft_p90: unknown key 'ttft_p90'; did you mean 'ttft_p90_s'?",
        "bad-many.yaml:2: model: unknown model 'deepseek-v33'; close matches: deepseek-v3",
        "bad-many.yaml:5: datacenters.a.chips[0]: unknown chip 'h100'; close matches: h800, h100-sxm",
        "bad-many.yaml:12: links[0].between: unknown datacenter 'c' (datacenters: a, b)",
    ]
    for line in expected:
        assert any(line in p for p in problems), f"{line!r} not in {problems}"


def test_malformed_yaml_names_the_line():
    with pytest.raises(InputError, match=r"malformed.yaml:3: malformed YAML"):
        load_scenario(DATA / "malformed.yaml")


def test_empty_file(tmp_path):
    assert _problems(tmp_path, "") == [f"{tmp_path / 's.yaml'}: the file is empty"]


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        load_scenario(tmp_path / "nope.yaml")


def test_duplicate_keys_are_errors(tmp_path):
    problems = _problems(tmp_path, GOOD + "name: again\n")
    assert any(":16: name: duplicate key" in p for p in problems), problems


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "mean: 0.5",
            "mean: 1.5",
            "workload.prefix_hit.mean: input should be less than 1, got 1.5",
        ),
        ("ttft_p99_s: 2", "ttft_p99_s: 0.5", "ttft_p99_s (0.5) must be >= ttft_p90_s (1)"),
        (
            "arrival_rps: 1",
            "arrival_rps: -1",
            "workload.arrival_rps: input should be greater than 0, got -1",
        ),
        (
            "value: 1000",
            "value: lots",
            "workload.input_tokens.value: expected a number, got the text 'lots'",
        ),
        (
            "arrival_rps: 1",
            "arrival_rps: .inf",
            "workload.arrival_rps: input should be a finite number, got inf",
        ),
        ("rtt_ms: 10", "rtt_ms: .nan", "links[0].rtt_ms: input should be a finite number"),
        (
            "arrival_rps: 1",
            "arrival_rps: true",
            "workload.arrival_rps: expected a number, not the boolean true",
        ),
        (
            "usd_per_month: 100",
            "usd_per_month: " + "1" * 41,
            "usd_per_month: integer out of range",
        ),
        # ceilings where the physics has one (pddplan.spec.limits)
        (
            "arrival_rps: 1",
            "arrival_rps: 1e308",
            "workload.arrival_rps: input should be less than or equal to 1000000, got 1e+308 "
            "(a ceiling far above any real deployment",
        ),
        (
            "value: 1000",
            "value: 1e300",
            "input_tokens.value: input should be less than or equal to 10000000",
        ),
        (
            "rtt_ms: 10",
            "rtt_ms: 5000",
            "links[0].rtt_ms: input should be less than or equal to 1000",
        ),
        (
            "gbps: 10,",
            "gbps: 1e9,",
            "tiers[0].gbps: input should be less than or equal to 1000000,",
        ),
        (
            "usd_per_month: 100",
            "usd_per_month: 1e12",
            "usd_per_month: input should be less than or equal to 1000000000,",
        ),
        (
            "roles: [main_decode]}",
            "roles: [main_decode], max_gpus: 2000000}",
            "datacenters.b.max_gpus: input should be less than or equal to 1000000,",
        ),
        # strict types where YAML or pydantic would coerce
        (
            "roles: [main_decode]}",
            "roles: [main_decode], max_gpus: yes}",
            "max_gpus: expected an integer, not the boolean true",
        ),
        (
            "roles: [main_decode]}",
            "roles: [main_decode], max_gpus: 8.0}",
            "max_gpus: expected an integer, got 8.0",
        ),
        (
            "roles: [main_decode]}",
            "roles: [main_decode], max_gpus: '8'}",
            "max_gpus: expected an integer, got '8'",
        ),
        (
            "arrival_rps: 1",
            "arrival_rps: '1'",
            "workload.arrival_rps: expected a number, got the text '1'",
        ),
        (
            "roles: [main_decode]}",
            "roles: [main_decode], inventory: {l40s: 2.5}}",
            "datacenters.b.inventory: l40s: expected an integer, got 2.5",
        ),
        ("rtt_ms: 10", "rtt_ms: 10\n    rtt: 3", "unknown key 'rtt'; did you mean 'rtt_ms'?"),
        (
            "roles: [main_decode]",
            "roles: [relay_decode]",
            "no datacenter allows role 'main_decode'",
        ),
        ("concentration: 2}", "concentration: 2, value: 0.3}", "dist 'beta' does not take value"),
    ],
)
def test_bad_values_are_located_and_explained(tmp_path, old, new, message):
    assert old in GOOD
    problems = _problems(tmp_path, GOOD.replace(old, new))
    assert any(message in p for p in problems), problems
    assert all(p.startswith(str(tmp_path / "s.yaml") + ":") for p in problems)


def test_a_model_that_fits_no_allowed_configuration(tmp_path):
    text = GOOD.replace("llama-3.1-8b", "deepseek-v3") + "search: {max_gpus_per_instance: 4}\n"
    problems = _problems(tmp_path, text)
    assert any(
        "deepseek-v3 fits no allowed configuration for role 'prefill'" in p for p in problems
    )


def test_unknown_calibration_chip(tmp_path):
    problems = _problems(tmp_path, GOOD + "calibration: {per_chip: {h100: {prefill_mfu: 0.3}}}\n")
    assert any(
        "calibration.per_chip.h100: unknown chip 'h100'; close matches" in p for p in problems
    )


def test_json_schema_describes_the_format():
    schema = scenario_json_schema()
    assert set(schema["required"]) >= {"name", "model", "datacenters", "workload", "sla"}
    assert "Datacenter" in schema["$defs"]


def test_distributions():
    """Hand-checkable quantiles and CDFs: the buckets put 20% uniformly on [0, 0.5) and 80%
    on [0.9, 1), nothing between."""
    from pddplan.spec.distributions import HitDist, LengthDist
    from pddplan.workload.distributions import frozen_dist, slice_mean

    buckets = frozen_dist(
        HitDist(
            dist="buckets",
            buckets=[{"lo": 0, "hi": 0.5, "share": 0.2}, {"lo": 0.9, "hi": 1.0, "share": 0.8}],
        )
    )
    assert buckets.cdf([0.25, 0.5, 0.7, 0.9, 0.95]) == pytest.approx([0.1, 0.2, 0.2, 0.2, 0.6])
    assert buckets.ppf([0.1, 0.15, 0.6, 1.0]) == pytest.approx([0.25, 0.375, 0.95, 1.0])
    low = HitDist(
        dist="buckets",
        buckets=[{"lo": 0, "hi": 0.5, "share": 0.2}, {"lo": 0.9, "hi": 1.0, "share": 0.8}],
    )
    assert slice_mean(low, 0.0, 0.2) == pytest.approx(0.25, abs=1e-3)  # the low bucket
    logn = LengthDist(dist="lognormal", median=1000, sigma=0.5)
    assert float(frozen_dist(logn).ppf(0.5)) == pytest.approx(1000)
    assert float(frozen_dist(logn).cdf(1000)) == pytest.approx(0.5)
    capped = LengthDist(dist="lognormal", median=1000, sigma=1.0, max=2000)
    assert float(frozen_dist(capped).ppf(0.999)) <= 2000 + 1e-9
    assert float(frozen_dist(LengthDist(dist="uniform", min=10, max=30)).ppf(0.25)) == 15.0
    assert float(frozen_dist(LengthDist(dist="fixed", value=7)).ppf(0.3)) == 7.0


@pytest.mark.parametrize(
    "spec",
    [
        {"dist": "lognormal", "median": 8000, "sigma": 1.3},
        {"dist": "uniform", "min": 100, "max": 900},
        {"dist": "beta", "mean": 0.3, "concentration": 5},
        {"dist": "beta", "mean": 0.9, "concentration": 40},
        {
            "dist": "buckets",
            "buckets": [{"lo": 0, "hi": 0.4, "share": 0.3}, {"lo": 0.6, "hi": 1, "share": 0.7}],
        },
    ],
)
def test_distributions_agree_with_scipy_stats(spec):
    """The quantiles and CDFs built on scipy.special are scipy.stats' own, to rounding."""
    from scipy import stats

    from pddplan.spec.distributions import HitDist, LengthDist
    from pddplan.workload.distributions import frozen_dist

    d = (HitDist if spec["dist"] in ("beta", "buckets") else LengthDist).model_validate(spec)
    if spec["dist"] == "lognormal":
        ref = stats.lognorm(s=spec["sigma"], scale=spec["median"])
    elif spec["dist"] == "uniform":
        ref = stats.uniform(loc=spec["min"], scale=spec["max"] - spec["min"])
    elif spec["dist"] == "beta":
        a = spec["mean"] * spec["concentration"]
        ref = stats.beta(a, spec["concentration"] - a)
    else:
        ref = stats.rv_histogram(([0.3, 0.0, 0.7], [0.0, 0.4, 0.6, 1.0]), density=False)
    q = np.linspace(0.001, 0.999, 999)
    ours = frozen_dist(d)
    assert ours.ppf(q) == pytest.approx(ref.ppf(q), rel=1e-12)
    x = ref.ppf(q)
    assert ours.cdf(x) == pytest.approx(ref.cdf(x), rel=1e-12, abs=1e-15)


def test_custom_catalogs_are_used_for_id_checks(tmp_path):
    """A scenario with its own hardware catalog gets no false 'unknown chip' errors next to
    a real one (regression: ids were checked against the shipped catalog)."""
    shipped = (ROOT / "catalogs" / "hardware.yaml").read_text()
    (tmp_path / "hw.yaml").write_text(shipped.replace("  l40s:\n", "  my-l40s:\n", 1))
    text = GOOD.replace("[l40s]", "[my-l40s]").replace("rtt_ms: 10", "rtt_ms: 0")
    text += "catalogs: {hardware: hw.yaml}\n"
    problems = _problems(tmp_path, text)
    assert len(problems) == 1 and "links[0].rtt_ms" in problems[0], problems


def test_prefill_must_reach_main_decode(tmp_path):
    text = GOOD.replace(
        "  - between: [a, b]\n    rtt_ms: 10\n    tiers: [{gbps: 10, usd_per_month: 100}]\n", ""
    )
    text = text.replace("links:\n", "links: []\n")
    problems = _problems(tmp_path, text)
    assert any("no prefill datacenter is the same as, or linked to" in p for p in problems), (
        problems
    )


def test_a_scenario_can_reference_a_trace(tmp_path):
    """The trace is fitted on load into classes; a given arrival_rps overrides its rate."""
    trace = DATA / "traces" / "conversation-2000.jsonl"
    base = GOOD.split("workload:")[0]
    rest = "sla:" + GOOD.split("sla:")[1]
    text = base + f"workload:\n  trace: {{file: {trace}, cache_tokens: 1000000}}\n" + rest
    s = _load(tmp_path, text)
    assert s.workload.classes and s.workload.arrival_rps == pytest.approx(2.988, abs=1e-3)
    overridden = _load(tmp_path, text.replace("workload:\n", "workload:\n  arrival_rps: 7\n"))
    assert overridden.workload.arrival_rps == 7


def test_a_trace_with_distributions_is_ambiguous(tmp_path):
    text = GOOD.replace("workload:\n", "workload:\n  trace: {file: x.jsonl}\n")
    assert any(
        "give a trace, or classes, or distributions, not several" in p
        for p in _problems(tmp_path, text)
    )


def test_a_number_with_an_exponent_is_a_number(tmp_path):
    """YAML 1.1 reads ``1e-4`` (no dot, or an unsigned exponent) as text; users mean a number."""
    s = _load(
        tmp_path,
        GOOD.replace("arrival_rps: 1", "arrival_rps: 2e1").replace("rtt_ms: 10", "rtt_ms: 1.5e1"),
    )
    assert s.workload.arrival_rps == 20.0 and s.links[0].rtt_ms == 15.0
    quoted = _problems(tmp_path, GOOD.replace("arrival_rps: 1", "arrival_rps: '2e1'"))
    assert any("expected a number, got the text '2e1'" in p for p in quoted), quoted


@pytest.mark.slow  # over 1 s: the default run's time (README)
def test_too_many_classes_are_refused_with_the_memory_they_would_take(tmp_path):
    head = GOOD.split("  input_tokens:")[0]
    n = 5000
    rows = "".join(
        f"    - {{weight: {1 / n!r}, input_tokens: {1000 + i}, output_tokens: 100, p_hit: 0.5}}\n"
        for i in range(n)
    )
    text = head + "  classes:\n" + rows + "sla: {ttft_p90_s: 1, ttft_p99_s: 2, tpot_ms: 50}\n"
    problems = _problems(tmp_path, text)
    assert len(problems) == 1, problems
    # (5001 x 5000 entries x 9 B) / 2^30 = 0.21 GiB
    assert "workload: 5,000 classes: at most 4,096" in problems[0]
    assert "0.21 GiB per MD cache option" in problems[0]
