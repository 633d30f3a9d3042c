#!/usr/bin/env bash
# docs/stop-resume.md's runs on one GPU, in one command: tests/e2e/stop-resume.yaml compiled once per
# run root (GEN/<root>/stop-resume/), run as the engine would, then verify.sh on each root.
#
#   tools/stop_resume_device.sh GEN MEGATRON_SRC
#
#   ref        the uninterrupted run, 200 iterations                     (/mnt/megatron/runs/stop-ref)
#   stop       the same run beside it, SIGTERM at a random time after iteration 60 (/mnt/megatron/runs/stop-resume)
#   restart    launch.sh again on the stopped root: it resumes and runs to the end
#   corrupt    a copy of the stopped root whose latest_checkpointed_iteration.txt holds garbage
#   notracker  a copy without latest_checkpointed_iteration.txt
#   damaged    a copy whose last save was cut short (.metadata and metadata.json gone, the shard halved)
# then tools/stop_resume_compare.py: the restarted runs' losses against the uninterrupted run's.
# Writes its summary and the run roots' logs (no checkpoints) to $OUT.
set -uo pipefail
GEN=$1
MEGATRON_SRC=$2
OUT=${OUT:-/tmp/stop-out}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOGS=/tmp/stop-logs  # each launch's console output, into the tarball (the device returns 8 files at most)
mkdir -p "$OUT" "$LOGS"
summary="$OUT/summary.txt"
: >"$summary"
say() { printf '%s\n' "$*" | tee -a "$summary"; }
now() { date +%s.%N; }
since() { python -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }

# What the image provides (tools/device_image.sh): Megatron at megatron.root, its commit, python.
rm -rf /opt/Megatron-LM
cp -r "$MEGATRON_SRC" /opt/Megatron-LM
export MEGATRON_COMMIT=571370c829ca768fe37244f4e2e7f28d8accc4ab PYTHONPATH=/opt/Megatron-LM PYTHONUNBUFFERED=1
if ! command -v python >/dev/null; then
  mkdir -p /tmp/shim
  ln -sf "$(command -v python3)" /tmp/shim/python
  export PATH="/tmp/shim:$PATH"
fi
say "## machine"
say "$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader)"
say "$(python -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)')"
say "tensorboard: $(python -c 'import tensorboard; print(tensorboard.__version__)' 2>&1 | tail -n 1)"
# The dataset helper once, before two launches build it at the same time.
make -C /opt/Megatron-LM/megatron/core/datasets >"$LOGS/make.log" 2>&1 || say "make failed"

R=/mnt/megatron/runs
rm -rf "$R/stop-ref" "$R/stop-resume" "$R/stop-corrupt" "$R/stop-notracker" "$R/stop-damaged"
mkdir -p "$R"
launch() { printf '%s/%s/stop-resume/launch.sh' "$GEN" "$1"; }

say ""
say "## ref and stop, side by side"
t0=$(now)
PET_MASTER_PORT=29501 bash "$(launch ref)" >"$LOGS/ref.out" 2>&1 &
ref_pid=$!
PET_MASTER_PORT=29502 bash "$(launch stop)" >"$LOGS/stop.out" 2>&1 &
stop_pid=$!
until grep -q ' iteration *60/' "$R/stop-resume/train.log" 2>/dev/null; do
  kill -0 "$stop_pid" 2>/dev/null || break
  sleep 0.02
done
delay=$(python -c 'import random; print(f"{random.uniform(0, 1.5):.3f}")')
sleep "$delay"
before=$(grep -o ' iteration *[0-9]*/' "$R/stop-resume/train.log" | tail -n 1 | tr -dc 0-9)
t_signal=$(now)
kill -TERM "$stop_pid"
wait "$stop_pid"
rc=$?
say "stop: SIGTERM to launch.sh ${delay} s after iteration 60 was logged (the last logged iteration then: $before, $(since "$t0") s after the start)"
say "stop: launch.sh exit status $rc, $(since "$t_signal") s from the signal to the exit"
say "stop: exit record: $(tr '\n' '|' <"$R/stop-resume/exit_status")"
say "stop: tracker $(cat "$R/stop-resume/ckpt/latest_checkpointed_iteration.txt"); saves: $(cd "$R/stop-resume/ckpt" && echo iter_*)"
say "stop: $(grep -a -m1 'exiting program after receiving SIGTERM' "$R/stop-resume/train.log" | cut -c1-200)"
wait "$ref_pid"
say "ref: launch.sh exit status $? after $(since "$t0") s"
N=$(cat "$R/stop-resume/ckpt/latest_checkpointed_iteration.txt")

