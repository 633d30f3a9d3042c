#!/bin/bash
# Device experiment (issue 17): HF tiny Llama -> Bridge v0.5.1 import -> pretrain_gpt.py from it
# (first loss vs the HF loss on the same tokens) -> kill -> resume -> Bridge export -> transformers.
# Run from the repository root on the device; everything it needs is under .bridge and .megatron.
set -u
B=$PWD/.bridge
O=${OUT:-/tmp/bridge-out}
W=/tmp/bridge-work
mkdir -p "$O" "$W"
exec > >(tee "$O/run.log") 2>&1
T0=$(date +%s)
t() { echo "[t+$(($(date +%s) - T0))s] $*"; }
export PYTHONUNBUFFERED=1 CUDA_DEVICE_MAX_CONNECTIONS=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export MASTER_ADDR=127.0.0.1

t "1. versions"
python3 -c "import sys,torch,transformers,tokenizers; print(sys.version.split()[0], torch.__version__, torch.version.cuda, 'transformers', transformers.__version__, 'tokenizers', tokenizers.__version__, torch.cuda.get_device_name(0))"
command -v make g++ python3-config

t "2. wheels -> /tmp/site, sources -> /opt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$B"/whl/*.whl || exit 1
rm -rf /opt/Megatron-LM /opt/bridge && cp -r .megatron /opt/Megatron-LM && mkdir -p /opt/bridge
tar -xJf "$B/bridge-src.tar.xz" -C /opt/bridge || exit 1
export PYTHONPATH=/tmp/site:/opt/bridge/src:/opt/Megatron-LM
make -s -C /opt/Megatron-LM/megatron/core/datasets || echo "HELPERS MAKE FAILED"

t "3. convert (Bridge import, 1 GPU, NCCL)"
timeout 90 python3 -m torch.distributed.run --nproc_per_node 1 --master_port 29511 \
  "$B/convert.py" "$B/tiny/model" "$W/converted" > "$O/convert.log" 2>&1
echo "convert rc=$?"; grep -E "provider:|converted|Error" "$O/convert.log" | tail -5
find "$W/converted" -maxdepth 2 | sort; cat "$W/converted/latest_checkpointed_iteration.txt"; echo

t "4. data: preprocess_data.py on the device"
mkdir -p "$W/data"
timeout 60 python3 /opt/Megatron-LM/tools/preprocess_data.py --input "$B/tiny/corpus.jsonl" \
  --output-prefix "$W/data/tiny" --tokenizer-type HuggingFaceTokenizer \
  --tokenizer-model "$B/tiny/model" --append-eod --workers 4 > "$W/prep.log" 2>&1
echo "preprocess rc=$?"; tail -1 "$W/prep.log"
if cmp -s "$W/data/tiny_text_document.bin" "$B/data/tiny_text_document.bin"; then
  echo "device .bin identical to the CPU-made one"; DATA=$W/data/tiny_text_document
elif [ -s "$W/data/tiny_text_document.idx" ]; then
  echo "device .bin DIFFERS from the CPU-made one"; DATA=$W/data/tiny_text_document
else
  echo "using the carried .bin/.idx"; DATA=$B/data/tiny_text_document
fi

ARCH=$(cat "$B/arch_flags.txt")
# shellcheck disable=SC2086
COMMON="$ARCH --tokenizer-type HuggingFaceTokenizer --tokenizer-model $B/tiny/model
  --seq-length 128 --micro-batch-size 16 --global-batch-size 16 --train-iters 40
  --lr 1e-4 --lr-decay-style constant --bf16 --data-path $DATA --split 100,0,0
  --eval-iters 0 --eval-interval 1000 --log-interval 1 --save-interval 20 --ckpt-format torch_dist
  --transformer-impl local --no-persist-layer-norm --no-rope-fusion --no-masked-softmax-fusion
  --no-gradient-accumulation-fusion --use-distributed-optimizer --data-cache-path $W/cache
  --num-workers 1 --seed 1234"
LAUNCH="--pretrained-checkpoint $W/converted --load $W/run/ckpt --save $W/run/ckpt --exit-on-missing-checkpoint"
echo "ARCH: $ARCH"

t "5. HF reference on the first global batch (background)"
# shellcheck disable=SC2086
(timeout 150 python3 "$B/first_batch.py" "$B/tiny/model" "$O/first_batch.json" -- $COMMON \
  --data-cache-path "$W/cache_fb" > "$W/first_batch.log" 2>&1; echo "first_batch rc=$?" >> "$W/first_batch.log") &
FB=$!

t "6. train A: first start (pretrained weights), killed after the iteration-20 checkpoint"
# shellcheck disable=SC2086
setsid python3 -m torch.distributed.run --nproc_per_node 1 --master_port 29512 \
  /opt/Megatron-LM/pretrain_gpt.py $COMMON $LAUNCH > "$O/train_a.log" 2>&1 &
PA=$!
for _ in $(seq 1 120); do
  sleep 1
  [ "$(cat "$W/run/ckpt/latest_checkpointed_iteration.txt" 2>/dev/null)" = 20 ] && break
  kill -0 "$PA" 2>/dev/null || break
done
sleep 2
t "killing process group $PA"; kill -9 -- "-$PA" 2>/dev/null; wait "$PA" 2>/dev/null
echo "tracker after kill: $(cat "$W/run/ckpt/latest_checkpointed_iteration.txt" 2>/dev/null)"
grep -E "finetune|loading|iteration +1/|iteration +2/|iteration +20/|iteration +21/|Error|error" "$O/train_a.log" | head -20

CKPT=$W/run/ckpt
if ! grep -qE "iteration +1/" "$O/train_a.log"; then
  echo "TRAIN A NEVER REACHED ITERATION 1: skipping B; exporting the converted checkpoint instead"
  tail -40 "$O/train_a.log"; CKPT=$W/converted
else
t "7. train B: same command again, resumes from its own checkpoint"
# shellcheck disable=SC2086
timeout 100 python3 -m torch.distributed.run --nproc_per_node 1 --master_port 29513 \
  /opt/Megatron-LM/pretrain_gpt.py $COMMON $LAUNCH > "$O/train_b.log" 2>&1
echo "train B rc=$?"
grep -E "loading|iteration +2[01]/|iteration +40/|Error|error" "$O/train_b.log" | head -12
ls "$W/run/ckpt"; cat "$W/run/ckpt/latest_checkpointed_iteration.txt"; echo
fi
wait "$FB"; grep -E '^\{|rc=|Error' "$W/first_batch.log" | tail -3

t "8. export (Bridge API, CPU gloo) and score with transformers"
timeout 80 python3 "$B/export.py" "$B/tiny/model" "$CKPT" "$W/export" \
  --tokens "$B/tiny/eval_tokens.json" > "$O/export.log" 2>&1
echo "export rc=$?"; grep -E '^\{' "$O/export.log"

t "9. the export loads in the device's own transformers (no PYTHONPATH)"
env -u PYTHONPATH python3 - "$W/export/provider" "$B/tiny/eval_tokens.json" <<'EOF' 2>&1 | grep -v -i warn
import json, sys, torch, transformers
from transformers import AutoModelForCausalLM
m = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32).eval()
rows = torch.tensor(json.load(open(sys.argv[2])))
with torch.no_grad():
    lg = m(input_ids=rows[:, :-1]).logits.float()
loss = torch.nn.functional.cross_entropy(lg.reshape(-1, lg.shape[-1]), rows[:, 1:].reshape(-1)).item()
print(json.dumps({"device_transformers": transformers.__version__, "export_eval_loss": loss}))
EOF

t "10. Megatron's own model (GPU) on the eval rows from the trained checkpoint"
timeout 60 python3 "$B/mlm_check.py" "$CKPT" "$B/tiny/eval_tokens.json" "$B/arch_flags.txt" \
  --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$B/tiny/model" --seq-length 128 \
  --micro-batch-size 8 --global-batch-size 8 --train-iters 1 --lr 1e-4 --bf16 --transformer-impl local \
  --no-persist-layer-norm --no-rope-fusion --no-masked-softmax-fusion --no-gradient-accumulation-fusion \
  > "$W/mlm_check.log" 2>&1
echo "mlm_check rc=$?"; grep -E '^\{|missing|Error' "$W/mlm_check.log" | tail -3

if [ $(($(date +%s) - T0)) -lt 270 ]; then
  t "10b. the v0.5.1 CLI import as documented (expected to need TE here)"
  timeout 45 python3 -m torch.distributed.run --nproc_per_node 1 --master_port 29514 \
    "$B/convert_checkpoints.py" import --hf-model "$B/tiny/model" --megatron-path "$W/cli_import" \
    --torch-dtype bfloat16 > "$W/cli_import.log" 2>&1
  echo "cli import rc=$?"; grep -E "Error|Successfully" "$W/cli_import.log" | tail -3
fi

t "11. summary"
python3 - "$O" <<'EOF'
import json, re, sys, os
o = sys.argv[1]
def iters(path):
    pat = re.compile(r"iteration\s+(\d+)/\s*\d+ \|.*?lm loss: ([0-9.Ee+-]+)")
    return [(int(a), float(b)) for a, b in pat.findall(open(path).read())] if os.path.exists(path) else []
a, b = iters(f"{o}/train_a.log"), iters(f"{o}/train_b.log")
fb = json.load(open(f"{o}/first_batch.json")) if os.path.exists(f"{o}/first_batch.json") else {}
s = {"train_a_first": a[:3], "train_a_last": a[-2:], "train_b_first": b[:2], "train_b_last": b[-1:],
     "hf_first_batch_fp32": fb.get("hf_loss_float32"), "hf_first_batch_bf16": fb.get("hf_loss_bfloat16")}
if a and fb:
    s["first_loss_rel_diff"] = abs(a[0][1] - fb["hf_loss_float32"]) / fb["hf_loss_float32"]
tb = open(f"{o}/train_b.log").read() if os.path.exists(f"{o}/train_b.log") else ""
s["train_b_loaded"] = [l.strip() for l in tb.splitlines() if "loading" in l.lower() and "checkpoint" in l.lower()][:3]
json.dump(s, open(f"{o}/summary.json", "w"), indent=1)
print(json.dumps(s, indent=1))
EOF
tar -czf "$O/results.tgz" -C "$W" export/provider first_batch.log mlm_check.log prep.log cli_import.log \
  converted/latest_checkpointed_iteration.txt run/ckpt/latest_checkpointed_iteration.txt 2>/dev/null
ls -la "$O"; t "done"
sleep 1
