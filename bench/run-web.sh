#!/usr/bin/env bash
# The web view (issue 21): a list page of the 80,000-message mailbox at its newest and oldest
# end, and opening a message, against IMAP UID FETCH of the same 50 messages (ENVELOPE and
# BODY.PEEK[]) on the same server in the same run; then SESSIONS browsers following /events:
# memory per session and the time for one new message to reach them all.
# bench/web-bench.py does the measuring; this script builds, fills and keeps the log.
#   SMOKE=1 bench/run-web.sh     every row with a few hundred messages and sessions; fails on
#                                a zero figure
# Env: BIG_COUNT (80000), RUNS (20), SESSIONS (200), RAMP_STEP (200) and RAMP_STEPS (4) of the
# ramp, SCRATCH (/var/tmp/mailstow-bench-web), and bench/lib.sh's PROFILE, NO_BUILD, BIN,
# SMOKE, LOG_DIR.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
if [ "$SMOKE" = 1 ]; then
  : "${BIG_COUNT:=300}" "${RUNS:=3}" "${SESSIONS:=5}"
  export RAMP_STEP=${RAMP_STEP:-5} RAMP_STEPS=${RAMP_STEPS:-2}
fi
BIG_COUNT=${BIG_COUNT:-80000} RUNS=${RUNS:-20} SESSIONS=${SESSIONS:-200}
SCRATCH=${SCRATCH:-/var/tmp/mailstow-bench-web}
SMTP_PORT=2637 IMAP_PORT=2643 WEB_PORT=2680 USER=big@example.com PASS=bigmbox-pw
LOG=$LOG_DIR/web-$(date +%Y%m%d-%H%M%S).log
cd "$ROOT"
build
{
  echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD -- crates || echo +dirty)"
  echo "# $(uname -r), $(nproc) cores, $(awk '/MemTotal/{printf "%d GiB", $2/1048576}' /proc/meminfo), scratch $SCRATCH, load $(cut -d' ' -f1-3 /proc/loadavg)"
  rm -rf "$SCRATCH"; mkdir -p "$SCRATCH"
  printf '[server]\nauth_without_tls = true\nsender_checks = false\n[log]\nlevel = "warn"\n' > "$SCRATCH/mailstow.toml"
  "$BIN" --data-dir "$SCRATCH/data" init >&2
  "$BIN" --data-dir "$SCRATCH/data" domain add example.com >&2
  "$BIN" --data-dir "$SCRATCH/data" user add "$USER" --password "$PASS" >&2
  "$BIN" --data-dir "$SCRATCH/data" --config "$SCRATCH/mailstow.toml" serve --web "127.0.0.1:$WEB_PORT" \
    --smtp "127.0.0.1:$SMTP_PORT" --imap "127.0.0.1:$IMAP_PORT" --submission "" --submissions "" \
    --lmtp "" --pop3 "" --pop3s "" --imaps "" --managesieve "" > "$SCRATCH/serve.out" 2> "$SCRATCH/serve.err" & pid=$!
  trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null' EXIT
  for _ in $(seq 100); do grep -q "web listening" "$SCRATCH/serve.out" 2>/dev/null && break; sleep 0.1; done
  t0=$(date +%s.%N)
  python3 "$ROOT/bench/fill-bigmbox.py" "127.0.0.1:$SMTP_PORT" "$USER" "$BIG_COUNT" 8 >&2
  until [ "$(awk '$1=="delivered"{print $2}' "$SCRATCH/data/stats" 2>/dev/null)" = "$BIG_COUNT" ]; do sleep 0.05; done
  echo "RESULT web_fill messages=$BIG_COUNT seconds=$(echo "$(date +%s.%N) - $t0" | bc)"
  python3 "$ROOT/bench/web-bench.py" "127.0.0.1:$WEB_PORT" "127.0.0.1:$IMAP_PORT" "$USER" "$PASS" "$pid" \
    "$RUNS" "$SESSIONS" "127.0.0.1:$SMTP_PORT"
  echo "# done $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
} 2>&1 | tee "$LOG" | grep --line-buffered '^RESULT\|^#'
echo "log: $LOG"
smoke_check "$LOG" 'web_fill : messages seconds' 'web_time : median_ms' 'web_ratio : first_page_over_imap last_page_over_imap' \
  "web_live sessions=$SESSIONS heard=$SESSIONS : rss_after_kib last_heard_ms" 'web_ramp :'
