#!/usr/bin/env bash
# Users' mail rules (Sieve) at delivery, side by side in one run: LMTP delivery into
# mailstow with no script, and with the same 50-rule script active for every user; and
# Dovecot's LMTP with Pigeonhole running that script (the peers from bench/peers).
#
#   bench/run-sieve.sh           # RUNS alternating pairs for mailstow, then Dovecot
#   ONLY=mailstow bench/run-sieve.sh
#   SMOKE=1 bench/run-sieve.sh   # tiny counts; fails on a zero mailstow figure
#
# The client is Postfix's smtp-source in LMTP mode (-L), 8 KiB messages, one recipient per
# message rotating over the first RCPT_USERS users (smtp-source sends each message to one
# fixed address, so one process per user runs at once, CONNS connections in all).
# mailstow answers LMTP after the queue's commit and delivers afterwards: its figure is
# messages from the first accepted to the last copy delivered (the mail log's stamps), so it
# counts the rules' work. Dovecot answers LMTP after delivery (and
# Sieve), so its figure is messages over the client's time. The script: 50 rules of the
# kinds clients write (header :contains, address :is/:domain, size, anyof), none of which
# matches the benchmark's messages, so every rule is evaluated and each copy is kept in
# INBOX (the worst case for the interpreter, and no folder growth to compare). The mail log
# is at its default level (info, stderr to a file, as under systemd) in both modes: with
# rules, each copy also logs its action (`event=sieve action=keep`), as Pigeonhole logs
# "stored mail into mailbox".
# Env: MSGS (20000 per run), CONNS (16), RCPT_USERS (16), RUNS (3), NUSERS (1000), SCRATCH
# (/var/tmp/mailstow-bench-sieve), and bench/lib.sh's PROFILE, NO_BUILD, BIN, SMOKE, LOG_DIR.
# Output: RESULT lines, the log in bench/results/.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
shared_bench
if [ "$SMOKE" = 1 ]; then
  : "${MSGS:=200}" "${RUNS:=1}" "${NUSERS:=20}" "${CONNS:=4}" "${RCPT_USERS:=4}"
fi
export BENCH_ROOT=${BENCH_ROOT:-/tmp/peerbench}
export NUSERS=${NUSERS:-1000} RUNS=${RUNS:-3}
MSGS=${MSGS:-20000} CONNS=${CONNS:-16} RCPT_USERS=${RCPT_USERS:-16}
SCRATCH=${SCRATCH:-/var/tmp/mailstow-bench-sieve}
OUR_LMTP_PORT=2624
LOG=$LOG_DIR/sieve-$(date +%Y%m%d-%H%M%S).log
command -v smtp-source >/dev/null || "$SHARED_BENCH/setup-peers.sh" install >&2
apt_install dovecot-sieve

cd "$ROOT"
build

USERS=$SCRATCH.users
for ((i = 1; i <= NUSERS; i++)); do printf 'user%04d@example.com pw%04d\n' "$i" "$i"; done > "$USERS"

# The 50 rules.
SCRIPT=$SCRATCH.sieve
{
  echo 'require ["fileinto", "imap4flags", "relational", "comparator-i;ascii-numeric"];'
  for ((r = 1; r <= 50; r++)); do
    case $((r % 5)) in
      0) echo "if header :contains \"subject\" \"project-$r\" { fileinto \"Projects\"; stop; }" ;;
      1) echo "if address :is \"from\" \"boss$r@corp.example\" { addflag \"\\\\Flagged\"; }" ;;
      2) echo "if address :domain :is \"from\" \"list$r.example\" { fileinto \"Lists\"; stop; }" ;;
      3) echo "if anyof (header :contains \"x-mailer\" \"bulk$r\", header :is \"precedence\" \"junk$r\") { fileinto \"Junk\"; stop; }" ;;
      4) echo "if size :over ${r}M { addflag \"big\"; }" ;;
    esac
  done
} > "$SCRIPT"

