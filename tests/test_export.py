"""``pddplan export`` (issue 52, items 4-5): launch files for SGLang, vLLM, TensorRT-LLM,
Dynamo and Kubernetes, checked without a GPU. Every generated command is parsed with a parser
built from the engine's own flag definitions at its pinned release (``tests/data/engines/*.json``,
made by ``benchmarks/engine_flags.py``, TensorRT-LLM's by hand from its source); every
TensorRT-LLM options YAML against a schema built from its LLM-API options; every manifest is
validated against the Kubernetes API schemas (``kubernetes-validate``), LeaderWorkerSet's CRD
schema (vendored) and DynamoGraphDeployment's (the part pddplan writes, by hand from Dynamo's
types); every file is read back and compared with the plan; ``route`` routes as the
simulator's router does."""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import re
import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

import pddplan
from pddplan.cli.app import app
from pddplan.cli.export import Target

ROOT = Path(__file__).resolve().parent.parent
ENGINES = Path(__file__).resolve().parent / "data" / "engines"
SMALL = ROOT / "scenarios" / "small-llama-8b.yaml"
PDD = ROOT / "scenarios" / "pdd-h100-h200.yaml"
runner = CliRunner()
PLACEHOLDERS = {
    "${NODE_RANK}": "1",
    "${LEADER_ADDR}": "10.0.0.1",
    "${DP_START_RANK}": "8",
    "${HOSTS}": "10.0.0.1:8,10.0.0.2:8",
}
"""Sample values for a multi-node command's placeholders (docs/export.md)."""


