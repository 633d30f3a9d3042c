#!/usr/bin/env bash
# Install the Slurm daemons, clients and munge that tests/slurm_cluster.py starts (no systemd needed:
# the tests run the daemons themselves), and iproute2, whose `ip` gives each test node a network
# namespace of its own where root may (tests/node_networks.py; nsenter and unshare are util-linux's,
# which Debian always has). Idempotent: does nothing when everything is installed.
set -euo pipefail

packages=(slurmctld slurmd slurm-client munge iproute2)
programs=(slurmctld slurmd sbatch srun sinfo scontrol scancel squeue munged munge ip)

missing=0
for program in "${programs[@]}"; do
  if ! PATH="$PATH:/usr/sbin:/sbin" command -v "$program" >/dev/null 2>&1; then
    missing=1
  fi
done
if [ "$missing" -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-slurm.sh: installing ${packages[*]} needs root" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Without recommends: no plugin -dev packages, no mail server; the packages' own service scripts
# cannot start anything here (no systemd), and the tests start their own daemons.
apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
