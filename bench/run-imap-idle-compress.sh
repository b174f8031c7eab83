#!/usr/bin/env bash
# Two IMAP figures side by side in one run, Dovecot (the peer from shared/bench, maildir) against
# `mailstow serve`:
#  idle      server memory per connection with IDLE_N (10,000) connections in IDLE
#            (bench/imap-idle-memory.py: IDLE_USERS (1,000) users with IDLE_MSGS (10) messages
#            in INBOX each, connection i as user i % IDLE_USERS + 1 from 127.0.0.(2 + i %
#            IDLE_SRC_ADDRS), plaintext LOGIN, SELECT INBOX, IDLE, until "+ idling"; memory
#            before (after a warm-up) and after: mailstow's one process (RSS, PSS), Dovecot the
#            sum over its master and every process below it (RSS, PSS)); IDLE_REPEATS (3) times,
#            each on a freshly started server.
#  compress  `UID FETCH 1:* BODY.PEEK[]` of a folder of COMPRESS_MESSAGES (10,000) realistic
#            messages (bench/imap-bench.py's generator, 2.5-10 KiB) plain and with COMPRESS
#            DEFLATE (bench/imap-compress.py): bytes on the wire, server CPU (utime+stime),
#            client CPU, wall time; COMPRESS_RUNS (5) pairs, medians and ranges.
# One RESULT line per figure, then a SUMMARY with medians and ranges and the ratios.
#
#   bench/run-imap-idle-compress.sh                         both tests, both peers
#   TESTS=idle ONLY=dovecot DOVECOT_TUNED=0 IDLE_N=1000 bench/run-imap-idle-compress.sh
#
# Dovecot 2.3 runs tuned (DOVECOT_TUNED=1, bench/dovecot-tuning.sh: high-performance login
# processes, imap process reuse, imap_hibernate_timeout = DOVECOT_HIBERNATE (5s), limits raised
# for IDLE_N connections) with `mail_plugins = $mail_plugins imap_zlib` in protocol imap and
# imap_compress_deflate_level = 6 (its default, stated). DOVECOT_TUNED=0: only the limits
# (imap process_limit, default_client_limit, mail_max_userip_connections) raised, one imap
# process per connection. Dovecot's users are setup-peers.sh's user0001.. (PLAIN passwords,
# passwd-file); the compress folder is the INBOX of its extra user bigmaildir@example.com.
# mailstow gets the same users (`mailstow user import`, argon2id) and messages (over LMTP), and
# runs with [server] auth_without_tls = true, connections_max = IDLE_N + 1000,
# connections_per_ip_max and imap_sessions_per_user_max = IDLE_N, hash_queue_max = 1024 (the
# first login of each of the 1,000 users waits for argon2; the client keeps IDLE_CONCURRENCY
# (64) handshakes in flight), plus MAILSTOW_TOML_EXTRA.
# fs.inotify.max_user_instances (Dovecot: about two per maildir session in IDLE, passed on to
# imap-hibernate; without one a session polls and is not hibernated) is raised to 4 * IDLE_N +
# 1024 for the run and restored at the end (Dovecot's log is checked for "Inotify instance
# limit" warnings); ulimit -n is raised to the
# hard limit.
# Env: TESTS (idle,compress), ONLY (all|dovecot|mailstow), IDLE_N, IDLE_USERS, IDLE_MSGS,
# IDLE_REPEATS, IDLE_SRC_ADDRS (50), IDLE_CONCURRENCY, COMPRESS_MESSAGES, COMPRESS_RUNS,
# DOVECOT_TUNED (1), DOVECOT_HIBERNATE (5s), SCRATCH (/var/tmp/mailstow-bench-idle), QUIET_WAIT
# (1), and bench/lib.sh's PROFILE, NO_BUILD (0), BIN (target/<profile>/mailstow), SMOKE, LOG_DIR.
# SMOKE=1: both tests on both peers with 20 sessions of 10 users and 50 messages, once; fails on
# a zero mailstow figure.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
shared_bench
idle_smoke_args=()
if [ "$SMOKE" = 1 ]; then
  : "${IDLE_N:=20}" "${IDLE_USERS:=10}" "${IDLE_MSGS:=2}" "${IDLE_REPEATS:=1}" "${IDLE_SRC_ADDRS:=5}"
  : "${IDLE_CONCURRENCY:=8}" "${COMPRESS_MESSAGES:=50}" "${COMPRESS_RUNS:=1}" "${QUIET_WAIT:=0}" "${DOVECOT_HIBERNATE:=1s}"
  # Memory samples a second apart, for at most 10 s (not 10 s apart, for up to 3 minutes).
  idle_smoke_args=(--before-wait 0.5 --settle-step 1 --settle-max 10)
