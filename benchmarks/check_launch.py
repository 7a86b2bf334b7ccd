"""Check the launch scripts ``pddplan export`` wrote against the engines installed here.

    python benchmarks/check_launch.py DIR

For each ``*.sh`` in DIR (``pddplan export PLAN --to sglang|vllm|trtllm|dynamo --out DIR``):
its ``exec`` command, parsed by the engine's own parser, built by the engine's own code
(``engine_flags.py``'s builders, or TensorRT-LLM's click commands, with the engine really
installed: no stub), and a TensorRT-LLM script's options YAML, each key checked against
``TorchLlmArgs``'s fields and the nested configs built by their own pydantic models; ``ok``,
the engine's own error, or ``not installed`` when the engine is not importable here. The tests
check the same commands against each engine's flags at its pinned release, kept as data
(``tests/data/engines/``); this script is for a machine that has an engine, to check the
release it has. Exit code 1 when a command an installed engine parses is refused. CI runs
it on no engine.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

PLACEHOLDERS = {"${NODE_RANK:-0}": "0", "${LEADER_ADDR:-127.0.0.1}": "127.0.0.1"}
"""Values for the scripts' shell placeholders (any value the engine's parser takes)."""


def command(script: str) -> list[str]:
    """The ``exec`` command of a launch script, as the shell splits it, placeholders filled
    (an unknown ``${...}`` is left as it is: the engine's parser then judges it)."""
    body = script.split("\nexec ", 1)[1].replace("\\\n", " ")
    tokens = [t for t in shlex.split(body) if t != "$@"]
    for key, value in PLACEHOLDERS.items():
        tokens = [t.replace(key, value) for t in tokens]
    return tokens


def parser_for(tokens: list[str]) -> tuple[str, Callable[[], argparse.ArgumentParser], int]:
    """(engine module, its parser's builder, where its flags start) for a command."""
    import engine_flags

    if tokens[:3] == ["python3", "-m", "dynamo.trtllm"]:
        return "dynamo", engine_flags.dynamo_trtllm_parser, 3
        return "sglang", engine_flags.sglang_parser, 3
    if tokens[:2] == ["vllm", "serve"]:
        return "vllm", engine_flags.vllm_parser, 3  # after the model, the first positional
    if tokens[:3] == ["python3", "-m", "dynamo.sglang"]:
        return "dynamo", engine_flags.dynamo_sglang_parser, 3
    if tokens[:3] == ["python3", "-m", "dynamo.frontend"]:
        return "dynamo", engine_flags.dynamo_frontend_parser, 3
    raise ValueError(f"not a command pddplan export writes: {' '.join(tokens[:3])}")


def trtllm_check(tokens: list[str], options: Path | None) -> str:
    """``trtllm-serve`` (or its ``disaggregated`` command) parsed by its own click command,
    and its options YAML checked against TensorRT-LLM's own models."""
    if importlib.util.find_spec("tensorrt_llm") is None:
        return "not installed: tensorrt_llm"
    import click
    from tensorrt_llm.commands.serve import disaggregated, serve

    command_, args = (
        (disaggregated, tokens[2:]) if tokens[1:2] == ["disaggregated"] else (serve, tokens[1:])
    )
    try:
        command_.make_context("trtllm-serve", list(args))
    except click.ClickException as e:
        return f"refused: {e.format_message()}"
    if options is None or not options.is_file():
        return "ok"
    return trtllm_options_check(options)


def trtllm_options_check(options: Path) -> str:
    import pydantic
    import yaml
    from tensorrt_llm.llmapi import llm_args

    data = yaml.safe_load(options.read_text()) or {}
    fields = llm_args.TorchLlmArgs.model_fields
    unknown = [k for k in data if k not in fields]
    if unknown:
        return f"refused: {options.name}: unknown options {' '.join(unknown)}"
    nested = {
        "kv_cache_config": llm_args.KvCacheConfig,
        "cache_transceiver_config": llm_args.CacheTransceiverConfig,
    }
    for key, model in nested.items():
        if key in data:
            try:
                model(**data[key])
            except pydantic.ValidationError as e:
                return f"refused: {options.name}: {key}: {e.errors()[0]['msg']}"
    return "ok"


def check(path: Path) -> str:
    """``ok``, ``not installed: ENGINE`` or what the engine's parser said."""
    tokens = command(path.read_text())
    if "trtllm-llmapi-launch" in tokens:  # a multi-host instance under mpirun
        tokens = tokens[tokens.index("trtllm-llmapi-launch") + 1 :]
    if tokens[:1] == ["trtllm-serve"]:
        return trtllm_check(tokens, path.with_suffix(".yaml"))
    module, build, start = parser_for(tokens)
    if importlib.util.find_spec(module) is None:
        return f"not installed: {module}"
    parser = build()
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            _, left = parser.parse_known_args(tokens[start:])
    except SystemExit:  # a wrong type or a value outside the choices
        return "refused: " + " ".join(said.getvalue().split())[-300:]
    unknown = [t for t in left if t.startswith("-")]
    if unknown and module != "dynamo":  # Dynamo's worker passes the rest to SGLang
        return f"refused: unknown flags {' '.join(unknown)}"
    return "ok"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path)
    folder = parser.parse_args().folder
    scripts = sorted(folder.glob("*.sh"))
    if not scripts:
        raise SystemExit(f"{folder}: no launch scripts (*.sh)")
    refused = 0
    for script in scripts:
        verdict = check(script)
        refused += verdict.startswith("refused")
        print(f"{script.name}: {verdict}")
    raise SystemExit(1 if refused else 0)


if __name__ == "__main__":
    main()
