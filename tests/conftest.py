"""Shared fixtures: a toy chip and model whose roofline numbers are easy to work by hand,
the shipped catalogs, and one hypothesis profile for the suite."""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from pddplan.io.catalogs import load_engines, load_hardware, load_models
from pddplan.model.problem import Problem
from pddplan.spec.calibration import Calibration, Knobs
from pddplan.spec.hardware import ChipSpec, Efficiency, HardwareCatalog
from pddplan.spec.llm import ModelSpec
from pddplan.spec.scenario import Scenario

# A sweep without --out keeps its journal in the user's cache folder: the tests' in a
# folder of their own, never the user's (subprocesses inherit it), removed at the end.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="pddplan-test-cache-")
atexit.register(shutil.rmtree, os.environ["XDG_CACHE_HOME"], ignore_errors=True)

SLOW_S = 3.0
"""A default-run test that takes this long (its call alone) belongs with the slow ones."""
_unmarked_slow: list[tuple[float, str]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and report.duration >= SLOW_S and "slow" not in report.keywords:
        _unmarked_slow.append((report.duration, report.nodeid))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """List the default-run tests that took ``SLOW_S`` or more, to mark slow: a list to act
    on, not a failure (a loaded machine can push a test over once)."""
    if _unmarked_slow:
        terminalreporter.section(f"unmarked tests over {SLOW_S:g} s (mark them slow)")
        for duration, nodeid in sorted(_unmarked_slow, reverse=True):
            terminalreporter.write_line(f"{duration:6.2f} s  {nodeid}")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="Rewrite tests/golden/ from the current outputs (tests/test_golden.py).",
    )


settings.register_profile(
    "pddplan",
    settings(
        max_examples=60,
        deadline=timedelta(milliseconds=500),
        suppress_health_check=[HealthCheck.too_slow],
    ),
)
settings.load_profile("pddplan")

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
PLANNED = [p for p in SCENARIOS if "\nhorizon:" not in p.read_text()]
"""The shipped scenarios ``solve`` plans for one rate: a scenario with a ``horizon:`` is
planned over time (``HORIZON_EXAMPLE``, solved once a session by ``horizon_solved``, its
plan file pinned by its own golden), and ``compare`` plans it at its base rate alone."""
HORIZON_EXAMPLE = ROOT / "scenarios" / "pdd-h100-h200-horizon.yaml"
"""The shipped plan over time (issue 53): about 22 s to solve on this project's machine."""
HORIZON_GOLDEN = Path(__file__).resolve().parent / "golden" / "solve-pdd-h100-h200-horizon.json"
"""Its plan file (``solve --json``), kept in step by ``tests/test_golden.py``: what the
default run's tests of a horizon plan's CSV, JSON and report read, without solving."""
# the shipped scenarios the tests name, each by one name
SMALL = ROOT / "scenarios" / "small-llama-8b.yaml"
H100_H200 = ROOT / "scenarios" / "pdd-h100-h200.yaml"  # the README's
PAPER_FLEETS = ROOT / "scenarios" / "pdd-paper-fleets.yaml"
MONTHLY = ROOT / "scenarios" / "pdd-h100-h200-monthly.yaml"
ONE_CLASS = ROOT / "scenarios" / "one-class-llama-70b.yaml"
DOMESTIC = ROOT / "scenarios" / "domestic-910c-h20.yaml"
QUICK = (SMALL, ONE_CLASS)
"""The shipped scenarios a solve plans in under 3 s: the default run's."""


def quick_or_slow(paths: list[Path]) -> list[Any]:
    """``paths`` as parameters named by their stems, all but the ``QUICK`` ones marked slow
    (CI's slow run takes them)."""
    return [pytest.param(p, id=p.stem, marks=() if p in QUICK else pytest.mark.slow) for p in paths]


def _sources(*keys: str) -> dict[str, str]:
    return {k: "test fixture" for k in keys}


