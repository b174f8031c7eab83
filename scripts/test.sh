#!/usr/bin/env bash
# The one test command: README's second command, and what CI runs (.ci/run).
# Installs the system packages the tests need, then format check, lints, and every test.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=()
command -v cc >/dev/null || need_pkgs+=(gcc)
command -v pkg-config >/dev/null || need_pkgs+=(pkg-config)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}"
  else
    echo "missing packages: ${need_pkgs[*]} (run as root or install them)" >&2; exit 1
  fi
fi

cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# Release mode: the crash and recovery tests drive real load, and the property tests run
# a thousand random operation sequences each (crashes included); optimised code keeps the
# whole suite within a few minutes.
PROPTEST_CASES=${PROPTEST_CASES:-1000} cargo test --workspace --locked --release
