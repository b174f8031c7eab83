#!/usr/bin/env bash
# Hostile clients against `mailstow serve` with its default limits, and what they cost the
# legitimate ones (issue 18):
#   1. resident memory under each attack (bench/hostile.py), right after it and a minute later;
#   2. POP3 logins/s of legitimate users (rabid, 127.0.0.1) while an attacker floods wrong
#      passwords from other addresses, against the same runs without the attacker;
#   3. SMTP ingest (mailstow bench smtp, DKIM-signed messages from a remote domain) with
#      SPF/DKIM/DMARC checks on, answers from a loopback DNS zone, against checks off.
#
#   bench/run-hostile.sh            # all three; ONLY=memory|logins|ingest for one
#   SMOKE=1 bench/run-hostile.sh    # all three in about a minute: 20 users, 20 attackers,
#                                   # 3 s deadlines, 2 s windows; fails on a zero figure
#
# Env: DURATION (30 s per login run), RUNS (3), PROCS (8 rabid sessions), NUSERS (1000),
# CONNECTIONS (999 per memory attack), SETTLE (60 s), INGEST_SECONDS (20), SCRATCH
# (/var/tmp/mailstow-bench-hostile), and bench/lib.sh's PROFILE, NO_BUILD, BIN, SMOKE, LOG_DIR.
# Output: RESULT lines, log in bench/results/.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
# The smoke run's server closes slow clients after 3 s instead of 60 (the trickle attack
# lasts until every connection is closed).
SMOKE_TOML=
if [ "$SMOKE" = 1 ]; then
  : "${DURATION:=2}" "${RUNS:=1}" "${PROCS:=2}" "${NUSERS:=20}" "${CONNECTIONS:=20}" "${SETTLE:=1}" "${INGEST_SECONDS:=1}"
  SMOKE_TOML='login_deadline_seconds = 3\ncommand_deadline_seconds = 3\n'
fi
DURATION=${DURATION:-30} RUNS=${RUNS:-3} PROCS=${PROCS:-8} NUSERS=${NUSERS:-1000}
CONNECTIONS=${CONNECTIONS:-999} SETTLE=${SETTLE:-60} INGEST_SECONDS=${INGEST_SECONDS:-20}
SCRATCH=${SCRATCH:-/var/tmp/mailstow-bench-hostile}
ONLY=${ONLY:-all}
LOG=$LOG_DIR/hostile-$(date +%Y%m%d-%H%M%S).log
command -v rabid >/dev/null || { shared_bench; "$SHARED_BENCH/setup-peers.sh" install >&2; }
cd "$ROOT"
build
DATA=$SCRATCH/data
SMTP=2725 SUB=2787 POP3=2710 IMAP=2743

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END{if(NR%2){print a[(NR+1)/2]}else{printf "%.1f\n",(a[NR/2]+a[NR/2+1])/2}}'; }

# A loopback DNS zone: the bench sender's domain authorises loopback (SPF), publishes its
# DKIM key and a DMARC policy; our own domain does too.
dns_start() {
  rm -f "$SCRATCH/dns.port"
  python3 "$ROOT/crates/mailstow/tests/e2e/fake_dns.py" "$SCRATCH/dns.port" \
    "example.com TXT v=spf1 ip4:127.0.0.0/8 -all" \
    "example.org TXT v=spf1 ip4:127.0.0.0/8 -all" \
    "_dmarc.example.org TXT v=DMARC1; p=reject" \
    "b1._domainkey.example.org TXT v=DKIM1; k=ed25519; p=$(cat "$SCRATCH/dkim.pub")" &
  echo $! > "$SCRATCH/dns.pid"
  for _ in $(seq 100); do [ -s "$SCRATCH/dns.port" ] && return; sleep 0.05; done
}

config() {  # config CHECKS(true|false)
  printf '[server]\npassword_length_min = 1\nauth_without_tls = true\nhostname = "bench.example.com"\nsender_checks = %s\ndns_servers = ["127.0.0.1:%s"]\n'"$SMOKE_TOML" \
    "$1" "$(cat "$SCRATCH/dns.port")" > "$SCRATCH/mailstow.toml"
}

