"""``pddplan calibrate``: it recovers known knobs from points made with them, predicts held-out
validation points from their neighbours, reads benchmark results, and refuses bad input
with one located line each."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, SMALL, run_main

import pddplan
from pddplan.calibration import fit as fit_module
from pddplan.calibration.fit import calibrate, predict
from pddplan.errors import InputError
from pddplan.io.measurements import Deployment, load_measurements
from pddplan.spec.measurement import Measurement

POINTS = ROOT / "benchmarks" / "validation_points.json"


@pytest.fixture(scope="module")
def catalogs():
    return pddplan.load_catalogs()


def _synthetic(catalogs, knobs):
    """Prefill and decode points of DeepSeek-V3 on H100, predicted with ``knobs``."""
    prefill, decode = "prefill_tokens_per_s_per_gpu", "decode_tokens_per_s_per_gpu"
    shapes = [
        dict(gpus=32, input_tokens=1024, metric=prefill),
        dict(gpus=32, input_tokens=4096, metric=prefill),
        dict(gpus=16, input_tokens=8192, metric=prefill),
        dict(gpus=72, input_tokens=1950, output_tokens=100, batch=18432, metric=decode),
        dict(gpus=16, input_tokens=4000, output_tokens=1000, batch=512, metric=decode),
        dict(gpus=144, input_tokens=4096, output_tokens=2048, tpot_ms=50, metric=decode),
    ]
    model = catalogs.model("deepseek-v3")
    out = []
    for i, shape in enumerate(shapes):
        m = Measurement(model="deepseek-v3", chip="h100-sxm", kv_dtype="bf16", value=1.0, **shape)
        value = predict(m, model, catalogs.hardware, knobs)
        out.append((m.model_copy(update={"value": value}), f"synthetic:{i}"))
    return out


def test_recovers_the_knobs_points_were_made_with(catalogs):
    truth = {"prefill_mfu": 0.37, "decode_mfu": 0.22}
    points = _synthetic(catalogs, truth)
    fit = calibrate(
        points,
        {"deepseek-v3": catalogs.model("deepseek-v3")},
        catalogs.hardware,
        list(truth),
        ridge=0.0,
    )
    got = {k.name: k.value for k in fit.knobs}
    for name, value in truth.items():
        assert got[name] == pytest.approx(value, rel=2e-3), got
    assert fit.rms_after < 1e-3 < fit.rms_before
    assert all(abs(p.residual_after) < 2e-3 for p in fit.points)


@pytest.mark.slow  # the default run stays under 90 s on a shared machine
@pytest.mark.parametrize(
    ("held_out", "neighbours", "knob"),
    [
        ("SGL-EP prefill 4K", ["DS-PROFILE prefill", "SGL-EP prefill 1K", "SGL-EP prefill 2K"], "prefill_mfu"),
        ("SGL-EP prefill 1K", ["SGL-EP prefill 2K", "SGL-EP prefill 4K"], "prefill_mfu"),
        ("SGL-EP prefill 4K, perfect EPLB", ["DS-PROFILE prefill", "SGL-EP prefill 4K"], "prefill_mfu"),
        ("RTP decode, 50 ms", ["SGL-EP decode", "RTP decode, batch 13,200"], "decode_mfu"),
        ("SGL-EP decode", ["RTP decode, 50 ms", "RTP decode, batch 13,200"], "decode_mfu"),
    ],
)  # fmt: skip
def test_leave_one_out_on_the_validation_points(catalogs, held_out, neighbours, knob):
    """Fitted on its informative neighbours, a held-out validation point is predicted within
    +-10% of its measurement."""
    points = {p.measurement.id: p for p in load_measurements([POINTS], catalogs)}
    train = [(points[n].measurement, points[n].where) for n in neighbours]
    fit = calibrate(
        train, {"deepseek-v3": catalogs.model("deepseek-v3")}, catalogs.hardware, [knob]
    )
    target = points[held_out].measurement
    predicted = predict(
        target, catalogs.model("deepseek-v3"), catalogs.hardware, {knob: fit.knobs[0].value}
    )
    assert predicted / target.value == pytest.approx(1.0, abs=0.10)


def test_average_points_are_reported_not_fitted(catalogs):
    points = [(p.measurement, p.where) for p in load_measurements([POINTS], catalogs)]
    prefill = [(m, w) for m, w in points if m.metric.startswith("prefill")]
    fit = calibrate(prefill, {"deepseek-v3": catalogs.model("deepseek-v3")}, catalogs.hardware,
                    ["prefill_mfu"], error_folds=0)  # fmt: skip
    kinds = {p.measurement.id: p.measurement.kind for p in fit.points}
    assert kinds["DS-DAY6 prefill, input"] == "average"
    alone = [(m, w) for m, w in prefill if m.kind == "capacity"]
    again = calibrate(alone, {"deepseek-v3": catalogs.model("deepseek-v3")}, catalogs.hardware,
                      ["prefill_mfu"], error_folds=0)  # fmt: skip
    assert again.knobs[0].value == pytest.approx(fit.knobs[0].value, rel=1e-6)


def test_benchmark_results_become_serving_points(tmp_path, catalogs):
    vllm = tmp_path / "vllm.json"
    vllm.write_text(json.dumps({"completed": 100, "total_input_tokens": 100 * 2048,
                                "total_output_tokens": 100 * 128, "output_throughput": 762.0,
                                "duration": 10.0}))  # fmt: skip
    genai = tmp_path / "genai.json"
    genai.write_text(json.dumps({"output_token_throughput": {"unit": "tokens/sec", "avg": 762.0},
                                 "input_sequence_length": {"avg": 2048.0},
                                 "output_sequence_length": {"avg": 128.0}}))  # fmt: skip
    sglang = tmp_path / "sglang.jsonl"
    sglang.write_text(json.dumps({"backend": "sglang", "completed": 100, "total_input_tokens": 204800,
                                  "total_output_tokens": 12800, "input_throughput": 1.0,
                                  "output_throughput": 762.0}) + "\n")  # fmt: skip
    where = Deployment("llama-3.1-70b", "h100-sxm", 2)
    points = load_measurements([vllm, genai, sglang], catalogs, where)
    for p in points:
        m = p.measurement
        assert m.metric == "serving_output_tokens_per_s_per_gpu" and m.value == 381.0
        assert (m.input_tokens, m.output_tokens, m.gpus) == (2048, 128, 2)
    assert [p.measurement.source for p in points] == [
        "vLLM benchmark_serving", "genai-perf", "SGLang bench_serving"
    ]  # fmt: skip
    with pytest.raises(InputError, match="give --model, --chip and --gpus"):
        load_measurements([vllm], catalogs)


def _points_file(tmp_path, rows, name="p.csv"):
    path = tmp_path / name
    header = "id,model,chip,gpus,input_tokens,metric,value"
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("a,deepseek-v3,h100,32,4096,prefill_tokens_per_s_per_gpu,6000", "p.csv:2: chip: unknown chip 'h100'"),
        ("a,deepseek-v9,h100-sxm,32,4096,prefill_tokens_per_s_per_gpu,6000", "p.csv:2: model: unknown model 'deepseek-v9'"),
        ("a,deepseek-v3,h100-sxm,32,4096,prefill_tokens_per_s_per_gpu,fast", "p.csv:2: [0].value"),
        ("a,deepseek-v3,h100-sxm,32,4096,prefill_tokens_per_s_per_gpu,-5", "p.csv:2: [0].value"),
        ("a,deepseek-v3,h100-sxm,32,4096,speed,6000", "p.csv:2: [0].metric"),
    ],
)  # fmt: skip
def test_bad_points_are_one_located_line(tmp_path, row, message):
    path = _points_file(tmp_path, [row])
    r = run_main("calibrate", str(path))
    assert r.exit_code == 2
    errors = [x for x in r.output.splitlines() if x.startswith("Error:")]
    assert len(errors) == 1 and message in errors[0], r.output


def test_a_knob_no_point_informs_is_refused(tmp_path):
    path = _points_file(
        tmp_path, ["a,deepseek-v3,h100-sxm,32,4096,prefill_tokens_per_s_per_gpu,6000"]
    )
    r = run_main("calibrate", str(path), "--knobs", "decode_hbm_efficiency")
    assert r.exit_code == 2 and "no point informs decode_hbm_efficiency" in r.output


def test_too_few_points_are_refused(tmp_path):
    path = _points_file(
        tmp_path, ["a,deepseek-v3,h100-sxm,32,4096,prefill_tokens_per_s_per_gpu,6000"]
    )
    r = run_main("calibrate", str(path), "--knobs", "prefill_mfu,collective_efficiency")
    assert r.exit_code == 2 and "1 capacity points cannot fit 2 knobs" in r.output


def test_a_fit_that_does_not_converge_writes_nothing(tmp_path, monkeypatch):
    class Failed:
        status, cost = 0, 0.0

    monkeypatch.setattr(fit_module.optimize, "least_squares", lambda *a, **k: Failed())
    out = tmp_path / "cal.yaml"
    r = run_main("calibrate", str(POINTS), "--knobs", "prefill_mfu", "--out", str(out))
    assert r.exit_code == 2 and "did not converge" in r.output and not out.exists()


@pytest.mark.slow  # the fit and its ten held-out folds
def test_the_written_block_is_a_calibration_a_scenario_takes(tmp_path):
    out = tmp_path / "cal.yaml"
    r = run_main("calibrate", str(POINTS), "--knobs", "prefill_mfu", "--out", str(out))
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert text.startswith("# Fitted by `pddplan calibrate`")
    scenario = (SMALL).read_text()
    path = tmp_path / "s.yaml"
    path.write_text(scenario.replace("\ncalibration:", "\nold_calibration:") + "\n" + text)
    problem = pddplan.load_scenario(path)
    value = problem.scenario.calibration.default.prefill_mfu
    assert value is not None and 0.3 < value < 0.6


def _noisy(catalogs, knobs, n: int, sigma: float):
    """``n`` prefill and ``n`` decode points of DeepSeek-V3 on H100, each of its own shape,
    predicted with ``knobs`` and then off by a seeded log-normal factor of ``sigma``."""
    import numpy as np

    rng = np.random.default_rng(7)
    model = catalogs.model("deepseek-v3")
    shapes = [
        dict(gpus=32, input_tokens=1024 + 512 * i, metric="prefill_tokens_per_s_per_gpu")
        for i in range(n)
    ] + [
        dict(
            gpus=16,
            input_tokens=4000,
            output_tokens=1000,
            batch=64 + 32 * i,
            metric="decode_tokens_per_s_per_gpu",
        )
        for i in range(n)
    ]
    out = []
    for i, shape in enumerate(shapes):
        m = Measurement(model="deepseek-v3", chip="h100-sxm", kv_dtype="bf16", value=1.0, **shape)
        value = predict(m, model, catalogs.hardware, knobs) * float(np.exp(rng.normal(0, sigma)))
        out.append((m.model_copy(update={"value": value}), f"noisy:{i}"))
    return out


@pytest.mark.slow  # ten folds of a two-knob fit
def test_a_users_points_give_their_own_error_table(catalogs, tmp_path):
    """Twelve points per phase: each phase's held-out error becomes the table a scenario
    with the written block plans ``perf_quantile`` with, instead of the engine's."""
    import numpy as np
    from conftest import H100_H200

    points = _noisy(catalogs, {"prefill_mfu": 0.37, "decode_hbm_efficiency": 0.6}, 12, 0.1)
    models = {"deepseek-v3": catalogs.model("deepseek-v3")}
    fit = calibrate(
        points, models, catalogs.hardware, ["prefill_mfu", "decode_hbm_efficiency"], ridge=0.0
    )
    assert fit.error_folds == 10 and len(fit.held_out) == 24
    assert {ph: e.points for ph, e in fit.error.items()} == {"prefill": 12, "decode": 12}
    for phase, table in fit.error.items():
        times = [h.time_ratio for h in fit.held_out if h.phase == phase]
        assert table.quantiles[0.5] == pytest.approx(np.quantile(times, 0.5), abs=5e-4)
        # ten percent noise held out: the 90th percentile a few tens of percent up
        assert 1.03 < table.factor(0.9) < 1.5, table
    text = pddplan.calibration_yaml(fit, ["noisy"])
    path = tmp_path / "s.yaml"
    path.write_text(H100_H200.read_text() + "\n" + text)
    problem = pddplan.with_engine(pddplan.load_scenario(path), perf_quantile=0.9)
    assert problem.time_factors() == (
        fit.error["prefill"].factor(0.9),
        fit.error["decode"].factor(0.9),
    )
    assert problem.engine_summary()["error_from"] == {
        "prefill": "calibration",
        "decode": "calibration",
    }


