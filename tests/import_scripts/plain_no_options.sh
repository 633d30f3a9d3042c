#!/bin/bash
# A script that turns on none of the performance options at data parallel 4: the imported spec says
# each one is off, so it compiles back to exactly these flags.
torchrun --nproc_per_node=4 /opt/Megatron-LM/pretrain_gpt.py \
  --num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 \
  --max-position-embeddings 1024 --micro-batch-size 2 --global-batch-size 16 --train-iters 100 \
  --lr 1e-4 --bf16 --use-distributed-optimizer --mock-data --tokenizer-type NullTokenizer \
  --vocab-size 32000 --save /mnt/megatron/ckpt/plain --save-interval 100
