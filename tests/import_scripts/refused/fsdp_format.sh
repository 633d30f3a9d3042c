#!/bin/bash
# A Megatron-FSDP job: it needs the fsdp_dtensor checkpoint format, which a spec does not take.
torchrun --nproc_per_node 8 pretrain_gpt.py \
  --num-layers 4 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 \
  --max-position-embeddings 1024 --micro-batch-size 1 --global-batch-size 8 --train-iters 10 \
  --lr 1e-4 --bf16 --mock-data --tokenizer-type NullTokenizer --vocab-size 32000 \
  --use-megatron-fsdp --ckpt-format fsdp_dtensor --save /mnt/megatron/ckpt
