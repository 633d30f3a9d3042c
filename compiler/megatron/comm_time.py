"""Communication of one iteration: latency + bytes / bandwidth per link class, and what overlaps.

Link classes (gpus.py): the GPU-to-GPU link within a worker (NVLink, or PCIe), the worker network
with RDMA (one 400 Gb/s NIC per GPU) and without (TCP over the worker's 100 Gb/s). Ranks are laid out
tp-cp-ep-dp-pp (parallel_state.py RankGenerator): a group whose consecutive span fits in one worker
stays on its link. Ring collectives move 2(n-1)/n of the message per rank for an all-reduce and
(n-1)/n for a reduce-scatter or all-gather (NCCL's bus bandwidth), plus a latency per collective.
No multi-GPU machine was available to measure these: the bandwidths are datasheet figures at
LINK_EFFICIENCY, the latencies assumptions; the published multi-GPU runs (docs/performance-model.md)
check them.
"""

from __future__ import annotations

from typing import Any

from ..tuples import NamedTuple
from .gpus import LINK_EFFICIENCY, Gpu, worker_network

BF16_BYTES, FP32_BYTES = 2, 4
# Per collective, small-message: NCCL on NVLink within a node, and across the network (assumptions
# of the order nccl-tests reports for 8 GPUs and for InfiniBand; not measured here).
LATENCY_S = {"intra": 15e-6, "rdma": 30e-6, "tcp": 100e-6}
# Megatron's default gradient bucket (distributed_data_parallel_config.py bucket_size: 40M parameters
# with the distributed optimizer): with overlap, the last bucket's reduction is what stays exposed.
BUCKET_PARAMS = 40_000_000
# --tp-comm-overlap (Transformer Engine userbuffers) hides most TP traffic behind the GEMMs it splits;
# the share left exposed is an assumption.
TP_OVERLAP_EXPOSED = 0.3


class Comm(NamedTuple):
    name: str
    seconds: float
    exposed: float
    note: str


