#!/usr/bin/env bash
# Issue 26, device call 26: multi-GPU layouts timed rank by rank on one lent H200. Each rank of PLAN
# (`tools/fakepg.py plan GEN PLAN --specs tests/e2e fpg-...` over compiled tests/e2e/fpg-*.yaml) runs the
# compiled launch's pretrain_gpt.py arguments with --fake-process-group, alone on the GPU, one after
# another (tools/fakepg.py run with SEQUENTIAL=1): its iteration lines are that rank's compute-only time.
# Run from the repository root on the device; not part of CI.
#
#   PLAN=.dev/fpg/plan.json bash tools/fakepg_time_device.sh
#
# Expects .dev/megatron (Megatron-LM's runtime subset at the pinned commit). Writes $OUT/summary.txt and
# $OUT/fakepg-time.tar.gz (every rank's log, lscpu), rewritten at the end and when cut short.
# BUDGET_S (default 440): no rank starts after it; RUN_TIMEOUT_S (default 100): a rank's limit.
# BENCHES="head embedding": tools/head_bench.py, tools/embedding_bench.py first, each alone on the GPU (its rows
# in NAME-bench.json and summary.txt; BENCH_TIMEOUT_S, default 600, each one's limit); HEAD_BENCH=1 (call 27) is
# BENCHES=head; BENCHES=moe_host (call 34) runs tools/moe_host_bench.py.
set -uo pipefail

OUT=${OUT:-/tmp/fpg-out}
PLAN=${PLAN:-.dev/fpg/plan.json}
LOGS=/tmp/fpg-time
rm -rf "$LOGS"
mkdir -p "$OUT" "$LOGS"
export PYTHONUNBUFFERED=1 BUDGET_S=${BUDGET_S:-440} RUN_TIMEOUT_S=${RUN_TIMEOUT_S:-100} SEQUENTIAL=1
pack() { tar -czf "$OUT/fakepg-time.tar.gz.part" -C "$LOGS" . && mv "$OUT/fakepg-time.tar.gz.part" "$OUT/fakepg-time.tar.gz"; cp "$LOGS/summary.txt" "$OUT/summary.txt"; }
trap pack EXIT
say() { printf '%s\n' "$*" | tee -a "$LOGS/summary.txt"; }

# shellcheck source=tools/device_setup.sh disable=SC1091
source tools/device_setup.sh
cp "$PLAN" "$LOGS/plan.json"
[ "${HEAD_BENCH:-0}" = 1 ] && BENCHES=${BENCHES:-head}
for bench in ${BENCHES:-}; do
  timeout -s TERM "${BENCH_TIMEOUT_S:-600}" python3 "tools/${bench}_bench.py" "$LOGS/${bench}-bench.json" 2>&1 | tee -a "$LOGS/summary.txt"
  say "## $bench bench: exit ${PIPESTATUS[0]}"
done
MEGATRON=/opt/Megatron-LM timeout -s TERM $((BUDGET_S + RUN_TIMEOUT_S + 20)) \
  python3 tools/fakepg.py run "$PLAN" "$LOGS/fakepg" 2>&1 | tee -a "$LOGS/summary.txt"
say "## cpu load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
say "## done after $SECONDS s"
