#!/usr/bin/env bash
# Outbound delivery with MTA-STS and DANE checks on against off, in the same run (issue 39,
# docs/benchmarks.md): one mailstow delivers to a loopback MX, a second mailstow on its own
# 127.x address at port 25 (HTTPS on 443 serving its MTA-STS policy), found through a real
# BIND pair from test-peers (an authoritative server with a DNSSEC-signed zone and a
# validating resolver in front of it).
#
#   bench/run-transport.sh           # RUNS runs, each measuring both modes (order alternating)
#   SMOKE=1 bench/run-transport.sh   # tiny counts; fails on a zero mailstow figure
#
# The work is the ignored test `bench_outbound_transport` of crates/mailstow/tests/transport.rs
# (its doc says exactly what is measured): half the messages go to a DANE domain (signed zone,
# TLSA 3 1 1 for the receiver's key), half to an MTA-STS `enforce` domain (certificate from a
# test CA that the sender trusts through `tls_roots_file`); `off` is `outbound_mta_sts =
# false, outbound_dane = false`, opportunistic STARTTLS to the same exchanger. Each mode gets a
# fresh sender and one warm-up message per domain first, so the policy and the TLSA records
# are cached (the planner's policy cache, BIND's resolver cache) before the timed messages.
# Messages are submitted (AUTH, CONNS connections) while delivery runs; the figure is timed
# messages over the mail log's span from the first timed message accepted to the last
# delivered, one SMTP session with STARTTLS per message. With 16 connections submission is
# about twice as fast as delivery here, so the span is delivery's (client_seconds shows it).
# Env: MSGS (2000 per mode and run), CONNS (16), RUNS (3), and bench/lib.sh's PROFILE,
# NO_BUILD, SMOKE, LOG_DIR.
# Output: RESULT lines, the log in bench/results/.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
if [ "$SMOKE" = 1 ]; then
  : "${MSGS:=40}" "${RUNS:=1}" "${CONNS:=2}"
fi
MSGS=${MSGS:-2000} CONNS=${CONNS:-16} RUNS=${RUNS:-3}
LOG=$LOG_DIR/transport-$(date +%Y%m%d-%H%M%S).log
apt_install bind9 bind9-utils bind9-dnsutils openssl

cd "$ROOT"
# The test executable (and the mailstow binary it runs, target/<profile>/mailstow).
if [ "$NO_BUILD" != 1 ]; then
  EXE=$(cargo test --profile "$PROFILE" --locked -p mailstow --test transport --no-run \
          --message-format=json 2>/dev/null \
        | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "transport" and m.get("executable"):
        print(m["executable"])')
else
  EXE=$(ls -t "$BIN_DIR"/deps/transport-* 2>/dev/null | grep -v '\.d$' | head -1)
fi
[ -n "$EXE" ] && [ -x "$EXE" ] || { echo "ERROR: no transport test executable (cargo test --profile $PROFILE -p mailstow --test transport --no-run)" >&2; exit 1; }

median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END{print (NR%2)? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

{
  echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short=12 HEAD)$(git diff --quiet || echo +dirty) profile $PROFILE"
  echo "# $(uname -r), $(nproc) cores, $(awk '/MemTotal/{printf "%d GiB", $2/1048576}' /proc/meminfo)"
  echo "# $MSGS messages of 2 KiB per mode and run, half DANE, half MTA-STS; $CONNS submission connections"
  on=() off=()
  for ((r = 1; r <= RUNS; r++)); do
    # The harness prints "test NAME ... " before the test's own output, on the same line.
    out=$(BENCH_MSGS=$MSGS BENCH_CONNS=$CONNS BENCH_RUN=$r "$EXE" --ignored --exact \
            bench_outbound_transport --nocapture --test-threads=1 2>"$LOG.stderr") \
      || { printf '%s\n' "$out" | tail -5; tail -30 "$LOG.stderr"; echo "run $r failed" >&2; exit 1; }
    out=$(printf '%s\n' "$out" | grep -o 'RESULT .*')
    printf '%s\n' "$out"
    for mode in on off; do
      rate=$(printf '%s\n' "$out" | sed -n "s/^RESULT transport_outbound_delivered label=$mode .*msgs_per_s=\([0-9.]*\).*/\1/p")
      [ -n "$rate" ] || { echo "no $mode figure in run $r" >&2; exit 1; }
      if [ "$mode" = on ]; then on+=("$rate"); else off+=("$rate"); fi
    done
  done
  echo "RESULT transport_outbound_ratio median_on=$(median "${on[@]}") median_off=$(median "${off[@]}") ratio=$(echo "scale=3; $(median "${on[@]}") / $(median "${off[@]}")" | bc) runs=$RUNS on=$(IFS=,; echo "${on[*]}") off=$(IFS=,; echo "${off[*]}")"
} 2>&1 | tee "$LOG" | grep --line-buffered '^RESULT\|^#'
rm -f "$LOG.stderr"
echo "log: $LOG"
smoke_check "$LOG" 'transport_outbound_delivered label=on : msgs msgs_per_s verified_sessions' \
  'transport_outbound_delivered label=off : msgs msgs_per_s' \
  'transport_outbound_ratio : median_on median_off ratio'
