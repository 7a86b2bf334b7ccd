"""The files ``pddplan export`` writes for each target: per pool a launch script (SGLang,
vLLM, TensorRT-LLM, Dynamo) or a Kubernetes manifest, Dynamo's DynamoGraphDeployment, and
``router.json`` (docs/export.md)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from pddplan.deploy.engines import (
    IMAGES,
    KV_DTYPES,
    PORT,
    RELEASES,
    TRTLLM_LAUNCH,
    Command,
    cannot_launch,
    dynamo_trtllm_command,
    sglang_command,
    trtllm_command,
    trtllm_options,
    vllm_command,
    vllm_dp_local,
)
from pddplan.deploy.launch import LaunchPlan, PoolLaunch
from pddplan.deploy.placement import DATACENTER_LABEL, node_selector, placement_note
from pddplan.deploy.router import router_rules
from pddplan.errors import InputError
from pddplan.io.export import manifest_yaml

TARGETS = ("plan", "sglang", "vllm", "trtllm", "dynamo", "k8s")
"""What ``pddplan export --to`` writes for: ``plan`` (the default) runs each pool with its
role's engine; the others run every pool with one."""
EXPORT_TARGETS = TARGETS
ENGINE_TARGETS = ("sglang", "vllm", "trtllm")
"""The engines a pool's launch script is written for (an engine profile of that name)."""
K8S_ENGINES = ("sglang", "vllm")
"""The engines a Kubernetes manifest's containers may run."""
K8S_GPU = {"NVIDIA": "nvidia.com/gpu", "AMD": "amd.com/gpu"}
"""Each vendor's GPU resource name (its Kubernetes device plugin's)."""
SGLANG = ("python3", "-m", "sglang.launch_server")
DYNAMO_SGLANG = ("python3", "-m", "dynamo.sglang")
DYNAMO_FRONTEND = ("python3", "-m", "dynamo.frontend")
TRTLLM_DISAGG = ("trtllm-serve", "disaggregated")
GRAPH_FILE = "dynamo-graph.yaml"
"""The DynamoGraphDeployment ``--to dynamo`` writes beside its launch scripts."""
ENGINE_CONFIG_DIR = "/etc/pddplan"
"""Where a DynamoGraphDeployment's workers find their TensorRT-LLM options (a ConfigMap)."""
GRAPH_ONLY_FLAGS = ("--namespace", "--endpoint", "--nnodes", "--node-rank", "--dist-init-addr")
"""Flags of a Dynamo worker's launch script the Dynamo operator sets itself in a
DynamoGraphDeployment (its namespace and endpoint, a multinode worker's ranks)."""


def pool_engine(plan: LaunchPlan, pool: PoolLaunch) -> str | None:
    """The engine ``pool`` launches with where the plan's own engines decide: its role's
    engine profile where export writes for it (``ENGINE_TARGETS``); for a profile that is no
    release (``ideal``), the one such engine the plan's other roles run; None where there is
    none, or several."""
    own = plan.pool_engine(pool)
    if own in ENGINE_TARGETS:
        return own
    others = {e for e in plan.engines.values() if e in ENGINE_TARGETS}
    return others.pop() if len(others) == 1 else None


def _plan_engines(plan: LaunchPlan) -> set[str]:
    """The engines the plan's pools launch with by the plan's own engines (``pool_engine``),
    sglang for a pool whose role's profile names none."""
    return {pool_engine(plan, p) or "sglang" for p in plan.pools}


