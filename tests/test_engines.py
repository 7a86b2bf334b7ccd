"""Engine profiles and the terms they set (issue #49): each term against a hand-worked toy
pass, the profiles' resolution order, their error quantiles, and their bad input."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from conftest import H100_H200, TOY_EFFICIENCY

import pddplan
from pddplan.errors import InputError
from pddplan.io.catalogs import load_engines
from pddplan.model.instance import make_instance
from pddplan.spec.calibration import Calibration, CalibrationOverride, Knobs, resolve_calibration
from pddplan.spec.engine import EngineCatalog, EngineProfile, PhaseError, chip_knobs
from pddplan.spec.llm import ModelSpec

# the toy pass of test_perf.py: 1,000 new tokens on one GPU, compute-bound at 1.38018816 ms;
# the toy decode step: batch 1 at 1,000 tokens, memory-bound at 129.826816 us
TOY_PREFILL_S = 1.38018816e-3
TOY_DECODE_S = 129.826816e-6


def toy_cal(**knobs: float | bool) -> Calibration:
    return Calibration(efficiency=TOY_EFFICIENCY, knobs=Knobs(ep_imbalance=1.0, **knobs))


def test_layer_overhead_is_paid_per_layer_in_every_pass(toy_model, toy_chip):
    """2 layers x 5 us = 10 us on the toy decode step and on the toy prefill pass alone."""
    inst = make_instance(toy_model, toy_chip, 1, toy_cal(layer_overhead_us=5.0))
    assert inst.decode_step_s(1, 1000) == pytest.approx(TOY_DECODE_S + 10e-6)
    assert inst.prefill_pass_s(1000, 0) == pytest.approx(TOY_PREFILL_S + 10e-6)


def test_time_factors_scale_whole_passes(toy_model, toy_chip):
    """``perf_quantile``'s factors multiply the pass and the step, nothing else."""
    inst = make_instance(
        toy_model, toy_chip, 1, toy_cal(prefill_time_factor=2.0, decode_time_factor=1.5)
    )
    assert inst.decode_step_s(1, 1000) == pytest.approx(1.5 * TOY_DECODE_S)
    assert inst.prefill_pass_s(1000, 0) == pytest.approx(2.0 * TOY_PREFILL_S)
    assert inst.prefill_service_s(1000, 0.0) == pytest.approx(2.0 * TOY_PREFILL_S)
    full = [[(1000.0, 0.0, 0.0)]]
    assert inst.batched_pass_s(full) == pytest.approx(2.0 * TOY_PREFILL_S)


def test_speculative_decoding_verifies_drafts_and_divides_by_the_acceptance_length(
    toy_model, toy_chip
):
    """One draft token, 1.6 tokens gained a step: the toy step verifying 2 tokens per
    sequence is still memory-bound (the weights and the one context's KV read once:
    129.826816 us; its math, 2 x 2 x 32.4M FLOPs, 2.6 us at 50 TFLOP/s), the draft layer
    costs one layer's share of a one-token step (129.826816 / 2 layers = 64.913408 us), and
    the 194.740224 us yield 1.6 tokens: 121.71264 us a token."""
    inst = make_instance(
        toy_model, toy_chip, 1, toy_cal(mtp_draft_tokens=1, mtp_acceptance_length=1.6)
    )
    assert inst.decode_step_s(1, 1000) == pytest.approx(121.71264e-6)
    plain = make_instance(toy_model, toy_chip, 1, toy_cal(mtp_draft_tokens=0))
    assert plain.decode_step_s(1, 1000) == pytest.approx(TOY_DECODE_S)


def test_an_acceptance_length_beyond_the_drafts_is_one_located_line(tmp_path):
    path = _scenario_with(
        tmp_path, "engine: sglang\ncalibration: {default: {mtp_acceptance_length: 2}}\n"
    )
    from conftest import run_main

    result = run_main("validate", str(path))
    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    assert (
        "s.yaml:" in line and "calibration.default: for h100-sxm: mtp_acceptance_length 2" in line
    )


def test_attention_at_bf16_costs_the_scores_twice_on_an_fp8_pass(toy_model, toy_chip):
    """FP8 weights on a chip of 200 FP8 TFLOPS (100 BF16), MFU 0.5: the toy pass's weight
    FLOPs 64,913,408,000 take 0.64913408 ms at 100 TFLOP/s; its 4,096,000,000 score FLOPs
    0.04096 ms at the FP8 peak, 0.08192 ms at the BF16 peak (memory: 33.5 MB, 67 us)."""
    chip = toy_chip.model_copy(update={"fp8_tflops": 200.0})
    fp8 = make_instance(toy_model, chip, 1, toy_cal(), weight_dtype="fp8")
    bf16 = make_instance(toy_model, chip, 1, toy_cal(attention_bf16=True), weight_dtype="fp8")
    assert fp8.prefill_pass_s(1000, 0) == pytest.approx(0.69009408e-3)
    assert bf16.prefill_pass_s(1000, 0) == pytest.approx(0.73105408e-3)
    assert bf16.batched_pass_s([[(1000.0, 0.0, 0.0)]]) == pytest.approx(0.73105408e-3)


