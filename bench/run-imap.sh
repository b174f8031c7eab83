#!/usr/bin/env bash
# IMAP on one big folder, side by side in one run: Dovecot (the peer from shared/bench, maildir by
# default) against `mailstow serve`. One user's INBOX holds MESSAGES (80,000) realistic messages
# of 2.5-10 KiB (~512 MB, distinct Message-ID and Subject), then bench/imap-bench.py runs the rows:
#   select (SELECT INBOX, warm), fetch_all (UID FETCH 1:* (UID FLAGS RFC822.SIZE)),
#   search_msgid / search_subject (first and warm), body_fetch_* (BODY.PEEK[] of 1,000 random
#   UIDs: total, p50, p99), append (10,000 x 8 KiB over 8 connections, msg/s), expunge (UID
#   EXPUNGE of 1,000 UIDs), idle_* (200 sessions in IDLE, one APPEND: max and p50 until all saw
#   EXISTS, from the APPEND's tagged OK and from sending it).
# See imap-bench.py's header for each row's exact method.
#
#   bench/run-imap.sh                  both peers, then one RATIO line per row
#   ONLY=dovecot bench/run-imap.sh     one peer only (ONLY=mailstow: the other)
#   MESSAGES=5000 RUNS=3 ONLY=dovecot bench/run-imap.sh     a quick run
#   SMOKE=1 bench/run-imap.sh          every row (sort and qresync too) on 200 messages, both
#                                      peers; fails on a zero mailstow figure
#
# Filling: Dovecot maildir is written straight into the user's Maildir/cur (DOVECOT_FILL=direct,
# like shared/bench/mkmailbox.py; the first SELECT then builds its index and is reported apart as
# select_prime); mdbox is imported with doveadm import from such a maildir. DOVECOT_FILL=lmtp
# delivers through Dovecot's LMTP instead. mailstow is filled through its LMTP listener
# (MAILSTOW_FILL=lmtp, or smtp). Both get the same messages (fixed seed).
# Dovecot is started by setup-peers.sh; this script then raises, in its generated dovecot.conf,
# mail_max_userip_connections (default 10) for the IDLE row and, with DOVECOT_TUNED=1 (the
# default), appends the tuning of bench/dovecot-tuning.sh for IDLE_SESSIONS + APPEND_CONNS + 50
# connections (its header says what and why): login processes in high-performance mode
# (service imap-login { service_count = 0; process_min_avail = 2; client_limit }), imap process
# reuse (service imap { service_count = 100 }, process_limit raised), imap_hibernate_timeout =
# DOVECOT_HIBERNATE (5s; IDLE sessions move to the shared imap-hibernate process), raised
# default_client_limit/default_process_limit; DOVECOT_TUNED=0 gives the untuned peer of the
# earlier runs. It restarts Dovecot with that, and raises fs.inotify.max_user_instances (often
# 128: every Dovecot imap process in IDLE takes one inotify
# instance, all as user vmail; past the limit IDLE falls back to polling every 30 s) for the run,
# restoring it at the end.
# With hibernation on, the IDLE row waits IDLE_SETTLE seconds (default: the hibernate timeout +
# 2 s, else 1 s) after the sessions are idling and between its rounds, for both peers, so that
# Dovecot's sessions are hibernated when the APPEND arrives.
# mailstow runs with [server] auth_without_tls = true (LOGIN on the plaintext port, as the POP3
# bench does) and connections_per_ip_max and imap_sessions_per_user_max raised for the IDLE row; MAILSTOW_TOML_EXTRA adds more
# [server] lines (e.g. a per-user session limit once the config has one).
# Env: MESSAGES (80000), RUNS (5), FORMAT (maildir|mdbox), ONLY (all|dovecot|mailstow),
# ROWS (select,fetch,search,body,append,expunge,idle; also sort and qresync), IDLE_SESSIONS (200), IDLE_ROUNDS (3),
# APPEND_TOTAL (10000), APPEND_CONNS (8), BODY_FETCHES (1000), EXPUNGE_COUNT (1000),
# LITERAL_PLUS (auto|yes|no), SCRATCH (/var/tmp/mailstow-bench-imap), bench/lib.sh's PROFILE,
# NO_BUILD (0), BIN (target/<profile>/mailstow: the binary to run; NO_BUILD=1 with another one),
# SMOKE and LOG_DIR,
# DOVECOT_TUNED (1), DOVECOT_HIBERNATE (5s; 0 = off), IDLE_SETTLE (s),
# QUIET_WAIT (1: wait, bounded, for an idle machine before each peer), DC_USER/DC_PASS
# (user0999@example.com / pw0999).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
shared_bench
if [ "$SMOKE" = 1 ]; then
  : "${MESSAGES:=200}" "${RUNS:=1}" "${IDLE_SESSIONS:=5}" "${IDLE_ROUNDS:=1}" "${APPEND_TOTAL:=40}" "${APPEND_CONNS:=2}"
  : "${BODY_FETCHES:=20}" "${EXPUNGE_COUNT:=10}" "${QUIET_WAIT:=0}" "${DOVECOT_HIBERNATE:=1s}"
  : "${ROWS:=select,fetch,search,body,append,expunge,idle,sort,qresync}"
