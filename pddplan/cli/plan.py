"""``pddplan validate``, ``solve``, ``evaluate``, ``perf`` and ``schema``: one scenario,
one deployment, one instance."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

import pddplan
from pddplan.cli import simulate as cli_simulate
from pddplan.cli.common import (
    BudgetOpt,
    EngineOpt,
    FleetOpt,
    HardwareOpt,
    HeadroomOpt,
    JsonOpt,
    KvDtypeOpt,
    Method,
    ModelsOpt,
    NodeLimitOpt,
    Objective,
    ObjectiveOpt,
    OneEngineOpt,
    PerfQuantileOpt,
    PlanOpt,
    QuietOpt,
    RatePointsOpt,
    ScenarioArg,
    SeedOpt,
    SolverOpt,
    TimeLimitOpt,
    VariantOpt,
    WeightDtype,
    emit,
    err,
    load_deployment,
    not_an_input,
    note,
    print_json,
    progress,
    status_line,
    user_errors,
    value,
    warn_problem,
    write_file,
)

MIN_MARGIN_S = 0.5
"""The least time left of ``--time-limit`` in which ``solve`` still prices its plan at the
90th percentile of the model's error (a second plan); with less, it says it did not."""


def validate(scenario: ScenarioArg, json_out: JsonOpt = False) -> None:
    """Check a scenario file and the catalog ids it references; list every problem.

    Example: [bold]pddplan validate scenarios/pdd-h100-h200.yaml[/bold]
    """
    from pddplan.report import plan as report_plan

    problem = pddplan.load_scenario(scenario)
    warn_problem(problem)
    s = problem.scenario
    emit(
        json_out,
        lambda: {"valid": True, "scenario": s.model_dump(mode="json")},
        lambda: report_plan.scenario_summary(s, str(scenario)),
    )