TOY_EFFICIENCY = Efficiency(
    prefill_mfu=0.5,
    decode_mfu=0.5,
    decode_hbm_efficiency=0.5,
    collective_efficiency=1.0,
    scaleup_latency_us=0,
    scaleout_latency_us=0,
    step_overhead_ms=0,
    sources=_sources(
        "prefill_mfu",
        "decode_mfu",
        "decode_hbm_efficiency",
        "collective_efficiency",
        "scaleup_latency_us",
        "scaleout_latency_us",
        "step_overhead_ms",
    ),
)


@pytest.fixture
def toy_chip() -> ChipSpec:
    """100 TFLOPS BF16, 100 GB of HBM at 1 TB/s, 8 per node."""
    return ChipSpec(
        id="toy",
        name="Toy",
        vendor="test",
        family="toy",
        bf16_tflops=100,
        fp8_tflops=None,
        hbm_gb=100,
        hbm_bandwidth_tb_s=1.0,
        scaleup_bandwidth_gb_s=100,
        scaleup_domain_gpus=8,
        nic_gbps=100,
        host_link_gb_s=50,
        tdp_w=500,
        purchase_unit_gpus=8,
        price_usd_per_hour=None,
        sources=_sources(
            "bf16_tflops",
            "hbm_gb",
            "hbm_bandwidth_tb_s",
            "scaleup_bandwidth_gb_s",
            "scaleup_domain_gpus",
            "nic_gbps",
            "host_link_gb_s",
            "tdp_w",
            "purchase_unit_gpus",
        ),
    )


@pytest.fixture
def toy_model() -> ModelSpec:
    """A 2-layer dense GQA model: per layer attention 2,621,440 + MLP 12,582,912 params;
    embeddings 2 x 1000 x 1024 = 2,048,000; total 32,456,704 params (so nothing is 'other')."""
    return ModelSpec(
        id="toy",
        hf_id="test/toy",
        source="test",
        attention="gqa",
        num_hidden_layers=2,
        hidden_size=1024,
        intermediate_size=4096,
        num_attention_heads=8,
        num_key_value_heads=2,
        head_dim=128,
        vocab_size=1000,
        total_params_b=0.032456704,
        active_params_b=0.032456704,
        weight_dtype="bf16",
        kv_dtype="bf16",
    )


@pytest.fixture
def toy_cal() -> Calibration:
    return Calibration(efficiency=TOY_EFFICIENCY, knobs=Knobs(ep_imbalance=1.0))


@pytest.fixture(scope="session")
def hardware() -> HardwareCatalog:
    return load_hardware()


@pytest.fixture(scope="session")
def models() -> dict[str, ModelSpec]:
    return load_models()


def problem_of(scenario: Scenario, hardware: HardwareCatalog, models=None) -> Problem:
    """The problem of a scenario built in a test (the shipped model catalog by default)."""
    models = models if models is not None else load_models()
    return Problem(scenario, hardware, models[scenario.model], engines=load_engines())


def triple(problem: Problem) -> tuple[Scenario, HardwareCatalog, dict[str, ModelSpec]]:
    """A loaded problem's scenario, hardware catalog and model (by id)."""
    return problem.scenario, problem.hardware, {problem.model.id: problem.model}


@dataclass(frozen=True)
class Run:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_main(*args: str) -> Run:
    """The console entry point, in process, as a user's shell runs it (its usage errors
    included, which typer's CliRunner does not format like ``main``)."""
    from pddplan.cli.app import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    return Run(code, out.getvalue(), err.getvalue())


