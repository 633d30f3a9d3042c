#!/bin/bash
# Follow-up device run (not yet run): the kill + resume half of issue 17 that run.sh's first
# attempt did not exercise (the 40 iterations finished before the kill, and the restart then hit
# distrib_optimizer.py:793 `assert len(steps) == 1`, the TE/Apex-less distributed-optimizer resume).
# Here: no --use-distributed-optimizer, a kill right after the iteration-100 checkpoint lands.
set -u
B=$PWD/.bridge
O=${OUT:-/tmp/bridge-out}
W=/tmp/bridge-work
mkdir -p "$O" "$W"
exec > >(tee "$O/run.log") 2>&1
T0=$(date +%s)
t() { echo "[t+$(($(date +%s) - T0))s] $*"; }
export PYTHONUNBUFFERED=1 CUDA_DEVICE_MAX_CONNECTIONS=1 MASTER_ADDR=127.0.0.1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$B"/whl/*.whl || exit 1
rm -rf /opt/Megatron-LM /opt/bridge && cp -r .megatron /opt/Megatron-LM && mkdir -p /opt/bridge
tar -xJf "$B/bridge-src.tar.xz" -C /opt/bridge || exit 1
export PYTHONPATH=/tmp/site:/opt/bridge/src:/opt/Megatron-LM
make -s -C /opt/Megatron-LM/megatron/core/datasets || echo "HELPERS MAKE FAILED"
t "convert"
timeout 90 python3 -m torch.distributed.run --nproc_per_node 1 --master_port 29511 \
  "$B/convert.py" "$B/tiny/model" "$W/converted" > "$O/convert.log" 2>&1 || exit 1
ARCH=$(cat "$B/arch_flags.txt")
COMMON="$ARCH --tokenizer-type HuggingFaceTokenizer --tokenizer-model $B/tiny/model
  --seq-length 128 --micro-batch-size 16 --global-batch-size 16 --train-iters 300
  --lr 1e-4 --lr-decay-style constant --bf16 --data-path $B/data/tiny_text_document --split 100,0,0
  --eval-iters 0 --eval-interval 1000 --log-interval 1 --save-interval 100 --ckpt-format torch_dist
  --transformer-impl local --no-persist-layer-norm --no-rope-fusion --no-masked-softmax-fusion
  --no-gradient-accumulation-fusion --data-cache-path $W/cache --num-workers 1 --seed 1234"
LAUNCH="--pretrained-checkpoint $W/converted --load $W/run/ckpt --save $W/run/ckpt --exit-on-missing-checkpoint"
t "train A (killed right after the iteration-100 checkpoint)"
# shellcheck disable=SC2086
setsid python3 -m torch.distributed.run --nproc_per_node 1 --master_port 29512 \
  /opt/Megatron-LM/pretrain_gpt.py $COMMON $LAUNCH > "$O/train_a.log" 2>&1 &
PA=$!
for _ in $(seq 1 1200); do
  sleep 0.1
  [ "$(cat "$W/run/ckpt/latest_checkpointed_iteration.txt" 2>/dev/null)" = 100 ] && break
  kill -0 "$PA" 2>/dev/null || break
done
kill -9 -- "-$PA" 2>/dev/null; wait "$PA" 2>/dev/null
t "killed; tracker $(cat "$W/run/ckpt/latest_checkpointed_iteration.txt" 2>/dev/null)"
grep -E "finetune with|iteration +1/|iteration +100/" "$O/train_a.log"
grep -E "iteration +[0-9]+/" "$O/train_a.log" | tail -1
t "train B (same command)"
# shellcheck disable=SC2086
timeout 120 python3 -m torch.distributed.run --nproc_per_node 1 --master_port 29513 \
  /opt/Megatron-LM/pretrain_gpt.py $COMMON $LAUNCH > "$O/train_b.log" 2>&1
echo "train B rc=$?"
grep -cE "finetune with" "$O/train_b.log"
grep -E "loading distributed checkpoint|iteration +101/|iteration +300/|Error" "$O/train_b.log" | head
cat "$W/run/ckpt/latest_checkpointed_iteration.txt"; t "done"; sleep 1
