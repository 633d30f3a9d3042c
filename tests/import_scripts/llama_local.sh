#!/bin/bash
# A Llama-style block without Transformer Engine or Apex: the local implementation, unfused
# kernels, RoPE, SwiGLU, grouped-query attention, a Hugging Face tokenizer.
ARGS=(
  --num-layers 8 --hidden-size 2048 --num-attention-heads 16 --num-query-groups 4 --group-query-attention
  --ffn-hidden-size 5632 --seq-length 2048 --max-position-embeddings 2048
  --swiglu --normalization RMSNorm --position-embedding-type rope --untie-embeddings-and-output-weights
  --disable-bias-linear --transformer-impl local
  --no-persist-layer-norm --no-gradient-accumulation-fusion --no-masked-softmax-fusion
  --no-bias-gelu-fusion --no-bias-dropout-fusion --no-bias-swiglu-fusion --no-rope-fusion
  --micro-batch-size 2 --global-batch-size 32 --train-iters 5000
  --lr 2e-4 --min-lr 2e-5 --lr-decay-style cosine --lr-warmup-iters 100
  --bf16
  --data-path /mnt/megatron/data/zh_text_document
  --tokenizer-type HuggingFaceTokenizer --tokenizer-model /mnt/megatron/tokenizers/llama
  --save /mnt/megatron/ckpt/llama-1b --save-interval 500
  --log-interval 10 --log-throughput
)
torchrun --nproc_per_node=8 /opt/Megatron-LM/pretrain_gpt.py "${ARGS[@]}"
