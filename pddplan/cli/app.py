"""The ``pddplan`` command line: a thin typer layer over the library.

Each command parses options, calls the library, and prints a rich report or JSON. User
errors (``PddplanError``) become one ``Error:`` line per problem on stderr and a non-zero
exit code (2 for invalid files or arguments); anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from pddplan.cli import compare as cli_compare
from pddplan.cli import simulate as cli_simulate
from pddplan.cli.common import (
    OBJECTIVES,
    SOLVERS,
    FleetOpt,
    HardwareOpt,
    JsonOpt,
    KvDtypeOpt,
    ModelsOpt,
    PlanOpt,
    ScenarioArg,
    SolverOpt,
    check_choice,
    emit,
    err,
    load_deployment,
    out,
    print_json,
    user_errors,
    write_file,
)
from pddplan.errors import InputError, WeightsDoNotFitError
from pddplan.evaluate.evaluator import evaluate as run_evaluation
from pddplan.io.catalogs import load_hardware, load_models, unknown_id
from pddplan.io.hf import add_model_entry, import_hf_config
from pddplan.io.scenario import load_scenario
from pddplan.io.workload import workload_yaml
from pddplan.model.figures import analyze_instance
from pddplan.model.instance import make_instance, smallest_fitting_gpus
from pddplan.model.pricing import fleet_cost
from pddplan.plan.brute_force import enumerate_plan
from pddplan.plan.results import PlanResult
from pddplan.plan.search import plan_kv_figures, solve_plan
from pddplan.report import tables, views
from pddplan.report.plots import plot_trace
from pddplan.spec.calibration import resolve_calibration
from pddplan.spec.scenario import Scenario, scenario_json_schema
from pddplan.workload.classes import HIT_EDGES
from pddplan.workload.trace import DEFAULT_BLOCK_TOKENS, TraceFit, fit_trace

app = typer.Typer(
    name="pddplan",
    help="Capacity planning for cross-datacenter PDD (Prefill - RelayDecode - MainDecode) LLM serving.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)
catalog_app = typer.Typer(
    help="The hardware catalog: accelerators and their sourced figures.", no_args_is_help=True
)
model_app = typer.Typer(
    help="The model catalog: architectures and their KV and weight sizes.", no_args_is_help=True
)
workload_app = typer.Typer(
    help="Workloads from request traces: hit rates, lengths and arrivals.", no_args_is_help=True
)
app.command("compare")(cli_compare.compare)
app.command("simulate")(cli_simulate.simulate)
app.add_typer(catalog_app, name="catalog")
app.add_typer(model_app, name="model")
app.add_typer(workload_app, name="workload")


# --- catalog ---------------------------------------------------------------------------------
@catalog_app.command("list")
@user_errors
def catalog_list(json_out: JsonOpt = False, hardware: HardwareOpt = None) -> None:
    """List every accelerator in the catalog.

    Example: [bold]pddplan catalog list --json[/bold]
    """
    hw = load_hardware(hardware)
    emit(
        json_out,
        [views.chip_view(c, hw) for c in hw.chips.values()],
        lambda: tables.chips_table(hw),
    )


@catalog_app.command("show")
@user_errors
def catalog_show(
    chip_id: Annotated[str, typer.Argument(metavar="ID", help="Chip id, e.g. h100-sxm.")],
    json_out: JsonOpt = False,
    hardware: HardwareOpt = None,
) -> None:
    """Show one accelerator with the source of each figure.

    Example: [bold]pddplan catalog show h200-sxm[/bold]
    """
    hw = load_hardware(hardware)
    if chip_id not in hw.chips:
        raise InputError(f"ID: {unknown_id('chip', chip_id, hw.chips)}")
    view = views.chip_view(hw.chips[chip_id], hw)
    emit(json_out, view, lambda: tables.chip_detail(view))


# --- model -----------------------------------------------------------------------------------
@model_app.command("list")
@user_errors
def model_list(
    json_out: JsonOpt = False, kv_dtype: KvDtypeOpt = None, models: ModelsOpt = None
) -> None:
    """List every model with its KV bytes per token and weight size.

    Example: [bold]pddplan model list --kv-dtype fp8[/bold]
    """
    check_choice("--kv-dtype", kv_dtype, ("bf16", "fp8"))
    found = [views.model_view(m, kv_dtype) for m in load_models(models).values()]
    emit(json_out, found, lambda: tables.models_table(found))


@model_app.command("show")
@user_errors
def model_show(
    model_id: Annotated[str, typer.Argument(metavar="ID", help="Model id, e.g. deepseek-v3.")],
    json_out: JsonOpt = False,
    kv_dtype: KvDtypeOpt = None,
    models: ModelsOpt = None,
) -> None:
    """Show one model's config and derived KV and weight figures.

    Example: [bold]pddplan model show deepseek-v4-pro --json --kv-dtype bf16[/bold]
    """
    check_choice("--kv-dtype", kv_dtype, ("bf16", "fp8"))
    catalog = load_models(models)
    if model_id not in catalog:
        raise InputError(f"ID: {unknown_id('model', model_id, catalog)}")
    view = views.model_view(catalog[model_id], kv_dtype)
    emit(json_out, view, lambda: tables.model_detail(view))


@model_app.command("import")
@user_errors
def model_import(
    config: Annotated[Path, typer.Argument(help="A Hugging Face config.json.")],
    model_id: Annotated[str, typer.Option("--id", help="Catalog id for the new entry.")],
    total_params_b: Annotated[
        float | None,
        typer.Option(
            help="Total parameters (billions) from the model card; computed from shapes if omitted."
        ),
    ] = None,
    active_params_b: Annotated[
        float | None,
        typer.Option(help="Active parameters per token (billions); computed if omitted."),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Add the entry to this model catalog (created if missing; existing entries and comments are kept).",
        ),
    ] = None,
) -> None:
    """Turn a Hugging Face config.json into a models.yaml entry.

    Example: [bold]pddplan model import config.json --id my-model --out my-models.yaml[/bold]
    """
    text = import_hf_config(
        config, model_id, total_params_b=total_params_b, active_params_b=active_params_b
    )
    if output:
        add_model_entry(output, text)
        err.print(f"added {model_id} to {output}")
    else:
        typer.echo(text, nl=False)


# --- perf ------------------------------------------------------------------------------------
@app.command()
@user_errors
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
        str | None, typer.Option(help="Weight dtype: bf16, fp8 or fp4 (default: the model's).")
    ] = None,
    scenario: Annotated[
        Path | None, typer.Option(help="Take calibration overrides and dtypes from this scenario.")
    ] = None,
    json_out: JsonOpt = False,
    hardware: HardwareOpt = None,
    models: ModelsOpt = None,
) -> None:
    """Per-instance analytic figures: prefill, decode, largest batch, KV shipped.

    Example: [bold]pddplan perf deepseek-v3 h800 --gpus 16 --input-tokens 4096 --hit-rate 0.5 --tpot-ms 50[/bold]
    """
    check_choice("--kv-dtype", kv_dtype, ("bf16", "fp8"))
    check_choice("--weight-dtype", weight_dtype, ("bf16", "fp8", "fp4"))
    cal_spec = None
    if scenario is not None:
        if hardware or models:
            raise InputError(
                "--scenario takes its catalogs from the scenario's catalogs: section; "
                "drop --hardware/--models or set them there"
            )
        s, hw, catalog = load_scenario(scenario)
        cal_spec, kv_dtype, weight_dtype = (
            s.calibration,
            kv_dtype or s.kv_dtype,
            weight_dtype or s.weight_dtype,
        )
    else:
        hw, catalog = load_hardware(hardware), load_models(models)
    if model_id not in catalog:
        raise InputError(f"MODEL: {unknown_id('model', model_id, catalog)}")
    if chip_id not in hw.chips:
        raise InputError(f"CHIP: {unknown_id('chip', chip_id, hw.chips)}")
    model, chip = catalog[model_id], hw.chips[chip_id]
    cal = resolve_calibration(hw, chip_id, cal_spec)
    if gpus is None:
        gpus = smallest_fitting_gpus(model, chip, cal, weight_dtype=weight_dtype)  # type: ignore[arg-type]
        if gpus is None:
            raise InputError(f"{model_id} does not fit any instance of up to 1024 x {chip_id}")
    inst = make_instance(model, chip, gpus, cal, kv_dtype=kv_dtype, weight_dtype=weight_dtype)  # type: ignore[arg-type]
    result = analyze_instance(
        inst,
        input_tokens=input_tokens,
        hit_rate=hit_rate,
        output_tokens=output_tokens,
        tpot_ms=tpot_ms,
        batch=batch,
        dest_hit_rate=dest_hit_rate,
    )
    emit(json_out, views.perf_view(result), lambda: tables.perf_table(result))


# --- scenarios -------------------------------------------------------------------------------
@app.command()
@user_errors
def validate(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML file.")], json_out: JsonOpt = False
) -> None:
    """Check a scenario file and the catalog ids it references; list every problem.

    Example: [bold]pddplan validate scenarios/pdd-h100-h200.yaml[/bold]
    """
    s, _, _ = load_scenario(scenario)
    emit(
        json_out,
        {"valid": True, "scenario": s.model_dump(mode="json")},
        lambda: tables.scenario_summary(s, str(scenario)),
    )


METHODS = ("milp", "enumerate")


@app.command()
@user_errors
def solve(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML file.")],
    objective: Annotated[
        str | None,
        typer.Option(
            help="max-bcr (SLA capacity per $/hour), min-cost (at the demand) or "
            "max-capacity (within budget_usd_per_hour). Default: the scenario's."
        ),
    ] = None,
    solver: SolverOpt = None,
    time_limit: Annotated[
        float | None,
        typer.Option(
            "--time-limit", min=0.1, help="Seconds for the whole solve (default: the scenario's)."
        ),
    ] = None,
    method: Annotated[
        str,
        typer.Option(
            help="milp, or enumerate: brute force scored by the evaluator (small scenarios)."
        ),
    ] = "milp",
    out_file: Annotated[
        Path | None, typer.Option("--out", help="Write the plan (JSON) here, for evaluate --plan.")
    ] = None,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="Simulate the plan; if it misses the SLA, tighten the model and re-plan.",
        ),
    ] = False,
    verify_requests: cli_simulate.VerifyRequestsOpt = 20_000,
    seed: cli_simulate.SeedOpt = 0,
    json_out: JsonOpt = False,
) -> None:
    """Plan the deployment: chips, counts, link tier and router thresholds for the objective.

    Exit code 0 with a plan (optimal, or time_limit / not_converged with its gap), 1 without
    one (infeasible, with the smallest relaxation of each limit; or time_limit_no_incumbent;
    or, with --verify, no plan the simulator confirms).

    Example: [bold]pddplan solve scenarios/pdd-h100-h200.yaml --out plan.json[/bold]
    """
    check_choice("--objective", objective, OBJECTIVES)
    check_choice("--solver", solver, SOLVERS)
    check_choice("--method", method, METHODS)
    s, hw, catalog = load_scenario(scenario)
    if method == "enumerate":
        result = enumerate_plan(s, hw, catalog, objective=objective)
    else:
        result = solve_plan(
            s, hw, catalog, objective=objective, solver=solver, time_limit_s=time_limit
        )
    checked = None
    if verify and result.fleet is not None:

        def again(planned: Scenario) -> PlanResult:
            return solve_plan(
                planned, hw, catalog, objective=objective, solver=solver, time_limit_s=time_limit
            )

        checked = cli_simulate.verify_plan(s, hw, catalog, again, result, verify_requests, seed)
        result = checked.final.plan if checked.final is not None else result
    kv = plan_kv_figures(s, hw, catalog)
    view = views.plan_view(result, **kv)
    if checked is not None:
        view["verification"] = views.verification_view(checked)
    if out_file is not None and result.fleet is not None:
        write_file(out_file, json.dumps(view, indent=2) + "\n")
    emit(
        json_out, view, lambda: cli_simulate.with_verification(tables.plan_report(result, s), view)
    )
    if out_file is not None and result.fleet is not None and not json_out:
        err.print(f"wrote {out_file}")
    if result.fleet is None or (checked is not None and not checked.confirmed):
        raise typer.Exit(code=1)


@app.command()
@user_errors
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
    json_out: JsonOpt = False,
) -> None:
    """What a deployment delivers: SLA capacity, cost, BCR, TTFT percentiles, utilizations.

    Give the deployment as --fleet (YAML) or --plan (from solve --out).

    Example: [bold]pddplan evaluate scenarios/pdd-h100-h200.yaml --fleet fleets/pdd-h100-h200-example.yaml[/bold]
    """
    s, hw, catalog, deployment = load_deployment(scenario, fleet, plan)
    if cost_only:
        cost = fleet_cost(s, hw, deployment)
        emit(
            json_out,
            views.cost_view(deployment, cost),
            lambda: tables.cost_report(deployment, cost),
        )
        return
    try:
        result = run_evaluation(s, hw, catalog, deployment, demand_rps=demand_rps)
    except WeightsDoNotFitError as e:
        raise InputError([*e.problems, "--cost-only still prices this fleet"]) from None
    emit(json_out, views.evaluation_view(result), lambda: tables.evaluation_report(result, s))


# --- workload --------------------------------------------------------------------------------
TraceArg = Annotated[Path, typer.Argument(help="Mooncake-format JSONL trace.")]
BlockOpt = Annotated[int, typer.Option("--block-size", min=1, help="Tokens per prefix block.")]
CacheOpt = Annotated[
    str,
    typer.Option("--cache-tokens", help="Prefill-side cache capacity in tokens, or 'unbounded'."),
]
MdCacheOpt = Annotated[
    str | None,
    typer.Option(
        "--md-cache-tokens",
        help="Also replay a decode-side (MD) cache of this many tokens, or 'unbounded'.",
    ),
]
BucketsOpt = Annotated[
    str, typer.Option("--buckets", help="Hit-rate bucket edges, rising from 0 to 1.")
]
SkipBadOpt = Annotated[
    bool,
    typer.Option("--skip-bad", help="Skip malformed lines and count them, instead of stopping."),
]


PLOT_SUFFIXES = (".png", ".svg", ".pdf")
DEFAULT_BUCKETS = ",".join(f"{e:g}" for e in HIT_EDGES)


def _cache_tokens(option: str, value: str | None) -> int | str | None:
    if value is None or value == "unbounded":
        return value
    try:
        tokens = int(value)
    except ValueError:
        tokens = 0
    if tokens < 1:
        raise InputError(
            f"{option}: '{value}' is not allowed; give a positive number of tokens or 'unbounded'"
        )
    return tokens


def _edges(value: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in value.split(","))
    except ValueError:
        raise InputError(
            f"--buckets: '{value}' is not a comma-separated list of numbers from 0 to 1"
        ) from None


def _fit(
    trace: Path,
    block_size: int,
    cache_tokens: str,
    md_cache_tokens: str | None,
    buckets: str,
    skip_bad: bool,
) -> TraceFit:
    return fit_trace(
        trace,
        block_tokens=block_size,
        cache_tokens=_cache_tokens("--cache-tokens", cache_tokens),  # type: ignore[arg-type]
        md_cache_tokens=_cache_tokens("--md-cache-tokens", md_cache_tokens),
        hit_edges=_edges(buckets),
        skip_bad=skip_bad,
    )


@workload_app.command("fit")
@user_errors
def workload_fit(
    trace: TraceArg,
    block_size: BlockOpt = DEFAULT_BLOCK_TOKENS,
    cache_tokens: CacheOpt = "unbounded",
    md_cache_tokens: MdCacheOpt = None,
    buckets: BucketsOpt = DEFAULT_BUCKETS,
    output: Annotated[
        Path | None, typer.Option("--out", help="Write the fitted workload block (YAML) here.")
    ] = None,
    skip_bad: SkipBadOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Replay a trace through prefix caches and fit the workload: hit-rate histogram,
    length distributions, arrival rate, and request classes a scenario can use.

    Example: [bold]pddplan workload fit trace.jsonl --cache-tokens 2000000 --out workload.yaml[/bold]
    """
    fit = _fit(trace, block_size, cache_tokens, md_cache_tokens, buckets, skip_bad)
    if output is not None:
        write_file(output, workload_yaml(fit))
        err.print(f"wrote {output}")
    emit(json_out, views.trace_fit_view(fit), lambda: tables.trace_report(fit))


