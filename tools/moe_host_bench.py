#!/usr/bin/env python3
"""The host's time of Megatron's local experts (SequentialMLP) a layer pass, by expert count (issue 26, device call 34).

    python3 tools/moe_host_bench.py OUT.json [--megatron /opt/Megatron-LM] [--device cuda] [--rounds N] [--modes M,..]

layer_time prices a local expert's host work a micro batch as six GEMM calls at a token count cuBLAS has not planned
(EXPERT_GEMM_HOST_S, from a torch-profiler trace of moe8-top2) and its launches. Device calls 31 and 32 ran local
experts at 8 to 64 a layer 16-62 % faster than that; call 33 timed the GEMM call alone too cheap to account for the
rest. This times the whole of it on Megatron's own modules at the pinned commit: a TransformerBlock of the local
spec with MoE (get_gpt_layer_local_spec(num_experts=E): TopKRouter, the allgather token dispatcher, SequentialMLP,
SwiGLU experts without biases, as the compiled fpg-moe specs run them), wrapped in Megatron's DistributedDataParallel
(each expert weight's gradient hook runs as in training), at a tiny hidden size (h256, 4 heads) and expert FFN so the
GPU is idle and the host's enqueue, the token-count synchronisations and the Python are what is timed, with the
token counts of the runs (s256 x b32 = 8192 tokens a micro batch, call 32's) so that each expert gets the share of
tokens it gets there.

Per configuration (experts E, top-k):

- `fresh`: a new random input every step, so the routing and the token counts change as they do in training (cuBLAS
  meets counts it has not planned, fewer as the run goes on), Python's collector off as --manual-gc leaves it;
- `fresh+gc`: the same with Python's automatic collector on (a run without --manual-gc: moe8-top2, moe4-top2-l8);
- `fixed`: the same input every step (every count planned after the first step), the collector off.

Each configuration's expert FFN differs (256 + 16 i), so no two share cuBLAS's plans. A step is the block's forward
and the sum's backward; each configuration is timed as a block of LONG and of SHORT layers, all built first and then
timed in ROUNDS rounds (every chain BURST steps, in a new random order each round), so the host's drift falls on all
alike; a layer pass is a round's difference over LONG - SHORT, its median over the rounds, and the same of the
forward alone (the host's time until the block's forward returns: the token-count synchronisations are there; the
backward has none, device call 35). The dense GPT layer of
tools/layer_host_bench.py (s16 b1, the figure host_time.LAYER_PASS_S's profile and call 21 measured) is timed in the
same rounds: the yardstick the experts' cost is taken against. Rows in OUT.json; lines on stdout.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from layer_host_bench import ARCHS, build, init, stepper  # noqa: E402
from yardstick import python_loop_line  # noqa: E402

LONG, SHORT, ROUNDS, BURST, WARM = 3, 1, 16, 1, 3
H, HEADS, S, B = 256, 4, 256, 32
CONFIGS = ((8, 2), (16, 2), (32, 2), (64, 2), (16, 4), (32, 4), (64, 8))
MODES = ("fresh", "fresh+gc", "fixed")


def build_moe(experts: int, topk: int, ffn: int, layers: int, device: str) -> Any:
    import torch
    import torch.nn.functional as F
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_block import TransformerBlock
    from megatron.core.transformer.transformer_config import TransformerConfig

    config = TransformerConfig(
        num_layers=layers, hidden_size=H, num_attention_heads=HEADS, num_query_groups=HEADS, ffn_hidden_size=ffn,
        kv_channels=H // HEADS, normalization="RMSNorm", gated_linear_unit=True, activation_func=F.silu,
        add_bias_linear=False, bf16=True, params_dtype=torch.bfloat16, pipeline_dtype=torch.bfloat16,
        attention_dropout=0.1, hidden_dropout=0.1, bias_activation_fusion=False, bias_dropout_fusion=False,
        masked_softmax_fusion=False, gradient_accumulation_fusion=False, num_moe_experts=experts,
        moe_router_topk=topk, moe_ffn_hidden_size=ffn, moe_token_dispatcher_type="allgather", moe_aux_loss_coeff=0.0,
        moe_router_load_balancing_type="aux_loss", moe_grouped_gemm=False, use_cpu_initialization=device == "cpu")
    spec = get_gpt_layer_local_spec(num_experts=experts, moe_grouped_gemm=False, normalization="RMSNorm")
    block = TransformerBlock(config, spec).to(device=device, dtype=torch.bfloat16)
    return DistributedDataParallel(config, DistributedDataParallelConfig(grad_reduce_in_fp32=True), block) \
        if device == "cuda" else block


def moe_stepper(model: Any, mode: str, device: str) -> Callable[[], tuple[float, float]]:
    """One step (forward, the sum's backward) in `mode`, warmed up: a function returning its host seconds, the
    forward's and the whole step's."""
    import torch

    fixed = torch.randn(S, B, H, device=device, dtype=torch.bfloat16)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def step() -> float:
        x = (fixed if mode == "fixed" else torch.randn(S, B, H, device=device, dtype=torch.bfloat16)).requires_grad_()
        sync()
        if mode == "fresh+gc":
            gc.enable()
        t0 = time.perf_counter()
        out = model(hidden_states=x, attention_mask=None)
        forward = time.perf_counter() - t0
        out.float().sum().backward()
        t = time.perf_counter() - t0
        gc.disable()
        sync()
        return forward, t
    for _ in range(WARM):
        step()
    return step


def _whole_only(step: Callable[[], float]) -> Callable[[], tuple[float, float]]:
    """layer_host_bench's step (the whole step's host seconds) as moe_stepper's pair; its forward alone untimed."""
    return lambda: (float("nan"), step())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="rows as JSON")
    p.add_argument("--megatron", default="/opt/Megatron-LM", help="Megatron-LM checkout at the pinned commit")
    p.add_argument("--device", default="cuda", help="cuda (a measurement) or cpu (a smoke check of the script)")
    # the environment's (tools/fakepg_time_device.sh runs a bench with its output path alone)
    p.add_argument("--rounds", type=int, default=int(os.environ.get("MOE_BENCH_ROUNDS", ROUNDS)))
    p.add_argument("--modes", default=os.environ.get("MOE_BENCH_MODES", ",".join(MODES)), help="of " + ", ".join(MODES))
    a = p.parse_args()
    modes = a.modes.split(",")
    init(a.megatron, a.device)
    import torch

    print(f"# torch {torch.__version__}; layers {LONG} - {SHORT}, {a.rounds} rounds of {BURST}; MoE s{S} b{B} h{H} "
          f"{HEADS} heads; configurations {CONFIGS} x {modes}", flush=True)
    gc.collect()
    gc.disable()  # as --manual-gc leaves it; `fresh+gc` steps turn the collector on for their own time
    steps: dict[tuple[str, int], Callable[[], tuple[float, float]]] = {}
    gpt = next(arch for arch in ARCHS if arch.name == "gpt")
    for n in (LONG, SHORT):
        steps["gpt", n] = _whole_only(stepper(*build(gpt, False, n, a.device), a.device))
    i = 0
    for e, k in CONFIGS:
        for mode in modes:
            name = f"e{e}-top{k} {mode}"
            ffn = 256 + 16 * i
            i += 1
            try:
                for n in (LONG, SHORT):
                    steps[name, n] = moe_stepper(build_moe(e, k, ffn, n, a.device), mode, a.device)
            except Exception as exc:  # noqa: BLE001 - one configuration's failure is reported, the rest still measured
                print(f"{name}: failed ({type(exc).__name__}: {str(exc)[:300]})", flush=True)
                steps.pop((name, LONG), None)
    print(f"# built {len(steps)} chains", flush=True)
    rng = random.Random(34)
    times: dict[tuple[str, int], list[float]] = {key: [] for key in steps}
    forwards: dict[tuple[str, int], list[float]] = {key: [] for key in steps}
    for r in range(a.rounds):
        keys = list(steps)
        rng.shuffle(keys)
        for key in keys:
            burst = [steps[key]() for _ in range(BURST)]
            forwards[key].append(statistics.median(f for f, _ in burst))
            times[key].append(statistics.median(t for _, t in burst))
        print(f"# round {r + 1} done", flush=True)
    rows = []
    for name in dict.fromkeys(nm for nm, _ in steps):
        if (name, SHORT) not in times or (name, LONG) not in times:
            continue
        per = [(lo - sh) / (LONG - SHORT) for lo, sh in zip(times[name, LONG], times[name, SHORT])]
        fwd = [(lo - sh) / (LONG - SHORT) for lo, sh in zip(forwards[name, LONG], forwards[name, SHORT])]
        q = statistics.quantiles(per, n=4)
        row = {"config": name, "layer_pass_s": statistics.median(per), "q1_s": q[0], "q3_s": q[2],
               "forward_s": None if name == "gpt" else statistics.median(fwd),
               "forward_per_round_s": None if name == "gpt" else fwd,
               "long_step_s": statistics.median(times[name, LONG]), "short_step_s": statistics.median(times[name, SHORT]),
               "rounds": a.rounds, "per_round_s": per}
        rows.append(row)
        print(f"{name}: {row['layer_pass_s'] * 1e3:.3f} ms a layer pass (quartiles {q[0] * 1e3:.3f}-{q[2] * 1e3:.3f}; "
              f"forward {(row['forward_s'] or 0.0) * 1e3:.3f}; "
              f"steps {row['long_step_s'] * 1e3:.2f} ms at {LONG} layers, {row['short_step_s'] * 1e3:.2f} at {SHORT})",
              flush=True)
    yard = python_loop_line()
    print(yard)
    Path(a.out).write_text(json.dumps({"rows": rows, "yardstick": yard, "torch": torch.__version__}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
