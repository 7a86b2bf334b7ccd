"""pddplan: capacity planning for cross-datacenter PDD (Prefill - RelayDecode - MainDecode)
LLM serving.

The public API (``docs/api.md``): ``load_scenario`` gives a ``Problem``; ``solve``,
``evaluate``, ``simulate``, ``verify`` and ``compare`` answer questions about it;
``instance_figures``, ``fit_trace`` and ``import_hf_config`` work on the catalogs and traces;
``sample_trace`` is the path of the trace shipped with the package.
Names are imported on first use, so that ``import pddplan`` stays fast.

Packages, in the order data flows through them (each says what it may import):
``spec`` (validated inputs) -> ``io`` (files) -> ``workload`` -> ``model`` -> ``evaluation``
-> ``plan`` -> ``simulation``; ``sweeps`` plans many derived scenarios -> ``report`` -> ``cli``.

May import: ``api``, ``sweeps``, ``simulation``, ``plan``, ``evaluation``, ``calibration``,
``io``, ``horizon``, ``model``, ``workload``, ``spec``, ``data``, ``deploy``, ``atomic``, ``work``,
``errors``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # functions
    "load_scenario": "pddplan.api",
    "load_catalogs": "pddplan.api",
    "load_fleet": "pddplan.api",
    "load_acquisition": "pddplan.api",
    "scenario_schema": "pddplan.api",
    "solve": "pddplan.api",
    "solve_robust": "pddplan.api",
    "solve_horizon": "pddplan.api",
    "replay_day": "pddplan.api",
    "variant_problem": "pddplan.api",
    "horizon_inputs": "pddplan.api",
    "with_engine": "pddplan.api",
    "error_margin": "pddplan.api",
    "evaluate": "pddplan.api",
    "price_fleet": "pddplan.api",
    "ttft_cdf": "pddplan.api",
    "compare": "pddplan.api",
    "comparison_files": "pddplan.api",
    "price_sweep": "pddplan.api",
    "sweep": "pddplan.api",
    "study": "pddplan.api",
    "simulate": "pddplan.api",
    "verify": "pddplan.api",
    "instance_figures": "pddplan.api",
    "fit_trace": "pddplan.api",
    "workload_yaml": "pddplan.api",
    "fit_trace_windows": "pddplan.api",
    "variants_yaml": "pddplan.api",
    "fit_by_hour": "pddplan.api",
    "daily_profile_yaml": "pddplan.api",
    "calibrate": "pddplan.api",
    "calibration_yaml": "pddplan.api",
    "import_hf_config": "pddplan.api",
    "OBJECTIVES": "pddplan.api",
    "SOLVERS": "pddplan.api",
    "METHODS": "pddplan.api",
    "input_limit": "pddplan.io.located",
    "plan_document": "pddplan.io.plan_file",
    "read_plan": "pddplan.io.plan_file",
    "check_plan_scenario": "pddplan.io.plan_file",
    "check_scenario_file": "pddplan.io.plan_file",
    "plan_problem": "pddplan.io.plan_file",
    "read_sweep": "pddplan.sweeps.results",
    "read_plan_or_sweep": "pddplan.sweeps.results",
    "sample_trace": "pddplan.data",
    "export_plan": "pddplan.deploy.files",
    "EXPORT_TARGETS": "pddplan.deploy.files",
    "route": "pddplan.deploy.router",
    "handoff_mode": "pddplan.deploy.router",
    "router_rules": "pddplan.deploy.router",
    # types
    "Problem": "pddplan.model.problem",
    "Catalogs": "pddplan.io.catalogs",
    "Scenario": "pddplan.spec.scenario",
    "Fleet": "pddplan.spec.fleet",
    "PlanResult": "pddplan.plan.results",
    "PlanFile": "pddplan.io.plan_file",
    "RobustResult": "pddplan.plan.robust",
    "Evaluation": "pddplan.evaluation.results",
    "FleetCost": "pddplan.model.pricing",
    "Comparison": "pddplan.plan.compare",
    "Sweep": "pddplan.sweeps.prices",
    "SweepRun": "pddplan.sweeps.engine",
    "SimResult": "pddplan.simulation.run",
    "Verification": "pddplan.simulation.verify",
    "DayReplay": "pddplan.simulation.day",
    "InstancePerf": "pddplan.model.figures",
    "TraceFit": "pddplan.workload.trace",
    "WindowedFit": "pddplan.workload.trace",
    "HourlyProfile": "pddplan.workload.trace",
    "HorizonInputs": "pddplan.horizon.inputs",
    "Calibration": "pddplan.calibration.fit",
    # errors
    "PddplanError": "pddplan.errors",
    "InputError": "pddplan.errors",
    "ArgumentError": "pddplan.errors",
    "WeightsDoNotFitError": "pddplan.errors",
}
__all__ = [
    "EXPORT_TARGETS",
    "METHODS",
    "OBJECTIVES",
    "SOLVERS",
    "ArgumentError",
    "Calibration",
    "Catalogs",
    "Comparison",
    "DayReplay",
    "Evaluation",
    "Fleet",
    "FleetCost",
    "HorizonInputs",
    "HourlyProfile",
    "InputError",
    "InstancePerf",
    "PddplanError",
    "PlanFile",
    "PlanResult",
    "Problem",
    "RobustResult",
    "Scenario",
    "SimResult",
    "Sweep",
    "SweepRun",
    "TraceFit",
    "Verification",
    "WeightsDoNotFitError",
    "WindowedFit",
    "calibrate",
    "calibration_yaml",
    "check_plan_scenario",
    "check_scenario_file",
    "compare",
    "comparison_files",
    "daily_profile_yaml",
    "error_margin",
    "evaluate",
    "export_plan",
    "fit_by_hour",
    "fit_trace",
    "fit_trace_windows",
    "handoff_mode",
    "horizon_inputs",
    "import_hf_config",
    "input_limit",
    "instance_figures",
    "load_acquisition",
    "load_catalogs",
    "load_fleet",
    "load_scenario",
    "plan_document",
    "plan_problem",
    "price_fleet",
    "price_sweep",
    "read_plan",
    "read_plan_or_sweep",
    "read_sweep",
    "replay_day",
    "route",
    "router_rules",
    "sample_trace",
    "scenario_schema",
    "simulate",
    "solve",
    "solve_horizon",
    "solve_robust",
    "study",
    "sweep",
    "ttft_cdf",
    "variant_problem",
    "variants_yaml",
    "verify",
    "with_engine",
    "workload_yaml",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'pddplan' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:
    from pddplan.api import (
        METHODS,
        OBJECTIVES,
        SOLVERS,
        calibrate,
        calibration_yaml,
        compare,
        comparison_files,
        daily_profile_yaml,
        error_margin,
        evaluate,
        fit_by_hour,
        fit_trace,
        fit_trace_windows,
        horizon_inputs,
        import_hf_config,
        instance_figures,
        load_acquisition,
        load_catalogs,
        load_fleet,
        load_scenario,
        price_fleet,
        price_sweep,
        scenario_schema,
        simulate,
        solve,
        solve_robust,
        study,
        sweep,
        ttft_cdf,
        variant_problem,
        variants_yaml,
        verify,
        with_engine,
        workload_yaml,
    )
    from pddplan.calibration.fit import Calibration
    from pddplan.deploy.files import EXPORT_TARGETS, export_plan
    from pddplan.deploy.router import handoff_mode, route, router_rules
    from pddplan.errors import ArgumentError, InputError, PddplanError, WeightsDoNotFitError
    from pddplan.evaluation.results import Evaluation
    from pddplan.horizon.inputs import HorizonInputs
    from pddplan.io.catalogs import Catalogs
    from pddplan.io.located import input_limit
    from pddplan.io.plan_file import (
        PlanFile,
        check_plan_scenario,
        check_scenario_file,
        plan_document,
        plan_problem,
        read_plan,
    )
    from pddplan.model.figures import InstancePerf
    from pddplan.model.pricing import FleetCost
    from pddplan.model.problem import Problem
    from pddplan.plan.compare import Comparison
    from pddplan.plan.results import PlanResult
    from pddplan.plan.robust import RobustResult
    from pddplan.simulation.day import DayReplay
    from pddplan.simulation.run import SimResult
    from pddplan.simulation.verify import Verification
    from pddplan.spec.fleet import Fleet
    from pddplan.spec.scenario import Scenario
    from pddplan.sweeps.engine import SweepRun
    from pddplan.sweeps.prices import Sweep
    from pddplan.sweeps.results import read_plan_or_sweep, read_sweep
    from pddplan.workload.trace import HourlyProfile, TraceFit, WindowedFit
