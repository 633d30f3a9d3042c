#!/usr/bin/env bash
# The new steps for real on an H200 (docs/e2e.md, issues 16 and 17), through the generated scripts of
# tests/e2e/e2e-prepare.yaml and tests/e2e/e2e-init.yaml compiled into .e2e/:
#   A: prepare.sh (twice: the second skips), verify-prepare.sh, launch.sh (60 iterations from random
#      weights on the prepared data), verify.sh;
#   B: convert.sh (twice: the second is not redone), prepare.sh with the model's tokenizer, the
#      transformers loss on training's first batch (tools/bridge/first_batch.py), launch.sh killed
#      with SIGTERM after its iteration-100 checkpoint, launch.sh again (it continues), verify.sh,
#      export.sh and transformers loading the export.
# Expects .megatron/ (Megatron-LM at the pinned commit) and .bridge/ (Bridge v0.5.1's source and
# wheels, the tiny model and corpus: docs/bridge.md), never committed. Writes $OUT/summary.txt and
# $OUT/e2e-steps.tar.gz (logs and records, no weights).
#
#   bash tools/e2e_steps_device.sh [PARTS]     PARTS: A, B or AB (the default)
set -u
PARTS=${1:-AB}
OUT=${OUT:-/tmp/e2e-out}
W=/tmp/e2e-steps
mkdir -p "$OUT" "$W"
summary="$OUT/summary.txt"
: >"$summary"
T0=$(date +%s)
say() { printf '[t+%ss] %s\n' "$(($(date +%s) - T0))" "$*" | tee -a "$summary"; }
pack() {
  # the logs and records only (text under 5 MB): weights, datasets and caches would not come back
  (cd / && find tmp/e2e-steps mnt/megatron/runs mnt/megatron/data mnt/megatron/exports -type f -size -5M \
    \( -name '*.log' -o -name '*.txt' -o -name '*.json' -o -name '*.manifest' -o -name exit_status \) \
    2>/dev/null | tar -czf "$OUT/e2e-steps.tar.gz" -T - 2>/dev/null)
}
trap 'pack' EXIT

export PYTHONUNBUFFERED=1 MASTER_ADDR=127.0.0.1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export MEGATRON_COMMIT=571370c829ca768fe37244f4e2e7f28d8accc4ab
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .bridge/whl/*.whl || say "wheels FAILED"
rm -rf /opt/Megatron-LM /opt/bridge && cp -r .megatron /opt/Megatron-LM && mkdir -p /opt/bridge
tar -xJf .bridge/bridge-src.tar.xz -C /opt/bridge
export PYTHONPATH=/tmp/site:/opt/bridge/src:/opt/Megatron-LM
# `python` is the image's interpreter: a wrapper, not a symlink (a venv is found from its own path)
mkdir -p /tmp/shim && printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" >/tmp/shim/python && chmod +x /tmp/shim/python
export PATH="/tmp/shim:$PATH"
mkdir -p /mnt/megatron/corpus /mnt/megatron/models
cp .bridge/tiny/corpus.jsonl /mnt/megatron/corpus/tiny.jsonl
cp -r .bridge/tiny/model /mnt/megatron/models/tiny-llama
say "setup done; $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader)"

G=.e2e
# shellcheck disable=SC2016 # the sed scripts '1p;$p' and '$p' are meant literally
loss_lines() { grep -o 'iteration *[0-9]*/ *[0-9]* .*lm loss: [0-9.E+-]*' "$1" | sed 's/|.*lm loss:/ lm loss:/' | sed -n "$2"; }

if [[ $PARTS == *A* ]]; then
say "== A: prepare.sh"
bash "$G/e2e-prepare/prepare.sh" >"$W/a-prepare-1.log" 2>&1; say "prepare.sh exit $?: $(tail -n 1 "$W/a-prepare-1.log")"
bash "$G/e2e-prepare/prepare.sh" >"$W/a-prepare-2.log" 2>&1; say "again, exit $?: $(grep -c 'prepared already' "$W/a-prepare-2.log") skipped"
bash "$G/e2e-prepare/verify-prepare.sh" >"$W/a-verify-prepare.txt" 2>&1; say "verify-prepare.sh exit $?: $(tail -n 1 "$W/a-verify-prepare.txt")"
cat /mnt/megatron/data/e2e-prepare/tiny_text_document.manifest >>"$summary"
ls -l /mnt/megatron/data/e2e-prepare/ >>"$summary"
say "== A: launch.sh (60 iterations)"
timeout 150 bash "$G/e2e-prepare/launch.sh" >"$W/a-launch.log" 2>&1; say "launch.sh exit $?"
# shellcheck disable=SC2016
loss_lines /mnt/megatron/runs/e2e-prepare/train.log '1p;$p' | tee -a "$summary"
grep -m1 'max allocated' /mnt/megatron/runs/e2e-prepare/train.log | cut -c1-200 >>"$summary"
bash "$G/e2e-prepare/verify.sh" >"$W/a-verify.txt" 2>&1; say "verify.sh exit $?: $(tail -n 1 "$W/a-verify.txt")"