start_ours() {
  "$BIN" --data-dir "$DATA" --config "$SCRATCH/mailstow.toml" serve --web "" --smtp "127.0.0.1:$SMTP" \
    --submission "0.0.0.0:$SUB" --submissions "" --lmtp "" --pop3 "0.0.0.0:$POP3" --pop3s "" \
    --imap "0.0.0.0:$IMAP" --imaps "" --managesieve "" > "$SCRATCH/serve.out" 2> "$SCRATCH/serve.err" &
  echo $! > "$SCRATCH/pid"
  for _ in $(seq 100); do grep -q "imap listening" "$SCRATCH/serve.out" 2>/dev/null && return; sleep 0.1; done
}
stop_ours() { kill -TERM "$(cat "$SCRATCH/pid")" 2>/dev/null; while kill -0 "$(cat "$SCRATCH/pid")" 2>/dev/null; do sleep 0.1; done; }

# Legitimate logins of a window: the server's log lines for logins from 127.0.0.1.
legit_logins() { grep -c "event=login proto=pop3 user=.* result=ok client=127.0.0.1$" "$SCRATCH/serve.err"; }

# rabid for DURATION s (login only: connect, CAPA, USER, PASS, QUIT).
rabid_window() {
  # rabid 0.76 does not exit on SIGINT (shared/bench/common.sh): KILL it 3 s later.
  (cd "$SCRATCH" && timeout -s INT -k 3 "$DURATION" rabid -p "$PROCS" -c 0 "[127.0.0.1]$POP3" "$SCRATCH/users.txt" > /dev/null 2>&1)
  sleep 1
}

