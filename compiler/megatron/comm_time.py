"""Communication of one iteration: latency + bytes / bandwidth per link class, and what overlaps.

Link classes (gpus.py): the GPU-to-GPU link within a worker (NVLink, or PCIe), the worker network
with RDMA (one 400 Gb/s NIC per GPU) and without (TCP over the worker's 100 Gb/s). Ranks are laid out
tp-cp-ep-dp-pp (parallel_state.py RankGenerator): a group whose consecutive span fits in one worker
stays on its link. Ring collectives move 2(n-1)/n of the message per rank for an all-reduce and
(n-1)/n for a reduce-scatter or all-gather (NCCL's bus bandwidth). Their latency is NCCL's own model
(NCCL_BASE_US, NCCL_HOP_US): a base per protocol and a latency per ring step, 2(n-1) steps for an
all-reduce, n-1 for a reduce-scatter or all-gather, the steps that cross workers at the network's
figure; NCCL runs the protocol (LL, LL128, Simple) that is fastest for the message size.
No multi-GPU machine was available to measure these: the bandwidths are datasheet figures at
LINK_EFFICIENCY, the latencies NCCL's tuning table; the published multi-GPU runs
(docs/performance-model.md) check them.
"""

from __future__ import annotations

from typing import Any

from ..tuples import NamedTuple
from . import rates
from .flops import query_groups
from .gpus import GPUS, LINK_EFFICIENCY, MEASURED_GPU, Gpu, worker_network

BF16_BYTES, FP32_BYTES = 2, 4
# NCCL's latency model (src/graph/tuning.cc of NVIDIA/nccl at commit b6475625, ncclTopoTuneModel and
# ncclTopoGetAlgoTime; microseconds): a base per protocol (baseLat, ring) and per ring step a latency by
# the hop's class (hwLat, ring); steps that cross workers cost the network's, and a step inside a worker of
# a multi-worker ring at least the network's post overhead (1 us, 3 for Simple). A multi-worker Simple
# all-reduce costs 1.4x its latency (the ring's plateau on Ampere and later). LL moves a quarter of the
# bus bandwidth (an all-reduce, or across workers; a third otherwise) and at most llMaxBws' GB/s; LL128
# 0.92 of it (0.7 with one rank a worker); Simple all of it. NCCL runs the fastest protocol.
NCCL_BASE_US = {"LL": 6.6, "LL128": 14.0, "Simple": 8.4}
NCCL_HOP_US = {"NVLink": {"LL": 0.6, "LL128": 1.9, "Simple": 3.4},
               "PCIe": {"LL": 1.0, "LL128": 2.5, "Simple": 5.7},
               "network": {"LL": 2.7, "LL128": 4.0, "Simple": 14.0}}
NCCL_NET_OVERHEAD_US = {"LL": 1.0, "LL128": 1.0, "Simple": 3.0}
NCCL_LL_MAX_GB_S = (87.7, 22.5, 19.0)  # one worker, two, more (llMaxBws, Ampere and Hopper)
NCCL_BW_SHARE = {"LL": 0.25, "LL128": 0.92, "Simple": 1.0}
# Megatron's default gradient bucket (training.py:1772-1774 at the pinned commit: max(40M, 1M x the
# data-parallel size with context parallelism) parameters; one bucket without --overlap-grad-reduce,
# :1776-1777): with overlap, the last bucket's reduction is what stays exposed.
BUCKET_PARAMS = 40_000_000
BUCKET_PARAMS_PER_RANK = 1_000_000
# --tp-comm-overlap (Transformer Engine userbuffers, which Megatron runs only with sequence parallel,
# arguments.py:1386-1387): what stays exposed follows TE's default overlap per GEMM (userbuffer_exposed);
# its pipeline and bulk overlaps run the comm kernel on 16 SMs (transformer_engine/pytorch/module/base.py
# initialize_ub, get_default_config: num_sm 16 but for ring_exchange, num_splits 4 for pipeline)
UB_COMM_SMS = 16
UB_PIPELINE_SPLITS = 4


# What NCCL reaches of a NIC's line rate: "for NDR @ 400Gbps you should see 46-48GB/s per NIC"
# (NVIDIA/nccl-tests issue 290, an NCCL maintainer, 2025) and "24GB/s is the peak performance per 200G
# NIC" (issue 119, 2022): 0.94 of the line rate. Inside a worker gpus.LINK_EFFICIENCY (NCCL's own model
# caps an A100's NVLink bus bandwidth at 235 of 300 GB/s, tuning.cc). TCP keeps LINK_EFFICIENCY too.
RDMA_EFFICIENCY = 0.94


