#!/usr/bin/env bash
# Coverage-guided fuzzing of the parsers on the stable toolchain (docs/fuzzing.md).
#
#   scripts/fuzz.sh [TARGET...] [--seconds N] [--merge] [--jobs-flags "..."]
#
# Builds fuzz/ (its own workspace) with libFuzzer's coverage instrumentation, then runs each
# target (default: all) for N seconds (default 60) on a scratch copy of fuzz/corpus/<target>,
# so the committed corpora do not churn. --merge adds the new inputs that cover something new
# back into fuzz/corpus/<target> (libFuzzer -merge=1). Crash inputs go to
# fuzz/artifacts/<target>/. One summary line per target:
#
#   fuzz <target> executions=<n> crashes=<k> seconds=<s>
#
# Exits non-zero if any target crashed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

all_targets=(smtp_session lmtp_session pop3_session imap_session imap_framer mime_structure
  queue_record store_journal mailfs_envelope)
targets=()
seconds=60
merge=0
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --seconds=*) seconds=${1#*=}; shift ;;
    --merge) merge=1; shift ;;
    # Anything after -- goes to libFuzzer as is (e.g. -- -runs=1000000 -max_len=8192).
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [ -f "fuzz/fuzz_targets/$t.rs" ] || { echo "no such target: $t" >&2; exit 2; }
done

# Stable rustc has no -Zsanitizer (so no AddressSanitizer: the code under test has no unsafe
# of its own, and safe Rust's bounds and overflow checks, on in fuzz/'s release profile, do
# the detecting), but its LLVM runs the SanitizerCoverage pass when asked with -Cpasses and
# takes the pass's options through -Cllvm-args: exactly what cargo-fuzz passes on nightly
# minus the sanitizer. --cfg fuzzing is what libfuzzer-sys and other crates test for.
# Debug assertions and overflow checks come from fuzz/Cargo.toml's release profile rather than
# -Cdebug-assertions -Coverflow-checks here, which would also force them on in mail-parser,
# whose one debug_assert!(false) is a path it handles (the profile turns it off there).
export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module \
-Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares \
-Cforce-frame-pointers=yes"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-fuzz}
# --target keeps RUSTFLAGS off build scripts and proc macros (they must not be instrumented:
# they would need libFuzzer's symbols to link).
triple=$(rustc -vV | sed -n 's/^host: //p')
bins=()
for t in "${targets[@]}"; do bins+=(--bin "$t"); done
(cd fuzz && cargo build --locked --release --target "$triple" "${bins[@]}")

mkdir -p fuzz/artifacts
status=0
for t in "${targets[@]}"; do
  bin="$CARGO_TARGET_DIR/$triple/release/$t"
  work=$(mktemp -d "${TMPDIR:-/tmp}/fuzz-$t.XXXXXX")
  mkdir -p "$work/corpus" "fuzz/artifacts/$t"
  [ -d "fuzz/corpus/$t" ] && cp -r "fuzz/corpus/$t/." "$work/corpus/"
  dict=()
  [ -f "fuzz/dict/$t.dict" ] && dict=(-dict="fuzz/dict/$t.dict")
  log="$work/log"
  start=$(date +%s)
  set +e
  "$bin" "$work/corpus" "${dict[@]}" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="fuzz/artifacts/$t/" -close_fd_mask=1 "${extra[@]}" >"$log" 2>&1
  rc=$?
  set -e
  elapsed=$(( $(date +%s) - start ))
  # libFuzzer's last status line is "Done N runs in S second(s)" or "#N DONE ..."; a crash
  # leaves "stat::number_of_executed_units: N" from -print_final_stats, or the last "#N".
  runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -1)
  [ -n "$runs" ] || runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -1)
  [ -n "$runs" ] || runs=$(sed -n 's/^#\([0-9]*\).*/\1/p' "$log" | tail -1)
  crashes=$(grep -c '^artifact_prefix=.*Test unit written to\|^==[0-9]*== ERROR: libFuzzer' "$log" || true)
  crashes=$(( crashes > 0 ? 1 : 0 ))
  if [ $rc -ne 0 ] && [ $crashes -eq 0 ]; then crashes=1; fi
  echo "fuzz $t executions=${runs:-0} crashes=$crashes seconds=$elapsed"
  if [ $crashes -ne 0 ]; then
    status=1
    echo "--- $t: libFuzzer log ($log), last lines:" >&2
    tail -40 "$log" >&2
  fi
  if [ $merge = 1 ]; then
    mkdir -p "fuzz/corpus/$t"
    "$bin" -merge=1 "fuzz/corpus/$t" "$work/corpus" >"$work/merge.log" 2>&1 || true
  fi
  [ $crashes -ne 0 ] || rm -rf "$work"
done
exit $status
