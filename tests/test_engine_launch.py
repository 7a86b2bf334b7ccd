"""What an engine's release can launch (``EngineProfile.launch``): the planner leaves out
the layouts it cannot, plans the nearest it can, and says so; the evaluator flags a fleet
that needs them."""

from __future__ import annotations

import pytest
from conftest import H100_H200, PAPER_FLEETS
from pydantic import ValidationError

import pddplan
from pddplan.io.catalogs import load_engines
from pddplan.plan.space import Space
from pddplan.spec.engine import IDEAL, LaunchLimits
from pddplan.spec.fleet import Fleet, Pool


def test_a_context_parallel_limit_applies_to_its_attention_kind_only():
    limits = LaunchLimits(
        release="1",
        context_parallel_max_gpus={"compressed": 8},
        sources={"context_parallel_max_gpus": "x"},
    )
    assert limits.context_parallel("compressed", 8) is None
    assert limits.context_parallel("compressed", 16) == (
        "context parallelism over more than 8 GPUs for compressed attention"
    )
    assert limits.context_parallel("mla", 64) is None
    assert LaunchLimits().context_parallel("compressed", 1024) is None  # ideal: anything


@pytest.mark.parametrize(
    "limits",
    [
        {"relay_decode_on_prefill": False},
        {"context_parallel_max_gpus": {"mla": 8}},
        {"prefill_context_parallel": False},
        {"attention_dp_over_tp": False},
        {"kv_handoff_with": []},
    ],
)
def test_every_launch_limit_is_sourced(limits):
    with pytest.raises(ValidationError, match="missing a citation"):
        LaunchLimits(release="1", **limits)


def test_released_engines_name_their_release_and_ideal_launches_everything():
    catalog = load_engines()
    for engine in catalog.engines.values():
        if engine.id == IDEAL:
            assert engine.launch == LaunchLimits() and engine.label == IDEAL
        else:
            assert engine.launch.release != "-" and engine.label.startswith(engine.id + " ")
            assert not engine.launch.relay_decode_on_prefill  # no released engine does it


@pytest.fixture(scope="module")
def readme():
    return pddplan.load_scenario(H100_H200)


def test_sglang_plans_no_cross_host_context_parallelism_for_deepseek_v4(readme):
    """SGLang 0.5.21 splits DeepSeek-V4's attention by context over at most 8 GPUs: the
    16- and 32-GPU CP options are left out, and the same instances with their heads split
    over one host's 8 GPUs are tried in their place."""
    space = Space(readme)
    prefill = space.options["prefill"]
    assert not [o for o in prefill if o.context_parallel and o.gpus > 8]
    heads = {o.gpus: o for o in prefill if o.attention_tp is not None}
    assert sorted(heads) == [16, 32]
    assert heads[16].instance.layout.label == "DP2xTP8+EP16"
    assert heads[16].key.endswith(".x16.tp8")
    assert space.left_out_lines() == [
        "sglang 0.5.21 cannot launch context parallelism over more than 8 GPUs for compressed "
        "attention (16 and 32 x h100-sxm): their attention heads split inside a host instead"
    ]


def test_attention_groups_of_several_gpus_side_by_side_are_a_limit_of_their_own():
    limits = LaunchLimits(
        release="1", attention_dp_over_tp=False, sources={"attention_dp_over_tp": "x"}
    )
    assert limits.attention_groups(16, 8) == "data-parallel attention over tensor-parallel groups"
    assert limits.attention_groups(16, 1) is None  # one GPU per attention rank
    assert limits.attention_groups(16, 16) is None  # one group over the instance
    assert LaunchLimits().attention_groups(16, 8) is None


def test_trtllm_splits_the_heads_over_the_whole_instance(readme):
    """TensorRT-LLM runs no prefill context parallelism and no attention DP over
    tensor-parallel groups: the planner's substitute is one attention group of 16 (32)."""
    space = Space(readme.derive({"engine": "trtllm"}))
    prefill = space.options["prefill"]
    assert not [o for o in prefill if o.context_parallel]
    heads = {o.gpus: o.instance.layout.label for o in prefill if o.attention_tp is not None}
    assert heads == {16: "TP16+EP16", 32: "TP32+EP32"}
    assert space.left_out_lines() == [
        "trtllm 1.3.0rc29 cannot launch prefill context parallelism (16 and 32 x h100-sxm): "
        "their attention heads split over the whole instance instead",
        "trtllm 1.3.0rc29 cannot launch data-parallel attention over tensor-parallel groups "
        "(16 and 32 x h100-sxm): one attention group over the whole instance instead",
    ]


