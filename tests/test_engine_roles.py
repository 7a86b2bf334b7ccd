"""An engine per role (issue #49, item 1): ``engine: {prefill: ..., main_decode: ...}``. Each
pool's pass times, knobs, error factors and launch limits come from its role's engine; one
engine for every role is today's plan; bad input is one located line; a plan file carries
the engines to later commands and to ``export``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import DOMESTIC, H100_H200, SMALL, TOY_EFFICIENCY, run_main

import pddplan
from pddplan.errors import ArgumentError, InputError
from pddplan.io.catalogs import load_engines
from pddplan.model.problem import Problem
from pddplan.plan.space import Space
from pddplan.spec.calibration import CalibrationOverride
from pddplan.spec.engine import EngineCatalog, EngineProfile, handoff_problems
from pddplan.spec.hardware import HardwareCatalog
from pddplan.spec.scenario import ROLES, Scenario

# the toy pass of test_perf.py: 1,000 new tokens on one GPU, compute-bound at 1.38018816 ms;
# the toy decode step: batch 1 at 1,000 tokens, memory-bound at 129.826816 us
TOY_PREFILL_S = 1.38018816e-3
TOY_DECODE_S = 129.826816e-6


@pytest.fixture(scope="module")
def readme() -> Problem:
    return pddplan.load_scenario(H100_H200)


def _with(problem: Problem, engine: Any) -> Problem:
    """``problem`` with its scenario's ``engine`` set to ``engine`` (validated again)."""
    data = problem.scenario.model_dump(mode="json")
    return problem.with_scenario(Scenario.model_validate({**data, "engine": engine}))


# --- which engine each role runs --------------------------------------------------------------
@pytest.mark.parametrize(
    ("engine", "calibration", "want"),
    [
        (None, {}, ("sglang", "sglang", "sglang")),
        ("vllm", {}, ("vllm", "vllm", "vllm")),
        ({"main_decode": "ideal"}, {}, ("sglang", "sglang", "ideal")),
        ({"prefill": "trtllm", "default": "ideal"}, {}, ("trtllm", "ideal", "ideal")),
        # a fit that names no engine is read against ideal; naming a role names an engine
        (None, {"default": {"prefill_mfu": 0.5}}, ("ideal", "ideal", "ideal")),
        ({"main_decode": "vllm"}, {"default": {"prefill_mfu": 0.5}}, ("sglang", "sglang", "vllm")),
    ],
)
def test_a_role_takes_its_own_engine_then_default_then_the_catalogs(
    readme, engine, calibration, want
):
    data = readme.scenario.model_dump(mode="json")
    s = Scenario.model_validate({**data, "engine": engine, "calibration": calibration})
    assert tuple(s.role_engines("sglang")[r] for r in ROLES) == want


def test_only_different_released_engines_fail_to_hand_the_kv_cache_over():
    catalog = load_engines()
    every = ["prefill", "relay_decode", "main_decode"]
    same = dict.fromkeys(every, "vllm")
    assert handoff_problems(catalog, same, every) == []
    with_ideal = {"prefill": "sglang", "relay_decode": "ideal", "main_decode": "ideal"}
    assert handoff_problems(catalog, with_ideal, every) == []
    mixed = {"prefill": "sglang", "relay_decode": "sglang", "main_decode": "trtllm"}
    [(taker, why)] = handoff_problems(catalog, mixed, every)
    assert taker == "main_decode"
    assert why.startswith("trtllm (main_decode) cannot take a request's KV cache from sglang")
    # relay decode to main decode counts too, and a role the scenario does not run does not
    assert handoff_problems(catalog, mixed, ["prefill", "relay_decode"]) == []


# --- each pool's figures are its role's engine's ------------------------------------------
def _toy_problem(toy_model, toy_chip, engine: Any) -> Problem:
    """The toy model on the toy chip, with a catalog of ``ideal`` and ``slow``: ideal's
    figures plus 5 us a layer (``layer_overhead_us``) on the toy family."""
    hardware = HardwareCatalog(efficiency_defaults={"toy": TOY_EFFICIENCY}, chips={"toy": toy_chip})
    engines = EngineCatalog(
        default="ideal",
        engines={
            "ideal": EngineProfile.model_validate(
                {"id": "ideal", "name": "ideal", "version": "-", "families": "any"}
            ),
            "slow": EngineProfile(
                id="slow",
                name="slow",
                version="1",
                families={"toy": CalibrationOverride(layer_overhead_us=5.0)},
                sources={"layer_overhead_us": "test"},
            ),
        },
    )
    scenario = Scenario.model_validate(
        {
            "name": "toy",
            "model": "toy",
            "engine": engine,
            "datacenters": {"a": {"chips": ["toy"], "roles": list(ROLES)}},
            "workload": {
                "arrival_rps": 1,
                "classes": [{"weight": 1, "input_tokens": 1000, "output_tokens": 100, "p_hit": 0}],
            },
            "sla": {"ttft_p90_s": 1, "ttft_p99_s": 2, "tpot_ms": 50},
        }
    )
    return Problem(scenario, hardware, toy_model, engines=engines)


