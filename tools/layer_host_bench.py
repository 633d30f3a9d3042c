#!/usr/bin/env python3
"""The host's time of one Megatron transformer layer's forward and backward, by architecture (issue 26, device
call 20).

    python3 tools/layer_host_bench.py [--megatron /opt/Megatron-LM] [--device cuda] > layer-bench.txt

The step model prices a layer pass on the host with one figure per stack: the local layer's profiled on a GPT
layer (LayerNorm, GeLU, biases, learned positions, one key/value head a query head; host_time.py) and Transformer
Engine's fitted on the TE runs. A Llama or Qwen layer runs other modules: RoPE, SwiGLU, grouped query attention,
RMSNorm, no biases, Qwen3's query/key norms. This measures what each changes: Megatron's own TransformerBlock at
the pinned commit (the spec pretrain_gpt.py builds: get_gpt_layer_local_spec or the TE spec, the fusion flags the
compiler's launches pass: the local specs' --no-*-fusion, TE's defaults), wrapped in Megatron's
DistributedDataParallel (its gradient hooks run a layer's backward as in training), on a tiny input (s16 b1 h256:
the GPU idle, so the host's enqueue is what is timed). A step is the block's forward, the sum's backward; each
configuration is timed as a chain of LONG and of SHORT layers, all of them built first and then timed in ROUNDS
rounds (each round every chain for BURST steps, in a new random order, the median step its figure), so that the
host's drift falls on all alike; a layer pass is a round's difference over LONG - SHORT, its median over the rounds. One line a stack and configuration, then the pure-Python yardstick.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from typing import Any, NamedTuple

from yardstick import python_loop_line  # tools/, beside this script

LONG, SHORT, ROUNDS, BURST = 8, 2, 40, 3
H, HEADS, FFN, S = 256, 4, 1024, 16


class Arch(NamedTuple):
    name: str
    norm: str = "LayerNorm"
    swiglu: bool = False
    rope: bool = False
    groups: int | None = None  # query groups (None: one a head)
    bias: bool = True
    qk: bool = False


ARCHS = (
    Arch("gpt"),
    Arch("gpt+rope", rope=True),
    Arch("gpt+swiglu", swiglu=True),
    Arch("gpt+gqa", groups=2),
    Arch("gpt+rmsnorm", norm="RMSNorm"),
    Arch("gpt-bias", bias=False),
    Arch("gpt+qk", qk=True),
    Arch("llama", norm="RMSNorm", swiglu=True, rope=True, groups=2, bias=False),
    Arch("qwen3", norm="RMSNorm", swiglu=True, rope=True, groups=2, bias=False, qk=True),
)


def build(arch: Arch, te: bool, layers: int, device: str) -> tuple[Any, Any]:
    import torch
    import torch.nn.functional as F
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.models.common.embeddings.rotary_pos_embedding import RotaryEmbedding
    from megatron.core.models.gpt.gpt_layer_specs import (get_gpt_layer_local_spec,
                                                          get_gpt_layer_with_transformer_engine_spec)
    from megatron.core.transformer.transformer_block import TransformerBlock
    from megatron.core.transformer.transformer_config import TransformerConfig

    fused = te  # the compiled local specs pass --no-*-fusion (fused_kernels: false); TE's keep Megatron's defaults
    config = TransformerConfig(
        num_layers=layers, hidden_size=H, num_attention_heads=HEADS, num_query_groups=arch.groups, ffn_hidden_size=FFN,
        kv_channels=H // HEADS, normalization=arch.norm, gated_linear_unit=arch.swiglu,
        activation_func=F.silu if arch.swiglu else F.gelu, add_bias_linear=arch.bias, qk_layernorm=arch.qk,
        bf16=True, params_dtype=torch.bfloat16, pipeline_dtype=torch.bfloat16, attention_dropout=0.1,
        hidden_dropout=0.1, bias_activation_fusion=fused and (arch.bias or arch.swiglu), bias_dropout_fusion=fused,
        masked_softmax_fusion=fused, apply_rope_fusion=fused and arch.rope, gradient_accumulation_fusion=False,
        use_cpu_initialization=device == "cpu")
    spec = (get_gpt_layer_with_transformer_engine_spec(qk_layernorm=arch.qk) if te else
            get_gpt_layer_local_spec(qk_layernorm=arch.qk, normalization=arch.norm))
    block = TransformerBlock(config, spec).to(device=device, dtype=torch.bfloat16)
    # Megatron's DDP keeps its gradient buffers on the GPU: a CPU smoke check runs the bare block
    ddp = DistributedDataParallel(config, DistributedDataParallelConfig(grad_reduce_in_fp32=True), block) \
        if device == "cuda" else block
    # RoPE's frequencies as GPTModel computes them each forward (a CPU smoke check: zeros of their shape)
    rope = None if not arch.rope else RotaryEmbedding(H // HEADS, rotary_percent=1.0)(S) if device == "cuda" \
        else torch.zeros(S, 1, 1, H // HEADS)
    return ddp, rope


def stepper(model: Any, rope: Any, device: str) -> Any:
    """One step of `model` (forward, the sum's backward), warmed up: a function returning its host seconds."""
    import torch

    x = torch.randn(S, 1, H, device=device, dtype=torch.bfloat16, requires_grad=True)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def step() -> float:
        t0 = time.perf_counter()
        out = model(hidden_states=x, attention_mask=None, rotary_pos_emb=rope)
        out.float().sum().backward()
        t = time.perf_counter() - t0
        sync()
        return t
    for _ in range(5):
        step()
    return step


def init(megatron: str, device: str) -> None:
    sys.path.insert(0, megatron)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    import torch
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

    torch.distributed.init_process_group("nccl" if device == "cuda" else "gloo", world_size=1, rank=0)
    parallel_state.initialize_model_parallel(1, 1)
    if device == "cuda":
        model_parallel_cuda_manual_seed(123)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--megatron", default="/opt/Megatron-LM", help="Megatron-LM checkout at the pinned commit")
    p.add_argument("--device", default="cuda", help="cuda (a measurement) or cpu (a smoke check of the script)")
    p.add_argument("--stacks", default="local,te", help="local, te or both")
    a = p.parse_args()
    init(a.megatron, a.device)
    import torch

    print(f"# torch {torch.__version__}; layers {LONG} - {SHORT}, {ROUNDS} rounds of {BURST} steps; s{S} b1 h{H} {HEADS} heads "
          f"ffn {FFN}")
    # every configuration built first, then timed in ROUNDS rounds of BURST steps each, in a new random order
    # every round: the host's speed drifts over tens of seconds (call 20's tiny run: 39-60 ms an iteration within a
    # minute), which timing one configuration after another would read as a difference between them
    steps: dict[tuple[str, str, int], Any] = {}
    for stack in a.stacks.split(","):
        for arch in ARCHS:
            try:
                for n in (LONG, SHORT):
                    steps[stack, arch.name, n] = stepper(*build(arch, stack == "te", n, a.device), a.device)
            except Exception as e:  # noqa: BLE001 - one configuration's failure is reported, the rest still measured
                print(f"{stack} {arch.name}: failed ({type(e).__name__}: {str(e)[:300]})", flush=True)
                steps.pop((stack, arch.name, LONG), None)
    rng = random.Random(20)
    times: dict[tuple[str, str, int], list[float]] = {k: [] for k in steps}
    for _ in range(ROUNDS):
        keys = list(steps)
        rng.shuffle(keys)
        for k in keys:
            times[k].append(statistics.median(steps[k]() for _ in range(BURST)))
    for stack in a.stacks.split(","):
        for arch in ARCHS:
            if (stack, arch.name, LONG) not in times:
                continue
            per = [(lo - sh) / (LONG - SHORT) for lo, sh in zip(times[stack, arch.name, LONG], times[stack, arch.name, SHORT])]
            q = statistics.quantiles(per, n=4)
            print(f"{stack} {arch.name}: {statistics.median(per) * 1e3:.3f} ms a layer pass (quartiles {q[0] * 1e3:.3f}-"
                  f"{q[2] * 1e3:.3f} over {ROUNDS} rounds; steps {statistics.median(times[stack, arch.name, LONG]) * 1e3:.2f} "
                  f"ms at {LONG} layers, {statistics.median(times[stack, arch.name, SHORT]) * 1e3:.2f} at {SHORT})", flush=True)
    print(python_loop_line())


if __name__ == "__main__":
    main()
