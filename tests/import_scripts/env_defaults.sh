#!/bin/bash
# A team script driven by environment variables with defaults and some arithmetic.
GPUS=${GPUS_PER_NODE:-8}
NODES=${NNODES:-1}
TP=${TP:-4}
PP=${PP:-1}
MBS=${MBS:-2}
DP=$(( GPUS * NODES / (TP * PP) ))
GBS=${GBS:-$(( MBS * DP * 16 ))}
LR=${LR:-1.5e-4}
RUN=${RUN_NAME:-gpt-1b}
OUT=${OUT_DIR:-/mnt/megatron/runs/$RUN}

MODEL="--num-layers 16 --hidden-size 2048 --num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096"
PAR="--tensor-model-parallel-size $TP --pipeline-model-parallel-size $PP --sequence-parallel"
OPT="--lr $LR --min-lr 1.5e-5 --lr-decay-style cosine --lr-warmup-iters 200 --weight-decay 0.1 --clip-grad 1.0"

torchrun --nproc_per_node "$GPUS" --nnodes "$NODES" "${MEGATRON_HOME:-/opt/Megatron-LM}/pretrain_gpt.py" \
  $MODEL $PAR $OPT \
  --micro-batch-size $MBS --global-batch-size $GBS --train-iters 10000 \
  --bf16 --mock-data --tokenizer-type NullTokenizer --vocab-size 32000 \
  --save "$OUT/ckpt" --save-interval 1000 --log-interval 20 --log-throughput
