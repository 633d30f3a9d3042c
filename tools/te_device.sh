#!/usr/bin/env bash
# Issue 27: Transformer Engine on the lent H200, from what tools/te_prepare.sh made here (carried in
# .dev/h27), then compiled pretrain_gpt.py launch commands through TE (docs/transformer-engine.md).
# Run from the repository root on the device; not part of CI.
#
#   bash tools/te_device.sh [RUN...]   default: te-l4 te-fp8-l4 te-tp2-sp te-s8192-l4
#
# Expects TE_DIR (default .dev/h27) to hold te-sm90.tar.xz, libte_cublaslt_compat.so, whl/*.whl and
# gen/<RUN>/launch.sh (megatron-compile tests/e2e/te -o TE_DIR/gen; and gen/<RUN>/flags.txt from
# tools/te_flags.py for the runs with tensor > 1)
# and .dev/megatron (Megatron-LM's runtime subset at the
# pinned commit). A run whose spec has tensor > 1 runs its last rank alone with --fake-process-group
# (WORLD_SIZE and RANK of the layout, every collective skipped): that rank is data-parallel rank 0,
# so it prints Megatron's memory report and the iteration times. Each run stops once Megatron prints
# "[after training is done]" (the final checkpoint is not waited for).
#
# Writes $OUT/summary.txt and $OUT/te-logs.tar.gz (smoke.txt, NAME/train.log or NAME/rank.log),
# rewritten after each step so a command cut short still returns what it did. BUDGET_S (default 170):
# no run starts after it, and none runs past BUDGET_S + 40 s. SMOKE=0 skips tools/te_smoke.py.
set -uo pipefail

OUT=${OUT:-/tmp/te-out}
here=$(dirname "${BASH_SOURCE[0]}")
TE_DIR=${TE_DIR:-.dev/h27}
BUDGET_S=${BUDGET_S:-170}
LOGS=/tmp/te-logs
rm -rf "$LOGS"
mkdir -p "$OUT" "$LOGS"
summary="$LOGS/summary.txt"
say() { printf '%s\n' "$*" | tee -a "$summary"; }
pack() {
  tar -czf "$OUT/te-logs.tar.gz.part" -C "$LOGS" . && mv "$OUT/te-logs.tar.gz.part" "$OUT/te-logs.tar.gz"
  cp "$summary" "$OUT/summary.txt"
}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

say "## machine: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader)"
site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
start=$SECONDS
tar -xJf "$TE_DIR/te-sm90.tar.xz" -C "$site" &&
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir "$TE_DIR"/whl/*.whl
say "## install into $site: exit $? after $((SECONDS - start)) s"
# libtransformer_engine.so (built with CUDA 13.2) references one cuBLASLt symbol that torch's cuBLASLt
# 13.1 lacks; tools/te_cublaslt_compat.c stands in for it (TE's grouped GEMM only, which answers
# "not supported"), preloaded into every process from here on.
export LD_PRELOAD="$PWD/$TE_DIR/libte_cublaslt_compat.so${LD_PRELOAD:+:$LD_PRELOAD}"
start=$SECONDS
smoke=0
[ "${SMOKE:-1}" = 0 ] || python3 "$here/te_smoke.py" >"$LOGS/smoke.txt" 2>&1 || smoke=$?
grep -E '^(ok|FAIL) ' "$LOGS/smoke.txt" 2>/dev/null | tee -a "$summary"
say "## smoke: exit $smoke after $((SECONDS - start)) s"
pack
[ "$smoke" -eq 0 ] || exit 1

rm -rf .megatron && cp -r .dev/megatron .megatron
# shellcheck source=tools/device_image.sh disable=SC1091
source tools/device_image.sh

# stop_when_done PID LOG LIMIT: wait for "[after training is done]" in LOG, then end PID's group
stop_when_done() {
  local pid=$1 log=$2 limit=$3 t0=$SECONDS outcome=""
  while kill -0 "$pid" 2>/dev/null; do
    if grep -q 'after training is done' "$log" 2>/dev/null; then outcome=finished; break; fi
    if ((SECONDS - t0 > limit)); then outcome="timeout after $limit s"; break; fi
    sleep 0.5
  done
  kill -TERM -- "-$pid" 2>/dev/null
  sleep 2
  kill -KILL -- "-$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  printf '%s' "${outcome:-exited}"
}

runs=("$@")
[ ${#runs[@]} -gt 0 ] || runs=(te-l4 te-fp8-l4 te-tp2-sp te-s8192-l4)
for name in "${runs[@]}"; do
  if ((SECONDS > BUDGET_S)); then
    say "## $name: skipped at $SECONDS s"
    continue
  fi
  launch="$TE_DIR/gen/$name/launch.sh"
  run_root=$(sed -n 's/^RUN_ROOT=//p' "$launch")
  tensor=$(grep -o -- '--tensor-model-parallel-size [0-9]*' "$launch" | awk '{print $2}')
  mkdir -p "$LOGS/$name"
  rm -rf "$run_root"
  t0=$SECONDS
  limit=$((BUDGET_S + 40 - SECONDS))
  if [ -n "$tensor" ] && [ "$tensor" -gt 1 ]; then
    # the flags the spec compiles to, run root filled in (tools/te_flags.py wrote them beside launch.sh)
    flags=$(cat "$TE_DIR/gen/$name/flags.txt")
    mkdir -p "$run_root"
    make -C /opt/Megatron-LM/megatron/core/datasets >/dev/null 2>&1  # launch.sh's dataset helper step
    # shellcheck disable=SC2086
    (cd /opt/Megatron-LM && WORLD_SIZE=$tensor RANK=$((tensor - 1)) LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=29517 CUDA_DEVICE_MAX_CONNECTIONS=1 setsid python3 pretrain_gpt.py $flags --fake-process-group \
      >"$LOGS/$name/rank.log" 2>&1) &
    outcome=$(stop_when_done $! "$LOGS/$name/rank.log" "$limit")
    log="$LOGS/$name/rank.log"
  else
    setsid bash "$launch" >"$LOGS/$name/launch.out" 2>&1 &
    outcome=$(stop_when_done $! "$LOGS/$name/launch.out" "$limit")
    cp "$run_root/train.log" "$LOGS/$name/train.log" 2>/dev/null
    log="$LOGS/$name/train.log"
  fi
  say "## $name: $outcome after $((SECONDS - t0)) s"
  grep -h -m1 'Theoretical memory footprints' "$log" 2>/dev/null | tee -a "$summary"
  grep -h 'max allocated' "$log" 2>/dev/null | tail -n 1 | cut -c1-200 | tee -a "$summary"
  grep -h 'elapsed time per iteration' "$log" 2>/dev/null | tail -n 1 | cut -c1-220 | tee -a "$summary"
  if [ "$outcome" != finished ]; then
    grep -h -m3 -i 'error\|Traceback' "$LOGS/$name"/* 2>/dev/null | cut -c1-300 | tee -a "$summary"
  fi
  pack
done
say "## batch done after $SECONDS s"
pack
