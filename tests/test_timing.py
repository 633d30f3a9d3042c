"""compiler/megatron/timing.py and its parts: Megatron's FLOPs exactly, the measured rates, the stage work,
the communication terms and the schedule; tools/validate_timing.py's worst fold held here."""

from __future__ import annotations

import json
import statistics
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.megatron.gpus import GPUS, LINK_EFFICIENCY, gpu_named, gpu_of_flavor, worker_network
from compiler.megatron.flops import FlopsArgs, flops_split, num_floating_point_operations
from compiler.megatron import rates, timing
from compiler.megatron.layer_time import Model, stage_work
from compiler.megatron.pretrain import training_time
from compiler.megatron.timing import Parallel, spec_step_time, step_time
from helpers import load_tool

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


def step(args: FlopsArgs = LLAMA8B, **kw: object) -> object:
    return step_time(args, one_gpu(**kw), H200, 8e9)


TINY = FlopsArgs(num_layers=2, hidden_size=256, num_attention_heads=4, kv_channels=64, ffn_hidden_size=1024,
                 seq_length=256, padded_vocab_size=32000)
L4 = FlopsArgs(num_layers=4, hidden_size=1024, num_attention_heads=16, kv_channels=64, ffn_hidden_size=4096,
               seq_length=2048, padded_vocab_size=32000)


def test_gemm_table_interpolates_between_measured_points() -> None:
    # on a grid point the table's own time comes back; between points the rate lies between its neighbours'
    row = next(r for r in rates.table()["gemm_bf16"] if (r["m"], r["n"], r["k"]) == (2048, 2048, 2048))
    assert rates.gemm_seconds(2048, 2048, 2048) == pytest.approx(row["fwd_s"], rel=1e-9)
    rate = lambda m, n, k: 2 * m * n * k / rates.gemm_seconds(m, n, k)  # noqa: E731
    assert min(rate(2048, 2048, 2048), rate(8192, 2048, 2048)) <= rate(4096, 2048, 2048) <= max(
        rate(2048, 2048, 2048), rate(8192, 2048, 2048))
    assert rate(8192, 8192, 8192) > 10 * rate(128, 128, 128)  # small GEMMs reach far less of the peak


def test_measured_rates_are_physical() -> None:
    assert 3.0e12 < rates.hbm_bytes_per_second() < 4.8e12  # under the 4.8 TB/s datasheet
    assert 1e-6 < rates.host_seconds_per_launch() < 1e-4
    assert rates.adam_seconds(2**27) > rates.adam_seconds(2**24) > 0
    assert 5e-12 < rates.attention_score_seconds(4096) < 1e-10


def test_attention_passes_at_short_sequences_are_not_the_benchs_launches() -> None:
    # the s256 bench row timed the host issuing its ops (0.46 ms for 0.5 M scores): a GPU rate from it made an
    # L12 h768 s512 model's attention 71 ms a micro batch where its GEMMs take 2.6 ms
    rows = [r for r in rates.table()["attention_core"] if "error" not in r]
    smallest = min(rows, key=lambda r: r["b"] * r["heads"] * r["s"] ** 2)
    launch_bound = (smallest["fwd_bwd_s"] - smallest["matmuls_only_s"]) / (
        smallest["b"] * smallest["heads"] * smallest["s"] ** 2)
    for seq in (256, 512, 1024):
        assert rates.attention_score_seconds(seq) < launch_bound / 10
        assert rates.attention_score_seconds(seq) == pytest.approx(rates.attention_score_seconds(2048), rel=0.5)


def test_recompute_adds_the_forward_only() -> None:
    par = one_gpu(local_attention=True, fused_kernels=False)
    plain = stage_work(L4, Model(), par, 4, True, True)
    full = stage_work(L4, Model(), par._replace(recompute="full", recompute_method="uniform", recompute_num_layers=1),
                      4, True, True)
    selective = stage_work(L4, Model(), par._replace(recompute="selective"), 4, True, True)
    assert plain.recompute == 0 and full.recompute > selective.recompute > 0
    # a forward is about a third of forward + backward
    assert 0.2 < (full.gpu - plain.gpu) / (plain.gpu - plain.head - plain.embedding) < 0.5


def test_last_stage_carries_the_head_first_the_embedding() -> None:
    par = one_gpu(pipeline=2, local_attention=True, fused_kernels=False)
    first = stage_work(L4, Model(), par, 2, True, False)
    last = stage_work(L4, Model(), par, 2, False, True)
    assert first.head == 0 and last.head > 0 and first.embedding > 0 and last.embedding == 0
    big = stage_work(L4._replace(padded_vocab_size=256000), Model(), par, 2, False, True)
    assert big.head > 5 * last.head


def test_tiny_models_are_host_bound() -> None:
    s = step_time(TINY, one_gpu(micro_batch=2, global_batch=8, local_attention=True, fused_kernels=False), H200, 1e7)
    assert all(st.host_s > st.gpu_s for st in s.stages)
    big = step_time(L4, one_gpu(micro_batch=4, global_batch=4, local_attention=True, fused_kernels=False), H200, 8.5e7)
    assert all(st.gpu_s > st.host_s for st in big.stages)


def test_bubble_1f1b_and_interleaved() -> None:
    base = dict(pipeline=4, global_batch=16, gpus_per_worker=4)
    plain = step(**base)
    inter = step(virtual_pipeline=2, **base)
    per_mb = sum(s.microbatch_s for s in plain.stages) / len(plain.stages)
    assert plain.term("bubble").seconds == pytest.approx(3 * per_mb)
    assert inter.term("bubble").seconds == pytest.approx(plain.term("bubble").seconds / 2, rel=1e-6)