def test_fewer_than_ten_points_give_no_error_table_and_say_so(catalogs):
    from pddplan.report.calibration import held_out_line
    from pddplan.report.views import calibration_view

    points = _noisy(catalogs, {"prefill_mfu": 0.37, "decode_hbm_efficiency": 0.6}, 4, 0.1)
    models = {"deepseek-v3": catalogs.model("deepseek-v3")}
    fit = calibrate(
        points, models, catalogs.hardware, ["prefill_mfu", "decode_hbm_efficiency"], ridge=0.0
    )
    assert fit.held_out == [] and fit.error == {}
    line = held_out_line(calibration_view(fit)["held_out"])
    assert "fewer than 10" in line and "engine profile's" in line
    assert "No error table" in pddplan.calibration_yaml(fit, ["noisy"])


def _csv_of(tmp_path, rows, name="p.csv"):
    header = "id,model,chip,gpus,input_tokens,output_tokens,metric,value"
    path = tmp_path / name
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


SMALL_ROWS = [
    "a,llama-3.1-8b,h100-sxm,1,1024,1,prefill_tokens_per_s_per_gpu,20000",
    "b,llama-3.1-8b,h100-sxm,2,2048,1,prefill_tokens_per_s_per_gpu,19000",
    "c,llama-3.1-8b,h100-sxm,1,1024,256,decode_tokens_per_s_per_gpu,3000",
    "d,llama-3.1-8b,h100-sxm,4,1024,256,decode_tokens_per_s_per_gpu,2500",
]


