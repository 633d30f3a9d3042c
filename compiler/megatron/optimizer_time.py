"""The optimizer step's GPU time on a rank (issue 26): which optimizer Megatron takes, and what its kernels
cost a parameter on the H200 (rates.py), scaled to other GPUs by their HBM bandwidth."""

from __future__ import annotations

from typing import Any

from . import rates
from .gpus import GPUS, MEASURED_GPU, Gpu
from .host_time import optimizer_impl


# Apex's FusedAdam (Megatron-DeepSpeed's published rows): one pass of 28 bytes a parameter (the fp32 parameter,
# gradient and both moments read, the parameter and the moments written) at the copy rate. Not measured: the
# per-parameter times of rates.py are TE's kernels; applied to Apex's too they moved three of the published
# Megatron-DeepSpeed sweeps' rank correlation down (h2048-l12 0.92 -> 0.85, -l20 0.85 -> 0.83, -l24 0.93 -> 0.88)
APEX_ADAM_BYTES = 28


def optimizer_seconds(par: Any, gpu: Gpu, params_per_rank: float) -> tuple[float, str]:
    """The step over the rank's shard (par: timing.Parallel) and what was priced: with TE, its FusedAdam, its
    multi-tensor gradient norm and the gradient clipping at their per-parameter times measured in traces
    (rates.py); with Apex (Megatron-DeepSpeed), its FusedAdam at APEX_ADAM_BYTES; without either torch's AdamW
    (foreach), measured; the last two with the gradient norm (4 bytes a parameter) at the measured HBM rate.
    The norm and the clipping walk the shard's main gradients. Each with the fp32-to-bf16 parameter copy (6
    bytes a parameter of the shard) and the gradients' zeroing (4 bytes a parameter, 4 more for fp16's unscale)
    at the HBM rate."""
    local = params_per_rank / (par.data * par.context) if par.distributed_optimizer else params_per_rank
    ref = GPUS[MEASURED_GPU]
    hbm = rates.hbm_bytes_per_second() * gpu.hbm_tb_s / ref.hbm_tb_s
    slower = ref.hbm_tb_s / gpu.hbm_tb_s  # the H200's measured times on this GPU's memory
    rest = (6 * local + 4 * params_per_rank + (4 * params_per_rank if par.precision == "fp16" else 0)) / hbm
    impl = optimizer_impl(par)
    if impl == "te":
        step = (rates.FUSED_ADAM_S_PER_PARAM + rates.GRAD_NORM_S_PER_PARAM + rates.GRAD_CLIP_S_PER_PARAM) * local * slower
        what = (f"TE's FusedAdam over {local / 1e6:.1f} M parameters, its gradient norm and the clipping at their "
                "per-parameter times measured in traces (rates.py)")
    elif impl == "apex":
        step = (APEX_ADAM_BYTES + 4) * local / hbm
        what = f"Apex's FusedAdam over {local / 1e6:.1f} M parameters, one pass of {APEX_ADAM_BYTES} bytes each, + grad norm"
    else:
        step = rates.adam_seconds(local) * slower + 4 * local / hbm
        what = f"AdamW (foreach) over {local / 1e6:.1f} M parameters, measured, + grad norm"
    return step + rest, f"{what}, + the parameter copy and zeroing"
