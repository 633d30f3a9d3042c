"""compiler/megatron/timing.py: Megatron's FLOPs exactly, the bubble, and every step-time term."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.megatron.gpus import GPUS, LINK_EFFICIENCY, gpu_named, gpu_of_flavor, worker_network
from compiler.megatron.flops import FlopsArgs, flops_split, num_floating_point_operations
from compiler.megatron.timing import (
    LOGITS_BYTES_PER_ELEMENT, Calibration, Parallel, spec_step_time, step_time, training_time, work,
)

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
CASES = json.loads((FIXTURES / "flops_cases.json").read_text())
# Megatron's own function on the same cases, recorded by tools/flops_conformance.py at the pinned commit.
RECORDED = json.loads((FIXTURES / "flops_megatron.json").read_text())
MEGATRON = os.environ.get("MEGATRON_LM")

LLAMA8B = FlopsArgs(num_layers=32, hidden_size=4096, num_attention_heads=32, kv_channels=128, ffn_hidden_size=14336,
                    seq_length=4096, padded_vocab_size=128256, group_query_attention=True, num_query_groups=8,
                    swiglu=True)
H200 = GPUS["h200"]


def one_gpu(**kw: object) -> Parallel:
    base = dict(tensor=1, pipeline=1, context=1, data=1, micro_batch=1, global_batch=8, gpus_per_worker=1, workers=1)
    base.update(kw)
    return Parallel(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_port_equals_megatrons_recorded_figure(case: dict) -> None:
    ours = num_floating_point_operations(FlopsArgs(**case["args"]), case["batch_size"])
    assert ours == pytest.approx(RECORDED[case["name"]], rel=1e-12)


def test_cases_cover_the_branches() -> None:
    args = [c["args"] for c in CASES]
    assert len(CASES) >= 20
    assert any(a.get("num_experts") for a in args) and any(isinstance(a.get("moe_layer_freq"), list) for a in args)
    assert any(a.get("mtp_num_layers") for a in args) and any(a.get("moe_latent_size") for a in args)
    assert any(a.get("attention_output_gate") for a in args) and any(not a.get("group_query_attention") for a in args)


@pytest.mark.allow_ci_skip  # a checkout of Megatron-LM is never committed here; the recorded figures are tested
@pytest.mark.skipif(not MEGATRON, reason="MEGATRON_LM does not point at a Megatron-LM checkout")
def test_megatrons_own_function_live() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "flops_conformance.py"), MEGATRON or ""],
                          capture_output=True, text=True, check=False)
    if proc.returncode and "ModuleNotFoundError" in proc.stderr:
        pytest.skip(f"Megatron not importable here: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0, proc.stderr
    live = json.loads(proc.stdout)
    for case in CASES:
        ours = num_floating_point_operations(FlopsArgs(**case["args"]), case["batch_size"])
        assert ours == pytest.approx(live[case["name"]], rel=1e-12), case["name"]


def test_flops_by_hand_tiny_model() -> None:
    # 1 layer, h=64, 2 heads of 32, ffn 256, s=8, V=128, MHA, GELU, batch 1:
    # 6 tokens·h·(2·ffn + 4h) + 6·tokens·h·V + 6·s²·(heads·kv) = 6·8·64·(512+256) + 6·8·64·128 + 6·64·64
    args = FlopsArgs(num_layers=1, hidden_size=64, num_attention_heads=2, kv_channels=32, ffn_hidden_size=256,
                     seq_length=8, padded_vocab_size=128)
    expected = 6 * 8 * 64 * (2 * 256 + 4 * 64) + 6 * 8 * 64 * 128 + 6 * 64 * 64
    assert num_floating_point_operations(args, 1) == expected
    split = flops_split(args, 1)
    assert split.logits == 6 * 8 * 64 * 128 and split.core_attention == 6 * 64 * 64
    assert split.per_layer == expected - split.logits


def test_not_ported_branches_refuse() -> None:
    for change in ({"hybrid_layer_pattern": "M*"},
                   {"experimental_attention_variant": "gated_delta_net"}):
        with pytest.raises(NotImplementedError):
            num_floating_point_operations(LLAMA8B._replace(**change), 1)  # type: ignore[arg-type]


def test_compute_term_is_flops_over_peak_times_utilisation() -> None:
    step = step_time(LLAMA8B, one_gpu(), H200, params_per_rank=8e9, utilisation=0.5)
    flops = num_floating_point_operations(LLAMA8B, 8)
    assert step.term("compute").seconds == pytest.approx(flops / (989.5e12 * 0.5))
    for name in ("bubble", "tp", "cp", "dp-grads", "pp"):
        assert step.term(name).seconds == 0.0
    assert step.tflops_per_gpu == pytest.approx(flops / step.seconds / 1e12)
    assert step.tokens_per_second == pytest.approx(8 * 4096 / step.seconds)


def test_bubble_1f1b_and_interleaved() -> None:
    par = one_gpu(pipeline=4, global_batch=16, gpus_per_worker=4)
    step = step_time(LLAMA8B, par, H200, 2e9, utilisation=0.5)
    busy = sum(step.term(n).seconds for n in ("compute", "attention-memory", "elementwise", "logits-memory"))
    assert step.term("bubble").seconds == pytest.approx(busy * 3 / 16)
    inter = step_time(LLAMA8B, par._replace(virtual_pipeline=2), H200, 2e9, utilisation=0.5)
    assert inter.term("bubble").seconds == pytest.approx(busy * 3 / 32)


def test_last_stage_carries_the_logits() -> None:
    split = flops_split(LLAMA8B, 8)
    step = step_time(LLAMA8B, one_gpu(pipeline=2, gpus_per_worker=2), H200, 4e9, utilisation=1.0)
    assert step.term("compute").seconds == pytest.approx((split.per_layer * 16 + split.logits) / 989.5e12)


def test_recompute_adds_a_forward() -> None:
    base = step_time(LLAMA8B, one_gpu(), H200, 8e9, utilisation=0.5).term("compute").seconds
    split = flops_split(LLAMA8B, 8)
    full = step_time(LLAMA8B, one_gpu(recompute="full", recompute_method="uniform", recompute_num_layers=1),
                     H200, 8e9, utilisation=0.5)
    assert full.term("compute").seconds - base == pytest.approx(split.per_layer * 32 / 3 / (989.5e12 * 0.5))
    block = step_time(LLAMA8B, one_gpu(recompute="full", recompute_method="block", recompute_num_layers=8),
                      H200, 8e9, utilisation=0.5)
    assert block.term("compute").seconds - base == pytest.approx((full.term("compute").seconds - base) / 4)
    sel = step_time(LLAMA8B, one_gpu(recompute="selective"), H200, 8e9, utilisation=0.5)
    assert sel.term("compute").seconds - base == pytest.approx(split.core_attention / 3 / (989.5e12 * 0.5))


def test_tp_term_counts_four_all_reduces_per_layer() -> None:
    par = one_gpu(tensor=8, gpus_per_worker=8, global_batch=2)
    step = step_time(LLAMA8B, par, H200, 1e9, utilisation=0.5)
    message = 1 * 4096 * 4096 * 2
    one = 2 * 7 / 8 * message / (450e9 * LINK_EFFICIENCY)
    assert step.term("tp").seconds == pytest.approx(32 * 2 * 4 * one)
    assert step.term("tp").exposed and not step.term("tp").measured
    # sequence parallel moves the same bytes; full recompute repeats the forward's two
    assert step_time(LLAMA8B, par._replace(sequence_parallel=True), H200, 1e9, 0.5).term("tp").seconds == \
        pytest.approx(step.term("tp").seconds)
    full = step_time(LLAMA8B, par._replace(recompute="full", recompute_method="uniform", recompute_num_layers=1),
                     H200, 1e9, 0.5)
    assert full.term("tp").seconds == pytest.approx(step.term("tp").seconds * 6 / 4)


def test_dp_terms_all_reduce_or_reduce_scatter_and_their_links() -> None:
    params = 1e9
    inside = one_gpu(data=8, gpus_per_worker=8, global_batch=8)
    ar = step_time(LLAMA8B, inside, H200, params, 0.5).term("dp-grads")
    assert ar.seconds == pytest.approx(2 * 7 / 8 * params * 4 / (450e9 * LINK_EFFICIENCY)) and ar.exposed
    dist = step_time(LLAMA8B, inside._replace(distributed_optimizer=True), H200, params, 0.5)
    assert dist.term("dp-grads").seconds == pytest.approx(ar.seconds / 2)
    assert dist.term("dp-params").seconds == pytest.approx(7 / 8 * params * 2 / (450e9 * LINK_EFFICIENCY))
    across = one_gpu(data=16, gpus_per_worker=8, workers=2, global_batch=16, rdma=True)
    net = step_time(LLAMA8B, across, H200, params, 0.5).term("dp-grads")
    assert net.seconds == pytest.approx(2 * 15 / 16 * params * 4 / (50e9 * LINK_EFFICIENCY))
    tcp = step_time(LLAMA8B, across._replace(rdma=False), H200, params, 0.5).term("dp-grads")
    assert tcp.seconds == pytest.approx(net.seconds * 50 / (12.5 / 8))
    overlapped = step_time(LLAMA8B, inside._replace(overlap_grad_reduce=True), H200, params, 0.5)
    assert not overlapped.term("dp-grads").exposed
    assert overlapped.seconds == pytest.approx(step_time(LLAMA8B, inside, H200, params, 0.5).seconds - ar.seconds)


def test_pp_term_sends_per_microbatch_and_crosses_workers() -> None:
    par = one_gpu(pipeline=2, gpus_per_worker=2, global_batch=4, tensor=1)
    step = step_time(LLAMA8B, par, H200, 1e9, 0.5)
    message = 4096 * 4096 * 2
    assert step.term("pp").seconds == pytest.approx(2 * 4 * message / (450e9 * LINK_EFFICIENCY))
    across = par._replace(gpus_per_worker=1, workers=2, rdma=True)
    assert step_time(LLAMA8B, across, H200, 1e9, 0.5).term("pp").seconds == \
        pytest.approx(2 * 4 * message / (50e9 * LINK_EFFICIENCY))
    sp = par._replace(tensor=2, gpus_per_worker=4, sequence_parallel=True)
    assert step_time(LLAMA8B, sp, H200, 1e9, 0.5).term("pp").seconds == pytest.approx(step.term("pp").seconds / 2)


def test_cp_term_is_what_attention_does_not_hide() -> None:
    par = one_gpu(context=2, gpus_per_worker=2, global_batch=2)
    step = step_time(LLAMA8B, par, H200, 8e9, 0.5)
    kv = 2 * 1 * 2048 * 8 * 128 * 2
    comm = 32 * 2 * 3 * 1 * kv / (450e9 * LINK_EFFICIENCY)
    attention = flops_split(LLAMA8B, 2).core_attention / 2 / (989.5e12 * 0.5)
    assert step.term("cp").seconds == pytest.approx(max(0.0, comm - attention))
    # over PCIe and at a short sequence (attention ~ s², the exchange ~ s) the exchange outlasts it
    short = step_time(LLAMA8B._replace(seq_length=512), par, gpu_named("l40s"), 8e9, 0.5).term("cp")
    assert short.seconds > 0 and "PCIe" in short.note


def test_optimizer_term_is_hbm_bound() -> None:
    step = step_time(LLAMA8B, one_gpu(), H200, 1e9, 0.5)
    assert step.term("optimizer").seconds == pytest.approx((30e9 + 4e9) / (4.8e12 * 0.8))


def test_training_time_and_gpu_hours() -> None:
    step = step_time(LLAMA8B, one_gpu(data=8, gpus_per_worker=8), H200, 8e9, 0.5)
    total = training_time(step, 8, 8, train_iters=1000)
    assert total is not None and total.seconds == pytest.approx(1000 * step.seconds)
    assert total.gpu_hours == pytest.approx(1000 * step.seconds * 8 / 3600)
    by_samples = training_time(step, 8, 8, train_samples=8007)
    assert by_samples is not None and by_samples.iterations == 1000  # floor, as training.py:1504
    assert training_time(step, 8, 8) is None


def test_gpu_table_and_flavors() -> None:
    for gpu in GPUS.values():
        assert gpu.source and gpu.bf16_dense_tflops > 0 and gpu.memory_gb > 0
    assert gpu_of_flavor("H200") is GPUS["h200"] and gpu_of_flavor("8x-H200-141G") is GPUS["h200"]
    assert gpu_of_flavor("NVIDIA-H20") is GPUS["h20"] and gpu_of_flavor("A100-80G") is GPUS["a100"]
    assert gpu_of_flavor("cpu-only") is None and gpu_of_flavor(None) is None
    h800 = gpu_of_flavor("H800")
    assert h800 is not None and h800.bf16_dense_tflops == GPUS["h100"].bf16_dense_tflops and h800.nvlink_gb_s == 200
    with pytest.raises(KeyError):
        gpu_named("tpu")
    assert worker_network(True, 8).gb_s_per_gpu == 50 and worker_network(False, 8).gb_s_per_gpu == 12.5 / 8


def test_spec_step_time_reads_the_spec() -> None:
    from compiler.one_pass import compile_spec

    result = compile_spec(str(REPO / "specs" / "gpt-7b.yaml"), "specs/gpt-7b.yaml", render_files=False)
    step = spec_step_time(result.spec, utilisation=0.5)
    assert step is not None
    assert step.flops == pytest.approx(RECORDED["gpt-7b-spec-tp4"])  # vocab 128256 padded to 128512 at TP 4
    assert step.term("tp").seconds > 0 and step.term("pp").seconds > 0 and step.term("dp-params").seconds > 0


def test_gradients_reduce_over_data_and_context_ranks() -> None:
    params = 1e9
    cp2 = step_time(LLAMA8B, one_gpu(data=4, context=2, gpus_per_worker=8, global_batch=8), H200, params, 0.5)
    assert cp2.term("dp-grads").seconds == pytest.approx(2 * 7 / 8 * params * 4 / (450e9 * LINK_EFFICIENCY))
    dist = step_time(LLAMA8B, one_gpu(data=4, context=2, gpus_per_worker=8, global_batch=8,
                                      distributed_optimizer=True), H200, params, 0.5)
    assert dist.term("optimizer").seconds == pytest.approx((30 * params / 8 + 4 * params) / (4.8e12 * 0.8))


CAL = Calibration(utilisation=0.5, attention_bytes_per_score=48.0, elementwise_bytes=20.0, source="test")
HBM = 4.8e12 * 0.8


def test_local_attention_computes_the_masked_half_and_streams_the_scores() -> None:
    fused = step_time(LLAMA8B, one_gpu(), H200, 8e9, calibration=CAL)
    local = step_time(LLAMA8B, one_gpu(local_attention=True), H200, 8e9, calibration=CAL)
    core = flops_split(LLAMA8B, 8).core_attention
    assert local.term("compute").seconds - fused.term("compute").seconds == pytest.approx(core / (989.5e12 * 0.5))
    scores = 8 * 32 * 4096 * 4096 * 32  # batch × heads × s × s × layers
    assert local.term("attention-memory").seconds == pytest.approx(48 * scores / HBM)
    assert fused.term("attention-memory").seconds == 0.0
    tp2 = work(LLAMA8B, one_gpu(local_attention=True, tensor=2, gpus_per_worker=2))
    assert tp2.scores == pytest.approx(scores / 2)
    sel = work(LLAMA8B, one_gpu(local_attention=True, recompute="selective"))
    assert sel.scores == pytest.approx(scores * 4 / 3)  # the forward's passes again


def test_elementwise_and_logits_terms() -> None:
    step = step_time(LLAMA8B, one_gpu(fused_kernels=False), H200, 8e9, calibration=CAL)
    tokens = 8 * 4096
    assert step.term("elementwise").seconds == pytest.approx(20 * tokens * 4096 * 32 / HBM)
    fused = step_time(LLAMA8B, one_gpu(), H200, 8e9, calibration=CAL).term("elementwise")
    assert fused.seconds == pytest.approx(step.term("elementwise").seconds * 0.4) and not fused.measured
    assert step.term("logits-memory").seconds == pytest.approx(LOGITS_BYTES_PER_ELEMENT * tokens * 128256 / HBM)
    sp = step_time(LLAMA8B, one_gpu(tensor=4, gpus_per_worker=4, sequence_parallel=True, fused_kernels=False), H200,
                   8e9, calibration=CAL)
    assert sp.term("elementwise").seconds == pytest.approx(step.term("elementwise").seconds / 4)
    assert sp.term("logits-memory").seconds == pytest.approx(step.term("logits-memory").seconds / 4)
    dp2 = step_time(LLAMA8B, one_gpu(data=2, gpus_per_worker=2, fused_kernels=False), H200, 8e9, calibration=CAL)
    assert dp2.term("elementwise").seconds == pytest.approx(step.term("elementwise").seconds / 2)
    full = step_time(LLAMA8B, one_gpu(recompute="full", recompute_method="uniform", recompute_num_layers=1,
                                      fused_kernels=False), H200, 8e9, calibration=CAL)
    assert full.term("elementwise").seconds == pytest.approx(step.term("elementwise").seconds * 4 / 3)


def test_total_is_the_sum_of_exposed_terms() -> None:
    par = one_gpu(tensor=2, pipeline=2, data=2, gpus_per_worker=8, global_batch=16, local_attention=True,
                  distributed_optimizer=True, sequence_parallel=True)
    step = step_time(LLAMA8B, par, H200, 2e9, calibration=CAL)
    assert step.seconds == pytest.approx(sum(t.seconds for t in step.terms if t.exposed))
    assert {t.name for t in step.terms} >= {"compute", "attention-memory", "elementwise", "logits-memory", "bubble",
                                             "tp", "cp", "dp-grads", "dp-params", "pp", "optimizer"}
    assert all(not t.measured for t in step.terms if t.name in ("tp", "cp", "dp-grads", "dp-params", "pp"))