def test_each_pool_runs_its_roles_engine_by_hand(toy_model, toy_chip):
    """Main decode on ``slow``, the rest on ``ideal``: the toy decode step at batch 1 and
    1,000 tokens is 129.826816 us on ideal, and 2 layers x 5 us = 10 us more, 139.826816 us,
    on slow; the toy prefill pass, 1.38018816 ms, likewise 10 us more on slow (an MD
    handoff's extend pass is main decode's)."""
    problem = _toy_problem(toy_model, toy_chip, {"main_decode": "slow"})
    md = problem.instance("toy", 1, role="main_decode")
    assert md.decode_step_s(1, 1000) == pytest.approx(139.826816e-6)
    assert md.prefill_pass_s(1000, 0) == pytest.approx(TOY_PREFILL_S + 10e-6)
    for role in ("prefill", "relay_decode"):
        inst = problem.instance("toy", 1, role=role)
        assert inst.decode_step_s(1, 1000) == pytest.approx(TOY_DECODE_S)
        assert inst.prefill_pass_s(1000, 0) == pytest.approx(TOY_PREFILL_S)
    # one instance table entry per engine, and each table agrees with that engine alone
    assert {k.engine for k in problem._tables.instances} == {"ideal", "slow"}
    slow, ideal = (_toy_problem(toy_model, toy_chip, e) for e in ("slow", "ideal"))
    assert problem.decode_point("toy", 1, role="main_decode") == slow.decode_point("toy", 1)
    assert problem.decode_point("toy", 1, role="relay_decode") == ideal.decode_point("toy", 1)
    assert problem.prefill_figures("toy", 1).service.tolist() == (
        ideal.prefill_figures("toy", 1).service.tolist()
    )
    k, tokens = pytest.importorskip("numpy").array([0]), [64.0]
    assert problem.extend_pass_s("toy", 1, tokens, k) == slow.extend_pass_s("toy", 1, tokens, k)
    # with roles on different engines there is no one engine to assume
    with pytest.raises(ValueError, match="an engine per role"):
        problem.instance("toy", 1)


def test_a_mixed_scenarios_pools_price_as_their_engine_alone(readme):
    """The README's scenario with main decode on ``ideal``: prefill and relay decode figures
    are SGLang's, main decode's (operating point, steps, first step) ideal's."""
    mixed = _with(readme, {"main_decode": "ideal"})
    ideal = _with(readme, "ideal")
    assert mixed.mixed and not readme.mixed
    p = ("h100-sxm", 16, False, False, 8)
    assert mixed.prefill_figures(*p).service.tolist() == readme.prefill_figures(*p).service.tolist()
    rld = mixed.decode_steps("h100-sxm", 16, role="relay_decode")[1]
    assert rld.tolist() == readme.decode_steps("h100-sxm", 16)[1].tolist()
    for gb in (0.0, 64.0):
        point = mixed.decode_point("h200-sxm", 8, gb, role="main_decode")
        assert point == ideal.decode_point("h200-sxm", 8, gb)
        assert point != readme.decode_point("h200-sxm", 8, gb)
    assert mixed.first_step_s("h200-sxm", 8) == ideal.first_step_s("h200-sxm", 8)
    summary = mixed.engine_summary()
    assert summary["id"] == "prefill=sglang,relay_decode=sglang,main_decode=ideal"
    assert {r: v["id"] for r, v in summary["roles"].items()} == {
        "prefill": "sglang",
        "relay_decode": "sglang",
        "main_decode": "ideal",
    }
    # the id is --engine's form: it gives the same engines back
    assert pddplan.with_engine(readme, summary["id"]).engine_label == summary["id"]


