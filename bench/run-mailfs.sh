#!/usr/bin/env bash
# The mail file system's benchmarks (issue 5): thesis sweeps, large-file bandwidth against
# raw IMAP on the same accounts, metadata rate, Postmark and fio, all against one private
# Dovecot on loopback. Results: RESULT lines in bench/results/mailfs-<date>.log.
#
#   bench/run-mailfs.sh                      everything (about 30 minutes on 2 cores)
#   QUICK=1 ONLY=big,meta bench/run-mailfs.sh
#   ONLY=postmark_cpu bench/run-mailfs.sh    bench/mailfs-postmark-cpu.py (CPU per Postmark run)
#   SMOKE=1 bench/run-mailfs.sh              every row and mailfs-postmark-cpu.py with tiny
#                                            sizes; fails on a zero figure
# Env: ONLY, QUICK and the rest of bench/mailfs-bench.py's, and bench/lib.sh's PROFILE,
# NO_BUILD, SMOKE, LOG_DIR.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
apt_install postmark fio dovecot-imapd fuse3 git
build -p test-peers -p mailfs --bins --example dovecot --example raw_imap
export BIN_DIR SMOKE
log=$LOG_DIR/mailfs-$(date -u +%Y%m%d-%H%M%S).log
{
  echo "# commit $(git rev-parse --short=12 HEAD) $(date -u +%FT%TZ) cipher ${CIPHER:-auto} transfer ${TRANSFER:-base64}"
  echo "# machine $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -r), dovecot $(dovecot --version)"
} | tee "$log"
if [ "${ONLY:-}" != postmark_cpu ]; then
  python3 bench/mailfs-bench.py | tee -a "$log"
fi
if [ "$SMOKE" = 1 ] || [ "${ONLY:-}" = postmark_cpu ]; then
  python3 bench/mailfs-postmark-cpu.py | tee -a "$log"
fi
echo "log: $log"
checks=()
want_row() { [ -z "${ONLY:-}" ] || [[ ",$ONLY," == *",$1,"* ]]; }
want_row sweep && checks+=('row=sweep : file_bytes write_s read_s')
want_row raw && want_row sweep && checks+=('row=raw : write_s read_s')
want_row big && checks+=('row=big : mount_write_MBps raw_write_MBps mount_read_MBps raw_read_MBps'
  'row=big_pinned : mount_write_MBps raw_write_MBps mount_read_MBps raw_read_MBps')
want_row meta && checks+=('row=meta : create_per_s stat_per_s readdir_1000_per_s')
want_row postmark && checks+=('row=postmark : mount_s local_s')
want_row fio && checks+=('row=fio : mount_MiBps local_MiBps')
want_row small && checks+=('row=small : entries tar_mount_s tar_durable_mount_s tar_durable_ratio clone_mount_s clone_durable_mount_s clone_durable_ratio rm_mount_s rm_durable_mount_s rm_durable_ratio umount_s')
want_row flat && checks+=('row=flat where=mount : creates_per_s renames_per_s unlinks_per_s')
want_row rewrite && checks+=('row=rewrite : ops account_bytes_max bytes_per_live first_ops_per_s last_ops_per_s reclaimed_messages')
[ "$SMOKE" = 1 ] && checks+=('row=postmark_cpu : wall_s mount_peak_rss_mb')
smoke_check "$log" "${checks[@]}"