def solve(
    scenario: ScenarioArg,
    objective: ObjectiveOpt = None,
    solver: SolverOpt = None,
    time_limit: TimeLimitOpt = None,
    node_limit: NodeLimitOpt = None,
    rate_points: RatePointsOpt = None,
    method: Annotated[
        Method,
        typer.Option(
            help="milp, or enumerate: brute force scored by the evaluator (small scenarios)."
        ),
    ] = Method.milp,
    headroom: HeadroomOpt = None,
    engine: EngineOpt = None,
    perf_quantile: PerfQuantileOpt = None,
    out_file: Annotated[
        Path | None, typer.Option("--out", help="Write the plan (JSON) here, for evaluate --plan.")
    ] = None,
    report_file: Annotated[
        Path | None,
        typer.Option(
            "--report",
            help="Also write the plan as a report to share (pddplan report): HTML, or "
            "Markdown for a .md name; replaced if it exists, as --out is.",
        ),
    ] = None,
    csv_file: Annotated[
        Path | None,
        typer.Option(
            "--csv",
            help="For a scenario with a horizon: also write its schedule as CSV, a period a "
            "row (months, hours, demand, family, SLA capacity, GPUs sunk/owned/reserved/rented "
            "per datacenter and chip, TTFT, $/hour); replaced if it exists. Refused without a "
            "horizon.",
        ),
    ] = None,
    plot_file: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="For a scenario with a horizon: also draw each period's capacity by how its "
            "GPUs are had against its demand, and the cost by month (.png, .svg or .pdf); "
            "replaced if it exists. Refused without a horizon.",
        ),
    ] = None,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="Simulate the plan at steady state at the demand it was planned for; unless "
            "the simulator confirms it, tighten the model and re-plan. Then simulate the "
            "confirmed plan at its SLA capacity and compare the analytic TTFT P90/P99 with "
            "the simulated (within the docs' bands or not; no verdict there).",
        ),
    ] = False,
    verify_requests: cli_simulate.VerifyRequestsOpt = None,
    verify_time_cap_s: cli_simulate.VerifyTimeCapOpt = None,
    seed: SeedOpt = 0,
    top: Annotated[
        int,
        typer.Option(
            "--top",
            min=0,
            max=20,  # pddplan.api.MAX_TOP
            help="Runner-ups to show: the cheapest plan of each other family (architecture "
            "and chip per role) at the demand, cheapest first; 0: none.",
        ),
    ] = 3,
    budget: BudgetOpt = None,
    details: Annotated[
        str | None,
        typer.Option(
            "--details",
            metavar="SECTIONS",
            help="Show more than the compact view: every section (all), or those named, "
            "comma-separated: routing, latency, breakdown, economics, marginals, bcr, "
            "solver.",
        ),
    ] = None,
    quiet: QuietOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Plan the deployment: chips, counts, link tier and router thresholds for the objective.

    Exit code 0 with a plan (optimal, or time_limit with its gap), 1 without one
    (infeasible, with the smallest relaxation of each limit; time_limit with no plan
    confirmed in time; or, with --verify, no plan the simulator confirms).

    Example: [bold]pddplan solve scenarios/pdd-h100-h200.yaml --out plan.json[/bold]
    """
    from pddplan.report import plan as report_plan
    from pddplan.report import views

    not_an_input(out_file, [scenario])
    if report_file is not None:
        _check_report(report_file, scenario, out_file)
    _check_horizon_outputs(scenario, out_file, report_file, csv_file, plot_file)
    sections = _sections(details)
    loaded = pddplan.load_scenario(scenario)
    if loaded.scenario.horizon is None:
        _no_horizon_outputs(loaded.scenario.name, csv_file, plot_file)
    problem = pddplan.with_engine(loaded, engine, perf_quantile)
    warn_problem(problem)
    if headroom is not None:
        problem = problem.derive({"headroom": headroom})

    def document(view: dict[str, Any]) -> dict[str, Any]:
        """The plan file: the view with the scenario file it was planned on."""
        solved = problem.scenario
        if budget is not None:
            solved = solved.model_copy(update={"budget_usd_per_hour": budget})
        return pddplan.plan_document(view, loaded.scenario, solved, scenario)

    if problem.scenario.horizon is not None:
        _solve_horizon(
            problem, value(objective), value(solver), time_limit, node_limit, value(method),
            budget, verify, _Outputs(out_file, report_file, csv_file, plot_file), json_out,
            document, quiet,
        )  # fmt: skip
        return
    if problem.scenario.workload_variants:
        if budget is not None:
            raise pddplan.ArgumentError(
                "budget_usd_per_hour",
                f"{{argument}}: scenario {problem.scenario.name} has workload_variants, "
                "planned for the least cost of one fleet for all of them, without a budget",
            )
        _solve_robust(
            problem, value(objective), value(solver), time_limit, node_limit, value(method),
            out_file, verify, verify_requests, verify_time_cap_s, seed, json_out, document,
            quiet, report_file,
        )  # fmt: skip
        return
    options = {
        "objective": value(objective),
        "solver": value(solver),
        "time_limit_s": time_limit,
        "node_limit": node_limit,
        "rate_points": rate_points,
    }
    began = time.perf_counter()
    with progress("solve", "rates priced", quiet=quiet) as tell:
        result = pddplan.solve(
            problem,
            method=value(method),
            progress=tell,
            top=top,
            budget_usd_per_hour=budget,
            # one step more or less of each pool, priced only where it is shown: the
            # compact view leaves it out; --details marginals, the JSON, plan file and
            # report have it
            marginals="marginals" in sections or json_out or bool(out_file or report_file),
            **options,
        )
    checked = None
    if verify and result.fleet is not None:
        checked = cli_simulate.verify_plan(
            problem, result, verify_requests, verify_time_cap_s, seed, quiet, **options
        )
        result = checked.final.plan if checked.final is not None else result
    view = views.plan_view(result)
    margin = None
    # the margin's plan gets what is left of the time limit: the whole solve ends within it
    limit = time_limit if time_limit is not None else problem.scenario.solver.time_limit_s
    left = limit - (time.perf_counter() - began)
    if result.fleet is not None and left < MIN_MARGIN_S:
        err.print(
            f"not priced at the 90th percentile of the model's error: the time limit "
            f"({limit:g} s) was spent on the plan",
            style="dim",
            highlight=False,
            soft_wrap=True,
        )
    elif result.fleet is not None:
        with status_line("solve", quiet=quiet) as show:
            show("pricing the plan at the 90th percentile of the model's error ...")
            margin = pddplan.error_margin(problem, result, solver=value(solver), time_limit_s=left)
    view["error_margin"] = dataclasses.asdict(margin) if margin is not None else None
    if checked is not None:
        view["verification"] = views.verification_view(checked)
    view = document(view)
    # the problem as planned: with the budget given, which its headline names
    planned = problem.derive({"budget_usd_per_hour": budget}) if budget is not None else problem
    if out_file is not None and result.fleet is not None:
        write_file(out_file, json.dumps(view, indent=2) + "\n")
    if report_file is not None and result.fleet is not None:
        _write_report(report_file, view, planned, result.fleet, quiet)
    emit(
        json_out,
        lambda: view,
        lambda: cli_simulate.with_verification(
            report_plan.plan_report(result, planned.scenario, margin, sections), view
        ),
    )
    if out_file is not None and result.fleet is not None and not json_out:
        note(f"wrote {out_file}")
    if report_file is not None:
        note(f"wrote {report_file}" if result.fleet is not None else
             f"no report written to {report_file}: there is no plan")  # fmt: skip
    if checked is not None and checked.stopped:
        raise typer.Exit(code=cli_simulate.TIME_LIMIT_EXIT)
    if result.fleet is None or (checked is not None and not checked.confirmed):
        raise typer.Exit(code=1)


def _check_report(report_file: Path, scenario: Path, out_file: Path | None) -> None:
    """Before any planning: ``--report`` is neither the scenario nor ``--out``, and its
    folder takes files (it replaces a file that exists, as ``--out`` does)."""
    from pddplan.cli import report

    if out_file is not None and report_file.absolute() == out_file.absolute():
        raise pddplan.InputError(f"--report {report_file}: the same file as --out; give another")
    fmt = report.report_format(report_file, None)
    report.check_out(report_file, [scenario, out_file], fmt, force=True, option="--report")


def _check_horizon_outputs(
    scenario: Path,
    out_file: Path | None,
    report_file: Path | None,
    csv_file: Path | None,
    plot_file: Path | None,
) -> None:
    """Before any planning: ``--csv`` and ``--plot`` each name a file apart from the
    scenario and the other outputs, in a folder that takes files (they replace a file that
    exists, as ``--out`` does); ``--plot`` an image suffix."""
    from pddplan.cli import report
    from pddplan.cli.common import PLOT_SUFFIXES

    others = {"--out": out_file, "--report": report_file}
    for option, path in (("--csv", csv_file), ("--plot", plot_file)):
        if path is None:
            continue
        if option == "--plot" and path.suffix.lower() not in PLOT_SUFFIXES:
            raise pddplan.InputError(
                f"--plot {path}: no image suffix; give a file ending in {', '.join(PLOT_SUFFIXES)}"
            )
        for name, other in others.items():
            if other is not None and path.absolute() == other.absolute():
                raise pddplan.InputError(f"{option} {path}: the same file as {name}; give another")
        example = "schedule.csv" if option == "--csv" else "schedule.png"
        report.check_out(path, [scenario, *others.values()], option.lstrip("-"), force=True,
                         option=option, example=example)  # fmt: skip
        others[option] = path


def _no_horizon_outputs(name: str, csv_file: Path | None, plot_file: Path | None) -> None:
    """Refuse ``--csv`` and ``--plot`` for a scenario without a horizon, before planning:
    they write a plan over time's schedule and its figure."""
    if csv_file is not None:
        raise pddplan.InputError(
            f"--csv {csv_file}: scenario {name} has no horizon: section; --csv writes a plan "
            "over time's schedule, a period a row (a plan for one rate: --out writes it as "
            "JSON, pddplan compare --format csv compares architectures)"
        )
    if plot_file is not None:
        raise pddplan.InputError(
            f"--plot {plot_file}: scenario {name} has no horizon: section; --plot draws a plan "
            "over time's capacity and cost (a plan for one rate: --report draws its figures)"
        )


