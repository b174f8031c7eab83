#!/usr/bin/env bash
# Backups while mail arrives (issue 36): `mailstow backup` of the thesis's large mailbox
# (80,000 messages, 2.5-10 KiB, one user, delivered over SMTP) through the running server,
# then an incremental run after 1,000 more; and SMTP ingest (bench/fill-bigmbox.py, 8
# sessions) alone against ingest while full backups run back to back into fresh
# destinations, alternating, in the same run: the ratio is the backup's cost to SMTP.
#
#   bench/run-backup.sh
#   SMOKE=1 bench/run-backup.sh    300 messages, one round; fails on a zero mailstow figure
#
# Env: BIG_COUNT (80000), NEW_COUNT (1000), INGEST_COUNT (10000), ROUNDS (3), SCRATCH
# (/var/tmp/mailstow-bench-backup), and bench/lib.sh's PROFILE, NO_BUILD, BIN, SMOKE, LOG_DIR.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
if [ "$SMOKE" = 1 ]; then : "${BIG_COUNT:=300}" "${NEW_COUNT:=50}" "${INGEST_COUNT:=200}" "${ROUNDS:=1}"; fi
BIG_COUNT=${BIG_COUNT:-80000} NEW_COUNT=${NEW_COUNT:-1000} INGEST_COUNT=${INGEST_COUNT:-10000} ROUNDS=${ROUNDS:-3}
SCRATCH=${SCRATCH:-/var/tmp/mailstow-bench-backup}
SMTP_PORT=2628 USER=big@example.com
LOG=$LOG_DIR/backup-$(date +%Y%m%d-%H%M%S).log
cd "$ROOT"
build
DATA=$SCRATCH/data
delivered() { awk '$1=="delivered"{print $2}' "$DATA/stats" 2>/dev/null; }
# fill COUNT: sends COUNT messages and waits until all are delivered; prints the seconds.
fill() {
  local want t0 t1
  want=$(( $(delivered) + $1 ))
  t0=$(date +%s.%N)
  python3 "$ROOT/bench/fill-bigmbox.py" "127.0.0.1:$SMTP_PORT" "$USER" "$1" 8 > /dev/null
  until [ "$(delivered)" -ge "$want" ]; do sleep 0.05; done
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc
}
# backup DEST: one `mailstow backup`; prints seconds and the bytes of DEST.
backup() {
  local t0 t1
  t0=$(date +%s.%N)
  "$BIN" --data-dir "$DATA" backup "$1" > /dev/null 2>> "$SCRATCH/backup.err" || { echo "ERROR: backup failed" >&2; exit 1; }
  t1=$(date +%s.%N)
  echo "$(echo "$t1 - $t0" | bc) $(du -sb "$1" | cut -f1)"
}
{
  echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short=12 HEAD)$(git diff --quiet || echo +dirty)"
  echo "# $(uname -r), $(nproc) cores, $(awk '/MemTotal/{printf "%d GiB", $2/1048576}' /proc/meminfo), scratch $SCRATCH on $(df --output=fstype "$(dirname "$SCRATCH")" | tail -1)"
  rm -rf "$SCRATCH"; mkdir -p "$SCRATCH"
  printf '[server]\nsender_checks = false\n' > "$SCRATCH/mailstow.toml"
  "$BIN" --data-dir "$DATA" init >&2
  "$BIN" --data-dir "$DATA" domain add example.com >&2
  "$BIN" --data-dir "$DATA" user add "$USER" --password bigmbox-pw >&2
  "$BIN" --data-dir "$DATA" --config "$SCRATCH/mailstow.toml" serve --web "" --smtp "127.0.0.1:$SMTP_PORT" \
    --submission "" --submissions "" --lmtp "" --pop3 "" --pop3s "" --imap "" --imaps "" --managesieve "" \
    > "$SCRATCH/serve.out" 2> "$SCRATCH/serve.err" & pid=$!
  for _ in $(seq 100); do grep -q "smtp listening" "$SCRATCH/serve.out" 2>/dev/null && break; sleep 0.1; done
  echo "RESULT backup_fill messages=$BIG_COUNT seconds=$(fill "$BIG_COUNT")"
  read -r s b <<< "$(backup "$SCRATCH/backup")"
  echo "RESULT backup_full peer=mailstow messages=$BIG_COUNT seconds=$s bytes=$b"
  fill "$NEW_COUNT" > /dev/null
  read -r s b2 <<< "$(backup "$SCRATCH/backup")"
  echo "RESULT backup_incremental peer=mailstow new=$NEW_COUNT seconds=$s added_bytes=$((b2 - b))"
  "$BIN" --data-dir "$DATA" backup verify "$SCRATCH/backup" > /dev/null 2>> "$SCRATCH/backup.err" \
    && echo "# backup verify: ok" || { echo "ERROR: backup verify failed" >&2; exit 1; }
  for r in $(seq "$ROUNDS"); do
    alone=$(fill "$INGEST_COUNT")
    # Full backups back to back, each into a new destination, while the same mail arrives.
    ( n=0; while [ ! -e "$SCRATCH/stop" ]; do n=$((n + 1)); rm -rf "$SCRATCH/b$n"; backup "$SCRATCH/b$n" > /dev/null; rm -rf "$SCRATCH/b$n"; echo $n > "$SCRATCH/backups"; done ) &
    loop=$!
    sleep 0.5
    during=$(fill "$INGEST_COUNT")
    touch "$SCRATCH/stop"; wait "$loop"; rm -f "$SCRATCH/stop"
    echo "RESULT backup_ingest peer=mailstow run=$r messages=$INGEST_COUNT alone_per_s=$(echo "$INGEST_COUNT / $alone" | bc -l | xargs printf %.0f) during_backup_per_s=$(echo "$INGEST_COUNT / $during" | bc -l | xargs printf %.0f) backups_during=$(cat "$SCRATCH/backups" 2>/dev/null || echo 0)"
  done
  kill -TERM "$pid"; wait "$pid"
} 2>&1 | tee "$LOG" | grep --line-buffered '^RESULT\|^#\|^ERROR'
echo "log: $LOG"
smoke_check "$LOG" "backup_full : seconds bytes" "backup_incremental : seconds added_bytes" \
  "backup_ingest : alone_per_s during_backup_per_s"