def test_tp_terms_and_their_overlap() -> None:
    tp1, tp4 = step(), step(tensor=4, gpus_per_worker=4)
    assert tp1.term("tp").seconds == 0 and tp4.term("tp").seconds > 0
    # --tp-comm-overlap runs only with sequence parallel (arguments.py:1386-1387): TE's userbuffers hide
    # the SP collectives behind the GEMMs but what a collective takes beyond its GEMM, the pipelined
    # reduce-scatters' last quarter and the SMs the comm kernels hold (comm_time.userbuffer_exposed)
    sp = step(tensor=4, gpus_per_worker=4, sequence_parallel=True)
    hidden = step(tensor=4, gpus_per_worker=4, sequence_parallel=True, tp_comm_overlap=True)
    assert hidden.term("tp").seconds == pytest.approx(sp.term("tp").seconds)
    assert 0 < next(t.seconds for t in hidden.terms if t.name.startswith("tp") and t.exposed) < 0.5 * sp.term("tp").seconds
    assert hidden.seconds < sp.seconds  # only part of it stays exposed


def test_context_parallelism_is_not_free() -> None:
    # CP ranks each hold the whole weights: K/V exchanges and their latency are never fully hidden
    base = dict(data=1, global_batch=8, gpus_per_worker=8, fused_kernels=True, stack="te")
    cp2 = step(context=2, **base)
    assert cp2.term("cp").seconds > 0
    exposed = [t for t in cp2.terms if t.name.startswith("cp") and t.exposed]
    assert exposed and sum(t.seconds for t in exposed) > 0


def test_dp_overlap_leaves_the_last_bucket_and_crossing_workers_costs_more() -> None:
    one = step(data=8, global_batch=64, gpus_per_worker=8, distributed_optimizer=True)
    two = step(data=16, global_batch=128, gpus_per_worker=8, workers=2, distributed_optimizer=True, rdma=True)
    tcp = step(data=16, global_batch=128, gpus_per_worker=8, workers=2, distributed_optimizer=True, rdma=False)
    assert one.term("dp-grads").seconds < two.term("dp-grads").seconds < tcp.term("dp-grads").seconds
    over = step(data=16, global_batch=128, gpus_per_worker=8, workers=2, distributed_optimizer=True, rdma=True,
                overlap_grad_reduce=True)
    assert over.term("dp-grads-exposed").seconds < two.term("dp-grads").seconds


def test_other_gpus_scale_by_their_datasheet() -> None:
    h200 = step_time(L4, one_gpu(micro_batch=4, global_batch=4), H200, 8.5e7)
    a100 = step_time(L4, one_gpu(micro_batch=4, global_batch=4), GPUS["a100"], 8.5e7)
    ratio = a100.stages[0].gpu_s / h200.stages[0].gpu_s
    assert GPUS["h200"].hbm_tb_s / GPUS["a100"].hbm_tb_s < ratio < GPUS["h200"].bf16_dense_tflops / GPUS["a100"].bf16_dense_tflops


def test_fp8_speeds_up_the_gemms_only() -> None:
    bf16 = step(stack="te", fused_kernels=True)
    fp8 = step(stack="te", fused_kernels=True, precision="fp8")
    assert fp8.seconds < bf16.seconds
    assert fp8.term("optimizer").seconds == bf16.term("optimizer").seconds


def test_training_time_and_gpu_hours() -> None:
    s = step(data=8, gpus_per_worker=8)
    total = training_time(s.seconds, 8, 8, train_iters=1000)
    assert total is not None and total.seconds == pytest.approx(1000 * s.seconds)
    assert total.gpu_hours == pytest.approx(1000 * s.seconds * 8 / 3600)
    by_samples = training_time(s.seconds, 8, 8, train_samples=8007)
    assert by_samples is not None and by_samples.iterations == 1000  # floor, as training.py:1504
    assert training_time(s.seconds, 8, 8) is None


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


def test_one_gpu_table_for_memory_and_time() -> None:
    # issue 25: memory and timing read gpus.py's table; an H20 flavor has a memory figure
    from compiler.megatron.memory import gpu_memory_gb

    class Res:
        gpu_memory_gb = None
        worker_flavor = "NVIDIA-H20-96G"

    assert gpu_memory_gb(Res()) == GPUS["h20"].memory_gb
    Res.worker_flavor = "H100-80G"
    assert gpu_memory_gb(Res()) == GPUS["h100"].memory_gb


def test_spec_step_time_reads_the_spec() -> None:
    from compiler.one_pass import compile_spec

    result = compile_spec(str(REPO / "specs" / "gpt-7b.yaml"), "specs/gpt-7b.yaml", render_files=False)
    s = spec_step_time(result.spec)
    assert s is not None
    assert s.flops == pytest.approx(RECORDED["gpt-7b-spec-tp4"])  # vocab 128256 padded to 128512 at TP 4
    assert s.term("tp").seconds > 0 and s.term("pp").seconds > 0 and s.term("dp-params").seconds > 0
    assert [st.stage for st in s.stages] == ["first", "last"]


def test_total_is_the_sum_of_exposed_terms() -> None:
    s = step(pipeline=2, tensor=2, data=2, gpus_per_worker=8, global_batch=16, distributed_optimizer=True,
             overlap_grad_reduce=True)
    assert s.seconds == pytest.approx(sum(t.seconds for t in s.terms if t.exposed))


# --- the validation: tools/validate_timing.py's leave-one-out, held at its committed worst fold

def _tool(name: str) -> object:
    return load_tool(name)


VALIDATION = _tool("validate_timing").validate()  # type: ignore[attr-defined]


def test_leave_one_out_holds_the_committed_worst_fold() -> None:
    # the doc's figures; the worst is NOT the 15 % of the acceptance: host-bound runs measured on lent hosts that
    # ran the same job up to 2.4x apart miss it (the floor, test_kept_runs_of_one_job_spread_past_the_acceptance).
    # The worst is the oldest fixtures' local-experts moe8-top2 (-51.5 %: its first iterations plan every new token
    # count with cuBLASLt, calls 41 and 50), then call 6's slow host (-45 % on mem-moe8-top2, -41 % on the tiny GPT)
    own = [r for r in VALIDATION["rows"] if not r["contended"]]
    assert len(own) >= 281
    assert VALIDATION["worst"] <= 0.52
    assert sum(abs(r["error"]) <= 0.15 for r in own) >= 172