fi
export BENCH_ROOT=${BENCH_ROOT:-/tmp/peerbench}
RUNS=${RUNS:-5}   # before common.sh, whose default is 3
. "$SHARED_BENCH/common.sh"
MESSAGES=${MESSAGES:-80000} FORMAT=${FORMAT:-maildir} ONLY=${ONLY:-all}
ROWS=${ROWS:-select,fetch,search,body,append,expunge,idle}
IDLE_SESSIONS=${IDLE_SESSIONS:-200} IDLE_ROUNDS=${IDLE_ROUNDS:-3}
APPEND_TOTAL=${APPEND_TOTAL:-10000} APPEND_CONNS=${APPEND_CONNS:-8}
BODY_FETCHES=${BODY_FETCHES:-1000} EXPUNGE_COUNT=${EXPUNGE_COUNT:-1000} LITERAL_PLUS=${LITERAL_PLUS:-auto}
DOVECOT_FILL=${DOVECOT_FILL:-direct} MAILSTOW_FILL=${MAILSTOW_FILL:-lmtp}
SCRATCH=${SCRATCH:-/var/tmp/mailstow-bench-imap}
DC_USER=${DC_USER:-user0999@example.com} DC_PASS=${DC_PASS:-pw0999}
OUR_USER=imapbench@example.com OUR_PASS=imapbenchpw
OUR_IMAP_PORT=${OUR_IMAP_PORT:-2643} OUR_LMTP_PORT=${OUR_LMTP_PORT:-2644} OUR_SMTP_PORT=${OUR_SMTP_PORT:-2645}
case $FORMAT in maildir|mdbox) ;; *) die "FORMAT=$FORMAT: maildir or mdbox" ;; esac
case $ONLY in all|dovecot|mailstow) ;; *) die "ONLY=$ONLY: all, dovecot or mailstow" ;; esac
LOG=$LOG_DIR/imap-$(date +%Y%m%d-%H%M%S).log
mkdir -p "$SCRATCH"
cd "$ROOT"
BENCHPY=$ROOT/bench/imap-bench.py
DOVECOT_TUNED=${DOVECOT_TUNED:-1}
. "$ROOT/bench/dovecot-tuning.sh"
if [ -z "${IDLE_SETTLE:-}" ]; then
  IDLE_SETTLE=1
  if [ "$DOVECOT_TUNED" = 1 ] && [ "${DOVECOT_HIBERNATE%s}" != 0 ]; then IDLE_SETTLE=$(( ${DOVECOT_HIBERNATE%s} + 2 )); fi
fi
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

run_rows() {  # PEER PORT USER PASS
  python3 "$BENCHPY" run --host "$HOST" --port "$2" --user "$3" --password "$4" --peer "$1" \
    --messages "$MESSAGES" --rows "$ROWS" --runs "$RUNS" --body-fetches "$BODY_FETCHES" \
    --append-total "$APPEND_TOTAL" --append-conns "$APPEND_CONNS" --expunge-count "$EXPUNGE_COUNT" \
    --idle-sessions "$IDLE_SESSIONS" --idle-rounds "$IDLE_ROUNDS" --literal-plus "$LITERAL_PLUS" \
    --idle-settle "$IDLE_SETTLE" \
    || echo "WARN: imap-bench.py for $1 reported failures (see above)"
}
quiet() { [ "${QUIET_WAIT:-1}" = 1 ] && echo "# machine busy before $1: $(quiet_gate)%"; }

