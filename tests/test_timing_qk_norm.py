"""Issue 26, device calls 19-21: the query/key norms (--qk-layernorm) priced at their measured rates, a layer pass's
host time by architecture (layer_host_bench.py), the optimizer Megatron imports where TE is installed whatever the
layers, and the expert-parallel all-to-alls of the MoE layers only."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest

from compiler.megatron import host_time, rates, timing
from compiler.megatron.flops import FlopsArgs
from compiler.megatron.gpus import GPUS
from compiler.megatron.layer_time import Model, stage_work
from compiler.megatron.timing import Parallel, step_time

HOSTS = Path(__file__).resolve().parent / "fixtures" / "h200-hosts"
CALL19 = HOSTS / "call19"
QWEN = FlopsArgs(num_layers=8, hidden_size=1024, num_attention_heads=16, kv_channels=64, ffn_hidden_size=3072,
                 seq_length=2048, padded_vocab_size=151936, group_query_attention=True, num_query_groups=8, swiglu=True)
QWEN_MODEL = Model(bias=False, rope=True, learned_position=False, layernorm=False, untied=True)
TE = Parallel(tensor=1, pipeline=1, context=1, data=1, micro_batch=2, global_batch=2, gpus_per_worker=1, workers=1,
              stack="te", local_attention=False, fused_kernels=True)


def _bench() -> dict[str, tuple[float, float]]:
    """norm_host_bench.py's lines: module -> (host s, median GPU s an element over the four shapes)."""
    out = {}
    text = (CALL19 / "pre-bench.txt").read_text()
    for m in re.finditer(r"^(\S+): host ([\d.]+) us a module fwd\+bwd; kernels \d+; gpu (.*)$", text, re.M):
        per = [float(us) * 1e-6 / int(n) for us, n in re.findall(r"=([\d.]+)us\((\d+) el\)", m.group(3))]
        out[m.group(1)] = (float(m.group(2)) * 1e-6, statistics.median(per))
    return out


def test_the_qk_norm_rates_are_call_19s_measurements() -> None:
    bench = _bench()
    assert set(bench) == set(rates.QK_NORM_S_PER_ELEMENT)
    for module, (_, per) in bench.items():
        assert rates.QK_NORM_S_PER_ELEMENT[module] == pytest.approx(per, rel=1e-3)
    # a norm over 128 columns runs far slower an element than the layer's own norms
    assert min(rates.QK_NORM_S_PER_ELEMENT.values()) > 4 * rates.op_seconds("layernorm", 1.0)


def test_the_layer_features_are_call_21s_local_measurements() -> None:
    text = (HOSTS / "call21" / "pre-bench.txt").read_text()
    passes = {m.group(1): float(m.group(2)) for m in re.finditer(r"^local (\S+): ([\d.]+) ms a layer pass", text, re.M)}
    names = {"rope": "gpt+rope", "swiglu": "gpt+swiglu", "gqa": "gpt+gqa", "rmsnorm": "gpt+rmsnorm", "no-bias": "gpt-bias",
             "qk-norm": "gpt+qk"}
    assert set(host_time.LAYER_FEATURES) == set(names)
    for feature, share in host_time.LAYER_FEATURES.items():
        assert share == pytest.approx(passes[names[feature]] / passes["gpt"] - 1, abs=1e-3)
    # the features added against the bench's whole Llama and Qwen3 layers: within the rounds' spread
    llama = 1 + sum(v for k, v in host_time.LAYER_FEATURES.items() if k != "qk-norm")
    assert llama == pytest.approx(passes["llama"] / passes["gpt"], rel=0.05)
    assert llama + host_time.LAYER_FEATURES["qk-norm"] == pytest.approx(passes["qwen3"] / passes["gpt"], rel=0.1)