{
  echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short=12 HEAD)$(git diff --quiet || echo +dirty)"
  echo "# $(uname -r), $(nproc) cores, $(awk '/MemTotal/{printf "%d GiB", $2/1048576}' /proc/meminfo), scratch $SCRATCH on $(df --output=fstype "$(dirname "$SCRATCH")" | tail -1)"
  rm -rf "$SCRATCH"; mkdir -p "$SCRATCH"
  for i in $(seq "$NUSERS"); do printf 'user%04d@example.com pw%04d-secret\n' "$i" "$i"; done > "$SCRATCH/users.txt"
  "$BIN" --data-dir "$DATA" init >&2
  "$BIN" --data-dir "$DATA" domain add example.com >&2
  # The production argon2 cost (19 MiB): what an attacker makes us compute.
  "$BIN" --data-dir "$DATA" user import "$SCRATCH/users.txt" >&2
  openssl genpkey -algorithm ed25519 -out "$SCRATCH/dkim.pem" 2>/dev/null
  openssl pkey -in "$SCRATCH/dkim.pem" -pubout -outform DER | tail -c 32 | base64 -w0 > "$SCRATCH/dkim.pub"
  dns_start
  config true

  if [ "$ONLY" = all ] || [ "$ONLY" = memory ]; then
    for attack in imap-logins-one imap-logins-many submission-logins prelogin-literals unfinished-data trickle; do
      start_ours
      sleep 1
      python3 "$ROOT/bench/hostile.py" "$attack" --pid "$(cat "$SCRATCH/pid")" --imap $IMAP --pop3 $POP3 \
        --smtp $SMTP --submission $SUB --connections "$CONNECTIONS" --settle "$SETTLE" \
        $([ "$SMOKE" = 1 ] && echo --every 0.5)
      echo "RESULT hostile_connections_after attack=$attack open=$(awk '$1=="connections"{print $2}' "$DATA/stats")"
      stop_ours
    done
  fi

  if [ "$ONLY" = all ] || [ "$ONLY" = logins ]; then
    start_ours
    # Warm-up: every user's first login pays argon2 once; later ones are remembered, so the
    # runs below compare like with like.
    python3 "$ROOT/bench/hostile.py" warm --pid "$(cat "$SCRATCH/pid")" --pop3 $POP3 --users "$SCRATCH/users.txt"
    DURATION=$(( DURATION < 10 ? DURATION : 10 )) rabid_window
    base=(); attacked=(); own_base=(); own_attacked=()
    # One window of legitimate logins, two clients in turn: rabid (counted from the server's
    # log lines for 127.0.0.1) and hostile.py's own client (which counts its successes).
    window() {  # window LABEL
      local l0 l1 rate own
      l0=$(legit_logins); rabid_window; l1=$(legit_logins)
      rate=$(echo "scale=1; ($l1 - $l0) / $DURATION" | bc)
      own=$(python3 "$ROOT/bench/hostile.py" legit --pid "$(cat "$SCRATCH/pid")" --pop3 $POP3 \
        --users "$SCRATCH/users.txt" --threads "$PROCS" --seconds "$DURATION" | sed -n 's/.*per_s=\([0-9.]*\).*/\1/p')
      echo "RESULT pop3_logins_per_s attacker=$1 run=$r rabid_per_s=$rate own_client_per_s=$own"
      if [ "$1" = no ]; then base+=("$rate"); own_base+=("$own"); else attacked+=("$rate"); own_attacked+=("$own"); fi
    }
    for ((r=1; r<=RUNS; r++)); do
      window no
      # Fresh attacker addresses each run, so the throttle's blocks from the last run do
      # not make this one cheaper.
      python3 "$ROOT/bench/hostile.py" flood --pid "$(cat "$SCRATCH/pid")" --pop3 $POP3 \
        --user "$(printf 'user%04d@example.com' $(( (NUSERS + 1) / 2 )))" --addresses 256 --threads 32 --seconds $((2 * DURATION + 8)) \
        --offset $((r * 256)) & attacker=$!
      sleep 2
      window yes
      wait "$attacker"
    done
    mb=$(median "${base[@]}"); ma=$(median "${attacked[@]}")
    ob=$(median "${own_base[@]}"); oa=$(median "${own_attacked[@]}")
    echo "RESULT pop3_logins_under_flood client=rabid median_without=$mb median_with=$ma ratio=$(echo "scale=3; $ma / $mb" | bc) runs=$RUNS procs=$PROCS"
    echo "RESULT pop3_logins_under_flood client=own median_without=$ob median_with=$oa ratio=$(echo "scale=3; $oa / $ob" | bc) runs=$RUNS threads=$PROCS"
    stop_ours
  fi

  if [ "$ONLY" = all ] || [ "$ONLY" = ingest ]; then
    on=(); off=()
    RECIPIENTS=$(head -100 "$SCRATCH/users.txt" | cut -d' ' -f1 | paste -sd,)
    for ((r=1; r<=RUNS; r++)); do
      for checks in true false; do
        config $checks
        start_ours
        sleep 1
        line=$("$BIN" bench smtp --address "127.0.0.1:$SMTP" --connections 32 --seconds "$INGEST_SECONDS" \
          --sender bench@example.org --recipients "$RECIPIENTS" --label "checks-$checks" \
          --dkim "example.org:b1:ed25519:$SCRATCH/dkim.pem" | grep '^RESULT')
        verdicts=$(grep -o "dmarc=[a-z]*" "$SCRATCH/serve.err" | sort | uniq -c | tr -s ' ' | paste -sd, -)
        echo "$line run=$r verdicts=${verdicts:-none}"
        rate=$(echo "$line" | sed -n 's/.*msgs_per_s=\([0-9.]*\).*/\1/p')
        if [ $checks = true ]; then on+=("$rate"); else off+=("$rate"); fi
        stop_ours
      done
    done
    mon=$(median "${on[@]}"); moff=$(median "${off[@]}")
    echo "RESULT smtp_ingest_checks median_on=$mon median_off=$moff ratio=$(echo "scale=3; $mon / $moff" | bc) runs=$RUNS conns=32"
  fi
  kill "$(cat "$SCRATCH/dns.pid")" 2>/dev/null
} 2>&1 | tee "$LOG" | grep --line-buffered '^RESULT\|^#'
echo "log: $LOG"
checks=()
if [ "$ONLY" = all ] || [ "$ONLY" = memory ]; then checks+=('hostile : rss_before_mib rss_peak_mib rss_after_mib'); fi
if [ "$ONLY" = all ] || [ "$ONLY" = logins ]; then
  checks+=('hostile_warm : users ok' 'pop3_logins_per_s : rabid_per_s own_client_per_s' 'hostile_flood : checked'
    'pop3_logins_under_flood : median_without median_with')
fi
if [ "$ONLY" = all ] || [ "$ONLY" = ingest ]; then
  checks+=('smtp_load label=checks-true : msgs msgs_per_s' 'smtp_load label=checks-false : msgs msgs_per_s'
    'smtp_ingest_checks : median_on median_off')
fi
smoke_check "$LOG" "${checks[@]}"
