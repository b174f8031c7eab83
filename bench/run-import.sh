#!/usr/bin/env bash
# Import of the large mailbox (issue 19, item 10): a maildir of 80,000 messages (2.5-10 KiB,
# ~512 MB, shared/bench/mkmailbox.py, the same set as bench/run-bigmbox.sh's) imported by
# `mailstow mailbox import` (offline: no server running; the same code runs inside the
# server), beside Dovecot's `doveadm import` of the same maildir into mdbox, in the same run.
# Each run starts from an empty target and a cold page cache (sync; drop_caches). fsync and
# fdatasync calls are counted with `strace -f --seccomp-bpf -c` (only those two syscalls
# stop the process, so the cost of tracing is one stop per sync); mailstow's summary line
# also reports the store's own sync counter.
#   SMOKE=1 bench/run-import.sh     300 messages, one run; fails on a zero mailstow figure
# Env: IMPORT_COUNT (80000), RUNS (3), SCRATCH (/var/tmp/mailstow-bench-import), and
# bench/lib.sh's PROFILE, NO_BUILD, BIN, SMOKE, LOG_DIR, SHARED_BENCH.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
shared_bench
if [ "$SMOKE" = 1 ]; then : "${IMPORT_COUNT:=300}" "${RUNS:=1}"; fi
IMPORT_COUNT=${IMPORT_COUNT:-80000} RUNS=${RUNS:-3}
SCRATCH=${SCRATCH:-/var/tmp/mailstow-bench-import}
LOG=$LOG_DIR/import-$(date +%Y%m%d-%H%M%S).log
cd "$ROOT"
build
USER_ADDR=big@example.com
# strace and doveadm (Dovecot) come with the peers' packages.
command -v strace >/dev/null && command -v doveadm >/dev/null || "$SHARED_BENCH/setup-peers.sh" install >&2
id vmail >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin vmail

# "seconds fsyncs fdatasyncs" from an strace -c summary file and a start time.
syncs() { awk '$NF=="fsync"{f=$4} $NF=="fdatasync"{d=$4} END{printf "%d %d", f, d}' "$1"; }

{
  echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short=12 HEAD)$(git diff --quiet || echo +dirty)"
  echo "# $(uname -r), $(nproc) cores, $(awk '/MemTotal/{printf "%d GiB", $2/1048576}' /proc/meminfo), $(. /etc/os-release; echo "$PRETTY_NAME"), scratch $SCRATCH on $(df --output=fstype "$(dirname "$SCRATCH")" | tail -1)"
  echo "# $(doveadm -c /dev/null --version 2>/dev/null || dovecot --version)"
  rm -rf "$SCRATCH"; mkdir -p "$SCRATCH"
  python3 "$SHARED_BENCH/mkmailbox.py" --format maildir --out "$SCRATCH/Maildir" \
    --count "$IMPORT_COUNT" --rcpt "$USER_ADDR" >&2
  chmod -R a+rX "$SCRATCH/Maildir"
  bytes=$(du -sb "$SCRATCH/Maildir" | cut -f1)
  echo "# source: $IMPORT_COUNT messages, $bytes bytes (du -sb)"
  for r in $(seq "$RUNS"); do
    # Other work on the machine (another build) shows here.
    echo "# run $r: load average $(cut -d' ' -f1-3 /proc/loadavg)"
    # mailstow: a fresh data directory, the user, then the import.
    data=$SCRATCH/data-$r
    "$BIN" --data-dir "$data" init >/dev/null
    "$BIN" --data-dir "$data" domain add example.com >/dev/null
    "$BIN" --data-dir "$data" user add "$USER_ADDR" --password bigmbox-pw >/dev/null
    sync; echo 3 > /proc/sys/vm/drop_caches
    t0=$(date +%s.%N)
    strace -f --seccomp-bpf -c -e trace=fsync,fdatasync -o "$SCRATCH/strace-mailstow-$r" \
      "$BIN" --data-dir "$data" mailbox import "$USER_ADDR" "$SCRATCH/Maildir" \
      > "$SCRATCH/mailstow-$r.out" 2> "$SCRATCH/mailstow-$r.err"
    rc=$?
    t1=$(date +%s.%N)
    read -r f d <<< "$(syncs "$SCRATCH/strace-mailstow-$r")"
    secs=$(echo "$t1 - $t0" | bc)
    echo "# mailstow: $(cat "$SCRATCH/mailstow-$r.out")"
    echo "RESULT import system=mailstow run=$r rc=$rc messages=$IMPORT_COUNT seconds=$secs msgs_per_s=$(echo "$IMPORT_COUNT / $secs" | bc) fsync=$f fdatasync=$d syncs_per_msg=$(echo "scale=5; ($f + $d) / $IMPORT_COUNT" | bc) store_bytes=$(du -sb "$data/store" | cut -f1)"
    rm -rf "$data"
    # Dovecot: doveadm import of the same maildir into an empty mdbox (indexes of the source
    # kept in memory, its uidlist in a scratch control directory, so the source stays as is).
    dv=$SCRATCH/dovecot-$r
    mkdir -p "$dv/run" "$dv/state" "$dv/control"
    cat > "$dv/dovecot.conf" <<EOF
mail_location = mdbox:$dv/mdbox
mail_uid = vmail
mail_gid = vmail
first_valid_uid = 1
first_valid_gid = 1
ssl = no
base_dir = $dv/run
state_dir = $dv/state
log_path = $dv/dovecot.log
EOF
    chown -R vmail:vmail "$dv"
    sync; echo 3 > /proc/sys/vm/drop_caches
    t0=$(date +%s.%N)
    HOME=$dv USER=big strace -f --seccomp-bpf -c -e trace=fsync,fdatasync \
      -o "$SCRATCH/strace-dovecot-$r" doveadm -c "$dv/dovecot.conf" import \
      "maildir:$SCRATCH/Maildir:INDEX=MEMORY:CONTROL=$dv/control" "" all
    rc=$?
    t1=$(date +%s.%N)
    read -r f d <<< "$(syncs "$SCRATCH/strace-dovecot-$r")"
    secs=$(echo "$t1 - $t0" | bc)
    n=$(HOME=$dv USER=big doveadm -c "$dv/dovecot.conf" mailbox status messages INBOX | sed 's/.*messages=//')
    echo "RESULT import system=dovecot-doveadm-import-mdbox run=$r rc=$rc messages=$n seconds=$secs msgs_per_s=$(echo "$n / $secs" | bc) fsync=$f fdatasync=$d syncs_per_msg=$(echo "scale=5; ($f + $d) / $IMPORT_COUNT" | bc) store_bytes=$(du -sb "$dv/mdbox" | cut -f1)"
    rm -rf "$dv"
  done
} 2>&1 | tee "$LOG" | grep --line-buffered '^RESULT\|^#'
echo "log: $LOG"
smoke_check "$LOG" "import system=mailstow rc=0 messages=$IMPORT_COUNT : seconds msgs_per_s fdatasync syncs_per_msg store_bytes"
