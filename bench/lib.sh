# Sourced by the bench/run-*.sh scripts (and bench/pjdfstest.sh): which binaries run, building
# them, the peer harness, and the smoke mode's check.
#
# Env:
#   PROFILE (release)  the cargo profile whose binaries run: target/<profile>/mailstow and
#                      mailstow-bench (`mailstow bench` and `mailstow sim validate` run the
#                      mailstow-bench next to mailstow). `ci` is what the test command builds.
#   NO_BUILD (0)       1: run the binaries as they are, without `cargo build`.
#   BIN                the mailstow binary (default target/<profile>/mailstow).
#   CARGO_TARGET_DIR   as for cargo.
#   SHARED_BENCH       the peer harness (default bench/peers: the team's shared/bench, vendored
#                      so a clone runs as committed on a fresh machine).
#   SMOKE (0)          1: the shortest run that still takes every path (tiny counts, one
#                      repetition); the script then fails unless every mailstow figure it
#                      printed is non-zero. scripts/bench-smoke.sh runs every script so.
#   LOG_DIR            where the log goes (bench/results, whose logs are kept in git; with
#                      SMOKE=1, /tmp/mailstow-bench-smoke).
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PROFILE=${PROFILE:-release}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
case $PROFILE in dev) BIN_DIR=$TARGET/debug ;; *) BIN_DIR=$TARGET/$PROFILE ;; esac
BIN=${BIN:-$BIN_DIR/mailstow}
SMOKE=${SMOKE:-0}
NO_BUILD=${NO_BUILD:-0}
if [ "$SMOKE" = 1 ]; then LOG_DIR=${LOG_DIR:-${TMPDIR:-/tmp}/mailstow-bench-smoke}; else LOG_DIR=${LOG_DIR:-$ROOT/bench/results}; fi
mkdir -p "$LOG_DIR"

# build [CARGO ARGS...]: mailstow and mailstow-bench (and whatever else is named) in PROFILE,
# unless NO_BUILD=1; then checks that BIN is there.
build() {
  if [ "$NO_BUILD" != 1 ]; then
    local out
    out=$(cd "$ROOT" && cargo build --profile "$PROFILE" --locked -p mailstow -p mailstow-bench "$@" 2>&1) \
      || { printf '%s\n' "$out" | tail -20 >&2; echo "ERROR: cargo build failed" >&2; exit 1; }
    printf '%s\n' "$out" | tail -1
  fi
  [ -x "$BIN" ] || { echo "ERROR: no $BIN (build it: cargo build --profile $PROFILE -p mailstow -p mailstow-bench)" >&2; exit 1; }
}

# shared_bench: sets SHARED_BENCH to the peer harness's directory, or stops with why.
shared_bench() {
  SHARED_BENCH=${SHARED_BENCH:-$ROOT/bench/peers}
  [ -f "$SHARED_BENCH/setup-peers.sh" ] || { echo "ERROR: no peer harness at $SHARED_BENCH (set SHARED_BENCH)" >&2; exit 1; }
  SHARED_BENCH=$(cd "$SHARED_BENCH" && pwd)
}

# apt_install PACKAGE...: installs the Debian packages not yet installed (as root), with the
# packages' own daemons kept from starting (policy-rc.d), as scripts/test.sh does.
apt_install() {
  local missing=() p added=0
  for p in "$@"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p"); done
  [ ${#missing[@]} -gt 0 ] || return 0
  [ "$(id -u)" = 0 ] || { echo "ERROR: missing packages ${missing[*]} (run as root or install them)" >&2; exit 1; }
  if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; added=1; fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
  local rc=$?
  [ $added = 1 ] && rm -f /usr/sbin/policy-rc.d
  [ $rc = 0 ] || { echo "ERROR: apt-get install ${missing[*]} failed" >&2; exit 1; }
}

# smoke_check LOG SPEC...: with SMOKE=1, fails (exit 1) unless each SPEC matches a RESULT line
# of LOG and every field it names is a number above zero on every line it matches.
# SPEC: "FILTER... : FIELD...", FILTER a result name or key=value (bench/nonzero.py).
smoke_check() {
  [ "$SMOKE" = 1 ] || return 0
  python3 "$ROOT/bench/nonzero.py" "$@" || { echo "SMOKE FAILED: $(basename "$0") printed a zero or missing mailstow figure (log $1)" >&2; exit 1; }
}
