#!/usr/bin/env bash
# The cluster's scale (issue 40, item 5), measured honestly and predicted: 1 to as many
# `mailstow serve` nodes as this machine has cores, each in its own network namespace, on its
# own CPU (taskset) and its own disk (a sparse file on a loop device, ext4), PostgreSQL and the
# load generator in namespaces of their own; SMTP through every node to users of every node;
# throughput, CPU per message and what saturates, with the simulator's prediction beside each
# run and its predictions for 16 and 64 nodes. bench/cluster-scale.py does the work; this
# script builds, checks what it needs and keeps the log.
#
#   bench/run-cluster-scale.sh                  # 1 and 2 nodes (on 2 cores), 3 runs, replicas 1
#   REPLICAS="1 2" NODES="2" bench/run-cluster-scale.sh   # replication off and on ([cluster] replicas = 2)
#   SMOKE=1 bench/run-cluster-scale.sh          # one short run of 1 and 2 nodes
#
# Needs root (namespaces, loop devices, mounts; PostgreSQL runs as `postgres` through
# runuser), iproute2, util-linux's losetup, e2fsprogs, PostgreSQL's binaries (installed here
# when missing) and the `mailstow-bench` binary next to `mailstow` (`mailstow bench smtp`).
# Env: NODES ("1 2"; a count above the cores is skipped: a node gets a core of its own),
# REPLICAS (1), RUNS (3), CONNS (32 SMTP connections per node), SECONDS_PER_RUN (10),
# DISK_GIB (1: each node's sparse image, removed at the end), PREDICT ("16 64"), SCRATCH
# (/var/tmp), and bench/lib.sh's PROFILE, NO_BUILD, BIN, SMOKE, LOG_DIR. Output: RESULT lines,
# log in bench/results/cluster-scale-<timestamp>.log.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
if [ "$SMOKE" = 1 ]; then
  : "${RUNS:=1}" "${SECONDS_PER_RUN:=1.5}" "${CONNS:=4}" "${PREDICT:=16}"
fi
NODES=${NODES:-1 2} REPLICAS=${REPLICAS:-1} RUNS=${RUNS:-3} CONNS=${CONNS:-32}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10} DISK_GIB=${DISK_GIB:-1} PREDICT=${PREDICT:-16 64}
SCRATCH=${SCRATCH:-/var/tmp}
LOG=$LOG_DIR/cluster-scale-$(date +%Y%m%d-%H%M%S).log
cd "$ROOT"
build
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces, loop devices)" >&2; exit 1; }
ls /usr/lib/postgresql/*/bin/pg_ctl > /dev/null 2>&1 || apt_install postgresql
for tool in ip losetup mkfs.ext4 taskset runuser; do
  command -v "$tool" > /dev/null || { echo "needs $tool" >&2; exit 1; }
done
[ -x "$(dirname "$BIN")/mailstow-bench" ] || { echo "needs $(dirname "$BIN")/mailstow-bench (mailstow bench smtp)" >&2; exit 1; }
{
  echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD -- crates || echo +dirty) profile $PROFILE"
  echo "# $(uname -r), $(nproc) cores, $(awk '/MemTotal/{printf "%d GiB", $2/1048576}' /proc/meminfo), scratch $SCRATCH on $(df --output=fstype "$SCRATCH" | tail -1) ($(df -h --output=avail "$SCRATCH" | tail -1 | tr -d ' ') free), load $(cut -d' ' -f1-3 /proc/loadavg)"
  # shellcheck disable=SC2086
  python3 "$ROOT/bench/cluster-scale.py" --bin "$BIN" --scratch "$SCRATCH" --nodes $NODES \
    --replicas $REPLICAS --runs "$RUNS" --conns "$CONNS" --seconds "$SECONDS_PER_RUN" \
    --disk-gib "$DISK_GIB" --predict $PREDICT
  echo "# done $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
} 2>&1 | tee "$LOG" | grep --line-buffered '^RESULT\|^#'
echo "log: $LOG"
smoke_check "$LOG" \
  'cluster_scale_calibration : local_us_per_msg generator_us_per_msg sync_us msgs_per_s' \
  'cluster_scale : msgs_per_s predicted_msgs_per_s cpu_us_per_msg' \
  'cluster_scale_prediction : predicted_msgs_per_s'
