#!/usr/bin/env bash
# A full disk and its end (issue 36): `mailstow serve` on a small tmpfs with a free-space
# reserve; each run fills the disk past the reserve with another file (as a runaway log
# would), checks that SMTP answers 452 at MAIL and /healthz 503, deletes the file, and
# measures the time from the deletion to the first 250 to MAIL (and to /healthz 200).
# mailstow only: the peer (Postfix's smtpd) checks queue_minfree at each MAIL too, so both
# answer at the next MAIL after space comes back; the figure bounds what a client waits.
#
#   bench/run-full-disk.sh
#   SMOKE=1 bench/run-full-disk.sh     two runs; fails on a missing or zero figure
#
# Needs root (mount). Env: RUNS (15), DISK_MB (96), RESERVE_MB (16), SCRATCH
# (/var/tmp/mailstow-bench-full-disk), and bench/lib.sh's PROFILE, NO_BUILD, BIN, SMOKE, LOG_DIR.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
[ "$SMOKE" = 1 ] && : "${RUNS:=2}"
RUNS=${RUNS:-15} DISK_MB=${DISK_MB:-96} RESERVE_MB=${RESERVE_MB:-16}
SCRATCH=${SCRATCH:-/var/tmp/mailstow-bench-full-disk}
SMTP_PORT=2726 METRICS_PORT=2727
LOG=$LOG_DIR/full-disk-$(date +%Y%m%d-%H%M%S).log
cd "$ROOT"
build
[ "$(id -u)" = 0 ] || { echo "ERROR: run as root (mounts a tmpfs)" >&2; exit 1; }

MNT=$SCRATCH/mnt
mkdir -p "$MNT"
mountpoint -q "$MNT" && umount -l "$MNT"
mount -t tmpfs -o "size=${DISK_MB}m" tmpfs "$MNT" || { echo "ERROR: mount failed" >&2; exit 1; }
PID=
cleanup() {
  [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  umount -l "$MNT" 2>/dev/null
}
trap cleanup EXIT
DATA=$MNT/data
"$BIN" --data-dir "$DATA" domain add example.test > /dev/null
echo 'bench-password' | "$BIN" --data-dir "$DATA" user add alice@example.test --password-file - > /dev/null
cat > "$SCRATCH/mailstow.toml" <<TOML
[server]
disk_reserve_bytes = $((RESERVE_MB << 20))
sender_checks = false
TOML
"$BIN" --data-dir "$DATA" --config "$SCRATCH/mailstow.toml" serve --web "" \
  --smtp "127.0.0.1:$SMTP_PORT" --submission "" --submissions "" --lmtp "" --pop3 "" --pop3s "" \
  --imap "" --imaps "" --managesieve "" --metrics "127.0.0.1:$METRICS_PORT" > "$SCRATCH/serve.out" 2> "$SCRATCH/serve.err" &
PID=$!
for _ in $(seq 100); do grep -q "metrics listening" "$SCRATCH/serve.out" 2>/dev/null && break; sleep 0.1; done

{
  echo "# run-full-disk.sh: commit $(git rev-parse --short HEAD), $(nproc) cores, $(date -u +%FT%TZ)"
  echo "# tmpfs ${DISK_MB} MiB, disk_reserve_bytes ${RESERVE_MB} MiB, $RUNS runs"
  python3 - "$MNT" "$SMTP_PORT" "$METRICS_PORT" "$RUNS" <<'PY'
import os, socket, statistics, sys, time, urllib.request, urllib.error

mnt, smtp_port, metrics_port, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

def reply(f):
    while True:
        line = f.readline()
        if not line:
            raise EOFError
        if line[3:4] != b"-":
            return int(line[:3])

def session():
    s = socket.create_connection(("127.0.0.1", smtp_port))
    f = s.makefile("rb")
    assert reply(f) == 220
    s.sendall(b"EHLO bench.test\r\n"); assert reply(f) == 250
    return s, f

def mail():
    # A session per try, as a client retrying later does (and a session of refused MAILs
    # alone is cut off as making no progress).
    s, f = session()
    s.sendall(b"MAIL FROM:<b@elsewhere.test>\r\n")
    code = reply(f)
    s.sendall(b"QUIT\r\n")
    s.close()
    return code

def health():
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/healthz", timeout=5).status
    except urllib.error.HTTPError as e:
        return e.code

to_250, to_ok = [], []
for run in range(runs):
    st = os.statvfs(mnt)
    free = st.f_bavail * st.f_frsize
    filler = os.path.join(mnt, "filler")
    with open(filler, "wb") as out:
        left = free - (8 << 20)
        chunk = b"\0" * (1 << 20)
        while left > 0:
            out.write(chunk[: min(left, len(chunk))]); left -= len(chunk)
    deadline = time.monotonic() + 5
    while mail() != 452:
        assert time.monotonic() < deadline, "never refused"
        time.sleep(0.01)
    # /healthz follows within its watch interval (250 ms).
    while health() != 503:
        assert time.monotonic() < deadline + 2, "healthz never said so"
        time.sleep(0.01)
    t0 = time.monotonic()
    os.unlink(filler)
    while mail() != 250:
        time.sleep(0.002)
    t1 = time.monotonic()
    while health() != 200:
        time.sleep(0.002)
    t2 = time.monotonic()
    to_250.append((t1 - t0) * 1000); to_ok.append((t2 - t0) * 1000)
    print(f"run {run}: first 250 after {to_250[-1]:.1f} ms, /healthz 200 after {to_ok[-1]:.1f} ms", flush=True)
med = statistics.median
print(f"RESULT full_disk_recovery peer=mailstow runs={runs} first_250_ms={med(to_250):.1f} "
      f"min_ms={min(to_250):.1f} max_ms={max(to_250):.1f} healthz_ok_ms={med(to_ok):.1f}")
PY
} 2>&1 | tee "$LOG"
smoke_check "$LOG" "full_disk_recovery : first_250_ms healthz_ok_ms"
