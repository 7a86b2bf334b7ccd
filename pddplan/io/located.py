"""Reading YAML safely, with the line of every key, so that every problem can be reported as
``FILE:LINE: KEY.PATH: what is wrong``. The only module of the package, with the HF and
workload writers, that knows YAML.

Scenario, fleet, plan and catalog files come from other people and other tools, so the
reader is bounded at every step, and each bound is one located line (``InputError``):

- the read: at most ``input_limit_bytes()`` (4 MB unless raised with ``PDDPLAN_MAX_INPUT_MB``
  or, for one block of reads, ``input_limit``; never past ``MAX_INPUT_LIMIT_MB``); a pipe
  is read up to the bound, waiting at most ``pddplan.pipes.PIPE_WAIT_S`` (10 s) for its
  writer, a directory and a loop of symbolic links are refused;
- the text: UTF-8 (or UTF-16/32 with a byte-order mark), the line of a bad byte named;
- the document: composed here from the parser's events, never recursively, counting
  nesting depth (``MAX_DEPTH``) and the size the document would have with every alias
  expanded (``MAX_EXPANDED_NODES``, from memoised subtree sizes: nothing is expanded to
  count it), stopping at the first event past a bound;
- the values: plain YAML only (strings, numbers, booleans, null, lists, mappings; no tags
  that build objects), keys plain and unique per mapping, and a value that cannot be read
  (``!!int twenty``, ``!!float 1.2.3``) named with its line; an unquoted date is its text.
"""

from __future__ import annotations

import codecs
import errno
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)

from pddplan.errors import ArgumentError, InputError
from pddplan.pipes import open_input
from pddplan.spec.source import Loc, SourceMap, fmt_loc, quote

Loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML was built with it (it parses a catalog in a tenth of the
time), else the pure-Python one; both give the same data and the same marks."""

DEFAULT_INPUT_LIMIT_MB = 4.0
"""The largest structured input read by default: a scenario with thousands of classes is
well under 1 MB; a file past this is more likely a mistake (a trace given as a scenario)
or an attack than a plan. Traces are read line by line and are not bound by it."""

MAX_INPUT_LIMIT_MB = 1024.0
"""The largest input limit that may be asked for (``--max-input-mb``, ``PDDPLAN_MAX_INPUT_MB``):
1 GB. Parsed YAML takes tens of times its bytes in memory, so a larger file could not be
planned from on any machine, and a limit past it (``1e308``) would overflow the read."""

INPUT_LIMIT_ENV = "PDDPLAN_MAX_INPUT_MB"
"""The environment variable that raises (or lowers) the input limit, in MB."""

MAX_DEPTH = 64
"""The deepest nesting of lists and mappings allowed; the schema needs 6. libyaml has a
limit of its own (1,000) and the pure-Python parser none, so this one is counted here for
both, before anything recurses."""

MAX_EXPANDED_NODES = 2_000_000
"""The most values a document may hold with every alias expanded: what 4 MB of plain YAML
can spell at most (``- 1`` is 4 bytes a value). Aliases are allowed (an anchored block
reused), expansion attacks ("billion laughs") are not."""

ALLOWED_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}"
    for name in ("str", "int", "float", "bool", "null", "seq", "map", "merge")
)
"""The tags a value may carry, explicit or resolved: plain data. ``!!python/...``,
``!!binary``, ``!!set``, ``!!timestamp`` written out and custom ``!tags`` are refused; an
unquoted date is read as its text."""

_TIMESTAMP, _STR, _FLOAT = (f"tag:yaml.org,2002:{t}" for t in ("timestamp", "str", "float"))
_EXPONENT_FLOAT = re.compile(r"[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+")
"""A number with an exponent YAML 1.1 leaves as text (``1e-4``, ``1.5e9``: its floats need a
dot and a signed exponent)."""

_JSON_START = re.compile(r'\s*[\[{]\s*"')
"""Text that opens as JSON does (``{"`` or ``["``), whatever the file is called."""

_limit_bytes: ContextVar[int | None] = ContextVar("pddplan_input_limit_bytes", default=None)

_BOMS = (  # longest first: the UTF-32 LE mark begins with the UTF-16 LE one
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


@contextmanager
def input_limit(megabytes: float | None) -> Iterator[None]:
    """Within the block, the largest input read is ``megabytes`` (``None``: the enclosing
    block's, else ``PDDPLAN_MAX_INPUT_MB``'s, else the default). Scoped to the block and
    to its thread or task (a context variable), never the process: a caller's reads
    elsewhere keep their own limit."""
    if megabytes is None:
        yield
        return
    if not _valid_limit(megabytes):
        raise ArgumentError(
            "max_input_mb",
            f"{{argument}} must be a positive number of MB, from 0.001 to {MAX_INPUT_LIMIT_MB:g}, "
            f"got {megabytes!r}",
        )
    token = _limit_bytes.set(int(megabytes * 1e6))
    try:
        yield
    finally:
        _limit_bytes.reset(token)


def input_limit_bytes() -> int:
    """The largest input read: the innermost ``input_limit``'s, else
    ``PDDPLAN_MAX_INPUT_MB``'s, else ``DEFAULT_INPUT_LIMIT_MB``."""
    limit = _limit_bytes.get()
    if limit is not None:
        return limit
    raw = os.environ.get(INPUT_LIMIT_ENV)
    if raw is None:
        return int(DEFAULT_INPUT_LIMIT_MB * 1e6)
    try:
        mb = float(raw)
    except ValueError:
        mb = float("nan")
    if not _valid_limit(mb):
        raise InputError(
            f"{INPUT_LIMIT_ENV}={quote(raw)}: expected a positive number of megabytes, from "
            f"0.001 to {MAX_INPUT_LIMIT_MB:g}"
        )
    return int(mb * 1e6)


def _valid_limit(megabytes: object) -> bool:
    """Whether ``megabytes`` is an input limit that may be set: a number from 0.001 (1 kB)
    to ``MAX_INPUT_LIMIT_MB``, not a boolean."""
    return (
        isinstance(megabytes, int | float)
        and not isinstance(megabytes, bool)
        and 0.001 <= megabytes <= MAX_INPUT_LIMIT_MB
    )


def read_bytes(path: Path, *, what: str = "file") -> bytes:
    """``path``'s bytes, at most ``input_limit_bytes()`` (pddplan's own files: whole), or
    one ``InputError``: not found, a directory, a loop of symbolic links, unreadable, a pipe
    whose writer stays silent for ``PIPE_WAIT_S``, or larger than the limit (which the
    message says how to raise). Pipes and character devices are read up to the limit,
    never to their end."""
    limit = input_limit_bytes() if not _installed(path) else None
    if path.is_dir():
        raise InputError(f"{path}: is a directory (expected a {what})")
    try:
        with open_input(path) as f:
            data = f.read(-1 if limit is None else limit + 1)
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read: {os_problem(e)}") from None
    if limit is not None and len(data) > limit:
        raise InputError(
            f"{path}: larger than the input limit of {limit / 1e6:g} MB (raise it with "
            f"--max-input-mb or {INPUT_LIMIT_ENV} if the file is meant to be this large)"
        )
    return data


def os_problem(e: OSError) -> str:
    """What an ``OSError`` of a read says, in words: a loop of symbolic links named so."""
    if e.errno == errno.ELOOP:
        return "a loop of symbolic links (a link that leads back to itself)"
    return e.strerror or str(e)


_PACKAGE = Path(__file__).resolve().parent.parent


def _installed(path: Path) -> bool:
    """Whether ``path`` is one of pddplan's own files (the shipped catalogs): those are
    not untrusted input, and a low ``--max-input-mb`` must not refuse them. A path that
    cannot be resolved (a loop of symbolic links: ``RuntimeError`` in Python 3.11) is not."""
    try:
        return path.resolve().is_relative_to(_PACKAGE) and path.is_file()
    except (OSError, RuntimeError):
        return False


def decode(data: bytes, path: Path) -> str:
    """``data`` as text: UTF-8, or UTF-16/32 where a byte-order mark says so; a byte that
    is not text is one located line."""
    encoding = next((enc for bom, enc in _BOMS if data.startswith(bom)), "utf-8")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InputError(
            f"{path}:{line}: not {encoding.upper().removesuffix('-SIG')} text (byte "
            f"0x{data[e.start]:02x} at offset {e.start}); save the file as UTF-8"
        ) from None


def read_text(path: Path, *, what: str = "file") -> str:
    """``path``'s text, bounded and decoded as ``read_bytes`` and ``decode`` do."""
    return decode(read_bytes(path, what=what), path)


def read_yaml(path: Path) -> tuple[Any, SourceMap]:
    """Parse ``path``; return the data and the 1-based line of every key path."""
    text = read_text(path, what="YAML file")
    try:  # the pure-Python reader checks the characters here
        loader = Loader(text)
    except yaml.YAMLError as e:
        raise InputError(_yaml_problem(e, path, text)) from None
    try:  # one parse: the node tree gives the lines, then the data
        node = _compose(loader, path)
        if node is None:
            raise InputError(f"{path}: the file is empty")
        lines: dict[Loc, int] = {}
        duplicates: list[str] = []
        _index_lines(node, lines, duplicates, path)
        if duplicates:
            raise InputError(duplicates)
        data = _construct(loader, node, path)
    except yaml.YAMLError as e:
        raise InputError(_yaml_problem(e, path, text)) from None
    finally:
        loader.dispose()
    return data, SourceMap(path, lines)


def _yaml_problem(e: yaml.YAMLError, path: Path, text: str) -> str:
    """One line for a file the YAML parser refused; a JSON file (``.json``, or text that
    opens with ``{`` or ``[``) in JSON's terms, from JSON's own parser, so a plan cut short
    is "malformed JSON", not YAML."""
    if path.suffix.lower() == ".json" or _JSON_START.match(text):
        try:
            json.loads(text)
        except json.JSONDecodeError as j:
            return f"{path}:{j.lineno}: malformed JSON: {j.msg}"
        except (ValueError, RecursionError):
            pass
    if isinstance(e, yaml.reader.ReaderError):  # a character YAML does not allow
        line = text.count("\n", 0, max(e.position, 0)) + 1
        return f"{path}:{line}: malformed YAML: character #x{e.character:04x} is not allowed"
    mark = getattr(e, "problem_mark", None)
    where = f"{path}:{mark.line + 1}" if mark else str(path)
    problem = getattr(e, "problem", None) or str(e)
    return f"{where}: malformed YAML: {problem}"


class _Frame:
    """A list or mapping being composed: its node, its size so far (values with aliases
    expanded), its height, and a mapping's key waiting for its value."""

    __slots__ = ("anchor", "height", "key", "key_size", "node", "size")

    def __init__(self, node: yaml.CollectionNode, anchor: str | None) -> None:
        self.node, self.anchor, self.size, self.height = node, anchor, 1, 1
        self.key: yaml.Node | None = None
        self.key_size = 0


def _compose(loader: Any, path: Path) -> yaml.Node | None:
    """The document's node graph, built from the parser's events without recursion (as
    PyYAML's composer does, with the same nodes), bounded in depth and expanded size."""
    loader.get_event()  # stream start
    if loader.check_event(StreamEndEvent):
        return None
    loader.get_event()  # document start
    anchors: dict[str, tuple[yaml.Node, int, int]] = {}  # node, expanded size, height
    open_nodes: set[int] = set()
    stack: list[_Frame] = []
    expanded = 0
    root: yaml.Node | None = None

    def where(event: Any) -> str:
        return f"{path}:{event.start_mark.line + 1}"

    def tag_of(event: Any, kind: type[yaml.Node], value: str | None) -> str:
        tag = event.tag
        if tag is None or tag == "!":
            tag = loader.resolve(kind, value, event.implicit)
            if tag == _TIMESTAMP:  # an unquoted date (a source's "2026-02-30") is its text
                tag = _STR
            elif tag == _STR and event.implicit[0] and _EXPONENT_FLOAT.fullmatch(value or ""):
                tag = _FLOAT  # YAML 1.1 reads 1e-4 as text; YAML 1.2 (and every user) a number
        if tag not in ALLOWED_TAGS:
            shown = tag.replace("tag:yaml.org,2002:", "!!")
            raise InputError(
                f"{where(event)}: tag '{quote(shown, 60, quotes=False)}' is not allowed "
                "(plain YAML only: strings, numbers, true/false, null, lists, mappings)"
            )
        return tag

    def attach(node: yaml.Node, size: int, height: int, event: Any) -> None:
        nonlocal root
        if not stack:
            root = node
            return
        top = stack[-1]
        top.height = max(top.height, height + 1)
        if len(stack) + height > MAX_DEPTH:
            raise InputError(
                f"{where(event)}: nested deeper than {MAX_DEPTH} levels (an alias counts "
                "as the block it names)"
            )
        if isinstance(top.node, yaml.SequenceNode):
            top.node.value.append(node)
            top.size += size
        elif top.key is None:
            if not isinstance(node, yaml.ScalarNode):
                kind = "list" if isinstance(node, yaml.SequenceNode) else "mapping"
                raise InputError(
                    f"{where(event)}: malformed YAML: a {kind} used as a mapping key "
                    "(keys are plain names)"
                )
            top.key, top.key_size = node, size
        else:
            top.node.value.append((top.key, node))
            top.size += top.key_size + size
            top.key = None

    def count(size: int, event: Any) -> None:
        nonlocal expanded
        expanded += size
        if expanded > MAX_EXPANDED_NODES:
            raise InputError(
                f"{where(event)}: more than {MAX_EXPANDED_NODES:,} values with aliases "
                "expanded (an alias-expansion attack, or a file too large to plan from)"
            )

    while not loader.check_event(StreamEndEvent):
        event: Any = loader.get_event()
        start_mark: Any = event.start_mark  # libyaml's marks are its own class
        end_mark: Any = event.end_mark
        if isinstance(event, ScalarEvent):
            node: yaml.Node = yaml.ScalarNode(
                tag_of(event, yaml.ScalarNode, event.value),
                event.value,
                start_mark,
                end_mark,
                style=event.style,
            )
            if event.anchor is not None:
                anchors[event.anchor] = (node, 1, 0)
            count(1, event)
            attach(node, 1, 0, event)
        elif isinstance(event, AliasEvent):
            if event.anchor not in anchors:
                raise InputError(
                    f"{where(event)}: malformed YAML: alias *{quote(event.anchor, 60, quotes=False)} "
                    "names no anchor defined before it"
                )
            target, size, height = anchors[event.anchor]
            if id(target) in open_nodes:
                raise InputError(
                    f"{where(event)}: malformed YAML: alias *{quote(event.anchor, 60, quotes=False)} "
                    "is inside the block it names (a recursive structure)"
                )
            count(size, event)
            attach(target, size, height, event)
        elif isinstance(event, (SequenceStartEvent, MappingStartEvent)):
            if len(stack) >= MAX_DEPTH:
                raise InputError(f"{where(event)}: nested deeper than {MAX_DEPTH} levels")
            kind = yaml.SequenceNode if isinstance(event, SequenceStartEvent) else yaml.MappingNode
            collection = kind(
                tag_of(event, kind, None),
                [],
                start_mark,
                None,
                flow_style=event.flow_style,
            )
            if event.anchor is not None:
                anchors[event.anchor] = (collection, 1, 1)  # open: an alias to it is refused
            count(1, event)
            open_nodes.add(id(collection))
            stack.append(_Frame(collection, event.anchor))
        elif isinstance(event, (SequenceEndEvent, MappingEndEvent)):
            frame = stack.pop()
            frame.node.end_mark = event.end_mark
            open_nodes.discard(id(frame.node))
            if frame.anchor is not None and anchors[frame.anchor][0] is frame.node:
                anchors[frame.anchor] = (frame.node, frame.size, frame.height)
            attach(frame.node, frame.size, frame.height, event)
        else:  # document end; another document start is an error
            if root is not None and not loader.check_event(StreamEndEvent):
                nxt = loader.peek_event()
                raise InputError(
                    f"{where(nxt)}: malformed YAML: more than one document ('---'); "
                    "a file holds one"
                )
    loader.get_event()  # stream end
    return root


def _construct(loader: Any, node: yaml.Node, path: Path) -> Any:
    """The data of ``node``; a value that cannot be read (``!!int twenty``, ``!!float 1.2.3``)
    is one line with its line number, found by reading the scalars one by one."""
    try:
        return loader.construct_document(node)
    except (ValueError, TypeError, OverflowError, yaml.constructor.ConstructorError):
        pass
    constructor = SafeConstructor()
    todo = [node]
    seen: set[int] = set()
    while todo:
        n = todo.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, yaml.ScalarNode):
            try:
                constructor.construct_object(n)
            except Exception as e:
                tag = n.tag.replace("tag:yaml.org,2002:", "")
                raise InputError(
                    f"{path}:{n.start_mark.line + 1}: cannot read {quote(n.value)} as "
                    f"{'an' if tag[0] in 'aeiou' else 'a'} {tag}: {quote(str(e), quotes=False)}"
                ) from None
        elif isinstance(n, yaml.SequenceNode):
            todo.extend(reversed(n.value))
        elif isinstance(n, yaml.MappingNode):
            todo.extend(v for pair in reversed(n.value) for v in reversed(pair))
    return loader.construct_document(node)  # fails as before: report the bug, not hide it


