#!/usr/bin/env bash
# Issue 30 on one H200: a tiny Qwen3-MoE (transformer_impl local) and a tiny DeepSeek-V3-shaped model
# (multi-latent attention: Transformer Engine, from .dev/h27's carry as tools/te_device.sh installs it)
# through the generated steps of tests/e2e/e2e-qwen3-moe.yaml and tests/e2e/e2e-deepseek-v3.yaml
# (compiled into $D/e2e), the two models side by side:
#   convert.sh      DeepSeek: Bridge's import on the GPU; Qwen3-MoE: the checkpoint tools/bridge/convert.py
#                   made on a CPU is in place, so convert.sh says "not redone" (its GPU run: run1, 2026-12-01)
#   launch.sh       from the converted weights; SIGTERM to launch.sh once iteration STOP_AT is logged
#                   (Megatron saves on the way out), then launch.sh again: it continues from that save
#   reference       beside it, the same launch.sh with only RUN_ROOT (…-ref) and --train-iters 21
#                   changed: the uninterrupted run whose losses the resumed run's must equal, and whose
#                   iteration 21 scores the weights of iteration 20 on batch 21
#   verify.sh       on the resumed run
#   export.sh       the resumed run's last checkpoint (iteration 20) to Hugging Face weights
#   score.py        transformers loads the export and scores batches 1, 11 and 21 (first_batch.py made
#                   them on a CPU from Megatron's own dataset code: $D/batches-<model>.json)
# The data (and Megatron's index cache for both sample counts) was made on a CPU and is carried in
# $D/mnt. Logs go to $OUT as each step ends; BUDGET seconds: no step starts after it.
#
#   D=.dev/h30 TE_DIR=.dev/h27/carry bash .dev/h30/moe_device.sh
set -u
D=${D:-.dev/h30}
TE_DIR=${TE_DIR:-.dev/h27/carry}
OUT=${OUT:-/tmp/moe-out}
BUDGET=${BUDGET:-260}
STOP_AT=${STOP_AT:-3}
MODELS=${MODELS:-"qwen3-moe deepseek-v3"}
RESTART_LEFT=${RESTART_LEFT:-30}  # the restart starts only with more seconds than this left
SCORE=${SCORE:-1}  # 0: score.py runs on a CPU afterwards, on the export that comes back
TE_CHECK=${TE_CHECK:-1}
W=/tmp/moe-steps
M=/mnt/megatron
rm -rf "$W"
mkdir -p "$OUT" "$W"
T0=$(date +%s)
say() { printf '[t+%ss] %s\n' "$(($(date +%s) - T0))" "$*" | tee -a "$W/summary.txt"; }
left() { echo $((BUDGET - $(date +%s) + T0)); }
pack() {
  local m
  for m in $MODELS; do
    mkdir -p "$W/$m"
    for r in e2e-$m e2e-$m-ref; do
      [ -d "$M/runs/$r" ] || continue
      mkdir -p "$W/$m/$r"
      cp "$M/runs/$r"/{train.log,launch.log,exit_status,runtime.txt} "$W/$m/$r/" 2>/dev/null
      cp "$M/runs/$r/ckpt/latest_checkpointed_iteration.txt" "$W/$m/$r/" 2>/dev/null
      (cd "$M/runs/$r" && find ckpt -type f -printf '%s %p\n' 2>/dev/null | sort -k2 >"$W/$m/$r/ckpt-files.txt")
    done
    [ -d "$M/exports/e2e-$m" ] && tar -czf "$W/$m/export.tar.gz" -C "$M/exports" "e2e-$m" 2>/dev/null
  done
  tar -czf "$OUT/moe-steps.tar.gz.part" -C "$W" . 2>/dev/null && mv "$OUT/moe-steps.tar.gz.part" "$OUT/moe-steps.tar.gz"
  cp "$W/summary.txt" "$OUT/summary.txt"
}
trap pack EXIT

export PYTHONUNBUFFERED=1 MASTER_ADDR=127.0.0.1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export MEGATRON_COMMIT=571370c829ca768fe37244f4e2e7f28d8accc4ab
say "machine: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader)"
rm -rf /tmp/site /tmp/te-site /opt/Megatron-LM /opt/bridge
mkdir -p /tmp/site /tmp/te-site /opt/bridge
tar -xJf "$D/site.tar.xz" -C /tmp/site & # transformers 5.8.1, modelopt, … (docs/bridge.md)
tar -xJf "$TE_DIR/te-sm90.tar.xz" -C /tmp/te-site & # TE 2.14.1 (tools/te_prepare.sh)
tar -xJf "$D/bridge-src.tar.xz" -C /opt/bridge &
cp -r .dev/megatron /opt/Megatron-LM && make -C /opt/Megatron-LM/megatron/core/datasets >"$W/make.log" 2>&1
wait
export PYTHONPATH=/tmp/site:/opt/bridge/src:/opt/Megatron-LM
mkdir -p /tmp/shim && printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" >/tmp/shim/python && chmod +x /tmp/shim/python
export PATH="/tmp/shim:$PATH"
TE_PRELOAD="$PWD/$TE_DIR/libte_cublaslt_compat.so"
mkdir -p "$M"
cp -r "$D/mnt/." "$M/"
say "setup done: $(python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' 2>&1 | tail -n 1)"

# shellcheck disable=SC2016
losses() { grep -o 'iteration *[0-9]*/ *[0-9]* .*lm loss: [0-9.E+-]*' "$1" | sed 's/ *| consumed.*lm loss:/ lm loss:/' | tr -s ' '; }

