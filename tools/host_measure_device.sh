#!/usr/bin/env bash
# Issue 26: the host's speed where the runs ran. Compiled single-GPU launch commands (tests/e2e/mem-*.yaml,
# Megatron's local layers, no Transformer Engine or Apex) measured back to back on one lent H200 host,
# with tools/microbench.py's launch figures (a bare launch, an autograd op, a tiny Linear's forward and
# backward) taken before and after them and the host's CPU recorded. Run from the repository root on the
# device; not part of CI.
#
#   GEN=.dev/hc/gen bash tools/host_measure_device.sh NAME...
#
# Expects GEN/NAME/launch.sh for each NAME (`python -m compiler tests/e2e/NAME.yaml -o GEN`) and
# .dev/megatron (Megatron-LM's runtime subset at the pinned commit). tools/te_measure.py runs the
# launches: all start at once and are paused at Megatron's argument dump (start-up is CPU work), then
# each is resumed alone on the GPU until `[after training is done]`, in the order given.
#
# Writes $OUT/summary.txt and $OUT/host-measure.tar.gz (every log, the launch figures, lscpu), rewritten
# after each run so a command cut short still returns what it did. BUDGET_S (default 420): no launch is
# resumed after it.
set -uo pipefail

OUT=${OUT:-/tmp/host-out}
GEN=${GEN:-.dev/hc/gen}
LOGS=/tmp/host-measure
rm -rf "$LOGS"
mkdir -p "$OUT" "$LOGS"
export PYTHONUNBUFFERED=1 BUDGET_S=${BUDGET_S:-420}
export PACK="tar -czf '$OUT/host-measure.tar.gz.part' -C '$LOGS' . && mv '$OUT/host-measure.tar.gz.part' '$OUT/host-measure.tar.gz'; cp '$LOGS/summary.txt' '$OUT/summary.txt'"
say() { printf '%s\n' "$*" | tee -a "$LOGS/summary.txt"; }

# shellcheck source=tools/device_setup.sh disable=SC1091
source tools/device_setup.sh
python3 tools/microbench.py "$LOGS/launch-before.json" --only launch >"$LOGS/launch-before.txt" 2>&1
say "## launch figures before: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["launch"])' "$LOGS/launch-before.json" 2>&1 | tail -n 1)"
eval "$PACK"
# te_measure.py ends every run by BUDGET_S + 60 s; the timeout is the backstop (SIGTERM: it cleans up)
timeout -s TERM $((BUDGET_S + 100)) python3 tools/te_measure.py "$GEN" /nonexistent-plan "$LOGS" "$@"
python3 tools/microbench.py "$LOGS/launch-after.json" --only launch >"$LOGS/launch-after.txt" 2>&1
say "## launch figures after: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["launch"])' "$LOGS/launch-after.json" 2>&1 | tail -n 1)"
say "## cpu load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
say "## done after $SECONDS s"
eval "$PACK"
