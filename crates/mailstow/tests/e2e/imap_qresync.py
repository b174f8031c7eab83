#!/usr/bin/env python3
"""QRESYNC (RFC 7162) with Python's imaplib against a running mailstow: a client keeps its
state, another session expunges and flags, the client comes back and resynchronises from
VANISHED (EARLIER) and the changed FETCH responses alone; SORT and THREAD on the way.

usage: imap_qresync.py IMAPS_ADDR USER PASSWORD
Prints `imap-qresync: OK`; any failure raises.
"""
import imaplib
import re
import ssl
import sys

addr, user, password = sys.argv[1:4]
host, port = addr.rsplit(":", 1)


def connect():
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    c = imaplib.IMAP4_SSL(host, int(port), ssl_context=ctx)
    c.login(user, password)
    return c


def ok(result, what):
    typ, data = result
    assert typ == "OK", f"{what}: {typ} {data!r}"
    return data


a = connect()
for i in range(1, 11):
    m = f"From: s{i}@example.test\r\nSubject: {'Re: ' if i % 2 else ''}topic {i % 3}\r\nMessage-ID: <m{i}@example.test>\r\n\r\nbody {i}\r\n"
    ok(a.append("INBOX", None, None, m.encode()), "APPEND")
assert "QRESYNC" in a.capabilities, a.capabilities
ok(a.enable("QRESYNC"), "ENABLE QRESYNC")
data = ok(a.select("INBOX"), "SELECT")
validity = int(a.untagged_responses["UIDVALIDITY"][0])
modseq = int(re.search(rb"HIGHESTMODSEQ (\d+)", b" ".join(
    x if isinstance(x, bytes) else b"" for x in a.untagged_responses.get("OK", []))).group(1))
known = {int(u) for u in ok(a.uid("SEARCH", None, "ALL"), "UID SEARCH")[0].split()}
assert len(known) == 10, known
# SORT and THREAD answer over the same folder.
# Appended within a second or two: equal arrival times keep sequence order (RFC 5256 3).
sorted_uids = ok(a.uid("SORT", "(ARRIVAL)", "UTF-8", "ALL"), "UID SORT")[0].split()
assert [int(u) for u in sorted_uids] == sorted(known), sorted_uids
threads = ok(a.uid("THREAD", "ORDEREDSUBJECT", "UTF-8", "ALL"), "UID THREAD")[0]
assert threads.count(b"(") >= 3, threads
a.logout()

# Another session changes the folder while the first is away.
b = connect()
ok(b.select("INBOX"), "SELECT")
ok(b.store("2", "+FLAGS", "(\\Flagged)"), "STORE")
ok(b.store("4:6", "+FLAGS", "(\\Deleted)"), "STORE")
ok(b.expunge(), "EXPUNGE")
b.logout()

# The first comes back with its state.
c = connect()
ok(c.enable("QRESYNC"), "ENABLE QRESYNC")
lo, hi = min(known), max(known)
typ, data = c._simple_command("SELECT", f"INBOX (QRESYNC ({validity} {modseq} {lo}:{hi}))")
assert typ == "OK", data
vanished = c.untagged_responses.get("VANISHED", [])
assert vanished, c.untagged_responses
gone = vanished[0].decode()
assert gone.startswith("(EARLIER) "), gone
ranges = gone.split(" ", 1)[1]
expected = sorted(known)[3:6]
assert ranges == f"{expected[0]}:{expected[-1]}", (ranges, expected)
fetches = c.untagged_responses.get("FETCH", [])
flagged = [f for f in fetches if b"\\Flagged" in f]
assert len(flagged) == 1 and b"MODSEQ" in flagged[0], fetches
# Without QRESYNC state the folder shows 7 messages.
assert int(c.untagged_responses["EXISTS"][-1]) == 7
c.logout()
print("imap-qresync: OK")