fi

if [[ $PARTS == *B* ]]; then
say "== B: convert.sh"
timeout 120 bash "$G/e2e-init/convert.sh" >"$W/b-convert-1.log" 2>&1; say "convert.sh exit $?: $(tail -n 1 "$W/b-convert-1.log")"
bash "$G/e2e-init/convert.sh" >"$W/b-convert-2.log" 2>&1; say "again, exit $?: $(tail -n 1 "$W/b-convert-2.log")"
bash "$G/e2e-init/prepare.sh" >"$W/b-prepare.log" 2>&1; say "prepare.sh exit $?"
bash "$G/e2e-init/verify-prepare.sh" >"$W/b-verify-prepare.txt" 2>&1; say "verify-prepare.sh exit $?: $(tail -n 1 "$W/b-verify-prepare.txt")"
# the exact pretrain_gpt.py flags of the generated launch.sh: run a copy with a recording torchrun
mkdir -p "$W/stub" && printf '#!/bin/sh\nprintf "%%s\\n" "$@" >%s/torchrun-args\n' "$W" >"$W/stub/torchrun" && chmod +x "$W/stub/torchrun"
sed "s#^RUN_ROOT=.*#RUN_ROOT=$W/dry#" "$G/e2e-init/launch.sh" >"$W/dry-launch.sh"
PATH="$W/stub:$PATH" bash "$W/dry-launch.sh" >"$W/dry.log" 2>&1
mapfile -t FLAGS < <(sed -n '3,$p' "$W/torchrun-args")
(timeout 150 python3 tools/bridge/first_batch.py /mnt/megatron/models/tiny-llama "$W/first_batch.json" -- "${FLAGS[@]}" \
  --data-cache-path "$W/fb-cache" >"$W/first_batch.log" 2>&1) &
FB=$!
say "== B: launch.sh, SIGTERM after the iteration-100 checkpoint"
setsid bash "$G/e2e-init/launch.sh" >"$W/b-launch-1.log" 2>&1 &
PA=$!
for _ in $(seq 1 1500); do
  sleep 0.1
  [ "$(cat /mnt/megatron/runs/e2e-init/ckpt/latest_checkpointed_iteration.txt 2>/dev/null)" = 100 ] && break
  kill -0 "$PA" 2>/dev/null || break
done
kill -TERM -- "-$PA" 2>/dev/null; wait "$PA" 2>/dev/null
say "killed; exit record $(cat /mnt/megatron/runs/e2e-init/exit_status 2>/dev/null); checkpoint $(cat /mnt/megatron/runs/e2e-init/ckpt/latest_checkpointed_iteration.txt 2>/dev/null)"
loss_lines /mnt/megatron/runs/e2e-init/train.log '1p' | tee -a "$summary"
say "== B: launch.sh again"
timeout 150 bash "$G/e2e-init/launch.sh" >"$W/b-launch-2.log" 2>&1; say "launch.sh exit $?"
grep -o 'successfully loaded checkpoint from [^ ]*.*at iteration *[0-9]*' /mnt/megatron/runs/e2e-init/train.log | sed 's/  */ /g' | tee -a "$summary"
# shellcheck disable=SC2016
loss_lines /mnt/megatron/runs/e2e-init/train.log '$p' | tee -a "$summary"
bash "$G/e2e-init/verify.sh" >"$W/b-verify.txt" 2>&1; say "verify.sh exit $?: $(tail -n 1 "$W/b-verify.txt")"
grep -v '^ok' "$W/b-verify.txt" | tee -a "$summary"
wait "$FB"; say "first_batch exit $?: $(tail -n 1 "$W/first_batch.log")"
say "== B: export.sh"
timeout 120 bash "$G/e2e-init/export.sh" >"$W/b-export.log" 2>&1; say "export.sh exit $?: $(tail -n 1 "$W/b-export.log")"
timeout 60 python3 - <<'PY' 2>&1 | tail -n 3 | tee -a "$summary"
import json, torch
from transformers import AutoModelForCausalLM
m = AutoModelForCausalLM.from_pretrained("/mnt/megatron/exports/e2e-init", dtype=torch.float32).eval()
rows = torch.tensor(json.load(open(".bridge/tiny/eval_tokens.json")))
with torch.no_grad():
    logits = m(input_ids=rows[:, :-1]).logits.float()
loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), rows[:, 1:].reshape(-1)).item()
print("transformers loaded the export:", type(m).__name__, "loss on the held-out rows", round(loss, 6))
PY
fi
say "done"