fi
export BENCH_ROOT=${BENCH_ROOT:-/tmp/peerbench}
. "$SHARED_BENCH/common.sh"
. "$ROOT/bench/dovecot-tuning.sh"
TESTS=${TESTS:-idle,compress} ONLY=${ONLY:-all}
IDLE_N=${IDLE_N:-10000} IDLE_USERS=${IDLE_USERS:-1000} IDLE_MSGS=${IDLE_MSGS:-10}
IDLE_REPEATS=${IDLE_REPEATS:-3} IDLE_SRC_ADDRS=${IDLE_SRC_ADDRS:-50} IDLE_CONCURRENCY=${IDLE_CONCURRENCY:-64}
COMPRESS_MESSAGES=${COMPRESS_MESSAGES:-10000} COMPRESS_RUNS=${COMPRESS_RUNS:-5}
DOVECOT_TUNED=${DOVECOT_TUNED:-1}
SCRATCH=${SCRATCH:-/var/tmp/mailstow-bench-idle}
BIG_USER=bigmaildir@example.com BIG_PASS=bigpw
OUR_IMAP_PORT=${OUR_IMAP_PORT:-2653} OUR_LMTP_PORT=${OUR_LMTP_PORT:-2654}
case $ONLY in all|dovecot|mailstow) ;; *) die "ONLY=$ONLY: all, dovecot or mailstow" ;; esac
[ "$IDLE_USERS" -le "$NUSERS" ] || die "IDLE_USERS=$IDLE_USERS: setup-peers.sh makes $NUSERS users"
has() { case ",$TESTS," in *",$1,"*) return 0 ;; esac; return 1; }
LOG=$LOG_DIR/imap-idle-compress-$(date +%Y%m%d-%H%M%S).log
mkdir -p "$SCRATCH"
cd "$ROOT"
IDLEPY=$ROOT/bench/imap-idle-memory.py COMPPY=$ROOT/bench/imap-compress.py BENCHPY=$ROOT/bench/imap-bench.py
ulimit -n "$(ulimit -Hn)"
quiet() { [ "${QUIET_WAIT:-1}" = 1 ] && echo "# machine busy before $1: $(quiet_gate)%"; }

INOTIFY=/proc/sys/fs/inotify/max_user_instances
INOTIFY_WAS=$(cat $INOTIFY 2>/dev/null || echo "")
DC_CONF=$BENCH_ROOT/etc/dovecot/dovecot.conf
DC_PIDFILE=$BENCH_ROOT/run/dovecot/master.pid
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

dc_tree() {  # the PIDs of the Dovecot master and every process below it
  local m; m=$(cat "$DC_PIDFILE" 2>/dev/null) || return 0
  ps -e -o pid=,ppid= | awk -v m="$m" '{ pp[$1] = $2 } END { for (p in pp) { q = p; while (q in pp && q != m && q > 1) q = pp[q]; if (q == m) print p } }'
}
dc_restart() {  # a fresh Dovecot (every process new) on the current dovecot.conf
  local old p; old=$(dc_tree)
  dovecot -c "$DC_CONF" stop 2>/dev/null
  for _ in $(seq 100); do [ -e "$DC_PIDFILE" ] || break; sleep 0.1; done
  # imap-hibernate outlives the master while it closes its sessions; its socket must be gone
  for _ in $(seq 1200); do
    for p in $old; do [ -e "/proc/$p" ] && break; p=""; done
    [ -z "$p" ] && break; sleep 0.1
  done
  dovecot -c "$DC_CONF" || die "dovecot start failed"
  wait_port "$HOST" "$IMAP_PORT" 20 || die "dovecot imap not listening on $HOST:$IMAP_PORT"
  sleep 2
}

ms_start() {
  : > "$SCRATCH/serve.out"
  "$BIN" --data-dir "$SCRATCH/data" --config "$SCRATCH/mailstow.toml" serve --web "" --smtp "" \
    --submission "" --submissions "" --lmtp "$HOST:$OUR_LMTP_PORT" --pop3 "" --pop3s "" \
    --imap "$HOST:$OUR_IMAP_PORT" --imaps "" --managesieve "" >> "$SCRATCH/serve.out" 2>> "$SCRATCH/serve.err" &
  MS_PID=$!
  echo "$MS_PID" > "$SCRATCH/mailstow.pid"
  for _ in $(seq 300); do grep -q "imap listening" "$SCRATCH/serve.out" 2>/dev/null && break; sleep 0.1; done
  grep -q "imap listening" "$SCRATCH/serve.out" || { tail -5 "$SCRATCH/serve.err"; die "mailstow imap not listening"; }
  sleep 1
}
ms_stop() { kill -TERM "$MS_PID"; wait "$MS_PID"; rm -f "$SCRATCH/mailstow.pid"; }

