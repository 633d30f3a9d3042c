"""compiler/megatron/layer_time.py's MoE and MLA terms (issue 26): the shapes tie to the parameter count, each
MTP layer costs the same, the first dense layers sit on the first stage, and the local spec's experts are never
priced as TE's grouped ones."""

from __future__ import annotations

from compiler.megatron.flops import FlopsArgs
from compiler.megatron.layer_time import Model, _attention_linears, stage_work
from compiler.megatron.timing import Parallel

# DeepSeek-V3-shaped (tests/e2e/models/ds-mla-moe-h2048): MLA, 64 experts top 6, 2 shared, the first layer dense
MLA = FlopsArgs(num_layers=4, hidden_size=2048, num_attention_heads=16, kv_channels=128, ffn_hidden_size=10944,
                seq_length=4096, padded_vocab_size=102400, swiglu=True, num_experts=64, moe_router_topk=6,
                moe_ffn_hidden_size=1408, moe_layer_freq=[0, 1, 1, 1], moe_shared_expert_intermediate_size=2816,
                multi_latent_attention=True, q_lora_rank=768, kv_lora_rank=512, qk_head_dim=128,
                qk_pos_emb_head_dim=64, v_head_dim=128)
ONE = Parallel(tensor=1, pipeline=1, context=1, data=1, micro_batch=1, global_batch=2, gpus_per_worker=1, workers=1,
               stack="te", local_attention=False, fused_kernels=True, grouped_gemm=True)


def _weights(args: FlopsArgs, tp: int, sp: int, local: bool) -> float:
    return sum(n * k for _, n, k in _attention_linears(args, tp, sp, local))


def test_mla_linears_are_the_parameter_count_without_the_latent_norms() -> None:
    # param_counts.parts' MLA attention (theoretical_memory_usage.py): the Linears plus a norm over each latent
    a = MLA
    qk = a.qk_head_dim + a.qk_pos_emb_head_dim
    counted = (a.q_lora_rank * (a.hidden_size + a.num_attention_heads * qk + 1)
               + a.kv_lora_rank * (a.hidden_size + a.num_attention_heads * (a.qk_head_dim + a.v_head_dim) + 1)
               + a.hidden_size * a.qk_pos_emb_head_dim + a.num_attention_heads * a.v_head_dim * a.hidden_size)
    assert _weights(a, 1, 1, False) == counted - (a.q_lora_rank + a.kv_lora_rank)


def test_te_duplicates_mla_down_projections_over_the_sequence_shard() -> None:
    # TE's down projections: every TP rank holds them whole and runs them over its 1/SP of the rows; the local
    # spec splits their output TP ways
    te = _attention_linears(MLA, 8, 8, False)
    local = _attention_linears(MLA, 8, 1, True)
    downs = [(rows, n) for rows, n, k in te if k == MLA.hidden_size and n != MLA.hidden_size]
    assert downs == [(8, MLA.q_lora_rank), (8, MLA.kv_lora_rank + MLA.qk_pos_emb_head_dim)]
    assert [n for rows, n, k in local if k == MLA.hidden_size][:2] == [MLA.q_lora_rank / 8, (512 + 64) / 8]
    assert _weights(MLA, 8, 8, False) > _weights(MLA, 8, 1, True)


def test_every_mtp_layer_costs_the_same() -> None:
    gemm = [stage_work(MLA._replace(mtp_num_layers=k), Model(bias=False, rope=True, learned_position=False), ONE, 4,
                       True, True).gemm for k in (0, 1, 2, 3)]
    steps = [b - a for a, b in zip(gemm, gemm[1:])]
    assert steps[0] > 0 and max(steps) - min(steps) < 1e-12


def test_the_first_dense_layer_sits_on_the_first_stage() -> None:
    pp2 = ONE._replace(pipeline=2)
    model = Model(bias=False, rope=True, learned_position=False)
    first = stage_work(MLA, model, pp2, 2, True, False)
    last = stage_work(MLA, model, pp2, 2, False, True)
    assert first.moe_layers == 1 and last.moe_layers == 2


def test_grouped_experts_only_on_transformer_engine() -> None:
    # the local spec builds SequentialMLP whatever --moe-grouped-gemm says (performance.grouped_gemm)
    from compiler.megatron.performance import grouped_gemm
    from types import SimpleNamespace

    local = SimpleNamespace(model=SimpleNamespace(num_experts=8, transformer_impl="local"), args=["--moe-grouped-gemm"])
    te = SimpleNamespace(model=SimpleNamespace(num_experts=8, transformer_impl="transformer_engine"),
                         args=["--moe-grouped-gemm"])
    assert not grouped_gemm(local) and grouped_gemm(te)
