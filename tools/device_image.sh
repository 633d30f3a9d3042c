# shellcheck shell=bash
# Sourced by the device scripts (tools/e2e_device.sh, tools/measure_device.sh): makes the lent machine
# provide what the compiled image would. The Megatron source at megatron.root (/opt/Megatron-LM, copied
# from .megatron/), MEGATRON_COMMIT and PYTHONPATH set, the shared-storage mount point, and a `python`
# on the PATH where the machine has only python3.
rm -rf /opt/Megatron-LM
cp -r .megatron /opt/Megatron-LM
export MEGATRON_COMMIT=571370c829ca768fe37244f4e2e7f28d8accc4ab PYTHONPATH=/opt/Megatron-LM
mkdir -p /mnt/megatron
if ! command -v python >/dev/null; then
  mkdir -p /tmp/shim
  ln -sf "$(command -v python3)" /tmp/shim/python
  export PATH="/tmp/shim:$PATH"
fi
