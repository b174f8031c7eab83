#!/usr/bin/env bash
# The thesis's large mailbox over POP3 on mailstow: 80,000 messages (2.5-10 KiB, ~500 MB)
# delivered over SMTP into one user, then shared/bench/pop3probe.py: the first login after
# delivery, warm and cold logins (USER/PASS/STAT/LIST/UIDL/QUIT), and DELE + QUIT of the first,
# middle and last message with the bytes the server process and the disk wrote.
# Dovecot's side of the same experiment: shared/bench/bench-bigmbox.sh (run by
# bench/run-storage.sh, or here with PEERS=1).
# Env: BIG_COUNT (80000), RUNS (3), SCRATCH (/var/tmp/mailstow-bench-big), PEERS (0).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED_BENCH=${SHARED_BENCH:-$(cd "$ROOT/../shared/bench" && pwd)}
export BENCH_ROOT=${BENCH_ROOT:-/tmp/peerbench}
BIG_COUNT=${BIG_COUNT:-80000} RUNS=${RUNS:-3} PEERS=${PEERS:-0}
SCRATCH=${SCRATCH:-/var/tmp/mailstow-bench-big}
SMTP_PORT=2627 POP3_PORT=2612 USER=big@example.com PASS=bigpw
LOG=$ROOT/bench/results/bigmbox-$(date +%Y%m%d-%H%M%S).log
mkdir -p "$ROOT/bench/results"
cd "$ROOT"
cargo build --release --locked -p mailstow 2>&1 | tail -1
BIN=$ROOT/target/release/mailstow
PROBE="python3 $SHARED_BENCH/pop3probe.py 127.0.0.1 $POP3_PORT $USER $PASS"
{
  echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short=12 HEAD)$(git diff --quiet || echo +dirty)"
  echo "# $(uname -r), $(nproc) cores, $(awk '/MemTotal/{printf "%d GiB", $2/1048576}' /proc/meminfo), scratch $SCRATCH on $(df --output=fstype "$(dirname "$SCRATCH")" | tail -1)"
  rm -rf "$SCRATCH"; mkdir -p "$SCRATCH"
  printf '[server]\nauth_without_tls = true\n' > "$SCRATCH/mailstow.toml"
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
    "$SHARED_BENCH/setup-peers.sh" start mbox >&2
    RUNS=$RUNS "$SHARED_BENCH/bench-bigmbox.sh"
    "$SHARED_BENCH/setup-peers.sh" stop >&2
  fi
} 2>&1 | tee "$LOG" | grep --line-buffered '^RESULT\|^#'
echo "log: $LOG"