def engines_for(target: str, engine: str | None, plan: LaunchPlan) -> list[str]:
    """The engine each of ``plan``'s pools runs for ``target``: the target itself for
    sglang, vllm and trtllm; for ``plan``, each pool's role's engine (``pool_engine``);
    for k8s, ``engine``, else each pool's engine where it is sglang or vllm, else sglang;
    Dynamo's workers are TensorRT-LLM's where the plan's engines are trtllm, else SGLang's
    (one backend for the whole graph). ``InputError`` for an unknown target, ``engine``
    with a target that fixes the engine, or a plan whose pools no target engine serves."""
    if target not in TARGETS:
        raise InputError(f"--to: unknown target '{target}': one of {', '.join(TARGETS)}")
    pools = plan.pools
    if target == "plan":
        if engine is not None:
            raise InputError(
                f"--engine {engine}: --to plan runs each pool with its role's engine; "
                "--engine is for --to k8s"
            )
        runs = [pool_engine(plan, p) for p in pools]
        missing = [p for p, r in zip(pools, runs, strict=True) if r is None]
        if missing:
            roles = sorted({p.role for p in missing})
            raise InputError(
                f"--to plan: the plan's {', '.join(roles)} pass times are "
                f"{', '.join(sorted({plan.pool_engine(p) for p in missing}))}'s, no engine "
                f"export launches ({', '.join(ENGINE_TARGETS)}): give --to "
                f"{'|'.join(t for t in TARGETS if t != 'plan')}"
            )
        return [r for r in runs if r is not None]
    if target in ("sglang", "vllm", "trtllm", "dynamo"):
        own = target
        if target == "dynamo":
            used = _plan_engines(plan)
            if len(used) > 1:
                raise InputError(
                    f"--to dynamo: one DynamoGraphDeployment runs one backend; the plan's "
                    f"pools run {', '.join(sorted(used))} ({plan.engine}): use --to plan"
                )
            own = "trtllm" if used == {"trtllm"} else "sglang"
        if engine is not None and engine != own:
            raise InputError(
                f"--engine {engine}: --to {target} runs {own}; --engine is for --to k8s"
            )
        return [own] * len(pools)
    if engine is not None:
        if engine not in K8S_ENGINES:
            raise InputError(f"--engine: unknown engine '{engine}': one of sglang, vllm")
        return [engine] * len(pools)
    return [e if (e := pool_engine(plan, p)) in K8S_ENGINES else "sglang" for p in pools]


def export_files(plan: LaunchPlan, target: str, engine: str | None = None) -> dict[str, str]:
    """Every file of ``target`` for ``plan``, name -> text; ``InputError`` with one line per
    pool the engine cannot launch (nothing is produced then)."""
    runs = engines_for(target, engine, plan)
    refused = [
        line
        for pool, run in zip(plan.pools, runs, strict=True)
        for line in cannot_launch(pool, run)
    ]
    if refused:
        raise InputError(refused)
    files: dict[str, str] = {}
    for pool, run in zip(plan.pools, runs, strict=True):
        if target == "k8s":
            files[f"{pool.name}.yaml"] = _manifest(plan, pool, run)
        else:
            files[f"{pool.name}.sh"] = _script(plan, pool, run if target == "plan" else target, run)
            if run == "trtllm":
                files[f"{pool.name}.yaml"] = _options_yaml(plan, pool)
    if target == "trtllm" or (target == "plan" and set(runs) == {"trtllm"}):
        files["disagg.yaml"] = _disagg_yaml(plan)
        files["disagg-server.sh"] = _disagg_server(plan)
    if target == "dynamo":
        files["frontend.sh"] = _frontend(plan)
        files[GRAPH_FILE] = _graph(plan, runs[0])
    files["router.json"] = json.dumps(router_rules(plan.plan), indent=2) + "\n"
    return files


# --- commands -------------------------------------------------------------------------------
def pool_command(
    plan: LaunchPlan, pool: PoolLaunch, target: str, engine: str = "sglang"
) -> Command:
    """The command one host of ``pool`` runs for ``target`` (k8s: its engine's; dynamo: its
    worker for ``engine``, sglang or trtllm). TensorRT-LLM's read their options from
    ``{pool}.yaml`` beside them."""
    if target == "vllm":
        return vllm_command(pool, plan.model_id)
    if target == "trtllm":
        return trtllm_command(pool, plan.model_id, f"{pool.name}.yaml")
    if target == "dynamo" and engine == "trtllm":
        c = dynamo_trtllm_command(pool, plan.model_id, f"{pool.name}.yaml")
        c.add("--namespace", _namespace(plan))
        c.add("--endpoint", f"dyn://{_namespace(plan)}.{_component(pool)}.generate")
        return c
    if target == "dynamo":
        c = sglang_command(pool, plan.model_id, DYNAMO_SGLANG)
        c.add("--namespace", _namespace(plan))
        c.add("--endpoint", f"dyn://{_namespace(plan)}.{_component(pool)}.generate")
        return c
    return sglang_command(pool, plan.model_id, SGLANG)


def _namespace(plan: LaunchPlan) -> str:
    return "pddplan-" + str(plan.plan.get("deployment_id") or "plan").lower().removeprefix("d-")


def _component(pool: PoolLaunch) -> str:
    return "prefill" if pool.role == "prefill" else pool.name


