#!/usr/bin/env bash
# mbsync_roundtrip.sh - a real synchronisation client (isync's mbsync) against an IMAP server.
#
#   crates/mailstow/tests/e2e/mbsync_roundtrip.sh HOST PORT USER PASSWORD WORKDIR [COUNT]
#
# The account must start empty (WIPE=1 empties it first over IMAP). WORKDIR is created; what an
# earlier run left in it (local/, back/, *.json, mbsync logs and configs) is removed. Steps:
#  a. build WORKDIR/local: maildirs INBOX, Sent, Archive/2024, Archive/2025, "Folder with space"
#     (mbsync "SubFolders Verbatim" layout) with COUNT (3000) messages in all, flags varied
#     (none, S, FS, RS, FRS, D, F; some unseen ones in new/), sizes from 100 B to ~300 KiB,
#     8-bit UTF-8 bodies, a "From " line, dot lines, a 900-byte line;
#  b. mbsync -a with WORKDIR/mbsyncrc-local (IMAPAccount: SSLType None, AuthMechs LOGIN PLAIN,
#     PipelineDepth 50; MaildirStore; Channel: Patterns *, Create Both, Expunge Both,
#     SyncState *): pushes everything to the server; then the server's STATUS counts are checked;
#  c. mbsync -a with WORKDIR/mbsyncrc-back: pulls the account into the empty WORKDIR/back;
#  d. local and back must hold the same folders, the same messages per folder (Message-ID and
#     sha256 of the body) with the same flags;
#  e. in back: flags changed on ~6% of the messages, ~2% deleted; mbsync back (pushes the changes
#     to the server), mbsync local (pulls them); local must then equal back, the server counts
#     must match, and a second mbsync of each must be a no-op.
# Exit 0 only when every check passed, with "mbsync-roundtrip: OK folders=N messages=M"; on a
# failure the differences and the tail of the mbsync log are printed.
# Env: WIPE (0), MBSYNC (mbsync), MBSYNC_TIMEOUT (600 s per run), KEEP (1: leave WORKDIR),
# SEED (42), INSTALL (1: apt-get install isync when mbsync is missing), AUTHMECHS ("LOGIN PLAIN":
# mbsync picks SASL PLAIN when the server offers AUTH=PLAIN and Cyrus SASL's PLAIN module is
# installed, else the LOGIN command; "LOGIN" forces the LOGIN command), MBSYNC_ACCOUNT_EXTRA
# (more IMAPAccount lines, e.g. "DisableExtensions UIDPLUS LITERAL+" to try the fallbacks).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOOL="python3 $HERE/maildir_tool.py"
[ $# -ge 5 ] || { awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 2; }
HOST=$1 PORT=$2 USER=$3 PASSWORD=$4 WORKDIR=$5 COUNT=${6:-3000}
MBSYNC=${MBSYNC:-mbsync} SEED=${SEED:-42} MBSYNC_TIMEOUT=${MBSYNC_TIMEOUT:-600}

fail() { echo "mbsync-roundtrip: FAIL: $*"; exit 1; }
step() { echo "== $*"; }

# --- mbsync
if ! command -v "$MBSYNC" >/dev/null; then
  if [ "${INSTALL:-1}" = 1 ] && ! dpkg -s isync >/dev/null 2>&1; then
    step "installing isync"
    { timeout 300 apt-get update -qq && DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -qq isync; } >/dev/null 2>&1 \
      || fail "apt-get install isync failed"
  fi
  command -v "$MBSYNC" >/dev/null || fail "no $MBSYNC"
fi
echo "$("$MBSYNC" --version 2>&1 | head -1), server $HOST:$PORT user $USER, $COUNT messages"

mkdir -p "$WORKDIR" || fail "cannot create $WORKDIR"
WORKDIR=$(cd "$WORKDIR" && pwd)
case "$WORKDIR" in /|/root|/home|/tmp|/var|/var/tmp) fail "refusing WORKDIR=$WORKDIR" ;; esac
rm -rf "${WORKDIR:?}"/local "${WORKDIR:?}"/back "$WORKDIR"/*.json "$WORKDIR"/mbsync*.log "$WORKDIR"/mbsyncrc-*

# --- the account must be empty
if [ "${WIPE:-0}" = 1 ]; then
  $TOOL imap-wipe "$HOST" "$PORT" "$USER" "$PASSWORD" || fail "could not empty the account"
fi
read -r n detail < <($TOOL imap-count "$HOST" "$PORT" "$USER" "$PASSWORD") || fail "cannot log in to $HOST:$PORT as $USER over IMAP"
[ "$n" = 0 ] || fail "the account is not empty ($detail); use an empty account or WIPE=1"

# --- b. configuration: one file per maildir tree, both against the same account
rc() {  # rc NAME
  cat > "$WORKDIR/mbsyncrc-$1" <<EOF
IMAPAccount server
Host $HOST
Port $PORT
User $USER
Pass "$(printf '%s' "$PASSWORD" | sed 's/["\\]/\\&/g')"
SSLType None
AuthMechs ${AUTHMECHS:-LOGIN PLAIN}
PipelineDepth 50
Timeout 120
${MBSYNC_ACCOUNT_EXTRA:-}

IMAPStore server
Account server

MaildirStore $1
Path $WORKDIR/$1/
Inbox $WORKDIR/$1/INBOX
SubFolders Verbatim

Channel $1
Far :server:
Near :$1:
Patterns *
Create Both
Expunge Both
SyncState *
CopyArrivalDate yes
EOF
}
rc local; rc back
mkdir -p "$WORKDIR/back"   # mbsync creates the folders, not the store's root

N_RUN=0
sync_tree() {  # sync_tree NAME WHAT : mbsync -a on that tree; exit status and the stats line
  N_RUN=$((N_RUN + 1))
  local log="$WORKDIR/mbsync-$N_RUN-$1.log" t0 t1 rc
  t0=$(date +%s.%N)
  timeout "$MBSYNC_TIMEOUT" "$MBSYNC" -V -c "$WORKDIR/mbsyncrc-$1" -a > "$log" 2>&1; rc=$?
  t1=$(date +%s.%N)
  printf '   mbsync %-5s (%s): exit %s in %.1f s; %s boxes, %s\n' "$1" "$2" "$rc" "$(echo "$t1 - $t0" | bc)" \
    "$(grep -c '^Synchronizing' "$log")" "$(grep -m1 -oE '^Authenticating with [^.]*' "$log" || echo 'IMAP LOGIN')"
  if [ "$rc" != 0 ]; then
    echo "---- tail of $log"; tail -25 "$log"; fail "mbsync $1 ($2) failed (exit $rc)"
  fi
}
check() {  # check A.json B.json NAME_A NAME_B WHAT [--extra-empty-ok]
  if ! $TOOL compare "$1" "$2" "$3" "$4" ${6:-}; then fail "$5: $3 and $4 differ (see DIFF lines)"; fi
  echo "   $5: $3 == $4"
}
server_check() {  # server_check EXPECTED.json WHAT
  if ! $TOOL imap-check "$HOST" "$PORT" "$USER" "$PASSWORD" "$1"; then fail "$2: the server's counts differ"; fi
}

# --- a. the local tree
step "a. building $WORKDIR/local ($COUNT messages)"
$TOOL build "$WORKDIR/local" "$COUNT" --seed "$SEED" || fail "build failed"
$TOOL snapshot "$WORKDIR/local" "$WORKDIR/built.json" || fail "snapshot failed"
python3 - "$WORKDIR/built.json" <<'EOF'
import json, sys, collections
s = json.load(open(sys.argv[1]))
fl = collections.Counter(f or "-" for m in s.values() for _, f in m.values())
print("   " + ", ".join(f"{k}={len(v)}" for k, v in sorted(s.items())) + "; flags " + " ".join(f"{k}:{v}" for k, v in sorted(fl.items())))
EOF

# --- b. push
step "b. push: mbsync local -> server"
sync_tree local "push"
$TOOL snapshot "$WORKDIR/local" "$WORKDIR/local-1.json"
# (empty folders the server has by default, e.g. Trash, may appear locally: Create Both)
check "$WORKDIR/built.json" "$WORKDIR/local-1.json" built local-after-push "local tree unchanged by the push" --extra-empty-ok
server_check "$WORKDIR/built.json" "after the push"

# --- c. pull into an empty tree
step "c. pull: mbsync server -> back (empty)"
sync_tree back "pull"
$TOOL snapshot "$WORKDIR/back" "$WORKDIR/back-1.json"

# --- d. compare
step "d. compare local and back"
check "$WORKDIR/local-1.json" "$WORKDIR/back-1.json" local back "folders, messages, bodies, flags"

# --- e. changes made in back reach local through the server
step "e. changes in back: flags and deletions"
echo "   $($TOOL mutate "$WORKDIR/back" "$WORKDIR/back-changed.json" --seed "$((SEED + 1))")"
sync_tree back "push changes"
$TOOL snapshot "$WORKDIR/back" "$WORKDIR/back-2.json"
check "$WORKDIR/back-changed.json" "$WORKDIR/back-2.json" back-as-changed back-after-sync "back kept its changes"
server_check "$WORKDIR/back-changed.json" "after pushing the changes"
sync_tree local "pull changes"
$TOOL snapshot "$WORKDIR/local" "$WORKDIR/local-2.json"
check "$WORKDIR/back-changed.json" "$WORKDIR/local-2.json" back-as-changed local "local got the changes"
if $TOOL compare "$WORKDIR/local-1.json" "$WORKDIR/local-2.json" >/dev/null; then fail "local did not change at all"; fi

# --- a second run of each must change nothing
step "f. idempotence: a second mbsync of each tree"
sync_tree back "no-op"; sync_tree local "no-op"
$TOOL snapshot "$WORKDIR/back" "$WORKDIR/back-3.json"; $TOOL snapshot "$WORKDIR/local" "$WORKDIR/local-3.json"
check "$WORKDIR/local-2.json" "$WORKDIR/local-3.json" local-before local-after "local stable"
check "$WORKDIR/back-2.json" "$WORKDIR/back-3.json" back-before back-after "back stable"
server_check "$WORKDIR/local-3.json" "at the end"

read -r folders messages < <(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(len(s), sum(len(v) for v in s.values()))' "$WORKDIR/local-3.json")
[ "${KEEP:-1}" = 1 ] || rm -rf "${WORKDIR:?}"/local "${WORKDIR:?}"/back
echo "mbsync-roundtrip: OK folders=$folders messages=$messages"
