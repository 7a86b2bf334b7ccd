"""The ``pddplan`` command line: a thin typer layer over the library's API (``pddplan``)
and its report layer (``pddplan.report``).

Each command parses options, calls the API, and prints a rich report or JSON. User errors
(``PddplanError``) become one ``Error:`` line per problem on stderr and a non-zero exit code
(2 for invalid files or arguments); anything else is a bug and keeps its traceback. The
library and the reports are imported inside each command, so ``--help`` is quick. SIGINT
and SIGTERM stop any command alike (``pddplan.cli.signals``): one line, exit 130 or 143.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import Annotated

import typer
from rich.markup import escape

import pddplan
from pddplan.cli import calibrate, compare, plan, report, signals, simulate, sweep
from pddplan.cli import export as export_cmd
from pddplan.cli.catalog import catalog_app, model_app
from pddplan.cli.common import Command, err, user_errors
from pddplan.cli.workload import workload_app
from pddplan.threads import limit_process

STDOUT_FULL = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})
"""Errors of a write to a full medium: the output could not be written, one line, exit 2."""

app = typer.Typer(
    name="pddplan",
    help="Capacity planning for cross-datacenter PDD (Prefill - RelayDecode - MainDecode) LLM serving.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)


@app.callback()
@user_errors(names={"max_input_mb": "--max-input-mb"})
def _options(
    ctx: typer.Context,
    max_input_mb: Annotated[
        float | None,
        typer.Option(
            "--max-input-mb",
            envvar="PDDPLAN_MAX_INPUT_MB",
            help="Largest scenario, fleet, plan, catalog, HF config or measurement file read, "
            "in MB, from 0.001 to 1024 (default 4; traces are read by line and exempt).",
        ),
    ] = None,
) -> None:
    """Capacity planning for cross-datacenter PDD (Prefill - RelayDecode - MainDecode) LLM
    serving."""
    # for the command's reads only, undone when it ends (None: the default, 4 MB)
    ctx.with_resource(pddplan.input_limit(max_input_mb))


app.add_typer(catalog_app, name="catalog")
app.add_typer(model_app, name="model")
for name, command in {
    "perf": plan.COMMANDS["perf"],
    "validate": plan.COMMANDS["validate"],
    "solve": plan.COMMANDS["solve"],
    "evaluate": plan.COMMANDS["evaluate"],
    "compare": compare.COMMANDS["compare"],
    "report": report.COMMANDS["report"],
    "sweep": sweep.COMMANDS["sweep"],
    "simulate": simulate.COMMANDS["simulate"],
    "calibrate": calibrate.COMMANDS["calibrate"],
    "schema": plan.COMMANDS["schema"],
    "export": export_cmd.COMMANDS["export"],
}.items():
    app.command(name, cls=Command)(command)
app.add_typer(workload_app, name="workload")


def main(argv: list[str] | None = None) -> None:
    """The console entry point: ``app`` with typer's usage errors (unknown option, value out
    of range, missing argument) printed as one ``Error:`` line, exit code 2; a reader that
    closes the pipe (``| head``) ends it quietly (exit 1, as click), a full stdout is one
    line and exit 2. One BLAS thread for the whole process (``pddplan.threads``), set before
    any command loads numpy. SIGINT and SIGTERM: one line, exit 128 + the signal
    (``pddplan.cli.signals``)."""
    restore = None
    try:
        restore = signals.install()
        _main(argv)
    except KeyboardInterrupt:  # SIGINT or SIGTERM (signals), inside the command or not
        if not signals.state.reported:
            err.print(
                f"stopped by {signals.name()}; no file was left half-written",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
        raise SystemExit(signals.exit_code()) from None
    finally:
        if restore is not None:
            restore()


def _main(argv: list[str] | None) -> None:
    limit_process()
    command = typer.main.get_command(app)
    try:
        code = command.main(args=argv, prog_name="pddplan", standalone_mode=False)
        sys.stdout.flush()  # a full or closed stdout fails here, inside the handlers below
        if signals.stopped() is not None:  # typer made the KeyboardInterrupt an exit code
            raise KeyboardInterrupt
    except BrokenPipeError:  # the reader left (`| head`): stop quietly, exit 1 as click does
        _drop_stdout()
        raise SystemExit(1) from None
    except OSError as e:
        if e.errno not in STDOUT_FULL:
            raise  # not the output's medium: a bug, keep the traceback
        _drop_stdout()
        err.print(
            f"[bold red]Error:[/bold red] cannot write the output: {escape(e.strerror or '')}",
            highlight=False,
            soft_wrap=True,
        )
        raise SystemExit(2) from None
    except Exception as e:
        if not (hasattr(e, "format_message") and hasattr(e, "exit_code")):
            raise  # not a click usage error: a bug, keep the traceback
        if not e.format_message():  # a bare group: click has already printed its help
            raise SystemExit(e.exit_code) from None
        ctx = getattr(e, "ctx", None)
        where = f"{ctx.command_path}: " if ctx is not None else ""
        message = e.format_message().replace(": Value error, ", ": ")  # typer's wording
        err.print(
            f"[bold red]Error:[/bold red] {escape(where + message)}",
            highlight=False,
            soft_wrap=True,
        )
        if ctx is not None:  # a hint, not a second error
            err.print(f"see '{ctx.command_path} --help'", style="dim", highlight=False)
        raise SystemExit(e.exit_code) from None
    raise SystemExit(code or 0)


def _drop_stdout() -> None:
    """Point stdout at the null device, so that the interpreter's last flush of what is
    still buffered does not fail a second time at exit."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
