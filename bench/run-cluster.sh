#!/usr/bin/env bash
# The cluster (issue 20): CPU per message local against remote, directory statements and
# bytes between nodes per message, one node against two and three (each in its own cgroup
# CPU share), and failover after SIGKILL and SIGSTOP. bench/cluster-bench.py does the work;
# this script builds the binary, checks what it needs and keeps the log.
#
#   bench/run-cluster.sh                    # everything: cpu, scale, failover, directory
#   ONLY="cpu failover" bench/run-cluster.sh
#   SMOKE=1 bench/run-cluster.sh            # every part, one short step each; fails on a zero figure
#
# Needs root (a private PostgreSQL runs as `postgres` through runuser; the nodes' cgroups are
# created under /sys/fs/cgroup/cpu) and PostgreSQL's binaries with pg_stat_statements
# (Debian's `postgresql`, installed here when missing, as scripts/test.sh does).
# Env: RUNS (3), QUOTA (0.1 cores per node), CONNS (24 per entry node), STEP_SECONDS (8), FAILOVER_RUNS (5),
# CPU_RATE (300 msg/s), START_RATE (200 msg/s per node), SCRATCH (/var/tmp), and bench/lib.sh's
# PROFILE (release), NO_BUILD, BIN, SMOKE, LOG_DIR. Output: RESULT lines, log in
# bench/results/cluster-<timestamp>.log.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ONLY=${ONLY:-cpu scale failover directory}
smoke_args=()
if [ "$SMOKE" = 1 ]; then
  : "${RUNS:=1}" "${STEP_SECONDS:=1}" "${FAILOVER_RUNS:=1}" "${CPU_RATE:=50}" "${START_RATE:=50}" "${CONNS:=4}"
  # One step of one and of two nodes (the first rate is above --rate-max).
  smoke_args=(--cpu-seconds 2 --idle-seconds 1 --nodes 1 2 --rate-max 1)
fi
LOG=$LOG_DIR/cluster-$(date +%Y%m%d-%H%M%S).log
cd "$ROOT"
build
ls /usr/lib/postgresql/*/lib/pg_stat_statements.so > /dev/null 2>&1 || apt_install postgresql
ls /usr/lib/postgresql/*/lib/pg_stat_statements.so > /dev/null
[ -d /sys/fs/cgroup/cpu ] || { echo "no cgroup v1 cpu controller at /sys/fs/cgroup/cpu" >&2; exit 1; }
[ "$(nproc)" -ge 2 ] || { echo "needs two CPUs (load and PostgreSQL on 0, nodes on 1)" >&2; exit 1; }
{
  echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD -- crates || echo +dirty) profile $PROFILE"
  echo "# $(uname -r), $(nproc) cores, $(awk '/MemTotal/{printf "%d GiB", $2/1048576}' /proc/meminfo), scratch ${SCRATCH:-/var/tmp} on $(df --output=fstype "${SCRATCH:-/var/tmp}" | tail -1), load $(cut -d' ' -f1-3 /proc/loadavg)"
  python3 "$ROOT/bench/cluster-bench.py" $ONLY --bin "$BIN" --scratch "${SCRATCH:-/var/tmp}" \
    --runs "${RUNS:-3}" --quota "${QUOTA:-0.1}" --conns "${CONNS:-24}" --step-seconds "${STEP_SECONDS:-8}" \
    --failover-runs "${FAILOVER_RUNS:-5}" --cpu-rate "${CPU_RATE:-300}" --start-rate "${START_RATE:-200}" \
    "${smoke_args[@]}"
  echo "# done $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
} 2>&1 | tee "$LOG" | grep --line-buffered '^RESULT\|^#'
echo "log: $LOG"
checks=()
for part in $ONLY; do
  case $part in
    cpu) checks+=('cluster_cpu_per_msg : sent stored total_us' 'cluster_cpu_summary : local_us_median remote_us_median') ;;
    scale) checks+=('cluster_scale_step : sent processed_per_s' 'cluster_scale : max_msgs_per_s per_node') ;;
    failover) checks+=('cluster_failover : queued delivered_after_s' 'cluster_failover_summary : unavailable_median_s delivered_median_s') ;;
    directory) checks+=('cluster_directory_statement : statements backend_cpu_us_per_statement wall_us_per_statement') ;;
  esac
done
smoke_check "$LOG" "${checks[@]}"