def _shell(token: str) -> str:
    """A token for the shell: placeholders (``${NAME}``) expand, anything else is literal."""
    return f'"{token}"' if "${" in token else shlex.quote(token)


def _exec_lines(argv: list[str], extra: str = "", head: int = 3) -> str:
    """``exec`` of ``argv``, its first ``head`` tokens (the program) on one line, then a flag
    (and its value) a line."""
    lines = [" ".join(_shell(t) for t in argv[:head])]
    i = head
    while i < len(argv):
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            lines.append(f"{argv[i]} {_shell(argv[i + 1])}")
            i += 2
        else:
            lines.append(argv[i])
            i += 1
    if extra:
        lines.append(extra)
    return "exec " + " \\\n  ".join(lines) + "\n"


def _header(plan: LaunchPlan, pool: PoolLaunch, engine: str) -> list[str]:
    lay = pool.layout
    release, source = RELEASES[engine]
    lines = [
        f"pddplan export: pool {pool.name} of {plan.path.name} (deployment "
        f"{plan.plan.get('deployment_id')}, scenario {plan.plan.get('scenario')}, "
        f"fingerprint {(plan.plan.get('scenario_file') or {}).get('fingerprint')})",
        f"{pool.role} in {pool.datacenter}: {pool.instances} instance(s) x {pool.gpus} x "
        f"{pool.chip.name}, layout {lay.label} (attention TP {lay.attn_tp} x CP {lay.cp} x "
        f"DP {pool.attention_dp}, experts over EP {lay.ep})",
        f"model {plan.model} ({plan.model_id}); KV cache {pool.kv_dtype}; prefill chunk "
        f"{pool.chunk_tokens} tokens per attention group"
        + (f"; at most {pool.batch} sequences per instance" if pool.batch else ""),
        f"engine: {engine} {release} (flags as defined in {source})",
    ]
    planned = plan.pool_engine(pool)
    if len(set(plan.engines.values())) > 1:  # an engine per role: say which this pool's is
        lines.append(
            f"pass times planned with {planned}'s profile ({pool.role}; the plan: {plan.engine})"
        )
    lines += [
        f"link {a} <-> {b}: {gbps:g} Gbps bought" + (f", RTT {rtt:g} ms" if rtt else "")
        for a, b, gbps, rtt in plan.links
        if pool.datacenter in (a, b)
    ]
    if pool.role == "relay_decode":
        lines.append(
            "relay decode: the router (router.json) sends it the requests above the payload "
            "cut; no engine hands a request on to main decode yet (docs/export.md)"
        )
    return lines


def _script(plan: LaunchPlan, pool: PoolLaunch, target: str, engine: str = "sglang") -> str:
    c = pool_command(plan, pool, target, engine)
    label = {"dynamo": "dynamo-trtllm" if engine == "trtllm" else "dynamo"}.get(target, target)
    head = _header(plan, pool, label)
    if engine == "trtllm":
        return _trtllm_script(pool, c, head, target == "dynamo")
    if pool.nodes > 1:
        head.append(
            f"run on each of the instance's {pool.nodes} hosts ({pool.node_gpus} GPUs each), "
            "with NODE_RANK (0 on the leader) and LEADER_ADDR (the leader's address) set; "
            f"one such group per instance ({pool.instances})"
        )
    else:
        head.append(f"run one copy per instance ({pool.instances}), each on its own host")
    out = ["#!/usr/bin/env bash", *(f"# {x}" for x in head), "set -euo pipefail"]
    extra = ""
    if pool.nodes > 1:
        out.append(': "${NODE_RANK:?this host\'s rank in the instance, 0 on the leader}"')
        out.append(': "${LEADER_ADDR:?the address of the instance\'s leader host}"')
        local = vllm_dp_local(pool) if target == "vllm" else None
        if local is not None:
            out.append(f"DP_START_RANK=$((NODE_RANK * {local}))")
            out.append('if [ "$NODE_RANK" != 0 ]; then set -- --headless; else set --; fi')
            extra = '"$@"'
    return "\n".join(out) + "\n" + _exec_lines(c.argv(), extra)


