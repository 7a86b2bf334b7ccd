"""Extract a serving engine's command-line flags from its own argument definitions, as data
for ``tests/test_export.py`` (``tests/data/engines/*.json``; how they were made:
``tests/data/engines/README.md``).

Run it with the Python of a scratch virtual environment where the engine's wheel, at the
pinned release, is installed without its dependencies (``pip install --no-deps``) beside a
few small ones (pydantic, msgspec, numpy, ...)::

    /tmp/sgl/bin/python benchmarks/engine_flags.py sglang --release 0.5.21 \
        --out tests/data/engines/sglang.json

The engine's parser is built by the engine's own code (SGLang's
``ServerArgs.add_cli_args``, vLLM's ``make_arg_parser`` of ``vllm serve``, Dynamo's worker
and frontend argument groups); each heavy module it imports that is not installed (torch,
triton, transformers, ...) is replaced by a stub class whose attributes are stubs too, as
vLLM's own documentation build does to render its CLI reference without a GPU. Every
action of the parser is then written down: its option strings, whether it takes a value,
the value's type, its choices, its nargs, and whether the engine marks it deprecated.

Not run by the tests or CI (they install no engine); re-run it to move a pin.
"""

from __future__ import annotations

import abc
import argparse
import importlib.abc
import importlib.machinery
import json
import os
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

# --- stubs for the modules an engine imports but its argument definitions do not need ------
PROBES = (
    "__modify_schema__",
    "__get_validators__",
    "__dataclass",
    "__pydantic",
    "__attrs",
    "__wrapped__",
    "__signature__",
    "__origin__",
    "__args__",
    "__parameters__",
    "__get_pydantic",
    "__set_name__",
    "__get__",
    "__set__",
    "__fspath__",
    "__length_hint__",
    "__annotations__",
    "__slots__",
    "__objclass__",
    "__isabstractmethod__",
    "__self__",
    "__func__",
    "__code__",
    "__defaults__",
    "__kwdefaults__",
    "__text_signature__",
    "__path__",
    "__file__",
    "__spec__",
    "__loader__",
    "__all__",
    "__mro_entries__",
)
"""Attributes that code probes with ``hasattr``/``getattr``: a stub does not have them."""


def _probe(name: str) -> bool:
    return name.startswith(PROBES) or (name.startswith("__") and name in dir(object))


class _Meta(abc.ABCMeta):
    """A stub class: any attribute is another stub class; it subclasses, calls, compares,
    indexes and does arithmetic without complaint."""

    def __getattr__(cls, name: str) -> Any:
        if _probe(name):
            raise AttributeError(name)
        return stub(name)

    def __call__(cls, *a: Any, **k: Any) -> Any:
        if len(a) == 1 and not k and callable(a[0]) and not isinstance(a[0], _Meta):
            return a[0]  # used as a decorator
        return super().__call__(*a, **k)

    def __getitem__(cls, item: Any) -> Any:
        return cls

    def __setitem__(cls, key: Any, value: Any) -> None:
        pass

    def __or__(cls, other: Any) -> Any:
        return cls

    __ror__ = __or__

    def __iter__(cls) -> Any:
        return iter(())

    def __len__(cls) -> int:
        return 0

    def __int__(cls) -> int:
        return 0

    def __index__(cls) -> int:
        return 0

    def __float__(cls) -> float:
        return 0.0

    def __lt__(cls, other: Any) -> bool:
        return False

    __gt__ = __lt__

    def __le__(cls, other: Any) -> bool:
        return True

    __ge__ = __le__

    def __hash__(cls) -> int:
        return id(cls)

    def __eq__(cls, other: Any) -> bool:
        return cls is other

    def __add__(cls, other: Any) -> Any:
        return cls

    __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __add__
    __floordiv__ = __mod__ = __pow__ = __and__ = __rand__ = __add__

    def __neg__(cls) -> Any:
        return cls

    def __contains__(cls, item: Any) -> bool:
        return False