@dataclasses.dataclass(frozen=True)
class _Outputs:
    """The files ``solve`` of a horizon writes besides the terminal: ``--out``, ``--report``,
    ``--csv``, ``--plot``."""

    out: Path | None = None
    report: Path | None = None
    csv: Path | None = None
    plot: Path | None = None


def _write_horizon_outputs(
    files: _Outputs, view: dict[str, Any], scenario: pddplan.Scenario, quiet: bool
) -> None:
    """A plan over time's files: the plan file, its CSV schedule, its figure, its report
    (as ``pddplan report`` writes it from the plan file)."""
    from pddplan.report import documents

    if files.out is not None:
        write_file(files.out, json.dumps(view, indent=2) + "\n")
    if files.csv is not None:
        write_file(files.csv, documents.horizon_csv(view), option="--csv")
    if files.plot is not None or files.report is not None:
        with status_line("solve", quiet=quiet) as show:
            show("drawing the schedule ...")
            if files.plot is not None:
                from pddplan.report import page, plots

                try:
                    plots.write_figure(page.horizon_chart(view), files.plot)
                except OSError as e:
                    raise pddplan.InputError(
                        f"--plot: cannot write {files.plot}: {e.strerror}"
                    ) from None
            if files.report is not None:
                from pddplan.cli import report

                fmt = report.report_format(files.report, None)
                report.write_page(report.horizon_page(view, scenario), files.report, fmt)