def test_ideal_keeps_every_layout(readme):
    space = Space(readme.derive({"engine": IDEAL}))
    assert [o.gpus for o in space.options["prefill"] if o.context_parallel] == [16, 32]
    assert not [o for o in space.options["prefill"] if o.attention_tp is not None]
    assert space.left_out == {}


def test_no_released_engine_hosts_relay_decode_on_prefill():
    """The paper fleets allow relay decode on prefill GPUs: planned with ``ideal``, left out
    (and said) with SGLang's profile."""
    problem = pddplan.load_scenario(PAPER_FLEETS)
    assert any(o.hosting for o in Space(problem).options["prefill"])  # ideal (its engine)
    space = Space(problem.derive({"engine": "sglang"}))
    assert not any(o.hosting for o in space.options["prefill"])
    assert not any(o.host for o in space.options["relay_decode"])
    (line,) = [x for x in space.left_out_lines() if "relay decode on prefill" in x]
    assert line.startswith("sglang 0.5.21 cannot launch relay decode on prefill GPUs (")
    assert line.endswith("): relay decode planned as a pool of its own")


def _fleet(**prefill: object) -> Fleet:
    return Fleet(
        name="f",
        pools=[
            Pool(
                datacenter="cluster-a",
                role="prefill",
                chip="h100-sxm",
                gpus_per_instance=16,
                instances=1,
                **prefill,
            ),
            Pool(
                datacenter="cluster-a",
                role="relay_decode",
                chip="h100-sxm",
                gpus_per_instance=16,
                instances=1,
            ),
            Pool(
                datacenter="cluster-b",
                role="main_decode",
                chip="h200-sxm",
                gpus_per_instance=8,
                instances=1,
            ),
        ],
        links=[{"between": ["cluster-a", "cluster-b"], "gbps": 10}],
    )


@pytest.mark.slow
def test_the_evaluator_says_when_the_engine_cannot_launch_a_fleet(readme):
    cp16 = _fleet(context_parallel=True)
    said = [n for n in pddplan.evaluate(readme, cp16).notes if "cannot launch" in n]
    assert said == [
        "sglang 0.5.21 cannot launch context parallelism over more than 8 GPUs for "
        "compressed attention: CP16+EP16 on h100-sxm"
    ]
    ideal = readme.derive({"engine": IDEAL})
    assert not [n for n in pddplan.evaluate(ideal, cp16).notes if "cannot launch" in n]
    trtllm = readme.derive({"engine": "trtllm"})
    said = [n for n in pddplan.evaluate(trtllm, _fleet(attention_tp=8)).notes if "cannot" in n]
    assert said == [
        "trtllm 1.3.0rc29 cannot launch data-parallel attention over tensor-parallel groups: "
        "DP2xTP8+EP16 on h100-sxm"
    ]


@pytest.mark.slow
def test_the_planners_head_split_evaluates_as_planned(readme):
    """The plan's prefill pool (DP2xTP8+EP16) read back from its fleet: the evaluator's
    capacity equals the plan's, and the layout is the pool's ``attention_tp``."""
    plan = pddplan.solve(readme)
    (prefill,) = [p for p in plan.fleet.pools if p.role == "prefill"]
    assert prefill.attention_tp == 8 and not prefill.context_parallel
    again = pddplan.evaluate(readme, Fleet.model_validate(plan.fleet.model_dump(mode="json")))
    assert again.sla_capacity_rps == plan.evaluation.sla_capacity_rps
    assert [p.layout for p in again.pools if p.role == "prefill"] == ["DP2xTP8+EP16"]


def test_a_pools_attention_width_is_written_only_where_set():
    assert "attention_tp" not in _fleet().pools[0].model_dump()
    assert _fleet(attention_tp=8).pools[0].model_dump()["attention_tp"] == 8


@pytest.mark.parametrize(
    ("pool", "message"),
    [
        ({"role": "main_decode", "attention_tp": 8}, "attention_tp is for prefill pools"),
        (
            {"role": "prefill", "attention_tp": 8, "context_parallel": True},
            "needs context_parallel",
        ),
    ],
)
def test_a_bad_attention_width_is_refused(pool, message):
    base = {"datacenter": "a", "chip": "h100-sxm", "gpus_per_instance": 16, "instances": 1}
    with pytest.raises(ValidationError, match=message):
        Pool(**base, **pool)


def test_an_attention_width_that_does_not_divide_the_instance_is_located(readme):
    with pytest.raises(pddplan.InputError, match=r"pools\[0\]\.attention_tp: .*does not divide"):
        pddplan.evaluate(readme, _fleet(attention_tp=3))