median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END{print (NR%2)? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

# lmtp_load PORT: CONNS connections over RCPT_USERS recipients, MSGS messages in all; prints
# the seconds the client took.
lmtp_load() {
  local port=$1 per=$((MSGS / RCPT_USERS)) each=$(( (CONNS + RCPT_USERS - 1) / RCPT_USERS )) pids=() t0 t1 u
  [ "$each" -lt 1 ] && each=1
  t0=$(date +%s.%N)
  for ((u = 1; u <= RCPT_USERS; u++)); do
    smtp-source -L -d -s "$each" -l 8192 -m "$per" -f sender@example.org \
      -t "$(printf 'user%04d@example.com' "$u")" "127.0.0.1:$port" > /dev/null 2>&1 & pids+=($!)
  done
  wait "${pids[@]}"
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc
}

# One mailstow run: a fresh data directory, the script active for every user or none.
mailstow_run() {  # MODE(rules|none) RUN
  local mode=$1 run=$2 pid a0 d0 target t0 t1 delivered
  rm -rf "$SCRATCH"; mkdir -p "$SCRATCH"
  printf '[server]\npassword_length_min = 1\nsender_checks = false\nlocal_sender_check = false\n[log]\nlevel = "info"\n' > "$SCRATCH.toml"
  "$BIN" --config "$SCRATCH.toml" --data-dir "$SCRATCH" init >&2 || return 1
  "$BIN" --config "$SCRATCH.toml" --data-dir "$SCRATCH" domain add example.com >&2 || return 1
  "$BIN" --config "$SCRATCH.toml" --data-dir "$SCRATCH" user import "$USERS" >&2 || return 1
  if [ "$mode" = rules ]; then
    for ((i = 1; i <= NUSERS; i++)); do
      "$BIN" --config "$SCRATCH.toml" --data-dir "$SCRATCH" sieve put "$(printf 'user%04d@example.com' "$i")" rules "$SCRIPT" --activate > /dev/null || return 1
    done
  fi
  "$BIN" --config "$SCRATCH.toml" --data-dir "$SCRATCH" serve --web "" --smtp "" --lmtp "127.0.0.1:$OUR_LMTP_PORT" \
    --submission "" --submissions "" --pop3 "" --pop3s "" --imap "" --imaps "" --managesieve "" \
    > "$SCRATCH.out" 2> "$SCRATCH.err" & pid=$!
  for _ in $(seq 100); do grep -q "lmtp listening" "$SCRATCH.out" 2>/dev/null && break; sleep 0.1; done
  sleep 1.5
  stat_of() { awk -v k="$1" '$1==k{print $2}' "$SCRATCH/stats"; }
  d0=$(stat_of delivered); target=$((d0 + (MSGS / RCPT_USERS) * RCPT_USERS))
  t0=$(date +%s.%N)
  lmtp_load "$OUR_LMTP_PORT" > /dev/null
  # The stats file is written every second: the last copy's time is within that of this.
  for _ in $(seq 600); do
    delivered=$(stat_of delivered)
    [ "${delivered:-0}" -ge "$target" ] && break
    sleep 0.1
  done
  t1=$(date +%s.%N)
  kill -TERM "$pid"; wait "$pid" || true
  if [ "${delivered:-0}" -lt "$target" ]; then
    echo "mailstow ($mode) delivered ${delivered:-0} of $target; server said: $(tail -3 "$SCRATCH.err")" >&2
    return 1
  fi
  local rules_errors rules_lines span
  rules_errors=$(grep -c 'event=sieve_error' "$SCRATCH.err")
  rules_lines=$(grep -c 'event=sieve ' "$SCRATCH.err")
  # The stats file is written once a second, too coarse for a few seconds' run: the time is
  # the mail log's, from the first message accepted to the last copy delivered (ms stamps).
  span=$(python3 - "$SCRATCH.err" <<'PY'
import sys, datetime
first = last = None
for line in open(sys.argv[1], errors="replace"):
    if " event=accepted " in line or " event=delivered " in line:
        ts = datetime.datetime.strptime(line[3:27], "%Y-%m-%dT%H:%M:%S.%fZ")
        if first is None and " event=accepted " in line:
            first = ts
        if " event=delivered " in line:
            last = ts
print((last - first).total_seconds() if first and last else 0)
PY
)
  echo "RESULT sieve_lmtp_delivered label=mailstow-$mode run=$run msgs=$((target - d0)) seconds=$span msgs_per_s=$(echo "scale=1; ($target - $d0) / $span" | bc) client_seconds=$(echo "$t1 - $t0" | bc) sieve_lines=$rules_lines sieve_errors=$rules_errors"
}

{
  echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short=12 HEAD)$(git diff --quiet || echo +dirty)"
  echo "# $(uname -r), $(nproc) cores, $(awk '/MemTotal/{printf "%d GiB", $2/1048576}' /proc/meminfo), scratch $SCRATCH on $(df --output=fstype "$(dirname "$SCRATCH")" | tail -1)"
  echo "# $MSGS messages of 8 KiB per run over LMTP, $CONNS connections, $RCPT_USERS recipients; script $(grep -c '^if' "$SCRIPT") rules"
  with=() without=()
  for ((r = 1; r <= RUNS; r++)); do
    for mode in none rules; do
      line=$(mailstow_run "$mode" "$r") || { echo "mailstow run failed" >&2; exit 1; }
      echo "$line"
      rate=$(echo "$line" | sed -n 's/.*msgs_per_s=\([0-9.]*\).*/\1/p')
      if [ "$mode" = rules ]; then with+=("$rate"); else without+=("$rate"); fi
    done
  done
  echo "RESULT sieve_lmtp_ratio median_rules=$(median "${with[@]}") median_none=$(median "${without[@]}") ratio=$(echo "scale=3; $(median "${with[@]}") / $(median "${without[@]}")" | bc) runs=$RUNS rules=${with[*]} none=${without[*]}"

  if [ "${ONLY:-all}" = all ]; then
    # Dovecot's LMTP with Pigeonhole and the same script for every user (sieve_before: one
    # compiled script, as `sieve put` makes one per user here; its per-message cost is the
    # same).
    "$SHARED_BENCH/setup-peers.sh" install >&2
    conf=$BENCH_ROOT/etc/dovecot/dovecot.conf
    peer=()
    for ((r = 1; r <= RUNS; r++)); do
      # Fresh mailboxes each run, as mailstow's: a maildir that grew by the earlier runs'
      # messages slows Dovecot down run after run.
      "$SHARED_BENCH/setup-peers.sh" stop > /dev/null 2>&1
      "$SHARED_BENCH/setup-peers.sh" wipe maildir > /dev/null 2>&1
      "$SHARED_BENCH/setup-peers.sh" start maildir > "$SCRATCH.peers.out" 2>&1; cat "$SCRATCH.peers.out" >&2
      cp "$SCRIPT" "$BENCH_ROOT/rules.sieve"; chmod 644 "$BENCH_ROOT/rules.sieve"
      sievec "$BENCH_ROOT/rules.sieve" >&2
      sed -i 's|^  postmaster_address = .*|&\n  mail_plugins = $mail_plugins sieve|' "$conf"
      printf 'plugin {\n  sieve_before = %s\n}\n' "$BENCH_ROOT/rules.sieve" >> "$conf"
      dovecot -c "$conf" reload; sleep 1
      secs=$(lmtp_load 2424)
      total=$(( (MSGS / RCPT_USERS) * RCPT_USERS ))
      rate=$(echo "scale=1; $total / $secs" | bc)
      peer+=("$rate")
      echo "RESULT sieve_lmtp_delivered label=dovecot-pigeonhole run=$r msgs=$total seconds=$secs msgs_per_s=$rate"
    done
    grep -c 'sieve' "$BENCH_ROOT/log/dovecot.log" | sed 's/^/dovecot log lines naming sieve: /' >&2
    "$SHARED_BENCH/setup-peers.sh" stop >&2
    echo "RESULT sieve_lmtp_vs_dovecot median_mailstow_rules=$(median "${with[@]}") median_dovecot=$(median "${peer[@]}") ratio=$(echo "scale=2; $(median "${with[@]}") / $(median "${peer[@]}")" | bc)"
  fi
} 2>&1 | tee "$LOG" | grep --line-buffered '^RESULT\|^#'
echo "log: $LOG"
smoke_check "$LOG" 'sieve_lmtp_delivered label=mailstow-none : msgs msgs_per_s' \
  'sieve_lmtp_delivered label=mailstow-rules : msgs msgs_per_s' \
  'sieve_lmtp_ratio : median_rules median_none ratio'
