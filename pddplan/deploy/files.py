"""The files ``pddplan export`` writes for each target: per pool a launch script (SGLang,
vLLM, Dynamo) or a Kubernetes manifest, and ``router.json`` (docs/export.md)."""

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
    Command,
    cannot_launch,
    sglang_command,
    vllm_command,
    vllm_dp_local,
)
from pddplan.deploy.launch import LaunchPlan, PoolLaunch
from pddplan.deploy.router import router_rules
from pddplan.errors import InputError
from pddplan.io.export import manifest_yaml

TARGETS = ("sglang", "vllm", "dynamo", "k8s")
"""What ``pddplan export --to`` writes for."""
EXPORT_TARGETS = TARGETS
K8S_ENGINES = ("sglang", "vllm")
"""The engines a Kubernetes manifest's containers may run."""
K8S_GPU = {"NVIDIA": "nvidia.com/gpu", "AMD": "amd.com/gpu"}
"""Each vendor's GPU resource name (its Kubernetes device plugin's)."""
SGLANG = ("python3", "-m", "sglang.launch_server")
DYNAMO_SGLANG = ("python3", "-m", "dynamo.sglang")
DYNAMO_FRONTEND = ("python3", "-m", "dynamo.frontend")


def engine_for(target: str, engine: str | None, plan: LaunchPlan) -> str:
    """The engine ``target``'s commands run: the target itself for sglang and vllm; for
    k8s, ``engine``, else the plan's engine profile where it is one of them, else sglang;
    Dynamo's workers are SGLang's."""
    if target not in TARGETS:
        raise InputError(f"--to: unknown target '{target}': one of {', '.join(TARGETS)}")
    if target in ("sglang", "vllm", "dynamo"):
        own = "sglang" if target == "dynamo" else target
        if engine is not None and engine != own:
            raise InputError(
                f"--engine {engine}: --to {target} runs {own}; --engine is for --to k8s"
            )
        return own
    if engine is not None:
        if engine not in K8S_ENGINES:
            raise InputError(f"--engine: unknown engine '{engine}': one of sglang, vllm")
        return engine
    return plan.engine if plan.engine in K8S_ENGINES else "sglang"


def export_files(plan: LaunchPlan, target: str, engine: str | None = None) -> dict[str, str]:
    """Every file of ``target`` for ``plan``, name -> text; ``InputError`` with one line per
    pool the engine cannot launch (nothing is produced then)."""
    run = engine_for(target, engine, plan)
    refused = [line for pool in plan.pools for line in cannot_launch(pool, run)]
    if refused:
        raise InputError(refused)
    files: dict[str, str] = {}
    for pool in plan.pools:
        if target == "k8s":
            files[f"{pool.name}.yaml"] = _manifest(plan, pool, run)
        else:
            files[f"{pool.name}.sh"] = _script(plan, pool, target)
    if target == "dynamo":
        files["frontend.sh"] = _frontend(plan)
    files["router.json"] = json.dumps(router_rules(plan.plan), indent=2) + "\n"
    return files


# --- commands -------------------------------------------------------------------------------
def pool_command(plan: LaunchPlan, pool: PoolLaunch, target: str) -> Command:
    """The command one host of ``pool`` runs for ``target`` (k8s: its engine's)."""
    if target == "vllm":
        return vllm_command(pool, plan.model_id)
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


def _exec_lines(argv: list[str], extra: str = "") -> str:
    lines = [" ".join(_shell(t) for t in argv[:3])]
    i = 3
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
    release, source = RELEASES["dynamo" if engine == "dynamo" else engine]
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


def _script(plan: LaunchPlan, pool: PoolLaunch, target: str) -> str:
    c = pool_command(plan, pool, target)
    head = _header(plan, pool, "dynamo" if target == "dynamo" else target)
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


def _frontend(plan: LaunchPlan) -> str:
    c = Command(DYNAMO_FRONTEND)
    c.add("--http-port", PORT["vllm"])
    c.add("--namespace", _namespace(plan))
    c.add("--router-mode", "kv")
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
                "template": {"metadata": {"labels": labels}, "spec": _pod(container)},
            },
        }
        head.append(f"a Deployment: {pool.instances} replica(s), one per instance")
    else:
        script = _script(plan, pool, engine).split("set -euo pipefail\n", 1)[1]
        body = 'NODE_RANK="${LWS_WORKER_INDEX}"\nLEADER_ADDR="${LWS_LEADER_ADDRESS}"\n' + script
        container = _container(engine, ["/bin/bash", "-c"], [body], gpu)
        template = {"metadata": {"labels": labels}, "spec": _pod(container)}
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


def _pod(container: dict[str, Any]) -> dict[str, Any]:
    return {
        "containers": [container],
        "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}}],
    }


__all__ = ["KV_DTYPES", "TARGETS", "export_files", "export_plan", "pool_command"]


def export_plan(plan: str | Path, target: str, *, engine: str | None = None) -> dict[str, str]:
    """The launch files of the plan file at ``plan`` (``pddplan solve --out``) for
    ``target`` (``sglang``, ``vllm``, ``dynamo`` or ``k8s``; ``engine``: what a k8s
    manifest's containers run, sglang or vllm), name -> text: per pool a launch script or a
    manifest, and ``router.json``.

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