def _trtllm_script(pool: PoolLaunch, c: Command, head: list[str], dynamo: bool) -> str:
    """A TensorRT-LLM pool's script: its options YAML beside it; over several hosts, one
    ``mpirun`` from the leader host over them all."""
    head.append(f"options: {pool.name}.yaml beside this script (TensorRT-LLM's LLM-API YAML)")
    argv = c.argv()
    out = ["#!/usr/bin/env bash"]
    if pool.nodes > 1:
        head.append(
            f"run once per instance ({pool.instances}), on its leader host, with HOSTS set to "
            f"the instance's {pool.nodes} hosts as MPI's -H list (host1:{pool.node_gpus},"
            f"host2:{pool.node_gpus},...): mpirun starts every rank, trtllm-llmapi-launch "
            "joins them to the server"
        )
        out += [f"# {x}" for x in head]
        out += ["set -euo pipefail", ': "${HOSTS:?the instance hosts, host1:N,host2:N,...}"']
        if dynamo:  # Dynamo's worker under the same MPI launch as trtllm-serve
            argv = [
                *TRTLLM_LAUNCH, "-np", str(pool.gpus), "-H", "${HOSTS}",
                "trtllm-llmapi-launch", *argv,
            ]  # fmt: skip
    else:
        head.append(f"run one copy per instance ({pool.instances}), each on its own host")
        out += [f"# {x}" for x in head]
        out.append("set -euo pipefail")
    out.append('cd "$(dirname "$0")"')
    program = len(argv) - len(c.argv()) + len(c.program)
    return "\n".join(out) + "\n" + _exec_lines(argv, head=program)


def _options_yaml(plan: LaunchPlan, pool: PoolLaunch) -> str:
    head = (
        f"pddplan export: TensorRT-LLM LLM-API options of pool {pool.name} "
        f"(deployment {plan.plan.get('deployment_id')}); read by {pool.name}.sh "
        "(keys of TensorRT-LLM's BaseLlmArgs: tensorrt_llm/llmapi/llm_args.py)"
    )
    return manifest_yaml([trtllm_options(pool)], head).replace("---\n", "", 1)


def _disagg_yaml(plan: LaunchPlan) -> str:
    """``trtllm-serve disaggregated``'s configuration: the prefill instances as its context
    servers, the main-decode instances as its generation servers (each ``host:port``)."""
    port = PORT["trtllm"]

    def servers(pools: list[PoolLaunch]) -> dict[str, Any]:
        urls = [f"{p.name}-{i}:{port}" for p in pools for i in range(p.instances)]
        return {"num_instances": len(urls), "urls": urls}

    doc = {
        "hostname": "0.0.0.0",
        "port": port,
        "context_servers": servers([p for p in plan.pools if p.role == "prefill"]),
        "generation_servers": servers([p for p in plan.pools if p.role == "main_decode"]),
    }
    head = [
        f"pddplan export: TensorRT-LLM's disaggregated server for {plan.path.name} "
        f"(deployment {plan.plan.get('deployment_id')}): trtllm-serve disaggregated -c disagg.yaml",
        "urls: each instance as {pool}-{i}:port: replace with the instances' addresses",
        "it routes every request prefill -> main decode by load; it does not apply "
        "router.json's payload cut, and no relay-decode pool is in it (docs/export.md)",
    ]
    return manifest_yaml([doc], "\n".join(head)).replace("---\n", "", 1)


def _disagg_server(plan: LaunchPlan) -> str:
    c = Command(TRTLLM_DISAGG)
    c.add("-c", "disagg.yaml")
    head = [
        f"pddplan export: TensorRT-LLM's disaggregated server for {plan.path.name} "
        f"(deployment {plan.plan.get('deployment_id')}); its servers in disagg.yaml",
        f"engine: trtllm {RELEASES['trtllm'][0]} ({RELEASES['trtllm'][1]})",
    ]
    out = ["#!/usr/bin/env bash", *(f"# {x}" for x in head), "set -euo pipefail"]
    out.append('cd "$(dirname "$0")"')
    return "\n".join(out) + "\n" + _exec_lines(c.argv(), head=2)


def _frontend_command(plan: LaunchPlan) -> Command:
    c = Command(DYNAMO_FRONTEND)
    c.add("--http-port", PORT["vllm"])
    c.add("--namespace", _namespace(plan))
    c.add("--router-mode", "kv")
    return c


def _frontend(plan: LaunchPlan) -> str:
    c = _frontend_command(plan)
    head = [
        f"pddplan export: Dynamo's frontend for {plan.path.name} (deployment "
        f"{plan.plan.get('deployment_id')})",
        f"engine: dynamo {RELEASES['dynamo'][0]}; its KV router picks workers by prefix "
        "overlap and load: it does not apply router.json's payload cut (docs/export.md)",
    ]
    out = ["#!/usr/bin/env bash", *(f"# {x}" for x in head), "set -euo pipefail"]
    return "\n".join(out) + "\n" + _exec_lines(c.argv())


