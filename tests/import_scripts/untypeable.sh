#!/bin/bash
# What a spec cannot express: flags with no typed field, a seed computed at run time, a weighted
# data blend, and a variable nobody set.
torchrun --nproc_per_node 2 /opt/Megatron-LM/pretrain_gpt.py \
  --num-layers 4 --hidden-size 1024 --num-attention-heads 16 \
  --seq-length 2048 --max-position-embeddings 2048 \
  --micro-batch-size 4 --global-batch-size 16 --train-iters 200 --lr 1e-4 --bf16 \
  --use-flash-attn --attention-dropout 0.0 \
  --seed $(date +%s) \
  --data-path 0.7 /mnt/megatron/data/web_text_document 0.3 /mnt/megatron/data/code_text_document \
  --tokenizer-type HuggingFaceTokenizer --tokenizer-model $TOKENIZER_DIR \
  --save /mnt/megatron/ckpt/x --save-interval 100
