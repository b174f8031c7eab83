#!/usr/bin/env bash
# The cluster (issue 20): CPU per message local against remote, directory statements and
# bytes between nodes per message, one node against two and three (each in its own cgroup
# CPU share), and failover after SIGKILL and SIGSTOP. bench/cluster-bench.py does the work;
# this script builds the binary, checks what it needs and keeps the log.
#
#   bench/run-cluster.sh                    # everything: cpu, scale, failover, directory
#   ONLY="cpu failover" bench/run-cluster.sh
#
# Needs root (a private PostgreSQL runs as `postgres` through runuser; the nodes' cgroups are
# created under /sys/fs/cgroup/cpu) and PostgreSQL's binaries with pg_stat_statements
# (Debian's `postgresql`, which scripts/test.sh installs). Nothing else is installed.
# Env: RUNS (3), QUOTA (0.1 cores per node), CONNS (24 per entry node), STEP_SECONDS (8), FAILOVER_RUNS (5),
# CPU_RATE (300 msg/s), START_RATE (200 msg/s per node), SCRATCH (/var/tmp), PROFILE (release). Output: RESULT lines, log in
# bench/results/cluster-<timestamp>.log.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PROFILE=${PROFILE:-release}
ONLY=${ONLY:-cpu scale failover directory}
LOG=$ROOT/bench/results/cluster-$(date +%Y%m%d-%H%M%S).log
mkdir -p "$ROOT/bench/results"
cd "$ROOT"
cargo build --profile "$PROFILE" --locked -p mailstow 2>&1 | tail -1
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=$TARGET/$PROFILE/mailstow
ls /usr/lib/postgresql/*/lib/pg_stat_statements.so > /dev/null
[ -d /sys/fs/cgroup/cpu ] || { echo "no cgroup v1 cpu controller at /sys/fs/cgroup/cpu" >&2; exit 1; }
[ "$(nproc)" -ge 2 ] || { echo "needs two CPUs (load and PostgreSQL on 0, nodes on 1)" >&2; exit 1; }
{
  echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD -- crates || echo +dirty) profile $PROFILE"
  echo "# $(uname -r), $(nproc) cores, $(awk '/MemTotal/{printf "%d GiB", $2/1048576}' /proc/meminfo), scratch ${SCRATCH:-/var/tmp} on $(df --output=fstype "${SCRATCH:-/var/tmp}" | tail -1), load $(cut -d' ' -f1-3 /proc/loadavg)"
  python3 "$ROOT/bench/cluster-bench.py" $ONLY --bin "$BIN" --scratch "${SCRATCH:-/var/tmp}" \
    --runs "${RUNS:-3}" --quota "${QUOTA:-0.1}" --conns "${CONNS:-24}" --step-seconds "${STEP_SECONDS:-8}" \
    --failover-runs "${FAILOVER_RUNS:-5}" --cpu-rate "${CPU_RATE:-300}" --start-rate "${START_RATE:-200}"
  echo "# done $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
} 2>&1 | tee "$LOG" | grep --line-buffered '^RESULT\|^#'
echo "log: $LOG"
