#!/usr/bin/env bash
# Produces the GPU part of the failed-run corpus (tests/fixtures/failed-runs/gpu-*) on one H200:
# each scenario is a launch.sh compiled from tests/e2e/failed/<name>.yaml, run unmodified as the
# AIStudio job would run it, with ONE thing broken (in the spec, or in what the worker provides).
#
#   bash tools/failed_runs_device.sh GEN [NAMES]   GEN: `megatron-compile tests/e2e/failed -o GEN`
#
# NAMES (optional; comma- or space-separated scenario names, e.g. gpu-no-compiler) runs only those;
# without it, every scenario runs.
# Expects .megatron/ (Megatron-LM at the pinned commit, never committed) in the working directory.
# The scenarios run at once on the one GPU (each is tiny), the out-of-memory one alone afterwards;
# each has a deadline. Writes $OUT/failed-runs.tar.gz: every run root (logs and records, no
# checkpoints), each worker's console, each run root's checkpoint listing, and summary.txt.
set -uo pipefail

GEN=${1:?usage: failed_runs_device.sh GEN [NAMES]}
IFS=', ' read -ra ONLY <<<"${2:-}"
for name in "${ONLY[@]}"; do
  [ -f "$GEN/$name/launch.sh" ] || { echo "failed_runs_device.sh: no scenario $name in $GEN" >&2; exit 2; }
done
OUT=${OUT:-/tmp/failed-runs-out}
COMMIT=571370c829ca768fe37244f4e2e7f28d8accc4ab
WRONG_COMMIT=0123456789abcdef0123456789abcdef01234567
RUNS=/mnt/megatron/runs
KEEP=/tmp/failed-keep
mkdir -p "$OUT" "$KEEP/consoles" "$KEEP/listings"
start=$(date +%s)
note() { printf '+%ss %s\n' "$(($(date +%s) - start))" "$*" | tee -a "$KEEP/summary.txt"; }

# What the image provides: the source at megatron.root, MEGATRON_COMMIT and PYTHONPATH set; the
# dataset helper built once, so that the scenarios' own `make` finds nothing to do (they run at once).
rm -rf /opt/Megatron-LM /opt/Megatron-LM-nocc "$RUNS"
cp -r .megatron /opt/Megatron-LM
cp -r .megatron /opt/Megatron-LM-nocc
export MEGATRON_COMMIT=$COMMIT PYTHONPATH=/opt/Megatron-LM
mkdir -p /tmp/shim "$RUNS"
if ! command -v python >/dev/null; then
  ln -sf "$(command -v python3)" /tmp/shim/python
fi
export PATH="/tmp/shim:$PATH"
make -C /opt/Megatron-LM/megatron/core/datasets >"$KEEP/prebuild.txt" 2>&1
note "machine: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader)"
note "$(python -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())')"

# A PATH without a C++ compiler: links to everything else on PATH. The Python interpreters are small
# scripts that exec the real one by its path on PATH (a link elsewhere would lose the venv beside it,
# and pybind11 with it); the scenario also unsets CXX/CC/CXXFLAGS (see below), so that make falls
# back to its default g++ and finds none.
mkdir -p /tmp/nocc
IFS=: read -ra path_dirs <<<"$PATH"
for d in "${path_dirs[@]}"; do
  for f in "$d"/*; do
    name=${f##*/}
    case "$name" in
      g++* | c++* | gcc* | cc | clang* | *-g++* | *-gcc* | *-c++*) continue ;;
    esac
    if [ -x "$f" ] && [ ! -e "/tmp/nocc/$name" ]; then
      case "$name" in
        python | python3 | python3.[0-9] | python3.[0-9][0-9])
          real=$f
          # /tmp/shim's python is our own link to python3: exec what it points at, by that path
          if [ "$d" = /tmp/shim ] && [ -L "$f" ]; then real=$(readlink "$f"); fi
          printf '#!/bin/sh\nexec "%s" "$@"\n' "$real" >"/tmp/nocc/$name"
          chmod +x "/tmp/nocc/$name"
          ;;
        *) ln -s "$f" "/tmp/nocc/$name" ;;
      esac
    fi
  done
done
note "no-compiler PATH: python3 runs $(tail -n 1 /tmp/nocc/python3 2>/dev/null); the image has CXX=${CXX:-} CC=${CC:-} CXXFLAGS=${CXXFLAGS:-} (the scenario unsets them)"
# An nvidia-smi that lists two GPUs on a one-GPU worker.
mkdir -p /tmp/two-gpus
printf '#!/usr/bin/env bash\nprintf "0\\n1\\n"\n' >/tmp/two-gpus/nvidia-smi
chmod +x /tmp/two-gpus/nvidia-smi