class Link(NamedTuple):
    """The link a group of ranks uses: the bus bandwidth a ring collective reaches per GPU and what one
    GPU can send to another on its own (both as NCCL reaches them, 10**9 bytes/s), NCCL's hop class
    inside a worker, how many workers the group spans and how many of its members each holds."""

    gb_s: float  # ring collectives' bus bandwidth
    send_gb_s: float  # one GPU's point-to-point bandwidth (its own NIC across workers)
    intra_gb_s: float  # one GPU's bandwidth to the GPUs of its own worker
    hop: str  # NVLink or PCIe: a ring step inside a worker
    workers: int
    members: int  # of the group, per worker
    name: str


class Comm(NamedTuple):
    name: str
    seconds: float
    exposed: float
    note: str


def _link(gpu: Gpu, par: Any, size: int, stride: int = 1) -> Link:
    """The link a group of `size` ranks `stride` apart uses. Across workers NCCL runs one ring channel per
    NIC the group's members in a worker have (each member's own, rail by rail); a channel's ring
    crosses each worker boundary once, sending on one NIC and receiving on another, both full duplex,
    so the bus bandwidth is k NICs' worth for k members a worker (NCCL's src/graph/tuning.cc: busBw =
    nChannels x speedInter), at most the intra link."""
    hop = "PCIe" if gpu.intra_link == "PCIe" else "NVLink"
    intra = gpu.nvlink_gb_s * LINK_EFFICIENCY
    span = size * stride
    if span <= par.gpus_per_worker:
        return Link(intra, intra, intra, hop, 1, size, gpu.intra_link)
    net = worker_network(par.rdma, par.gpus_per_worker)
    nic = net.gb_s_per_gpu * (RDMA_EFFICIENCY if par.rdma else LINK_EFFICIENCY)
    members = max(1, min(size, par.gpus_per_worker // max(1, stride)))
    workers = max(1, size // members)
    return Link(min(intra, nic * members), nic, intra, hop, workers, members,
                "worker network" + ("" if par.rdma else " (no RDMA)"))


def collective(n: int, bytes_: float, link: Link, all_reduce: bool) -> float:
    """Seconds of one ring collective over n ranks (an all-reduce, else a reduce-scatter or an
    all-gather) of a message of `bytes_` per rank: NCCL's latency model for each protocol plus the bytes
    at its share of the bus bandwidth, the fastest protocol."""
    if n <= 1:
        return 0.0
    steps = 2 * (n - 1) if all_reduce else n - 1
    inter = 0 if link.workers <= 1 else (2 * link.workers if all_reduce else link.workers - 1)
    inter = min(inter, steps)
    best = float("inf")
    for proto, base in NCCL_BASE_US.items():
        intra_hop = NCCL_HOP_US[link.hop][proto]
        if link.workers > 1:
            intra_hop = max(intra_hop, NCCL_NET_OVERHEAD_US[proto])
        lat = base + (steps - inter) * intra_hop + inter * NCCL_HOP_US["network"][proto]
        if proto == "Simple" and link.workers > 1 and all_reduce:
            lat *= 1.4
        bus = link.gb_s * NCCL_BW_SHARE[proto]
        if proto == "LL":
            bus = link.gb_s * (0.25 if all_reduce or link.workers > 1 else 1 / 3)
            bus = min(bus, NCCL_LL_MAX_GB_S[min(link.workers, 3) - 1])
        elif proto == "LL128" and link.members < 2 and link.workers > 1:
            bus = link.gb_s * 0.7
        best = min(best, lat * 1e-6 + steps / n * bytes_ / (bus * 1e9))
    return best


def send(bytes_: float, link: Link) -> float:
    """Seconds of one point-to-point send (pipeline stages, CP's K/V ring): one Simple step of the
    link's class and the bytes at one GPU's bandwidth."""
    hop = NCCL_HOP_US["network" if link.workers > 1 else link.hop]["Simple"]
    return (NCCL_BASE_US["Simple"] + hop) * 1e-6 + bytes_ / (link.send_gb_s * 1e9)


def all_to_all(n: int, bytes_: float, link: Link) -> float:
    """Seconds of one all-to-all over n ranks of `bytes_` a rank sends to the others (token_dispatcher's
    all-to-all: a send to each peer): the peers in other workers through the rank's own NIC, those in its
    worker over the intra link at the same time, and a Simple step's latency."""
    if n <= 1:
        return 0.0
    per_peer = bytes_ / (n - 1)
    remote = per_peer * (n - link.members) / (link.send_gb_s * 1e9)
    local = per_peer * (link.members - 1) / (link.intra_gb_s * 1e9)
    hop = NCCL_HOP_US["network" if link.workers > 1 else link.hop]["Simple"]
    return (NCCL_BASE_US["Simple"] + hop) * 1e-6 + max(remote, local)


def communication(args: Any, par: Any, gpu: Gpu, layers: int, params: float, recompute_fraction: float,
                  backward_s: float, forward_s: float, attention_s: float, moe_layers: int = 0) -> list[Comm]:
    """The TP, CP, DP, PP and EP traffic of one iteration on a stage of `layers` layers holding
    `params` parameters; backward_s/forward_s: one micro batch's GPU time (what overlap can hide); moe_layers:
    the stage's MoE layers (its MTP layers' too), whose tokens the expert-parallel all-to-alls move."""
    pp, tp, cp, dp = par.pipeline, par.tensor, par.context, par.data
    m, v, b = par.microbatches, par.virtual_pipeline or 1, par.micro_batch
    s, h = args.seq_length / cp, args.hidden_size
    activation = b * s * h * BF16_BYTES
    out: list[Comm] = []
    # TP, per layer (tensor_parallel/layers.py): without SP the row-parallel projection and FC2 all-reduce
    # their output forward (mappings.py reduce_from_tensor_model_parallel_region), the column-parallel
    # QKV and FC1 their input gradient backward; with SP an all-gather before QKV and FC1 and a
    # reduce-scatter after the projection and FC2 forward, the reverse backward plus the input's
    # all-gather again for the weight gradient (layers.py:528-541). A full recompute repeats the
    # forward's. Backward, layers.py:546-568 launch the input gradient's all-reduce (reduce-scatter)
    # asynchronously and compute the weight gradient meanwhile, and the all-gather runs behind the data
    # gradient: the backward's TP traffic is exposed only beyond the column-parallel weight gradients.
    link = _link(gpu, par, tp)
    where = link.name
    if par.sequence_parallel:
        one = collective(tp, activation, link, all_reduce=False)
        fwd, bwd, kind = 4 * one, 6 * one, "all-gathers and reduce-scatters"
    else:
        one = collective(tp, activation, link, all_reduce=True)
        fwd, bwd, kind = 2 * one, 2 * one, "all-reduces"
    tp_s = layers * m * ((1 + recompute_fraction) * fwd + bwd)
    hidden = min(layers * m * bwd, m * backward_s * wgrad_share(args))
    overlap = par.tp_comm_overlap and par.sequence_parallel and tp > 1
    exposed = userbuffer_exposed(args, par, gpu, one, layers, m, recompute_fraction) if overlap else tp_s - hidden
    count = tp_collectives(par, recompute_fraction)
    out.append(Comm("tp", tp_s, exposed, f"{count:g} {kind} of {activation / 2**20:.1f} MiB per layer and "
                    f"micro batch over {where} ({one * 1e6:.0f} us each), "
                    + ("behind the GEMMs by Transformer Engine's userbuffers (--tp-comm-overlap)" if overlap
                       else "the backward's behind the weight-gradient GEMMs")
                    if tp > 1 else "no tensor parallelism"))
    # CP: ring attention passes K and V around cp-1 times forward, K, V and their gradients backward;
    # TE overlaps each exchange with the attention of the chunk it has
    groups = query_groups(args)
    kv = 2 * b * s * max(1, groups // tp) * args.kv_channels * BF16_BYTES
    link = _link(gpu, par, cp, stride=tp)
    lat = send(0.0, link)
    cp_s = layers * m * 3 * (cp - 1) * send(kv, link) if cp > 1 else 0.0
    cp_exposed = max(cp_s - layers * m * attention_s, layers * m * 3 * (cp - 1) * lat) if cp > 1 else 0.0
    out.append(Comm("cp", cp_s, cp_exposed, f"{3 * (cp - 1)} K/V chunk exchanges per layer and micro batch over "
                    f"{link.name}, less the attention they overlap" if cp > 1 else "no context parallelism"))
    # DP: the gradients reduced over data x context ranks (CP ranks hold the same weights); the
    # distributed optimizer reduce-scatters them and all-gathers the bf16 parameters
    group = dp * cp
    link = _link(gpu, par, group, stride=tp)
    grads = params * par.grad_bytes
    reduce = collective(group, grads, link, all_reduce=not par.distributed_optimizer)
    bucket = max(BUCKET_PARAMS, BUCKET_PARAMS_PER_RANK * group)
    last_bucket = min(1.0, bucket / max(params, 1.0))
    hidden = reduce - max(reduce * last_bucket, reduce - backward_s) if par.overlap_grad_reduce else 0.0
    out.append(Comm("dp-grads", reduce, reduce - hidden, f"{'reduce-scatter' if par.distributed_optimizer else 'all-reduce'} "
                    f"of {grads / 2**30:.2f} GiB of gradients over {group} ranks, {link.name}"
                    + (", overlapped with the last micro batch's backward but the last bucket"
                       if par.overlap_grad_reduce else "")
                    if group > 1 else "one data-parallel rank"))
    if par.distributed_optimizer and group > 1:
        gather = collective(group, params * BF16_BYTES, link, all_reduce=False)
        hidden = gather - max(gather * last_bucket, gather - forward_s) if par.overlap_param_gather else 0.0
        out.append(Comm("dp-params", gather, gather - hidden, f"all-gather of the bf16 parameters over {link.name}"
                        + (", overlapped with the first micro batch's forward" if par.overlap_param_gather else "")))
    # PP: each micro batch's activation forward and its gradient backward across the stage
    # boundary, v times with interleaving; sequence-sharded with SP. The interleaved schedule overlaps
    # each send with the next chunk's compute (--overlap-p2p-communication, Megatron's default there;
    # arguments.py:979-991 turns it off without a virtual pipeline, and then each batched send/recv is
    # followed by torch.cuda.synchronize, p2p_communication.py:414-419): only its latency stays, or
    # what a chunk's forward cannot hide.
    message = activation / (tp if par.sequence_parallel else 1)
    link = _link(gpu, par, 2, stride=tp * cp * dp)
    one_send = send(message, link)
    pp_s = 2 * m * v * one_send if pp > 1 else 0.0
    overlapped = pp > 1 and par.virtual_pipeline is not None and par.virtual_pipeline > 1
    pp_exposed = 2 * m * v * max(send(0.0, link), one_send - forward_s / v) if overlapped else pp_s
    out.append(Comm("pp", pp_s, pp_exposed, f"2·m·v = {2 * m * v} sends of {message / 2**20:.1f} MiB over {link.name}"
                    + (", each behind the next chunk's compute but its latency" if overlapped else "")
                    if pp > 1 else "no pipeline parallelism"))
    if par.expert > 1 and args.num_experts is not None:
        link = _link(gpu, par, par.expert, stride=tp)
        # Each rank dispatches the tokens it holds: with sequence parallel (which Megatron requires for
        # MoE with TP > 1) its s/tp slice of the sequence, each sent to top-k experts, (ep-1)/ep of them
        # to other ranks (token_dispatcher.py's all-to-all over the expert group)
        # a MoE layer's dispatch and combine forward and their gradients backward; full recompute repeats
        # the forward's two (the dense layers of --moe-layer-freq move none)
        routed = message * args.moe_router_topk * (par.expert - 1) / par.expert
        calls = 4 + 2 * recompute_fraction
        ep_s = moe_layers * m * calls * all_to_all(par.expert, routed, link)
        out.append(Comm("ep", ep_s, ep_s, f"{calls:g} all-to-alls of {routed / 2**20:.1f} MiB of routed tokens per MoE "
                        f"layer ({moe_layers} on the stage) and micro batch over {link.name}"))
    return out


def userbuffer_exposed(args: Any, par: Any, gpu: Gpu, one: float, layers: int, m: int, recompute_fraction: float) -> float:
    """What --tp-comm-overlap leaves exposed of a stage's TP traffic (sequence parallel; Transformer Engine's
    userbuffers at their defaults, transformer_engine/pytorch/module/base.py initialize_ub): the all-gathers
    before QKV and FC1 and the backward's before the projection's and FC2's data gradients run as a ring
    exchange (copy engines, one SM), chunk by chunk behind the GEMM's chunks: what the collective takes beyond
    the GEMM stays. The reduce-scatters after the projection and FC2 forward run as a 4-way pipeline: the last
    quarter stays, with what the rest takes beyond the GEMM's other quarters. The backward's all-gather for
    QKV's and FC1's weight gradients and their data gradients' reduce-scatter run in bulk beside the other
    GEMM: what the collective takes beyond it stays. The pipeline and bulk comm kernels hold UB_COMM_SMS of the
    GPU's SMs, which the GEMM beside them goes without. `one`: one collective's seconds; the GEMMs at the
    measured rates scaled by the GPU's dense peak."""
    scale = GPUS[MEASURED_GPU].bf16_dense_tflops / gpu.bf16_dense_tflops
    tp, tokens, h = par.tensor, par.micro_batch * args.seq_length / par.context, args.hidden_size
    groups = query_groups(args)
    q, kv = args.num_attention_heads * args.kv_channels, groups * args.kv_channels
    f = args.ffn_hidden_size
    shapes = {"qkv": ((q + 2 * kv) / tp, h), "proj": (h, q / tp), "fc1": ((2 * f if args.swiglu else f) / tp, h),
              "fc2": (h, f / tp)}

    def g(name: str, kind: str) -> float:
        n, k = shapes[name]
        return rates.gemm_seconds(tokens, n, k, kind) * scale

    slow = gpu.sms / (gpu.sms - UB_COMM_SMS) - 1 if gpu.sms > UB_COMM_SMS else 0.0
    rest = (UB_PIPELINE_SPLITS - 1) / UB_PIPELINE_SPLITS

    def ring(gemm: float) -> float:
        return max(0.0, one - gemm)

    def pipeline(gemm: float) -> float:
        return one / UB_PIPELINE_SPLITS + max(0.0, rest * (one - gemm)) + slow * gemm

    def bulk(gemm: float) -> float:
        return max(0.0, one - gemm) + slow * min(gemm, one)

    forward = ring(g("qkv", "fwd")) + pipeline(g("proj", "fwd")) + ring(g("fc1", "fwd")) + pipeline(g("fc2", "fwd"))
    backward = (ring(g("proj", "dgrad")) + ring(g("fc2", "dgrad")) + bulk(g("qkv", "dgrad")) + bulk(g("qkv", "wgrad"))
                + bulk(g("fc1", "dgrad")) + bulk(g("fc1", "wgrad")))
    return layers * m * ((1 + recompute_fraction) * forward + backward)


def wgrad_share(args: Any) -> float:
    """The column-parallel linears' (QKV, FC1) weight-gradient GEMMs as a share of a layer's backward
    GEMMs (data and weight gradients of QKV, projection, FC1, FC2), by their FLOPs: what the backward's
    asynchronous TP collectives can run behind."""
    groups = query_groups(args)
    kv, heads = args.kv_channels, args.num_attention_heads
    qkv, proj = (heads + 2 * groups) * kv, heads * kv
    fc1, fc2 = args.ffn_hidden_size * (2 if args.swiglu else 1), args.ffn_hidden_size
    hidden: float = qkv + fc1
    total: float = 2 * (qkv + proj + fc1 + fc2)
    return hidden / total


def tp_collectives(par: Any, recompute_fraction: float) -> float:
    """TP collective calls per layer and micro batch (forward, its recompute, backward; see
    communication): 2 all-reduces each way without SP, 4 collectives forward and 6 backward with SP."""
    if par.tensor <= 1:
        return 0.0
    return (4 if par.sequence_parallel else 2) * (1 + recompute_fraction) + (6 if par.sequence_parallel else 2)


def tp_collective_calls(par: Any, recompute_fraction: float) -> float:
    """torch.distributed calls the host issues for TP per layer and micro batch: tp_collectives', or none with
    --tp-comm-overlap, which hands a layer's TP all-gathers and reduce-scatters to Transformer Engine's
    userbuffers inside its GEMMs (megatron/core/extensions/transformer_engine.py:801-829, 1065-1081 at the
    pinned commit: ub_overlap_ag, ub_overlap_rs, ub_bulk_wgrad, ub_bulk_dgrad)."""
    return 0.0 if par.tp_comm_overlap else tp_collectives(par, recompute_fraction)