# --- Kubernetes -----------------------------------------------------------------------------
def _manifest(plan: LaunchPlan, pool: PoolLaunch, engine: str) -> str:
    c = pool_command(plan, pool, engine)
    labels = {
        "app.kubernetes.io/name": pool.name,
        "app.kubernetes.io/part-of": "pddplan",
        "pddplan/role": pool.role.replace("_", "-"),
        "pddplan/datacenter": pool.datacenter,
    }
    gpu = {K8S_GPU.get(pool.chip.vendor, "nvidia.com/gpu"): pool.node_gpus}
    head = _header(plan, pool, engine)
    head.append(placement_note(pool))
    selector = node_selector(pool)
    argv = c.argv()
    if pool.nodes == 1:
        container = _container(engine, list(argv[:3]), argv[3:], gpu)
        doc: dict[str, Any] = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": pool.name, "labels": labels},
            "spec": {
                "replicas": pool.instances,
                "selector": {"matchLabels": {"app.kubernetes.io/name": pool.name}},
                "template": {"metadata": {"labels": labels}, "spec": _pod(container, selector)},
            },
        }
        head.append(f"a Deployment: {pool.instances} replica(s), one per instance")
    else:
        script = _script(plan, pool, engine).split("set -euo pipefail\n", 1)[1]
        body = 'NODE_RANK="${LWS_WORKER_INDEX}"\nLEADER_ADDR="${LWS_LEADER_ADDRESS}"\n' + script
        container = _container(engine, ["/bin/bash", "-c"], [body], gpu)
        template = {"metadata": {"labels": labels}, "spec": _pod(container, selector)}
        doc = {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": pool.name, "labels": labels},
            "spec": {
                "replicas": pool.instances,
                "leaderWorkerTemplate": {
                    "size": pool.nodes,
                    "restartPolicy": "RecreateGroupOnPodRestart",
                    "leaderTemplate": template,
                    "workerTemplate": template,
                },
            },
        }
        head.append(
            f"a LeaderWorkerSet: {pool.instances} group(s) of {pool.nodes} pods, one group "
            "per instance; LWS sets LWS_WORKER_INDEX and LWS_LEADER_ADDRESS in each pod"
        )
    return manifest_yaml([doc], "\n".join(head))


def _container(
    engine: str, command: list[str], args: list[str], gpu: dict[str, int]
) -> dict[str, Any]:
    return {
        "name": "engine",
        "image": IMAGES[engine],
        "command": command,
        "args": args,
        "ports": [{"name": "http", "containerPort": PORT[engine]}],
        "resources": {"limits": dict(gpu), "requests": dict(gpu)},
        "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
    }


def _pod(container: dict[str, Any], selector: dict[str, str]) -> dict[str, Any]:
    return {
        "nodeSelector": dict(selector),
        "containers": [container],
        "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}}],
    }


# --- Dynamo's DynamoGraphDeployment ----------------------------------------------------------
def graph_args(plan: LaunchPlan, pool: PoolLaunch, engine: str) -> list[str]:
    """A Dynamo worker's arguments in a DynamoGraphDeployment: its launch script's command
    (``pool_command``), less what the operator sets (``GRAPH_ONLY_FLAGS``); a TensorRT-LLM
    worker's options from the ConfigMap under ``ENGINE_CONFIG_DIR``."""
    c = pool_command(plan, pool, "dynamo", engine)
    keep = Command(c.program)
    for name, value in c.flags:
        if name in GRAPH_ONLY_FLAGS:
            continue
        if name == "--extra-engine-args":
            value = f"{ENGINE_CONFIG_DIR}/{pool.name}.yaml"
        keep.flags.append((name, value))
    return keep.argv()[len(c.program) :]