def test_the_floor_under_any_estimate_is_the_groups_spread() -> None:
    floors = _tool("validate_timing").floors  # type: ignore[attr-defined]

    def row(name: str, ms: float, est: float, **kw: object) -> dict:
        return {"name": name, "measured_ms": ms, "in_sample_ms": est, "contended": False, "unpriced": "", **kw}

    rows = [row("call3/a", 40.0, 50.0), row("call6/a", 100.0, 50.0), row("call6/a2", 90.0, 50.0),
            row("call6/b", 10.0, 20.0), row("call7/c", 99.0, 50.0, contended=True),
            row("call7/d", 1.0, 50.0, unpriced="--deterministic-mode")]
    got = floors(rows)
    assert len(got) == 1 and [r["name"] for r in got[0].rows] == ["call6/a", "call6/a2", "call3/a"]
    assert abs(got[0].floor - 60 / 140) < 1e-12  # p = 2 * 100 * 40 / 140 is 3/7 off both ends
    one = floors(rows, one_host=True)
    assert len(one) == 1 and abs(one[0].floor - 10 / 190) < 1e-12  # call 3's run has no partner on its host


def test_kept_runs_of_one_job_spread_past_the_acceptance() -> None:
    # the reason acceptance 1 of issue 26 cannot be met by an estimate of the job alone: the same compiled tiny job
    # ran 42.4 ms on call 3's host and 94.3 on call 6's (docs/performance-model.md, the floor)
    floors = _tool("validate_timing").floors  # type: ignore[attr-defined]
    groups = floors(VALIDATION["rows"])
    top = {r["name"] for r in groups[0].rows}
    assert {"tiny-l2-h256", "call6/mem-tiny-l2-h256"} <= top and groups[0].floor >= 0.38
    for g in groups:  # the floor holds for the model's own figure too: one estimate per group
        assert max(abs(r["in_sample_ms"] / r["measured_ms"] - 1) for r in g.rows) >= g.floor - 1e-9
    host = floors(VALIDATION["rows"], one_host=True)[0]
    assert host.floor > 0.15 and len({r["name"].split("/")[0] for r in host.rows}) == 1
    assert host.floor <= groups[0].floor <= VALIDATION["worst"] + 1e-9


def test_host_calibrated_leave_one_out_holds_the_committed_figures() -> None:
    # resources.host_time_factor, validated as `megatron-compile calibrate` would give it: each run's host factor
    # from the other kept runs of its device call (one lent host), never its own; runs whose host the repository
    # does not record stay uncalibrated. Not the acceptance either: within one host the tiny GPT at 8 layers and one
    # micro batch and at 2 layers and 4 (call 6: +57 and -23 % calibrated) disagree on the split the profile
    # gave a layer pass and a micro batch
    own = [r for r in VALIDATION["rows"] if not r["contended"]]
    # the worst, over every run and over the runs a host calibrated, is call 35's 48-expert job (+58 %: its call's three
    # other runs ran under the model, it over), then call 19's TE 64-expert run (+56 %)
    assert VALIDATION["worst_calibrated"] <= 0.58
    assert max(abs(r["calibrated_error"]) for r in own if r["calibrated_by"]) <= 0.58
    assert sum(abs(r["calibrated_error"]) <= 0.15 for r in own) >= 213
    cal = [r for r in own if r["calibrated_by"]]
    assert len(cal) >= 211
    # a call's factor is never its own run's: the factor of a run alone on its host is 1
    assert all(r["host_factor"] == 1.0 for r in own if not r["calibrated_by"])
    # the fast host of call 22 and the slow one of call 6 come out either side of 1
    factor = {r["name"]: r["host_factor"] for r in own}
    # call 43's split: 0.79; 0.80 with call 49's runs in the folds' host speed
    assert factor["call22/mem-llama-h512-l8"] <= 0.80 and factor["call6/mem-l24"] > 1.2
    assert timing.MEASURED_SPREAD["host-calibrated"] == _tool("perfdoc").spread(VALIDATION)["host-calibrated"]  # type: ignore[attr-defined]


def test_gpu_bound_runs_hold_the_committed_worst() -> None:
    # the committed figure of the runs the fit calls GPU-bound (docs/performance-model.md draws the line after
    # the errors were seen: a report, not the acceptance); of whole steps call6/mem-l4-ga4 on call 6's slow host is the
    # worst; of the one-GPU ranks call45/hx-h1536 (-20 %: its GPU side the model's within 0.3 % in call 45's trace, the
    # GPU idle while the host works near the crossover, without the loss's sync a fake group drops); of every run a one-GPU local-expert run (call 37's 16 experts of 8192 tokens, -30 %: LOCAL_EXPERT_RANKS;
    # its GPU side within 5 % in call 38's trace, its host the rest)
    gpu = [r for r in VALIDATION["rows"] if not r["contended"] and not r["unpriced"] and r["bound"] == "GPU"]
    assert len(gpu) >= 44
    # call 23's cal-mem-h1536-l6 on its slow host (-37 %) sits at the crossover: host-bound by the fit until call 52's
    # runs moved HOST_SPEED 0.520 -> 0.515, GPU-bound since (the GPU-bound spread plan.md shows went 1.21 -> 1.59x on it)
    crossover = [r for r in gpu if r["name"] in CROSSOVER]
    assert len(crossover) <= 1 and all(-0.40 < r["error"] < -0.30 for r in crossover)
    gpu = [r for r in gpu if r["name"] not in CROSSOVER]
    assert max(abs(r["error"]) for r in gpu if not r["stage"]) <= 0.18  # 0.17 since call 43's split
    assert max(abs(r["error"]) for r in gpu if r["name"] not in LOCAL_EXPERT_RANKS) <= 0.20
    assert max(abs(r["error"]) for r in gpu) <= 0.36


