"""What every ``pddplan`` command shares: the consoles, common options, the user-error
handler and the output helpers."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from pddplan.errors import InputError, PddplanError
from pddplan.io.fleet import load_fleet
from pddplan.io.scenario import load_scenario
from pddplan.spec.fleet import Fleet
from pddplan.spec.hardware import HardwareCatalog
from pddplan.spec.llm import ModelSpec
from pddplan.spec.scenario import Scenario

out = Console(emoji=False)
err = Console(stderr=True, emoji=False)
F = TypeVar("F", bound=Callable[..., Any])

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
OBJECTIVES = ("max-bcr", "min-cost", "max-capacity")
SOLVERS = ("cbc", "highs")
SolverOpt = Annotated[
    str | None, typer.Option(help="MILP backend: cbc (bundled) or highs (needs highspy).")
]
ScenarioArg = Annotated[Path, typer.Argument(help="Scenario YAML file.")]
FleetOpt = Annotated[
    Path | None, typer.Option(help="Fleet YAML: pools, link tiers, optional routing.")
]
PlanOpt = Annotated[Path | None, typer.Option(help="Plan JSON written by 'pddplan solve --out'.")]
KvDtypeOpt = Annotated[
    str | None,
    typer.Option("--kv-dtype", help="KV cache dtype: bf16 or fp8 (default: the model's)."),
]


def user_errors(fn: F) -> F:
    """Turn library user errors into ``Error:`` lines on stderr and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except PddplanError as e:
            problems = e.problems if isinstance(e, InputError) else [str(e)]
            for line in problems:
                err.print(
                    f"[bold red]Error:[/bold red] {escape(line)}",
                    highlight=False,
                    markup=True,
                    soft_wrap=True,
                )
            raise typer.Exit(code=e.exit_code) from None

    return wrapper  # type: ignore[return-value]


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2))


def write_file(path: Path, text: str) -> None:
    """Write an output file; a path that cannot be written is a user error."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise InputError(f"--out: cannot write {path}: {e.strerror}") from None


def emit(json_out: bool, data: Any, render: Callable[[], Any]) -> None:
    """Print ``data`` as JSON, or the rich renderable ``render()`` builds."""
    if json_out:
        print_json(data)
    else:
        out.print(render())


def check_choice(name: str, value: str | None, allowed: tuple[str, ...]) -> None:
    if value is not None and value not in allowed:
        raise InputError(f"{name}: '{value}' is not allowed; choose one of {', '.join(allowed)}")


def load_deployment(
    scenario: Path, fleet: Path | None, plan: Path | None
) -> tuple[Scenario, HardwareCatalog, dict[str, ModelSpec], Fleet]:
    """The scenario and the deployment given as exactly one of ``--fleet`` or ``--plan``."""
    if (fleet is None) == (plan is None):
        raise InputError("give the deployment as exactly one of --fleet or --plan")
    s, hw, catalog = load_scenario(scenario)
    return s, hw, catalog, load_fleet(fleet or plan, s, hw)  # type: ignore[arg-type]