INOTIFY=/proc/sys/fs/inotify/max_user_instances
INOTIFY_WAS=$(cat $INOTIFY 2>/dev/null || echo "")
# on any exit: the inotify limit back, and the peers stopped if this run started them (and died
# before stopping them)
restore() {
  [ -n "$INOTIFY_WAS" ] && [ "$(cat $INOTIFY)" != "$INOTIFY_WAS" ] && echo "$INOTIFY_WAS" > $INOTIFY
  if [ -e "$SCRATCH/peers-started" ]; then "$SHARED_BENCH/setup-peers.sh" stop > /dev/null 2>&1; rm -f "$SCRATCH/peers-started"; fi
  local p; p=$(cat "$SCRATCH/mailstow.pid" 2>/dev/null)
  if [ -n "$p" ] && tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -q -- "--data-dir $SCRATCH/data"; then kill -TERM "$p"; fi
  rm -f "$SCRATCH/mailstow.pid"
}
trap restore EXIT

commit() {  # the checked-out commit, read from .git without running git
  local h; h=$(sed -n 's/^ref: //p' .git/HEAD 2>/dev/null)
  if [ -n "$h" ]; then cut -c1-12 ".git/$h" 2>/dev/null || awk -v r="$h" '$2==r{print substr($1,1,12)}' .git/packed-refs 2>/dev/null
  else cut -c1-12 .git/HEAD 2>/dev/null; fi
}