CROSSOVER = {"call23/cal-mem-h1536-l6"}  # a whole step at the fit's line between GPU- and host-bound


KEPT_RANKS = 123  # the counted fake-process-group ranks: call 29's 13, call 30's 7, call 31's 4, calls 32, 34, 35, 37 and 40's 4
# each, call 41's 3, call 42's 15 and call 43's 33 (one-GPU tiny jobs, host-bound), calls 44, 45 and 47's 5 (whole models), call
# 49's 4 (three MoE families and the tiny GPT as its host's reference), calls 50 and 51's 2 each and call 52's 3 (local
# experts for hundreds of iterations, with cuBLASLt's default heuristics cache and with a large one), two one-stage
# the fake-process-group ranks with a pipeline stage beside them that ran on the fake receive's unfilled buffer
# (device calls 26 and 27) and those without one
ONE_STAGE = {"call26/fpg-tp8-h8192/first", "call27/fpg-tp2-s8192/first"}
# Megatron's local experts (calls 31, 32, 34, 35, 37 and 41): each expert's host time measured on
# Megatron's SequentialMLP (host_time.LOCAL_EXPERT_SHARE, call 34), its forward's beyond its GPU time waited for, its
# backward's beside the GPU (host_time.LOCAL_EXPERT_FORWARD_SHARE, call 35)
LOCAL_EXPERT_RANKS = {"call31/fpg-moe16-pp4/first", "call31/fpg-moe16-pp4/last", "call32/fpg-moe-e8/first",
                      "call32/fpg-moe-e16/first", "call32/fpg-moe-e32/first", "call32/fpg-moe-e64/first",
                      "call34/fpg-moe-e32/first", "call34/fpg-moe-e32-autogc/first", "call34/fpg-moe-e60-qwen/first",
                      "call34/fpg-moe-h1024-e16/first", "call35/fpg-moe-e32/first", "call35/fpg-moe-e32-mb4/first",
                      "call35/fpg-moe-e16-v256k/first", "call35/fpg-moe-e48-l8/first", "call37/fpg-moe-e8-f4096/first",
                      "call37/fpg-moe-e16-gelu/first", "call37/fpg-moe-e16-f1024-mb16/first", "call37/fpg-moe-e32-mb4/first",
                      "call41/fpg-moe-e16-f1024-mb16-long/first", "call41/fpg-moe-e16-f1024-mb16-long-cache/first",
                      "call41/fpg-moe-e16-f1024-mb16-long-again/first", "call49/fam-mixtral-l2/first",
                      "call49/fam-olmoe-l4/first", "call49/fam-qwen3moe-l4/first",
                      "call50/fpg-moe-e16-f1024-mb16-soak/first", "call50/fpg-moe-e16-f1024-mb16-soak-cache/first",
                      "call51/fam-olmoe-l4-soak/first", "call51/fam-olmoe-l4-soak-cache/first",
                      "call52/fam-qwen3moe-l4-soak/first", "call52/fam-qwen3moe-l4-soak-cache/first",
                      "call52/fam-qwen3moe-l4-soak-again/first"}
# a call's host reference (the tiny GPT of calls 6-24, host-bound), run beside held-out jobs
HOST_REFERENCES = {"call49/mem-hc-tiny-ga4/first"}


