#!/usr/bin/env bash
# The thesis's large mailbox over POP3 on mailstow: 80,000 messages (2.5-10 KiB, ~500 MB)
# delivered over SMTP into one user, then shared/bench/pop3probe.py: the first login after
# delivery, warm and cold logins (USER/PASS/STAT/LIST/UIDL/QUIT), and DELE + QUIT of the first,
# middle and last message with the bytes the server process and the disk wrote.
# Dovecot's side of the same experiment: shared/bench/bench-bigmbox.sh (run by
# bench/run-storage.sh, or here with PEERS=1).
#   SMOKE=1 bench/run-bigmbox.sh    300 messages, one run of each row, the peers too; fails on a
#                                   zero mailstow figure
# Env: BIG_COUNT (80000), RUNS (3), SCRATCH (/var/tmp/mailstow-bench-big), PEERS (0), and
# bench/lib.sh's PROFILE, NO_BUILD, BIN, SMOKE, LOG_DIR, SHARED_BENCH.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
shared_bench
if [ "$SMOKE" = 1 ]; then : "${BIG_COUNT:=300}" "${RUNS:=1}" "${PEERS:=1}"; fi
export BENCH_ROOT=${BENCH_ROOT:-/tmp/peerbench}
BIG_COUNT=${BIG_COUNT:-80000} RUNS=${RUNS:-3} PEERS=${PEERS:-0}
SCRATCH=${SCRATCH:-/var/tmp/mailstow-bench-big}
SMTP_PORT=2627 POP3_PORT=2612 USER=big@example.com PASS=bigmbox-pw
LOG=$LOG_DIR/bigmbox-$(date +%Y%m%d-%H%M%S).log
cd "$ROOT"
build
PROBE="python3 $SHARED_BENCH/pop3probe.py 127.0.0.1 $POP3_PORT $USER $PASS"
{
  echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short=12 HEAD)$(git diff --quiet || echo +dirty)"
  echo "# $(uname -r), $(nproc) cores, $(awk '/MemTotal/{printf "%d GiB", $2/1048576}' /proc/meminfo), scratch $SCRATCH on $(df --output=fstype "$(dirname "$SCRATCH")" | tail -1)"
  rm -rf "$SCRATCH"; mkdir -p "$SCRATCH"
  printf '[server]\nauth_without_tls = true\n' > "$SCRATCH/mailstow.toml"
  # The smoke run must not wait on this machine's DNS (SPF of the filler's example.org).
  [ "$SMOKE" = 1 ] && printf 'sender_checks = false\n' >> "$SCRATCH/mailstow.toml"
  "$BIN" --data-dir "$SCRATCH/data" init >&2
  "$BIN" --data-dir "$SCRATCH/data" domain add example.com >&2
  "$BIN" --data-dir "$SCRATCH/data" user add "$USER" --password "$PASS" >&2
  "$BIN" --data-dir "$SCRATCH/data" --config "$SCRATCH/mailstow.toml" serve --web "" --smtp "127.0.0.1:$SMTP_PORT" \
    --submission "" --submissions "" --lmtp "" --pop3 "127.0.0.1:$POP3_PORT" --pop3s "" \
    > "$SCRATCH/serve.out" 2> "$SCRATCH/serve.err" & pid=$!
  for _ in $(seq 100); do grep -q "pop3 listening" "$SCRATCH/serve.out" 2>/dev/null && break; sleep 0.1; done
  t0=$(date +%s.%N)
  python3 "$ROOT/bench/fill-bigmbox.py" "127.0.0.1:$SMTP_PORT" "$USER" "$BIG_COUNT" 8 >&2
  until [ "$(awk '$1=="delivered"{print $2}' "$SCRATCH/data/stats" 2>/dev/null)" = "$BIG_COUNT" ]; do sleep 0.05; done
  t1=$(date +%s.%N)
  echo "RESULT big_fill messages=$BIG_COUNT seconds=$(echo "$t1 - $t0" | bc) store_bytes=$(du -sb "$SCRATCH/data/store" | cut -f1)"
  # The first login after the mail was delivered (the index was built as it arrived).
  echo "RESULT big_login phase=first $($PROBE auth)"
  for r in $(seq "$RUNS"); do
    sync; echo 3 > /proc/sys/vm/drop_caches
    echo "RESULT big_login phase=cold run=$r $($PROBE auth)"
  done
  for r in $(seq "$RUNS"); do
    echo "RESULT big_login phase=warm run=$r $($PROBE auth)"
  done
  for which in last middle first; do
    for r in $(seq "$RUNS"); do
      sync
      echo "RESULT big_dele which=$which run=$r $($PROBE dele "$which" --io-pid "$pid")"
    done
  done
  kill -TERM "$pid"; wait "$pid"
  if [ "$PEERS" = 1 ]; then
    "$SHARED_BENCH/setup-peers.sh" install >&2
    # (output to a file: the Postfix master it starts keeps its stdout, and would hold the pipe)
    "$SHARED_BENCH/setup-peers.sh" start mbox > "$SCRATCH/peers.out" 2>&1; cat "$SCRATCH/peers.out" >&2
    RUNS=$RUNS BIG_COUNT=$BIG_COUNT "$SHARED_BENCH/bench-bigmbox.sh"
    "$SHARED_BENCH/setup-peers.sh" stop >&2
  fi
} 2>&1 | tee "$LOG" | grep --line-buffered '^RESULT\|^#'
echo "log: $LOG"
smoke_check "$LOG" "big_fill messages=$BIG_COUNT : seconds store_bytes" "big_login : msgs auth_total_ms login_ms" \
  "big_dele : quit_ms proc_wchar"