def test_repeated_points_are_merged_and_do_not_shrink_the_uncertainty(tmp_path):
    """A point given five times (a row copied, a result file passed again) is one run: the
    fit, its knobs' one-sigma factors included, is the fit of the points once, and each
    repeat is a warning naming the point it repeats. Counted five times, the factors
    shrank by about sqrt(5)."""
    once = _csv_of(tmp_path, SMALL_ROWS, "once.csv")
    copies = [f"{row.split(',', 1)[0]}{k},{row.split(',', 1)[1]}" for row in SMALL_ROWS
              for k in range(4)]  # fmt: skip
    again = _csv_of(tmp_path, SMALL_ROWS + copies, "again.csv")
    knobs = ["prefill_mfu", "decode_hbm_efficiency"]
    a = pddplan.calibrate([once], knobs=knobs)
    r = run_main("calibrate", str(again), "--knobs", ",".join(knobs), "--json")
    assert r.exit_code == 0 and r.stderr.count("Warning: ") == 16, r.output
    b = json.loads(r.stdout)
    assert len(b["points"]) == len(a.points) == 4 and len(b["notes"]) == 16
    assert "again.csv:6: the same point as " in b["notes"][0] and "again.csv:2" in b["notes"][0]
    for x, y in zip(a.knobs, b["knobs"], strict=True):
        assert y["value"] == pytest.approx(x.value, rel=1e-9)
        assert y["one_sigma_factor"] == pytest.approx(x.factor, rel=1e-9) and x.factor > 1.0


