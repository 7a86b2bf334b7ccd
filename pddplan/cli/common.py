"""What every ``pddplan`` command shares: the consoles, the options several commands take,
their choices, the user-error handler and the output helpers."""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import Callable, Iterator
from enum import Enum, StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar, cast

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand

import pddplan
from pddplan.atomic import atomic_write_text

out = Console(emoji=False)
err = Console(stderr=True, emoji=False)
F = TypeVar("F", bound=Callable[..., Any])


# --- commands ---------------------------------------------------------------------------------
class Command(TyperCommand):
    """A typer command whose help reads as a command line does: a required argument is
    ``SCENARIO`` in the usage line (typer writes ``{SCENARIO}``), and a flag (``--json``,
    ``--help``) shows no ``<bool>`` value it does not take."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = super().collect_usage_pieces(ctx)
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in pieces]

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        for p in params:
            if getattr(p, "is_flag", False) and not getattr(p, "secondary_opts", None):
                p.metavar = ""
        return params


# --- choices (each the spec's list, pddplan.spec.choices: tests/test_choices.py) --------------
class Objective(StrEnum):
    max_bcr = "max-bcr"
    min_cost = "min-cost"
    max_capacity = "max-capacity"


class At(StrEnum):
    demand = "demand"
    budget = "budget"
    both = "both"


class Solver(StrEnum):
    cbc = "cbc"
    highs = "highs"


class Method(StrEnum):
    milp = "milp"
    enumerate = "enumerate"


class KvDtype(StrEnum):
    bf16 = "bf16"
    fp8 = "fp8"


class WeightDtype(StrEnum):
    bf16 = "bf16"
    fp8 = "fp8"
    fp4 = "fp4"


class Format(StrEnum):
    table = "table"
    json = "json"
    md = "md"
    csv = "csv"


PLOT_SUFFIXES = (".png", ".svg", ".pdf")
"""The image formats a ``--plot`` file may have (matplotlib writes them without a display)."""


def value(choice: Enum | None) -> Any:
    """The library's value for a choice (None stays None)."""
    return None if choice is None else choice.value


# --- options ----------------------------------------------------------------------------------
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")
]
HardwareOpt = Annotated[
    Path | None,
    typer.Option("--hardware", help="Hardware catalog to use instead of the shipped one."),
]
ModelsOpt = Annotated[
    Path | None, typer.Option("--models", help="Model catalog to use instead of the shipped one.")
]
SolverOpt = Annotated[
    Solver | None, typer.Option(help="MILP backend: cbc (bundled) or highs (needs highspy).")
]
ObjectiveOpt = Annotated[
    Objective | None,
    typer.Option(
        help="max-bcr (SLA capacity per $/hour), min-cost (at the demand) or max-capacity "
        "(within budget_usd_per_hour). Default: the scenario's."
    ),
]
ScenarioArg = Annotated[Path, typer.Argument(metavar="SCENARIO", help="Scenario YAML file.")]
FleetOpt = Annotated[
    Path | None, typer.Option(help="Fleet YAML: pools, link tiers, optional routing.")
]
PlanOpt = Annotated[Path | None, typer.Option(help="Plan JSON written by 'pddplan solve --out'.")]
VariantOpt = Annotated[
    str | None,
    typer.Option(
        "--variant",
        help="A workload variant of the scenario: its workload, and a robust plan's routing "
        "for it.",
    ),
]
KvDtypeOpt = Annotated[
    KvDtype | None,
    typer.Option("--kv-dtype", help="KV cache dtype (default: the model's)."),
]
SeedOpt = Annotated[int, typer.Option("--seed", help="Random seed: same seed, same output.")]


