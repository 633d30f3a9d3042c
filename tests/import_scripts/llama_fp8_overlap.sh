#!/bin/bash
# FP8 the way Megatron's examples/llama/train_llama3_8b_h100_fp8.sh asks for it (hybrid format,
# amax history 1024, max), with the expert options: distributed optimizer with overlapped grad reduce
# and param gather, fused cross entropy, manual GC every 50 steps.
ARGS=(
  --num-layers 8 --hidden-size 2048 --num-attention-heads 16 --num-query-groups 4 --group-query-attention
  --ffn-hidden-size 5632 --seq-length 4096 --max-position-embeddings 4096
  --swiglu --normalization RMSNorm --position-embedding-type rope --untie-embeddings-and-output-weights
  --disable-bias-linear --tensor-model-parallel-size 2 --sequence-parallel
  --micro-batch-size 1 --global-batch-size 32 --train-iters 5000
  --lr 2e-4 --min-lr 2e-5 --lr-decay-style cosine --lr-warmup-iters 100
  --bf16 --fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max
  --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather
  --cross-entropy-loss-fusion --manual-gc --manual-gc-interval 50
  --mock-data --tokenizer-type NullTokenizer --vocab-size 128256
  --save /mnt/megatron/ckpt/llama-fp8 --save-interval 500
  --log-interval 10
)
torchrun --nproc_per_node=8 /opt/Megatron-LM/pretrain_gpt.py "${ARGS[@]}"