@pytest.fixture
def toy_moe(toy_model) -> ModelSpec:
    """The toy with both MLPs as 8 routed experts of 3 x 1,024 x 512 = 1,572,864 params,
    top-2: routed 25,165,824, active routed 6,291,456; total 32,456,704 as the toy's,
    active 5,242,880 attention + 6,291,456 + 2,048,000 embeddings = 13,582,336."""
    return toy_model.model_copy(
        update={
            "n_routed_experts": 8,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 512,
            "active_params_b": 0.013582336,
        }
    )


def test_expert_padding_adds_pad_rows_per_touched_expert(toy_moe, toy_chip):
    """1,000 tokens touch all 8 experts of each of 2 layers. Without padding the pass is
    attention 2 x 1,000 x 5,242,880 + scores 4,096,000,000 + embeddings 2 x 1,000 x
    2,048,000 + experts 2 x 1,000 x 6,291,456 = 31,260,672,000 FLOPs: 0.62521344 ms at
    50 TFLOP/s. A pad of 64 rows adds 2 x 2 layers x 1,572,864 x 64 x 8 experts =
    3,221,225,472 FLOPs: 64.42450944 us."""
    plain = make_instance(toy_moe, toy_chip, 1, toy_cal())
    padded = make_instance(toy_moe, toy_chip, 1, toy_cal(expert_pad_tokens=64.0))
    assert plain.prefill_pass_s(1000, 0) == pytest.approx(0.62521344e-3)
    assert padded.prefill_pass_s(1000, 0) == pytest.approx(0.62521344e-3 + 64.42450944e-6)


def test_dense_models_pay_no_expert_padding(toy_model, toy_chip):
    padded = make_instance(toy_model, toy_chip, 1, toy_cal(expert_pad_tokens=64.0))
    assert padded.prefill_pass_s(1000, 0) == pytest.approx(TOY_PREFILL_S)


def test_resolution_order_catalog_then_engine_then_scenario(hardware):
    """The engine's knobs override the family's defaults; the scenario's override both."""
    from pddplan.spec.calibration import CalibrationSpec

    engine = CalibrationOverride(decode_mfu=0.2, layer_overhead_us=30.0)
    cal = resolve_calibration(hardware, "h100-sxm", engine=engine)
    assert cal.efficiency.decode_mfu == 0.2 and cal.knobs.layer_overhead_us == 30.0
    spec = CalibrationSpec(default=CalibrationOverride(decode_mfu=0.25))
    cal = resolve_calibration(hardware, "h100-sxm", spec, engine=engine)
    assert cal.efficiency.decode_mfu == 0.25 and cal.knobs.layer_overhead_us == 30.0
    assert cal.efficiency.prefill_mfu == hardware.efficiency("h100-sxm").prefill_mfu


def test_phase_error_factor_is_relative_to_the_median():
    """Ratios 0.9 / 1.1 / 1.65 at q = 0.1 / 0.5 / 0.9: factor 1 at 0.5, 1.5 at 0.9, the
    midpoint 1.25 at 0.7, flat beyond the last quantile."""
    err = PhaseError(points=20, quantiles={0.1: 0.9, 0.5: 1.1, 0.9: 1.65})
    assert err.factor(0.5) == pytest.approx(1.0)
    assert err.factor(0.9) == pytest.approx(1.5)
    assert err.factor(0.7) == pytest.approx(1.25)
    assert err.factor(0.99) == pytest.approx(1.5)
    assert err.factor(0.01) == pytest.approx(0.9 / 1.1)


