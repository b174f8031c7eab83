#!/usr/bin/env bash
# run-storage.sh - the storage benchmarks (issue 2) and, in the same run, the peer
# large-mailbox experiment (Dovecot mbox and maildir) from shared/bench, on the same disk.
# Prints RESULT lines; the whole log goes to $OUT.
#
#   bench/run-storage.sh
#   SMOKE=1 bench/run-storage.sh     every benchmark with tiny sizes; fails on a zero figure
#
# Env: SCRATCH (/var/tmp/mailstow-bench), SHARED_BENCH (../shared/bench), RUNS (3),
#      QUEUE_SECONDS (5), FRAG_MSGS (80000), PEERS (1; 0 skips Dovecot), ONLY (space-separated
#      subset of: queue recovery open delete frag peers), BIG_COUNT (the peers' mailbox,
#      80000), and bench/lib.sh's PROFILE, NO_BUILD, BIN, SMOKE, LOG_DIR. With SMOKE=1 the
#      benchmarks' sizes shrink too (SMOKE_ARGS below).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
SCRATCH=${SCRATCH:-/var/tmp/mailstow-bench}
# Per benchmark: the arguments of its smallest run that still measures something.
queue_args=() ceiling_args=() recovery_args=() open_args=() delete_args=() frag_args=()
if [ "$SMOKE" = 1 ]; then
  : "${RUNS:=1}" "${QUEUE_SECONDS:=0.3}" "${FRAG_MSGS:=300}" "${BIG_COUNT:=300}"
  export QUIET_TIMEOUT=${QUIET_TIMEOUT:-1}
  queue_args=(--producers 1,8 --segment-bytes 4194304)
  ceiling_args=(--producers 8 --in-flight 1,2)
  recovery_args=(--messages 2000 --segment-bytes 4194304)
  open_args=(--sizes-mb 1,2)
  delete_args=(--folder-mb 4 --distances-mb 0,3)
  frag_args=(--folders 2)
fi
RUNS=${RUNS:-3}
QUEUE_SECONDS=${QUEUE_SECONDS:-5}
FRAG_MSGS=${FRAG_MSGS:-80000}
PEERS=${PEERS:-1}
ONLY=${ONLY:-"queue recovery open delete frag peers"}
OUT=${OUT:-$LOG_DIR/storage-$(date +%Y%m%d-%H%M%S).log}
want() { [[ " $ONLY " == *" $1 "* ]]; }
if want peers && [ "$PEERS" = 1 ]; then shared_bench; fi

cd "$ROOT"
build
{
  echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short=12 HEAD)$(git diff --quiet || echo +dirty)"
  echo "# $(uname -r), $(nproc) cores, $(awk '/MemTotal/{printf "%d GiB", $2/1048576}' /proc/meminfo), scratch $SCRATCH on $(df --output=fstype "$(dirname "$SCRATCH")" | tail -1)"
  want queue && $BIN bench queue --dir "$SCRATCH" --seconds "$QUEUE_SECONDS" --runs "$RUNS" "${queue_args[@]}"
  want queue && $BIN bench commit-ceiling --dir "$SCRATCH" --seconds "$QUEUE_SECONDS" "${ceiling_args[@]}"
  want recovery && $BIN bench recovery --dir "$SCRATCH" --runs "$RUNS" "${recovery_args[@]}"
  want open && $BIN bench store-open --dir "$SCRATCH" --runs "$RUNS" "${open_args[@]}"
  want delete && $BIN bench store-delete --dir "$SCRATCH" --runs "$RUNS" "${delete_args[@]}"
  want frag && $BIN bench store-frag --dir "$SCRATCH" --messages-per-folder "$FRAG_MSGS" "${frag_args[@]}"
  if want peers && [ "$PEERS" = 1 ]; then
    "$SHARED_BENCH/setup-peers.sh" install >&2
    # (output to a file: the Postfix master it starts keeps its stdout, and would hold the pipe)
    "$SHARED_BENCH/setup-peers.sh" start maildir > "$SCRATCH.peers.out" 2>&1; cat "$SCRATCH.peers.out" >&2
    RUNS=$RUNS BIG_COUNT=${BIG_COUNT:-80000} FORMATS="mbox maildir" "$SHARED_BENCH/bench-bigmbox.sh" || echo "# peer bigmbox failed"
    "$SHARED_BENCH/setup-peers.sh" stop >&2
  fi
  rm -rf "$SCRATCH"
} 2>&1 | tee "$OUT"
echo "log: $OUT"
smoke_check "$OUT" 'queue_ingest impl=mailstow : msgs msgs_per_s p50_us p99_us fdatasync_per_msg' \
  'commit_ceiling : msgs_per_s rounds_per_s' 'queue_recovery : pending open_ms' \
  'store_open : msgs bytes open_ms' 'store_reopen : open_ms' 'store_delete : folder_msgs time_ms' \
  'store_frag_built : fragments_total' 'store_frag : deleted fragments_total cold_read_mb_per_s'
