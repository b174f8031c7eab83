#!/usr/bin/env bash
# The one test command: README's second command, and what CI runs (.ci/run).
# Installs the system packages the tests need, then format check, lints, and every test.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo >/dev/null || {
  echo "scripts/test.sh needs Rust $(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml) or newer" \
    "with rustfmt and clippy: https://rustup.rs (README.md, Prerequisites)" >&2
  exit 1
}

need_pkgs=()
# C for aws-lc, SQLite (bundled), ring and blake3; C++ for the fuzz targets' libFuzzer
# (libfuzzer-sys, checked below).
command -v cc >/dev/null || need_pkgs+=(gcc)
command -v c++ >/dev/null || need_pkgs+=(g++)
command -v pkg-config >/dev/null || need_pkgs+=(pkg-config)
# Real clients for the server's end-to-end tests.
command -v python3 >/dev/null || need_pkgs+=(python3)
command -v curl >/dev/null || need_pkgs+=(curl)
# A real Postfix relays into our LMTP listener in the tests (its daemons are not started by
# the package: the test runs a private instance on a loopback port).
[ -x /usr/sbin/postfix ] || need_pkgs+=(postfix)
# mbsync, the real synchronisation client of the IMAP round-trip test.
command -v mbsync >/dev/null || need_pkgs+=(isync)
# NeoMutt, a terminal client driven in tmux, for the IMAP thread and sort views test.
command -v neomutt >/dev/null || need_pkgs+=(neomutt)
command -v tmux >/dev/null || need_pkgs+=(tmux)
# The mail file system's tests: private Dovecot instances as the accounts (also the writer of
# the real Dovecot maildir that tests/migration.rs imports), and fusermount3 for unmounting (the mount itself is done by the binary through /dev/fuse).
[ -x /usr/sbin/dovecot ] || need_pkgs+=(dovecot-imapd)
# The cluster tests cut links between the nodes' loopback addresses (tests/cluster.rs).
[ -x /usr/sbin/iptables ] || need_pkgs+=(iptables)
# The directory's PostgreSQL tests: a private instance per test (test-peers' Postgres, initdb
# and pg_ctl as the postgres user); the package's own cluster is not started (policy-rc.d).
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_pkgs+=(postgresql)
command -v fusermount3 >/dev/null || need_pkgs+=(fuse3)
# The operator tests: openssl makes certificates for the reload test, systemd-analyze checks
# contrib/mailstow.service.
command -v openssl >/dev/null || need_pkgs+=(openssl)
command -v systemd-analyze >/dev/null || need_pkgs+=(systemd)
# The web view's browser tests (tests/browser.rs) run it in headless Chromium...
command -v chromium >/dev/null || need_pkgs+=(chromium)
# ...through its WebDriver, chromedriver...
command -v chromedriver >/dev/null || need_pkgs+=(chromium-driver)
# ...from Selenium, for Debian's /usr/bin/python3 (the test's, whatever python3 the PATH finds).
/usr/bin/python3 -c 'import selenium' 2>/dev/null || need_pkgs+=(python3-selenium)
# ManageSieve's clients (tests/managesieve.rs): sieve-connect, and sievelib for Debian's
# /usr/bin/python3.
command -v sieve-connect >/dev/null || need_pkgs+=(sieve-connect)
/usr/bin/python3 -c 'import sievelib' 2>/dev/null || need_pkgs+=(python3-sievelib)
# dkimpy, the independent DKIM verifier of sender-auth's tests, with PyNaCl for ed25519, for
# Debian's /usr/bin/python3 (Debian's packages: pip refuses to install into the system's
# Python, PEP 668). The tests run `python3`; below, that is made Debian's.
/usr/bin/python3 -c 'import dkim, nacl' 2>/dev/null || need_pkgs+=(python3-dkim python3-nacl)
# test-peers' BIND (crates/test-peers/tests/bind.rs, and the DNS, DANE and MTA-STS tests): a
# private authoritative named with DNSSEC-signed zones and a validating resolver, checked with
# dig (the package's own named is not started: policy-rc.d). And its acme2certifier
# (tests/acme2certifier.rs, the ACME tests): installed from PyPI into a cached venv
# (python3-venv), with Debian's certbot as the reference client.
[ -x /usr/sbin/named ] || need_pkgs+=(bind9)
command -v dnssec-signzone >/dev/null || need_pkgs+=(bind9-utils)
command -v dig >/dev/null || need_pkgs+=(bind9-dnsutils)
/usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || need_pkgs+=(python3-venv)
command -v certbot >/dev/null || need_pkgs+=(certbot)
# test-peers' Netns (crates/test-peers/src/netns.rs, the cluster's network namespace tests
# and bench/run-cluster-scale.sh): links between namespaces cut with iptables.
command -v iptables >/dev/null || need_pkgs+=(iptables)
# The benchmark scripts' smoke runs (scripts/bench-smoke.sh): the peers' packages that
# shared/bench/setup-peers.sh installs (postal, which has rabid, Dovecot's POP3 and LMTP, fio,
# strace, bc, rsync), and Postmark and prove for the mail file system's.
for p in postal dovecot-pop3d dovecot-lmtpd fio postmark strace bc rsync swaks sysstat perl rspamd redis-server clamav-daemon clamav-milter; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need_pkgs+=("$p")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections
    # Debian's postinst must not start system-wide daemons on ports 25/110 (or PostgreSQL's,
    # or named on 53).
    added_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
      added_policy=1
    fi
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}"
    [ "$added_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
  else
    echo "missing packages: ${need_pkgs[*]} (run as root or install them)" >&2; exit 1
  fi
fi
# The tests run `python3` and need Debian's packages above. When the PATH finds another
# Python first (a pyenv shim, say: CI's machines have one), put a directory holding only a
# `python3` that is Debian's in front of it, so nothing else on the PATH changes.
if ! python3 -c 'import dkim, nacl' 2>/dev/null; then
  debian_python="$PWD/target/debian-python"
  mkdir -p "$debian_python"
  ln -sfn /usr/bin/python3 "$debian_python/python3"
  export PATH="$debian_python:$PATH"
  echo "python3 on the PATH is not Debian's: using /usr/bin/python3 (through $debian_python)"
fi
if ! python3 -c 'import dkim, nacl' 2>/dev/null; then
  echo "$(command -v python3) cannot import dkim and nacl: install Debian's python3-dkim and" \
    "python3-nacl" >&2
  exit 1
fi

cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The `ci` profile (Cargo.toml): optimised, since the crash and recovery tests drive real load
# and the property tests run a thousand random operation sequences each (crashes included),
# with debug assertions and overflow checks on, so every invariant asserted in the code is
# checked too.
PROPTEST_CASES=${PROPTEST_CASES:-1000} cargo test --workspace --locked --profile ci --no-fail-fast
# The crash models are the store's and the queue's safety net, so every run explores many
# more fresh random sequences of them than of the other properties. Two store recovery bugs
# were found only past 50,000 cases.
PROPTEST_CASES=20000 cargo test --locked --profile ci -p store --test model
PROPTEST_CASES=10000 cargo test --locked --profile ci -p queue -- tests::model::queue_matches_model_across_crashes
# The fuzz targets still build against the crates (docs/fuzzing.md; `scripts/fuzz.sh` runs
# them).
cargo check --locked --manifest-path fuzz/Cargo.toml --all-targets
# Every script under bench/ in its shortest mode, with the binaries built above: each must
# run as committed and print non-zero mailstow figures.
scripts/bench-smoke.sh
