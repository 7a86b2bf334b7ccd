"""``pddplan catalog ...`` and ``pddplan model ...``: the hardware and model catalogs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

import pddplan
from pddplan.cli.common import (
    Command,
    HardwareOpt,
    JsonOpt,
    KvDtypeOpt,
    ModelsOpt,
    emit,
    err,
    user_errors,
    value,
)

catalog_app = typer.Typer(
    help="The hardware catalog: accelerators and their sourced figures.", no_args_is_help=True
)
model_app = typer.Typer(
    help="The model catalog: architectures and their KV and weight sizes.", no_args_is_help=True
)


@catalog_app.command("list", cls=Command)
@user_errors
def catalog_list(json_out: JsonOpt = False, hardware: HardwareOpt = None) -> None:
    """List every accelerator in the catalog.

    Example: [bold]pddplan catalog list --json[/bold]
    """
    from pddplan.report import catalog as report_catalog
    from pddplan.report import views

    hw = pddplan.load_catalogs(hardware=hardware).hardware
    emit(
        json_out,
        lambda: [views.chip_view(c, hw) for c in hw.chips.values()],
        lambda: report_catalog.chips_table(hw),
    )


@catalog_app.command("show", cls=Command)
@user_errors(names={"chip": "ID"})
def catalog_show(
    chip_id: Annotated[str, typer.Argument(metavar="ID", help="Chip id, e.g. h100-sxm.")],
    json_out: JsonOpt = False,
    hardware: HardwareOpt = None,
) -> None:
    """Show one accelerator with the source of each figure.

    Example: [bold]pddplan catalog show h200-sxm[/bold]
    """
    from pddplan.report import catalog as report_catalog
    from pddplan.report import views

    catalogs = pddplan.load_catalogs(hardware=hardware)
    view = views.chip_view(catalogs.chip(chip_id), catalogs.hardware)
    emit(json_out, lambda: view, lambda: report_catalog.chip_detail(view))


@catalog_app.command("acquisition", cls=Command)
@user_errors
def catalog_acquisition(
    json_out: JsonOpt = False,
    hardware: HardwareOpt = None,
    acquisition: Annotated[
        Path | None,
        typer.Option(
            "--acquisition", help="Acquisition catalog to use instead of the shipped one."
        ),
    ] = None,
) -> None:
    """List how each accelerator can be had over a horizon: bought (capex, life, hosting,
    lead time), reserved (term, price, minimum) or rented on demand, each figure sourced.

    Example: [bold]pddplan catalog acquisition --json[/bold]
    """
    from pddplan.report import catalog as report_catalog
    from pddplan.report import views

    hw = pddplan.load_catalogs(hardware=hardware).hardware
    rows = views.acquisition_view(pddplan.load_acquisition(acquisition), hw)
    emit(json_out, lambda: rows, lambda: report_catalog.acquisition_table(rows))


@model_app.command("list", cls=Command)
@user_errors
def model_list(
    json_out: JsonOpt = False, kv_dtype: KvDtypeOpt = None, models: ModelsOpt = None
) -> None:
    """List every model with its KV bytes per token and weight size.

    Example: [bold]pddplan model list --kv-dtype fp8[/bold]
    """
    from pddplan.report import catalog as report_catalog
    from pddplan.report import views

    catalog = pddplan.load_catalogs(models=models).models
    found = [views.model_view(m, value(kv_dtype)) for m in catalog.values()]
    emit(json_out, lambda: found, lambda: report_catalog.models_table(found))


@model_app.command("show", cls=Command)
@user_errors(names={"model": "ID"})
def model_show(
    model_id: Annotated[str, typer.Argument(metavar="ID", help="Model id, e.g. deepseek-v3.")],
    json_out: JsonOpt = False,
    kv_dtype: KvDtypeOpt = None,
    models: ModelsOpt = None,
) -> None:
    """Show one model's config and derived KV and weight figures.

    Example: [bold]pddplan model show deepseek-v4-pro --json --kv-dtype bf16[/bold]
    """
    from pddplan.report import catalog as report_catalog
    from pddplan.report import views

    model = pddplan.load_catalogs(models=models).model(model_id)
    view = views.model_view(model, value(kv_dtype))
    emit(json_out, lambda: view, lambda: report_catalog.model_detail(view))


@model_app.command("import", cls=Command)
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
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", model_id):
        raise pddplan.InputError(
            f"--id: {model_id!r} is not a catalog id: letters, digits, '.', '_' and '-', "
            "starting with a letter or digit"
        )
    text = pddplan.import_hf_config(
        config,
        model_id,
        total_params_b=total_params_b,
        active_params_b=active_params_b,
        catalog=output,
    )
    if output:
        err.print(f"added {model_id} to {output}")
    else:
        typer.echo(text, nl=False)
