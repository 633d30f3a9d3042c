#!/bin/bash
# Four nodes of eight GPUs; the node rank and master come from the scheduler's environment.
NNODES=4
GPUS_PER_NODE=8
NODE_RANK=${NODE_RANK:-0}
MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}
MASTER_PORT=${MASTER_PORT:-29500}

DISTRIBUTED_ARGS="--nproc_per_node $GPUS_PER_NODE --nnodes $NNODES --node_rank $NODE_RANK --master_addr $MASTER_ADDR --master_port $MASTER_PORT"

torchrun $DISTRIBUTED_ARGS /opt/Megatron-LM/pretrain_gpt.py \
  --tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 \
  --num-layers-per-virtual-pipeline-stage 4 \
  --num-layers 32 --hidden-size 4096 --num-attention-heads 32 \
  --seq-length 4096 --max-position-embeddings 4096 \
  --micro-batch-size 1 --global-batch-size 256 --train-iters 100000 \
  --lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine --lr-warmup-iters 2000 \
  --bf16 --use-distributed-optimizer --sequence-parallel \
  --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 \
  --data-path /mnt/megatron/data/pile_text_document \
  --tokenizer-type GPT2BPETokenizer \
  --vocab-file /mnt/megatron/tokenizer/gpt2-vocab.json --merge-file /mnt/megatron/tokenizer/gpt2-merges.txt \
  --save /mnt/megatron/ckpt/gpt-7b --load /mnt/megatron/ckpt/gpt-7b --save-interval 1000 \
  --tensorboard-dir /mnt/megatron/tb/gpt-7b --log-interval 10
