#!/usr/bin/env bash
# The mail file system's benchmarks (issue 5): thesis sweeps, large-file bandwidth against
# raw IMAP on the same accounts, metadata rate, Postmark and fio, all against one private
# Dovecot on loopback. Results: RESULT lines in bench/results/mailfs-<date>.log.
#
#   bench/run-mailfs.sh                      everything (about 30 minutes on 2 cores)
#   QUICK=1 ONLY=big,meta bench/run-mailfs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
for p in postmark fio; do command -v $p >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $p; done
[ -x /usr/sbin/dovecot ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dovecot-imapd
cargo build --release --locked -p mailstow -p test-peers -p mailfs --bin mailstow --example dovecot --example raw_imap
mkdir -p bench/results
log=bench/results/mailfs-$(date -u +%Y%m%d-%H%M%S).log
{
  echo "# commit $(git rev-parse --short=12 HEAD) $(date -u +%FT%TZ) cipher ${CIPHER:-auto} transfer ${TRANSFER:-base64}"
  echo "# machine $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -r), dovecot $(dovecot --version)"
} | tee "$log"
python3 bench/mailfs-bench.py | tee -a "$log"
echo "log: $log"
