"""The hostile-input matrix of the surfaces added since the older corpus (issue 50, part B):
calibration points (CSV, JSON), vLLM / SGLang / genai-perf benchmark results, workload
variants, ``--window``, ``--max-input-mb``, ``--ridge``, and the older readers' last gaps
(a symbolic-link loop, a read-only ``--out``, a FIFO with no writer, a binary trace, a
cut-short JSON plan, a plan without its fleet, one missing key, a bad HF attention shape).

Files live in ``tests/data/bad/calibrate/`` and ``tests/data/bad/limits/``, named
``KIND-CLASS-WHAT.EXT`` as the older corpus (``tests/test_bad_inputs.py``); the loop, the
read-only file and the FIFO are made in the test's own folder. Each case runs through the
command line as a user runs it and must end in exit code 2 with 1 to 3 lines, each
``Error: ``, the first naming the file or the option, and no traceback; ``EXPECT`` holds
the words that show the right check refused it (not just some check).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import DATA, SMALL, run_main

import pddplan
import pddplan.pipes

BAD = Path(__file__).parent / "data" / "bad"
FOLDERS = ("calibrate", "limits")
CORPUS = sorted(p for folder in FOLDERS for p in (BAD / folder).iterdir() if p.is_file())
TRACE = DATA / "traces" / "conversation-2000.jsonl"
DEPLOYMENT = ["--model", "llama-3.1-8b", "--chip", "h100-sxm", "--gpus", "1"]

EXTRA = {"points-size-more-than-max-points.csv": ["--max-points", "3"]}
"""Options a file is run with beyond its kind's."""

EXPECT = {
    "points-range-gpus-huge.csv": "gpus: input should be less than or equal to 4096",
    "points-range-tokens-1e12.csv": "input_tokens: input should be less than or equal to 10000000",
    "points-range-gpus-negative.csv": "gpus: input should be greater than or equal to 1",
    "points-structure-extra-cell.csv": "8 cells, the header names 7",
    "points-structure-column-twice.csv": "column 'gpus' is named twice",
    "points-size-more-than-max-points.csv": "more than 3 points",
    "points-encoding-binary.csv": "not UTF-8 text",
    "points-structure-empty.csv": "the file is empty",
    "points-range-value-1e999.json": "value: input should be a finite number",
    "points-range-value-nan.json": "value: input should be a finite number",
    "points-range-batch-huge.json": "batch: input should be less than or equal to 1000000",
    "points-structure-points-not-list.json": "expected a list of points",
    "points-syntax-cut-short.json": "malformed JSON",
    "points-syntax-unclosed-quote.csv": ":2: malformed CSV: unexpected end of data",
    "points-reference-weights-do-not-fit.csv": ":2: gpus: llama-3.1-405b (bf16 weights) does not fit",
    "vllm-range-throughput-1e999.json": "output_throughput: expected a finite number",
    "vllm-range-negative-tokens.json": "total_input_tokens: expected a finite number >= 0",
    "vllm-type-completed-fraction.json": "completed: expected a whole number",
    "vllm-range-tokens-1e300.json": "total_input_tokens: 1e+300 tokens a request",
    "vllm-type-throughput-text.json": "output_throughput: expected a number, got 'fast'",
    "vllm-range-throughput-per-gpu.json": "at most 1e+09 a GPU",
    "sglang-range-nan.jsonl": "NaN is not a JSON number",
    "sglang-syntax-cut-line.jsonl": ":2: malformed JSON",
    "sglang-range-tokens-huge.jsonl": "tokens a request: at most 10,000,000",
    "sglang-structure-not-object.jsonl": ":2: not an SGLang bench_serving result",
    "genai-range-negative-throughput.json": "avg: expected a finite number >= 0",
    "genai-type-length-text.json": "input_sequence_length.avg: expected a number",
    "scenario-range-33-variants.yaml": "33 variants: at most 32",
    "scenario-structure-no-datacenters.yaml": "missing required key 'datacenters'",
    "hf-range-kv-heads-over-heads.json": "64 KV heads for 32 attention heads",
    "hf-range-heads-not-multiple-of-kv.json": "multiple of num_key_value_heads",
    "hf-range-hidden-not-multiple-of-heads.json": "4001 is not a multiple of num_attention_heads",
    "hf-type-four-bad-shapes.json": "and 1 more: num_key_value_heads",
    "fleet-structure-empty-pool.yaml": "missing required keys 'datacenter', 'role', 'chip'",
    "fleet-structure-many-unknown-keys.yaml": "pools[0]: 7 unknown keys: 'dc', 'kind'",
    "scenario-reference-link-end-once.yaml": "links[0].between: unknown datacenter 'wset'",
    "plan-syntax-cut-short.json": "malformed JSON",
    "plan-structure-no-deployment.json": "deployment: missing",
    "trace-encoding-binary-many-lines.jsonl": ":1: not UTF-8 text",
}
"""What each file's error must say."""