def test_points_that_differ_only_in_value_are_both_fitted(tmp_path):
    """Two runs of one deployment that measured different figures are two pieces of
    evidence (the spread is what the uncertainty measures): not merged."""
    rows = [*SMALL_ROWS, "e,llama-3.1-8b,h100-sxm,1,1024,1,prefill_tokens_per_s_per_gpu,21000"]
    fit = pddplan.calibrate([_csv_of(tmp_path, rows)], knobs=["prefill_mfu"])
    assert len(fit.points) == 5 and not fit.notes


@pytest.mark.slow  # over 1 s: the default run's time (README)
def test_the_point_limit_stops_the_read_at_the_first_point_past_it(tmp_path):
    rows = [f"p{i},llama-3.1-8b,h100-sxm,1,{1024 + i},1,prefill_tokens_per_s_per_gpu,20000"
            for i in range(12)]  # fmt: skip
    path = _csv_of(tmp_path, rows)
    with pytest.raises(InputError, match=r"p\.csv:12: more than 10 points"):
        pddplan.calibrate([path], max_points=10)
    assert len(pddplan.calibrate([path], max_points=12, knobs=["prefill_mfu"]).points) == 12


def test_the_fit_reports_its_progress(tmp_path):
    """The fit tells its progress callback each start and its predictions so far (the
    command line shows it after 2 s, as other long commands do)."""
    heard: list[str] = []
    pddplan.calibrate([_csv_of(tmp_path, SMALL_ROWS)], knobs=["prefill_mfu"],
                      progress=heard.append)  # fmt: skip
    starts = sorted({h.split(";")[0] for h in heard if "from start" in h})
    assert len(starts) == fit_module.STARTS and "start 1 of 8" in starts[0]
    assert any("predictions of 4 points" in h for h in heard)