# errors FILE…: the last error lines of the logs of a step that failed
errors() { grep -h -E 'Error|error:|Traceback|FAIL' "$@" 2>/dev/null | grep -v -i warn | tail -n 4 | cut -c1-300 | tee -a "$W/summary.txt"; }

# chain MODEL PORT_BASE TE: the steps of one model, in a subshell of its own; TE=1: with Transformer
# Engine importable (and its cuBLASLt stand-in preloaded, tools/te_device.sh)
chain() {
  local m=$1 port=$2 pa pr rc
  local G="$D/e2e/e2e-$m" R="$M/runs/e2e-$m" log="$W/$m"
  mkdir -p "$log"
  if [ "$3" = 1 ]; then
    export PYTHONPATH="/tmp/te-site:$PYTHONPATH" LD_PRELOAD="$TE_PRELOAD"
  fi
  if [ "$3" = 1 ] && [ "$TE_CHECK" = 1 ]; then
    (python3 -c 'import transformer_engine, transformer_engine.pytorch; print("TE", transformer_engine.__version__)' >"$log/te-import.log" 2>&1
     say "$m: import transformer_engine.pytorch exit $?: $(tail -n 1 "$log/te-import.log")") &
  fi
  timeout 200 env MASTER_PORT=$((port + 9)) bash "$G/convert.sh" >"$log/convert.log" 2>&1
  rc=$?
  say "$m: convert.sh exit $rc: $(tail -n 1 "$log/convert.log")"
  [ "$rc" -eq 0 ] || { errors "$log/convert.log"; return 1; }
  # shellcheck disable=SC2016 # sed matches the literal $saved_after
  sed -e "s#^RUN_ROOT=.*#RUN_ROOT=$R-ref#" -e 's#--train-iters 20 #--train-iters 21 #' \
    -e 's#"$saved_after" \([!=]*\) 20 #"$saved_after" \1 21 #' "$G/launch.sh" >"$log/launch-ref.sh"
  grep -q -- '--train-iters 21 ' "$log/launch-ref.sh" || say "$m: the reference's --train-iters was not replaced"
  say "$m: reference and run start"
  (PET_MASTER_PORT=$((port + 1)) timeout "$(left)" bash "$log/launch-ref.sh" >"$log/launch-ref.out" 2>&1
   say "$m: reference exit $?") &
  pr=$!
  PET_MASTER_PORT=$((port + 2)) setsid bash "$G/launch.sh" >"$log/launch-1.out" 2>&1 &
  pa=$!
  for _ in $(seq 1 1200); do
    sleep 0.1
    grep -q "iteration *$STOP_AT/" "$R/train.log" 2>/dev/null && break
    kill -0 "$pa" 2>/dev/null || break
  done
  kill -TERM "$pa" 2>/dev/null && say "$m: SIGTERM to launch.sh after iteration $STOP_AT was logged"
  for _ in $(seq 1 900); do kill -0 "$pa" 2>/dev/null || break; sleep 0.2; done
  kill -0 "$pa" 2>/dev/null && { say "$m: launch.sh still running 180 s after SIGTERM: killed"; kill -KILL -- "-$pa"; }
  wait "$pa"
  say "$m: launch.sh exit $?; exit record: $(tr '\n' ' ' <"$R/exit_status" 2>/dev/null)"
  cp "$R/train.log" "$log/train-start1.log" 2>/dev/null
  grep -q "iteration *$STOP_AT/" "$R/train.log" 2>/dev/null || errors "$log/launch-1.out"
  if [ "$(left)" -gt "$RESTART_LEFT" ]; then
    PET_MASTER_PORT=$((port + 2)) timeout "$(left)" bash "$G/launch.sh" >"$log/launch-2.out" 2>&1
    say "$m: launch.sh again: exit $?; $(grep -o 'successfully loaded checkpoint from [^[]*.*at iteration *[0-9]*' "$R/train.log" | tail -n 1 | tr -s ' ')"
  else
    say "$m: no restart ($(left) s left); export.sh takes the stop's save"
  fi
  bash "$G/verify.sh" >"$log/verify.txt" 2>&1
  say "$m: verify.sh exit $?: $(tail -n 1 "$log/verify.txt")"
  grep FAIL "$log/verify.txt" | cut -c1-300 | tee -a "$W/summary.txt"
  wait "$pr"
  grep -q "iteration *21/" "$R-ref/train.log" 2>/dev/null || errors "$log/launch-ref.out"
  losses "$R/train.log" >"$log/losses-run.txt"
  losses "$R-ref/train.log" >"$log/losses-ref.txt"
  [ "$(left)" -gt 15 ] || { say "$m: no time left for the export"; return 1; }
  timeout "${EXPORT_S:-60}" bash "$G/export.sh" >"$log/export.log" 2>&1
  rc=$?
  say "$m: export.sh exit $rc: $(tail -n 1 "$log/export.log")"
  [ "$rc" -eq 0 ] || errors "$log/export.log"
  [ "$SCORE" = 1 ] || return 0
  timeout 60 python3 "$D/score.py" "$M/exports/e2e-$m" "$D/batches-$m.json" >"$log/score.json" 2>"$log/score.err"
  say "$m: score.py exit $?: $(cut -c1-400 "$log/score.json")"
  say "$m: reference iteration 21: $(grep ' 21/' "$log/losses-ref.txt")"
}

port=29500
for m in $MODELS; do
  te=0
  [ "$m" = deepseek-v3 ] && te=1
  chain "$m" "$port" "$te" &
  port=$((port + 20))
done
while [ -n "$(jobs -rp)" ]; do
  sleep 5
  pack
done
say "done"