def test_error_factors_are_each_roles_engines(readme):
    """At the 90th percentile, SGLang's pools take SGLang's factors and ideal's none."""
    mixed = _with(readme, {"main_decode": "ideal"})
    slower = pddplan.with_engine(mixed, perf_quantile=0.9)
    assert slower.time_factors("main_decode") == (1.0, 1.0)
    sglang = pddplan.with_engine(readme, perf_quantile=0.9).time_factors()
    assert slower.time_factors("prefill") == sglang and sglang[0] > 1 and sglang[1] > 1
    roles = slower.engine_summary()["roles"]
    assert roles["prefill"]["time_factors"] == {"prefill": sglang[0], "decode": sglang[1]}


def test_one_engine_for_every_role_is_todays_problem(readme):
    for engine in ({"default": "sglang"}, dict.fromkeys(ROLES, "sglang"), {"prefill": "sglang"}):
        same = _with(readme, engine)
        assert not same.mixed and same.engine_label == "sglang"
        assert same.engine_summary() == readme.engine_summary()
        assert "roles" not in same.engine_summary()


def test_a_change_of_any_roles_engine_shares_no_engine_table(readme):
    """The engine is an input of every table that depends on it; a price is not."""
    mixed = _with(readme, {"main_decode": "ideal"})
    readme.instance("h100-sxm", 16)
    mixed.instance("h100-sxm", 16, role="prefill")
    assert mixed._tables.instances is not readme._tables.instances
    priced = mixed.derive({"prices_usd_per_gpu_hour.h200-sxm": 4.0})
    assert priced._tables.instances is mixed._tables.instances
    assert priced._tables.counts is mixed._tables.counts
    other = mixed.derive({"engine.main_decode": "sglang"})
    assert other._tables.instances is not mixed._tables.instances and not other.mixed


# --- launch limits -------------------------------------------------------------------------------
def test_the_planner_leaves_out_what_each_roles_engine_cannot_launch(readme):
    """SGLang's prefill cannot split DeepSeek-V4's attention by context over 16 GPUs; with
    prefill on ideal that limit is gone, whatever the decode roles run."""
    on_sglang = Space(_with(readme, {"main_decode": "ideal"})).left_out_lines()
    assert len(on_sglang) == 1 and on_sglang[0].startswith("sglang 0.5.21 cannot launch context")
    assert Space(_with(readme, {"prefill": "ideal"})).left_out_lines() == []


@pytest.mark.slow  # 0.3 s
def test_relay_decode_on_prefill_needs_both_roles_engines_to_allow_it(readme):
    data = readme.scenario.model_dump(mode="json")
    data["search"]["relay_decode_on_prefill"] = [False, True]
    s = Scenario.model_validate({**data, "engine": {"prefill": "ideal"}})
    lines = Space(readme.with_scenario(s)).left_out_lines()
    assert any(x.startswith("sglang 0.5.21 cannot launch relay decode on prefill") for x in lines)


# --- bad input ---------------------------------------------------------------------------------
def _scenario(tmp_path: Path, engine: str, base: Path = H100_H200) -> Path:
    text = base.read_text()
    head, rest = text.split("\nmodel:", 1)
    path = tmp_path / "s.yaml"
    path.write_text(f"{head}\nengine: {engine}\nmodel:{rest}")
    return path


