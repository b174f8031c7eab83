#!/usr/bin/env bash
# SMTP ingest to mailbox, side by side in one run: Postfix -> LMTP -> Dovecot (maildir), the
# peers from shared/bench, against `mailstow serve` on the same disk.
#
#   bench/run-smtp.sh            # postal at 8 and 32 connections, smtp-source -s 32, smtp-sink
#   ONLY=observability bench/run-smtp.sh   # mailstow alone: the mail log at its default level
#                                # and /metrics scraped every second, against both off
#
# postal (NODELAY=1: see shared/bench/BASELINE.md) reports accepted and delivered msg/s; one
# postal process cannot exceed 409.6 msg/s, so 8 connections are 8 processes x 1 thread and 32
# are 16 x 2.
# smtp-source -d -s 32 measures the accept rate against smtp-sink (which discards: the
# protocol's ceiling with that client) and against both servers. mailstow's delivered count
# and fdatasync counts come from its stats file (<data_dir>/stats).
# Env: DURATION (30), RUNS (3), SMTP_SOURCE_MSGS (20000), SCRATCH (/var/tmp/mailstow-bench-smtp),
# SHARED_BENCH, BENCH_ROOT. Output: RESULT lines, log in bench/results/.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED_BENCH=${SHARED_BENCH:-$(cd "$ROOT/../shared/bench" && pwd)}
export BENCH_ROOT=${BENCH_ROOT:-/tmp/peerbench}
export DURATION=${DURATION:-30} RUNS=${RUNS:-3}
SMTP_SOURCE_MSGS=${SMTP_SOURCE_MSGS:-20000}
SCRATCH=${SCRATCH:-/var/tmp/mailstow-bench-smtp}
OUR_SMTP_PORT=2625 SINK_PORT=2725
LOG=$ROOT/bench/results/smtp-$(date +%Y%m%d-%H%M%S).log
mkdir -p "$ROOT/bench/results"

cd "$ROOT"
cargo build --release --locked -p mailstow 2>&1 | tail -1
BIN=$ROOT/target/release/mailstow

# smtp_source PORT LABEL: accepted msg/s of smtp-source -d -s 32 with 8 KiB messages.
smtp_source() {
  local port=$1 label=$2 t0 t1
  t0=$(date +%s.%N)
  smtp-source -d -s 32 -l 8192 -m "$SMTP_SOURCE_MSGS" -f sender@example.com -t user0001@example.com "127.0.0.1:$port" > /dev/null 2>&1
  t1=$(date +%s.%N)
  echo "RESULT smtp_source_msgs_per_s label=$label conns=32 msgs=$SMTP_SOURCE_MSGS seconds=$(echo "$t1 - $t0" | bc) msgs_per_s=$(echo "scale=1; $SMTP_SOURCE_MSGS / ($t1 - $t0)" | bc)"
}