TimeLimitOpt = Annotated[
    float | None,
    typer.Option(
        "--time-limit",
        min=0.1,
        max=604_800.0,  # spec.limits.MAX_TIME_LIMIT_S (tests/test_cli.py holds them equal)
        help="Wall-clock safety stop, in seconds, for each search (a solve; compare's row; a "
        "sweep's point). Default: the scenario's solver.time_limit_s, 600. The work budgets "
        "decide where a search stops; one this stops says 'stopped at the time limit', and "
        "its answer may differ on a faster machine.",
    ),
]
BudgetOpt = Annotated[
    float | None,
    typer.Option(
        "--budget",
        help="The most the plan may cost, in $/hour (a month is 730 hours): what "
        "max-capacity spends and a ceiling for the other objectives; compare: the budget of "
        "its equal-budget question. Default: the scenario's budget_usd_per_hour.",
    ),
]
NodeLimitOpt = Annotated[
    int | None,
    typer.Option(
        "--node-limit",
        help="Branch-and-bound nodes each MILP solve may take (default: the scenario's "
        "solver.node_limit, 100,000). Counted work: a search that reaches it stops as "
        "work_limit with its best plan and gap, the same on any machine.",
    ),
]
RatePointsOpt = Annotated[
    int | None,
    typer.Option(
        "--rate-points",
        help="Rates a search may price, minimum-cost points and relaxation probes (default: "
        "the scenario's solver.rate_points, 400). Counted work, as --node-limit.",
    ),
]
HeadroomOpt = Annotated[
    float | None,
    typer.Option(
        "--headroom",
        min=0.0,
        help="Demand growth to plan for: serve the demand x (1 + HEADROOM) "
        "(default: the scenario's headroom).",
    ),
]

EngineOpt = Annotated[
    str | None,
    typer.Option(
        "--engine",
        help="The serving engine whose pass times to assume: an engine profile "
        "(sglang, vllm, trtllm, or ideal: the hardware catalog's best case) for every role, "
        "or per role as ROLE=NAME,... (roles prefill, relay_decode, main_decode, and "
        "default for the roles not named; a role named nowhere keeps the scenario's); "
        "default: the scenario's engine, else the catalog's default, sglang. "
        "docs/catalogs.md#engine-profiles.",
    ),
]
OneEngineOpt = Annotated[
    str | None,
    typer.Option(
        "--engine",
        help="The serving engine whose pass times to assume: one engine profile (sglang, "
        "vllm, trtllm, or ideal: the hardware catalog's best case); default: the scenario's "
        "engine where its roles run one, else the catalog's default, sglang. "
        "docs/catalogs.md#engine-profiles.",
    ),
]
PerfQuantileOpt = Annotated[
    float | None,
    typer.Option(
        "--perf-quantile",
        help="Plan at this quantile of the model's held-out error: pass and step times "
        "multiplied by the engine profile's measured/predicted ratio there over its median "
        "(default: the scenario's perf_quantile, 0.5: the fit itself; 0.9: a margin that "
        "9 in 10 public runs stay within).",
    ),
]

FLAGS = {
    "total_params_b": "--total-params-b",
    "active_params_b": "--active-params-b",
    "rate_rps": "--rate-rps",
    "variant": "--variant",
    "requests": "--requests",
    "max_requests": "--max-requests",
    "precision": "--precision",
    "context_parallel": "--context-parallel",
    "max_wall_s": "--time-cap-s",
    "batch": "--batch",
    "gpus": "--gpus",
    "skip_bad": "--skip-bad",
    "hit_edges": "--buckets",
    "method": "--method",
    "catalog": "--out",
    "model_id": "--id",
    "model": "MODEL",
    "chip": "CHIP",
    "problem": "--scenario",
    "objective": "--objective",
    "solver": "--solver",
    "vary": "--vary",
    "architectures": "--architectures",
    "engine": "--runner",
    "serving_engine": "--engine",
    "perf_quantile": "--perf-quantile",
    "name": "--study",
    "node_limit": "--node-limit",
    "rate_points": "--rate-points",
    "top": "--top",
    "budget_usd_per_hour": "--budget",
    "details": "--details",
    "hour_s": "--hour-seconds",
    "tranche": "--tranche",
}
"""How the command line spells the library's arguments, for its error messages."""