@workload_app.command("show")
@user_errors
def workload_show(
    trace: TraceArg,
    block_size: BlockOpt = DEFAULT_BLOCK_TOKENS,
    cache_tokens: CacheOpt = "unbounded",
    md_cache_tokens: MdCacheOpt = None,
    buckets: BucketsOpt = DEFAULT_BUCKETS,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Also write the histogram and the hit rate over time as an image (PNG, SVG or PDF).",
        ),
    ] = None,
    skip_bad: SkipBadOpt = False,
) -> None:
    """Show a trace as tables with a terminal histogram; optionally plot it.

    Example: [bold]pddplan workload show trace.jsonl --plot hits.png[/bold]
    """
    if plot is not None and plot.suffix.lower() not in PLOT_SUFFIXES:
        raise InputError(
            f"--plot: '{plot}' has no image suffix; use one of {', '.join(PLOT_SUFFIXES)}"
        )
    fit = _fit(trace, block_size, cache_tokens, md_cache_tokens, buckets, skip_bad)
    out.print(tables.trace_report(fit))
    if plot is not None:
        try:
            plot_trace(fit, plot)
        except OSError as e:
            raise InputError(f"--plot: cannot write {plot}: {e.strerror}") from None
        err.print(f"wrote {plot}")


@app.command()
def schema() -> None:
    """Print the scenario format as JSON Schema (for editor completion and checks).

    Example: [bold]pddplan schema > scenario.schema.json[/bold]
    """
    print_json(scenario_json_schema())


def main(argv: list[str] | None = None) -> None:
    """The console entry point: ``app`` with typer's usage errors (unknown option, value out
    of range, missing argument) printed as one ``Error:`` line, exit code 2."""
    command = typer.main.get_command(app)
    try:
        code = command.main(args=argv, prog_name="pddplan", standalone_mode=False)
    except Exception as e:
        if not (hasattr(e, "format_message") and hasattr(e, "exit_code")):
            raise  # not a click usage error: a bug, keep the traceback
        if not e.format_message():  # a bare group: click has already printed its help
            raise SystemExit(e.exit_code) from None
        ctx = getattr(e, "ctx", None)
        where = f"{ctx.command_path}: " if ctx is not None else ""
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        err.print(
            f"[bold red]Error:[/bold red] {escape(where + e.format_message() + hint)}",
            highlight=False,
            soft_wrap=True,
        )
        raise SystemExit(e.exit_code) from None
    raise SystemExit(code or 0)
