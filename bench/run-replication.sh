#!/usr/bin/env bash
# Replication (issue 40, docs/replication.md, docs/benchmarks.md "Replication"):
#  1. the durable commit of APPEND and delivery with replication on against off, alternating in
#     one run (`mailstow bench replication`: store appends on the plain disk against a disk
#     mirrored to a replica over loopback; messages/s and CPU per message, the replica's
#     included);
#  2. failover and catch-up in a three-node replicated cluster on loopback with a private
#     PostgreSQL (the ignored test `bench_failover_and_catch_up` of
#     crates/mailstow/tests/replication.rs): a full copy to the partner after the owner restarts,
#     the time from the owner's SIGKILL to its user's first login on the partner, and the
#     hand-back when the owner returns.
# SMTP ingest with replication on against off, across nodes, is bench/run-cluster-scale.sh
# with REPLICAS=2.
#
#   bench/run-replication.sh
#   SMOKE=1 bench/run-replication.sh     # one short run of each; fails on a zero figure
#
# Env: RUNS (3), SECONDS_PER_RUN (5), APPENDERS ("1,32"), BENCH_MB (32 MiB of mail before the
# failovers), SCRATCH (/var/tmp), and bench/lib.sh's PROFILE, NO_BUILD, SMOKE, LOG_DIR.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
if [ "$SMOKE" = 1 ]; then
  : "${RUNS:=1}" "${SECONDS_PER_RUN:=1}" "${APPENDERS:=8}" "${BENCH_MB:=2}"
fi
RUNS=${RUNS:-3} SECONDS_PER_RUN=${SECONDS_PER_RUN:-5} APPENDERS=${APPENDERS:-1,32}
BENCH_MB=${BENCH_MB:-32} SCRATCH=${SCRATCH:-/var/tmp}
LOG=$LOG_DIR/replication-$(date +%Y%m%d-%H%M%S).log
cd "$ROOT"
build
ls /usr/lib/postgresql/*/bin/pg_ctl > /dev/null 2>&1 || apt_install postgresql
if [ "$NO_BUILD" != 1 ]; then
  EXE=$(cargo test --profile "$PROFILE" --locked -p mailstow --test replication --no-run \
          --message-format=json 2>/dev/null \
        | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "replication" and m.get("executable"):
        print(m["executable"])')
else
  # The replication crate's own unit tests are named replication-* too: take the one with the benchmark.
  EXE=
  for f in $(ls -t "$BIN_DIR"/deps/replication-* 2>/dev/null | grep -v '\.d$'); do
    # Read the whole list before matching: `grep -q` stops reading at the first match, and under
    # pipefail the test binary's next line then fails with EPIPE and fails the whole test.
    [ -x "$f" ] || continue
    listed=$("$f" --list --ignored 2>/dev/null) || continue
    if grep -q '^bench_failover_and_catch_up' <<< "$listed"; then
      EXE=$f
      break
    fi
  done
fi
[ -n "$EXE" ] && [ -x "$EXE" ] || { echo "ERROR: no replication test executable (cargo test --profile $PROFILE -p mailstow --test replication --no-run)" >&2; exit 1; }
{
  echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short=12 HEAD)$(git diff --quiet || echo +dirty) profile $PROFILE"
  echo "# $(uname -r), $(nproc) cores, $(awk '/MemTotal/{printf "%d GiB", $2/1048576}' /proc/meminfo), scratch $SCRATCH on $(df --output=fstype "$SCRATCH" | tail -1), load $(cut -d' ' -f1-3 /proc/loadavg)"
  "$(dirname "$BIN")/mailstow-bench" bench replication --dir "$SCRATCH/mailstow-replication-bench" \
    --runs "$RUNS" --seconds "$SECONDS_PER_RUN" --appenders "$APPENDERS" \
    || { echo "mailstow bench replication failed" >&2; exit 1; }
  out=$(BENCH_RUNS=$RUNS BENCH_MB=$BENCH_MB "$EXE" --ignored --exact bench_failover_and_catch_up \
          --nocapture --test-threads=1 2>"$LOG.stderr") \
    || { printf '%s\n' "$out" | tail -5; tail -30 "$LOG.stderr"; echo "the failover benchmark failed" >&2; exit 1; }
  printf '%s\n' "$out" | grep -o 'RESULT .*' || { echo "no failover figures" >&2; exit 1; }
  echo "# done $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
} 2>&1 | tee "$LOG" | grep --line-buffered '^RESULT\|^#'
rm -f "$LOG.stderr"
echo "log: $LOG"
smoke_check "$LOG" 'replication_append_ratio : off_msgs_per_s on_msgs_per_s on_over_off' \
  'replication_catch_up : bytes seconds' 'replication_failover : seconds' \
  'replication_hand_back : seconds'