median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END{print (NR%2)? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

# The cost of telling the operator: `mailstow bench smtp` (32 connections, 8 KiB messages to
# 100 local users, 20 s) against a fresh server with the mail log at its default level (info,
# stderr to a file, as under systemd) and /metrics scraped every second, then the same build
# with `[log] level = "off"` and no metrics; alternating, RUNS pairs. SPF/DKIM/DMARC are off in
# both (this machine has no DNS to ask; their cost is measured by bench/run-hostile.sh).
observability() {
  local users=$SCRATCH.users recipients on=() off=() mode line rate scraper
  for i in $(seq -w 1 100); do echo "user$i@example.com pw$i"; done > "$users"
  recipients=$(cut -d' ' -f1 "$users" | paste -sd,)
  for ((r=1; r<=RUNS; r++)); do
    for mode in on off; do
      rm -rf "$SCRATCH"; mkdir -p "$SCRATCH"
      if [ $mode = on ]; then
        printf '[server]\nsender_checks = false\nmetrics = "127.0.0.1:9155"\n[log]\nlevel = "info"\n' > "$SCRATCH.toml"
      else
        printf '[server]\nsender_checks = false\n[log]\nlevel = "off"\n' > "$SCRATCH.toml"
      fi
      "$BIN" --config "$SCRATCH.toml" --data-dir "$SCRATCH" domain add example.com >&2
      "$BIN" --config "$SCRATCH.toml" --data-dir "$SCRATCH" user import "$users" >&2
      "$BIN" --config "$SCRATCH.toml" --data-dir "$SCRATCH" serve --web "" --smtp "127.0.0.1:$OUR_SMTP_PORT" \
        --submission "" --submissions "" --lmtp "" --pop3 "" --pop3s "" --imap "" --imaps "" \
        > "$SCRATCH.out" 2> "$SCRATCH.err" & pid=$!
      for _ in $(seq 100); do grep -q "smtp listening" "$SCRATCH.out" 2>/dev/null && break; sleep 0.1; done
      scraper=
      if [ $mode = on ]; then
        ( while curl -sf -o /dev/null http://127.0.0.1:9155/metrics; do sleep 1; done ) & scraper=$!
      fi
      sleep 1
      line=$("$BIN" bench smtp --address "127.0.0.1:$OUR_SMTP_PORT" --connections 32 --seconds 20 \
        --recipients "$recipients" --label "observability-$mode" 2>/dev/null | grep '^RESULT')
      if [ -z "$line" ]; then
        echo "no RESULT from mode $mode run $r; server said: $(tail -3 "$SCRATCH.err")" >&2
        kill -TERM "$pid" 2>/dev/null; [ -n "$scraper" ] && kill "$scraper" 2>/dev/null
        return 1
      fi
      echo "$line run=$r log_lines=$(wc -l < "$SCRATCH.err")"
      rate=$(echo "$line" | sed -n 's/.*msgs_per_s=\([0-9.]*\).*/\1/p')
      if [ $mode = on ]; then on+=("$rate"); else off+=("$rate"); fi
      [ -n "$scraper" ] && kill "$scraper" 2>/dev/null
      kill -TERM "$pid"; wait "$pid" || true
    done
  done
  echo "RESULT smtp_ingest_observability median_on=$(median "${on[@]}") median_off=$(median "${off[@]}") ratio=$(echo "scale=3; $(median "${on[@]}") / $(median "${off[@]}")" | bc) runs=$RUNS on=${on[*]} off=${off[*]} conns=32"
}

if [ "${ONLY:-all}" = observability ]; then
  {
    echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short=12 HEAD)$(git diff --quiet || echo +dirty)"
    echo "# $(uname -r), $(nproc) cores, $(awk '/MemTotal/{printf "%d GiB", $2/1048576}' /proc/meminfo), scratch $SCRATCH on $(df --output=fstype "$(dirname "$SCRATCH")" | tail -1)"
    observability
  } 2>&1 | tee "$LOG" | grep --line-buffered '^RESULT\|^#'
  echo "log: $LOG"
  exit 0
fi

# DATA latency (mailstow bench smtp): sessions reuse their connection, recipients among the
# first 100 users.
RECIPIENTS=$(head -100 "$BENCH_ROOT/users.txt" | cut -d' ' -f1 | paste -sd,)
{
  echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short=12 HEAD)$(git diff --quiet || echo +dirty)"
  echo "# $(uname -r), $(nproc) cores, $(awk '/MemTotal/{printf "%d GiB", $2/1048576}' /proc/meminfo), scratch $SCRATCH on $(df --output=fstype "$(dirname "$SCRATCH")" | tail -1)"

  if [ "${ONLY:-all}" = all ]; then
  # --- smtp-sink: the client's ceiling ---
  smtp-sink -u nobody -c "127.0.0.1:$SINK_PORT" 1000 & sink=$!
  sleep 0.5
  smtp_source "$SINK_PORT" smtp-sink
  kill "$sink"; wait "$sink" 2>/dev/null || true

  # --- peers: Postfix -> LMTP -> Dovecot maildir ---
  "$SHARED_BENCH/setup-peers.sh" install >&2
  "$SHARED_BENCH/setup-peers.sh" start maildir >&2
  NODELAY=1 POSTAL_PROCS=8 THREADS=1 LABEL=postfix-dovecot-maildir "$SHARED_BENCH/bench-smtp.sh"
  NODELAY=1 POSTAL_PROCS=16 THREADS=2 LABEL=postfix-dovecot-maildir "$SHARED_BENCH/bench-smtp.sh"
  smtp_source 2525 postfix-dovecot-maildir
  "$BIN" bench smtp --address 127.0.0.1:2525 --connections 8,32 --seconds 20 \
    --recipients "$RECIPIENTS" --label postfix-dovecot-maildir
  "$SHARED_BENCH/setup-peers.sh" stop >&2
  fi

  # --- mailstow, same users ---
  rm -rf "$SCRATCH"; mkdir -p "$SCRATCH"
  "$BIN" --data-dir "$SCRATCH" domain add example.com >&2
  "$BIN" --data-dir "$SCRATCH" user import "$BENCH_ROOT/users.txt" >&2
  "$BIN" --data-dir "$SCRATCH" serve --web "" --smtp "127.0.0.1:$OUR_SMTP_PORT" --submission "" --submissions "" \
     --lmtp "" --pop3 127.0.0.1:2610 --pop3s "" > "$SCRATCH/serve.out" 2> "$SCRATCH/serve.err" & pid=$!
  for _ in $(seq 100); do grep -q "smtp listening" "$SCRATCH/serve.out" 2>/dev/null && break; sleep 0.1; done
  stat_of() { awk -v k="$1" '$1==k{print $2}' "$SCRATCH/stats"; }
  syncs() { echo $(( $(stat_of queue_fdatasyncs) + $(stat_of store_data_syncs) + $(stat_of store_journal_syncs) )); }
  split() { echo "queue=$(stat_of queue_fdatasyncs) store_data=$(stat_of store_data_syncs) store_journal=$(stat_of store_journal_syncs)"; }
  sleep 1.5
  for setting in "8 1" "16 2"; do
    set -- $setting
    s0=$(syncs); a0=$(stat_of accepted); echo "syncs before: $(split)" >&2
    SERVER_PIDS=$pid SMTP_PORT=$OUR_SMTP_PORT NODELAY=1 POSTAL_PROCS=$1 THREADS=$2 LABEL=mailstow \
      DELIVERED_CMD="awk '\$1==\"delivered\"{print \$2}' $SCRATCH/stats" "$SHARED_BENCH/bench-smtp.sh"
    sleep 1.5
    s1=$(syncs); a1=$(stat_of accepted); echo "syncs after: $(split)" >&2
    echo "RESULT mailstow_fdatasync_per_msg conns=$(( $1 * $2 )) accepted=$((a1 - a0)) fdatasyncs=$((s1 - s0)) per_msg=$(echo "scale=4; ($s1 - $s0) / ($a1 - $a0)" | bc)"
  done
  s0=$(syncs); a0=$(stat_of accepted)
  smtp_source "$OUR_SMTP_PORT" mailstow
  "$BIN" bench smtp --address "127.0.0.1:$OUR_SMTP_PORT" --connections 8,32 --seconds 20 \
    --recipients "$RECIPIENTS" --label mailstow
  sleep 1.5
  s1=$(syncs); a1=$(stat_of accepted)
  echo "RESULT mailstow_fdatasync_per_msg client=smtp-source conns=32 accepted=$((a1 - a0)) fdatasyncs=$((s1 - s0)) per_msg=$(echo "scale=4; ($s1 - $s0) / ($a1 - $a0)" | bc)"
  kill -TERM "$pid"; wait "$pid" || true
} 2>&1 | tee "$LOG" | grep --line-buffered '^RESULT\|^#\|^syncs'
echo "log: $LOG"