def test_ranks_of_multi_gpu_layouts_alone_hold_their_compute() -> None:
    # device calls 26-35 (tests/fixtures/h200-hosts): the first and last stage's rank of fourteen TP/PP/VPP/DP/MoE
    # layouts and twelve one-GPU local-expert runs, each run alone with --fake-process-group, priced as timing.fake_rank_seconds (no bubble, no
    # collectives). A pipelined rank of calls 26 and 27 computed on the fake receive's unfilled buffer (NaN, zeros or
    # finite garbage): shown, neither fitted nor counted; calls 29 and 30 reran them with the buffers filled
    ranks = [r for r in VALIDATION["rows"] if r["stage"]]
    earlier = [r for r in ranks if r["name"].split("/")[0] in ("call26", "call27")]
    assert len(earlier) == 22
    tiny = {r["name"] for r in ranks if r["name"].startswith(("call42/", "call43/"))}  # the host-split grids: host-bound
    assert len(tiny) == 48 and {r["name"] for r in ranks if r["bound"] != "GPU"} < LOCAL_EXPERT_RANKS | tiny | HOST_REFERENCES
    assert {r["name"] for r in earlier if not r["void"]} == ONE_STAGE
    assert all(r["contended"] for r in ranks if r["void"])  # contended rows are never fitted (fit_idx) or counted
    kept = [r for r in ranks if not r["void"]]
    assert {r["name"].split("/")[0] for r in kept if r["name"] not in ONE_STAGE} == {"call29", "call30", "call31", "call32",
                                                                                     "call34", "call35", "call37", "call40",
                                                                                     "call41", "call42", "call43",
                                                                                     "call44", "call45", "call47",
                                                                                     "call49", "call50", "call51", "call52"}
    assert len(kept) >= KEPT_RANKS and not any(r["contended"] for r in kept)
    # dense: within 6 % (call 44's whole Qwen3-0.6B shape -6.0 %); the Mixtral-shaped MoE (2048 tokens an expert, GPU-bound: the measured expert host time all
    # behind its GPU time) -12 and -5 %, where the profiled per-call figure's wait had put them within 4 %
    held = [r for r in kept if r["name"] not in LOCAL_EXPERT_RANKS | tiny | HOST_REFERENCES]
    mixtral = [r for r in held if "fpg-moe-pp2-dp4" in r["name"]]
    assert all(r["bound"] == "GPU" for r in held) and len(mixtral) == 2
    # call 45's hx-h1536 (host/GPU 0.9 a micro batch, no loss sync under a fake group) -20 %: its GPU busy the model's
    # within 0.3 % (call 45's trace), the rest the GPU idle beside the host, which max(GPU, host) does not price
    crossover = [r for r in held if r["name"] == "call45/hx-h1536/first"]
    assert len(crossover) == 1 and abs(crossover[0]["error"]) <= 0.20
    assert max(abs(r["error"]) for r in held if r not in mixtral + crossover) <= 0.06, [(r["name"], r["error"]) for r in held]
    assert max(abs(r["error"]) for r in mixtral) <= 0.13
    # the local experts over five lent hosts, two of whose benches put an expert's host cost 1.7x apart (calls 34 and
    # 35): call 32's sweep 5-25 % under, call 34's within 19 %, call 35's 48-expert job 39 % over and its other three
    # 10-12 % under; call 37's four 8-30 % under (the most tokens an expert, 8192, the most under: the share of
    # token counts cuBLAS has not planned, calls 38-39); call 31's 16-expert first stage 26 % under, its last (with the
    # head's GPU work beside the experts') within 6 %; call 37's worst job for 80 iterations on call 41's host 3-9 % under
    local = {r["name"]: r["error"] for r in kept if r["name"] in LOCAL_EXPERT_RANKS}
    # call 49's MoE families, held out: the Mixtral block -5 %, OLMoE's 1024 tokens an expert -17 %, the
    # Qwen3-30B-A3B block's 256 +12 % (the errors run with the tokens an expert receives, as calls 31-37's did)
    # calls 50 and 51's long runs: the default cache's 8192-tokens-an-expert job -22 % (its late steps planning most
    # GEMMs again), the large cache's -7 %; the OLMoE-shaped block -7 and +9 %
    # call 52's Qwen3-30B-A3B-shaped block again, on a faster host: +19 to +34 %
    assert len(local) == 31 and all(-0.37 < e < 0.40 for e in local.values()), local
    assert -0.25 < local["call50/fpg-moe-e16-f1024-mb16-soak/first"] < local["call50/fpg-moe-e16-f1024-mb16-soak-cache/first"] < 0
    assert all(-0.17 < e < 0 for n, e in local.items() if n.startswith("call41"))
    # the most under, both -34 % since call 46's paths: call 37's 8192 tokens an expert and call 32's e32 on its host
    assert min(local, key=lambda n: local[n]) in ("call37/fpg-moe-e16-f1024-mb16/first", "call32/fpg-moe-e32/first")
    assert all(-0.36 < e < 0 for n, e in local.items() if n.startswith("call32"))
    # the most over: the Qwen3-30B-A3B-shaped block, the fewest tokens an expert of them all (256), on call 52's host
    assert max(local, key=lambda n: local[n]).startswith("call52/fam-qwen3moe-l4-soak")
    assert abs(local["call31/fpg-moe16-pp4/last"]) < 0.06 and all(abs(e) < 0.19 for n, e in local.items()
                                                                  if n.startswith("call34"))
    calibrated = {r["name"]: r["calibrated_error"] for r in kept if r["name"].startswith("call34/")}
    assert len(calibrated) == 4 and all(abs(e) < 0.19 for e in calibrated.values()), calibrated  # e60-qwen +18.0 %
    lo, hi = timing.MEASURED_SPREAD["host"]
    # the host-bound ranks inside the spread plan.md shows, but call 43's grid on the fastest lent host (down to 0.67x)
    assert all(lo <= 1 / (1 + r["error"]) <= hi for r in kept if r["bound"] == "host" and r["name"] not in tiny)
    assert min(1 / (1 + r["error"]) for r in kept if r["name"] in tiny) > 0.66
    # whole-step figures only: the ranks are in neither MODEL_ERROR nor the spreads plan.md shows
    perfdoc = _tool("perfdoc")
    whole = {**VALIDATION, "rows": [r for r in VALIDATION["rows"] if not r["stage"]]}
    assert perfdoc.model_error(VALIDATION) == perfdoc.model_error(whole)  # type: ignore[attr-defined]
    assert perfdoc.spread(VALIDATION) == perfdoc.spread(whole)  # type: ignore[attr-defined]


def test_a_gemm_past_the_tables_unmeasured_corner_takes_the_nearest_point() -> None:
    # the GEMM grid lacks 32768^3 (tools/microbench.py did not time it): a query there took every corner's weight
    # from nothing and divided by zero; it now takes the nearest measured point's rate
    edge = rates.gemm_seconds(32768, 32768, 32768)
    assert 0 < edge < float("inf") and edge >= rates.gemm_seconds(16384, 32768, 32768)
    assert rates.gemm_seconds(65536, 65536, 65536) == pytest.approx(8 * edge)  # beyond it: that rate