def one_error(result: Run, *parts: str) -> str:
    """The one ``Error:`` line of a refused command (exit 2, no traceback), with ``parts``."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.output
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


@dataclass(frozen=True)
class HorizonSolve:
    """``solve`` of the shipped horizon example with every output: the command's result and
    the files it wrote."""

    run: Run
    plan: Path
    csv: Path
    plot: Path
    report: Path


@pytest.fixture(scope="session")
def horizon_solved(tmp_path_factory: pytest.TempPathFactory) -> HorizonSolve:
    """The shipped horizon example solved once a session (about 22 s: for slow tests only)
    from the project's folder, as a user would (``--out``, ``--csv``, ``--plot``,
    ``--report``), so that its plan file names the scenario as the goldens do."""
    folder = tmp_path_factory.mktemp("horizon")
    files = HorizonSolve(
        Run(0, "", ""), folder / "plan.json", folder / "schedule.csv", folder / "schedule.png",
        folder / "report.html",
    )  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        run = run_main(
            "solve", str(HORIZON_EXAMPLE.relative_to(ROOT)), "--out", str(files.plan),
            "--csv", str(files.csv), "--plot", str(files.plot), "--report", str(files.report),
            "-q",
        )  # fmt: skip
    return HorizonSolve(run, files.plan, files.csv, files.plot, files.report)


# --- golden files -------------------------------------------------------------------------
GOLDEN = Path(__file__).resolve().parent / "golden"
"""Outputs pinned across refactors (``tests/test_golden.py``, ``tests/test_render.py``);
``pytest --update-golden`` rewrites them, in a commit whose message explains each change."""
GOLDEN_RELATIVE = 1e-9
"""How far a number in a JSON golden may move (relative)."""


def golden_differences(want: Any, got: Any, path: str = "") -> list[str]:
    """Where ``got`` differs from ``want``: numbers beyond ``GOLDEN_RELATIVE``, anything
    else at all."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = [f"{path}.{k}: missing" for k in want.keys() - got.keys()]
        out += [f"{path}.{k}: unexpected" for k in got.keys() - want.keys()]
        for k in want.keys() & got.keys():
            out += golden_differences(want[k], got[k], f"{path}.{k}")
        return out
    if isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            return [f"{path}: {len(got)} items, expected {len(want)}"]
        return [
            d
            for i, (a, b) in enumerate(zip(want, got, strict=True))
            for d in golden_differences(a, b, f"{path}[{i}]")
        ]
    numbers = (int, float)
    if isinstance(want, numbers) and isinstance(got, numbers) and not isinstance(want, bool):
        if math.isclose(want, got, rel_tol=GOLDEN_RELATIVE, abs_tol=1e-12) or want == got:
            return []
        return [f"{path}: {got!r}, expected {want!r}"]
    return [] if want == got else [f"{path}: {got!r}, expected {want!r}"]


def check_golden(name: str, text: str, request: pytest.FixtureRequest) -> None:
    """``text`` against ``tests/golden/NAME``: a ``.json`` file compared as data
    (``golden_differences``), any other exactly; with ``--update-golden``, written instead.
    A missing file fails, naming the option that writes it."""
    path = GOLDEN / name
    if request.config.getoption("update_golden"):
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"{path} is missing: run with --update-golden to create it"
    want = path.read_text(encoding="utf-8")
    if name.endswith(".json"):
        problems = golden_differences(json.loads(want), json.loads(text))
        assert not problems, "\n".join(problems[:20])
    else:
        assert text == want, f"{name} changed; diff it against {path} (--update-golden rewrites it)"


@pytest.fixture(autouse=True)
def _signal_handlers_put_back():
    """Each test starts with the process's SIGINT and SIGTERM handlers as the session
    started with them, and leaves them so: a library that changes one and does not put it
    back (a test's own ``ray.init`` leaves Ray's SIGTERM handler, say) would otherwise
    decide how a later test's signal is taken. (A test of Ctrl-C sets its own SIGINT
    handler: a run started in the background, as CI may be, begins with SIGINT ignored,
    which the CLI keeps, as a background job's.)"""
    import signal

    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s, handler in _SESSION_SIGNALS.items():
        if handler is not None:
            signal.signal(s, handler)
    yield
    for s, handler in before.items():
        if handler is not None and signal.getsignal(s) != handler:
            signal.signal(s, handler)


def _session_signals() -> dict:
    import signal

    return {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}


_SESSION_SIGNALS = _session_signals()
