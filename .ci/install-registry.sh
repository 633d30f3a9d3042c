#!/usr/bin/env bash
# Install what the lock tests (tests/test_lock.py) need: a registry server on loopback (Debian's
# docker-registry is CNCF distribution), skopeo to resolve and push, umoci to build a small OCI
# image, htpasswd (apache2-utils) for the registry's basic auth, and openssl to sign its tokens.
# Idempotent: installs only what is missing, and never starts the packaged registry service (the
# tests start their own).
set -euo pipefail

need=()
command -v docker-registry >/dev/null 2>&1 || need+=(docker-registry)
command -v skopeo >/dev/null 2>&1 || need+=(skopeo)
command -v umoci >/dev/null 2>&1 || need+=(umoci)
command -v htpasswd >/dev/null 2>&1 || need+=(apache2-utils)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
if [ "${#need[@]}" -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  printf 'install-registry.sh: need root to install: %s\n' "${need[*]}" >&2
  exit 1
fi

# policy-rc.d exit 101 tells invoke-rc.d not to start services: docker-registry's postinst would
# otherwise start one on :5000. Only ours is removed afterwards.
policy=/usr/sbin/policy-rc.d
placed=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  placed=1
fi
cleanup() {
  if [ "$placed" -eq 1 ]; then
    rm -f "$policy"
  fi
}
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