@pytest.mark.parametrize(
    ("engine", "base", "message"),
    [
        (
            "{prefill: sglang, decode: vllm}",
            H100_H200,
            "engine.decode: unknown key 'decode'; did you mean 'main_decode'?; allowed: "
            "prefill, relay_decode, main_decode, default",
        ),
        (
            "{main_decode: sglangg}",
            H100_H200,
            "engine.main_decode: unknown engine 'sglangg'; close matches: sglang; profiles: "
            "ideal, sglang, trtllm, vllm",
        ),
        (
            "{main_decode: vllm}",
            H100_H200,
            "engine.main_decode: vllm (main_decode) cannot take a request's KV cache from "
            "sglang (prefill, relay_decode): no released engine hands it to another engine's "
            "instances",
        ),
        (
            "{prefill: vllm, default: sglang}",
            H100_H200,
            "engine.default: sglang (relay_decode, main_decode) cannot take a request's KV "
            "cache from vllm (prefill)",
        ),
        (
            "{prefill: trtllm, default: ideal}",
            DOMESTIC,
            "engine.prefill: prefill: engine 'trtllm' has no profile for ascend-910c",
        ),
        ("{}", H100_H200, "engine: an empty mapping: name an engine for a role"),
        ("[sglang, vllm]", H100_H200, "engine: expected an engine's name (every role) or a"),
        ("{prefill: 3}", H100_H200, "engine.prefill: expected a name, got 3"),
    ],
)
def test_a_bad_engine_per_role_is_one_located_line(tmp_path, engine, base, message):
    path = _scenario(tmp_path, engine, base)
    if base == DOMESTIC:  # its own engine: line drops out, ours stays
        text = path.read_text().replace("\nengine: ideal ", "\n# engine: ideal ", 1)
        path.write_text(text)
    with pytest.raises(InputError) as e:
        pddplan.load_scenario(path)
    assert len(e.value.problems) == 1, e.value.problems
    [line] = e.value.problems
    assert line.startswith(f"{path}:") and message in line, line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["solve", "{readme}", "--engine", "decode=sglang"],
            "--engine: unknown role 'decode'; roles: prefill, relay_decode, main_decode, default",
        ),
        pytest.param(
            ["solve", "{readme}", "--engine", "prefill="],
            "--engine: 'prefill=': give NAME",
            marks=pytest.mark.slow,
        ),
        (
            ["evaluate", "{readme}", "--fleet", "x.yaml", "--engine", "main_decode=vllm"],
            "--engine: vllm (main_decode) cannot take a request's KV cache from sglang",
        ),
        pytest.param(
            ["solve", "{readme}", "--engine", "main_decode=nope"],
            "--engine: unknown engine 'nope'; profiles: ideal, sglang, trtllm, vllm",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            ["solve", "{readme}", "--engine", "prefill=ideal,prefill=sglang"],
            "--engine: 'prefill' given twice",
            marks=pytest.mark.slow,
        ),
        (
            ["perf", "deepseek-v3", "h100-sxm", "--engine", "prefill=sglang"],
            "--engine: 'prefill=sglang': one engine's name here",
        ),
        pytest.param(
            ["sweep", "{readme}", "--vary", "engine=main_decode=ideal", "--out", "o.csv"],
            "--vary engine: 'main_decode=ideal': one engine's name for every role",
            marks=pytest.mark.slow,
        ),
        (
            ["sweep", "{readme}", "--vary", "engine.main_decode=vllm", "--out", "o.csv"],
            "--vary engine.main_decode: engine is not set in the scenario; set it there",
        ),
    ],
)
def test_bad_engine_per_role_arguments_are_one_line_exit_2(args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run_main(*[a.format(readme=H100_H200) for a in args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [x for x in result.stderr.strip().splitlines() if not x.startswith("see 'pddplan")]
    assert len(lines) == 1 and message in lines[0], result.stderr


def test_engine_option_overrides_only_the_roles_it_names(readme):
    mixed = pddplan.with_engine(readme, "main_decode=ideal")
    assert mixed.scenario.engine is not None and mixed.engine_label == (
        "prefill=sglang,relay_decode=sglang,main_decode=ideal"
    )
    on_vllm = pddplan.with_engine(_with(readme, "vllm"), "main_decode=ideal")
    assert on_vllm.engine_label == "prefill=vllm,relay_decode=vllm,main_decode=ideal"
    # every role on one engine: written as one name, as the scenario would say it
    back = pddplan.with_engine(mixed, "main_decode=sglang")
    assert back.scenario.engine == "sglang" and back.engine_summary() == readme.engine_summary()
    assert pddplan.with_engine(mixed, "ideal").scenario.engine == "ideal"
    with pytest.raises(ArgumentError, match="cannot take a request's KV cache"):
        pddplan.with_engine(readme, {"main_decode": "trtllm"})
    # a role not named keeps the engine the scenario ran it on, named or not (an old fit)
    data = readme.scenario.model_dump(mode="json")
    old_fit = {"default": {"prefill_mfu": 0.5}}
    fit = readme.with_scenario(Scenario.model_validate({**data, "calibration": old_fit}))
    assert pddplan.with_engine(fit, "main_decode=sglang").engine_label == (
        "prefill=ideal,relay_decode=ideal,main_decode=sglang"
    )


@pytest.mark.slow  # two processes' worth of CLI
def test_perf_on_a_mixed_scenario_asks_for_one_engine(tmp_path):
    path = _scenario(tmp_path, "{main_decode: ideal}")
    result = run_main("perf", "deepseek-v4-pro", "h200-sxm", "--scenario", str(path))
    assert result.exit_code == 2
    assert "roles run different engines" in result.stderr
    named = run_main(
        "perf", "deepseek-v4-pro", "h200-sxm", "--scenario", str(path), "--engine", "ideal"
    )
    assert named.exit_code == 0, named.output
    shown = run_main("validate", str(path))
    assert shown.exit_code == 0 and "per role: main_decode ideal" in shown.stdout


def test_a_sweep_varies_one_roles_engine(tmp_path):
    """``--vary engine.main_decode=...`` where the scenario gives engines per role (the
    whole ``engine`` there is a mapping: one role's at a time)."""
    from pddplan.sweeps.axes import Axis
    from pddplan.sweeps.knobs import check_axes

    problem = pddplan.load_scenario(_scenario(tmp_path, "{main_decode: ideal}"))
    check_axes(problem, [Axis("engine.main_decode", ("ideal", "sglang"), "ideal,sglang")])
    with pytest.raises(InputError, match="engine is a mapping; vary one of its values"):
        check_axes(problem, [Axis("engine", ("sglang", "ideal"), "sglang,ideal")])
    with pytest.raises(InputError, match="cannot take a request's KV cache from sglang"):
        check_axes(problem, [Axis("engine.main_decode", ("ideal", "trtllm"), "ideal,trtllm")])


# --- whole plans (slow) ------------------------------------------------------------------------
def _json(*args: str) -> dict[str, Any]:
    result = run_main(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", [SMALL, H100_H200])
def test_one_engine_for_every_role_gives_todays_plan(scenario, tmp_path):
    """The same cost and deployment id, whether the engine is named once or per role."""
    plain = tmp_path / "plain.json"
    _json("solve", str(scenario), "--out", str(plain))
    path = _scenario(tmp_path, "{prefill: sglang, relay_decode: sglang, default: sglang}", scenario)
    per_role = tmp_path / "per-role.json"
    _json("solve", str(path), "--out", str(per_role))
    a, b = (json.loads(p.read_text()) for p in (plain, per_role))
    assert b["deployment_id"] == a["deployment_id"]
    assert b["cost_per_hour_usd"] == a["cost_per_hour_usd"]
    assert b["sla_capacity_rps"] == pytest.approx(a["sla_capacity_rps"], rel=1e-12)
    assert b["engine"] == a["engine"] and b["left_out"] == a["left_out"]


@pytest.mark.slow
def test_a_mixed_plan_file_round_trips_through_later_commands(tmp_path, monkeypatch):
    """``solve --engine main_decode=ideal --out``: the plan names each role's engine;
    ``evaluate --plan`` assumes them without ``--engine``; the plan's problem is rebuilt with
    them; ``export`` writes each pool for its role's engine (ideal's: the plan's released
    one), and a plan whose roles run two releases launches each pool on its own."""
    from dataclasses import replace

    from pddplan.deploy.files import export_files
    from pddplan.deploy.launch import launch_plan

    monkeypatch.chdir(tmp_path)
    plan = tmp_path / "plan.json"
    solved = _json("solve", str(H100_H200), "--engine", "main_decode=ideal", "--out", str(plan))
    engine = solved["engine"]
    assert engine["id"] == "prefill=sglang,relay_decode=sglang,main_decode=ideal"
    assert engine["label"] == "sglang for prefill and relay_decode, ideal for main_decode"
    data = json.loads(plan.read_text())
    assert data["engine"] == engine
    assert data["scenario_file"]["options"]["engine"]["main_decode"] == "ideal"
    problem = pddplan.plan_problem(pddplan.read_plan(plan))
    assert problem.engine_label == engine["id"]
    again = _json("evaluate", str(H100_H200), "--plan", str(plan))
    assert again["engine"]["id"] == engine["id"]
    assert again["sla_capacity_rps"] == pytest.approx(solved["sla_capacity_rps"], rel=1e-9)
    assert run_main("export", str(plan), "--out", "launch").exit_code == 0
    md = (tmp_path / "launch" / "main-decode-cluster-b-h200-sxm.sh").read_text()
    assert "exec python3 -m sglang.launch_server" in md
    assert "# pass times planned with ideal's profile (main_decode" in md
    # a catalog that connects two releases: each pool runs its own (decode on vLLM)
    lp = launch_plan(pddplan.read_plan(plan))
    two = replace(lp, engines={**lp.engines, "main_decode": "vllm"})
    files = export_files(two, "plan")
    assert "vllm serve" in files["main-decode-cluster-b-h200-sxm.sh"]
    assert "sglang.launch_server" in files["prefill-cluster-a-h100-sxm.sh"]
    with pytest.raises(InputError, match="one DynamoGraphDeployment runs one backend"):
        export_files(two, "dynamo")
    ideal = replace(lp, engines=dict.fromkeys(lp.engines, "ideal"))
    with pytest.raises(InputError, match="no engine export launches"):
        export_files(ideal, "plan")