idle_run() {  # PEER PORT --server-pid PID | --dovecot-master PID [more]
  local peer=$1 port=$2; shift 2
  python3 "$IDLEPY" run --host "$HOST" --port "$port" --peer "$peer" --n "$IDLE_N" \
    --users "$IDLE_USERS" --src-addrs "$IDLE_SRC_ADDRS" --concurrency "$IDLE_CONCURRENCY" "${idle_smoke_args[@]}" "$@" \
    || echo "WARN: imap-idle-memory.py for $peer reported failures (see above)"
}
compress_run() {  # PEER PORT --server-pid PID | --dovecot-master PID
  local peer=$1 port=$2; shift 2
  python3 "$COMPPY" --host "$HOST" --port "$port" --user "$BIG_USER" --password "$BIG_PASS" \
    --peer "$peer" --runs "$COMPRESS_RUNS" --messages "$COMPRESS_MESSAGES" "$@" \
    || echo "WARN: imap-compress.py for $peer reported failures (see above)"
}

{
  echo "# $(date -u +%FT%TZ) imap idle-memory and compress bench, commit $(commit), TESTS=$TESTS ONLY=$ONLY IDLE_N=$IDLE_N IDLE_USERS=$IDLE_USERS IDLE_MSGS=$IDLE_MSGS IDLE_REPEATS=$IDLE_REPEATS IDLE_SRC_ADDRS=$IDLE_SRC_ADDRS COMPRESS_MESSAGES=$COMPRESS_MESSAGES COMPRESS_RUNS=$COMPRESS_RUNS DOVECOT_TUNED=$DOVECOT_TUNED DOVECOT_HIBERNATE=$DOVECOT_HIBERNATE"
  echo "# mailstow binary $BIN, built $(date -u -r "$BIN" +%FT%TZ 2>/dev/null)"
  echo "# $(uname -r), $(nproc) cores, $(awk '/MemTotal/{printf "%d GiB", $2/1048576}' /proc/meminfo), ulimit -n $(ulimit -n)"
  if [ -n "$INOTIFY_WAS" ] && [ "$INOTIFY_WAS" -lt $((4 * IDLE_N + 1024)) ]; then
    echo $((4 * IDLE_N + 1024)) > $INOTIFY && echo "# fs.inotify.max_user_instances $INOTIFY_WAS -> $(cat $INOTIFY) for this run"
  fi

  # ------------------------------------------------------------------ Dovecot
  if [ "$ONLY" != mailstow ]; then
    PEER=dovecot-maildir
    [ "$DOVECOT_TUNED" = 1 ] && PEER=dovecot-tuned
    "$SHARED_BENCH/setup-peers.sh" install > "$SCRATCH/setup-peers.out" 2>&1 || { cat "$SCRATCH/setup-peers.out"; die "setup-peers.sh install failed"; }
    touch "$SCRATCH/peers-started"
    "$SHARED_BENCH/setup-peers.sh" start maildir >> "$SCRATCH/setup-peers.out" 2>&1 || { cat "$SCRATCH/setup-peers.out"; die "setup-peers.sh start failed"; }
    cat "$SCRATCH/setup-peers.out" >&2
    {
      if [ "$DOVECOT_TUNED" = 1 ]; then dovecot_tuning "$IDLE_N"; else dovecot_limits "$IDLE_N"; fi
      cat <<EOF
# added by mailstow bench/run-imap-idle-compress.sh: COMPRESS=DEFLATE (RFC 4978)
protocol imap {
  mail_plugins = \$mail_plugins imap_zlib
}
plugin {
  imap_compress_deflate_level = 6
}
EOF
    } >> "$DC_CONF"
    dc_restart
    echo "# dovecot $(dovecot --version), tuning (DOVECOT_TUNED=$DOVECOT_TUNED): $(dc_tuning_summary "$DC_CONF")"
    if has idle; then
      t0=$(now)
      rm -rf "${BENCH_ROOT:?}/mail/maildir/example.com"
      python3 "$IDLEPY" fill-maildirs --users-file "$BENCH_ROOT/etc/dovecot/users" --users "$IDLE_USERS" --count "$IDLE_MSGS" >&2 || die "fill-maildirs failed"
      chown -R vmail:vmail "$BENCH_ROOT/mail/maildir"
      echo "# dovecot idle fill: $IDLE_USERS users x $IDLE_MSGS messages in $(printf '%.1f' "$(echo "$(now) - $t0" | bc)") s"
    fi
    if has compress; then
      home=$(awk -F: -v u="$BIG_USER" '$1==u{print $6}' "$BENCH_ROOT/etc/dovecot/users")
      rm -rf "${home:?}"; mkdir -p "$home"
      python3 "$BENCHPY" gen-maildir --out "$home/Maildir" --count "$COMPRESS_MESSAGES" --rcpt "$BIG_USER" >&2 || die "gen-maildir failed"
      chown -R vmail:vmail "$home"
      echo "# dovecot compress folder: $COMPRESS_MESSAGES messages, $(du -sb "$home/Maildir/cur" | cut -f1) bytes"
    fi
    sync
    if has idle; then
      procs_ok=-1
      [ "$DOVECOT_TUNED" = 1 ] && [ "${DOVECOT_HIBERNATE%s}" != 0 ] && procs_ok=4
      for r in $(seq "$IDLE_REPEATS"); do
        dc_restart
        quiet "$PEER idle $r"
        idle_run "$PEER" "$IMAP_PORT" --dovecot-master "$(cat "$DC_PIDFILE")" --imap-procs-ok "$procs_ok"
      done
    fi
    if has compress; then
      dc_restart
      quiet "$PEER compress"
      compress_run "$PEER" "$IMAP_PORT" --dovecot-master "$(cat "$DC_PIDFILE")"
    fi
    echo "# dovecot.log: $(grep -c 'Inotify instance limit' "$BENCH_ROOT/log/dovecot.log") 'Inotify instance limit' warnings, $(grep -ciE 'error|fatal' "$BENCH_ROOT/log/dovecot.log") error lines"
    grep -iE 'warn|error|fatal|limit' "$BENCH_ROOT/log/dovecot.log" 2>/dev/null | sed -E 's/^[A-Z][a-z]{2} [0-9 ]+ [0-9:]+ //; s/[0-9]+/N/g; s/<[^>]*>//g' | cut -c1-200 | sort | uniq -c | sort -rn | head -6 | sed 's/^/# dovecot.log: /'
    "$SHARED_BENCH/setup-peers.sh" stop >&2 && rm -f "$SCRATCH/peers-started"
  fi

  # ------------------------------------------------------------------ mailstow
  if [ "$ONLY" != dovecot ]; then
    build
    DATA=$SCRATCH/data
    rm -rf "$DATA"; : > "$SCRATCH/serve.err"
    {
      printf '[server]\npassword_length_min = 1\nauth_without_tls = true\nhostname = "bench.example.com"\n'
      printf 'connections_max = %d\nconnections_per_ip_max = %d\nimap_sessions_per_user_max = %d\nhash_queue_max = 1024\n' \
        $((IDLE_N + 1000)) "$IDLE_N" "$IDLE_N"
      [ -n "${MAILSTOW_TOML_EXTRA:-}" ] && printf '%s\n' "$MAILSTOW_TOML_EXTRA"
    } > "$SCRATCH/mailstow.toml"
    "$BIN" --data-dir "$DATA" --config "$SCRATCH/mailstow.toml" init >&2 || die "mailstow init failed"
    "$BIN" --data-dir "$DATA" domain add example.com >&2
    { for i in $(seq "$IDLE_USERS"); do printf 'user%04d@example.com pw%04d\n' "$i" "$i"; done
      echo "$BIG_USER $BIG_PASS"; } > "$SCRATCH/users.txt"
    t0=$(now)
    "$BIN" --data-dir "$DATA" --config "$SCRATCH/mailstow.toml" user import "$SCRATCH/users.txt" > "$SCRATCH/import.out" 2>&1 || { tail -3 "$SCRATCH/import.out"; die "user import failed"; }
    echo "# mailstow: $((IDLE_USERS + 1)) users imported in $(printf '%.1f' "$(echo "$(now) - $t0" | bc)") s"
    ms_start
    t0=$(now); want=0
    if has idle; then
      python3 "$IDLEPY" fill-lmtp "$HOST:$OUR_LMTP_PORT" --users "$IDLE_USERS" --count "$IDLE_MSGS" >&2 || echo "WARN: idle fill reported errors"
      want=$((want + IDLE_USERS * IDLE_MSGS))
    fi
    if has compress; then
      python3 "$BENCHPY" fill "$HOST:$OUR_LMTP_PORT" "$BIG_USER" --count "$COMPRESS_MESSAGES" --proto lmtp >&2 || echo "WARN: compress fill reported errors"
      want=$((want + COMPRESS_MESSAGES))
    fi
    for _ in $(seq 6000); do
      n=$(awk '$1=="store_messages_appended"{print $2}' "$DATA/stats" 2>/dev/null)
      [ "${n:-0}" -ge "$want" ] && break; sleep 0.1
    done
    sync
    echo "# mailstow fill (lmtp): $want messages in $(printf '%.1f' "$(echo "$(now) - $t0" | bc)") s (store_messages_appended ${n:-?})"
    ms_stop
    if has idle; then
      for r in $(seq "$IDLE_REPEATS"); do
        ms_start
        quiet "mailstow idle $r"
        idle_run mailstow "$OUR_IMAP_PORT" --server-pid "$MS_PID"
        ms_stop
      done
    fi
    if has compress; then
      ms_start
      quiet "mailstow compress"
      compress_run mailstow "$OUR_IMAP_PORT" --server-pid "$MS_PID"
      ms_stop
    fi
    grep -E 'event=refused|level=(warn|error)|WARN|ERROR' "$SCRATCH/serve.err" | sed -E 's/^[^ ]+ //' | cut -c1-160 | sort | uniq -c | sort -rn | head -5 | sed 's/^/# mailstow serve.err: /'
  fi
} 2>&1 | tee "$LOG" | grep --line-buffered '^RESULT\|^#\|^WARN\|^ERROR\|^[a-z-]*: \(before\|after\|[0-9]* of\)'

