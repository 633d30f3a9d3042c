# shellcheck shell=bash
# Sourced by the measurement device scripts (tools/host_measure_device.sh, tools/fakepg_time_device.sh) after
# they define say() and LOGS: records the machine (GPU, CPU, load, date, lscpu into $LOGS/lscpu.txt), makes
# the lent machine provide what the image would (.dev/megatron as .megatron, tools/device_image.sh) and builds
# Megatron's dataset helper, its output in $LOGS/make.txt.
say "## machine: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader)"
say "## cpu: $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) cores); load: $(cut -d' ' -f1-3 /proc/loadavg)"
say "## date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
lscpu >"$LOGS/lscpu.txt" 2>&1
rm -rf .megatron && cp -r .dev/megatron .megatron
# shellcheck source=tools/device_image.sh disable=SC1091
source tools/device_image.sh
make -C /opt/Megatron-LM/megatron/core/datasets >"$LOGS/make.txt" 2>&1
say "## dataset helper: exit $?"
