#!/usr/bin/env bash
# Runs compiled launch commands for real on a GPU machine, as the AIStudio job would, then their
# verify.sh. Used with the device machines (see docs/e2e.md); not part of CI.
#
#   tools/e2e_device.sh PHASE...  in order, from:
#     first     specs/pretrain-mock.yaml (generated/pretrain-mock/launch.sh), then its verify.sh
#     resume    tests/e2e/pretrain-mock-resume.yaml: the same run root extended to 30 iterations
#     broken    tests/e2e/pretrain-mock-broken.yaml started with a wrong MEGATRON_COMMIT
#     memory    the memory-model configurations of tests/e2e/mem-*.yaml (ONLY=text: those matching)
#     tp2       generated/tp2/launch.sh on 2 GPUs (the seed's single-worker scenario)
#     2x1       tests/e2e/tp2-2workers-1gpu.yaml: launch.sh started twice as 2 workers of 1 GPU
#     tp2-dp2   generated/tp2-dp2/launch.sh as 2 workers × 2 GPUs on a 4-GPU host
#     2w        tests/e2e/pretrain-mock-2workers.yaml: pretrain_gpt.py as 2 workers × 1 GPU (DP=2
#               across the workers) on a 2-GPU host
#
# Expects, in the working directory: .megatron/ (Megatron-LM at the pinned commit: megatron/,
# examples/, pretrain_gpt.py, gpt_builders.py, model_provider.py; fetched, never committed),
# generated/ (committed artifacts) and .e2e/<stem>/ (tests/e2e/*.yaml compiled with
# `megatron-compile tests/e2e -o .e2e`). Writes its summary to $OUT (default /tmp/e2e-out).
set -uo pipefail

OUT=${OUT:-/tmp/e2e-out}
mkdir -p "$OUT"
summary="$OUT/e2e-$(IFS=-; echo "$*").txt"
: >"$summary"
say() { printf '%s\n' "$*" | tee -a "$summary"; }

# What the image provides (the Megatron source, MEGATRON_COMMIT, PYTHONPATH, the mount point).
# shellcheck source=tools/device_image.sh
source "$(dirname "${BASH_SOURCE[0]}")/device_image.sh"

say "## machine"
say "$(nvidia-smi -L)"
say "$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader)"
say "$(python -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)')"
say "torchrun: $(command -v torchrun)"

# run NAME LAUNCH VERIFY [ENV=VALUE...]: the launch command, then verify.sh on its run root
run() {
  local name=$1 launch=$2 check=$3 start rc vrc
  shift 3
  start=$(date +%s)
  env "$@" bash "$launch" >"$OUT/$name.log" 2>&1
  rc=$?
  say ""
  say "## $name: bash $launch${*:+ (with $*)}"
  say "exit status $rc after $(($(date +%s) - start)) s; last lines of train.log:"
  tail -n 4 "$OUT/$name.log" | cut -c1-240 | tee -a "$summary"
  say "\$ bash $check"
  bash "$check" 2>&1 | tee -a "$summary"
  vrc=${PIPESTATUS[0]}
  say "verify.sh exit status $vrc"
}

# workers DIR N G: DIR/launch.sh started N times at once as the platform starts N workers, each
# seeing G GPUs of this host (CUDA_VISIBLE_DEVICES, and an nvidia-smi that lists only those), then
# DIR/verify.sh
workers() {
  local dir=$1 n=$2 g=$3 rank first pids=() rc=0 start
  start=$(date +%s)
  for ((rank = 0; rank < n; rank++)); do
    first=$((rank * g))
    mkdir -p "/tmp/worker-$rank"
    printf '#!/usr/bin/env bash\nseq 0 %s\n' "$((g - 1))" >"/tmp/worker-$rank/nvidia-smi"
    chmod +x "/tmp/worker-$rank/nvidia-smi"
    PATH="/tmp/worker-$rank:$PATH" CUDA_VISIBLE_DEVICES=$(seq -s, "$first" $((first + g - 1))) \
      WORLD_SIZE=$n RANK=$rank MASTER_ADDR=127.0.0.1 MASTER_PORT=29555 \
      bash "$dir/launch.sh" >"$OUT/$(basename "$dir")-worker-$rank.log" 2>&1 &
    pids+=($!)
  done
  for rank in "${!pids[@]}"; do
    rc=0
    wait "${pids[$rank]}" || rc=$?
    say "worker $rank of $(basename "$dir"): exit status $rc"
  done
  say "## $(basename "$dir"): $n workers × $g GPUs, $(($(date +%s) - start)) s"
  say "\$ bash $dir/verify.sh"
  bash "$dir/verify.sh" 2>&1 | tee -a "$summary"
  say "verify.sh exit status ${PIPESTATUS[0]}"
}

