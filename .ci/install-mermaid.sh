#!/usr/bin/env bash
# What tests/test_pictures.py renders plan.md's Mermaid diagrams with: Debian's headless Chromium
# (no browser download) and the mermaid library from npm's `mermaid` package (MIT), unpacked into
# .ci/cache/mermaid/ (git-ignored), where tests/mermaid_render.py looks for it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

MERMAID_VERSION=11.17.2
if ! command -v chromium >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
target=.ci/cache/mermaid
if [ ! -s "$target/mermaid.min.js" ] || [ "$(cat "$target/version" 2>/dev/null)" != "$MERMAID_VERSION" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf -- "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "mermaid@$MERMAID_VERSION" >/dev/null && tar -xzf "mermaid-$MERMAID_VERSION.tgz")
  mkdir -p "$target"
  cp "$tmp/package/dist/mermaid.min.js" "$tmp/package/LICENSE" "$target/"
  printf '%s\n' "$MERMAID_VERSION" >"$target/version"
fi
