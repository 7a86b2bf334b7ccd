"""Shared fixtures: a toy chip and model whose roofline numbers are easy to work by hand,
the shipped catalogs, and one hypothesis profile for the suite."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from pddplan.io.catalogs import load_hardware, load_models
from pddplan.model.problem import Problem
from pddplan.spec.calibration import Calibration, Knobs
from pddplan.spec.hardware import ChipSpec, Efficiency, HardwareCatalog
from pddplan.spec.llm import ModelSpec
from pddplan.spec.scenario import Scenario

SLOW_BY_DURATION = {
    "tests/test_compare.py::test_progress_counts_the_rows_against_all_of_them",
    "tests/test_solve.py::test_the_time_limit_stops_the_count_tables_too",
    "tests/test_work.py::test_a_solve_takes_no_more_work_than_counted[pdd-h100-h200]",
    "tests/test_work.py::test_a_solve_takes_no_more_work_than_counted[pdd-paper-fleets]",
    "tests/test_solve.py::test_each_shipped_scenario_solves[domestic-910c-h20]",
    "tests/test_golden.py::test_solve_json_is_unchanged[domestic-910c-h20]",
    "tests/test_solve.py::test_the_relaxations_plans_are_the_milps_optimum",
    "tests/test_evaluate.py::test_md_cache_must_hold_the_open_sessions",
    "tests/test_solve.py::test_each_shipped_scenario_solves[pdd-h100-h200-monthly]",
    "tests/test_api.py::test_the_documented_example_runs",
    "tests/test_robust.py::test_a_variant_no_plan_serves_alone_is_named_with_its_relaxation",
    "tests/test_robust.py::test_solve_writes_a_robust_plan_that_simulate_reads_per_variant",
    "tests/test_sweep.py::test_resume_skips_journalled_points_and_refuses_another_sweep",
    "tests/test_solve.py::test_a_time_limited_plan_carries_a_gap_and_a_bound_or_says_why_not[max-bcr]",
    "tests/test_colocation.py::test_the_planner_hosts_relay_decode_where_it_is_cheaper",
    "tests/test_colocation.py::test_the_simulator_hosts_relay_decode_on_the_prefill_passes",
    "tests/test_compare.py::test_each_row_is_the_plan_computed_directly[budget]",
    "tests/test_compare.py::test_each_row_is_the_plan_computed_directly[demand]",
    "tests/test_compare.py::test_sections_rank_by_their_own_measure",
    "tests/test_enumerate.py::test_max_bcr_matches_brute_force[100-0.01]",
    "tests/test_enumerate.py::test_max_bcr_matches_brute_force[100-0.1]",
    "tests/test_enumerate.py::test_max_capacity_matches_brute_force[200]",
    "tests/test_enumerate.py::test_max_capacity_matches_brute_force[202]",
    "tests/test_enumerate.py::test_min_cost_matches_brute_force[11]",
    "tests/test_enumerate.py::test_min_cost_matches_brute_force[17]",
    "tests/test_enumerate.py::test_min_cost_matches_brute_force[1]",
    "tests/test_enumerate.py::test_min_cost_matches_brute_force[6]",
    "tests/test_golden.py::test_compare_markdown_is_unchanged[one-class-llama-70b]",
    "tests/test_golden.py::test_solve_json_is_unchanged[pdd-paper-fleets]",
    "tests/test_golden.py::test_solve_json_is_unchanged[pdd-h100-h200]",
    "tests/test_golden.py::test_solve_max_bcr_json_is_unchanged",
    "tests/test_overlap.py::test_the_planner_chooses_context_parallelism_where_the_tail_needs_it",
    "tests/test_problem.py::test_a_price_change_rebuilds_no_table",
    "tests/test_problem.py::test_counts_are_shared_across_link_prices_but_not_across_the_link",
    "tests/test_sweep.py::test_csv_out_and_each_plot_kind",
    "tests/test_sweep.py::test_results_are_the_same_bytes_on_one_or_two_workers",
    "tests/test_render.py::test_catalog_text_is_not_read_as_markup",
    "tests/test_render.py::test_a_fixed_short_run_is_rendered_with_its_verdict_first",
    "tests/test_colocation.py::test_the_colocated_paper_fleet_evaluates_with_free_relay_decode",
    "tests/test_solve.py::test_a_time_limited_plan_carries_a_gap_and_a_bound_or_says_why_not[min-cost]",
    "tests/test_explain.py::test_a_tight_ttft_is_relaxed_to_a_value_checked_by_solving_again",
    "tests/test_explain.py::test_a_full_link_is_named_with_the_bandwidth_that_serves_the_demand",
    "tests/test_studies.py::test_the_demand_steps_are_where_independent_solves_change_fleet",
    "tests/test_studies.py::test_the_demand_study_resumes_from_its_journal",
    "tests/test_simulate.py::test_small_scenario_at_its_demand_is_confirmed_at_steady_state",
    "tests/test_simulate.py::test_solve_verify_on_the_small_scenario",
    "tests/test_solve.py::test_a_timed_out_rate_is_not_taken_as_infeasible",
    "tests/test_solve.py::test_cost_floor_never_exceeds_the_minimum_cost[path0]",
    "tests/test_solve.py::test_each_shipped_scenario_solves[pdd-paper-fleets]",
    "tests/test_solve.py::test_each_shipped_scenario_solves[pdd-h100-h200]",
    "tests/test_solve.py::test_solve_infeasible_exits_1_with_the_relaxation",
    "tests/test_solve.py::test_a_search_out_of_rate_points_returns_the_best_plan_with_its_gap",
    "tests/test_solve.py::test_the_relaxation_bounds_the_minimum_cost[path0]",
    "tests/test_solve.py::test_time_limit_stops_the_search",
}
"""Tests that took 3 s or more of the default run (``pytest --durations=25``, 2026-12-03, again after the batched-pass tails, on 2026-12-05 after the part-full prefill passes and on 2026-12-06 after the router check over every relay cut,
this 2-core machine): marked ``slow`` here, so that the default run stays near 90 s; CI runs
them with the other slow ones."""


SLOW_RENDER = "tests/test_render.py::test_reports_fit_and_match_their_golden_text["
"""Every render golden: they share one module fixture that builds every report (~20 s)."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid in SLOW_BY_DURATION or item.nodeid.startswith(SLOW_RENDER):
            item.add_marker(pytest.mark.slow)


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
# the shipped scenarios the tests name, each by one name
SMALL = ROOT / "scenarios" / "small-llama-8b.yaml"
H100_H200 = ROOT / "scenarios" / "pdd-h100-h200.yaml"  # the README's
PAPER_FLEETS = ROOT / "scenarios" / "pdd-paper-fleets.yaml"
MONTHLY = ROOT / "scenarios" / "pdd-h100-h200-monthly.yaml"
ONE_CLASS = ROOT / "scenarios" / "one-class-llama-70b.yaml"
DOMESTIC = ROOT / "scenarios" / "domestic-910c-h20.yaml"


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
    return Problem(scenario, hardware, models[scenario.model])


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