# medians and ranges over the repeats, and mailstow / Dovecot
python3 - "$LOG" <<'EOF' | tee -a "$LOG"
import re, statistics, sys
idle, comp = {}, {}
for line in open(sys.argv[1]):
    if not line.startswith("RESULT "):
        continue
    f = dict(kv.split("=", 1) for kv in line.split()[1:])
    if f.get("test") == "idle":
        idle.setdefault(f["peer"], []).append(f)
    elif "mode" in f:
        comp[(f["peer"], f["mode"], f["metric"])] = f
def mmr(xs):
    return statistics.median(xs), min(xs), max(xs)
per = {}
for peer, rs in idle.items():
    for k in ("per_conn_pss", "per_conn_rss"):
        m, lo, hi = mmr([float(r[k]) for r in rs])
        per[(peer, k)] = m
        alive = ",".join(r["alive"] for r in rs)
        after = ",".join("%.0f" % (int(r["after_pss"]) / 2**20) for r in rs)
        print(f"SUMMARY idle peer={peer} {k}: median {m / 1024:.1f} KiB (range {lo / 1024:.1f}-{hi / 1024:.1f}) "
              f"over {len(rs)} repeats, alive {alive} of {rs[0]['n']}, after_pss MiB {after}")
dc = [p for p in idle if p.startswith("dovecot")]
if "mailstow" in idle and dc:
    for k in ("per_conn_pss", "per_conn_rss"):
        d = per[(dc[0], k)]
        print(f"SUMMARY idle ratio {k}: mailstow/{dc[0]} = {per[('mailstow', k)] / d:.3f}" if d else "SUMMARY idle ratio NA")