class Stub(metaclass=_Meta):
    __version__ = "2.9.0"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.any_schema()

    def __init__(self, *a: Any, **k: Any) -> None:
        pass

    def __call__(self, *a: Any, **k: Any) -> Any:
        if len(a) == 1 and not k and callable(a[0]):
            return a[0]
        return stub("call")()

    def __getattr__(self, name: str) -> Any:
        if _probe(name):
            raise AttributeError(name)
        return stub(name)

    def __getitem__(self, item: Any) -> Any:
        return stub("item")()

    def __setitem__(self, key: Any, value: Any) -> None:
        pass

    def __iter__(self) -> Any:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __int__(self) -> int:
        return 0

    def __index__(self) -> int:
        return 0

    def __float__(self) -> float:
        return 0.0

    def __hash__(self) -> int:
        return 0

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Stub)

    def __add__(self, other: Any) -> Any:
        return self

    __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __add__

    def __mro_entries__(self, bases: Any) -> Any:
        return (type(self),)


def stub(name: str) -> Any:
    return _Meta(name or "Stub", (Stub,), {"__module__": "stub"})


class StubModule(types.ModuleType):
    __version__ = "2.9.0"

    def __getattr__(self, name: str) -> Any:
        if _probe(name):
            raise AttributeError(name)
        value = stub(name)
        setattr(self, name, value)
        return value


class Stubs(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """First on ``sys.meta_path``: the modules named in ``names`` (a top-level name, or an
    exact module) are stubs."""

    def __init__(self, own: set[str], names: set[str]) -> None:
        self.own, self.names = own, set(names)

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname.split(".")[0] not in self.names and fullname not in self.names:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: Any) -> Any:
        module = StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: Any) -> None:
        pass

    def build(self, make: Callable[[], argparse.ArgumentParser]) -> argparse.ArgumentParser:
        """``make()``, stubbing each top-level module it needs that is not installed."""
        for _ in range(300):
            try:
                return make()
            except ModuleNotFoundError as e:
                top = (e.name or "").split(".")[0]
                if top in self.own and e.name not in self.names:
                    top = e.name  # a compiled part not in the wheel (Dynamo's Rust runtime)
                elif not top or top in self.own or top in self.names:
                    raise
                self.names.add(top)
                for k in [
                    k for k in sys.modules if k.split(".")[0] in self.own | {top.split(".")[0]}
                ]:
                    del sys.modules[k]
        raise RuntimeError("more than 300 missing modules")


# --- the engines' parsers -------------------------------------------------------------------
def sglang_parser() -> argparse.ArgumentParser:
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="python -m sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    return parser


def vllm_parser() -> argparse.ArgumentParser:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))


def dynamo_sglang_parser() -> argparse.ArgumentParser:
    """Dynamo's own flags of ``python -m dynamo.sglang`` (the rest are SGLang's)."""
    from dynamo.common.configuration.groups.runtime_args import DynamoRuntimeArgGroup
    from dynamo.sglang.backend_args import DynamoSGLangArgGroup

    parser = argparse.ArgumentParser(prog="python -m dynamo.sglang")
    DynamoRuntimeArgGroup().add_arguments(parser)
    DynamoSGLangArgGroup().add_arguments(parser)
    return parser


def dynamo_trtllm_parser() -> argparse.ArgumentParser:
    """Dynamo's ``python -m dynamo.trtllm`` (its TensorRT-LLM worker): the runtime's flags and
    the worker's own; TensorRT-LLM's LLM-API options go in the YAML of ``--extra-engine-args``
    (``tests/data/engines/trtllm.json``)."""
    from dynamo.common.configuration.groups.runtime_args import DynamoRuntimeArgGroup
    from dynamo.trtllm.backend_args import DynamoTrtllmArgGroup

    parser = argparse.ArgumentParser(prog="python -m dynamo.trtllm")
    DynamoRuntimeArgGroup().add_arguments(parser)
    DynamoTrtllmArgGroup().add_arguments(parser)
    return parser


