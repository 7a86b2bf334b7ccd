"""Where a pool's pods may run: the node labels that name a GPU model and a datacenter, as
``nodeSelector`` entries of the Kubernetes manifests (docs/export.md#node-placement)."""

from __future__ import annotations

from pddplan.deploy.launch import PoolLaunch

NVIDIA_PRODUCT_LABEL = "nvidia.com/gpu.product"
"""The label NVIDIA's GPU Feature Discovery sets on every GPU node: the GPU's product name
with its spaces made dashes (k8s-device-plugin, docs/gpu-feature-discovery/README.md,
"Generated Labels"; NVIDIA cluster-readiness-engine ``pkg/gpu.ProductLabel``: 'the node label
that reports the GPU product installed on a node, e.g. "NVIDIA-H100-80GB-HBM3"')."""
AMD_PRODUCT_LABEL = "amd.com/gpu.product-name"
"""The label AMD's node labeller (ROCm k8s-device-plugin) sets: the product name with its
spaces made underscores (its documented example for an MI300X node:
``amd.com/gpu.product-name=AMD_Instinct_MI300X_OAM``)."""
DATACENTER_LABEL = "pddplan/datacenter"
"""The node label that says which of the plan's datacenters a node is in. No well-known label
names a datacenter as a plan does (``topology.kubernetes.io/region`` holds the cloud's region
name, set by the cloud provider): the operator labels each node with the plan's datacenter id
(docs/export.md#node-placement)."""

GPU_PRODUCTS: dict[str, tuple[str, str]] = {
    "a100-80g-sxm": ("NVIDIA-A100-SXM4-80GB", "node labels and selectors in public manifests"),
    "h100-sxm": ("NVIDIA-H100-80GB-HBM3", "cluster-readiness-engine pkg/gpu's own example"),
    "h100-pcie": ("NVIDIA-H100-PCIe", "selectors in public manifests"),
    "h20": ("NVIDIA-H20", "a GFD node label dump in a public repository"),
    "h200-sxm": ("NVIDIA-H200", "selectors in public manifests"),
    "b200": ("NVIDIA-B200", "selectors in public manifests (GKE, KServe recipes)"),
    "gb200": ("NVIDIA-GB200", "selectors in public manifests"),
    "b300": ("NVIDIA-B300-SXM6-AC", "selectors in public manifests (AWS B300 nodes)"),
    "l40s": ("NVIDIA-L40S", "selectors in public manifests"),
    "mi300x": ("AMD_Instinct_MI300X_OAM", "AMD node labeller's documented example"),
    "mi325x": ("AMD_Instinct_MI325_OAM", "a selector in a public AMD deployment script"),
}
"""Each catalog chip's product string as its vendor's labeller writes it, with where it was
seen (read 2026-12-07 through a public code index; docs/export.md#node-placement lists them).
Not here (no label value seen for them): h800, l20, mi355x, the Ascend chips: their pods get
the datacenter selector only, and the manifest says so."""


def node_selector(pool: PoolLaunch) -> dict[str, str]:
    """The ``nodeSelector`` of ``pool``'s pods: its datacenter, and its GPU model where the
    model's label value is known."""
    out = {DATACENTER_LABEL: pool.datacenter}
    product = GPU_PRODUCTS.get(pool.chip.id)
    if product is not None:
        label = AMD_PRODUCT_LABEL if pool.chip.vendor == "AMD" else NVIDIA_PRODUCT_LABEL
        out[label] = product[0]
    return out


def placement_note(pool: PoolLaunch) -> str:
    """One line for a manifest's header: where the pool's pods are placed."""
    selector = node_selector(pool)
    said = ", ".join(f"{k}={v}" for k, v in selector.items())
    if len(selector) == 1:
        return (
            f"placed by nodeSelector {said}; no GPU model label value is known for "
            f"{pool.chip.id}: add your nodes' own (docs/export.md#node-placement)"
        )
    return f"placed by nodeSelector {said} (docs/export.md#node-placement)"
