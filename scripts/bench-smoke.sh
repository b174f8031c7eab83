#!/usr/bin/env bash
# Every script under bench/ in its shortest mode (SMOKE=1: tiny counts, one repetition, every
# path, the peers too), with the `ci` profile's binaries that the test command has built:
# fails if a script exits non-zero or prints a zero or missing mailstow figure (each script
# checks its own, bench/lib.sh smoke_check). Run by scripts/test.sh after the cargo tests;
# about ten minutes on 2 cores. Logs: $LOG_DIR (/tmp/mailstow-bench-smoke), one per script.
#
#   scripts/bench-smoke.sh                 all of them
#   scripts/bench-smoke.sh run-web.sh ...  some
#
# Env: SMOKE_TIMEOUT (600 s per script), SMOKE_BUILD (1: first `cargo test --workspace --profile
# ci --no-run`, a no-op after the test command, which builds every binary and example the
# scripts run; 0: use what is there).
set -uo pipefail
cd "$(dirname "$0")/.."
export SMOKE=1 PROFILE=ci NO_BUILD=1
export LOG_DIR=${LOG_DIR:-${TMPDIR:-/tmp}/mailstow-bench-smoke}
mkdir -p "$LOG_DIR"

# What runs every file of bench/: a script in its smoke mode (with its environment), or the
# script that runs a helper. A file in bench/ that is in neither list fails the smoke run, so
# a new script gets a smoke mode and a line here.
RUNS=(
  "run-storage.sh"
  "run-smtp.sh"
  "run-smtp.sh ONLY=observability"
  "run-pop3.sh"
  "run-bigmbox.sh"
  "run-import.sh"
  "run-web.sh"
  "run-hostile.sh"
  "run-imap.sh"
  "run-imap-idle-compress.sh"
  "run-cluster.sh"
  "run-cluster-scale.sh"
  "run-mailfs.sh"
  "pjdfstest.sh"
  "run-full-disk.sh"
  "run-backup.sh"
  "run-sieve.sh"
  "run-spam.sh"
  "run-transport.sh"
  "run-replication.sh"
)
declare -A HELPER_OF=(
  [lib.sh]=all [nonzero.py]=all [dovecot-tuning.sh]=run-imap.sh
  [fill-bigmbox.py]=run-bigmbox.sh [web-bench.py]=run-web.sh [hostile.py]=run-hostile.sh
  [imap-bench.py]=run-imap.sh [imap-compress.py]=run-imap-idle-compress.sh
  [imap-idle-memory.py]=run-imap-idle-compress.sh [cluster-bench.py]=run-cluster.sh [cluster-scale.py]=run-cluster-scale.sh
  [mailfs-bench.py]=run-mailfs.sh [mailfs-postmark-cpu.py]=run-mailfs.sh
)
uncovered=()
for f in bench/*; do
  [ -f "$f" ] || continue
  name=$(basename "$f")
  [ -n "${HELPER_OF[$name]:-}" ] && continue
  printf '%s\n' "${RUNS[@]}" | grep -q "^$name\( \|$\)" || uncovered+=("$name")
done
if [ ${#uncovered[@]} -gt 0 ]; then
  echo "bench smoke: no smoke run for bench/${uncovered[*]}: give it a SMOKE=1 mode and a line in $0" >&2
  exit 1
fi

selected=("${RUNS[@]}")
if [ $# -gt 0 ]; then
  selected=()
  for want in "$@"; do
    for r in "${RUNS[@]}"; do [ "${r%% *}" = "$want" ] && selected+=("$r"); done
  done
fi

if [ "${SMOKE_BUILD:-1}" = 1 ]; then
  cargo test --workspace --locked --profile ci --no-run 2>&1 | tail -1
fi

failed=() started=$(date +%s)
for entry in "${selected[@]}"; do
  read -r script envs <<< "$entry"
  out=$LOG_DIR/$(echo "$entry" | tr ' =' '__').out
  t0=$(date +%s)
  # shellcheck disable=SC2086
  env $envs timeout -k 10 "${SMOKE_TIMEOUT:-600}" bash "bench/$script" < /dev/null > "$out" 2>&1
  rc=$?
  if [ $rc = 0 ]; then
    echo "bench smoke: $entry ok ($(( $(date +%s) - t0 )) s)"
  else
    echo "bench smoke: $entry FAILED (exit $rc after $(( $(date +%s) - t0 )) s); the end of $out:"
    tail -20 "$out" | sed 's/^/    /'
    failed+=("$entry")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "bench smoke: ${#failed[@]} of ${#selected[@]} scripts failed: ${failed[*]} ($(( $(date +%s) - started )) s)"
  exit 1
fi
echo "bench smoke: all ${#selected[@]} scripts ran and printed non-zero mailstow figures ($(( $(date +%s) - started )) s)"
