"""compiler/megatron/comm_time.py: NCCL's latency model, the link a group uses, what overlaps (issue 26)."""

from __future__ import annotations

import pytest

from compiler.megatron import comm_time
from compiler.megatron.comm_time import NCCL_BASE_US, NCCL_HOP_US, Link, all_to_all, collective, send
from compiler.megatron.flops import FlopsArgs
from compiler.megatron.gpus import GPUS, LINK_EFFICIENCY
from compiler.megatron.timing import Parallel, step_time

H100 = GPUS["h100"]
NVLINK = Link(360.0, 360.0, 360.0, "NVLink", 1, 8, "NVLink")
GPT = FlopsArgs(num_layers=8, hidden_size=4096, num_attention_heads=32, kv_channels=128, ffn_hidden_size=16384,
                seq_length=4096, padded_vocab_size=51200)


def layout(**kw: object) -> Parallel:
    base = dict(tensor=1, pipeline=1, context=1, data=1, micro_batch=1, global_batch=64, gpus_per_worker=8,
                workers=1, rdma=True)
    base.update(kw)
    return Parallel(**base)  # type: ignore[arg-type]


def test_a_small_all_reduce_costs_nccls_ring_latency() -> None:
    # 8 ranks on NVLink, 1 KiB: LL wins; its latency is the base and 2(n-1) steps at LL's hop figure,
    # its bandwidth a quarter of the bus, at most llMaxBws' 87.7 GB/s on one worker (tuning.cc)
    t = collective(8, 1024, NVLINK, all_reduce=True)
    ll = (NCCL_BASE_US["LL"] + 14 * NCCL_HOP_US["NVLink"]["LL"]) * 1e-6 + 14 / 8 * 1024 / (87.7e9)
    assert t == pytest.approx(ll)
    assert collective(1, 1e9, NVLINK, all_reduce=True) == 0


def test_latency_grows_with_the_ring_and_a_large_message_is_bandwidth() -> None:
    small = {n: collective(n, 1024, NVLINK, all_reduce=True) for n in (2, 4, 8)}
    assert small[2] < small[4] < small[8]
    # 1 GB: Simple, its latency (14 steps an all-reduce, 7 a reduce-scatter) and the bytes at the bus bandwidth
    simple = NCCL_HOP_US["NVLink"]["Simple"]
    assert collective(8, 1e9, NVLINK, all_reduce=True) == pytest.approx(
        (NCCL_BASE_US["Simple"] + 14 * simple) * 1e-6 + 2 * 7 / 8 * 1e9 / 360e9)
    assert collective(8, 1e9, NVLINK, all_reduce=False) == pytest.approx(
        (NCCL_BASE_US["Simple"] + 7 * simple) * 1e-6 + 7 / 8 * 1e9 / 360e9)


def test_steps_across_workers_cost_the_networks_hop() -> None:
    intra = collective(16, 1024, NVLINK, all_reduce=True)
    across = collective(16, 1024, Link(360.0, 47.0, 360.0, "NVLink", 2, 8, "worker network"), all_reduce=True)
    assert across > intra