{
  echo "# $(date -u +%FT%TZ) imap bench, commit $(commit), MESSAGES=$MESSAGES RUNS=$RUNS FORMAT=$FORMAT ONLY=$ONLY ROWS=$ROWS IDLE_SESSIONS=$IDLE_SESSIONS DOVECOT_TUNED=$DOVECOT_TUNED DOVECOT_HIBERNATE=$DOVECOT_HIBERNATE IDLE_SETTLE=$IDLE_SETTLE"
  echo "# mailstow binary $BIN, built $(date -u -r "$BIN" +%FT%TZ 2>/dev/null)"
  echo "# $(uname -r), $(nproc) cores, $(awk '/MemTotal/{printf "%d GiB", $2/1048576}' /proc/meminfo), scratch $SCRATCH on $(df --output=fstype "$SCRATCH" | tail -1), BENCH_ROOT on $(df --output=fstype "$(dirname "$BENCH_ROOT")" | tail -1)"
  if [ -n "$INOTIFY_WAS" ] && [ "$INOTIFY_WAS" -lt $((IDLE_SESSIONS + 128)) ]; then
    echo $((IDLE_SESSIONS + 1024)) > $INOTIFY && echo "# fs.inotify.max_user_instances $INOTIFY_WAS -> $(cat $INOTIFY) for this run"
  fi

  # ------------------------------------------------------------------ Dovecot
  if [ "$ONLY" != mailstow ]; then
    PEER=dovecot-$FORMAT
    # (output to a file: the Postfix master it starts keeps its stdout, and would hold the log pipe)
    "$SHARED_BENCH/setup-peers.sh" install > "$SCRATCH/setup-peers.out" 2>&1 || { cat "$SCRATCH/setup-peers.out"; die "setup-peers.sh install failed"; }
    touch "$SCRATCH/peers-started"
    "$SHARED_BENCH/setup-peers.sh" start "$FORMAT" >> "$SCRATCH/setup-peers.out" 2>&1 || { cat "$SCRATCH/setup-peers.out"; die "setup-peers.sh start failed"; }
    cat "$SCRATCH/setup-peers.out" >&2
    DC_CONF=$BENCH_ROOT/etc/dovecot/dovecot.conf
    cat >> "$DC_CONF" <<EOF
# added by mailstow bench/run-imap.sh: $IDLE_SESSIONS IDLE sessions of one user from one IP
protocol imap {
  mail_max_userip_connections = $((IDLE_SESSIONS + APPEND_CONNS + 50))
}
EOF
    if [ "$DOVECOT_TUNED" = 1 ]; then
      dovecot_tuning $((IDLE_SESSIONS + APPEND_CONNS + 50)) >> "$DC_CONF"
      # (a reload keeps the running login processes: restart for the new login mode)
      dovecot -c "$DC_CONF" stop; for _ in $(seq 50); do [ -e "$BENCH_ROOT/run/dovecot/master.pid" ] || break; sleep 0.1; done
      dovecot -c "$DC_CONF" || die "dovecot restart failed"
    fi
    doveadm -c "$DC_CONF" reload >&2 || die "dovecot reload failed"
    sleep 1
    wait_port "$HOST" "$IMAP_PORT" 20 || die "dovecot imap not listening on $HOST:$IMAP_PORT"
    echo "# dovecot tuning (DOVECOT_TUNED=$DOVECOT_TUNED): $(dc_tuning_summary "$DC_CONF")"
    echo "# dovecot $(dovecot --version), mail_location $(doveconf -c "$DC_CONF" -h mail_location), mail_fsync $(doveconf -c "$DC_CONF" -h mail_fsync), imap mail_max_userip_connections $(doveconf -c "$DC_CONF" -f protocol=imap -h mail_max_userip_connections)"
    home=$(awk -F: -v u="$DC_USER" '$1==u{print $6}' "$BENCH_ROOT/etc/dovecot/users")
    [ -n "$home" ] || die "$DC_USER not in $BENCH_ROOT/etc/dovecot/users"
    rm -rf "${home:?}"; mkdir -p "$home"; chown vmail:vmail "$home"
    t0=$(now)
    case $FORMAT/$DOVECOT_FILL in
      maildir/direct)
        python3 "$BENCHPY" gen-maildir --out "$home/Maildir" --count "$MESSAGES" --rcpt "$DC_USER" >&2 || die "gen-maildir failed"
        chown -R vmail:vmail "$home" ;;
      mdbox/direct)
        src=$SCRATCH/import-maildir; rm -rf "$src"
        python3 "$BENCHPY" gen-maildir --out "$src" --count "$MESSAGES" --rcpt "$DC_USER" >&2 || die "gen-maildir failed"
        chown -R vmail:vmail "$src"
        doveadm -c "$DC_CONF" import -u "$DC_USER" "maildir:$src:INDEX=MEMORY" "" all >&2 || die "doveadm import failed"
        rm -rf "$src" ;;
      */lmtp)
        python3 "$BENCHPY" fill "$HOST:$LMTP_PORT" "$DC_USER" --count "$MESSAGES" --proto lmtp >&2 || die "lmtp fill failed" ;;
      *) die "DOVECOT_FILL=$DOVECOT_FILL: direct or lmtp" ;;
    esac
    sync; t1=$(now)
    echo "# dovecot fill ($FORMAT/$DOVECOT_FILL): $MESSAGES messages in $(printf '%.1f' "$(echo "$t1 - $t0" | bc)") s, store $(du -sb "$home" | cut -f1) bytes"
    quiet "$PEER"
    run_rows "$PEER" "$IMAP_PORT" "$DC_USER" "$DC_PASS"
    echo "# dovecot store after the rows: $(du -sb "$home" | cut -f1) bytes"
    grep -iE 'warn|error|fatal|inotify' "$BENCH_ROOT/log/dovecot.log" 2>/dev/null | tail -5 | sed 's/^/# dovecot.log: /'
    "$SHARED_BENCH/setup-peers.sh" stop >&2 && rm -f "$SCRATCH/peers-started"
  fi

  # ------------------------------------------------------------------ mailstow
  if [ "$ONLY" != dovecot ]; then
    build
    DATA=$SCRATCH/data
    rm -rf "$DATA"; mkdir -p "$SCRATCH"
    {
      printf '[server]\nauth_without_tls = true\nhostname = "bench.example.com"\n'
      printf 'connections_per_ip_max = %d\n' $((IDLE_SESSIONS + APPEND_CONNS + 100))
      printf 'imap_sessions_per_user_max = %d\n' $((IDLE_SESSIONS + APPEND_CONNS + 100))
      [ -n "${MAILSTOW_TOML_EXTRA:-}" ] && printf '%s\n' "$MAILSTOW_TOML_EXTRA"
    } > "$SCRATCH/mailstow.toml"
    "$BIN" --data-dir "$DATA" --config "$SCRATCH/mailstow.toml" init >&2 || die "mailstow init failed"
    "$BIN" --data-dir "$DATA" domain add example.com >&2
    "$BIN" --data-dir "$DATA" user add "$OUR_USER" --password "$OUR_PASS" >&2
    smtp_l=""; [ "$MAILSTOW_FILL" = smtp ] && smtp_l=$HOST:$OUR_SMTP_PORT
    "$BIN" --data-dir "$DATA" --config "$SCRATCH/mailstow.toml" serve --web "" --smtp "$smtp_l" \
      --submission "" --submissions "" --lmtp "$HOST:$OUR_LMTP_PORT" --pop3 "" --pop3s "" \
      --imap "$HOST:$OUR_IMAP_PORT" --imaps "" --managesieve "" > "$SCRATCH/serve.out" 2> "$SCRATCH/serve.err" & pid=$!
    echo "$pid" > "$SCRATCH/mailstow.pid"
    for _ in $(seq 100); do grep -q "imap listening" "$SCRATCH/serve.out" 2>/dev/null && break; sleep 0.1; done
    grep -q "imap listening" "$SCRATCH/serve.out" || { cat "$SCRATCH/serve.err"; kill -TERM "$pid"; die "mailstow imap not listening"; }
    t0=$(now)
    case $MAILSTOW_FILL in
      lmtp) python3 "$BENCHPY" fill "$HOST:$OUR_LMTP_PORT" "$OUR_USER" --count "$MESSAGES" --proto lmtp >&2 ;;
      smtp) python3 "$BENCHPY" fill "$HOST:$OUR_SMTP_PORT" "$OUR_USER" --count "$MESSAGES" --proto smtp >&2 ;;
      *) kill -TERM "$pid"; die "MAILSTOW_FILL=$MAILSTOW_FILL: lmtp or smtp" ;;
    esac || echo "WARN: mailstow fill reported errors"
    # wait (at most 10 min) until the store holds them all (the stats file is rewritten every second)
    for _ in $(seq 6000); do
      n=$(awk '$1=="store_messages_appended"{print $2}' "$DATA/stats" 2>/dev/null)
      [ "${n:-0}" -ge "$MESSAGES" ] && break; sleep 0.1
    done
    sync; t1=$(now)
    echo "# mailstow fill ($MAILSTOW_FILL): $MESSAGES messages in $(printf '%.1f' "$(echo "$t1 - $t0" | bc)") s (store_messages_appended ${n:-?}), store $(du -sb "$DATA" | cut -f1) bytes"
    quiet mailstow
    SERVER_PIDS=$pid run_rows mailstow "$OUR_IMAP_PORT" "$OUR_USER" "$OUR_PASS"
    echo "# mailstow data dir after the rows: $(du -sb "$DATA" | cut -f1) bytes"
    kill -TERM "$pid"; wait "$pid"; rm -f "$SCRATCH/mailstow.pid"
    tail -3 "$SCRATCH/serve.err" | sed 's/^/# mailstow serve.err: /'
  fi
} 2>&1 | tee "$LOG" | grep --line-buffered '^RESULT\|^#\|^WARN\|^ERROR'

