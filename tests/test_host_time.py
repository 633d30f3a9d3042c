"""The host's work per layer pass, micro batch and iteration (compiler/megatron/host_time.py) is what the two
profiled runs kept in tests/fixtures/measurements/profiles measure (tools/trace_summary.py --phases)."""

from __future__ import annotations

from pathlib import Path

import pytest

from compiler.megatron import host_time, timing
from compiler.megatron.gpus import GPUS
from compiler.megatron.layer_time import Model
from compiler.megatron.timing import Parallel, iteration_tensors, step_time
from helpers import load_tool

PROFILES = Path(__file__).resolve().parent / "fixtures" / "measurements" / "profiles"
TRACE = load_tool("trace_summary")
VALIDATE = load_tool("validate_timing")


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


@pytest.fixture(scope="module")
def profiles() -> dict[str, list[dict]]:
    tiny = TRACE.load(PROFILES / "tiny-l2-h256-prof-trace.json.gz")  # type: ignore[attr-defined]
    moe = TRACE.load(PROFILES / "moe8-top2-prof-trace.json.gz")  # type: ignore[attr-defined]
    return {"tiny": TRACE.phases(tiny), "moe": TRACE.phases(moe, 18),  # type: ignore[attr-defined]
            "tiny-events": tiny, "moe-events": moe}


def _tensors(name: str) -> int:
    run = next(r for r in VALIDATE.load_runs() if r.name == name)  # type: ignore[attr-defined]
    fa, par = VALIDATE.inputs(run)  # type: ignore[attr-defined]
    return iteration_tensors(fa, par)


def test_parameter_tensors_are_the_norms_the_profiled_step_takes(profiles: dict) -> None:
    # without Apex or TE the gradient norm is one torch.norm a parameter tensor (utils.py:1185), then the
    # norm of those norms and the DDP's NaN check of the whole gradient buffer: two more
    for key, name in (("tiny-events", "tiny-l2-h256"), ("moe-events", "moe8-top2")):
        events = profiles[key]
        steps = TRACE.profiler_steps(events)  # type: ignore[attr-defined]
        for st in steps:
            norms = sum(1 for e in events if e.get("cat") == "cpu_op" and e["name"] == "aten::linalg_vector_norm"
                        and st["ts"] <= e["ts"] < st["ts"] + st["dur"])
            assert norms == _tensors(name) + 2
    assert (_tensors("tiny-l2-h256"), _tensors("moe8-top2")) == (28, 96)


def test_host_figures_are_the_profiles(profiles: dict) -> None:
    tiny, moe = profiles["tiny"], profiles["moe"]
    assert [len(p["periods"]) for p in tiny] == [3, 3]  # two profiled steps of four micro batches
    period = _mean([x for p in tiny for x in p["periods"]])
    layer_f = _mean([x for p in tiny for x in p["layer_forward"]])
    layer_b = _mean([x for p in tiny for x in p["layer_backward"]])
    forward = _mean([x for p in tiny for x in p["forward"]])
    backward = _mean([x for p in tiny for x in p["backward"]])
    assert host_time.LAYER_PASS_S * 1e3 == pytest.approx(layer_f + layer_b, rel=0.01)
    assert host_time.LAYER_FORWARD_SHARE == pytest.approx(layer_f / (layer_f + layer_b), abs=0.01)
    assert host_time.PROFILED_MICROBATCH_S * 1e3 == pytest.approx(period - 2 * (layer_f + layer_b), rel=0.01)
    assert host_time.MICROBATCH_FORWARD_SHARE == pytest.approx(forward / (forward + backward), abs=0.01)
    # the iteration's host work at 28 and 96 parameter tensors: a line through the two
    it_tiny = _mean([p["iteration"] for p in tiny])
    it_moe = _mean([p["iteration"] for p in moe])
    per = (it_moe - it_tiny) / (96 - 28)
    assert host_time.PER_TENSOR_S * 1e3 == pytest.approx(per, rel=0.01)
    assert host_time.ITERATION_S * 1e3 == pytest.approx(it_tiny - 28 * per, rel=0.01)


