#!/usr/bin/env bash
# Issue 30 on an H200 without Transformer Engine: a tiny Qwen3-MoE through the generated steps of
# tests/e2e/e2e-qwen3-moe.yaml (compiled into $D/e2e), inside a small device budget:
#   convert.sh          CONVERTED=1: run it (Bridge import on the GPU, ~45 s); otherwise the
#                       checkpoint tools/bridge/convert.py --gloo made on a CPU is put in place first
#                       and convert.sh only shows it is not redone;
#   first_batch.py      the transformers loss on training's exact first global batch (background);
#   launch.sh           from the converted weights, SIGTERM after its iteration-10 checkpoint;
#   launch.sh again     continues its own checkpoint (when the time left allows: BUDGET seconds);
#   the run's last checkpoint comes back in $OUT/ckpt.tar.gz for export.sh on a CPU (export's job is
#   a CPU job), where transformers loads and scores the export (docs/bridge.md).
# The DeepSeek-V3-shaped model cannot run here: MLA needs TE at the pinned Megatron-LM.
#
#   D=.dev/h30 bash tools/bridge/moe_device.sh    ($D: whl/, bridge-src.tar.xz, tiny/, data/, e2e/,
#                                                  converted/; .dev/megatron: Megatron-LM, pinned)
set -u
D=${D:-.dev/h30}
OUT=${OUT:-/tmp/moe-out}
BUDGET=${BUDGET:-70}
W=/tmp/moe-steps
mkdir -p "$OUT" "$W"
summary="$OUT/summary.txt"
: >"$summary"
T0=$(date +%s)
say() { printf '[t+%ss] %s\n' "$(($(date +%s) - T0))" "$*" | tee -a "$summary"; }
R=/mnt/megatron/runs/e2e-qwen3-moe
pack() {
  (cd / && find tmp/moe-steps mnt/megatron/runs mnt/megatron/checkpoints -type f -size -5M \
    \( -name '*.log' -o -name '*.txt' -o -name '*.json' -o -name exit_status \) \
    2>/dev/null | tar -czf "$OUT/moe-steps.tar.gz" -T - 2>/dev/null)
  tar -czf "$OUT/ckpt.tar.gz" -C "$R" ckpt 2>/dev/null
}
trap 'pack' EXIT

export PYTHONUNBUFFERED=1 MASTER_ADDR=127.0.0.1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export MEGATRON_COMMIT=571370c829ca768fe37244f4e2e7f28d8accc4ab
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$D"/whl/*.whl || say "wheels FAILED"
rm -rf /opt/Megatron-LM /opt/bridge && cp -r .dev/megatron /opt/Megatron-LM && mkdir -p /opt/bridge
tar -xJf "$D/bridge-src.tar.xz" -C /opt/bridge
export PYTHONPATH=/tmp/site:/opt/bridge/src:/opt/Megatron-LM
mkdir -p /tmp/shim && printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" >/tmp/shim/python && chmod +x /tmp/shim/python
export PATH="/tmp/shim:$PATH"
mkdir -p /mnt/megatron/models /mnt/megatron/data/e2e-qwen3-moe /mnt/megatron/checkpoints/e2e-qwen3-moe
cp -r "$D/tiny/qwen3-moe" /mnt/megatron/models/tiny-qwen3-moe
cp "$D"/data/tiny-moe_text_document.* /mnt/megatron/data/e2e-qwen3-moe/
[ "${CONVERTED:-0}" = 1 ] || cp -r "$D/converted" /mnt/megatron/checkpoints/e2e-qwen3-moe/converted
say "setup done; $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader)"
G=$D/e2e/e2e-qwen3-moe
# shellcheck disable=SC2016
loss_lines() { grep -o 'iteration *[0-9]*/ *[0-9]* .*lm loss: [0-9.E+-]*' "$1" | sed 's/|.*lm loss:/ lm loss:/' | sed -n "$2"; }

timeout 120 bash "$G/convert.sh" >"$W/convert.log" 2>&1; say "convert.sh exit $?: $(tail -n 1 "$W/convert.log")"
# the exact pretrain_gpt.py flags of the generated launch.sh, from a recording torchrun
mkdir -p "$W/stub" && printf '#!/bin/sh\nprintf "%%s\\n" "$@" >%s/torchrun-args\n' "$W" >"$W/stub/torchrun" && chmod +x "$W/stub/torchrun"
sed "s#^RUN_ROOT=.*#RUN_ROOT=$W/dry#" "$G/launch.sh" >"$W/dry-launch.sh"
PATH="$W/stub:$PATH" bash "$W/dry-launch.sh" >"$W/dry.log" 2>&1
mapfile -t FLAGS < <(sed -n '3,$p' "$W/torchrun-args")
(timeout 100 python3 tools/bridge/first_batch.py /mnt/megatron/models/tiny-qwen3-moe "$W/first_batch.json" -- "${FLAGS[@]}" \
  --data-cache-path "$W/fb-cache" >"$W/first_batch.log" 2>&1) &
FB=$!
say "== launch.sh, SIGTERM after the iteration-10 checkpoint"
setsid bash "$G/launch.sh" >"$W/launch-1.log" 2>&1 &
PA=$!
for _ in $(seq 1 900); do
  sleep 0.1
  [ "$(cat "$R/ckpt/latest_checkpointed_iteration.txt" 2>/dev/null)" = 10 ] && break
  kill -0 "$PA" 2>/dev/null || break
done
kill -TERM -- "-$PA" 2>/dev/null; wait "$PA" 2>/dev/null
say "killed; exit record $(cat "$R/exit_status" 2>/dev/null); checkpoint $(cat "$R/ckpt/latest_checkpointed_iteration.txt" 2>/dev/null)"
loss_lines "$R/train.log" '1,3p' | tee -a "$summary"
cp "$R/train.log" "$W/train-1.log" 2>/dev/null
wait "$FB"; say "first_batch exit $?: $(tail -n 1 "$W/first_batch.log")"
left=$((BUDGET - $(date +%s) + T0))
if [ "$left" -gt 20 ]; then
  say "== launch.sh again (at most ${left} s)"
  timeout "$left" bash "$G/launch.sh" >"$W/launch-2.log" 2>&1; say "launch.sh exit $?"
  grep -o 'successfully loaded checkpoint from [^ ]*.*at iteration *[0-9]*' "$R/train.log" | sed 's/  */ /g' | tee -a "$summary"
  # shellcheck disable=SC2016 # sed's $p
  loss_lines "$R/train.log" '$p' | tee -a "$summary"
  bash "$G/verify.sh" >"$W/verify.txt" 2>&1; say "verify.sh exit $?: $(tail -n 1 "$W/verify.txt")"
else
  say "no time left for the restart (${left} s)"
fi
say "done"