def _write_report(
    report_file: Path,
    view: dict[str, Any],
    problem: pddplan.Problem,
    fleet: pddplan.Fleet,
    quiet: bool,
) -> None:
    """The plan file's content (``view``) as ``pddplan report`` writes it."""
    from pddplan.cli import report

    with status_line("solve", quiet=quiet) as show:
        show("writing the report ...")
        page = report.plan_page(view, problem, fleet)
        report.write_page(page, report_file, report.report_format(report_file, None))


def _sections(details: str | None) -> tuple[str, ...]:
    """``--details``' sections (none: the compact view alone), or exit 2 naming an unknown
    one."""
    from pddplan.report import plan as report_plan

    if details is None:
        return ()
    try:
        return report_plan.detail_sections(details)
    except ValueError as e:
        raise pddplan.ArgumentError("details", f"{{argument}}: {e}") from None


def evaluate(
    scenario: ScenarioArg,
    fleet: FleetOpt = None,
    plan: PlanOpt = None,
    demand_rps: Annotated[
        float | None,
        typer.Option(
            min=0.0, help="Evaluate at this demand instead of the scenario's arrival rate."
        ),
    ] = None,
    cost_only: Annotated[
        bool,
        typer.Option(
            "--cost-only",
            help="Only price the deployment (GPUs, owned inventory, links), without "
            "evaluating its performance: works even where a pool cannot hold the weights.",
        ),
    ] = False,
    variant: VariantOpt = None,
    engine: EngineOpt = None,
    perf_quantile: PerfQuantileOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """What a deployment delivers: SLA capacity, cost, BCR, TTFT percentiles, utilizations.

    Give the deployment as --fleet (YAML) or --plan (from solve --out).

    Example: [bold]pddplan evaluate scenarios/pdd-h100-h200.yaml --fleet fleets/pdd-h100-h200-example.yaml[/bold]
    """
    from pddplan.report import plan as report_plan
    from pddplan.report import views

    problem, deployment = load_deployment(scenario, fleet, plan, variant, engine, perf_quantile)
    if cost_only:
        cost = pddplan.price_fleet(problem, deployment)
        emit(
            json_out,
            lambda: views.cost_view(deployment, cost),
            lambda: report_plan.cost_report(deployment, cost),
        )
        return
    try:
        result = pddplan.evaluate(problem, deployment, demand_rps=demand_rps)
    except pddplan.WeightsDoNotFitError as e:
        raise pddplan.InputError([*e.problems, "--cost-only still prices this fleet"]) from None
    emit(
        json_out,
        lambda: views.evaluation_view(result),
        lambda: report_plan.evaluation_report(result, problem.scenario),
    )


def perf(
    model_id: Annotated[str, typer.Argument(metavar="MODEL", help="Model id.")],
    chip_id: Annotated[str, typer.Argument(metavar="CHIP", help="Chip id.")],
    gpus: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="GPUs per instance (default: the smallest power of two that holds the weights).",
        ),
    ] = None,
    input_tokens: Annotated[int, typer.Option(min=1, help="Input (prompt) tokens.")] = 8192,
    hit_rate: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Prefix-cache hit rate of the input at prefill.")
    ] = 0.0,
    output_tokens: Annotated[int, typer.Option(min=1, help="Output tokens.")] = 512,
    tpot_ms: Annotated[
        float | None, typer.Option(min=0.001, help="TPOT bound (ms) for the largest batch.")
    ] = None,
    batch: Annotated[
        int | None, typer.Option(min=1, help="Decode at this batch instead of the largest.")
    ] = None,
    dest_hit_rate: Annotated[
        float,
        typer.Option(
            min=0.0, max=1.0, help="Share of the context the KV destination already holds."
        ),
    ] = 0.0,
    kv_dtype: KvDtypeOpt = None,
    weight_dtype: Annotated[
        WeightDtype | None, typer.Option(help="Weight dtype (default: the model's).")
    ] = None,
    context_parallel: Annotated[
        bool,
        typer.Option(
            "--context-parallel",
            help="Split each prompt's attention over the instance's attention groups.",
        ),
    ] = False,
    scenario: Annotated[
        Path | None,
        typer.Option(help="Take the engine, calibration overrides and dtypes from this scenario."),
    ] = None,
    engine: OneEngineOpt = None,
    json_out: JsonOpt = False,
    hardware: HardwareOpt = None,
    models: ModelsOpt = None,
) -> None:
    """Per-instance analytic figures: prefill, decode, largest batch, KV shipped.

    Example: [bold]pddplan perf deepseek-v3 h800 --gpus 16 --input-tokens 4096 --hit-rate 0.5 --tpot-ms 50[/bold]
    """
    from pddplan.report import catalog as report_catalog
    from pddplan.report import views

    problem, catalogs = None, None
    if scenario is not None:
        if hardware or models:
            raise pddplan.InputError(
                "--scenario takes its catalogs from the scenario's catalogs: section; "
                "drop --hardware/--models or set them there"
            )
        problem = pddplan.load_scenario(scenario)
        if engine is None:  # --engine names the engine: the rule does not apply
            warn_problem(problem)
    else:
        catalogs = pddplan.load_catalogs(hardware, models)
    result = pddplan.instance_figures(
        model_id,
        chip_id,
        catalogs=catalogs,
        problem=problem,
        gpus=gpus,
        input_tokens=input_tokens,
        hit_rate=hit_rate,
        output_tokens=output_tokens,
        tpot_ms=tpot_ms,
        batch=batch,
        dest_hit_rate=dest_hit_rate,
        kv_dtype=value(kv_dtype),
        weight_dtype=value(weight_dtype),
        context_parallel=context_parallel,
        engine=engine,
    )
    emit(json_out, lambda: views.perf_view(result), lambda: report_catalog.perf_table(result))