# --- parsers from the engines' own flag definitions ------------------------------------------
class Refused(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # an unknown flag, a wrong type, a value not in choices
        raise Refused(message)


def _json(text: str):
    try:
        return json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not JSON: {e}") from None


def engine_parser(name: str, positional: bool = True) -> _Parser:
    """A parser with exactly the flags of ``tests/data/engines/{name}.json``: their types,
    choices (and the values the engine validates after parsing) and nargs; a deprecated
    flag is refused."""
    data = json.loads((ENGINES / f"{name}.json").read_text())
    accepted = data.get("accepted_values", {})
    p = _Parser(prog=data["command"], add_help=False, allow_abbrev=False)
    if positional:
        p.add_argument("positional", nargs="*")
    types = {"int": int, "float": float, "str": str, "json": _json}
    for f in data["flags"]:
        names = [n for n in f["names"] if n.startswith("-")]
        if f["deprecated"]:
            p.add_argument(*names, action=_DeprecatedAction, nargs=0)
        elif not f["value"]:
            p.add_argument(*names, action="store_true")
        else:
            choices = f["choices"] or next((accepted[n] for n in names if n in accepted), None)
            kind = types[f["type"]]
            p.add_argument(*names, type=kind, choices=choices, nargs=f["nargs"])
    return p


class _DeprecatedAction(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        raise Refused(f"{option_string} is deprecated at this release")


LLM_API_TYPES = {
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "str": "string",
    "object": "object",
    "array": "array",
}


def _option_schema(spec: dict) -> dict:
    out: dict = {"type": LLM_API_TYPES[spec["type"]]}
    if spec.get("choices") or spec.get("accepted"):
        out["enum"] = spec.get("choices") or spec["accepted"]
    for bound in ("minimum", "maximum"):
        if bound in spec:
            out[bound] = spec[bound]
    if "fields" in spec:
        out.update(_options_schema(spec["fields"]))
    return out


def _options_schema(fields: dict) -> dict:
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {k: _option_schema(v) for k, v in fields.items()},
    }


def trtllm_options_schema() -> dict:
    """A JSON schema with exactly the LLM-API options of ``trtllm-llm-api.json``: an unknown
    key, a wrong type, a value outside the choices (or the values TensorRT-LLM accepts
    after parsing) fail."""
    data = json.loads((ENGINES / "trtllm-llm-api.json").read_text())
    return _options_schema(data["options"])


def trtllm_disagg_schema() -> dict:
    """``trtllm-serve disaggregated``'s configuration, from the same file."""
    data = json.loads((ENGINES / "trtllm-llm-api.json").read_text())["disaggregated"]
    schema = _options_schema(data["top"])
    servers = _options_schema(data["servers"])
    for key in ("context_servers", "generation_servers"):
        schema["properties"][key] = servers
    return schema


def command_tokens(script: str) -> list[str]:
    """The ``exec`` command of a launch script, as the shell splits it, placeholders filled."""
    body = script.split("\nexec ", 1)[1].replace("\\\n", " ")
    tokens = [t for t in shlex.split(body) if t != "$@"]
    out = []
    for t in tokens:
        for k, v in PLACEHOLDERS.items():
            t = t.replace(k, v)
        assert "${" not in t, f"an unknown placeholder in {t}"
        out.append(t)
    return out


MPI = ["mpirun", "--allow-run-as-root", "-np"]


def parse_command(tokens: list[str]) -> tuple[str, argparse.Namespace]:
    """(engine, parsed flags) of a command, parsed with its engine's parser; a TensorRT-LLM
    command under ``mpirun`` gets its rank count as ``np``."""
    if tokens[:3] == MPI:
        assert tokens[4] == "-H" and tokens[6] == "trtllm-llmapi-launch", tokens[:7]
        engine, a = parse_command(tokens[7:])
        a.np = int(tokens[3])
        return engine, a
    if tokens[:2] == ["trtllm-serve", "disaggregated"]:
        return "trtllm-disaggregated", engine_parser(
            "trtllm-serve-disaggregated", positional=False
        ).parse_args(tokens[2:])
    if tokens[:1] == ["trtllm-serve"]:
        a = engine_parser("trtllm-serve").parse_args(tokens[1:])
        assert len(a.positional) == 1  # the model
        return "trtllm", a
    if tokens[:3] == ["python3", "-m", "dynamo.trtllm"]:
        a = engine_parser("dynamo-trtllm", positional=False).parse_args(tokens[3:])
        return "dynamo-trtllm", a
    if tokens[:3] == ["python3", "-m", "sglang.launch_server"]:
        return "sglang", engine_parser("sglang").parse_args(tokens[3:])
    if tokens[:2] == ["vllm", "serve"]:
        return "vllm", engine_parser("vllm").parse_args(tokens[2:])
    if tokens[:3] == ["python3", "-m", "dynamo.sglang"]:
        own, rest = engine_parser("dynamo-sglang", positional=False).parse_known_args(tokens[3:])
        assert (own.namespace is None) == (own.endpoint is None)  # both, or the operator's
        assert own.endpoint is None or own.endpoint.startswith("dyn://")
        return "sglang", engine_parser("sglang").parse_args(rest)
    if tokens[:3] == ["python3", "-m", "dynamo.frontend"]:
        return "dynamo-frontend", engine_parser("dynamo-frontend").parse_args(tokens[3:])
    raise AssertionError(f"unknown program {tokens[:3]}")


# --- plans --------------------------------------------------------------------------------------
def _solve(scenario: Path, out: Path, *options: str) -> Path:
    r = runner.invoke(app, ["solve", str(scenario), "--out", str(out), "-q", *options])
    assert r.exit_code == 0, r.output
    return out


@pytest.fixture(scope="module")
def small_plan(tmp_path_factory) -> Path:
    return _solve(SMALL, tmp_path_factory.mktemp("small") / "plan.json")


@pytest.fixture(scope="module")
def pdd_plan(tmp_path_factory) -> Path:
    return _solve(PDD, tmp_path_factory.mktemp("pdd") / "plan.json")


@pytest.fixture(scope="module")
def ideal_pdd_plan(tmp_path_factory) -> Path:
    """The README's scenario planned with the ``ideal`` engine, which launches anything:
    CP16+EP16 prefill over two hosts."""
    return _solve(PDD, tmp_path_factory.mktemp("ideal") / "plan.json", "--engine", "ideal")


def _pool_figures(plan_path: Path) -> dict[str, dict]:
    """Per pool file stem: what the plan says of it (its pool, layout, chunk, batch)."""
    plan = pddplan.read_plan(plan_path)
    problem = pddplan.plan_problem(plan)
    figures = {(p["datacenter"], p["role"], p["chip"]): p for p in plan.data["pools"]}
    out = {}
    for pool in plan.data["deployment"]["pools"]:
        inst = problem.instance(
            pool["chip"],
            pool["gpus_per_instance"],
            pool["context_parallel"],
            pool.get("attention_tp"),
            role=pool["role"],
        )
        name = f"{pool['role'].replace('_', '-')}-{pool['datacenter']}-{pool['chip']}"
        batch = figures[(pool["datacenter"], pool["role"], pool["chip"])]["decode_batch"]
        if pool["role"] == "relay_decode":
            batch = problem.decode_point(
                pool["chip"], pool["gpus_per_instance"], role="relay_decode"
            )[0]
        out[name] = {
            "pool": pool,
            "layout": inst.layout,
            "chunk": inst.cal.knobs.prefill_chunk_tokens * inst.layout.cp,
            "batch": batch,
            "kv": problem.scenario.kv_dtype or problem.model.kv_dtype,
        }
    return out


def check_against_plan(plan_path: Path, files: dict[str, str], target: str) -> int:
    """Read every generated file back and compare it with the plan: GPUs per instance (the
    parallelism product), instances, KV dtype, batch and chunk limits, router thresholds.
    Returns the commands checked."""
    figures = _pool_figures(plan_path)
    plan = json.loads(plan_path.read_text())
    rules = json.loads(files["router.json"])
    assert rules["relay_if_payload_mb_above"] == plan["router"]["relay_if_payload_mb_above"]
    assert (
        rules["singular_if_max_tokens_at_most"] == plan["router"]["singular_if_max_tokens_at_most"]
    )
    assert rules["payload"]["kv_bytes_per_token"] == plan["router"]["kv_bytes_per_token"]
    assert rules["payload"]["fixed_bytes"] == plan["router"]["fixed_bytes"]
    handoff = plan["deployment"]["handoff"]
    assert rules["handoff"] == {
        "catch_up_if_eager_tokens_above": handoff["catch_up_above_tokens"],
        "chunk_tokens": handoff["chunk_tokens"],
    }
    checked = 0
    for name, text in files.items():
        if name in ("router.json", "frontend.sh", "disagg-server.sh"):
            if name.endswith(".sh"):
                parse_command(command_tokens(text))
            continue
        if name == "disagg.yaml":
            check_disagg(figures, yaml.safe_load(text))
            continue
        if name == "dynamo-graph.yaml":
            checked += check_graph(figures, text)
            continue
        if name.endswith(".yaml") and target != "k8s":
            continue  # a TensorRT-LLM pool's options: read with its script
        fig = figures[name.rsplit(".", 1)[0]]
        pool = fig["pool"]
        nodes = 1
        if name.endswith(".yaml"):
            (doc,) = list(yaml.safe_load_all(text))
            spec = doc["spec"]
            if doc["kind"] == "Deployment":
                pod, replicas = spec["template"]["spec"], spec["replicas"]
                container = pod["containers"][0]
                tokens = container["command"] + container["args"]
            else:
                lwt = spec["leaderWorkerTemplate"]
                pod, replicas, nodes = lwt["leaderTemplate"]["spec"], spec["replicas"], lwt["size"]
                container = pod["containers"][0]
                tokens = command_tokens(container["args"][0])
            gpus = next(iter(container["resources"]["limits"].values()))
            assert pod["nodeSelector"]["pddplan/datacenter"] == pool["datacenter"]
            assert replicas == pool["instances"]
            assert gpus * nodes == pool["gpus_per_instance"], name
        else:
            tokens = command_tokens(text)
            assert f"{pool['instances']} instance(s) x {pool['gpus_per_instance']} x" in text
        if target == "dynamo":  # a launch script names its Dynamo namespace and endpoint
            assert "--namespace" in tokens and "--endpoint" in tokens
        options = None
        if f"{name[:-3]}.yaml" in files and target != "k8s":
            options = yaml.safe_load(files[f"{name[:-3]}.yaml"])
        check_command(fig, tokens, options)
        checked += 1
    return checked


def check_command(fig: dict, tokens: list[str], options: dict | None, graph: bool = False) -> None:
    """One pool's command (with its TensorRT-LLM options) against what the plan says of it
    (``graph``: a worker's args in a DynamoGraphDeployment)."""
    import jsonschema

    pool, lay = fig["pool"], fig["layout"]
    engine, a = parse_command(tokens)
    g = pool["gpus_per_instance"]
    if engine in ("trtllm", "dynamo-trtllm"):
        jsonschema.validate(options, trtllm_options_schema())
        dp = g if options["enable_attention_dp"] else 1
        if engine == "trtllm":
            tp, ep, batch, tokens_ = (
                a.tensor_parallel_size,
                a.moe_expert_parallel_size,
                a.max_batch_size,
                a.max_num_tokens,
            )
            assert a.config.endswith(".yaml") and a.backend == "pytorch"
        else:
            tp, ep, batch, tokens_ = (
                a.tensor_parallel_size,
                a.expert_parallel_size,
                a.max_batch_size,
                a.max_num_tokens,
            )
            assert bool(a.enable_attention_dp) == (dp > 1) and a.extra_engine_args.endswith(".yaml")
            assert a.disaggregation_mode == ("prefill" if pool["role"] == "prefill" else "decode")
        assert tp * (a.pipeline_parallel_size or 1) == g  # the instance's world
        assert dp * lay.attn_tp * lay.cp == g and lay.cp == 1
        assert (ep or 1) == lay.ep
        assert a.gpus_per_node * -(-g // min(g, 8)) == g
        if g > 8 and not graph:
            assert a.np == g  # one MPI world over the instance's hosts
        assert options["kv_cache_config"]["dtype"] == {"bf16": "auto", "fp8": "fp8"}[fig["kv"]]
        assert options["cache_transceiver_config"]["backend"] == "NIXL"
        assert tokens_ == fig["chunk"]
        if pool["role"] == "prefill":
            assert batch is None
        else:
            assert batch == max(1, fig["batch"] // dp) and batch * dp <= max(fig["batch"], dp)
        return
    if engine == "sglang":
        assert a.tp_size == g  # SGLang's world size per instance
        dp = a.dp_size if a.enable_dp_attention else 1
        assert dp * lay.attn_tp * lay.cp == g and (a.attn_cp_size or 1) == lay.cp
        assert (a.ep_size or 1) == lay.ep
        assert a.kv_cache_dtype == {"bf16": "bf16", "fp8": "fp8_e4m3"}[fig["kv"]]
        if pool["role"] == "prefill":
            assert a.chunked_prefill_size == fig["chunk"] * dp
            assert a.disaggregation_mode == "prefill"
        else:
            assert a.max_running_requests == fig["batch"]
            assert a.disaggregation_mode == "decode"
        # in a DynamoGraphDeployment the operator sets a multinode worker's ranks
        assert a.nnodes == (None if graph else (-(-g // min(g, 8)) if g > 8 else None))
    else:
        dp, pcp = a.data_parallel_size or 1, a.prefill_context_parallel_size or 1
        assert a.tensor_parallel_size * pcp * dp == g
        assert bool(a.enable_expert_parallel) == (lay.ep > 1)
        assert a.kv_cache_dtype == {"bf16": "bfloat16", "fp8": "fp8"}[fig["kv"]]
        assert a.max_num_batched_tokens == fig["chunk"]
        if fig["batch"] is not None:
            assert a.max_num_seqs == max(1, fig["batch"] // dp)
            assert a.max_num_seqs * dp <= max(fig["batch"], dp)  # never above the plan's
        assert a.kv_transfer_config["kv_connector"] == "NixlConnector"


def check_disagg(figures: dict, doc: dict) -> None:
    """``disagg.yaml`` against its schema and the plan: one context server per prefill
    instance, one generation server per main-decode instance."""
    import jsonschema

    jsonschema.validate(doc, trtllm_disagg_schema())
    count = {"prefill": 0, "main_decode": 0}
    for fig in figures.values():
        if fig["pool"]["role"] in count:
            count[fig["pool"]["role"]] += fig["pool"]["instances"]
    for key, role in (("context_servers", "prefill"), ("generation_servers", "main_decode")):
        assert doc[key]["num_instances"] == len(doc[key]["urls"]) == count[role]


DGD_SCHEMA = ENGINES / "dynamo-dgd-v1alpha1.subset.schema.json"


def validate_graph(doc: dict) -> None:
    """A DynamoGraphDeployment against the schema of the part pddplan writes, and each
    service's pod (its extraPodSpec with mainContainer as its container) against the
    Kubernetes API's."""
    import jsonschema
    import kubernetes_validate

    jsonschema.validate(doc, json.loads(DGD_SCHEMA.read_text()))
    for service in doc["spec"]["services"].values():
        spec = copy.deepcopy(service["extraPodSpec"])
        spec["containers"] = [spec.pop("mainContainer")]
        pod = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}}
        pod["template"] = {"spec": spec}
        kubernetes_validate.validate(pod, K8S_VERSION, strict=True)


def check_graph(figures: dict, text: str) -> int:
    """``dynamo-graph.yaml`` validated and read back: per pool a worker service with its
    instances as replicas, GPUs per pod x nodes = GPUs per instance, its datacenter and GPU
    model as node selectors, its args parsed and checked as a launch script's. Returns the
    services checked."""
    import kubernetes_validate

    docs = list(yaml.safe_load_all(text))
    (graph,) = [d for d in docs if d["kind"] == "DynamoGraphDeployment"]
    validate_graph(graph)
    maps = {}
    for d in docs:
        if d["kind"] == "ConfigMap":
            kubernetes_validate.validate(d, K8S_VERSION, strict=True)
            maps = d["data"]
    services = graph["spec"]["services"]
    assert services["Frontend"]["componentType"] == "frontend"
    engine = graph["spec"]["backendFramework"]
    for name, fig in figures.items():
        service, pool = services[name], fig["pool"]
        nodes = service.get("multinode", {"nodeCount": 1})["nodeCount"]
        assert service["replicas"] == pool["instances"]
        assert int(service["resources"]["limits"]["gpu"]) * nodes == pool["gpus_per_instance"]
        assert service["subComponentType"] == ("prefill" if pool["role"] == "prefill" else "decode")
        spec = service["extraPodSpec"]
        assert spec["nodeSelector"]["pddplan/datacenter"] == pool["datacenter"]
        main = spec["mainContainer"]
        assert main["command"] == ["python3", "-m", f"dynamo.{engine}"]
        assert "--namespace" not in main["args"] and "--endpoint" not in main["args"]
        options = None
        if engine == "trtllm":
            path = main["args"][main["args"].index("--extra-engine-args") + 1]
            options = yaml.safe_load(maps[path.rsplit("/", 1)[1]])
        check_command(fig, main["command"] + main["args"], options, graph=True)
    return len(figures)


# --- the engines' flags ---------------------------------------------------------------------------
def test_engine_data_names_its_release_and_source():
    for name in ("sglang", "vllm", "dynamo-sglang", "dynamo-frontend", "dynamo-trtllm"):
        data = json.loads((ENGINES / f"{name}.json").read_text())
        assert re.fullmatch(r"\d+\.\d+\.\d+", data["release"]), name
        assert data["sources"] and all(
            u.startswith("https://github.com/") for u in data["sources"].values()
        )
        assert len(data["flags"]) > 50
    from pddplan.deploy.engines import RELEASES

    assert RELEASES["sglang"][0] == json.loads((ENGINES / "sglang.json").read_text())["release"]
    assert RELEASES["vllm"][0] == json.loads((ENGINES / "vllm.json").read_text())["release"]
    assert (
        RELEASES["dynamo"][0] == json.loads((ENGINES / "dynamo-sglang.json").read_text())["release"]
    )
    assert RELEASES["dynamo-trtllm"][0] == RELEASES["dynamo"][0]


def test_trtllm_data_names_the_source_it_was_read_from():
    """TensorRT-LLM's flags were written by hand from its source (no wheel or tag reachable):
    each file names the commit of the file it was read from, and the export's pin is it."""
    from pddplan.deploy.engines import RELEASES

    for name in ("trtllm-serve", "trtllm-serve-disaggregated"):
        data = json.loads((ENGINES / f"{name}.json").read_text())
        assert re.fullmatch(r"[0-9a-f]{40}", data["commit"])
        (url,) = data["sources"].values()
        assert data["commit"] in url and url == RELEASES["trtllm"][1]
        assert RELEASES["trtllm"][0] == data["release"] == f"commit {data['commit'][:7]}"
        assert "by hand" in data["extracted_by"]
    api = json.loads((ENGINES / "trtllm-llm-api.json").read_text())
    assert {"tensor_parallel_size", "enable_attention_dp", "kv_cache_config"} <= set(api["options"])
    assert len(api["options"]) > 40 and "by hand" in api["extracted_by"]


@pytest.mark.parametrize(
    ("engine", "argv"),
    [
        ("sglang", ["--tp-sise", "8"]),  # no such flag
        ("sglang", ["--tp-size", "eight"]),  # not an int
        ("sglang", ["--kv-cache-dtype", "fp9"]),  # not one of its choices
        ("sglang", ["--disaggregation-mode", "relay"]),
        ("vllm", ["--kv-cache-dtype", "fp8_e4m3fn"]),  # not a CacheDType
        ("vllm", ["--enable-expert-paralel"]),
        ("vllm", ["--kv-transfer-config", "{kv_connector: Nixl"]),  # not JSON
        ("vllm", ["--max-num-seqs", "1.5"]),
        ("trtllm-serve", ["m", "--tp-size", "8"]),  # its flags are spelled with underscores
        ("trtllm-serve", ["m", "--backend", "torch"]),
        ("trtllm-serve", ["m", "--max_batch_size", "1.5"]),
        ("trtllm-serve", ["m", "--kv_cache_dtype", "fp8"]),  # an LLM-API option, not a flag
        ("dynamo-trtllm", ["--disaggregation-mode", "relay"]),
        ("dynamo-trtllm", ["--tensor-parallel-size", "eight"]),
        ("trtllm-serve-disaggregated", ["-c", "d.yaml", "--port", "8000"]),
    ],
)
def test_a_wrong_flag_fails(engine, argv):
    with pytest.raises(Refused):
        engine_parser(engine).parse_args(argv)


def test_a_right_flag_passes():
    a = engine_parser("sglang").parse_args(["--tp-size", "8", "--kv-cache-dtype", "fp8_e4m3"])
    assert a.tp_size == 8
    a = engine_parser("trtllm-serve").parse_args(["m", "--tp_size", "8", "--ep_size", "8"])
    assert a.tensor_parallel_size == 8 and a.moe_expert_parallel_size == 8
    a = engine_parser("vllm").parse_args(["m", "-tp", "4", "--kv-cache-dtype", "fp8"])
    assert a.tensor_parallel_size == 4


TRTLLM_OPTIONS = {
    "enable_attention_dp": True,
    "kv_cache_config": {"dtype": "fp8"},
    "cache_transceiver_config": {"backend": "NIXL"},
    "enable_chunked_prefill": True,
}


@pytest.mark.parametrize(
    "change",
    [
        {"enable_attention_dp_size": 8},  # no such option
        {"max_batch_size": "big"},  # not an int
        {"enable_attention_dp": "yes"},  # not a bool
        {"cache_transceiver_config": {"backend": "TCP"}},  # not one of its backends
        {"kv_cache_config": {"dtype": "bfloat16"}},  # TensorRT-LLM takes auto, fp8, nvfp4
        {"kv_cache_config": {"dtyp": "fp8"}},  # no such key in KvCacheConfig
        {"kv_cache_config": {"free_gpu_memory_fraction": 1.5}},  # above 1
    ],
)
def test_a_wrong_trtllm_option_fails(change):
    import jsonschema

    jsonschema.validate(TRTLLM_OPTIONS, trtllm_options_schema())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(TRTLLM_OPTIONS | change, trtllm_options_schema())


# --- every target, read back ------------------------------------------------------------------
@pytest.mark.slow  # the default run stays under 90 s on a shared machine
@pytest.mark.parametrize("target", ["sglang", "vllm", "trtllm", "dynamo", "k8s"])
def test_every_target_parses_and_matches_the_plan(small_plan, target):
    files = pddplan.export_plan(small_plan, target)
    assert set(files) >= {"router.json"}
    # prefill and main decode; for dynamo, their scripts and their DynamoGraphDeployment services
    assert check_against_plan(small_plan, files, target) == (4 if target == "dynamo" else 2)
    if target == "trtllm":
        assert {"disagg.yaml", "disagg-server.sh", "prefill-east-h100-sxm.yaml"} <= set(files)
    if target == "dynamo":
        graph = yaml.safe_load(files["dynamo-graph.yaml"].split("\n---\n", 1)[1])
        assert graph["spec"]["backendFramework"] == "sglang"


def _as_trtllm_plan(plan_path: Path, tmp_path: Path) -> Path:
    """The plan with its engine profile said to be trtllm (what ``solve --engine trtllm``
    records), the rest as it is."""
    data = json.loads(plan_path.read_text())
    data["engine"]["id"] = "trtllm"
    out = tmp_path / "trtllm-plan.json"
    out.write_text(json.dumps(data))
    return out


def test_dynamo_runs_trtllm_workers_for_a_trtllm_plan(small_plan, tmp_path):
    """A plan made with the trtllm engine profile: Dynamo's TensorRT-LLM worker, its options
    YAML beside each script and, in the DynamoGraphDeployment, in a ConfigMap its pods mount."""
    plan = _as_trtllm_plan(small_plan, tmp_path)
    files = pddplan.export_plan(plan, "dynamo")
    assert "python3 -m dynamo.trtllm" in files["prefill-east-h100-sxm.sh"]
    assert "prefill-east-h100-sxm.yaml" in files
    assert check_against_plan(plan, files, "dynamo") == 4
    kinds = [d["kind"] for d in yaml.safe_load_all(files["dynamo-graph.yaml"])]
    assert kinds == ["ConfigMap", "DynamoGraphDeployment"]
    assert "tensorrtllm-runtime:1.6.1" in files["dynamo-graph.yaml"]
    sglang = pddplan.export_plan(small_plan, "dynamo")  # the same plan as SGLang's: its worker
    assert "python3 -m dynamo.sglang" in sglang["prefill-east-h100-sxm.sh"]


def test_the_graph_schema_refuses_what_the_operator_would():
    """The DynamoGraphDeployment check can fail: each broken copy is refused."""
    import jsonschema
    import kubernetes_validate

    graph = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": "g"},
        "spec": {
            "backendFramework": "sglang",
            "services": {
                "w": {
                    "componentType": "worker",
                    "replicas": 2,
                    "resources": {"limits": {"gpu": "8"}},
                    "multinode": {"nodeCount": 2},
                    "extraPodSpec": {
                        "nodeSelector": {"pddplan/datacenter": "east"},
                        "mainContainer": {
                            "name": "main",
                            "image": "i",
                            "args": ["--tp-size", "16"],
                        },
                    },
                }
            },
        },
    }
    validate_graph(graph)
    for path, value in [
        (("multinode", "nodeCount"), 1),  # a multinode service has 2 nodes or more
        (("replicas",), "two"),
        (("resources", "limits", "gpu"), 8),  # a string in Dynamo's ResourceItem
        (("replica",), 2),  # no such field
    ]:
        broken = copy.deepcopy(graph)
        where = broken["spec"]["services"]["w"]
        for key in path[:-1]:
            where = where[key]
        where[path[-1]] = value
        with pytest.raises(jsonschema.ValidationError):
            validate_graph(broken)
    broken = copy.deepcopy(graph)
    broken["spec"]["backendFramework"] = "tgi"
    with pytest.raises(jsonschema.ValidationError):
        validate_graph(broken)
    broken = copy.deepcopy(graph)
    broken["spec"]["services"]["w"]["extraPodSpec"]["nodeSelector"]["pddplan/datacenter"] = 1
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_graph(broken)


def test_node_selectors_name_the_gpu_model_and_the_datacenter(small_plan):
    """GFD's product strings for the plan's chips (H100 SXM in east, A100 SXM 80GB in west),
    the datacenter by pddplan's node label; the same in the DynamoGraphDeployment."""
    k8s = pddplan.export_plan(small_plan, "k8s")
    want = {
        "prefill-east-h100-sxm": {
            "pddplan/datacenter": "east",
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        },
        "main-decode-west-a100-80g-sxm": {
            "pddplan/datacenter": "west",
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        },
    }
    for name, selector in want.items():
        (doc,) = list(yaml.safe_load_all(k8s[f"{name}.yaml"]))
        assert doc["spec"]["template"]["spec"]["nodeSelector"] == selector
        assert "placed by nodeSelector" in k8s[f"{name}.yaml"]
    graph = yaml.safe_load(pddplan.export_plan(small_plan, "dynamo")["dynamo-graph.yaml"])
    for name, selector in want.items():
        assert graph["spec"]["services"][name]["extraPodSpec"]["nodeSelector"] == selector


def _pool(chip: str, layout, role: str = "main_decode", gpus_per_node: int = 8):
    from pddplan.deploy.launch import PoolLaunch

    spec = pddplan.load_catalogs().hardware.chips[chip]
    return PoolLaunch(
        f"{role.replace('_', '-')}-x-{chip}", role, "x", spec, 2, layout, gpus_per_node,
        "bf16", 64, 4096, False, "gqa",
    )  # fmt: skip


def test_node_selectors_of_amd_and_unlabelled_chips():
    """An AMD chip by AMD's node labeller's label; a chip whose label value is not known gets
    the datacenter alone, and the manifest's note says so."""
    from pddplan.deploy.placement import node_selector, placement_note
    from pddplan.model.instance import Layout

    amd = _pool("mi300x", Layout(8, 8, 8, 1))
    assert node_selector(amd) == {
        "pddplan/datacenter": "x",
        "amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM",
    }
    h800 = _pool("h800", Layout(8, 8, 8, 1))
    assert node_selector(h800) == {"pddplan/datacenter": "x"}
    assert "no GPU model label value is known for h800" in placement_note(h800)


def test_trtllm_refuses_what_it_cannot_launch():
    """Prefill context parallelism (TensorRT-LLM's is Helix, for generation servers),
    attention DP over tensor-parallel groups, AMD chips: one line each naming the pool, the
    part of the layout and the nearest option; the same pools launch on vLLM."""
    from pddplan.deploy.engines import cannot_launch
    from pddplan.model.instance import Layout

    cp = _pool("h100-sxm", Layout(16, 1, 8, 16, cp=16), role="prefill")
    (line,) = cannot_launch(cp, "trtllm")
    assert "prefill-x-h100-sxm" in line and "context parallelism CP16 on prefill" in line
    assert "Helix" in line and "nearest: --tp_size 16 with enable_attention_dp" in line
    dp_tp = _pool("h200-sxm", Layout(16, 2, 8, 16))
    (line,) = cannot_launch(dp_tp, "trtllm")
    assert "attention DP8 x TP2" in line and "nearest: DP16+EP16" in line
    (line,) = cannot_launch(_pool("mi300x", Layout(8, 8, 8, 1)), "trtllm")
    assert "NVIDIA GPUs only" in line and "nearest: sglang or vllm" in line
    for pool in (cp, dp_tp):
        assert cannot_launch(pool, "vllm") == []
    assert cannot_launch(_pool("h200-sxm", Layout(16, 1, 8, 16)), "trtllm") == []


def test_the_targets_are_the_cli_choices():
    assert tuple(t.value for t in Target) == pddplan.EXPORT_TARGETS


def test_kubernetes_manifests_validate(small_plan):
    import kubernetes_validate

    for engine in ("sglang", "vllm"):
        files = pddplan.export_plan(small_plan, "k8s", engine=engine)
        for name, text in files.items():
            if name.endswith(".yaml"):
                for doc in yaml.safe_load_all(text):
                    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    broken = yaml.safe_load(files["prefill-east-h100-sxm.yaml"].split("\n---\n", 1)[-1])
    broken["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


K8S_VERSION = "1.33.0"
"""The Kubernetes API whose schemas the manifests are validated against."""


def validate_lws(doc: dict) -> None:
    """A LeaderWorkerSet against its CRD's schema (lws v0.10.0, vendored), and each of its pod
    templates against the Kubernetes API's."""
    import jsonschema
    import kubernetes_validate

    schema = json.loads(
        gzip.decompress((ENGINES / "lws-v0.10.0-leaderworkerset.schema.json.gz").read_bytes())
    )
    jsonschema.validate(doc, schema)
    lwt = doc["spec"]["leaderWorkerTemplate"]
    for key in ("leaderTemplate", "workerTemplate"):
        pod = {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": "t"},
            "template": lwt[key],
        }
        kubernetes_validate.validate(pod, K8S_VERSION, strict=True)


@pytest.mark.slow
def test_the_pdd_plan_exports_to_vllm_and_k8s(ideal_pdd_plan):
    """DeepSeek-V4-Pro with ``ideal``'s layouts: CP16+EP16 prefill and DP16+EP16 relay
    decode over two hosts each (vLLM's prefill context parallelism and multi-node data
    parallelism), DP8+EP8 main decode; the multi-host pools as LeaderWorkerSets."""
    import jsonschema

    pdd_plan = ideal_pdd_plan
    files = pddplan.export_plan(pdd_plan, "vllm")
    assert check_against_plan(pdd_plan, files, "vllm") == 3
    assert "--prefill-context-parallel-size 16" in files["prefill-cluster-a-h100-sxm.sh"]
    rld = files["relay-decode-cluster-a-h100-sxm.sh"]
    assert "--data-parallel-size-local 8" in rld and "DP_START_RANK=$((NODE_RANK * 8))" in rld
    k8s = pddplan.export_plan(pdd_plan, "k8s", engine="vllm")
    assert check_against_plan(pdd_plan, k8s, "k8s") == 3
    kinds = {}
    for name, text in k8s.items():
        if name.endswith(".yaml"):
            (doc,) = list(yaml.safe_load_all(text))
            kinds[name] = doc["kind"]
            if doc["kind"] == "LeaderWorkerSet":
                validate_lws(doc)
                assert "10 Gbps bought, RTT 30 ms" in text
                broken = copy.deepcopy(doc)
                broken["spec"]["leaderWorkerTemplate"]["size"] = "two"
                with pytest.raises(jsonschema.ValidationError):
                    validate_lws(broken)
    assert sorted(kinds.values()) == ["Deployment", "LeaderWorkerSet", "LeaderWorkerSet"]
    rld = yaml.safe_load(k8s["relay-decode-cluster-a-h100-sxm.yaml"])
    for key in ("leaderTemplate", "workerTemplate"):
        pod = rld["spec"]["leaderWorkerTemplate"][key]["spec"]
        assert pod["nodeSelector"] == {
            "pddplan/datacenter": "cluster-a",
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        }


@pytest.mark.slow
def test_the_pdd_plan_on_trtllm(ideal_pdd_plan, tmp_path):
    """TensorRT-LLM refuses the ``ideal`` plan's CP16 prefill pool (one line, exit 2,
    nothing written); with
    that pool laid out as TensorRT-LLM's nearest option (DP16+EP16), the two-host relay
    decode runs as one MPI world from its leader, and in a DynamoGraphDeployment as a
    multinode service of 2 nodes x 8 GPUs."""
    from dataclasses import replace

    from pddplan.deploy.files import export_files
    from pddplan.deploy.launch import launch_plan
    from pddplan.model.instance import Layout

    pdd_plan = ideal_pdd_plan
    out = tmp_path / "launch"
    r = runner.invoke(app, ["export", str(pdd_plan), "--to", "trtllm", "--out", str(out)])
    assert r.exit_code == 2 and not out.exists()
    (line,) = _errors(r)
    assert "prefill-cluster-a-h100-sxm" in line and "CP16 on prefill" in line
    lp = launch_plan(pddplan.read_plan(pdd_plan))
    pools = tuple(
        replace(p, layout=Layout(16, 1, 8, 16)) if p.role == "prefill" else p for p in lp.pools
    )
    figures = _pool_figures(pdd_plan)
    name = "relay-decode-cluster-a-h100-sxm"
    files = export_files(replace(lp, pools=pools), "trtllm")
    script = files[f"{name}.sh"]
    assert ': "${HOSTS:?' in script and "--gpus_per_node 8" in script
    check_command(figures[name], command_tokens(script), yaml.safe_load(files[f"{name}.yaml"]))
    check_disagg(figures, yaml.safe_load(files["disagg.yaml"]))
    trtllm = dict.fromkeys(lp.engines, "trtllm")
    files = export_files(replace(lp, pools=pools, engine="trtllm", engines=trtllm), "dynamo")
    check_command(
        figures[name], command_tokens(files[f"{name}.sh"]), yaml.safe_load(files[f"{name}.yaml"])
    )
    docs = list(yaml.safe_load_all(files["dynamo-graph.yaml"]))
    graph = docs[-1]
    validate_graph(graph)
    service = graph["spec"]["services"][name]
    assert service["multinode"] == {"nodeCount": 2} and service["resources"]["limits"]["gpu"] == "8"
    main = service["extraPodSpec"]["mainContainer"]
    options = yaml.safe_load(docs[0]["data"][f"{name}.yaml"])
    check_command(figures[name], main["command"] + main["args"], options, graph=True)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["vllm", "trtllm"])
def test_a_plan_made_with_an_engine_launches_on_it(engine, tmp_path):
    """The README's scenario planned with each released engine's profile exports to that
    engine without a refusal: the planner left out what its release cannot launch
    (TensorRT-LLM: no prefill CP, no data-parallel attention over tensor-parallel groups, so
    the prefill's heads split over the whole instance)."""
    plan = _solve(PDD, tmp_path / "plan.json", "--engine", engine)
    files = pddplan.export_plan(plan, engine)
    assert check_against_plan(plan, files, engine) == 3
    if engine == "trtllm":
        layouts = {p["role"]: p["layout"] for p in pddplan.read_plan(plan).data["pools"]}
        assert "CP" not in layouts["prefill"] and "x" not in layouts["prefill"].split("+")[0]


@pytest.mark.slow
def test_the_default_engines_plan_launches_on_it(pdd_plan):
    """The README's plan with SGLang's profile: SGLang cannot split DeepSeek-V4's attention
    by context over two hosts, so the planner split its heads inside each host instead
    (DP2xTP8+EP16), which SGLang launches: ``--tp-size 16 --dp-size 2``."""
    plan = pddplan.read_plan(pdd_plan)
    (prefill,) = [p for p in plan.data["pools"] if p["role"] == "prefill"]
    assert prefill["layout"] == "DP2xTP8+EP16"
    assert any("cannot launch context parallelism" in n for n in plan.data["left_out"])
    files = pddplan.export_plan(pdd_plan, "sglang")
    assert check_against_plan(pdd_plan, files, "sglang") == 3
    script = files["prefill-cluster-a-h100-sxm.sh"]
    assert "--tp-size 16" in script and "--dp-size 2" in script
    assert "--attn-cp-size" not in script


@pytest.mark.slow
def test_sglang_refuses_cross_node_context_parallelism(ideal_pdd_plan, tmp_path):
    """SGLang 0.5.21 runs prefill CP within one node: one line for the pool, the part of the
    layout, the nearest option; exit 2; nothing written."""
    pdd_plan = ideal_pdd_plan
    out = tmp_path / "launch"
    r = runner.invoke(app, ["export", str(pdd_plan), "--to", "sglang", "--out", str(out)])
    assert r.exit_code == 2
    lines = [x for x in r.stderr.splitlines() if x.startswith("Error:")]
    assert len(lines) == 1 and "prefill-cluster-a-h100-sxm" in lines[0]
    assert "CP16 across 2 nodes" in lines[0] and "nearest: --attn-cp-size 8" in lines[0]
    assert not out.exists()


# --- the router -------------------------------------------------------------------------------
RULES = {
    "format": "pddplan-router/1",
    "payload": {"kv_bytes_per_token": 1000.0, "fixed_bytes": 1e6},
    "relay_if_payload_mb_above": 10.0,
    "singular_if_max_tokens_at_most": 100,
    "handoff": {"catch_up_if_eager_tokens_above": 256, "chunk_tokens": 64},
}


def test_route_by_hand():
    """Payload = 1 MB + 1 kB per missing token: 10,000 tokens with none cached is 11 MB, above
    the 10 MB cut, so relayed (singular at max_tokens <= 100); with 2,000 cached, 9 MB: direct."""
    assert pddplan.route({"input_tokens": 10_000, "max_tokens": 500}, RULES) == "p_rld_md"
    assert pddplan.route({"input_tokens": 10_000, "max_tokens": 100}, RULES) == "singular"
    assert (
        pddplan.route({"input_tokens": 10_000, "max_tokens": 500, "cached_tokens": 2000}, RULES)
        == "p_md"
    )
    assert (
        pddplan.route({"input_tokens": 10_000, "output_tokens": 50, "md_hit": 0.2}, RULES) == "p_md"
    )
    assert (
        pddplan.route({"input_tokens": 9_000, "max_tokens": 1}, RULES) == "p_md"
    )  # 10 MB: not above
    assert (
        pddplan.route(
            {"input_tokens": 10**6, "max_tokens": 1}, RULES | {"relay_if_payload_mb_above": None}
        )
        == "p_md"
    )
    assert (
        pddplan.handoff_mode(256, RULES) == "one-shot"
        and pddplan.handoff_mode(257, RULES) == "catch-up"
    )
    with pytest.raises(pddplan.InputError, match="input_tokens is missing"):
        pddplan.route({"max_tokens": 3}, RULES)


@pytest.mark.slow
def test_route_matches_the_simulators_router(pdd_plan):
    """Hundreds of random requests through the simulator's own dispatch (its decode-side cache
    lookup stubbed to give each request's hit) and through ``route`` with router.json's
    rules: the same path for every one."""
    from pddplan.simulation.engine import Simulation
    from pddplan.simulation.request import DIRECT, RELAY, SINGULAR, Req

    plan = pddplan.read_plan(pdd_plan)
    sim = Simulation(
        pddplan.plan_problem(plan), pddplan.Fleet.model_validate(plan.data["deployment"])
    )
    rules = json.loads(pddplan.export_plan(pdd_plan, "vllm")["router.json"])
    names = {DIRECT: "p_md", RELAY: "p_rld_md", SINGULAR: "singular"}

    class Hit:  # the decode-side cache, holding ``blocks`` of the next request's prefix
        blocks = 0

        def lookup(self, _blocks):
            return self.blocks

    hit = Hit()
    sim.md_cache = dict.fromkeys(sim.md_cache, hit)
    sim.md_tiers = {}
    rng = np.random.default_rng(52)
    cut_tokens = (
        rules["relay_if_payload_mb_above"] * 1e6 - rules["payload"]["fixed_bytes"]
    ) / rules["payload"]["kv_bytes_per_token"]
    seen = set()
    for i in range(600):
        inp = int(rng.integers(1, 130_000))
        missing = int(np.clip(cut_tokens + rng.normal(0, 2000), 0, inp))
        hit.blocks = (inp - missing) // sim.block
        out = int(rng.integers(1, 2500))
        r = Req(i, 0.0, inp, out, ())
        r.p_dc = sim.p_dcs[0]
        sim._dispatch(r)
        cached = min(hit.blocks * sim.block, inp)
        got = pddplan.route(
            {"input_tokens": inp, "max_tokens": out, "cached_tokens": cached}, rules
        )
        assert got == names[r.path], (inp, cached, out)
        seen.add(got)
    assert seen == {"p_md", "p_rld_md", "singular"}


# --- bad input ---------------------------------------------------------------------------------
def _export(plan: Path, out: Path, *more: str):
    return runner.invoke(app, ["export", str(plan), "--to", "sglang", "--out", str(out), *more])


def _errors(r) -> list[str]:
    return [x for x in r.stderr.splitlines() if x.startswith("Error:")]


def test_a_plan_from_before_plans_carried_their_scenario(small_plan, tmp_path):
    old = json.loads(small_plan.read_text())
    for key in ("format", "scenario_file", "deployment_id"):
        old.pop(key)
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    r = _export(path, tmp_path / "out")
    assert r.exit_code == 2 and "Traceback" not in r.output
    (line,) = _errors(r)
    assert "re-run `pddplan solve" in line and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_plan_whose_scenario_file_changed(tmp_path):
    scenario = tmp_path / "small.yaml"
    shutil.copy(SMALL, scenario)
    plan = _solve(scenario, tmp_path / "plan.json")
    scenario.write_text(scenario.read_text().replace("tpot_ms: ", "tpot_ms: 1", 1))
    r = _export(plan, tmp_path / "out")
    assert r.exit_code == 2
    (line,) = _errors(r)
    assert str(plan) in line and str(scenario) in line and "fingerprint" in line
    assert not (tmp_path / "out").exists()


def test_unknown_target(small_plan, tmp_path):
    r = runner.invoke(app, ["export", str(small_plan), "--to", "tgi", "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "'tgi' is not one of" in r.stderr
    with pytest.raises(pddplan.InputError, match="unknown target 'tgi'"):
        pddplan.export_plan(small_plan, "tgi")


def test_a_chip_the_engine_cannot_run():
    """An Ascend pool on vLLM: one line naming the pool, the chip and the nearest build."""
    from pddplan.deploy.engines import cannot_launch
    from pddplan.deploy.launch import PoolLaunch
    from pddplan.model.instance import Layout

    chip = pddplan.load_catalogs().hardware.chips["ascend-910c"]
    pool = PoolLaunch(
        "main-decode-x-ascend-910c",
        "main_decode",
        "x",
        chip,
        2,
        Layout(16, 1, 8, 16),
        8,
        "bf16",
        64,
        4096,
        False,
        "mla",
    )
    (line,) = cannot_launch(pool, "vllm")
    assert "main-decode-x-ascend-910c" in line and "Huawei" in line and "vllm-ascend" in line


def test_out_not_empty_needs_force(small_plan, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    r = _export(small_plan, out)
    assert r.exit_code == 2 and "not empty" in _errors(r)[0]
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    r = _export(small_plan, out, "--force")
    assert r.exit_code == 0, r.output
    assert (out / "keep.txt").read_text() == "mine" and (out / "router.json").is_file()
    assert (out / "prefill-east-h100-sxm.sh").stat().st_mode & 0o111


def test_an_unwritable_out_is_found_first(small_plan, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    r = _export(small_plan, blocker / "launch")
    assert r.exit_code == 2 and "is a file" in _errors(r)[0]
    r = _export(small_plan, blocker)
    assert r.exit_code == 2 and "is a file" in _errors(r)[0]