def dynamo_frontend_parser() -> argparse.ArgumentParser:
    from dynamo.frontend.frontend_args import FrontendArgGroup

    parser = argparse.ArgumentParser(prog="python -m dynamo.frontend")
    FrontendArgGroup().add_arguments(parser)
    return parser


ENGINES: dict[str, tuple[set[str], Callable[[], argparse.ArgumentParser], set[str]]] = {
    "sglang": ({"sglang"}, sglang_parser, set()),
    "vllm": ({"vllm"}, vllm_parser, {"vllm.v1.executor"}),
    "dynamo-sglang": ({"dynamo", "sglang"}, dynamo_sglang_parser, {"dynamo._core"}),
    "dynamo-frontend": ({"dynamo"}, dynamo_frontend_parser, {"dynamo._core"}),
    "dynamo-trtllm": ({"dynamo"}, dynamo_trtllm_parser, {"dynamo._core"}),
}
"""Per engine: its own packages (never stubbed), its parser, and modules of its own to stub
(vLLM's executors pull in the model runner, which no flag needs; Dynamo's ``_core`` is its
Rust runtime; ``dynamo-trtllm`` stubs ``tensorrt_llm``, whose ``BuildConfig`` defaults only
some flags' defaults)."""


def _type_name(kind: Any) -> str:
    """A flag value's type, as the test's parser rebuilds it: int, float, json or str."""
    if kind is None or kind is str:
        return "str"
    if kind is int:
        return "int"
    if kind is float:
        return "float"
    name = getattr(kind, "__name__", "")
    if name == "human_readable_int":  # SGLang/vLLM: 4096 or 4k
        return "int"
    if name in ("loads", "parse_type") or "json" in name.lower() or "dataclass" in name:
        return "json"
    for cell in getattr(kind, "__closure__", None) or ():  # vLLM's optional_type(t)
        inner = cell.cell_contents
        if inner in (int, float, str) or callable(inner):
            found = _type_name(inner)
            if found != "str" or inner is str:
                return found
    return "str"


def flags(parser: argparse.ArgumentParser) -> list[dict[str, Any]]:
    out = []
    for a in parser._actions:
        if not a.option_strings or isinstance(a, argparse._HelpAction):
            continue
        takes = a.nargs != 0
        choices = None
        if a.choices is not None and not callable(a.choices):
            choices = sorted(str(c) for c in a.choices) or None  # [] from a stub: unknown
        out.append(
            {
                "names": list(a.option_strings),
                "value": takes,
                "type": _type_name(a.type) if takes else None,
                "choices": choices,
                "nargs": a.nargs if a.nargs not in (None, 0) else None,
                "deprecated": "deprecated" in type(a).__name__.lower()
                or (a.help or "").lower().startswith("deprecated"),
            }
        )
    return out


def accepted_values(engine: str) -> dict[str, list[str]]:
    """Values a flag's engine validates after parsing (the parser takes any string): vLLM's
    ``--kv-cache-dtype``, checked against ``vllm.config.cache.CacheDType``'s values
    (where the parser itself gave it no choices)."""
    if engine == "vllm":
        from typing import get_args

        from vllm.config.cache import CacheDType

        return {"--kv-cache-dtype": sorted(get_args(CacheDType))}
    return {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("engine", choices=sorted(ENGINES))
    ap.add_argument("--release", required=True, help="the installed release, as pinned")
    ap.add_argument("--source", action="append", default=[], help="FILE=URL, repeatable")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    own, make, stubbed = ENGINES[args.engine]
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")  # no GPU: vLLM's CPU platform
    finder = Stubs(own, stubbed)
    sys.meta_path.insert(0, finder)
    parser = finder.build(make)
    data = {
        "engine": args.engine,
        "release": args.release,
        "sources": dict(s.split("=", 1) for s in args.source),
        "command": parser.prog,
        "extracted_by": "benchmarks/engine_flags.py",
        "stubbed_modules": sorted(finder.names),
        "flags": flags(parser),
        "accepted_values": accepted_values(args.engine),
    }
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{args.out}: {len(data['flags'])} flags", file=sys.stderr)


if __name__ == "__main__":
    main()