@pytest.mark.parametrize("ridge", [float("nan"), float("inf"), 0.0, -1.0, 1e308])
def test_the_ridge_is_finite_and_positive(tmp_path, ridge):
    with pytest.raises(pddplan.ArgumentError, match="ridge: must be a number > 0 and at most 1e"):
        pddplan.calibrate([_csv_of(tmp_path, SMALL_ROWS)], ridge=ridge)


def test_a_knob_named_twice_is_refused(tmp_path):
    with pytest.raises(InputError, match="--knobs: prefill_mfu named twice"):
        pddplan.calibrate([_csv_of(tmp_path, SMALL_ROWS)], knobs=["prefill_mfu", "prefill_mfu"])


def test_a_line_break_inside_a_cell_is_refused(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text(
        "model,chip,gpus,input_tokens,output_tokens,metric,value\n"
        '"llama-3.1-8b",h100-sxm,1,"10\n24",1,prefill_tokens_per_s_per_gpu,20000\n'
    )
    with pytest.raises(InputError, match="input_tokens: a line break inside a quoted cell"):
        pddplan.calibrate([path], knobs=["prefill_mfu"])


def test_a_benchmark_of_under_one_token_a_request_is_refused(tmp_path):
    path = tmp_path / "v.json"
    path.write_text(
        '{"completed": 1e20, "total_input_tokens": 204800, "total_output_tokens": 12800, '
        '"output_throughput": 762.0, "input_throughput": 5000.0, "duration": 10.0}'
    )
    with pytest.raises(InputError, match="tokens a request: a request has at least one"):
        pddplan.calibrate([path], model="llama-3.1-8b", chip="h100-sxm", gpus=1)
