#!/usr/bin/env bash
# The POSIX file system test suite (pjdfstest, https://github.com/pjd/pjdfstest) on a mail
# file system: four accounts of a private loopback Dovecot in two replication groups,
# mounted --allow-other (the suite switches users), then fsck. Not part of the test command:
# the suite is not vendored and CI has no network to fetch it.
#
#   PJDFSTEST=/path/to/built/pjdfstest bench/pjdfstest.sh [tests/link ...]
#   SMOKE=1 bench/pjdfstest.sh       without PJDFSTEST: the same mount, prove and fsck, with a
#                                    stand-in of a dozen POSIX checks (written below) for the suite
#
# PJDFSTEST is a checkout where `autoreconf -ifs && ./configure && make pjdfstest` ran.
# Prints prove's summary, a `RESULT pjdfstest files= tests= failed=` line and the fsck report;
# exits non-zero if either fails. Env: PJDFSTEST, and bench/lib.sh's PROFILE, NO_BUILD, SMOKE.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
if [ -z "${PJDFSTEST:-}" ] && [ "$SMOKE" != 1 ]; then
  echo "set PJDFSTEST to a built pjdfstest checkout (or SMOKE=1 for the stand-in checks)" >&2; exit 1
fi
command -v prove >/dev/null || apt_install perl
command -v prove >/dev/null || { echo "prove (perl) is needed" >&2; exit 1; }
apt_install dovecot-imapd fuse3
build -p test-peers --bins --example dovecot
bin=$BIN_DIR
work=$(mktemp -d)
if [ -z "${PJDFSTEST:-}" ]; then
  # The stand-in: TAP checks of what the suite covers most (modes, owners, another user's
  # access, links, rename, truncate, removal), as root and as nobody.
  PJDFSTEST=$work/standin
  mkdir -p "$PJDFSTEST/tests/smoke"
  cat > "$PJDFSTEST/tests/smoke/00.t" <<'TAP'
#!/bin/sh
n=0
ok() { n=$((n + 1)); if eval "$1"; then echo "ok $n - $1"; else echo "not ok $n - $1"; fi; }
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
echo "1..14"
d=smoke.$$
ok "mkdir $d && [ -d $d ]"
ok "printf 'hello\n' > $d/f && [ \"\$(cat $d/f)\" = hello ]"
ok "chmod 0640 $d/f && [ \"\$(stat -c %a $d/f)\" = 640 ]"
ok "chown 65534:65534 $d/f && [ \"\$(stat -c %u:%g $d/f)\" = 65534:65534 ]"
ok "as_nobody cat $d/f > /dev/null"
ok "chmod 0755 $d && ! as_nobody sh -c 'echo x > $d/g' 2> /dev/null"
ok "ln $d/f $d/h && [ \"\$(stat -c %h $d/f)\" = 2 ]"
ok "ln -s f $d/s && [ \"\$(readlink $d/s)\" = f ]"
ok "mv $d/f $d/g && [ -e $d/g ] && [ ! -e $d/f ]"
ok "truncate -s 100000 $d/g && [ \"\$(stat -c %s $d/g)\" = 100000 ]"
ok "chmod 0777 $d && as_nobody sh -c 'echo y > $d/n' && [ \"\$(stat -c %u $d/n)\" = 65534 ]"
ok "rm $d/g $d/h $d/s $d/n && [ -z \"\$(ls -A $d)\" ]"
ok "rmdir $d && [ ! -e $d ]"
ok "[ ! -e $d ]"
TAP
  chmod +x "$PJDFSTEST/tests/smoke/00.t"
  [ $# -gt 0 ] || set -- tests/smoke
fi
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
(cd "$work/mnt" && prove -r "${tests[@]/#/$PJDFSTEST/}") > "$work/prove.out" 2>&1 || status=1
tail -15 "$work/prove.out"
# prove's summary: "Files=N, Tests=M, ..." and "Failed F/M subtests" when some failed.
files=$(sed -n 's/^Files=\([0-9]*\), Tests=\([0-9]*\).*/\1/p' "$work/prove.out")
count=$(sed -n 's/^Files=\([0-9]*\), Tests=\([0-9]*\).*/\2/p' "$work/prove.out")
failed=$(sed -n 's/^Failed \([0-9]*\)\/[0-9]* subtests.*/\1/p' "$work/prove.out" | awk '{s += $1} END {print s + 0}')
echo "RESULT pjdfstest files=${files:-0} tests=${count:-0} failed=$failed" | tee "$work/result.log"
"$bin/mailstow" fs umount "$work/mnt"
sleep 1
"$bin/mailstow" fs --config "$work/fs.toml" fsck || status=1
[ "$status" = 0 ] || exit "$status"
smoke_check "$work/result.log" 'pjdfstest : files tests'
