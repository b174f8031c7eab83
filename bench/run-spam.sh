#!/usr/bin/env bash
# The spam filter's cost and quality (docs/spam.md), side by side in one run:
#  1. SMTP ingest on the MX port with the built-in filter off and on (its site-wide model
#     trained, so every message is tokenized, classified and scored before its 250), and with
#     rspamd 3.4 through milter (the built-in filter off) against neither; alternating runs.
#  2. The classifier's quality on the synthetic labelled corpus (trained on one half, tested
#     on the other): precision, recall, false positives (`spam` crate's `quality` example).
#  3. One user's classifier after 10,000 trained messages: its tokens, its bytes in memory
#     (`spam stats`) and on disk (the directory file's growth).
#
#   bench/run-spam.sh            # RUNS alternating runs of each mode
#   SMOKE=1 bench/run-spam.sh    # tiny counts; fails on a zero mailstow figure
#
# The client is Postfix's smtp-source (-d -s CONNS, 8 KiB messages, one recipient per
# message rotating over the first RCPT_USERS users); the figure is accepted messages over
# the client's time. sender_checks are off (no DNS to ask here) in every mode.
# rspamd runs from Debian's package with the tests' private configuration (test-peers'
# `test-peer rspamd`: Redis, no network modules).
# Env: MSGS (10000 per run), CONNS (16), RCPT_USERS (16), RUNS (3), NUSERS (100), TRAIN_MSGS
# (2000, the site model's corpus), FOOTPRINT_MSGS (10000), SCRATCH
# (/var/tmp/mailstow-bench-spam), and bench/lib.sh's PROFILE, NO_BUILD, BIN, SMOKE, LOG_DIR.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
shared_bench
if [ "$SMOKE" = 1 ]; then
  : "${MSGS:=200}" "${RUNS:=1}" "${NUSERS:=20}" "${CONNS:=4}" "${RCPT_USERS:=4}"
  : "${TRAIN_MSGS:=120}" "${FOOTPRINT_MSGS:=300}"
fi
MSGS=${MSGS:-10000} CONNS=${CONNS:-16} RCPT_USERS=${RCPT_USERS:-16} RUNS=${RUNS:-3}
NUSERS=${NUSERS:-100} TRAIN_MSGS=${TRAIN_MSGS:-2000} FOOTPRINT_MSGS=${FOOTPRINT_MSGS:-10000}
SCRATCH=${SCRATCH:-/var/tmp/mailstow-bench-spam}
OUR_SMTP_PORT=2626
LOG=$LOG_DIR/spam-$(date +%Y%m%d-%H%M%S).log
command -v smtp-source >/dev/null || "$SHARED_BENCH/setup-peers.sh" install >&2
apt_install rspamd redis-server

cd "$ROOT"
build
if [ "${NO_BUILD:-0}" != 1 ]; then
  cargo build --profile "$PROFILE" --locked -p spam --features corpus --example corpus_maildir --example quality >&2 || exit 1
  cargo build --profile "$PROFILE" --locked -p test-peers --bin test-peer >&2 || exit 1
fi
EXAMPLES=$BIN_DIR/examples
PEER=$BIN_DIR/test-peer

USERS=$SCRATCH.users
for ((i = 1; i <= NUSERS; i++)); do printf 'user%04d@example.com pw%04d\n' "$i" "$i"; done > "$USERS"
printf 'trainer@example.com pw\n' >> "$USERS"

