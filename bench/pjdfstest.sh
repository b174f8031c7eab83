#!/usr/bin/env bash
# The POSIX file system test suite (pjdfstest, https://github.com/pjd/pjdfstest) on a mail
# file system: four accounts of a private loopback Dovecot in two replication groups,
# mounted --allow-other (the suite switches users), then fsck. Not part of the test command:
# the suite is not vendored and CI has no network to fetch it.
#
#   PJDFSTEST=/path/to/built/pjdfstest bench/pjdfstest.sh [tests/link ...]
#
# PJDFSTEST is a checkout where `autoreconf -ifs && ./configure && make pjdfstest` ran.
# Prints prove's summary and the fsck report; exits non-zero if either fails.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${PJDFSTEST:?set PJDFSTEST to a built pjdfstest checkout}"
command -v prove >/dev/null || { echo "prove (perl) is needed" >&2; exit 1; }
cargo build --release --locked -p mailstow --bin mailstow -p test-peers --example dovecot
bin=$PWD/target/release
work=$(mktemp -d)
mkfifo "$work/dovecot.in"
sleep 1000000 > "$work/dovecot.in" &
holder=$!
"$bin/examples/dovecot" 4 < "$work/dovecot.in" > "$work/dovecot.out" &
dovecot=$!
cleanup() {
  "$bin/mailstow" fs umount "$work/mnt" >/dev/null 2>&1 || true
  kill "$holder" 2>/dev/null || true
  wait "$dovecot" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 100); do grep -q port= "$work/dovecot.out" && break; sleep 0.2; done
port=$(grep -o 'port=[0-9]*' "$work/dovecot.out" | cut -d= -f2)
{
  printf '[fs]\nfolder = "pjdfstest"\n[cache]\ndir = "%s/cache"\n[encryption]\npassphrase = "pjdfstest"\n' "$work"
  for g in 0 1; do
    echo "[[group]]"
    for a in 1 2; do
      u=$((g * 2 + a))
      printf '[[group.account]]\nhost = "127.0.0.1"\nport = %s\ntls = "none"\nuser = "user%s"\npassword = "pw%s"\n' "$port" "$u" "$u"
    done
  done
} > "$work/fs.toml"
mkdir "$work/mnt"
"$bin/mailstow" fs --config "$work/fs.toml" mkfs
"$bin/mailstow" fs --config "$work/fs.toml" mount "$work/mnt" --allow-other &
for _ in $(seq 100); do mountpoint -q "$work/mnt" && break; sleep 0.2; done
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(tests)
status=0
(cd "$work/mnt" && prove -r "${tests[@]/#/$PJDFSTEST/}") 2>&1 | tail -15 || status=1
"$bin/mailstow" fs umount "$work/mnt"
sleep 1
"$bin/mailstow" fs --config "$work/fs.toml" fsck || status=1
exit $status