def test_iteration_host_work_grows_with_the_tensors_without_a_fused_optimizer() -> None:
    def args(layers: int):
        return VALIDATE.FlopsArgs(  # type: ignore[attr-defined]
            num_layers=layers, hidden_size=1024, num_attention_heads=16, kv_channels=64, ffn_hidden_size=4096,
            seq_length=2048, padded_vocab_size=32000)

    par = Parallel(tensor=1, pipeline=1, context=1, data=1, micro_batch=4, global_batch=4, gpus_per_worker=1,
                   workers=1, local_attention=True, model=Model())
    small, big = (step_time(args(n), par, GPUS["h200"], 1e8).term("iteration").seconds for n in (4, 24))
    # 12 tensors a layer with LayerNorm and biases (2 norms x 2, 4 linears x 2)
    assert big - small == pytest.approx(timing.HOST_SPEED * host_time.PER_TENSOR_S * 12 * 20)
    te = par._replace(stack="te", local_attention=False)
    assert iteration_tensors(args(24), te) == 0
    assert step_time(args(24), te, GPUS["h200"], 1e8).term("iteration").seconds == timing.TE_HOST_PER_ITERATION


def test_the_host_runs_the_layers_the_profile_priced() -> None:
    fa = VALIDATE.FlopsArgs(  # type: ignore[attr-defined]
        num_layers=2, hidden_size=256, num_attention_heads=4, kv_channels=64, ffn_hidden_size=1024,
        seq_length=256, padded_vocab_size=32000)
    par = Parallel(tensor=1, pipeline=1, context=1, data=1, micro_batch=2, global_batch=8, gpus_per_worker=1,
                   workers=1, local_attention=True, model=Model())
    stage = step_time(fa, par, GPUS["h200"], 1e7).stages[0]
    assert stage.host_s == pytest.approx(timing.HOST_PER_MICROBATCH + 2 * timing.HOST_PER_LAYER)
    full = step_time(fa, par._replace(recompute="full", recompute_method="uniform", recompute_num_layers=1),
                     GPUS["h200"], 1e7).stages[0]
    assert full.passes == pytest.approx(2 * (1 + host_time.LAYER_FORWARD_SHARE))


def test_the_fp32_gradient_accumulation_follows_the_launch_flag() -> None:
    # the TE runs on the lent H200 pass --no-gradient-accumulation-fusion: main_grad.add_ each micro batch,
    # whatever fused_kernels says; the spec path reads the flag from training.args
    from compiler.megatron.layer_time import stage_work

    fa = VALIDATE.FlopsArgs(  # type: ignore[attr-defined]
        num_layers=4, hidden_size=1024, num_attention_heads=16, kv_channels=64, ffn_hidden_size=4096,
        seq_length=2048, padded_vocab_size=32000)
    par = Parallel(tensor=1, pipeline=1, context=1, data=1, micro_batch=4, global_batch=4, gpus_per_worker=1,
                   workers=1, stack="te", fused_kernels=True, model=Model())
    fused = stage_work(fa, par.model, par, 4, True, True).grad_accumulation
    unfused = stage_work(fa, par.model, par._replace(grad_accumulation_fusion=False), 4, True, True).grad_accumulation
    assert fused == 0.0 and unfused > 0.0
    run = next(r for r in VALIDATE.load_runs() if r.name == "te-l4")  # type: ignore[attr-defined]
    assert VALIDATE.inputs(run)[1].grad_accumulation_fusion is False  # type: ignore[attr-defined]


def test_a_micro_batch_beyond_its_layers_is_call_43s_unprofiled_grid() -> None:
    # device call 43 (tests/fixtures/h200-hosts/README.md): the rule written down before it ran took the grid's split
    # where its interval excluded the profile's; the iteration's terms stayed the profile's
    split = load_tool("host_split_fit")
    result = split.fit(PROFILES.parent.parent / "h200-hosts" / "call43")  # type: ignore[attr-defined]
    lo, hi = result["interval"]["B/P"]
    assert not lo <= host_time.PROFILED_MICROBATCH_S / host_time.LAYER_PASS_S <= hi
    assert host_time.MICROBATCH_PASSES == round(result["point"]["B/P"], 3)
    assert host_time.MICROBATCH_S == pytest.approx(host_time.LAYER_PASS_S * result["point"]["B/P"], rel=1e-3)
    assert result["interval"]["a/P"][0] < 0 < result["interval"]["a/P"][1]  # the iteration's terms: not separated