def command(path: Path) -> list[str]:
    """The command line that reads ``path`` as the kind its name says."""
    kind = path.name.split("-")[0]
    f = str(path)
    args = {
        "points": ["calibrate", f],
        "vllm": ["calibrate", f, *DEPLOYMENT],
        "sglang": ["calibrate", f, *DEPLOYMENT],
        "genai": ["calibrate", f, *DEPLOYMENT],
        "scenario": ["solve", f],
        "hf": ["model", "import", f, "--id", "x"],
        "fleet": ["evaluate", str(SMALL), "--fleet", f],
        "plan": ["evaluate", str(SMALL), "--plan", f],
        "trace": ["workload", "fit", f],
    }[kind]
    return args + EXTRA.get(path.name, [])


ONE_LINE = {
    "points-structure-extra-cell.csv",
    "hf-type-four-bad-shapes.json",
    "fleet-structure-empty-pool.yaml",
    "plan-structure-no-deployment.json",
    "scenario-reference-link-end-once.yaml",
    "scenario-structure-no-datacenters.yaml",
    "trace-encoding-binary-many-lines.jsonl",
}
"""Files that gave several lines for one problem (a key per line, a bad line per line, the
problem once more at the top level) and now give one (three for the four bad shapes; the
pool of seven unknown keys, which gave twelve, gives two: its unknown keys, its missing
ones)."""


def check(named: str, code: int, output: str, expect: str | None = None) -> None:
    """Exit code 2, 1 to 3 ``Error:`` lines, the first naming ``named``, no traceback."""
    lines = output.strip().splitlines()
    assert code == 2, (named, code, output)
    assert "Traceback" not in output, (named, output)
    assert 1 <= len(lines) <= 3, (named, output)
    assert all(line.startswith("Error: ") for line in lines), (named, output)
    assert named in lines[0], (named, output)
    if expect is not None:
        assert expect in output, (named, expect, output)


def test_the_matrix_covers_every_new_surface():
    kinds = {p.name.split("-")[0] for p in CORPUS}
    assert kinds == {"points", "vllm", "sglang", "genai", "scenario", "hf", "fleet", "plan",
                     "trace"}  # fmt: skip
    assert len(CORPUS) >= 22 and set(EXPECT) == {p.name for p in CORPUS}


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_hostile_file_is_one_located_error(path):
    result = run_main(*command(path))
    check(str(path), result.exit_code, result.output, EXPECT[path.name])
    if path.name in ONE_LINE:
        want = 3 if path.name.startswith("hf-type-four") else 1
        assert len(result.output.strip().splitlines()) == want, result.output


POINTS = str(BAD / "calibrate" / "points-range-gpus-huge.csv")  # any file: never read
VLLM = str(BAD / "calibrate" / "vllm-range-throughput-1e999.json")


