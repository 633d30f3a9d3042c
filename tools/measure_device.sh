#!/usr/bin/env bash
# Measures peak memory and time per iteration of compiled pretrain_gpt.py launch commands on one
# GPU, one configuration after another (timings never overlap). Used with the device machines
# (docs/e2e.md says how a run is set up); not part of CI. The committed results are
# tests/fixtures/measurements/, read by tools/measurements.py.
#
#   bash tools/measure_device.sh [NAME...]   default: the list below, in that order
#
# Expects, in the working directory: .megatron/ (Megatron-LM at the pinned commit, never
# committed) and GEN (default .meas/gen) holding mem-<NAME>/launch.sh, compiled from
# tests/e2e/mem-<NAME>.yaml with `python -m compiler tests/e2e/mem-*.yaml -o .meas/gen`.
#
# Each launch.sh runs unmodified. Once its train.log says "[after training is done]" every
# figure a parser needs (arguments, iteration lines, theoretical and measured memory) has been
# printed; what is left is the checkpoint Megatron saves after training whatever save_interval says
# (megatron/training/training.py:1401), tens of seconds to minutes for these models, so the run is
# stopped there: its process group gets SIGTERM. Its exit status is then 143, recorded as "stopped".
#
# Writes $OUT/measurements.tar.gz (NAME/train.log for each run, NAME/launch.out too for a run that
# did not reach the end of training, and summary.txt), rewritten after every run so a batch cut
# short still returns what it measured, and $OUT/summary.txt.
#
# Environment: BUDGET_S (default 450): seconds after which no run is started or kept running;
# RUN_TIMEOUT_S (default 120): the longest one run may take.
set -uo pipefail

OUT=${OUT:-/tmp/measure-out}
GEN=${GEN:-.meas/gen}
BUDGET_S=${BUDGET_S:-450}
RUN_TIMEOUT_S=${RUN_TIMEOUT_S:-120}
# Issue 15's seven shapes first (the cheap ones first), then the baseline, then the other
# series, then the no-recompute baselines that are only worth it if time remains.
DEFAULT_ORDER=(
  l4-sel s8192-l4 l12-full-u1 s8192-l8 gqa4-h2048 s8192-l24-sel h3072-l16
  l4
  b1 b8 h1536 s4096-b2 v151936 l8-sel h2560 s8192-b2 l16-full-u2 l16-sel l24-full-b12 s16384-b1
  gqa8-h4096
  l12 l4-ga4 l24
)
if [ $# -gt 0 ]; then
  order=("$@")
else
  order=("${DEFAULT_ORDER[@]}")
fi

LOGS=/tmp/measure-logs
rm -rf "$LOGS"
mkdir -p "$OUT" "$LOGS"
summary="$LOGS/summary.txt"
say() { printf '%s\n' "$*" | tee -a "$summary"; }
pack() {
  tar -czf "$OUT/measurements.tar.gz.part" -C "$LOGS" . && mv "$OUT/measurements.tar.gz.part" "$OUT/measurements.tar.gz"
  cp "$summary" "$OUT/summary.txt"
}

# What the image provides (the Megatron source, MEGATRON_COMMIT, PYTHONPATH, the mount point).
# shellcheck source=tools/device_image.sh
source "$(dirname "${BASH_SOURCE[0]}")/device_image.sh"

say "## machine"
say "$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader)"
say "$(python -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)')"
say "torchrun: $(command -v torchrun)"
say "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
say "order: ${order[*]}"
say ""

# stop_group PID: SIGTERM to the run's process group, SIGKILL after 20 s; returns once it is gone
stop_group() {
  local pid=$1 i
  kill -TERM -- "-$pid" 2>/dev/null
  for ((i = 0; i < 100; i++)); do
    kill -0 -- "-$pid" 2>/dev/null || return 0
    sleep 0.2
  done
  kill -KILL -- "-$pid" 2>/dev/null
  while kill -0 -- "-$pid" 2>/dev/null; do sleep 0.2; done
}

# measure NAME: GEN/mem-NAME/launch.sh in a process group of its own, stopped after training
measure() {
  local name=$1 launch="$GEN/mem-$1/launch.sh" dir="$LOGS/$1" run_root start limit pid outcome rc
  mkdir -p "$dir"
  run_root=$(sed -n 's/^RUN_ROOT=//p' "$launch")
  rm -rf "$run_root"
  limit=$((BUDGET_S - SECONDS))
  ((limit > RUN_TIMEOUT_S)) && limit=$RUN_TIMEOUT_S
  start=$SECONDS
  setsid bash "$launch" >"$dir/launch.out" 2>&1 &
  pid=$!
  outcome=""
  while kill -0 "$pid" 2>/dev/null; do
    if grep -q 'after training is done' "$dir/launch.out" 2>/dev/null; then
      outcome=stopped
      break
    fi
    if ((SECONDS - start > limit)); then
      outcome="timeout after $limit s"
      break
    fi
    sleep 0.5
  done
  stop_group "$pid"
  wait "$pid"
  rc=$?
  [ -n "$outcome" ] || outcome="exit status $rc"
  if [ -f "$run_root/train.log" ]; then
    cp "$run_root/train.log" "$dir/train.log"
  fi
  if [ "$outcome" = stopped ]; then
    rm -f "$dir/launch.out"
  fi
  say "## $name: $outcome after $((SECONDS - start)) s (batch at $SECONDS s)"
  grep -h -m1 'Theoretical memory footprints' "$dir/train.log" 2>/dev/null | tee -a "$summary"
  grep -h 'max allocated' "$dir/train.log" 2>/dev/null | tail -n 1 | tee -a "$summary"
  grep -h 'elapsed time per iteration' "$dir/train.log" 2>/dev/null | tail -n 1 | cut -c1-200 | tee -a "$summary"
  if [ "$outcome" != stopped ]; then
    grep -h -m3 -i 'error\|out of memory' "$dir/launch.out" 2>/dev/null | cut -c1-300 | tee -a "$summary"
    tail -n 5 "$dir/launch.out" | cut -c1-300 | tee -a "$summary"
  fi
  rm -rf "$run_root"
}

for name in "${order[@]}"; do
  if ((SECONDS > BUDGET_S - 30)); then
    say "## $name: skipped, $SECONDS s of the $BUDGET_S s budget used"
    continue
  fi
  measure "$name"
  pack
done
say ""
say "batch done after $SECONDS s"
pack