def _graph(plan: LaunchPlan, engine: str) -> str:
    """The plan as one DynamoGraphDeployment (``nvidia.com/v1alpha1``): a Frontend and a
    worker service per pool; with TensorRT-LLM workers, a ConfigMap of their options first."""
    name = _namespace(plan)
    image = IMAGES[f"dynamo-{engine}"]
    worker = ("python3", "-m", f"dynamo.{engine}")
    docs: list[dict[str, Any]] = []
    if engine == "trtllm":
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": f"{name}-engine",
                    "labels": {"app.kubernetes.io/part-of": "pddplan"},
                },
                "data": {
                    f"{p.name}.yaml": _options_yaml(plan, p).split("\n", 1)[1] for p in plan.pools
                },
            }
        )
    front = _frontend_command(plan)
    entry = next((p for p in plan.pools if p.role == "prefill"), plan.pools[0])
    services: dict[str, Any] = {
        "Frontend": {
            "componentType": "frontend",
            "replicas": 1,
            "extraPodSpec": {
                "nodeSelector": {DATACENTER_LABEL: entry.datacenter},
                "mainContainer": {
                    "name": "main",
                    "image": image,
                    "command": list(front.program),
                    "args": [
                        t for t in front.argv()[3:] if t not in ("--namespace", _namespace(plan))
                    ],
                },
            },
        }
    }
    head = [
        f"pddplan export: {plan.path.name} (deployment {plan.plan.get('deployment_id')}) as "
        f"one DynamoGraphDeployment for the Dynamo {RELEASES['dynamo'][0]} operator",
        f"workers: dynamo.{engine}, image {image}; a service per pool, replicas = instances, "
        "GPUs per pod, multinode where an instance spans hosts",
    ]
    for pool in plan.pools:
        gpus = str(pool.node_gpus)
        resources: dict[str, Any] = {"limits": {"gpu": gpus}, "requests": {"gpu": gpus}}
        if pool.chip.vendor != "NVIDIA":
            for part in resources.values():
                part["gpuType"] = K8S_GPU.get(pool.chip.vendor, "nvidia.com/gpu")
        spec: dict[str, Any] = {"nodeSelector": node_selector(pool)}
        main: dict[str, Any] = {
            "name": "main",
            "image": image,
            "command": list(worker),
            "args": graph_args(plan, pool, engine),
        }
        if engine == "trtllm":
            spec["volumes"] = [{"name": "engine", "configMap": {"name": f"{name}-engine"}}]
            main["volumeMounts"] = [{"name": "engine", "mountPath": ENGINE_CONFIG_DIR}]
        spec["mainContainer"] = main
        service: dict[str, Any] = {
            "componentType": "worker",
            "subComponentType": "prefill" if pool.role == "prefill" else "decode",
            "replicas": pool.instances,
            "resources": resources,
        }
        if pool.nodes > 1:
            service["multinode"] = {"nodeCount": pool.nodes}
        service["extraPodSpec"] = spec
        services[pool.name] = service
        head.append(
            f"{pool.name}: {pool.instances} x {pool.gpus} x {pool.chip.id} "
            f"({pool.layout.label}), {pool.nodes} node(s) of {pool.node_gpus} GPUs each; "
            + placement_note(pool)
        )
    head.append(
        "the frontend's KV router picks workers by prefix overlap and load: it does not apply "
        "router.json (docs/export.md)"
    )
    docs.append(
        {
            "apiVersion": "nvidia.com/v1alpha1",
            "kind": "DynamoGraphDeployment",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "pddplan"}},
            "spec": {"backendFramework": engine, "services": services},
        }
    )
    return manifest_yaml(docs, "\n".join(head))


__all__ = ["KV_DTYPES", "TARGETS", "export_files", "export_plan", "graph_args", "pool_command"]


def export_plan(plan: str | Path, target: str, *, engine: str | None = None) -> dict[str, str]:
    """The launch files of the plan file at ``plan`` (``pddplan solve --out``) for
    ``target`` (``sglang``, ``vllm``, ``trtllm``, ``dynamo`` or ``k8s``; ``engine``: what a
    k8s manifest's containers run, sglang or vllm), name -> text: per pool a launch script
    (with its options YAML for TensorRT-LLM) or a manifest, ``router.json``; for trtllm the
    disaggregated server's ``disagg.yaml``, for dynamo its ``dynamo-graph.yaml``.

    Raises:
        InputError: a plan from before plans carried their scenario, a plan whose scenario
            file has changed since, an unknown target, or one line per pool the engine
            cannot launch.
    """
    from pddplan.deploy.launch import launch_plan
    from pddplan.io.plan_file import read_plan

    if target not in TARGETS:
        raise InputError(f"--to: unknown target '{target}': one of {', '.join(TARGETS)}")
    return export_files(launch_plan(read_plan(Path(plan))), target, engine)