def _index_lines(node: yaml.Node, lines: dict[Loc, int], dups: list[str], path: Path) -> None:
    """The line of every key path under ``node``, and one line per duplicate key; walked
    with a stack in document order, each node once: a path through an alias is not indexed
    (its line is the alias's key, the nearest one indexed), so the index is as large as the
    file, never as the expanded document."""
    todo: list[tuple[yaml.Node, Loc]] = [(node, ())]
    seen_nodes: set[int] = set()
    while todo:
        n, loc = todo.pop()
        if id(n) in seen_nodes:
            continue
        seen_nodes.add(id(n))
        lines.setdefault(loc, n.start_mark.line + 1)
        if isinstance(n, yaml.MappingNode):
            seen: set[str] = set()
            for key_node, _ in n.value:
                key = key_node.value
                if key in seen:
                    dups.append(
                        f"{path}:{key_node.start_mark.line + 1}: "
                        f"{quote(fmt_loc((*loc, key)), quotes=False)}: "
                        "duplicate key (a key may appear once per mapping)"
                    )
                seen.add(key)
                lines[(*loc, key)] = key_node.start_mark.line + 1
            todo.extend((v, (*loc, k.value)) for k, v in reversed(n.value))
        elif isinstance(n, yaml.SequenceNode):
            todo.extend((item, (*loc, i)) for i, item in reversed(list(enumerate(n.value))))


def read_json_file(path: Path, *, what: str, max_bytes: int, hint: str) -> object:
    """The JSON in the file at ``path``, as a whole (a file this tool wrote: a plan, a
    sweep's results); ``InputError`` in one line naming ``path`` for one that is missing,
    a folder, larger than ``max_bytes``, or not JSON (``what`` it should be, and ``hint``:
    what writes it)."""
    from pddplan.errors import InputError

    try:
        if path.is_file() and path.stat().st_size > max_bytes:
            raise InputError(f"{path}: larger than {max_bytes // 2**20} MB: not {what}")
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: a folder, not {what}") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise InputError(f"{path}: not {what} ({hint}): {e}") from None