def test_local_experts_activation_is_the_measured_path_where_megatron_runs_it_unfused() -> None:
    # device call 37's rule: Megatron's MLP without the bias-activation fusion runs each expert's activation and
    # per-token scale on strided and broadcast views (mlp.py:313-335), priced by tools/expert_act_bench.py's table
    # (rates.expert_activation_seconds) and SequentialMLP's two cats; a fused SwiGLU and TE's grouped experts stay one
    # pass each way. A plain GeLU never fuses with the per-token scale, so fused_kernels does not change its price.
    moe = dict(num_layers=4, hidden_size=2048, num_attention_heads=16, kv_channels=128, ffn_hidden_size=1536,
               seq_length=4096, padded_vocab_size=32000, num_experts=32, moe_router_topk=4)
    swiglu, gelu = FlopsArgs(**moe, swiglu=True), FlopsArgs(**moe)  # type: ignore[arg-type]
    work = lambda args, **kw: stage_work(args, Model(), one_gpu(micro_batch=2, local_attention=True, **kw), 4, True, True)  # noqa: E731
    unfused, fused = work(swiglu, fused_kernels=False), work(swiglu, fused_kernels=True)
    per_expert = 2 * 4096 * 4 / 32  # tokens an expert: micro batch 2 at s4096, top 4 of 32
    table = 4 * 32 * rates.expert_activation_seconds(per_expert, 1536, True)  # four MoE layers of 32 experts
    passes = 4 * (rates.op_seconds("gelu", 32 * per_expert * 1536) + rates.op_seconds("scale", 32 * per_expert * 1536))
    cats = 4 * 2 * 32 * per_expert * 2048 * 4 / rates.hbm_bytes_per_second()
    assert unfused.moe - fused.moe == pytest.approx(table + cats - passes)
    assert table > 3 * passes  # the generic kernels on small tensors: 3-4x what the passes priced (call 37)
    assert work(gelu, fused_kernels=True).moe == pytest.approx(work(gelu, fused_kernels=False).moe)
    grouped = lambda fk: work(swiglu, fused_kernels=fk, grouped_gemm=True, stack="te").moe  # noqa: E731
    assert grouped(False) == pytest.approx(grouped(True))


def test_the_embedding_is_its_measured_lookup() -> None:
    # rates.embedding_seconds (device call 31, tools/embedding_bench.py): at every measured case the CUDA graph's
    # replay, between them interpolated. Call 27's head bench timed the embedding eagerly at eight shapes (the
    # TP > 1 path at a shard): the GPU's term under each by no more than the host's issuing, which call 31's own
    # eager times put at up to 0.6 ms at small shapes; the two passes it replaced priced under 0.3 of them
    rows = json.loads((REPO / "compiler" / "megatron" / "data" / "embedding-h200.json").read_text())["rows"]
    assert rows == json.loads((FIXTURES / "h200-hosts" / "call31" / "embedding-bench.json").read_text())["rows"]
    assert len(rows) == 81
    for r in rows:
        got = rates.embedding_seconds(r["tokens"], r["hidden"], r["vocab_shard"], r["tp"])
        assert got == pytest.approx(r["gpu_seconds"], rel=1e-9)
    assert rates.embedding_seconds(8192, 4096, 131072, 1) < rates.embedding_seconds(8192, 4096, 200000, 1) \
        < rates.embedding_seconds(8192, 4096, 262144, 1)
    bench = json.loads((FIXTURES / "h200-hosts" / "call27" / "head-bench.json").read_text())["rows"]
    for r in bench:
        model = rates.embedding_seconds(r["tokens"], r["hidden"], r["vocab"], 2)
        assert 0 < r["embedding_s"] - model <= 0.45e-3, r["name"]
        assert 2 * rates.op_seconds("add", r["tokens"] * r["hidden"]) < 0.3 * r["embedding_s"]


def test_the_head_alone_is_the_models_terms() -> None:
    # tools/head_bench.py (device call 27): the output layer's three GEMMs and Megatron's vocab_parallel_cross_entropy
    # timed alone at eight shapes; the model's head (the GEMM table, CROSS_ENTROPY_BYTES at the HBM rate) within 7 %
    # of each (committed: -6.6..+0.3 %), though the parts alone differ from its terms (the cross entropy 71-85 bytes a
    # logit where 52 are counted, the GEMMs -11 to +1 % from the table)
    from compiler.megatron import layer_time

    bench = json.loads((FIXTURES / "h200-hosts" / "call27" / "head-bench.json").read_text())
    assert len(bench["rows"]) == 8
    for r in bench["rows"]:
        model = (rates.linear_seconds(r["tokens"], r["vocab"], r["hidden"])
                 + layer_time.CROSS_ENTROPY_BYTES * r["tokens"] * r["vocab"] / rates.hbm_bytes_per_second())
        assert abs(model / r["head_s"] - 1) <= 0.07, r["name"]
    per_logit = [r["ce_s"] * rates.hbm_bytes_per_second() / (r["tokens"] * r["vocab"]) for r in bench["rows"]]
    assert 70 < statistics.median(per_logit) < 75


def test_the_bound_is_the_models_own() -> None:
    # tools/validate_timing.py's bound and timing.step_time's agree: tiny models host-bound, 24 layers GPU-bound
    from compiler.one_pass import compile_spec

    rows = {r["name"]: r["bound"] for r in VALIDATION["rows"]}
    for spec, row, kind in (("mem-hc-tiny-ga4", "call6/mem-hc-tiny-ga4", "host"), ("mem-l24", "call6/mem-l24", "GPU"),
                            ("te/te-l4", "te-l4", "host"), ("te/te-gqa8-h4096", "te-gqa8-h4096", "GPU")):
        result = compile_spec(str(REPO / "tests" / "e2e" / f"{spec}.yaml"), f"{spec}.yaml", render_files=False)
        s = spec_step_time(result.spec)
        assert s is not None and s.bound == rows[row] == kind, spec
        lo, hi = timing.MEASURED_SPREAD[kind]
        assert s.spread_s == pytest.approx((s.seconds * lo, s.seconds * hi))


def test_a_run_with_an_option_the_model_does_not_price_is_shown_not_fitted() -> None:
    # stop-ref's iterations after its neighbour exited ran alone, with --deterministic-mode
    row = next(r for r in VALIDATION["rows"] if r["name"] == "h200-stop-resume/stop-ref (alone)")
    assert not row["contended"] and "deterministic" in row["unpriced"]
    assert row["loo_ms"] == pytest.approx(row["in_sample_ms"])  # the fit never saw it
    assert len(VALIDATION["folds"]) == sum(1 for r in VALIDATION["rows"] if not r["contended"] and not r["unpriced"])


