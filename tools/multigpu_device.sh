#!/usr/bin/env bash
# Issue 33: the runs that need a machine of several GPUs (nvidia-h200-x2/-x4/-x8), prepared while
# none is lent. Not part of CI; run from the repository root on the device, like tools/e2e_device.sh
# (same expectations: .megatron/ holds Megatron-LM at the pinned commit, never committed).
#
#   bash tools/multigpu_device.sh PHASE...   in order, from:
#     tp2-dp2   the seed's multi-worker scenario for real: generated/tp2-dp2/launch.sh as 2 workers
#               x 2 GPUs on one 4-GPU host (tools/e2e_device.sh tp2-dp2), then its verify.sh
#     comm      tools/comm_bench.py over every GPU of the host, then over 2: all-reduce, all-gather,
#               reduce-scatter, all-to-all and send/recv bus bandwidth against message size, with the
#               latency + bytes/bandwidth fit per collective ($OUT/comm-N.jsonl)
#     layouts   each tests/e2e/multigpu/*.yaml (compiled into .mgpu/ by this script) for real on 2 GPUs,
#               its train.log kept; the same layouts rank by rank with --fake-process-group (one GPU,
#               collectives skipped) are the step-time model's own harness (docs/performance-model.md):
#               the difference in time per iteration is the communication the model must explain
#
# Writes $OUT/summary.txt and $OUT/multigpu-logs.tar.gz (every log), rewritten after each run.
set -uo pipefail

OUT=${OUT:-/tmp/multigpu-out}
LOGS=/tmp/multigpu-logs
mkdir -p "$OUT" "$LOGS"
summary="$LOGS/summary.txt"
say() { printf '%s\n' "$*" | tee -a "$summary"; }
pack() {
  tar -czf "$OUT/multigpu-logs.tar.gz.part" -C "$LOGS" . && mv "$OUT/multigpu-logs.tar.gz.part" "$OUT/multigpu-logs.tar.gz"
  cp "$summary" "$OUT/summary.txt"
}
here=$(dirname "${BASH_SOURCE[0]}")

# shellcheck source=tools/device_image.sh disable=SC1091
source "$here/device_image.sh"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gpus=$(nvidia-smi -L | grep -c '^GPU')
say "## machine: $gpus GPUs"
nvidia-smi topo -m 2>&1 | tee -a "$summary"

# last_iteration LOG: Megatron's last iteration line (elapsed time per iteration and memory)
last_iteration() {
  grep -o 'elapsed time per iteration (ms): [0-9.]*' "$1" | tail -n 1
  grep -o 'max allocated: [0-9.]*' "$1" | tail -n 1
}

for phase in "$@"; do
  case "$phase" in
  tp2-dp2)
    if [ "$gpus" -lt 4 ]; then
      say "tp2-dp2: needs 4 GPUs, this host has $gpus"
      continue
    fi
    OUT=$LOGS bash "$here/e2e_device.sh" tp2-dp2 | tee -a "$summary"
    ;;
  comm)
    for n in "$gpus" 2; do
      [ "$n" -ge 2 ] || continue
      timeout 300 torchrun --nproc_per_node "$n" --master_port 29641 "$here/comm_bench.py" \
        --backend nccl --sizes 8K..1G --out "$LOGS/comm-$n.jsonl" >"$LOGS/comm-$n.log" 2>&1
      say "comm over $n GPUs: exit $?; fit: $(tail -n 1 "$LOGS/comm-$n.jsonl" 2>/dev/null)"
      cp "$LOGS/comm-$n.jsonl" "$OUT/" 2>/dev/null
      [ "$n" -eq 2 ] && break
    done
    ;;
  layouts)
    python -m compiler tests/e2e/multigpu -o .mgpu >"$LOGS/compile.log" 2>&1 || { say "compile failed"; cat "$LOGS/compile.log"; exit 1; }
    for dir in .mgpu/*/; do
      name=$(basename "$dir")
      rm -rf "/mnt/megatron/runs/$name"
      start=$(date +%s)
      timeout 240 bash "$dir/launch.sh" >"$LOGS/$name-real.log" 2>&1
      say "$name real (2 GPUs): exit $? after $(($(date +%s) - start)) s; $(last_iteration "/mnt/megatron/runs/$name/train.log" | tr '\n' ' ')"
      cp "/mnt/megatron/runs/$name/train.log" "$LOGS/$name-real-train.log" 2>/dev/null
      pack
    done
    ;;
  *)
    say "unknown phase $phase"
    exit 2
    ;;
  esac
  pack
done
