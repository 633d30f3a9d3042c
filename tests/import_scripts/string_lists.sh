#!/bin/bash
# Flags kept as "flag value" strings in bash arrays and expanded unquoted (so a quoted split keeps
# its quote characters), a cache under the working directory, a file of the source tree, and
# a Slurm branch chosen by `which srun`.
CKPT=${1:-checkpoints/demo}
CACHE="${PWD}/data_cache_demo"

which srun > /dev/null
ON_SLURM=$((1-$?))

MODEL=(
  "--num-layers 8" "--hidden-size 1024" "--num-attention-heads 16"
  "--seq-length 2048" "--max-position-embeddings 2048"
)
DATA=(
  "--mock-data" "--tokenizer-type NullTokenizer" "--vocab-size 32000"
  "--split '98,1,1'" "--data-cache-path ${CACHE}"
  "--num-workers 2"
)
TRAIN=(
  --micro-batch-size 2 --global-batch-size 32 --train-iters 500 --lr 2e-4 --bf16
  --save "$CKPT" --load "$CKPT" --save-interval 250
  --nccl-communicator-config-path "$PWD/examples/demo/nccl.yaml"
)

if [[ $ON_SLURM -eq 1 ]]; then
  srun --ntasks-per-node 4 python pretrain_gpt.py ${MODEL[@]} ${DATA[@]} "${TRAIN[@]}"
else
  torchrun --nproc_per_node 4 pretrain_gpt.py ${MODEL[@]} ${DATA[@]} "${TRAIN[@]}"
fi