def test_local_runs_but_the_host_bound_hold_the_committed_worst() -> None:
    # the committed figure, not an acceptance: the runs without TE but those the fit calls host-bound (the tiny
    # models, micro batch 1 at s 2048, call 22's Llama and Qwen3 stacks on its fast host, call 25's host-bound specs on
    # its slow one: their hosts, not the model's GPU side, set them); the worst is call45/hx-h1536, -20 % (its GPU side
    # the model's in call 45's trace, its host's idle time not)
    dense = [r for r in VALIDATION["rows"] if not r["contended"] and not r["te"] and not r["unpriced"]
             and r["bound"] != "host" and r["name"] not in CROSSOVER]  # CROSSOVER: test_gpu_bound_runs_hold...
    assert len(dense) >= 40
    assert max(abs(r["error"]) for r in dense if r["name"] not in LOCAL_EXPERT_RANKS) <= 0.20
    # call 37's 16 experts of 8192 tokens, GPU-bound by the fit, 36 % under (its GPU within 5 %: call 38)
    assert max(abs(r["error"]) for r in dense) <= 0.36


def test_transformer_engine_runs_within_15_percent() -> None:
    # issue 27's acceptance was every single-GPU TE run within 15 %, leave-one-out. With the runs of calls 7 and
    # 9 (tests/fixtures/h200-hosts) in the fit it no longer holds: te-b1-ga8 left out leaves one TE run with
    # several micro batches to tell TE's host per micro batch (+39 %), te-s8192-l4 without the data loader's
    # mask runs 35 ms where the model prices 46 (+30 %), te-l12-full-u1 +21 % (docs/performance-model.md).
    # TE's grouped experts (calls 15 and 16): the top-8 sweep their host costs were fitted on within 26 %, the
    # held-out te-moe8-top2 -34 %, call 17's pre-registered te-moe64-top8-h4096 +11 % (tools/grouped_experts_fit.py).
    # Call 22's te-llama-h1024-l12-ga4 (host-bound, +20 % in sample) +43 % left out since call 46's element-wise paths
    # moved the TE runs' GPU side (their launches turn the fusions off): the fold without it takes another TE grid point
    te = [r for r in VALIDATION["rows"] if r["te"]]
    assert len(te) >= 22
    assert max(abs(r["error"]) for r in te) <= 0.44
    grouped = [r for r in te if "te-moe" in r["name"] and "seq" not in r["name"]]
    assert len(grouped) >= 10 and max(abs(r["error"]) for r in grouped) <= 0.35
    # the host-bound TE runs of calls 19 and 22 on hosts at both ends (call 19's Qwen-shaped -27 and -31 %, call 22's
    # Llama and Qwen3 +30 and +23 %, the Llama +43 % since call 46) refit TE's host per layer pass from 4.0 to 2.8 ms
    # and per micro batch from 12 to 16: the lent hosts' TE Python disagrees
    assert max(abs(r["error"]) for r in te if "ga8" not in r["name"] and "nomask" not in r["name"]
               and r not in grouped) <= 0.44


def test_local_experts_of_the_oldest_runs_under_the_measured_share() -> None:
    # moe4-top2-l8 and moe8-top2 (local experts, the measurements/ host, 15 iterations) come out under the share
    # call 34 measured on Megatron's SequentialMLP (host_time.LOCAL_EXPERT_SHARE), as they did at call 33's GEMM call
    # alone: their host or their short runs' cold cuBLAS cache; Python's collector is not it (call 34). With the
    # backward's expert host work beside the GPU (call 35) they come out further under (-40 and -19 %)
    rows = {r["name"]: r["error"] for r in VALIDATION["rows"]}
    assert -0.55 < rows["moe8-top2"] < -0.10 and -0.40 < rows["moe4-top2-l8"] < 0.0  # -51, -38 % since call 43's split


def test_committed_fit_is_the_tools() -> None:
    from compiler.megatron import timing

    fit = VALIDATION["full"]
    assert timing.HOST_SPEED == pytest.approx(fit.speed, abs=1e-6)
    assert timing.TE_HOST_PER_LAYER == pytest.approx(fit.te_host, abs=1e-6)
    assert timing.TE_HOST_PER_ITERATION == pytest.approx(fit.te_it, abs=1e-6)
    assert timing.TE_HOST_PER_MICROBATCH == pytest.approx(fit.te_mb, abs=1e-6)
    assert timing.FUSED_ATTENTION_SHARE == pytest.approx(fit.share)
    assert timing.TE_HOST_FORWARD_SHARE == pytest.approx(fit.te_forward)
    assert timing.MEASURED_SPREAD == _tool("perfdoc").spread(VALIDATION)  # type: ignore[attr-defined]
    lo, hi = timing.MEASURED_SPREAD["GPU"]
    assert lo < 1 < hi  # the least and the greatest ratio of measured to estimate: an estimate lies inside


def test_performance_doc_is_what_the_tool_writes() -> None:
    perfdoc, published = _tool("perfdoc"), _tool("published_check")
    text = perfdoc.render(VALIDATION, published.check())  # type: ignore[attr-defined]
    assert (REPO / "docs" / "performance-model.md").read_text() == text


def test_expert_all_to_alls_carry_the_ranks_own_tokens() -> None:
    # Each rank dispatches the tokens it holds: with sequence parallel the s/tp slice, top-k copies,
    # (ep-1)/ep of them leaving the rank. TP 8 with SP sends an eighth of what TP 1 sends per rank.
    moe = LLAMA8B._replace(num_experts=64, moe_router_topk=8, moe_ffn_hidden_size=2048)
    base = dict(data=8, global_batch=64, gpus_per_worker=8, workers=8, expert=8, rdma=True)
    tp1 = step(moe, **base)
    tp8 = step(moe, tensor=8, sequence_parallel=True, **base)
    tokens = moe.seq_length * moe.hidden_size * 2  # one micro batch's activation, bf16
    for result, held in ((tp1, tokens), (tp8, tokens / 8)):
        routed = held * 8 * 7 / 8
        assert f"{routed / 2**20:.1f} MiB of routed tokens" in result.term("ep").note