# --- errors and output ----------------------------------------------------------------------
def user_errors(fn: F | None = None, *, names: dict[str, str] | None = None) -> Any:
    """Turn library user errors into ``Error:`` lines on stderr and an exit code; an
    argument the library names is spelled as the command's flag (``FLAGS``, then
    ``names``)."""
    spelled = FLAGS | (names or {})

    def decorate(f: F) -> F:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return f(*args, **kwargs)
            except pddplan.PddplanError as e:
                if isinstance(e, pddplan.ArgumentError) and e.argument in spelled:
                    problems = e.render(spelled[e.argument])
                elif isinstance(e, pddplan.InputError):
                    problems = e.problems
                else:
                    problems = [str(e)]
                for line in problems:
                    err.print(
                        f"[bold red]Error:[/bold red] {escape(line)}",
                        highlight=False,
                        markup=True,
                        soft_wrap=True,
                    )
                raise typer.Exit(code=e.exit_code) from None

        return cast(F, wrapper)  # functools.wraps keeps the signature typer reads

    return decorate(fn) if fn is not None else decorate


def note(line: str) -> None:
    """One line on stderr that names a file or folder (``wrote PATH``): never wrapped, so a
    long path stays whole and can be copied."""
    err.print(line, highlight=False, markup=False, soft_wrap=True)


def warn(line: str) -> None:
    """One ``Warning:`` line on stderr: the input was taken, with a change the user should
    know of (points merged, say)."""
    err.print(
        f"[bold yellow]Warning:[/bold yellow] {escape(line)}",
        highlight=False,
        markup=True,
        soft_wrap=True,
    )


QuietOpt = Annotated[
    bool,
    typer.Option(
        "--quiet",
        "-q",
        help="No progress on stderr (on a terminal, a bar once the work has taken 2 s; "
        "piped, a line every 10 s).",
    ),
]


@contextlib.contextmanager
def progress(what: str, unit: str = "", *, quiet: bool = False) -> Iterator[Any]:
    """A progress callback for a long call of the library (``pddplan.progress``: done,
    total, label), drawn on stderr (``pddplan.report.progress``): a bar on a terminal, a
    plain line every 10 s otherwise, nothing with ``quiet``."""
    from pddplan.report.progress import ProgressView

    with ProgressView(err, what, unit, quiet=quiet) as view:
        yield view


@contextlib.contextmanager
def status_line(what: str = "", *, quiet: bool = False) -> Iterator[Callable[[str], None]]:
    """``progress`` for work that reports only what it is doing: each call's text is the
    label (the stage), with the time elapsed."""
    with progress(what, quiet=quiet) as view:

        def show(text: str) -> None:
            view(0, None, text)

        yield show


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2))


def write_file(path: Path, text: str, option: str = "--out") -> None:
    """Write an output file atomically (``pddplan.atomic``); a path that cannot be written
    is a user error, and the old file stays as it was."""
    try:
        atomic_write_text(path, text)
    except OSError as e:
        raise pddplan.InputError(f"{option}: cannot write {path}: {e.strerror}") from None


def not_an_input(out: Path | None, inputs: list[Path | None], option: str = "--out") -> None:
    """Refuse, before any work, an output that is one of the command's input files (the
    same file, through any link or path): writing it would replace what was read."""
    if out is None:
        return
    for given in inputs:
        if given is None:
            continue
        try:
            same = os.path.samefile(out, given)
        except OSError:  # one of them does not exist (yet): not the same file
            continue
        if same:
            raise pddplan.InputError(
                f"{option}: {out} is an input of this command ({given}); writing it would "
                "replace what was read: give another file"
            )


def writable_folder(path: Path, option: str) -> None:
    """Check, before any work, that ``path`` is a folder files can be written into
    (creating it if it does not exist); else a user error naming ``option``."""
    if path.exists() and not path.is_dir():
        raise pddplan.InputError(f"{option}: {path} is a file; give a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise pddplan.InputError(
            f"{option}: cannot write into folder {path}: {e.strerror}"
        ) from None
    folder_takes_files(path, option)