def schema() -> None:
    """Print the scenario format as JSON Schema (for editor completion and checks).

    Example: [bold]pddplan schema > scenario.schema.json[/bold]
    """
    print_json(pddplan.scenario_schema())


COMMANDS = {
    "validate": user_errors(validate),
    "solve": user_errors(solve, names=cli_simulate.VERIFY_FLAGS),
    "evaluate": user_errors(evaluate),
    "perf": user_errors(perf),
    "schema": schema,
}


def _solve_horizon(
    problem: pddplan.Problem,
    objective: str | None,
    solver: str | None,
    time_limit: float | None,
    node_limit: int | None,
    method: str,
    budget: float | None,
    verify: bool,
    files: _Outputs,
    json_out: bool,
    document: Callable[[dict[str, Any]], dict[str, Any]],
    quiet: bool,
) -> None:
    """``solve`` of a scenario with a horizon: what to own, reserve and rent, period by
    period, at least total cost (``pddplan.solve_horizon``); its plan file, CSV schedule,
    figure and report where asked for."""
    from pddplan.report import horizon as report_horizon
    from pddplan.report import views

    s = problem.scenario
    refused = [
        (
            "--objective",
            (objective or s.objective) != Objective.min_cost,
            "planned at min-cost only",
        ),
        ("--method", method != "milp", "planned by the MILP only (milp)"),
        ("--budget", budget is not None, "planned at the least total cost, with no budget"),
        (
            "--verify",
            verify,
            "checked by `pddplan simulate` on the scenario and the plan file, which replays a "
            "day of it",
        ),
    ]
    for flag, bad, how in refused:
        if bad:
            raise pddplan.InputError(f"{flag}: scenario {s.name} has a horizon: {how}")
    with status_line("solve", quiet=quiet) as show:
        show("planning each period's deployments and the schedule over the horizon ...")
        result = pddplan.solve_horizon(
            problem,
            solver=solver,
            time_limit_s=time_limit,
            node_limit=node_limit,
        )
    view = views.horizon_view(result)
    view["solver"]["solver"] = solver or s.solver.name
    view = document(view)
    planned = result.total_usd is not None
    if planned:
        _write_horizon_outputs(files, view, problem.scenario, quiet)
    emit(json_out, lambda: view, lambda: report_horizon.horizon_report(result))
    if files.out is not None and planned and not json_out:
        note(f"wrote {files.out}")
    for path in (files.csv, files.plot, files.report):
        if path is not None:
            note(f"wrote {path}" if planned else f"nothing written to {path}: there is no plan")
    if not planned:
        raise typer.Exit(code=1)