# The damaged copies of the stopped root, before the restart changes it.
cp -a "$R/stop-resume" "$R/stop-corrupt"
printf 'garbage\n' >"$R/stop-corrupt/ckpt/latest_checkpointed_iteration.txt"
cp -a "$R/stop-resume" "$R/stop-notracker"
rm "$R/stop-notracker/ckpt/latest_checkpointed_iteration.txt"
cp -a "$R/stop-resume" "$R/stop-damaged"
last=$(printf '%s/stop-damaged/ckpt/iter_%07d' "$R" "$N")
rm -f "$last/.metadata" "$last/metadata.json"
for shard in "$last"/*.distcp; do
  truncate -s $(($(stat -c %s "$shard") / 2)) "$shard"
done
say "damaged: iter_$(printf %07d "$N") now holds: $(find "$last" -mindepth 1 -printf '%f %s B, ')"

say ""
say "## restart, damaged, side by side; corrupt and notracker"
t0=$(now)
PET_MASTER_PORT=29503 bash "$(launch stop)" >"$LOGS/restart.out" 2>&1 &
restart_pid=$!
PET_MASTER_PORT=29504 bash "$(launch damaged)" >"$LOGS/damaged.out" 2>&1 &
damaged_pid=$!
for name in corrupt notracker; do
  starts=$(grep -c 'torchrun starts' "$R/stop-$name/launch.log")
  bash "$(launch "$name")" >"$LOGS/$name.out" 2>&1
  say "$name: launch.sh exit status $?; torchrun started again: $(($(grep -c 'torchrun starts' "$R/stop-$name/launch.log") - starts)) times"
  say "$name: $(tail -n 1 "$LOGS/$name.out")"
done
wait "$restart_pid"
say "restart: launch.sh exit status $? after $(since "$t0") s; $(grep -a -o 'successfully loaded checkpoint from .* at iteration *[0-9]*' "$R/stop-resume/train.log" | sed 's/  */ /g')"
wait "$damaged_pid"
say "damaged: launch.sh exit status $? after $(since "$t0") s; $(grep -a 'incomplete' "$R/stop-damaged/launch.log" | cut -c1-300)"
say "damaged: $(grep -a -o 'successfully loaded checkpoint from .* at iteration *[0-9]*' "$R/stop-damaged/train.log" | sed 's/  */ /g')"

for name in ref resume corrupt notracker damaged; do
  gen=$name
  [ "$name" = resume ] && gen=stop
  say ""
  say "## verify.sh stop-$name"
  bash "$GEN/$gen/stop-resume/verify.sh" 2>&1 | tee -a "$summary"
done

say ""
say "## the restarted run against the uninterrupted one"
python "$HERE/stop_resume_compare.py" "$R/stop-ref" "$R/stop-resume" 5 2>&1 | tee -a "$summary"
say "## the damaged run (fallback) against the uninterrupted one"
python "$HERE/stop_resume_compare.py" "$R/stop-ref" "$R/stop-damaged" 5 2>&1 | tee -a "$summary"

# The run roots without their checkpoints: logs, records, the checkpoints' listing, TensorBoard.
for name in ref resume corrupt notracker damaged; do
  (cd "$R/stop-$name" && find ckpt -printf '%p %s\n' 2>/dev/null | sort >ckpt-listing.txt)
done
cp -r "$LOGS" "$R/console"
tar -C "$R" -czf "$OUT/runs.tgz" --exclude='*.distcp' --exclude='*.pt' --exclude='.metadata' \
  stop-ref stop-resume stop-corrupt stop-notracker stop-damaged console
