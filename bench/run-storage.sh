#!/usr/bin/env bash
# run-storage.sh - the storage benchmarks (issue 2) and, in the same run, the peer
# large-mailbox experiment (Dovecot mbox and maildir) from shared/bench, on the same disk.
# Prints RESULT lines; the whole log goes to $OUT.
#
# Env: SCRATCH (/var/tmp/mailstow-bench), SHARED_BENCH (../shared/bench), RUNS (3),
#      QUEUE_SECONDS (5), FRAG_MSGS (80000), PEERS (1; 0 skips Dovecot), ONLY (space-separated
#      subset of: queue recovery open delete frag peers).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED_BENCH=${SHARED_BENCH:-$ROOT/../shared/bench}
SCRATCH=${SCRATCH:-/var/tmp/mailstow-bench}
RUNS=${RUNS:-3}
QUEUE_SECONDS=${QUEUE_SECONDS:-5}
FRAG_MSGS=${FRAG_MSGS:-80000}
PEERS=${PEERS:-1}
ONLY=${ONLY:-"queue recovery open delete frag peers"}
mkdir -p "$ROOT/bench/results"
OUT=${OUT:-$ROOT/bench/results/storage-$(date +%Y%m%d-%H%M%S).log}
want() { [[ " $ONLY " == *" $1 "* ]]; }

cd "$ROOT"
cargo build --release --locked -p mailstow 2>&1 | tail -1
BIN=$ROOT/target/release/mailstow
{
  echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short=12 HEAD)$(git diff --quiet || echo +dirty)"
  echo "# $(uname -r), $(nproc) cores, $(awk '/MemTotal/{printf "%d GiB", $2/1048576}' /proc/meminfo), scratch $SCRATCH on $(df --output=fstype "$(dirname "$SCRATCH")" | tail -1)"
  want queue && $BIN bench queue --dir "$SCRATCH" --seconds "$QUEUE_SECONDS"
  want queue && $BIN bench commit-ceiling --dir "$SCRATCH" --seconds "$QUEUE_SECONDS"
  want recovery && $BIN bench recovery --dir "$SCRATCH" --runs "$RUNS"
  want open && $BIN bench store-open --dir "$SCRATCH" --runs "$RUNS"
  want delete && $BIN bench store-delete --dir "$SCRATCH" --runs "$RUNS"
  want frag && $BIN bench store-frag --dir "$SCRATCH" --messages-per-folder "$FRAG_MSGS"
  if want peers && [ "$PEERS" = 1 ]; then
    "$SHARED_BENCH/setup-peers.sh" install >&2
    "$SHARED_BENCH/setup-peers.sh" start maildir >&2
    RUNS=$RUNS FORMATS="mbox maildir" "$SHARED_BENCH/bench-bigmbox.sh" || echo "# peer bigmbox failed"
    "$SHARED_BENCH/setup-peers.sh" stop >&2
  fi
  rm -rf "$SCRATCH"
} 2>&1 | tee "$OUT"
echo "log: $OUT"
