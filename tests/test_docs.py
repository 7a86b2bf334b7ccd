"""docs/cli.md keeps up with the command line (sqlite-utils' test_docs pattern), and links between
the docs find their sections."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer
from conftest import ROOT, run_main

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


SAMPLE = '"$(pddplan workload sample)"'
"""How the docs give the sample trace to a command: the path ``workload sample`` prints."""


def _sample_commands() -> list[str]:
    """Every command README.md and docs/*.md quote with the sample trace: a line of a
    ```` ```bash ```` block, or an inline ``pddplan ...`` span."""
    found = set()
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for block in re.findall(r"```bash\n(.*?)```", text, re.S):
            found |= {x.strip() for x in block.splitlines() if SAMPLE in x}
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        found |= {x for x in re.findall(r"`(pddplan [^`\n]*)`", prose) if SAMPLE in x}
    return sorted(found)


def test_the_docs_give_the_sample_trace_to_commands():
    """The README names the sample where it explains traces (issue 51, item 7)."""
    commands = _sample_commands()
    assert 'pddplan workload fit "$(pddplan workload sample)"' in commands
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"pddplan workload fit {SAMPLE}" in readme


@pytest.mark.parametrize("command", _sample_commands())
def test_each_quoted_command_on_the_sample_trace_works(command, tmp_path, monkeypatch):
    """Each quoted command, with the path ``pddplan workload sample`` prints put where the
    shell would put it, exits 0 (in an empty folder: a file it writes stays there)."""
    monkeypatch.chdir(tmp_path)
    printed = run_main("workload", "sample")
    assert printed.exit_code == 0, printed.output
    path = printed.stdout.strip()
    assert Path(path).is_file() and printed.stdout.count("\n") == 1
    args = shlex.split(command.replace(SAMPLE, shlex.quote(path)))
    assert args[0] == "pddplan"
    result = run_main(*args[1:])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip()
