"""docs/cli.md keeps up with the command line (sqlite-utils' test_docs pattern), and links between
the docs find their sections."""

from __future__ import annotations

import re
from pathlib import Path

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


def test_the_options_before_the_command_are_documented():
    text = (ROOT / "docs" / "cli.md").read_text()
    root = typer.main.get_command(app)
    names = [o for p in root.params for o in p.opts if "completion" not in o and o != "--help"]
    assert names == ["--max-input-mb"]
    assert all(f"pddplan {name} " in text for name in names)


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub renders it: lower case, punctuation dropped but for
    hyphens and underscores, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_to_a_section_finds_its_heading():
    docs = ROOT / "docs"
    anchors = {
        p.name: {_slug(h) for h in re.findall(r"^#+ (.*)$", p.read_text(encoding="utf-8"), re.M)}
        for p in docs.glob("*.md")
    }
    broken = []
    for page in [*sorted(docs.glob("*.md")), ROOT / "README.md"]:
        text = page.read_text(encoding="utf-8")
        for target, anchor in re.findall(r"\]\(([\w./-]*\.md)?#([\w-]+)\)", text):
            name = Path(target).name if target else page.name
            if name in anchors and anchor not in anchors[name]:
                broken.append(f"{page.name} -> {name}#{anchor}")
    assert not broken, broken
