#!/usr/bin/env bash
# Issue 27: Megatron iterations through Transformer Engine on the lent H200, measured: compiled
# single-GPU launch commands (memory and time) and fake-process-group ranks (memory), in one command.
# Run from the repository root on the device; not part of CI (docs/transformer-engine.md).
#
#   bash tools/te_measure_device.sh NAME...
#
# Expects TE_DIR (default .dev/h27/carry) to hold what tools/te_prepare.sh made (te-sm90.tar.xz,
# libte_cublaslt_compat.so, whl/*.whl), gen/NAME/launch.sh for each NAME (compiled from
# tests/e2e/te/NAME.yaml), fakepg-plan.json (`tools/fakepg.py plan` over the compiled
# tests/fixtures/fakepg/specs/te-*.yaml) and tools/ (copies of tools/te_measure.py and
# tools/fakepg.py), and .dev/megatron (Megatron-LM's runtime subset at the pinned commit).
# tools/te_measure.py says how the runs share the GPU (never two timed at once).
#
# PRE_BENCH (optional): a script of $TE_DIR/tools (with tools/yardstick.py beside it) run alone before the
# launches, its output in summary.txt.
# Writes $OUT/summary.txt and $OUT/te-measure.tar.gz (every log), rewritten after each step so a
# command cut short still returns what it did. BUDGET_S (default 480): no launch starts after it.
set -uo pipefail

OUT=${OUT:-/tmp/te-out}
TE_DIR=${TE_DIR:-.dev/h27/carry}
LOGS=/tmp/te-measure
rm -rf "$LOGS"
mkdir -p "$OUT" "$LOGS"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PACK="tar -czf '$OUT/te-measure.tar.gz.part' -C '$LOGS' . && mv '$OUT/te-measure.tar.gz.part' '$OUT/te-measure.tar.gz'; cp '$LOGS/summary.txt' '$OUT/summary.txt'"
say() { printf '%s\n' "$*" | tee -a "$LOGS/summary.txt"; }

say "## machine: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader)"
say "## date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
start=$SECONDS
tar -xJf "$TE_DIR/te-sm90.tar.xz" -C "$site" &&
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir "$TE_DIR"/whl/*.whl
say "## install into $site: exit $? after $((SECONDS - start)) s"
# libtransformer_engine.so (built with CUDA 13.2) references one cuBLASLt symbol that torch's cuBLASLt
# 13.1 lacks; tools/te_cublaslt_compat.c stands in for it, preloaded into every process from here on.
export LD_PRELOAD="$PWD/$TE_DIR/libte_cublaslt_compat.so${LD_PRELOAD:+:$LD_PRELOAD}"
say "## $(python3 -c 'import torch, transformer_engine; print("torch", torch.__version__, "transformer_engine", transformer_engine.__version__)' 2>&1 | tail -n 1)"

rm -rf .megatron && cp -r .dev/megatron .megatron
# shellcheck source=tools/device_image.sh disable=SC1091
source tools/device_image.sh
# the dataset helper every launch.sh builds: built once here, so the concurrent launches find it made
make -C /opt/Megatron-LM/megatron/core/datasets >"$LOGS/make.txt" 2>&1
say "## dataset helper: exit $? after $((SECONDS - start)) s"
eval "$PACK"

# a micro-benchmark run alone before the launches start (their start-up is CPU work it would time):
# PRE_BENCH, a script under $TE_DIR/tools (e.g. norm_host_bench.py, device call 19)
if [ -n "${PRE_BENCH:-}" ]; then
  timeout 240 python3 "$TE_DIR/tools/$PRE_BENCH" >"$LOGS/pre-bench.txt" 2>&1
  say "## $PRE_BENCH: exit $? after $((SECONDS - start)) s"
  cat "$LOGS/pre-bench.txt" >>"$LOGS/summary.txt"
  eval "$PACK"
fi

# the cross entropy's memory per logit, fused and unfused (beside the fake-process-group ranks: its
# peak is its own process's)
probe=""
if [ "${CE_PROBE:-1}" != 0 ]; then
  timeout 200 python3 "$TE_DIR/tools/ce_memory_probe.py" >"$LOGS/ce_probe.txt" 2>&1 &
  probe=$!
fi
# te_measure.py ends every run by BUDGET_S + 60 s; the timeout is the backstop (SIGTERM: it cleans up)
timeout -s TERM $((${BUDGET_S:-480} + 100)) python3 "$TE_DIR/tools/te_measure.py" "$TE_DIR/gen" "$TE_DIR/fakepg-plan.json" "$LOGS" "$@"
if [ -n "$probe" ]; then
  wait "$probe"
  say "## cross entropy probe: $(tr '\n' ' ' <"$LOGS/ce_probe.txt" | tail -c 600)"
fi
say "## done after $SECONDS s"
eval "$PACK"