median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END{print (NR%2)? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

# smtp_load PORT: CONNS connections over RCPT_USERS recipients, MSGS messages in all; prints
# the seconds the client took.
smtp_load() {
  local port=$1 per=$((MSGS / RCPT_USERS)) each=$(( (CONNS + RCPT_USERS - 1) / RCPT_USERS )) pids=() t0 t1 u
  [ "$each" -lt 1 ] && each=1
  t0=$(date +%s.%N)
  for ((u = 1; u <= RCPT_USERS; u++)); do
    smtp-source -d -s "$each" -l 8192 -m "$per" -f sender@example.org \
      -t "$(printf 'user%04d@example.com' "$u")" "127.0.0.1:$port" > /dev/null 2>&1 & pids+=($!)
  done
  wait "${pids[@]}"
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc
}

ms() { "$BIN" --config "$SCRATCH.toml" --data-dir "$SCRATCH" "$@"; }

# serve: the server on the MX port only; waits for it.
serve() {
  # The binary itself in the background (not the `ms` function: its PID must be the server's).
  "$BIN" --config "$SCRATCH.toml" --data-dir "$SCRATCH" serve --web "" --lmtp "" --smtp "127.0.0.1:$OUR_SMTP_PORT" --submission "" --submissions "" \
    --pop3 "" --pop3s "" --imap "" --imaps "" --managesieve "" > "$SCRATCH.out" 2> "$SCRATCH.err" &
  SERVER=$!
  for _ in $(seq 100); do grep -q "smtp listening" "$SCRATCH.out" 2>/dev/null && break; sleep 0.1; done
}

# One run: a fresh data directory and the mode's [spam] section.
run() {  # MODE(off|builtin|none|rspamd) RUN
  local mode=$1 run=$2 spam secs accepted
  rm -rf "$SCRATCH"; mkdir -p "$SCRATCH"
  case $mode in
    off | none) spam='enabled = false' ;;
    builtin) spam='enabled = true' ;;
    rspamd) spam=$(printf 'enabled = false\n[[spam.milters]]\nname = "rspamd"\naddress = "%s"\n' "$RSPAMD_MILTER") ;;
  esac
  printf '[server]\npassword_length_min = 1\nsender_checks = false\nlocal_sender_check = false\n[log]\nlevel = "info"\n[spam]\n%s\n' "$spam" > "$SCRATCH.toml"
  ms init >&2 || return 1
  ms domain add example.com >&2 || return 1
  ms user import "$USERS" >&2 || return 1
  serve
  if [ "$mode" = builtin ]; then
    # The site-wide model every user falls back to, trained from the corpus.
    ms mailbox import trainer@example.com "$SCRATCH.train" >&2 || return 1
    ms spam train trainer@example.com --spam --site Junk >&2 || return 1
    ms spam train trainer@example.com --ham --site INBOX >&2 || return 1
  fi
  local a0 a1
  a0=$(awk '$1=="accepted"{print $2}' "$SCRATCH/stats" 2>/dev/null)
  secs=$(smtp_load "$OUR_SMTP_PORT")
  sleep 1.2
  a1=$(awk '$1=="accepted"{print $2}' "$SCRATCH/stats")
  accepted=$(( ${a1:-0} - ${a0:-0} ))
  kill -TERM "$SERVER"; wait "$SERVER" || true
  local verdicts
  verdicts=$(grep -c 'event=spam ' "$SCRATCH.err")
  echo "RESULT spam_smtp_ingest label=mailstow-$mode run=$run msgs=$accepted seconds=$secs msgs_per_s=$(echo "scale=1; $accepted / $secs" | bc) spam_lines=$verdicts"
}