# one line per row that both peers measured: mailstow / dovecot (ms: below 1 is faster; msg/s: above 1)
if [ "$ONLY" = all ]; then
  awk '/^RESULT /{ for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
         if (f["peer"] == "mailstow") m[f["row"]] = f["value"]; else { d[f["row"]] = f["value"]; dn = f["peer"] }
         u[f["row"]] = f["unit"]; if (!(f["row"] in seen)) { seen[f["row"]] = 1; order[++n] = f["row"] } }
       END { for (k = 1; k <= n; k++) { r = order[k]
         if (r in m && r in d && m[r] != "NA" && d[r] != "NA" && d[r] + 0 != 0)
           printf "RATIO row=%s mailstow=%s %s=%s unit=%s mailstow/dovecot=%.3f %s\n", r, m[r], dn, d[r], u[r], m[r] / d[r], (u[r] == "msg/s" ? "(higher is better)" : "(lower is better)")
         else printf "RATIO row=%s mailstow=%s %s=%s unit=%s mailstow/dovecot=NA\n", r, (r in m ? m[r] : "-"), dn, (r in d ? d[r] : "-"), u[r] } }' "$LOG" | tee -a "$LOG"
fi
echo "log: $LOG"
# Every mailstow row must be above zero, but for idle_from_ok_*: a session may read EXISTS
# before the appender reads its OK, so that one can be 0 or negative (imap-bench.py's doc).
SMOKE_ROWS="select_prime select fetch_all_first fetch_all search_msgid_first search_msgid
  search_subject_first search_subject body_fetch_total body_fetch_p50 body_fetch_p99 append
  append_p50 append_p99 expunge idle_from_send_max idle_from_send_p50 sort_date_first sort_date
  thread_refs_first thread_refs qresync_first qresync"
specs=()
for row in $SMOKE_ROWS; do specs+=("peer=mailstow row=$row : value"); done
[ "$ONLY" = dovecot ] || smoke_check "$LOG" "${specs[@]}"