memory_line() {
  local log=$1 run_root=$2 iter=$3 peak ckpt
  peak=$(grep -o 'max allocated: [0-9.]*' "$log" | tail -n 1 | cut -d' ' -f3)
  ckpt=$(du -sb "$run_root/ckpt/$iter" 2>/dev/null | cut -f1)
  say "$(basename "$log" .log): max allocated ${peak:-?} MB; checkpoint $iter ${ckpt:-?} bytes"
  grep -m1 'Theoretical memory footprints' "$log" | tee -a "$summary"
}

for phase in "$@"; do
  case "$phase" in
  first)
    rm -rf /mnt/megatron/runs/pretrain-mock-01
    run pretrain-mock generated/pretrain-mock/launch.sh generated/pretrain-mock/verify.sh
    memory_line "$OUT/pretrain-mock.log" /mnt/megatron/runs/pretrain-mock-01 iter_0000020
    ;;
  resume)
    run pretrain-mock-resume .e2e/pretrain-mock-resume/launch.sh .e2e/pretrain-mock-resume/verify.sh
    say "resume evidence: $(grep -o 'successfully loaded checkpoint from .* at iteration *[0-9]*' "$OUT/pretrain-mock-resume.log" | sed 's/  */ /g')"
    say "checkpoints: $(cd /mnt/megatron/runs/pretrain-mock-01/ckpt && echo *)"
    grep -n -B2 -A12 'Traceback\|Error' "$OUT/pretrain-mock-resume.log" | grep -v Warning | head -n 60 | tee -a "$summary"
    ;;
  broken)
    rm -rf /mnt/megatron/runs/pretrain-mock-broken
    run pretrain-mock-broken .e2e/pretrain-mock-broken/launch.sh .e2e/pretrain-mock-broken/verify.sh \
      MEGATRON_COMMIT=0123456789abcdef0123456789abcdef01234567
    ;;
  memory)
    for spec in .e2e/mem-*; do
      if [ -n "${ONLY:-}" ] && [[ $spec != *"$ONLY"* ]]; then
        continue
      fi
      name=$(basename "$spec")
      rm -rf "/mnt/megatron/runs/$name"
      start=$(date +%s)
      bash "$spec/launch.sh" >"$OUT/$name.log" 2>&1
      say "$name: exit status $? after $(($(date +%s) - start)) s"
      memory_line "$OUT/$name.log" "/mnt/megatron/runs/$name" iter_0000004
    done
    ;;
  tp2)
    rm -rf /mnt/megatron/runs/mcore-tp2-01
    run tp2 generated/tp2/launch.sh generated/tp2/verify.sh
    ;;
  2x1)
    rm -rf /mnt/megatron/runs/mcore-tp2-2x1-01
    workers .e2e/tp2-2workers-1gpu 2 1
    ;;
  tp2-dp2)
    rm -rf /mnt/megatron/runs/mcore-tp2-dp2-01
    workers generated/tp2-dp2 2 2
    ;;
  2w)
    rm -rf /mnt/megatron/runs/pretrain-mock-2w-01
    workers .e2e/pretrain-mock-2workers 2 1
    ckpt_files=(/mnt/megatron/runs/pretrain-mock-2w-01/ckpt/iter_0000020/* /mnt/megatron/runs/pretrain-mock-2w-01/ckpt/iter_0000020/.[!.]*)
    say "checkpoint files: ${ckpt_files[*]##*/}"
    for node in 0 1; do
      say "node $node: $(grep -m1 -o 'data_parallel_size .*' "/mnt/megatron/runs/pretrain-mock-2w-01/nodes/node-$node/train.log")"
      say "node $node last iteration: $(grep -o 'iteration *[0-9]*/ *[0-9]* .*lm loss: [0-9.E+-]*' "/mnt/megatron/runs/pretrain-mock-2w-01/nodes/node-$node/train.log" | tail -n 1 | cut -c1-200)"
    done
    ;;
  *)
    say "unknown phase $phase"
    exit 2
    ;;
  esac
done
