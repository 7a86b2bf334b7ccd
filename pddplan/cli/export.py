"""``pddplan export``: a plan's launch files for a serving engine or Kubernetes."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

import pddplan
from pddplan.cli.common import folder_takes_files, note, user_errors, write_file


class Target(StrEnum):
    plan = "plan"
    sglang = "sglang"
    vllm = "vllm"
    trtllm = "trtllm"
    dynamo = "dynamo"
    k8s = "k8s"


class ContainerEngine(StrEnum):
    sglang = "sglang"
    vllm = "vllm"


def export(
    plan: Annotated[
        Path, typer.Argument(metavar="PLAN", help="Plan JSON written by 'pddplan solve --out'.")
    ],
    out: Annotated[
        Path,
        typer.Option("--out", help="Folder to write into (made if missing; empty, or --force)."),
    ],
    to: Annotated[
        Target,
        typer.Option(
            "--to",
            help="What to launch with: plan (the default: each pool with its role's engine "
            "profile, sglang, vllm or trtllm; a role planned with ideal's takes the engine "
            "of the others), sglang or vllm (a launch script per pool), trtllm "
            "(trtllm-serve per pool with its options YAML, and the disaggregated server's "
            "config), dynamo (Dynamo's workers, SGLang's or, for a plan made with the trtllm "
            "engine profile, TensorRT-LLM's; its frontend; a DynamoGraphDeployment), k8s (a "
            "manifest per pool: a Deployment, or a LeaderWorkerSet for instances over several "
            "hosts).",
        ),
    ] = Target.plan,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Write into a folder that is not empty (files of the same name are replaced, "
            "others left).",
        ),
    ] = False,
    engine: Annotated[
        ContainerEngine | None,
        typer.Option(
            "--engine",
            help="--to k8s: the engine the containers run (default: each pool's role's "
            "engine profile if sglang or vllm, else sglang).",
        ),
    ] = None,
) -> None:
    """Write a plan's launch files: per pool the engine's command with the parallel layout,
    KV dtype, batch and chunk limits the plan assumed, and router.json, the router's rules
    (docs/export.md).

    Example: [bold]pddplan export plan.json --out launch/[/bold] (each pool on its role's
    engine), or [bold]--to vllm[/bold] for every pool.
    """
    _check_out(out, force)  # before any work
    files = pddplan.export_plan(plan, to.value, engine=None if engine is None else engine.value)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        write_file(out / name, text)
        if name.endswith(".sh"):
            (out / name).chmod(0o755)
    note(f"wrote {len(files)} files to {out}")


def _check_out(out: Path, force: bool) -> None:
    if out.exists():
        if not out.is_dir():
            raise pddplan.InputError(f"--out: {out} is a file; give a folder")
        if not force and any(out.iterdir()):
            raise pddplan.InputError(
                f"--out: {out} exists and is not empty; give an empty folder, or --force to "
                "write into it"
            )
        folder_takes_files(out, "--out")
        return
    parent = out.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise pddplan.InputError(f"--out: {parent} is a file; give a folder")
    folder_takes_files(parent, "--out")


COMMANDS = {"export": user_errors(export)}
