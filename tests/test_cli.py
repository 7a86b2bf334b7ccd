"""The command line, as a user runs it: outputs, JSON keys, exit codes, no tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import DATA, ROOT, SCENARIOS, SMALL, run_main


def run(*args: str):
    result = run_main(*list(args))
    assert "Traceback" not in result.output, result.output
    return result


def run_json(*args: str):
    result = run(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_catalog_list_table_and_json():
    result = run("catalog", "list")
    assert result.exit_code == 0, result.output
    assert "h100-sxm" in result.stdout
    assert {c["id"] for c in run_json("catalog", "list")} >= {"h100-sxm", "ascend-910c"}


def test_catalog_show_json_keys():
    data = run_json("catalog", "show", "h200-sxm")
    for key in (
        "id",
        "bf16_tflops",
        "fp8_tflops",
        "hbm_gb",
        "hbm_bandwidth_tb_s",
        "scaleup_bandwidth_gb_s",
        "scaleup_domain_gpus",
        "nic_gbps",
        "tdp_w",
        "price_usd_per_hour",
        "sources",
    ):
        assert key in data, key
    assert data["id"] == "h200-sxm"
    assert run_json("catalog", "show", "a100-80g-sxm")["fp8_tflops"] is None


def test_catalog_show_table_names_sources():
    result = run("catalog", "show", "h800")
    assert result.exit_code == 0, result.output
    assert "source" in result.stdout and "DeepSeek" in result.stdout


def test_unknown_chip_suggests_close_ids():
    result = run("catalog", "show", "h100")
    assert result.exit_code == 2
    assert "unknown chip 'h100'; close matches:" in result.stderr
    assert "h100-sxm" in result.stderr


def test_model_show_json_keys():
    data = run_json("model", "show", "deepseek-v4-pro", "--kv-dtype", "bf16")
    for key in (
        "kv_bytes_per_token",
        "kv_fixed_bytes_per_request",
        "total_params_b",
        "active_params_b",
        "weight_bytes",
    ):
        assert key in data, key
    assert data["kv_bytes_per_token"] == pytest.approx(9848)
    assert (
        run_json("model", "show", "llama-3.1-70b", "--kv-dtype", "bf16")[
            "kv_fixed_bytes_per_request"
        ]
        == 0
    )


def test_model_list():
    result = run("model", "list")
    assert result.exit_code == 0 and "deepseek-v3" in result.stdout


def test_bad_kv_dtype_is_a_usage_error():
    """A choice outside its list is typer's usage error: one line naming the choices."""
    proc = subprocess.run(
        [sys.executable, "-m", "pddplan", "model", "show", "deepseek-v3", "--kv-dtype", "int4"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    errors = [x for x in lines if x.startswith("Error:")]
    assert len(errors) == 1 and "'--kv-dtype'" in errors[0], proc.stderr
    assert "'int4' is not one of 'bf16', 'fp8'" in lines[0], proc.stderr


def test_model_import_round_trips_through_the_catalog(tmp_path):
    out = tmp_path / "models.yaml"
    result = run(
        "model",
        "import",
        str(DATA / "hf" / "llama-3.1-8b.json"),
        "--id",
        "my-8b",
        "--total-params-b",
        "8.03",
        "--active-params-b",
        "8.03",
        "--out",
        str(out),
    )
    assert result.exit_code == 0, result.output
    data = run_json("model", "show", "my-8b", "--models", str(out))
    assert data["attention"] == "gqa" and data["kv_bytes_per_token"] == 131_072


def test_model_import_moe_with_qwen_names(tmp_path):
    result = run("model", "import", str(DATA / "hf" / "qwen3-30b-a3b.json"), "--id", "q")
    assert result.exit_code == 0, result.output
    entry = yaml.safe_load(result.stdout)["models"]["q"]
    assert entry["n_routed_experts"] == 128 and entry["num_experts_per_tok"] == 8
    # computed from shapes: Qwen3-30B-A3B's card says 30.5B total, 3.3B active
    assert entry["total_params_b"] == pytest.approx(30.5, rel=0.03)
    assert entry["active_params_b"] == pytest.approx(3.3, rel=0.06)


def test_model_import_bad_json(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"hidden_size": 4096,')
    result = run("model", "import", str(bad), "--id", "x")
    assert result.exit_code == 2 and "malformed JSON" in result.stderr


def test_perf_json_keys_and_values():
    data = run_json(
        "perf",
        "llama-3.1-70b",
        "h100-sxm",
        "--gpus",
        "8",
        "--input-tokens",
        "4096",
        "--hit-rate",
        "0.5",
        "--output-tokens",
        "256",
        "--tpot-ms",
        "50",
    )
    for key in (
        "prefill_tokens_per_s_per_gpu",
        "decode_tokens_per_s_per_gpu",
        "max_batch",
        "decode_step_ms",
        "kv_transfer_bytes",
        "prefill_seconds",
    ):
        assert key in data, key
    assert data["decode_step_ms"] <= 50
    assert data["kv_transfer_bytes"] == 327_680 * 4096


def test_perf_defaults_to_the_smallest_instance_that_fits():
    assert run_json("perf", "deepseek-v3", "h100-sxm")["gpus"] == 16


def test_perf_refuses_an_instance_that_cannot_hold_the_weights():
    result = run("perf", "deepseek-v3", "h100-sxm", "--gpus", "4")
    assert result.exit_code == 2
    assert "does not fit 4 x h100-sxm" in result.stderr
    assert "smallest power-of-two size that fits is 16 GPUs" in result.stderr


def test_perf_takes_calibration_from_a_scenario(tmp_path):
    base = run_json("perf", "llama-3.1-8b", "h100-sxm", "--batch", "32")
    text = (SMALL).read_text()
    text += "calibration:\n  per_chip:\n    h100-sxm: {decode_hbm_efficiency: 0.4}\n"
    path = tmp_path / "s.yaml"
    path.write_text(text)
    slower = run_json("perf", "llama-3.1-8b", "h100-sxm", "--batch", "32", "--scenario", str(path))
    assert slower["decode_step_ms"] > base["decode_step_ms"]


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_validate_shipped_scenarios(path):
    result = run("validate", str(path))
    assert result.exit_code == 0, result.output
    assert "valid" in result.stdout


def test_validate_reports_every_problem_one_line_each():
    result = run("validate", str(DATA / "bad-many.yaml"))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 10
    assert all(line.startswith("Error: ") and "bad-many.yaml:" in line for line in lines)


def test_schema_is_json():
    result = run("schema")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["title"] == "pddplan scenario"


def test_typer_argument_errors_exit_2():
    result = run("perf", "llama-3.1-8b", "h100-sxm", "--hit-rate", "1.5")
    assert result.exit_code == 2


def test_python_m_json_stdout_parses():
    """A real subprocess: nothing but JSON reaches stdout."""
    proc = subprocess.run(
        [sys.executable, "-m", "pddplan", "perf", "deepseek-v4-pro", "h200-sxm", "--json"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["kv_fixed_bytes_per_request"] == 4_559_872


def test_usage_errors_are_one_line():
    """typer's own errors (bad option value, missing argument) also print one Error: line;
    where to look next follows as a hint, not as a second error."""
    proc = subprocess.run(
        [sys.executable, "-m", "pddplan", "perf", "llama-3.1-8b", "h100-sxm", "--hit-rate", "2"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "Error: pddplan perf: Invalid value for '--hit-rate': Input should be less than or equal "
        "to 1",
        "see 'pddplan perf --help'",
    ]
    assert proc.stdout == ""


def test_model_import_adds_to_an_existing_catalog_and_keeps_it(tmp_path):
    catalog = tmp_path / "mine.yaml"
    hf = str(DATA / "hf" / "llama-3.1-8b.json")
    assert run("model", "import", hf, "--id", "a", "--out", str(catalog)).exit_code == 0
    catalog.write_text("# my models\n" + catalog.read_text())
    assert run("model", "import", hf, "--id", "b", "--out", str(catalog)).exit_code == 0
    assert catalog.read_text().startswith("# my models\n")
    assert {m["id"] for m in run_json("model", "list", "--models", str(catalog))} == {"a", "b"}
    before = catalog.read_text()
    again = run("model", "import", hf, "--id", "a", "--out", str(catalog))
    assert again.exit_code == 2 and "models.a already exists" in again.stderr
    assert catalog.read_text() == before


def test_perf_weight_dtype_overrides_the_experts_too():
    """--weight-dtype bf16 turns V4's FP4 experts to BF16 as well (regression): the routed
    experts (~1.55T params) then take 4x their FP4 bytes, so per-GPU weights grow ~3.5x."""
    mixed = run_json("perf", "deepseek-v4-pro", "h200-sxm", "--gpus", "64")
    bf16 = run_json("perf", "deepseek-v4-pro", "h200-sxm", "--gpus", "64", "--weight-dtype", "bf16")
    experts_fp4_gb = 1.548e12 * 0.5 / 64 / 1e9
    assert bf16["weight_gb_per_gpu"] - mixed["weight_gb_per_gpu"] > 3 * experts_fp4_gb


def test_a_bare_group_prints_its_help_and_no_error_line():
    proc = subprocess.run(
        [sys.executable, "-m", "pddplan", "model"], capture_output=True, text=True, check=False
    )
    assert "list" in proc.stdout + proc.stderr
    assert "Error" not in proc.stdout + proc.stderr


TRACE = DATA / "traces" / "conversation-2000.jsonl"


def test_workload_fit_json_keys():
    data = run_json("workload", "fit", str(TRACE), "--md-cache-tokens", "100000")
    for key in (
        "requests",
        "arrival_rps",
        "mean_hit_rate",
        "mean_input_tokens",
        "mean_output_tokens",
        "hit_histogram",
    ):
        assert key in data, key
    assert data["requests"] == 2000
    assert {"lo", "hi", "share"} == set(data["hit_histogram"][0])
    assert sum(b["share"] for b in data["hit_histogram"]) == pytest.approx(1.0)
    assert data["md_mean_hit_rate"] <= data["mean_hit_rate"]


def test_workload_fit_out_is_a_workload_a_scenario_can_use(tmp_path):
    out = tmp_path / "workload.yaml"
    assert (
        run("workload", "fit", str(TRACE), "--cache-tokens", "1000000", "--out", str(out)).exit_code
        == 0
    )
    fitted = yaml.safe_load(out.read_text())["workload"]
    assert sum(c["weight"] for c in fitted["classes"]) == pytest.approx(1.0, abs=1e-9)
    scenario = yaml.safe_load((SMALL).read_text())
    scenario["workload"] = fitted
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    assert run("validate", str(path)).exit_code == 0


@pytest.mark.slow  # the default run stays under 90 s on a shared machine
def test_workload_show_histogram_and_plot(tmp_path):
    png = tmp_path / "hits.png"
    result = run("workload", "show", str(TRACE), "--plot", str(png))
    assert result.exit_code == 0, result.output
    assert "█" in result.stdout and "[0.99, 1.00]" in result.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--cache-tokens", "lots"],
            "--cache-tokens: 'lots' is not allowed; give a positive number of tokens or 'unbounded'",
        ),
        (["--buckets", "0,0.5,x"], "--buckets: '0,0.5,x' is not a comma-separated list"),
    ],
)
def test_workload_fit_bad_options(args, message):
    result = run("workload", "fit", str(TRACE), *args)
    assert result.exit_code == 2 and message in result.stderr


def test_workload_fit_bad_trace_lines(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1]}\n{broken\n'
    )
    result = run("workload", "fit", str(bad))
    assert result.exit_code == 2 and f"{bad}:2: bad JSON" in result.stderr
    assert run("workload", "fit", str(bad), "--skip-bad").exit_code == 0


@pytest.mark.parametrize(
    "command",
    [
        ["solve", "{s}", "--out", "{s}"],
        ["compare", "{s}", "--out", "{s}"],
        ["sweep", "{s}", "--vary", "sla.ttft_p99_s=1,2", "--out", "{s}", "--format", "csv"],
        ["calibrate", "{c}", "--out", "{c}"],
        ["workload", "fit", "{t}", "--out", "{t}"],
    ],
    ids=lambda c: " ".join(c[:1]),
)
def test_an_output_that_is_an_input_is_refused_before_any_work(tmp_path, command):
    """``--out`` naming the command's own input (through another path) would replace what
    was read: one line, exit 2, the input unchanged."""
    scenario, points, trace = tmp_path / "s.yaml", tmp_path / "p.csv", tmp_path / "t.jsonl"
    scenario.write_text(SMALL.read_text())
    points.write_text(
        "model,chip,gpus,input_tokens,output_tokens,metric,value\n"
        "llama-3.1-8b,h100-sxm,1,1024,1,prefill_tokens_per_s_per_gpu,20000\n"
    )
    trace.write_text(
        '{"timestamp": 0, "input_length": 100, "output_length": 10, "hash_ids": [0]}\n'
    )
    files = {"{s}": scenario, "{c}": points, "{t}": trace}
    before = {p: p.read_bytes() for p in files.values()}
    args = [str(files[a]) if a in files else a for a in command]
    # the output through another spelling of the same path
    args[args.index("--out") + 1] = str(tmp_path / "." / Path(args[args.index("--out") + 1]).name)
    result = run_main(*args)
    assert result.exit_code == 2, result.output
    [line] = result.output.strip().splitlines()
    assert line.startswith("Error: --out:") and "is an input of this command" in line
    assert all(p.read_bytes() == b for p, b in before.items())


@pytest.mark.parametrize("bad", ["", "Bad Id!", "-x"])
def test_model_import_refuses_an_id_that_is_no_catalog_id(bad):
    result = run_main(
        "model", "import", str(ROOT / "tests" / "data" / "hf" / "llama-3.1-8b.json"), "--id", bad
    )
    assert (
        result.exit_code == 2
        and "--id:" in result.output
        and "is not a catalog id" in result.output
    )


def test_a_variant_trace_that_is_a_device_or_a_link_loop_says_so(tmp_path):
    """A trace path that exists but is no regular file is not 'not found'."""
    loop = tmp_path / "a.jsonl"
    loop.symlink_to(tmp_path / "b.jsonl")
    (tmp_path / "b.jsonl").symlink_to(loop)
    for trace, expect in (("/dev/zero", "not a regular file"), ("a.jsonl", "a loop of symbolic")):
        path = tmp_path / "v.yaml"
        path.write_text(
            SMALL.read_text()
            + f"\nworkload_variants:\n  - {{name: t, must_meet: true, trace: {{file: {trace}}}}}\n"
        )
        result = run_main("validate", str(path))
        assert result.exit_code == 2 and expect in result.output, result.output
        assert "trace.file" in result.output and len(result.output.strip().splitlines()) == 1


def test_an_empty_list_of_points_says_it_is_empty(tmp_path):
    path = tmp_path / "p.json"
    path.write_text('{"points": []}')
    result = run_main("calibrate", str(path))
    assert result.exit_code == 2 and "the list of points is empty" in result.output


@pytest.mark.parametrize(
    ("more", "expect"),
    [
        (["--total-params-b", "-5"], "Error: --total-params-b: billions of parameters, > 0"),
        (
            ["--total-params-b", "1", "--active-params-b", "8"],
            "Error: --active-params-b (8) exceeds",
        ),
    ],
)
def test_model_import_names_the_parameter_options_it_refuses(more, expect):
    config = str(ROOT / "tests" / "data" / "hf" / "llama-3.1-8b.json")
    result = run_main("model", "import", config, "--id", "x", *more)
    assert result.exit_code == 2 and result.output.strip() == result.output.strip().splitlines()[0]
    assert result.output.startswith(expect), result.output


def test_the_time_limit_option_s_ceiling_is_the_spec_s():
    """``--time-limit``'s bound is written in the command line (which may not import
    ``spec``): it must be the scenario's, ``MAX_TIME_LIMIT_S``."""
    import typing

    from pddplan.cli.common import TimeLimitOpt
    from pddplan.spec.limits import MAX_TIME_LIMIT_S

    option = typing.get_args(TimeLimitOpt)[1]
    assert option.max == MAX_TIME_LIMIT_S