def _link(gpu: Gpu, par: Any, span: int, stride: int = 1) -> tuple[float, float, str]:
    """(bus GB/s per GPU, latency s, name) of the link a group of ranks `stride` apart, spanning
    `span` consecutive ranks, uses. Across workers NCCL spreads a ring over every NIC the group's
    members in one worker have: with k members per worker each ring enters and leaves the worker,
    so the bus bandwidth is k NICs' worth over 2 (one NIC's worth for k = 1), at most the intra link."""
    if span <= par.gpus_per_worker:
        return gpu.nvlink_gb_s, par.link_latency or LATENCY_S["intra"], gpu.intra_link
    net = worker_network(par.rdma, par.gpus_per_worker)
    members = max(1, par.gpus_per_worker // max(1, stride))
    bus = min(gpu.nvlink_gb_s, net.gb_s_per_gpu * members / (2 if members > 1 else 1))
    return bus, LATENCY_S["rdma" if par.rdma else "tcp"], "worker network" + ("" if par.rdma else " (no RDMA)")


def ring(n: int, bytes_: float, gb_s: float, latency: float, all_reduce: bool) -> float:
    """Seconds of one ring collective over n ranks."""
    if n <= 1:
        return 0.0
    factor = 2 * (n - 1) / n if all_reduce else (n - 1) / n
    return latency + factor * bytes_ / (gb_s * 1e9 * LINK_EFFICIENCY)


def communication(args: Any, par: Any, gpu: Gpu, layers: int, params: float, recompute_fraction: float,
                  backward_s: float, forward_s: float, attention_s: float) -> list[Comm]:
    """The TP, CP, DP, PP and EP traffic of one iteration on a stage of `layers` layers holding
    `params` parameters; backward_s/forward_s: one micro batch's GPU time (what overlap can hide)."""
    pp, tp, cp, dp = par.pipeline, par.tensor, par.context, par.data
    m, v, b = par.microbatches, par.virtual_pipeline or 1, par.micro_batch
    s, h = args.seq_length / cp, args.hidden_size
    activation = b * s * h * BF16_BYTES
    out: list[Comm] = []
    # TP: 2 all-reduces forward, 2 backward per layer (with SP an all-gather + reduce-scatter pair
    # each: the same bytes); full recompute repeats the forward's
    bw, lat, where = _link(gpu, par, tp)
    per_layer = 4 + 2 * recompute_fraction
    tp_s = layers * m * per_layer * ring(tp, activation, bw, lat, all_reduce=True)
    exposed = tp_s * (TP_OVERLAP_EXPOSED if par.tp_comm_overlap else 1.0)
    out.append(Comm("tp", tp_s, exposed, f"{per_layer:g} all-reduces of {activation / 2**20:.1f} MiB per layer and "
                    f"micro batch over {where}" + (", mostly overlapped (--tp-comm-overlap)" if par.tp_comm_overlap else "")
                    if tp > 1 else "no tensor parallelism"))
    # CP: ring attention passes K and V around cp-1 times forward, K, V and their gradients backward;
    # TE overlaps each exchange with the attention of the chunk it has
    groups = args.num_query_groups if args.group_query_attention and args.num_query_groups else args.num_attention_heads
    kv = 2 * b * s * max(1, groups // tp) * args.kv_channels * BF16_BYTES
    bw, lat, where = _link(gpu, par, tp * cp, stride=tp)
    cp_s = layers * m * 3 * (cp - 1) * (lat + kv / (bw * 1e9 * LINK_EFFICIENCY)) if cp > 1 else 0.0
    cp_exposed = max(cp_s - layers * m * attention_s, layers * m * 3 * (cp - 1) * lat) if cp > 1 else 0.0
    out.append(Comm("cp", cp_s, cp_exposed, f"{3 * (cp - 1)} K/V chunk exchanges per layer and micro batch over {where}, "
                    "less the attention they overlap" if cp > 1 else "no context parallelism"))
    # DP: the gradients reduced over data x context ranks (CP ranks hold the same weights); the
    # distributed optimizer reduce-scatters them and all-gathers the bf16 parameters
    group = dp * cp
    bw, lat, where = _link(gpu, par, tp * cp * dp, stride=tp)
    grads = params * par.grad_bytes
    reduce = ring(group, grads, bw, lat, all_reduce=not par.distributed_optimizer)
    last_bucket = min(1.0, BUCKET_PARAMS / max(params, 1.0))
    hidden = reduce - max(reduce * last_bucket, reduce - backward_s) if par.overlap_grad_reduce else 0.0
    out.append(Comm("dp-grads", reduce, reduce - hidden, f"{'reduce-scatter' if par.distributed_optimizer else 'all-reduce'} "
                    f"of {grads / 2**30:.2f} GiB of gradients over {group} ranks, {where}"
                    + (", overlapped with the backward but the last bucket" if par.overlap_grad_reduce else "")
                    if group > 1 else "one data-parallel rank"))
    if par.distributed_optimizer and group > 1:
        gather = ring(group, params * BF16_BYTES, bw, lat, all_reduce=False)
        hidden = gather - max(gather * last_bucket, gather - forward_s) if par.overlap_param_gather else 0.0
        out.append(Comm("dp-params", gather, gather - hidden, f"all-gather of the bf16 parameters over {where}"
                        + (", overlapped with the forward" if par.overlap_param_gather else "")))
    # PP: each micro batch's activation forward and its gradient backward across the stage
    # boundary, v times with interleaving; sequence-sharded with SP
    message = activation / (tp if par.sequence_parallel else 1)
    bw, lat, where = _link(gpu, par, tp * cp * dp * 2)
    pp_s = 2 * m * v * (lat + message / (bw * 1e9 * LINK_EFFICIENCY)) if pp > 1 else 0.0
    out.append(Comm("pp", pp_s, pp_s, f"2·m·v = {2 * m * v} sends of {message / 2**20:.1f} MiB over {where}"
                    if pp > 1 else "no pipeline parallelism"))
    if par.expert > 1 and args.num_experts is not None:
        bw, lat, where = _link(gpu, par, par.expert * tp, stride=tp)
        # Each rank dispatches the tokens it holds: with sequence parallel (which Megatron requires for
        # MoE with TP > 1) its s/tp slice of the sequence, each sent to top-k experts, (ep-1)/ep of them
        # to other ranks (token_dispatcher.py's all-to-all over the expert group)
        routed = message * args.moe_router_topk * (par.expert - 1) / par.expert
        ep_s = layers * m * 4 * (lat + routed / (bw * 1e9 * LINK_EFFICIENCY))
        out.append(Comm("ep", ep_s, ep_s, f"4 all-to-alls of {routed / 2**20:.1f} MiB of routed tokens per MoE layer "
                        f"and micro batch over {where}"))
    return out
