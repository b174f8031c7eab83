#!/usr/bin/env bash
# SMTP ingest to mailbox, side by side in one run: Postfix -> LMTP -> Dovecot (maildir), the
# peers from shared/bench, against `mailstow serve` on the same disk.
#
#   bench/run-smtp.sh            # postal at 8 and 32 connections, smtp-source -s 32, smtp-sink
#   ONLY=mailstow bench/run-smtp.sh        # mailstow alone (no smtp-sink, no peers)
#   ONLY=observability bench/run-smtp.sh   # mailstow alone: the mail log at its default level
#                                # and /metrics scraped every second, against both off
#   SMOKE=1 bench/run-smtp.sh    # every step with tiny counts; fails on a zero mailstow figure
#
# postal (NODELAY=1: see shared/bench/BASELINE.md) reports accepted and delivered msg/s; one
# postal process cannot exceed 409.6 msg/s, so 8 connections are 8 processes x 1 thread and 32
# are 16 x 2.
# smtp-source -d -s 32 measures the accept rate against smtp-sink (which discards: the
# protocol's ceiling with that client) and against both servers. mailstow's accepted and
# delivered counts and fdatasync counts come from its stats file (<data_dir>/stats).
# Both servers get the same NUSERS (1000) users, user0001@example.com.. with password pw0001..:
# the peers' from setup-peers.sh, mailstow's from a list this script writes and imports into a
# fresh data directory (init, domain add, user import).
# Senders: postal sends as the users of its list (bench-smtp.sh gives it no sender file), so
# from example.com, one of mailstow's domains: mailstow runs with [server] local_sender_check =
# false (the peer Postfix checks no sender either) and sender_checks = false (no DNS to ask
# here; their cost is bench/run-hostile.sh's). smtp-source and `mailstow bench smtp` send as
# example.org.
# Env: DURATION (30), RUNS (3), SMTP_SOURCE_MSGS (20000), NUSERS (1000), POSTAL_SETTINGS
# ("8x1 16x2": postal processes x threads), LOAD_CONNS (8,32) and LOAD_SECONDS (20) of `mailstow
# bench smtp`, SCRATCH (/var/tmp/mailstow-bench-smtp), SHARED_BENCH, BENCH_ROOT, and bench/lib.sh's
# PROFILE, NO_BUILD, BIN, SMOKE, LOG_DIR. Output: RESULT lines, log in bench/results/.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
shared_bench
if [ "$SMOKE" = 1 ]; then
  : "${DURATION:=2}" "${RUNS:=1}" "${SMTP_SOURCE_MSGS:=200}" "${NUSERS:=20}" "${POSTAL_SETTINGS:=2x1}"
  : "${LOAD_CONNS:=4}" "${LOAD_SECONDS:=1}"
  export DRAIN_QUIET=${DRAIN_QUIET:-1} QUIET_TIMEOUT=${QUIET_TIMEOUT:-1}
fi
export BENCH_ROOT=${BENCH_ROOT:-/tmp/peerbench}
export DURATION=${DURATION:-30} RUNS=${RUNS:-3} NUSERS=${NUSERS:-1000}
SMTP_SOURCE_MSGS=${SMTP_SOURCE_MSGS:-20000}
POSTAL_SETTINGS=${POSTAL_SETTINGS:-8x1 16x2}
LOAD_CONNS=${LOAD_CONNS:-8,32} LOAD_SECONDS=${LOAD_SECONDS:-20}
SCRATCH=${SCRATCH:-/var/tmp/mailstow-bench-smtp}
OUR_SMTP_PORT=2625 SINK_PORT=2725
LOG=$LOG_DIR/smtp-$(date +%Y%m%d-%H%M%S).log
command -v smtp-source >/dev/null && command -v postal >/dev/null || "$SHARED_BENCH/setup-peers.sh" install >&2

cd "$ROOT"
build

# Our users: the peers' list (setup-peers.sh write_users), written here so mailstow needs no
# earlier peer run.
USERS=$SCRATCH.users
for ((i = 1; i <= NUSERS; i++)); do printf 'user%04d@example.com pw%04d\n' "$i" "$i"; done > "$USERS"
# DATA latency (mailstow bench smtp): sessions reuse their connection, recipients among the
# first 100 users.
RECIPIENTS=$(head -100 "$USERS" | cut -d' ' -f1 | paste -sd,)