peers = sorted({p for p, _, _ in comp})
for p in peers:
    for metric in ("wire_bytes", "server_cpu_ms", "client_cpu_ms", "wall_ms"):
        a, b = comp.get((p, "plain", metric)), comp.get((p, "deflate", metric))
        if a and b:
            print(f"SUMMARY compress peer={p} {metric}: plain {a['median']} ({a['min']}-{a['max']}), deflate {b['median']} ({b['min']}-{b['max']}), deflate/plain {float(b['median']) / max(float(a['median']), 1e-9):.3f}")
if "mailstow" in peers:
    for p in peers:
        if p == "mailstow":
            continue
        for mode in ("plain", "deflate"):
            for metric in ("wire_bytes", "server_cpu_ms", "wall_ms"):
                a, b = comp.get(("mailstow", mode, metric)), comp.get((p, mode, metric))
                if a and b and float(b["median"]):
                    print(f"SUMMARY compress ratio {mode} {metric}: mailstow/{p} = {float(a['median']) / float(b['median']):.3f}")
EOF
echo "log: $LOG"
if [ "$ONLY" != dovecot ]; then
  checks=()
  has idle && checks+=('test=idle peer=mailstow : n per_conn_pss per_conn_rss')
  has compress && checks+=('peer=mailstow mode=plain metric=wire_bytes : median' 'peer=mailstow mode=deflate metric=wire_bytes : median'
    'peer=mailstow mode=plain metric=wall_ms : median' 'peer=mailstow mode=deflate metric=wall_ms : median')
  smoke_check "$LOG" "${checks[@]}"
fi
