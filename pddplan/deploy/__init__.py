"""A plan as launch files (``pddplan export``): each pool's engine command (SGLang, vLLM,
TensorRT-LLM, Dynamo) with the parallel layout, KV dtype, batch and chunk limits the plan
assumed, Kubernetes manifests and Dynamo's DynamoGraphDeployment, and the router's rules as
data with the pure function that applies them (``route``).

Modules: ``launch`` (what each pool launches, read from a plan file), ``engines`` (the
engines' flags, their pinned releases and what each cannot launch), ``placement`` (the node
labels of a pool's GPU model and datacenter), ``router`` (``router.json`` and ``route``),
``files`` (the files of a target: scripts, manifests, the DynamoGraphDeployment).

May import: ``io``, ``model``, ``spec``, ``errors``, ``units``.
"""
