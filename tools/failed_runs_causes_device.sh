#!/usr/bin/env bash
# Produces the failed runs of issue #28 on one H200 (tests/fixtures/failed-runs/gpu-*, the kinds the
# doctor names since): each is a launch.sh compiled from tests/e2e/failed/<name>.yaml, run unmodified,
# with pretrain_gpt.py at the pinned commit.
#
#   bash tools/failed_runs_causes_device.sh GEN   GEN: `megatron-compile tests/e2e/failed -o GEN`, plus
#                                                 gpu-checkpoint-saved.yaml compiled into GEN as well
#
# Expects .megatron/ (Megatron-LM at the pinned commit, never committed) in the working directory.
# - gpu-checkpoint-model-mismatch: gpu-checkpoint-saved trains 4 iterations and saves; then the
#   mismatch spec (hidden 512, not 256) resumes the same run root.
# - gpu-token-beyond-vocab: a corpus written with Megatron's own IndexedDatasetBuilder, token ids
#   0-4999 for a model of vocabulary 1000 (no manifest: launch.sh cannot see it).
# - gpu-dataset-index-hang: 20 documents split 98,1,1 with evaluation on; the whole process group is
#   killed (SIGKILL) after a deadline, as a platform's time limit does.
# - gpu-killed-after-training: SIGTERM to launch.sh when rank 0 starts its last checkpoint save.
# - gpu-data-not-prepared: the prefix has no .bin/.idx (launch.sh's check refuses before torchrun).
# Writes $OUT/causes-runs.tar.gz (run roots without checkpoint contents, consoles, checkpoint
# listings) and $OUT/summary.txt.
set -uo pipefail

GEN=${1:?usage: failed_runs_causes_device.sh GEN}
OUT=${OUT:-/tmp/causes-out}
RUNS=/mnt/megatron/runs
DATA=/mnt/megatron/data
KEEP=/tmp/causes-keep
mkdir -p "$OUT" "$KEEP/consoles" "$KEEP/listings" "$RUNS" "$DATA"
start=$(date +%s)
note() { printf '+%ss %s\n' "$(($(date +%s) - start))" "$*" | tee -a "$KEEP/summary.txt"; }

# shellcheck source=tools/device_image.sh
source "$(dirname "${BASH_SOURCE[0]}")/device_image.sh"
make -C /opt/Megatron-LM/megatron/core/datasets >"$KEEP/prebuild.txt" 2>&1
note "machine: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader)"

# The corpora, written with Megatron's own builder (the .bin/.idx format it reads).
python - <<'PY' >>"$KEEP/summary.txt" 2>&1
import os, numpy, torch
from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder
def corpus(prefix, docs, high, seed):
    os.makedirs(os.path.dirname(prefix), exist_ok=True)
    rng = numpy.random.default_rng(seed)
    b = IndexedDatasetBuilder(prefix + ".bin", dtype=numpy.uint16)
    for _ in range(docs):
        ids = rng.integers(0, high, size=300, dtype=numpy.int64)
        b.add_document(torch.from_numpy(ids), [len(ids)])
    b.finalize(prefix + ".idx")
    print("corpus", prefix, docs, "documents, ids below", high)
corpus("/mnt/megatron/data/big-vocab/text_document", 200, 5000, 1)
corpus("/mnt/megatron/data/few-docs/text_document", 20, 1000, 2)
PY

# go NAME DEADLINE [-- PREFIX...]: GEN/NAME/launch.sh in its own session, the whole session killed
# at the deadline; console to $KEEP/consoles/NAME.txt
go() {
  local name=$1 deadline=$2 spec=${3:-$1}
  note "start $name"
  setsid bash "$GEN/$spec/launch.sh" >"$KEEP/consoles/$name.txt" 2>&1 &
  local pid=$! waited=0
  while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt "$deadline" ]; do
    sleep 1
    waited=$((waited + 1))
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL -- "-$pid" 2>/dev/null
    note "killed $name's process group at its deadline (${deadline}s)"
  fi
  wait "$pid"
  note "end $name: exit status $?"
}

export PET_MASTER_PORT=29700
(PET_MASTER_PORT=29701 go gpu-checkpoint-saved 75 && PET_MASTER_PORT=29702 go gpu-checkpoint-model-mismatch 75) &
p1=$!
(PET_MASTER_PORT=29703 go gpu-token-beyond-vocab 90) &
p2=$!
(PET_MASTER_PORT=29704 go gpu-dataset-index-hang 60) &
p3=$!
(PET_MASTER_PORT=29705 go gpu-data-not-prepared 30) &
p4=$!
(
  export PET_MASTER_PORT=29706
  note "start gpu-killed-after-training"
  bash "$GEN/gpu-killed-after-training/launch.sh" >"$KEEP/consoles/gpu-killed-after-training.txt" 2>&1 &
  pid=$!
  log=$RUNS/gpu-killed-after-training/train.log
  for _ in $(seq 1 450); do
    if grep -q "saving checkpoint at iteration *10 " "$log" 2>/dev/null; then
      kill -TERM "$pid"
      note "sent SIGTERM to gpu-killed-after-training's launch.sh at: $(grep -m1 'saving checkpoint at iteration *10 ' "$log")"
      break
    fi
    sleep 0.2
  done
  wait "$pid"
  note "end gpu-killed-after-training: exit status $?"
) &
p5=$!
wait "$p1" "$p2" "$p3" "$p4" "$p5"

for run in "$RUNS"/*/; do
  name=$(basename "$run")
  (cd "$run" && find . -path ./ckpt -prune -o -type f -print | sort) >"$KEEP/listings/$name-files.txt"
  if [ -d "$run/ckpt" ]; then
    (cd "$run/ckpt" && find . -type f -printf '%P %s\n' | sort) >"$KEEP/listings/$name-ckpt.txt"
  fi
done
tar -czf "$OUT/causes-runs.tar.gz" --exclude='*/ckpt/iter_*' -C / "./${RUNS#/}" -C /tmp ./causes-keep 2>>"$KEEP/summary.txt"
cp "$KEEP/summary.txt" "$OUT/summary.txt"
note "done"