pids=()
names=()
# want NAME: whether NAME is to run (every scenario, unless NAMES picked some)
want() {
  [ "${#ONLY[@]}" -eq 0 ] && return 0
  local n
  for n in "${ONLY[@]}"; do
    [ "$n" = "$1" ] && return 0
  done
  return 1
}
# go NAME WORKER DEADLINE [ENV=VALUE...] [-- PREFIX...]: GEN/NAME/launch.sh in the background as
# worker WORKER, under a deadline (s), console to $KEEP/consoles/NAME-WORKER.txt (nothing unless wanted)
go() {
  local name=$1 worker=$2 deadline=$3 envs=() prefix=()
  want "$name" || return 0
  shift 3
  while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
    envs+=("$1")
    shift
  done
  [ "${1:-}" = -- ] && shift
  prefix=("$@")
  note "start $name worker $worker${envs[*]:+ with ${envs[*]}}${prefix[*]:+ under ${prefix[*]}}"
  (
    rc=0
    timeout -s KILL "$deadline" env "${envs[@]}" "${prefix[@]}" bash "$GEN/$name/launch.sh" \
      >"$KEEP/consoles/$name-$worker.txt" 2>&1 || rc=$?
    note "end $name worker $worker: exit status $rc"
  ) &
  pids+=($!)
  names+=("$name")
}

port=29600
next_port() { port=$((port + 7)); }

go gpu-healthy 0 140 PET_MASTER_PORT=$port; next_port
go gpu-wrong-commit 0 140 PET_MASTER_PORT=$port MEGATRON_COMMIT=$WRONG_COMMIT; next_port
go gpu-megatron-missing 0 60 PET_MASTER_PORT=$port; next_port
go gpu-not-importable 0 60 PET_MASTER_PORT=$port -- env -u PYTHONPATH; next_port
go gpu-no-compiler 0 60 PET_MASTER_PORT=$port PATH=/tmp/nocc -- env -u CXX -u CC -u CXXFLAGS; next_port
go gpu-too-many-gpus 0 60 PET_MASTER_PORT=$port; next_port
go gpu-lying-gpu-count 0 120 PET_MASTER_PORT=$port PATH="/tmp/two-gpus:$PATH"; next_port
go gpu-nan-bf16 0 140 PET_MASTER_PORT=$port; next_port
go gpu-nan-fp16 0 140 PET_MASTER_PORT=$port; next_port
go gpu-weights-not-loaded 0 140 PET_MASTER_PORT=$port; next_port
go gpu-killed-term 0 150 PET_MASTER_PORT=$port -- timeout -s TERM 95; next_port
go gpu-killed-kill 0 150 PET_MASTER_PORT=$port -- timeout -s KILL 95; next_port
go gpu-second-worker-missing 0 120 WORLD_SIZE=2 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
  PET_RDZV_CONF=join_timeout=40,timeout=40; next_port
for rank in 0 1; do
  go gpu-same-gpu-twice "$rank" 140 WORLD_SIZE=2 RANK=$rank MASTER_ADDR=127.0.0.1 MASTER_PORT=$port CUDA_VISIBLE_DEVICES=0
done
next_port
for pid in "${pids[@]}"; do
  wait "$pid"
done

# Alone on the GPU: the layout that does not fit (it takes most of the GPU before it fails).
pids=()
go gpu-oom 0 240 PET_MASTER_PORT=$port
for pid in "${pids[@]}"; do
  wait "$pid"
done

for run in "$RUNS"/*/; do
  name=$(basename "$run")
  (cd "$run" && find . -path ./ckpt -prune -o -type f -print | sort) >"$KEEP/listings/$name-files.txt"
  if [ -d "$run/ckpt" ]; then
    (cd "$run/ckpt" && find . -type f -printf '%P %s\n' | sort) >"$KEEP/listings/$name-ckpt.txt"
    cp "$run/ckpt/latest_checkpointed_iteration.txt" "$KEEP/listings/$name-latest.txt" 2>/dev/null
  fi
  note "$name: $(tr '\n' ' ' <"$KEEP/listings/$name-files.txt")"
done
for name in gpu-nan-bf16 gpu-nan-fp16 gpu-weights-not-loaded gpu-healthy; do
  grep -h -o 'iteration *[0-9]*/ *[0-9]* .*lm loss: [^|]*|.*nan iterations: *[0-9]*' "$RUNS/$name/train.log" 2>/dev/null |
    sed 's/consumed samples.*learning rate/... learning rate/' | head -n 4 | while IFS= read -r line; do note "$name: $line"; done
done
tar -czf "$OUT/failed-runs.tar.gz" --exclude='*/ckpt' --exclude='*/tensorboard' \
  -C / "./${RUNS#/}" -C /tmp ./failed-keep 2>>"$KEEP/summary.txt"
cp "$KEEP/summary.txt" "$OUT/summary.txt"
note "done"