@pytest.mark.parametrize(
    ("args", "option", "expect"),
    [
        (["calibrate", POINTS, "--ridge", "nan"], "--ridge", "number > 0 and at most 1e+06, got nan"),
        (["calibrate", POINTS, "--ridge", "inf"], "--ridge", "number > 0 and at most 1e+06, got inf"),
        (["calibrate", POINTS, "--ridge", "0"], "--ridge", "number > 0 and at most 1e+06, got 0.0"),
        (["calibrate", POINTS, "--ridge", "-1"], "--ridge", "number > 0 and at most 1e+06"),
        (["calibrate", POINTS, "--max-points", "0"], "--max-points", "at least 1, got 0"),
        (["calibrate", VLLM, "--model", "llama-3.1-8b", "--chip", "h100-sxm", "--gpus", "0"],
         "--gpus", "from 1 to 4,096"),
        (["calibrate", VLLM, "--model", "llama-3.1-8b", "--chip", "h100-sxm", "--gpus",
          "99999999999999999999"], "--gpus", "from 1 to 4,096"),
        (["--max-input-mb", "1e308", "validate", str(SMALL)], "--max-input-mb", "got 1e+308"),
        (["--max-input-mb", "inf", "validate", str(SMALL)], "--max-input-mb", "got inf"),
        (["--max-input-mb", "nan", "validate", str(SMALL)], "--max-input-mb", "got nan"),
        (["--max-input-mb", "-1", "validate", str(SMALL)], "--max-input-mb", "got -1.0"),
        (["--max-input-mb", "9" * 30, "validate", str(SMALL)], "--max-input-mb", "got 1e+30"),
        (["--max-input-mb", "9" * 400, "validate", str(SMALL)], "--max-input-mb", "got inf"),
        (["workload", "fit", str(TRACE), "--window", "1e308d"], "--window", "from 1m to 3650d"),
        (["workload", "fit", str(TRACE), "--window", "9" * 25 + "d"], "--window", "3650d"),
        (["workload", "fit", str(TRACE), "--window", "9" * 5000 + "d"], "--window",
         "(5,001 characters)"),
        (["workload", "fit", str(TRACE), "--window", "infd"], "--window", "not allowed"),
        (["workload", "fit", str(TRACE), "--window", "nanh"], "--window", "not allowed"),
        (["workload", "fit", str(TRACE), "--window", "-1d"], "--window", "not allowed"),
        (["workload", "fit", str(TRACE), "--window", "3651d"], "--window", "not allowed"),
    ],
)  # fmt: skip
def test_each_bad_option_is_one_line(args, option, expect):
    result = run_main(*args)
    check(option, result.exit_code, result.output, expect)


def test_the_environment_limit_is_bounded_too(monkeypatch):
    monkeypatch.setenv("PDDPLAN_MAX_INPUT_MB", "1e308")
    result = run_main("validate", str(SMALL))
    check("--max-input-mb", result.exit_code, result.output, "got 1e+308")


@pytest.mark.parametrize(
    "command_",
    [
        ["validate", "{f}"],
        ["evaluate", str(SMALL), "--fleet", "{f}"],
        ["evaluate", str(SMALL), "--plan", "{f}"],
        ["model", "import", "{f}", "--id", "x"],
        ["calibrate", "{f}"],
        ["workload", "fit", "{f}"],
        ["catalog", "list", "--hardware", "{f}"],
        ["model", "list", "--models", "{f}"],
    ],
    ids=lambda c: c[0] if c[0] != "evaluate" else f"evaluate-{c[2]}",
)
def test_a_loop_of_symbolic_links_is_one_line(tmp_path, command_):
    """``pathlib.resolve`` raised ``RuntimeError`` on a loop (a traceback): now one line."""
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.symlink_to(b)
    b.symlink_to(a)
    result = run_main(*[c.replace("{f}", str(a)) for c in command_])
    check(str(a), result.exit_code, result.output, "a loop of symbolic links")


