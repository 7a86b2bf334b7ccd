"""The safe YAML reader (``pddplan.io.located``): every hostile input is one located line,
with libyaml and with the pure-Python loader alike, and the bounds stop the reader early
(counted in parser events and values, never timed)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, SMALL

from pddplan.errors import InputError
from pddplan.io import located
from pddplan.io.located import input_limit, read_yaml

LOADERS = [yaml.SafeLoader] + ([yaml.CSafeLoader] if hasattr(yaml, "CSafeLoader") else [])


@pytest.fixture(params=LOADERS, ids=lambda c: c.__name__)
def loader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> type:
    """Run the test with each loader PyYAML has here (libyaml's where it was built)."""
    monkeypatch.setattr(located, "Loader", request.param)
    return request.param


def _bomb(levels: int) -> str:
    """'Billion laughs': each level a list of ten aliases to the one before."""
    rows = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    rows += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(rows) + "\n"


HOSTILE = {
    # name: (text, the line named, words of the message)
    "python-tag": ("a: !!python/object/apply:os.system ['ls']\n", 1, "'!!python/object/apply"),
    "custom-tag": ("a: 1\nb: !foo 3\n", 2, "tag '!foo' is not allowed"),
    "binary-tag": ("a: !!binary aGVsbG8=\n", 1, "tag '!!binary' is not allowed"),
    "set-tag": ("a: !!set {x, y}\n", 1, "tag '!!set' is not allowed"),
    "timestamp-tag": ("a: !!timestamp 2026-01-01\n", 1, "tag '!!timestamp' is not allowed"),
    "int-of-a-word": ("a:\n  b: !!int twenty\n", 2, "cannot read 'twenty' as an int"),
    "float-of-a-word": ("a: !!float 1.2.3\n", 1, "cannot read '1.2.3' as a float"),
    "list-key": ("a: 1\n? [1, 2]\n: 3\n", 2, "a list used as a mapping key"),
    "mapping-key": ("{a: 1}: 3\n", 1, "a mapping used as a mapping key"),
    "duplicate-key": ("a: 1\nb: 2\na: 3\n", 3, "a: duplicate key"),
    "quoted-duplicate-key": ('x:\n  "a": 1\n  a: 2\n', 3, "x.a: duplicate key"),
    "bomb": (_bomb(9), 7, "more than 2,000,000 values with aliases expanded"),
    "recursive-alias": ("a: &a\n  b: *a\n", 2, "inside the block it names"),
    "undefined-alias": ("a: 1\nb: *nope\n", 2, "alias *nope names no anchor"),
    "deep-block": (
        "".join("  " * i + "a:\n" for i in range(200)) + "  " * 200 + "1\n",
        65,
        "deeper than 64 levels",
    ),
    "deep-through-alias": (
        "d: &d " + "[" * 40 + "]" * 40 + "\n" + "e: " + "[" * 30 + "*d" + "]" * 30 + "\n",
        2,
        "an alias counts as the block it names",
    ),
    "two-documents": ("a: 1\n---\nb: 2\n", 2, "more than one document"),
    "nul": ("a: 1\nb: \x00\n", 2, "character #x0000 is not allowed"),
    "tab-indent": ("a:\n\tb: 1\n", 2, "malformed YAML"),
    "unclosed-flow": ("a: [1, 2\nb: 3\n", 2, "malformed YAML"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_each_hostile_document_is_one_located_line(name: str, loader: type, tmp_path: Path) -> None:
    text, line, words = HOSTILE[name]
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as e:
        read_yaml(path)
    (message,) = e.value.problems
    assert message.startswith(f"{path}:{line}: "), message
    assert words in message, message
    assert len(message) < 250, message


def test_a_flow_nested_ten_thousand_deep_is_refused(loader: type, tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("[" * 10_000 + "]" * 10_000 + "\n", encoding="utf-8")
    with pytest.raises(InputError) as e:
        read_yaml(path)
    (message,) = e.value.problems
    assert message.startswith(f"{path}:1: "), message
    assert "deeper than 64 levels" in message or "maximum nesting depth" in message, message


class _Counting:
    """A loader class that counts the parser events read, to show a bound stops early."""

    def __init__(self, base: type) -> None:
        self.base, self.events = base, 0

    def __call__(self, text: str):
        outer = self

        class Counted(self.base):  # type: ignore[misc, name-defined]
            def get_event(self):
                outer.events += 1
                return super().get_event()

        return Counted(text)


def test_the_depth_bound_stops_at_the_first_event_past_it(
    loader: type, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    counting = _Counting(loader)
    monkeypatch.setattr(located, "Loader", counting)
    path = tmp_path / "deep.yaml"
    path.write_text("".join("  " * i + "a:\n" for i in range(900)) + "  " * 900 + "1\n")
    with pytest.raises(InputError, match="deeper than 64"):
        read_yaml(path)
    assert counting.events < 2 * 64 + 10  # a key and a mapping a level, not 10,000 events


def test_the_expansion_bound_never_expands(
    loader: type, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    counting = _Counting(loader)
    monkeypatch.setattr(located, "Loader", counting)
    path = tmp_path / "bomb.yaml"
    path.write_text(_bomb(30), encoding="utf-8")  # 10**30 values expanded
    with pytest.raises(InputError, match="aliases expanded"):
        read_yaml(path)
    assert counting.events < 7 * 14  # stopped in line 7: 14 events a line


def test_aliases_and_merge_keys_are_plain_data(loader: type, tmp_path: Path) -> None:
    path = tmp_path / "alias.yaml"
    path.write_text("base: &b {x: 1, y: 2}\nother: *b\nm:\n  <<: *b\n  z: 3\n")
    data, source = read_yaml(path)
    both = {"x": 1, "y": 2}
    assert data == {"base": both, "other": both, "m": {**both, "z": 3}}
    assert source.line(("other", "x")) == 2  # a path through an alias: the alias's line
    assert source.line(("base", "y")) == 1


def test_an_unquoted_date_is_its_text(loader: type, tmp_path: Path) -> None:
    path = tmp_path / "date.yaml"
    path.write_text("checked: 2026-02-30\n")
    assert read_yaml(path)[0] == {"checked": "2026-02-30"}


@pytest.mark.parametrize(
    "path", [*sorted((ROOT / "scenarios").glob("*.yaml")), ROOT / "catalogs" / "hardware.yaml"]
)
def test_both_loaders_read_a_shipped_file_alike(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read = []
    for cls in LOADERS:
        monkeypatch.setattr(located, "Loader", cls)
        data, source = read_yaml(path)
        read.append((data, dict(source.lines)))
    assert all(r == read[0] for r in read)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"a: 1\nb: caf\xe9\n", ":2: not UTF-8 text (byte 0xe9 at offset 11)"),
        (b"\xff\xfe\x00\x00" + "a: 1\n".encode("utf-32-le") + b"\x00\xd8\x00\x00", "not UTF-32"),
        (b"", ": the file is empty"),
        (b"# only a comment\n", ": the file is empty"),
    ],
)
def test_bytes_that_are_not_yaml_text_are_named(data: bytes, words: str, tmp_path: Path) -> None:
    path = tmp_path / "bytes.yaml"
    path.write_bytes(data)
    with pytest.raises(InputError) as e:
        read_yaml(path)
    assert words in str(e.value)


def test_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    for encoding in ("utf-8-sig", "utf-16", "utf-32"):
        path = tmp_path / f"{encoding}.yaml"
        path.write_bytes("a: café\n".encode(encoding))
        assert read_yaml(path)[0] == {"a": "café"}


@pytest.fixture
def small_limit():
    with input_limit(0.001):  # 1 kB
        yield


def test_the_read_is_bounded(small_limit: None, tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("a: " + "x" * 2_000 + "\n")
    with pytest.raises(InputError, match=r"larger than the input limit of 0\.001 MB \(raise it"):
        read_yaml(path)
    with pytest.raises(InputError, match="larger than the input limit"):
        read_yaml(Path("/dev/zero"))  # ends at the bound, not at memory's end


def test_a_pipe_is_read(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_text, args=("a: 1\n",))
    writer.start()
    try:
        assert read_yaml(fifo)[0] == {"a": 1}
    finally:
        writer.join()


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r": is a directory \(expected a YAML file\)"):
        read_yaml(tmp_path)


def test_the_limit_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(located.INPUT_LIMIT_ENV, "12.5")
    assert located.input_limit_bytes() == 12_500_000
    monkeypatch.setenv(located.INPUT_LIMIT_ENV, "lots")
    with pytest.raises(InputError, match="PDDPLAN_MAX_INPUT_MB='lots': expected a positive"):
        located.input_limit_bytes()
    with input_limit(2):
        assert located.input_limit_bytes() == 2_000_000  # the option wins over the variable
        with input_limit(None):  # an inner block without one keeps the enclosing limit
            assert located.input_limit_bytes() == 2_000_000
    monkeypatch.delenv(located.INPUT_LIMIT_ENV)
    assert located.input_limit_bytes() == 4_000_000  # back to the default after the block


def test_the_limit_is_passed_not_kept(tmp_path: Path) -> None:
    """A loader's ``max_input_mb`` bounds its own reads only; the next read has the default
    again (no process-wide setting left behind)."""
    import pddplan

    with pytest.raises(InputError, match=r"larger than the input limit of 0\.001 MB"):
        pddplan.load_scenario(SMALL, max_input_mb=0.001)
    assert pddplan.load_scenario(SMALL).scenario.name
    with pytest.raises(pddplan.ArgumentError, match="max_input_mb must be a positive"):
        pddplan.load_scenario(SMALL, max_input_mb=0)


def test_a_long_bad_value_is_quoted_short(tmp_path: Path) -> None:
    path = tmp_path / "long.yaml"
    path.write_text("a: !!int " + "9x" * 450_000 + "\n")
    with pytest.raises(InputError) as e:
        read_yaml(path)
    assert "(900,000 characters)" in str(e.value)
    assert len(str(e.value)) - len(str(path)) < 300
