#!/usr/bin/env bash
# One long command with line continuations, started through python -m torch.distributed.run.
set -euo pipefail
MEGATRON=/opt/Megatron-LM
DATA=/mnt/megatron/data/wiki_text_document
CKPT=/mnt/megatron/checkpoints/gpt-350m

python -m torch.distributed.run --nproc_per_node=4 --nnodes=1 \
  $MEGATRON/pretrain_gpt.py \
  --tensor-model-parallel-size 2 \
  --num-layers 24 --hidden-size 1024 --num-attention-heads 16 \
  --seq-length 1024 --max-position-embeddings 1024 \
  --micro-batch-size 4 --global-batch-size 64 \
  --lr 0.0003 --min-lr 0.00003 --lr-decay-style cosine --lr-warmup-iters 500 \
  --train-iters 20000 \
  --bf16 --use-distributed-optimizer \
  --data-path $DATA --split 98,2,0 \
  --tokenizer-type GPT2BPETokenizer \
  --vocab-file /mnt/megatron/tokenizer/gpt2-vocab.json --merge-file /mnt/megatron/tokenizer/gpt2-merges.txt \
  --save $CKPT --load $CKPT --save-interval 2000 \
  --log-interval 10 --eval-interval 1000 --eval-iters 20 2>&1 | tee train.log