def test_qk_norms_cost_their_elements_on_the_gpu_and_a_local_feature_on_the_host() -> None:
    plain = stage_work(QWEN, QWEN_MODEL, TE, 8, True, True)
    qk = stage_work(QWEN, QWEN_MODEL._replace(qk_norm=True), TE, 8, True, True)
    tokens = 2 * 2048
    elements = tokens * (16 + 8) * 64  # each head's query and each group's key
    assert qk.elementwise - plain.elementwise == pytest.approx(8 * elements * rates.QK_NORM_S_PER_ELEMENT["te-rmsnorm"])
    local = TE._replace(stack="local", local_attention=True, fused_kernels=False)
    assert host_time.layer_features(QWEN, local._replace(model=QWEN_MODEL)) == ("rope", "swiglu", "gqa", "rmsnorm",
                                                                                "no-bias")
    qk_local = local._replace(model=QWEN_MODEL._replace(qk_norm=True))
    assert host_time.layer_factor(QWEN, qk_local) - host_time.layer_factor(QWEN, local._replace(model=QWEN_MODEL)) == \
        pytest.approx(host_time.LAYER_FEATURES["qk-norm"])
    a, b = (step_time(QWEN, p, GPUS["h200"], 6e8).stages[0].host_s for p in (local._replace(model=QWEN_MODEL), qk_local))
    assert b - a == pytest.approx(host_time.LAYER_FEATURES["qk-norm"] * 8 * timing.HOST_PER_LAYER)
    # a fused RoPE is not the bench's; a MoE layer's experts are not its SwiGLU MLP; TE's layer and another stack's
    # keep their figure; a GPT layer is the measured one
    assert "rope" not in host_time.layer_features(QWEN, local._replace(model=QWEN_MODEL, fused_kernels=True))
    assert "swiglu" not in host_time.layer_features(QWEN._replace(num_experts=8), local._replace(model=QWEN_MODEL))
    assert host_time.layer_factor(QWEN, TE._replace(model=QWEN_MODEL)) == 1.0
    assert host_time.layer_factor(QWEN, TE._replace(stack="deepspeed-fp16", model=QWEN_MODEL)) == 1.0
    gpt = QWEN._replace(group_query_attention=False, num_query_groups=None, swiglu=False)
    assert host_time.layer_factor(gpt, local._replace(model=Model())) == 1.0


def test_an_ngc_image_has_te_and_so_its_optimizer() -> None:
    from compiler.megatron.packages import image_optimizer
    from compiler.schema.records import Image
    from compiler.schema.record import new

    def image(base: str) -> Image:
        return new(Image, base=base, platform="linux/amd64", registry="r", namespace="n", repository="megatron", tag="t",
                   registry_username=None, base_login="auto")
    assert image_optimizer(image("nvcr.io/nvidia/pytorch:25.03-py3"), False) == "te"
    assert image_optimizer(image("nvcr.io/nvidia/pytorch@sha256:" + "0" * 64), False) == "te"
    assert image_optimizer(image("nvcr.io/nvidia/pytorch"), False) == "te"
    assert image_optimizer(image("nvcr.io/nvidia/pytorch-extra:1"), False) is None
    assert image_optimizer(image("docker.io/pytorch/pytorch:2.6.0-cuda12.4-cudnn9-runtime"), False) is None
    assert image_optimizer(image("docker.io/pytorch/pytorch:2.6.0"), True) == "te"


def test_the_optimizer_is_what_megatron_imports_not_the_layers() -> None:
    local = TE._replace(stack="local", local_attention=True, fused_kernels=False, model=QWEN_MODEL)
    assert host_time.optimizer_impl(local) == "torch" and host_time.iteration_tensors(QWEN, local) > 0
    with_te = local._replace(optimizer="te")  # a local spec where TE imports (call 13's and 19's local runs)
    assert host_time.optimizer_impl(with_te) == "te" and host_time.iteration_tensors(QWEN, with_te) == 0
    t = step_time(QWEN, with_te, GPUS["h200"], 6e8)
    assert "TE's FusedAdam" in t.term("optimizer").note
    assert "AdamW (foreach)" in step_time(QWEN, local, GPUS["h200"], 6e8).term("optimizer").note


def test_validate_timing_reads_the_optimizer_from_the_log() -> None:
    import tools.validate_timing as vt

    runs = {r.name: r for r in vt.load_runs()}
    assert runs["call19/mem-qwen-h1024-l8"].optimizer == "te"  # TE installed: no fallback warning
    assert runs["tiny-l2-h256"].optimizer == "torch"
    assert runs["call19/te-qwen-h1024-l8-qk"].args["qk_layernorm"] == "True"
    assert vt.inputs(runs["call19/te-qwen-h1024-l8-qk"])[1].model.qk_norm


def test_expert_all_to_alls_move_the_moe_layers_tokens_only() -> None:
    moe = QWEN._replace(num_experts=8, moe_router_topk=2, moe_ffn_hidden_size=768)
    par = TE._replace(expert=8, gpus_per_worker=8, data=8, global_batch=16, micro_batch=1)
    every = step_time(moe, par, GPUS["h200"], 6e8).term("ep").seconds
    first_dense = step_time(moe._replace(moe_layer_freq=[0, 1, 1, 1, 1, 1, 1, 1]), par, GPUS["h200"], 6e8).term("ep").seconds
    assert first_dense == pytest.approx(every * 7 / 8)
    full = par._replace(recompute="full", recompute_method="uniform", recompute_num_layers=1)
    assert step_time(moe, full, GPUS["h200"], 6e8).term("ep").seconds == pytest.approx(every * 6 / 4)