# smtp_source PORT LABEL [ACCEPTED_CMD]: accepted msg/s of smtp-source -d -s 32 with 8 KiB
# messages; ACCEPTED_CMD prints the server's count of accepted messages (before and after).
smtp_source() {
  local port=$1 label=$2 counter=${3:-} t0 t1 a0=0 a1=0 accepted=""
  [ -n "$counter" ] && a0=$(bash -c "$counter")
  t0=$(date +%s.%N)
  smtp-source -d -s 32 -l 8192 -m "$SMTP_SOURCE_MSGS" -f sender@example.org -t user0001@example.com "127.0.0.1:$port" > /dev/null 2>&1
  t1=$(date +%s.%N)
  if [ -n "$counter" ]; then sleep 1.5; a1=$(bash -c "$counter"); accepted=" accepted=$((a1 - a0))"; fi
  echo "RESULT smtp_source_msgs_per_s label=$label conns=32 msgs=$SMTP_SOURCE_MSGS seconds=$(echo "$t1 - $t0" | bc) msgs_per_s=$(echo "scale=1; $SMTP_SOURCE_MSGS / ($t1 - $t0)" | bc)$accepted"
}

median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END{print (NR%2)? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

# A fresh mailstow data directory DIR with CONFIG and our users.
fresh_mailstow() {  # DIR CONFIG
  rm -rf "$1"; mkdir -p "$1"
  "$BIN" --config "$2" --data-dir "$1" init >&2 || return 1
  "$BIN" --config "$2" --data-dir "$1" domain add example.com >&2 || return 1
  "$BIN" --config "$2" --data-dir "$1" user import "$USERS" >&2 || return 1
}

# The cost of telling the operator: `mailstow bench smtp` (32 connections, 8 KiB messages to
# 100 local users, LOAD_SECONDS) against a fresh server with the mail log at its default level
# (info, stderr to a file, as under systemd) and /metrics scraped every second, then the same
# build with `[log] level = "off"` and no metrics; alternating, RUNS pairs. SPF/DKIM/DMARC are
# off in both (this machine has no DNS to ask; their cost is measured by bench/run-hostile.sh).
observability() {
  local on=() off=() mode line rate scraper
  for ((r=1; r<=RUNS; r++)); do
    for mode in on off; do
      if [ $mode = on ]; then
        printf '[server]\npassword_length_min = 1\nsender_checks = false\nmetrics = "127.0.0.1:9155"\n[log]\nlevel = "info"\n' > "$SCRATCH.toml"
      else
        printf '[server]\npassword_length_min = 1\nsender_checks = false\n[log]\nlevel = "off"\n' > "$SCRATCH.toml"
      fi
      fresh_mailstow "$SCRATCH" "$SCRATCH.toml" || return 1
      "$BIN" --config "$SCRATCH.toml" --data-dir "$SCRATCH" serve --web "" --smtp "127.0.0.1:$OUR_SMTP_PORT" \
        --submission "" --submissions "" --lmtp "" --pop3 "" --pop3s "" --imap "" --imaps "" --managesieve "" \
        > "$SCRATCH.out" 2> "$SCRATCH.err" & pid=$!
      for _ in $(seq 100); do grep -q "smtp listening" "$SCRATCH.out" 2>/dev/null && break; sleep 0.1; done
      scraper=
      if [ $mode = on ]; then
        ( while curl -sf -o /dev/null http://127.0.0.1:9155/metrics; do sleep 1; done ) & scraper=$!
      fi
      sleep 1
      line=$("$BIN" bench smtp --address "127.0.0.1:$OUR_SMTP_PORT" --connections 32 --seconds "$LOAD_SECONDS" \
        --recipients "$RECIPIENTS" --label "observability-$mode" 2>/dev/null | grep '^RESULT')
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
  smoke_check "$LOG" 'smtp_load label=observability-on : msgs msgs_per_s data_p50_us' \
    'smtp_load label=observability-off : msgs msgs_per_s data_p50_us' \
    'smtp_ingest_observability : median_on median_off ratio'
  exit 0
fi

{
  echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short=12 HEAD)$(git diff --quiet || echo +dirty)"
  echo "# $(uname -r), $(nproc) cores, $(awk '/MemTotal/{printf "%d GiB", $2/1048576}' /proc/meminfo), scratch $SCRATCH on $(df --output=fstype "$(dirname "$SCRATCH")" | tail -1)"

  if [ "${ONLY:-all}" = all ]; then
  # --- smtp-sink: the client's ceiling ---
  smtp-sink -u nobody -c "127.0.0.1:$SINK_PORT" 1000 > /dev/null & sink=$!
  sleep 0.5
  smtp_source "$SINK_PORT" smtp-sink
  kill "$sink"; wait "$sink" 2>/dev/null || true

  # --- peers: Postfix -> LMTP -> Dovecot maildir ---
  "$SHARED_BENCH/setup-peers.sh" install >&2
  # (output to stderr: the Postfix master it starts keeps its stdout, and would hold the log pipe)
  "$SHARED_BENCH/setup-peers.sh" start maildir > "$SCRATCH.peers.out" 2>&1; cat "$SCRATCH.peers.out" >&2
  for setting in $POSTAL_SETTINGS; do
    NODELAY=1 POSTAL_PROCS=${setting%x*} THREADS=${setting#*x} LABEL=postfix-dovecot-maildir "$SHARED_BENCH/bench-smtp.sh"
  done
  smtp_source 2525 postfix-dovecot-maildir
  "$BIN" bench smtp --address 127.0.0.1:2525 --connections "$LOAD_CONNS" --seconds "$LOAD_SECONDS" \
    --recipients "$RECIPIENTS" --label postfix-dovecot-maildir
  "$SHARED_BENCH/setup-peers.sh" stop >&2
  fi

  # --- mailstow, same users ---
  printf '[server]\npassword_length_min = 1\nsender_checks = false\nlocal_sender_check = false\n' > "$SCRATCH.toml"
  fresh_mailstow "$SCRATCH" "$SCRATCH.toml"
  "$BIN" --config "$SCRATCH.toml" --data-dir "$SCRATCH" serve --web "" --smtp "127.0.0.1:$OUR_SMTP_PORT" \
    --submission "" --submissions "" --lmtp "" --pop3 127.0.0.1:2610 --pop3s "" --imap "" --imaps "" --managesieve "" \
    > "$SCRATCH/serve.out" 2> "$SCRATCH/serve.err" & pid=$!
  for _ in $(seq 100); do grep -q "smtp listening" "$SCRATCH/serve.out" 2>/dev/null && break; sleep 0.1; done
  stat_of() { awk -v k="$1" '$1==k{print $2}' "$SCRATCH/stats"; }
  syncs() { echo $(( $(stat_of queue_fdatasyncs) + $(stat_of store_data_syncs) + $(stat_of store_journal_syncs) )); }
  split() { echo "queue=$(stat_of queue_fdatasyncs) store_data=$(stat_of store_data_syncs) store_journal=$(stat_of store_journal_syncs)"; }
  sleep 1.5
  for setting in $POSTAL_SETTINGS; do
    procs=${setting%x*} threads=${setting#*x}
    s0=$(syncs); a0=$(stat_of accepted); echo "syncs before: $(split)" >&2
    SERVER_PIDS=$pid SMTP_PORT=$OUR_SMTP_PORT USERS_FILE=$USERS NODELAY=1 POSTAL_PROCS=$procs THREADS=$threads LABEL=mailstow \
      DELIVERED_CMD="awk '\$1==\"delivered\"{print \$2}' $SCRATCH/stats" "$SHARED_BENCH/bench-smtp.sh"
    sleep 1.5
    s1=$(syncs); a1=$(stat_of accepted); echo "syncs after: $(split)" >&2
    echo "RESULT mailstow_fdatasync_per_msg conns=$(( procs * threads )) accepted=$((a1 - a0)) fdatasyncs=$((s1 - s0)) per_msg=$(echo "scale=4; ($s1 - $s0) / ($a1 - $a0)" | bc)"
  done
  s0=$(syncs); a0=$(stat_of accepted)
  smtp_source "$OUR_SMTP_PORT" mailstow "awk '\$1==\"accepted\"{print \$2}' $SCRATCH/stats"
  s1=$(syncs); a1=$(stat_of accepted)
  echo "RESULT mailstow_fdatasync_per_msg client=smtp-source conns=32 accepted=$((a1 - a0)) fdatasyncs=$((s1 - s0)) per_msg=$(echo "scale=4; ($s1 - $s0) / ($a1 - $a0)" | bc)"
  "$BIN" bench smtp --address "127.0.0.1:$OUR_SMTP_PORT" --connections "$LOAD_CONNS" --seconds "$LOAD_SECONDS" \
    --recipients "$RECIPIENTS" --label mailstow
  kill -TERM "$pid"; wait "$pid" || true
} 2>&1 | tee "$LOG" | grep --line-buffered '^RESULT\|^#\|^syncs'
echo "log: $LOG"
smoke_check "$LOG" 'smtp_accept_msgs_per_s label=mailstow : median' \
  'smtp_deliver_msgs_per_s label=mailstow : median' \
  'mailstow_fdatasync_per_msg : accepted fdatasyncs per_msg' \
  'smtp_source_msgs_per_s label=mailstow : msgs_per_s accepted' \
  'smtp_load label=mailstow : msgs msgs_per_s data_p50_us data_p99_us'
