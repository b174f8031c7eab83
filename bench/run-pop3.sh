#!/usr/bin/env bash
# POP3 with rabid, side by side in one run: Dovecot (maildir, the peer from shared/bench)
# against `mailstow serve`, each holding mail postal sent (~30 messages per user, 1000 users).
#
#   bench/run-pop3.sh
#   ONLY=mailstow bench/run-pop3.sh    mailstow alone
#   SMOKE=1 bench/run-pop3.sh          both, a few seconds each; fails on a zero mailstow figure
#
# rabid logs in over plain TCP (no STLS), so mailstow runs with [server] auth_without_tls.
# Both get the same NUSERS (1000) users, user0001@example.com.. with password pw0001..: the
# peers' from setup-peers.sh, mailstow's from a list this script writes and imports into a
# fresh data directory. postal sends as the users of its list, so from example.com, one of
# mailstow's domains: mailstow runs with [server] local_sender_check = false (the peer Postfix
# checks no sender either) and sender_checks = false (no DNS to ask here).
# Before every retr1 run the store is put back: Dovecot's by bench-pop3.sh's rsync, ours by
# stopping the server, restoring the data directory from a snapshot and starting it again.
# Env: DURATION (30), RUNS (3), PROCS (8), NUSERS (1000), SCRATCH (/var/tmp/mailstow-bench-pop3),
# FILL_SECONDS (8: how long postal fills mailstow), PEER_FILL_SECONDS (60: Postfix and Dovecot),
# ONLY (all | mailstow), and bench/lib.sh's PROFILE, NO_BUILD, BIN, SMOKE, LOG_DIR, SHARED_BENCH.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
shared_bench
if [ "$SMOKE" = 1 ]; then
  : "${DURATION:=2}" "${RUNS:=1}" "${PROCS:=2}" "${NUSERS:=20}" "${FILL_SECONDS:=2}" "${PEER_FILL_SECONDS:=3}"
  export QUIET_TIMEOUT=${QUIET_TIMEOUT:-1} DRAIN_QUIET=${DRAIN_QUIET:-1}
fi
export BENCH_ROOT=${BENCH_ROOT:-/tmp/peerbench}
export DURATION=${DURATION:-30} RUNS=${RUNS:-3} PROCS=${PROCS:-8} NUSERS=${NUSERS:-1000}
SCRATCH=${SCRATCH:-/var/tmp/mailstow-bench-pop3}
OUR_SMTP_PORT=2626 OUR_POP3_PORT=2611
LOG=$LOG_DIR/pop3-$(date +%Y%m%d-%H%M%S).log
command -v rabid >/dev/null && command -v postal >/dev/null || "$SHARED_BENCH/setup-peers.sh" install >&2
cd "$ROOT"
build
DATA=$SCRATCH/data SNAP=$SCRATCH/snap

# fill PORT SECONDS: postal mail for every user (16 x 2 connections)
fill() {
  local port=$1 seconds=$2 i
  mkdir -p "$SCRATCH/postal"
  for i in $(seq 16); do
    mkdir -p "$SCRATCH/postal/$i"
    (cd "$SCRATCH/postal/$i" && LD_PRELOAD=$BENCH_ROOT/build/nodelay.so timeout -s KILL "$seconds" \
      postal -t 2 -m 8 -M 8 -c 1 "[127.0.0.1]$port" "$USERS" > /dev/null 2>&1 &)
  done
  sleep $((seconds + 2))
}

start_ours() {
  "$BIN" --data-dir "$DATA" --config "$SCRATCH/mailstow.toml" serve --web "" --smtp "127.0.0.1:$OUR_SMTP_PORT" \
    --submission "" --submissions "" --lmtp "" --pop3 "127.0.0.1:$OUR_POP3_PORT" --pop3s "" \
    > "$SCRATCH/serve.out" 2> "$SCRATCH/serve.err" &
  echo $! > "$SCRATCH/pid"
  for _ in $(seq 100); do grep -q "pop3 listening" "$SCRATCH/serve.out" 2>/dev/null && return; sleep 0.1; done
}
stop_ours() { kill -TERM "$(cat "$SCRATCH/pid")" 2>/dev/null; while kill -0 "$(cat "$SCRATCH/pid")" 2>/dev/null; do sleep 0.1; done; }

