#!/usr/bin/env bash
# A private Postfix instance relaying into mailstow over LMTP (Postfix's lmtp transport).
#
#   postfix_lmtp.sh ROOT SMTP_PORT LMTP_ADDR DOMAIN start|send SUBJECT RCPT|stop
#
# ROOT holds the instance's config and queue; SMTP on 127.0.0.1:SMTP_PORT; every recipient in
# DOMAIN goes to lmtp:inet:LMTP_ADDR. Needs root (Postfix's master) and Debian's postfix.
set -euo pipefail
root=$1 port=$2 lmtp=$3 domain=$4 action=$5
conf=$root/etc
pf() { postfix -c "$conf" "$@"; }
case "$action" in
start)
  command -v postfix >/dev/null || [ -x /usr/sbin/postfix ] || { echo "postfix is not installed (apt-get install postfix)" >&2; exit 1; }
  mkdir -p "$conf" "$root/spool" "$root/data" "$root/log"
  chown postfix "$root/data"
  cat > "$conf/main.cf" <<CF
compatibility_level = 3.6
queue_directory = $root/spool
data_directory = $root/data
mail_owner = postfix
setgid_group = postdrop
myhostname = relay.postfix.test
mydestination =
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
smtpd_relay_restrictions = permit_mynetworks, reject_unauth_destination
virtual_mailbox_domains = $domain
virtual_mailbox_maps = static:OK
virtual_transport = lmtp:inet:$lmtp
lmtp_host_lookup = native
smtp_dns_support_level = disabled
disable_dns_lookups = yes
alias_maps =
alias_database =
local_recipient_maps =
maillog_file_prefixes = $root/log
maillog_file = $root/log/postfix.log
CF
  cat > "$conf/master.cf" <<CF
127.0.0.1:$port inet n - n - - smtpd
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
proxymap  unix  -       -       n       -       -       proxymap
smtp      unix  -       -       n       -       -       smtp
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
lmtp      unix  -       -       n       -       -       lmtp
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
CF
  pf check >/dev/null 2>&1 || true
  # One retry: under a full parallel test run `postfix start` was seen to fail once and
  # succeed when run again; a second failure shows what Postfix said.
  pf start >/dev/null 2>&1 || { sleep 1; pf stop >/dev/null 2>&1 || true; pf start >&2 2>&1; } || {
    echo "postfix start failed" >&2; script -qc "postfix -c $conf check" /dev/null >&2
    cat "$root/log/postfix.log" >&2 2>/dev/null || true; exit 1; }
  for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null && exit 0; sleep 0.1; done
  echo "postfix did not listen on $port" >&2; cat "$root/log/postfix.log" >&2 || true; exit 1
  ;;
send)
  subject=$6 rcpt=$7
  python3 - "$port" "$subject" "$rcpt" <<'PY'
import smtplib, sys
port, subject, rcpt = int(sys.argv[1]), sys.argv[2], sys.argv[3]
with smtplib.SMTP("127.0.0.1", port, timeout=20) as s:
    s.sendmail("sender@remote.test", [rcpt],
               f"From: sender@remote.test\r\nTo: {rcpt}\r\nSubject: {subject}\r\n\r\nrelayed by postfix\r\n".encode())
PY
  ;;
stop)
  pf stop >/dev/null 2>&1 || true
  ;;
log)
  cat "$root/log/postfix.log" 2>/dev/null || true
  ;;
esac
