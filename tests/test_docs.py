"""docs/cli.md keeps up with the command line (sqlite-utils' test_docs pattern)."""

from __future__ import annotations

import re

import pytest
import typer
from conftest import ROOT

from pddplan.cli.app import app


def _commands(typer_app: typer.Typer, prefix: str = "pddplan") -> list[tuple[str, object]]:
    out = []
    for info in typer_app.registered_commands:
        out.append((f"{prefix} {info.name or info.callback.__name__}", info.callback))
    for group in typer_app.registered_groups:
        out += _commands(group.typer_instance, f"{prefix} {group.name}")
    return out


COMMANDS = _commands(app)


def test_the_command_list_is_complete():
    names = {name for name, _ in COMMANDS}
    assert {"pddplan perf", "pddplan catalog list", "pddplan model import"} <= names


@pytest.mark.parametrize(("name", "callback"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_every_command_is_documented_and_has_help(name, callback):
    documented = set(
        re.findall(r"^## (pddplan[\w -]*?)\s*$", (ROOT / "docs" / "cli.md").read_text(), re.M)
    )
    assert name in documented, f"{name} is missing from docs/cli.md"
    assert callback.__doc__ and "Example:" in callback.__doc__, f"{name} needs help with an example"