def cache_folder() -> Path:
    """The user's cache folder for pddplan (a sweep's journal without --out):
    ``$XDG_CACHE_HOME/pddplan``, else ``~/.cache/pddplan`` (a relative XDG_CACHE_HOME is
    ignored, as the XDG base directory specification says)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    return root / "pddplan"


def folder_takes_files(folder: Path, where: str) -> None:
    """Check, before any work, that a file can be made in ``folder`` (a temporary one,
    removed at once); else a user error that starts with ``where``."""
    import tempfile

    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise pddplan.InputError(
            f"{where}: cannot write into the folder {folder}: {e.strerror}"
        ) from None


def emit(json_out: bool, data: Callable[[], Any], render: Callable[[], Any]) -> None:
    """Print ``data()`` as JSON, or the rich renderable ``render()`` builds."""
    if json_out:
        print_json(data())
    else:
        out.print(render())


def load_problem(
    scenario: Path, engine: str | None = None, perf_quantile: float | None = None
) -> pddplan.Problem:
    """The scenario's problem with ``--engine`` and ``--perf-quantile`` applied; its
    warnings printed (``warn_problem``)."""
    problem = pddplan.with_engine(pddplan.load_scenario(scenario), engine, perf_quantile)
    warn_problem(problem)
    return problem


def warn_problem(problem: pddplan.Problem) -> None:
    """The problem's warnings (``Problem.warnings``), one ``Warning:`` line each."""
    for line in problem.warnings():
        warn(line)


def planned_for(plan: Path | None) -> tuple[str | None, str | None, float | None]:
    """The model, engine and error quantile a plan file (``solve --out``) was made with, so
    that a later command on it assumes the same pass times, read once; None for each that a
    fleet file, a pipe (read once, by the loader) or a file the loader will refuse (it
    reports the problem) does not give."""
    if plan is None:
        return None, None, None
    try:
        if not plan.is_file() or plan.stat().st_size > 64 * 2**20:
            return None, None, None
        data = json.loads(plan.read_text())
    except (OSError, ValueError):
        return None, None, None
    if not isinstance(data, dict):
        return None, None, None
    model = data.get("model")
    engine = data.get("engine")
    if not isinstance(engine, dict):
        engine = {}
    name, q = engine.get("id"), engine.get("perf_quantile")
    return (
        model if isinstance(model, str) else None,
        name if isinstance(name, str) else None,
        float(q) if isinstance(q, int | float) and not isinstance(q, bool) else None,
    )


def load_deployment(
    scenario: Path,
    fleet: Path | None,
    plan: Path | None,
    variant: str | None = None,
    engine: str | None = None,
    perf_quantile: float | None = None,
) -> tuple[pddplan.Problem, pddplan.Fleet]:
    """The problem and the deployment given as exactly one of ``--fleet`` or ``--plan``;
    with ``variant``, that workload variant's problem and the robust plan's routing for
    it. The engine and error quantile are ``--engine`` and ``--perf-quantile``, else the
    plan's, else the scenario's."""
    path = fleet if fleet is not None else plan
    if path is None or (fleet is not None and plan is not None):
        raise pddplan.InputError("give the deployment as exactly one of --fleet or --plan")
    planned_model, planned_engine, planned_q = planned_for(plan)
    loaded = pddplan.load_scenario(scenario)
    if planned_model not in (None, loaded.scenario.model):
        # a plan for another model: the fleet loader says so at the plan's line, not the
        # plan's engine that the scenario's chips may not have a profile for
        planned_engine, planned_q = None, None
    problem = pddplan.with_engine(
        loaded,
        engine if engine is not None else planned_engine,
        perf_quantile if perf_quantile is not None else planned_q,
    )
    warn_problem(problem)
    if variant is not None:
        problem = pddplan.variant_problem(problem, variant)
    deployment = pddplan.load_fleet(path, problem, variant=variant)  # every problem located
    if plan is not None and plan.is_file():  # a pipe is read once, by the fleet loader
        different = pddplan.check_plan_scenario(pddplan.read_plan(plan), loaded.scenario, scenario)
        if different is not None:
            warn(f"{different}: the plan's deployment is evaluated against {scenario}")
    return problem, deployment