{
  echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short=12 HEAD)$(git diff --quiet || echo +dirty)"
  echo "# $(uname -r), $(nproc) cores, $(awk '/MemTotal/{printf "%d GiB", $2/1048576}' /proc/meminfo), scratch $SCRATCH on $(df --output=fstype "$(dirname "$SCRATCH")" | tail -1)"
  echo "# $MSGS messages of 8 KiB per run over SMTP (MX), $CONNS connections, $RCPT_USERS recipients; site model from $TRAIN_MSGS corpus messages"
  rm -rf "$SCRATCH.train"; "$EXAMPLES/corpus_maildir" "$SCRATCH.train" "$TRAIN_MSGS" 3 >&2
  # rspamd for the milter runs, kept up until its input closes.
  coproc PEER_PROC { "$PEER" rspamd; }
  read -r -u "${PEER_PROC[0]}" line || { echo "rspamd did not start" >&2; exit 1; }
  RSPAMD_MILTER=$(echo "$line" | sed -n 's/.*milter=\([^ ]*\).*/\1/p')
  declare -A rates
  for ((r = 1; r <= RUNS; r++)); do
    for mode in off builtin none rspamd; do
      line=$(run "$mode" "$r") || { echo "mailstow run $mode failed: $(tail -3 "$SCRATCH.err")" >&2; exit 1; }
      echo "$line"
      rates[$mode]="${rates[$mode]:-} $(echo "$line" | sed -n 's/.*msgs_per_s=\([0-9.]*\).*/\1/p')"
    done
  done
  eval "exec ${PEER_PROC[1]}>&-"; wait "$PEER_PROC_PID" 2>/dev/null
  on=$(median ${rates[builtin]}) off=$(median ${rates[off]})
  echo "RESULT spam_ingest_ratio median_builtin=$on median_off=$off ratio=$(echo "scale=3; $on / $off" | bc) runs=$RUNS builtin=${rates[builtin]# } off=${rates[off]# }"
  on=$(median ${rates[rspamd]}) off=$(median ${rates[none]})
  echo "RESULT spam_milter_ratio median_rspamd=$on median_none=$off ratio=$(echo "scale=3; $on / $off" | bc) runs=$RUNS rspamd=${rates[rspamd]# } none=${rates[none]# }"

  # 2. Quality on the labelled corpus.
  "$EXAMPLES/quality" 1 | sed 's/^/# quality: /'
  q=$("$EXAMPLES/quality" 1)
  cell() { echo "$q" | awk -F'|' -v k="$1" '$2 ~ "^ *"k {gsub(/ /, "", $3); print $3; exit}'; }
  precision=$(cell precision) recall=$(cell recall)
  echo "RESULT spam_quality corpus=synthetic precision=$precision recall=$recall"

  # 3. One user's classifier after FOOTPRINT_MSGS trained messages.
  rm -rf "$SCRATCH"; mkdir -p "$SCRATCH"
  printf '[server]\npassword_length_min = 1\nsender_checks = false\n[log]\nlevel = "warn"\n' > "$SCRATCH.toml"
  ms init >&2; ms domain add example.com >&2; ms user import "$USERS" >&2
  rm -rf "$SCRATCH.foot"; "$EXAMPLES/corpus_maildir" "$SCRATCH.foot" "$FOOTPRINT_MSGS" 11 >&2
  serve
  ms mailbox import user0001@example.com "$SCRATCH.foot" >&2
  # The database file alone, with the server stopped and its write-ahead log folded in
  # (checkpointed and truncated): a -wal file's size says nothing about the data.
  size() {
    python3 -c "import sqlite3,sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')" "$SCRATCH/directory.db"
    stat -c %s "$SCRATCH/directory.db"
  }
  # The directory without the classifier: measured with the server stopped, as after.
  kill -TERM "$SERVER"; wait "$SERVER" || true
  before=$(size)
  serve
  t0=$(date +%s.%N)
  ms spam train user0001@example.com --spam Junk >&2
  ms spam train user0001@example.com --ham INBOX >&2
  t1=$(date +%s.%N)
  stats=$(ms spam stats user0001@example.com)
  kill -TERM "$SERVER"; wait "$SERVER" || true
  # After the server's stop: SQLite's write-ahead log checkpointed into the file.
  after=$(size)
  echo "$stats" | sed 's/^/# stats: /'
  tokens=$(echo "$stats" | awk '/^tokens:/{print $2}')
  memory=$(echo "$stats" | awk '/^in memory:/{print $3}')
  echo "RESULT spam_footprint trained=$FOOTPRINT_MSGS tokens=$tokens memory_bytes=$memory disk_bytes=$((after - before)) train_seconds=$(echo "$t1 - $t0" | bc)"
} 2>&1 | tee "$LOG" | grep --line-buffered '^RESULT\|^#'
echo "log: $LOG"
smoke_check "$LOG" 'spam_smtp_ingest label=mailstow-off : msgs msgs_per_s' \
  'spam_smtp_ingest label=mailstow-builtin : msgs msgs_per_s spam_lines' \
  'spam_smtp_ingest label=mailstow-rspamd : msgs msgs_per_s' \
  'spam_ingest_ratio : ratio' 'spam_milter_ratio : ratio' \
  'spam_footprint : tokens memory_bytes disk_bytes'