def test_a_rings_bus_bandwidth_is_its_members_nics_a_worker() -> None:
    # nccl-tests issue 119: two nodes with four 200G NICs each, 96 GB/s of bus bandwidth (4 x 24); one
    # data-parallel member a worker gets one NIC, two get two, eight are capped by the intra link
    def bus(tp: int) -> float:
        return comm_time._link(H100, layout(workers=4, data=32 // tp, tensor=tp), 32 // tp, stride=tp).gb_s
    nic = 50.0 * comm_time.RDMA_EFFICIENCY
    assert bus(8) == pytest.approx(nic)
    assert bus(4) == pytest.approx(2 * nic)
    assert bus(1) == pytest.approx(min(8 * nic, H100.nvlink_gb_s * LINK_EFFICIENCY))


def test_point_to_point_and_all_to_all_leave_through_the_ranks_own_nic() -> None:
    link = comm_time._link(H100, layout(workers=4, data=8, tensor=4, expert=8), 8, stride=4)
    assert link.members == 2 and link.workers == 4
    assert send(1e9, link) == pytest.approx((NCCL_BASE_US["Simple"] + NCCL_HOP_US["network"]["Simple"]) * 1e-6
                                            + 1e9 / (link.send_gb_s * 1e9))
    # 6 of the 7 peers are in other workers: 6/7 of the bytes through one NIC, not two
    assert all_to_all(8, 7e9, link) == pytest.approx(send(6e9, link), rel=1e-9)


def test_data_parallel_buckets_grow_with_the_data_parallel_size() -> None:
    # training.py:1772-1774: max(40M, 1M x dp) parameters a bucket; with --overlap-grad-reduce the last
    # bucket stays exposed however long the backward is
    par = layout(workers=16, data=128, global_batch=128, distributed_optimizer=True, overlap_grad_reduce=True)
    grads = {c.name: c for c in comm_time.communication(GPT, par, H100, 8, 2e9, 0.0, backward_s=1e3, forward_s=1e3,
                                                        attention_s=0.0)}["dp-grads"]
    assert grads.exposed == pytest.approx(grads.seconds * 128e6 / 2e9)


def test_tp_counts_its_collectives_and_hides_the_backwards_behind_the_weight_gradients() -> None:
    plain, sp = layout(tensor=4), layout(tensor=4, sequence_parallel=True)
    assert comm_time.tp_collectives(plain, 0.0) == 4 and comm_time.tp_collectives(sp, 0.0) == 10
    assert comm_time.tp_collectives(plain, 1.0) == 6 and comm_time.tp_collectives(sp, 1.0) == 14
    comms = {c.name: c for c in comm_time.communication(GPT, plain, H100, 8, 1e9, 0.0, backward_s=10.0,
                                                        forward_s=1.0, attention_s=0.0)}
    # a long backward hides the two backward all-reduces a layer, never the forward's two
    assert comms["tp"].exposed == pytest.approx(comms["tp"].seconds / 2)
    starved = {c.name: c for c in comm_time.communication(GPT, plain, H100, 8, 1e9, 0.0, backward_s=0.0,
                                                          forward_s=1.0, attention_s=0.0)}
    assert starved["tp"].exposed == pytest.approx(starved["tp"].seconds)
    assert 0 < comm_time.wgrad_share(GPT) < 0.5


def test_crossing_workers_and_dropping_rdma_cost_more() -> None:
    args = GPT._replace(num_layers=8)
    one = step_time(args, layout(data=8, distributed_optimizer=True), H100, 1e9)
    two = step_time(args, layout(data=16, workers=2, global_batch=128, distributed_optimizer=True), H100, 1e9)
    tcp = step_time(args, layout(data=16, workers=2, global_batch=128, distributed_optimizer=True, rdma=False),
                    H100, 1e9)
    assert one.term("dp-grads").seconds < two.term("dp-grads").seconds < tcp.term("dp-grads").seconds


def test_interleaved_pipeline_sends_hide_behind_the_next_chunk_but_their_latency() -> None:
    # arguments.py:979-991: --overlap-p2p-communication only with a virtual pipeline; 1F1B's sends stay whole
    plain = layout(pipeline=4, data=2, global_batch=64)
    inter = plain._replace(virtual_pipeline=2)
    one = {c.name: c for c in comm_time.communication(GPT, plain, H100, 2, 1e9, 0.0, backward_s=1.0, forward_s=0.5,
                                                      attention_s=0.0)}["pp"]
    two = {c.name: c for c in comm_time.communication(GPT, inter, H100, 2, 1e9, 0.0, backward_s=1.0, forward_s=0.5,
                                                      attention_s=0.0)}["pp"]
    assert one.exposed == pytest.approx(one.seconds)
    link = comm_time._link(H100, inter, 2, stride=2)
    assert two.exposed == pytest.approx(2 * 32 * 2 * send(0.0, link))