def _solve_robust(
    problem: pddplan.Problem,
    objective: str | None,
    solver: str | None,
    time_limit: float | None,
    node_limit: int | None,
    method: str,
    out_file: Path | None,
    verify: bool,
    verify_requests: int | None,
    verify_time_cap_s: float | None,
    seed: int,
    json_out: bool,
    document: Callable[[dict[str, Any]], dict[str, Any]],
    quiet: bool = False,
    report_file: Path | None = None,
) -> None:
    """``solve`` of a scenario with workload variants: one fleet for all of them; with
    ``--verify``, each must-meet variant simulated at its planned rate. ``document``: the
    view as a plan file (``pddplan.plan_document``)."""
    from pddplan.report import plan as report_plan
    from pddplan.report import simulation, views

    s = problem.scenario
    chosen = objective or s.objective
    if chosen != Objective.min_cost:
        raise pddplan.ArgumentError(
            "objective",
            f"{{argument}}: scenario {s.name} has workload_variants, planned for min-cost "
            f"only (one fleet for every variant), not {chosen}: give --objective min-cost",
        )
    if method != "milp":
        raise pddplan.ArgumentError(
            "method", "{argument}: workload_variants are planned by the MILP only (milp)"
        )
    with progress("solve (every variant)", "steps", quiet=quiet) as tell:
        result = pddplan.solve_robust(
            problem,
            solver=solver,  # type: ignore[arg-type]
            time_limit_s=time_limit,
            node_limit=node_limit,
            progress=tell,
        )
    view = views.robust_view(result)
    checks = []
    if verify and result.variants:
        for v in result.variants:
            if not v.must_meet:
                continue
            if not quiet:
                err.print(f"simulating variant {v.name} at {v.rate_rps:g} req/s", style="dim")
            sim = pddplan.simulate(
                pddplan.variant_problem(problem, v.name),
                v.fleet,
                rate_rps=v.rate_rps,
                requests=verify_requests,
                time_cap_s=verify_time_cap_s,
                seed=seed,
            )
            checks.append((v.name, sim))
        view["verification"] = {name: views.simulation_view(sim) for name, sim in checks}
    view = document(view)
    if out_file is not None and result.variants:
        write_file(out_file, json.dumps(view, indent=2) + "\n")
    if report_file is not None and result.variants:
        from pddplan.cli import report as cli_report
        from pddplan.report.page import robust_page

        page = robust_page(view, problem.scenario, version=pddplan.__version__)
        cli_report.write_page(page, report_file, cli_report.report_format(report_file, None))
        note(f"wrote {report_file}")

    def report() -> object:
        from rich.console import Group

        parts = [report_plan.robust_report(result, s)]
        parts += [simulation.simulation_report(views.simulation_view(sim)) for _, sim in checks]
        return Group(*parts)

    emit(json_out, lambda: view, report)
    if out_file is not None and result.variants and not json_out:
        note(f"wrote {out_file}")
    if any(sim.stopped for _, sim in checks):
        raise typer.Exit(code=cli_simulate.TIME_LIMIT_EXIT)
    confirmed = all(sim.verdict == "confirmed" for _, sim in checks)
    if not result.variants or not result.confirmed or not confirmed:
        raise typer.Exit(code=1)