@pytest.mark.parametrize(
    "quantiles, message",
    [
        ({0.1: 0.9, 0.9: 1.2}, "must hold 0.5"),
        ({0.5: 1.0, 0.9: 0.8}, "must not fall"),
        ({0.5: 1.0, 1.0: 1.2}, "in (0, 1)"),
    ],
)
def test_phase_error_refuses_a_bad_table(quantiles, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        PhaseError(points=5, quantiles=quantiles)


def test_every_knob_of_a_profile_is_sourced():
    with pytest.raises(ValueError, match=r"hopper\.decode_mfu"):
        EngineProfile(
            id="x", name="x", version="1", families={"hopper": CalibrationOverride(decode_mfu=0.2)}
        )


def test_the_shipped_catalog_has_ideal_and_a_default():
    catalog = load_engines()
    assert "ideal" in catalog.engines and catalog.default in catalog.engines
    assert catalog.default != "ideal"  # a released engine's figures, never the best case
    with pytest.raises(ValueError, match="unknown engine"):
        EngineCatalog(default="nope", engines=catalog.engines)


def test_a_profile_without_the_chips_family_names_the_ones_it_has(hardware):
    profile = EngineProfile(
        id="x",
        name="x",
        version="1",
        families={"hopper": CalibrationOverride(decode_mfu=0.2)},
        sources={"decode_mfu": "test"},
    )
    assert chip_knobs(profile, hardware, "h100-sxm").decode_mfu == 0.2
    with pytest.raises(
        ValueError, match=r"no profile for mi300x \(family cdna3\); its profiles: hopper"
    ):
        chip_knobs(profile, hardware, "mi300x")


def _scenario_with(tmp_path: Path, extra: str) -> Path:
    text = H100_H200.read_text() + "\n" + textwrap.dedent(extra)
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


def test_an_unknown_engine_is_one_located_line(tmp_path):
    path = _scenario_with(tmp_path, "engine: sglangg\n")
    with pytest.raises(InputError) as e:
        pddplan.load_scenario(path)
    assert len(e.value.problems) == 1
    assert "s.yaml:" in e.value.problems[0] and "engine: unknown engine 'sglangg'" in str(e.value)


@pytest.mark.parametrize("value", ["0", "1", "1.5", "-0.1", ".nan"])
def test_perf_quantile_outside_zero_one_is_refused(tmp_path, value):
    path = _scenario_with(tmp_path, f"perf_quantile: {value}\n")
    with pytest.raises(InputError, match="perf_quantile"):
        pddplan.load_scenario(path)


OLD_FIT = """
calibration:
  per_chip:
    h100-sxm: {prefill_mfu: 0.5, decode_hbm_efficiency: 0.7}
"""


def test_a_fit_that_names_no_engine_is_read_against_ideal_with_one_warning(tmp_path):
    """A calibration block written before engine profiles (fitted knobs, no ``engine:``)
    was fitted on the catalog's figures: read against ``ideal``, and said so once, with
    the file, line and key."""
    problem = pddplan.load_scenario(_scenario_with(tmp_path, OLD_FIT))
    assert problem.engine.id == "ideal"
    knobs = problem.calibration("h100-sxm")
    assert knobs.efficiency.prefill_mfu == 0.5 and knobs.knobs.layer_overhead_us == 0.0
    [line] = problem.warnings()
    assert "s.yaml:" in line and "calibration:" in line
    assert "prefill_mfu, decode_hbm_efficiency" in line and "'ideal'" in line


@pytest.mark.parametrize(
    "extra, engine",
    [
        (OLD_FIT + "engine: sglang\n", "sglang"),  # a block `calibrate --out` writes
        ("calibration: {default: {prefill_chunk_tokens: 4096}}\n", None),  # not a fit
        ("", None),
    ],
)
def test_a_named_engine_or_no_fit_gives_no_warning(tmp_path, extra, engine):
    problem = pddplan.load_scenario(_scenario_with(tmp_path, extra))
    assert problem.warnings() == []
    assert problem.engine.id == (engine or problem.engines.default)


def test_the_warning_is_one_stderr_line_and_engine_silences_it(tmp_path):
    from conftest import run_main

    path = str(_scenario_with(tmp_path, OLD_FIT))
    result = run_main("validate", path)
    assert result.exit_code == 0
    [line] = [x for x in result.stderr.splitlines() if x.strip()]
    assert line.startswith("Warning: ") and path in line
    named = run_main("perf", "deepseek-v3", "h100-sxm", "--scenario", path, "--engine", "sglang")
    assert named.exit_code == 0 and "Warning" not in named.stderr, named.stderr
    # what every other command reads a scenario with (``cli.common.load_problem``)
    assert pddplan.with_engine(pddplan.load_scenario(path), "sglang").warnings() == []


def test_ideal_reproduces_the_catalogs_figures():
    """Naming ``ideal`` changes no knob: the same instance figures as the catalog's."""
    problem = pddplan.load_scenario(H100_H200)
    ideal = problem.derive({"engine": "ideal"})
    for chip in ("h100-sxm", "h200-sxm"):
        assert ideal.calibration(chip).knobs.layer_overhead_us == 0.0
        assert (
            ideal.calibration(chip).efficiency
            == resolve_calibration(problem.hardware, chip).efficiency
        )


# --- the command line -------------------------------------------------------------------------
def _run_json(*args: str) -> dict:
    import json

    from conftest import run_main

    result = run_main(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.slow
def test_a_plan_carries_its_engine_to_later_commands(tmp_path):
    """``solve --engine ideal --out`` writes the engine into the plan; ``evaluate --plan``
    without ``--engine`` assumes it, and ``--engine`` there overrides it."""
    from conftest import SMALL

    plan = tmp_path / "plan.json"
    solved = _run_json("solve", str(SMALL), "--engine", "ideal", "--out", str(plan))
    assert solved["engine"]["id"] == "ideal" and solved["error_margin"] is None
    again = _run_json("evaluate", str(SMALL), "--plan", str(plan))
    assert again["engine"]["id"] == "ideal"
    assert again["sla_capacity_rps"] == pytest.approx(solved["sla_capacity_rps"], rel=1e-9)
    other = _run_json("evaluate", str(SMALL), "--plan", str(plan), "--engine", "sglang")
    assert other["engine"]["id"] == "sglang"
    assert other["sla_capacity_rps"] != pytest.approx(solved["sla_capacity_rps"], rel=1e-3)


@pytest.mark.slow
def test_the_default_engine_prices_its_plan_at_the_error_s_90th_percentile():
    """At the default quantile a min-cost plan says what it serves with pass times at the
    engine's 90th-percentile error (slower: less capacity than at the fit's centre)."""
    from conftest import SMALL

    solved = _run_json("solve", str(SMALL))
    margin = solved["error_margin"]
    assert solved["engine"]["id"] == load_engines().default
    assert margin["quantile"] == 0.9
    assert margin["capacity_rps"] < solved["sla_capacity_rps"]
    slower = _run_json("solve", str(SMALL), "--perf-quantile", "0.9")
    factors = slower["engine"]["time_factors"]
    assert factors["prefill"] > 1 and factors["decode"] > 1 and slower["error_margin"] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["solve", "{small}", "--perf-quantile", "1.5"], "--perf-quantile must lie in (0, 1)"),
        (["solve", "{small}", "--perf-quantile", "nan"], "--perf-quantile must lie in (0, 1)"),
        (["solve", "{small}", "--engine", "sglangg"], "--engine: unknown engine 'sglangg'"),
        (
            ["perf", "deepseek-v3", "ascend-910c", "--engine", "trtllm"],
            "no profile for ascend-910c",
        ),
        (["sweep", "{small}", "--vary", "headroom=0,0.1", "--engine", "ray"], "--runner ray"),
    ],
)
def test_bad_engine_arguments_are_one_line_exit_2(args, message):
    from conftest import SMALL, run_main

    result = run_main(*[a.format(small=SMALL) for a in args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr


@pytest.mark.slow
def test_error_margin_plans_again_only_where_the_plan_no_longer_holds():
    """A plan that still serves its planned rate at the 90th percentile needs nothing more
    (no second solve); one that does not is compared with the plan made there."""
    import dataclasses

    from conftest import SMALL

    from pddplan.plan.results import ErrorMargin

    problem = pddplan.load_scenario(SMALL)
    plan = pddplan.solve(problem)
    holds = pddplan.error_margin(problem, plan)
    assert holds is not None and holds.extra_gpus == 0
    assert "still above the 20 req/s demand" in holds.text
    # the same plan claimed for far more than it serves: the plan at P90 is solved for
    tight = dataclasses.replace(plan, planned_rps=1e6)
    again = pddplan.error_margin(problem, tight)
    assert again is not None and again.extra_gpus is not None and again.extra_gpus >= 0
    short = ErrorMargin(0.9, "sglang", 3.0, 4.0, 16, 40.0)
    assert short.text.endswith("the plan for it buys +16 GPUs, +$29,200/month.")
    assert "no plan serves the demand" in ErrorMargin(0.9, "sglang", 3.0, 4.0, None, None).text


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        ("{hopper: {decode_mfu: -0.2}}", "greater than 0"),
        ("{hopper: {decode_mfu: .nan}}", "decode_mfu"),
        (
            "{hopper: {layer_overhead_us: 5}}",
            "sources is missing a citation for: hopper.layer_overhead_us",
        ),
        ("{hopper: {decode_mfuu: 0.2}}", "unknown key 'decode_mfuu'"),
    ],
)
def test_a_bad_engine_file_is_one_located_line(tmp_path, profile, message):
    """A scenario's own engine file: a negative, non-finite, unsourced or unknown knob is
    one line naming the file, the line and the key, exit 2."""
    from conftest import run_main

    (tmp_path / "engines.yaml").write_text(
        "default: mine\nengines:\n  ideal: {name: ideal, version: '-', families: any}\n"
        f"  mine: {{name: mine, version: '1', families: {profile}}}\n"
    )
    path = _scenario_with(tmp_path, "engine: mine\n")
    text = path.read_text().replace("\nmodel:", "\ncatalogs: {engines: engines.yaml}\nmodel:", 1)
    path.write_text(text)
    result = run_main("validate", str(path))
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "engines.yaml:" in lines[0] and message in lines[0], lines