def test_a_read_only_out_file_is_refused_and_kept(tmp_path):
    """``model import --out`` replaced a read-only catalog by a rename (the folder was
    writable): refused now, the file as it was."""
    out = tmp_path / "models.yaml"
    first = run_main("model", "import", str(DATA / "hf" / "llama-3.1-8b.json"), "--id", "a",
                     "--out", str(out))  # fmt: skip
    assert first.exit_code == 0, first.output
    out.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    before = out.read_bytes()
    result = run_main("model", "import", str(DATA / "hf" / "qwen3-30b-a3b.json"), "--id", "b",
                      "--out", str(out))  # fmt: skip
    check("--out", result.exit_code, result.output, "read-only")
    assert out.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.slow  # the default run stays under 90 s on a shared machine
@pytest.mark.parametrize(
    "command_",
    [
        ["validate", "{f}"],
        ["workload", "fit", "{f}"],
        ["calibrate", "{f}"],
        ["evaluate", str(SMALL), "--plan", "{f}"],
    ],
    ids=lambda c: c[0],
)
def test_a_fifo_with_no_writer_waits_a_bounded_time(tmp_path, monkeypatch, command_):
    """A FIFO nobody writes blocked for ever in ``open``; now each read waits at most
    ``PIPE_WAIT_S`` (10 s; 0.2 s here), then one line."""
    monkeypatch.setattr(pddplan.pipes, "PIPE_WAIT_S", 0.2)
    fifo = tmp_path / "in.csv"
    os.mkfifo(fifo)
    result = run_main(*[c.replace("{f}", str(fifo)) for c in command_])
    check(str(fifo), result.exit_code, result.output, "no data for 0.2 s")


def test_a_fifo_whose_writer_writes_is_read_whole(tmp_path, monkeypatch):
    """The bounded wait does not cut a writer that comes: its scenario is read and valid."""
    monkeypatch.setattr(pddplan.pipes, "PIPE_WAIT_S", 5.0)
    fifo = tmp_path / "s.yaml"
    os.mkfifo(fifo)
    text = SMALL.read_text()

    def write() -> None:
        with open(fifo, "w") as f:
            f.write(text)

    writer = threading.Thread(target=write)
    writer.start()
    result = run_main("validate", str(fifo), "--json")
    writer.join(timeout=10)
    assert result.exit_code == 0, result.output
    assert '"valid": true' in result.stdout


def test_a_null_kv_head_count_is_one_per_head_and_a_good_shape_passes(tmp_path):
    """``num_key_value_heads: null`` (some configs write it) is one KV head per attention
    head, as a config without the key; the attention shape check passes a real GQA config."""
    config = json.loads((DATA / "hf" / "llama-3.1-8b.json").read_text())
    assert "num_key_value_heads: 8" in pddplan.import_hf_config(
        DATA / "hf" / "llama-3.1-8b.json", "a"
    )
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**config, "num_key_value_heads": None}))
    text = pddplan.import_hf_config(path, "b")
    assert "num_key_value_heads: 32" in text and "attention: mha" in text


@pytest.mark.slow  # the default run stays under 90 s on a shared machine
@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--max-input-mb", "1e308", "validate", str(SMALL)], "--max-input-mb"),
        (command(BAD / "calibrate" / "vllm-range-throughput-1e999.json"), "vllm-range"),
        (command(BAD / "limits" / "trace-encoding-binary-many-lines.jsonl"), "trace-encoding"),
    ],
    ids=["max-input-mb", "vllm", "binary-trace"],
)
def test_a_real_process_fails_cleanly_too(args, named):
    """Through the installed entry point as a user runs it: no traceback on stderr either
    (the ``--max-input-mb`` check runs in the group's callback, outside any command)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pddplan", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
        timeout=120,
        check=False,
    )
    check(named, proc.returncode, proc.stdout + proc.stderr)