# Our users: the peers' list (setup-peers.sh write_users), written here so mailstow needs no
# earlier peer run (outside SCRATCH, which each mailstow run empties).
USERS=$SCRATCH.users
mkdir -p "$(dirname "$SCRATCH")"
for ((i = 1; i <= NUSERS; i++)); do printf 'user%04d@example.com pw%04d\n' "$i" "$i"; done > "$USERS"

{
  echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short=12 HEAD)$(git diff --quiet || echo +dirty)"
  echo "# $(uname -r), $(nproc) cores, $(awk '/MemTotal/{printf "%d GiB", $2/1048576}' /proc/meminfo), scratch $SCRATCH on $(df --output=fstype "$(dirname "$SCRATCH")" | tail -1)"
  if [ "${ONLY:-all}" = all ]; then
  # --- Dovecot maildir, filled by Postfix ---
  "$SHARED_BENCH/setup-peers.sh" install >&2
  # (output to a file: the Postfix master it starts keeps its stdout, and would hold the pipe)
  "$SHARED_BENCH/setup-peers.sh" start maildir > "$SCRATCH.peers.out" 2>&1; cat "$SCRATCH.peers.out" >&2
  rm -rf "$BENCH_ROOT/snap/maildir"
  NODELAY=1 POSTAL_PROCS=8 THREADS=1 RUNS=1 DURATION=${PEER_FILL_SECONDS:-60} LABEL=maildir "$SHARED_BENCH/bench-smtp.sh" >&2
  echo "dovecot maildir messages: $(find "$BENCH_ROOT/mail/maildir" -path '*/cur/*' -o -path '*/new/*' -type f | wc -l)" >&2
  LABEL=maildir "$SHARED_BENCH/bench-pop3.sh"
  "$SHARED_BENCH/setup-peers.sh" stop >&2
  fi

  # --- mailstow, filled over SMTP by postal ---
  rm -rf "$SCRATCH"; mkdir -p "$SCRATCH"
  printf '[server]\npassword_length_min = 1\nauth_without_tls = true\nhostname = "bench.example.com"\nsender_checks = false\nlocal_sender_check = false\n' > "$SCRATCH/mailstow.toml"
  "$BIN" --data-dir "$DATA" --config "$SCRATCH/mailstow.toml" init >&2
  "$BIN" --data-dir "$DATA" domain add example.com >&2
  "$BIN" --data-dir "$DATA" --config "$SCRATCH/mailstow.toml" user import "$USERS" >&2
  start_ours
  fill "$OUR_SMTP_PORT" "${FILL_SECONDS:-8}"
  echo "mailstow messages: $(awk '$1=="store_messages_appended"{print $2}' "$DATA/stats")" >&2
  stop_ours
  cp -a "$DATA" "$SNAP"
  start_ours
  {
    echo "set -e"
    declare -p BIN DATA SNAP SCRATCH OUR_SMTP_PORT OUR_POP3_PORT
    declare -f start_ours stop_ours
    echo 'stop_ours; rsync -a --delete "$SNAP/" "$DATA/"; start_ours'
  } > "$SCRATCH/restore.sh"
  export RESTORE_CMD="bash $SCRATCH/restore.sh"
  SERVER_PIDS=$(cat "$SCRATCH/pid") POP3_PORT=$OUR_POP3_PORT USERS_FILE=$USERS LABEL=mailstow SESSIONS_CMD="echo 0" "$SHARED_BENCH/bench-pop3.sh"
  stop_ours
} 2>&1 | tee "$LOG" | grep --line-buffered '^RESULT\|^#\|messages:'
echo "log: $LOG"
smoke_check "$LOG" 'pop3_login_sessions_per_s label=mailstow : median' \
  'pop3_retr1_sessions_per_s label=mailstow : median' 'pop3_retr1_msgs_per_s label=mailstow : median'