def test_expert_gemm_host_cost_is_the_profiles() -> None:
    # EXPERT_GEMM_HOST_S: the mean host time of moe8-top2's expert aten::mm calls over its two profiled steps,
    # each step's dense calls (4 layers x (QKV, projection, router) x 3, the output layer's 3) at the dense
    # calls' mean of the tiny model's profile taken out
    trace = _tool("trace_summary")
    prof = REPO / "tests" / "fixtures" / "measurements" / "profiles"
    tiny = [e["dur"] for e in trace.load(prof / "tiny-l2-h256-prof-trace.json.gz")  # type: ignore[attr-defined]
            if e.get("cat") == "cpu_op" and e["name"] == "aten::mm"]
    dense_mean = sum(tiny) / len(tiny)
    events = trace.load(prof / "moe8-top2-prof-trace.json.gz")  # type: ignore[attr-defined]
    steps = [e for e in events if e["name"].startswith("ProfilerStep#") and e.get("cat") == "user_annotation"]
    means, counts = [], []
    for st in steps:
        mm = [e["dur"] for e in events if e.get("cat") == "cpu_op" and e["name"] == "aten::mm"
              and st["ts"] <= e["ts"] < st["ts"] + st["dur"]]
        counts.append(len(mm))
        dense = 4 * 3 * 3 + 3
        means.append((sum(mm) - dense * dense_mean) / (len(mm) - dense) / 1e6)
    from compiler.megatron.layer_time import EXPERT_GEMM_HOST_S
    # each profiled step: 4 layers x (QKV, projection, router, 8 experts x 2 linears) x 3 GEMMs + the output layer's 3
    assert counts == [231] * len(steps) and len(steps) == 2
    assert sum(means) / len(means) == pytest.approx(EXPERT_GEMM_HOST_S, rel=0.01)


def test_the_compiled_spec_is_priced_with_the_kernels_its_launch_passes() -> None:
    """parallel_of reads the fused cross entropy, grouped experts and the NaN check as the launch has
    them (performance.py), as tools/validate_timing.py reads them from a run's arguments: the model the
    leave-one-out checks is the one a compile runs."""
    from compiler.megatron.timing import parallel_of
    from compiler.one_pass import compile_spec
    from compiler.schema.record import replace

    def par(name: str) -> Parallel:
        result = compile_spec(str(REPO / "specs" / name), f"specs/{name}", render_files=False)
        spec, facts = result.spec, result.facts
        assert spec is not None and facts is not None and facts.layout is not None
        # the training section as the facts read it (init_from's derived model filled in)
        return parallel_of(replace(spec, training=facts.training), facts.layout)

    gpt = par("gpt-7b.yaml")  # --cross-entropy-loss-fusion in its launch.sh, bf16, dense
    assert gpt.cross_entropy_fusion and gpt.nan_check and not gpt.grouped_gemm
    moe = par("qwen3-30b-a3b.yaml")  # init_from MoE on TE: Bridge's --moe-grouped-gemm in its launch.sh
    assert moe.grouped_gemm
    assert "--moe-grouped-gemm" in (REPO / "generated" / "qwen3-30b-a3b" / "launch.sh").read_text()


def test_the_nan_check_follows_megatrons_rules() -> None:
    from types import SimpleNamespace

    from compiler.megatron.performance import nan_check

    def t(precision: str, *args: str) -> SimpleNamespace:
        return SimpleNamespace(precision=precision, args=list(args))

    assert nan_check(t("bf16")) and nan_check(t("fp16", "--loss-scale", "1024"))
    assert not nan_check(t("fp16"))  # dynamic loss scaling (arguments.py:1163-1170)
    assert not nan_check(t("bf16", "--no-check-for-nan-in-loss-and-grad"))


def test_every_kept_run_gets_the_bound_the_compiler_would_print() -> None:
    # tools/validate_timing.py's bound (its mirror of step_time's stages with the fit's constants) against
    # timing.step_time's at the committed fit, for every kept run: one rule (timing.pace), the same answer
    tool = _tool("validate_timing")
    rows = {r["name"]: r["bound"] for r in VALIDATION["rows"]}
    runs = tool.load_runs()  # type: ignore[attr-defined]
    assert len(runs) == len(rows)
    for run in runs:
        fa, par = tool.inputs(run)  # type: ignore[attr-defined]
        step = step_time(fa, par, GPUS["h200"], run.params)
        if run.stage:  # a fake-process-group rank runs its own stage: that stage's pace, as plan.md's per-stage row
            st = next(x for x in step.stages if x.stage == run.stage)
            assert timing.pace(st.host_s + st.moe_host_s, st.gpu_s, False) == rows[run.name], run.name
        else:
            assert step.bound == rows[run.name], run.name


def test_plan_shows_the_measured_spread_around_the_estimate() -> None:
    from compiler.one_pass import compile_spec

    result = compile_spec(str(REPO / "tests" / "e2e" / "mem-hc-tiny-ga4.yaml"), "mem-hc-tiny-ga4.yaml")
    assert result.ok and result.files is not None and result.facts is not None
    s = result.facts.step_time
    assert s is not None and s.bound == "host"
    row = next(line for line in result.files["plan.md"].splitlines() if line.startswith("| validation spread |"))
    lo, hi = timing.MEASURED_SPREAD["host"]
    assert f"the kept H200 runs of that kind (one GPU a model replica) took {lo:.2f}-{hi:.2f}x" in row
    assert f"{s.spread_s[0] * 1e3:,.0f}-{s.spread_s[1] * 1e3:,.0f} ms an iteration" in row
