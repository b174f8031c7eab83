#!/usr/bin/env python3
"""End to end through real sockets with Python's own clients (smtplib, poplib).

Driven by tests/serve.rs, which starts `mailstow serve` with a fresh data directory holding the
domain example.test and users alice and bob (password "secret-pw"), and passes the listener
addresses as arguments: smtp submission submissions lmtp pop3 pop3s (host:port each).
Prints one "ok <check>" line per check; any failure raises and exits non-zero.
"""
import poplib
import smtplib
import socket
import ssl
import sys
import time

smtp, submission, submissions, lmtp, pop3, pop3s = [
    (a.rsplit(":", 1)[0], int(a.rsplit(":", 1)[1])) for a in sys.argv[1:7]
]
insecure = ssl.create_default_context()
insecure.check_hostname = False
insecure.verify_mode = ssl.CERT_NONE


def ok(check):
    print("ok", check, flush=True)


def message(subject, body="hello\r\n", sender="carol@remote.test", to="alice@example.test"):
    return (
        f"From: {sender}\r\nTo: {to}\r\nSubject: {subject}\r\n"
        f"Message-ID: <{subject}@remote.test>\r\n\r\n{body}"
    ).encode()


def wait_for(user, count, timeout=10.0):
    """Polls POP3 STAT until the maildrop holds `count` messages (delivery is asynchronous)."""
    deadline = time.time() + timeout
    while True:
        p = poplib.POP3(*pop3, timeout=10)
        p.stls(context=insecure)
        p.user(user)
        p.pass_("secret-pw")
        n, _ = p.stat()
        p.quit()
        if n >= count:
            return n
        if time.time() > deadline:
            raise AssertionError(f"{user}: {n} messages, expected {count}")
        time.sleep(0.1)


# --- MX: plain and STARTTLS, local recipients, policy replies ---
with smtplib.SMTP(*smtp, timeout=10) as s:
    code, _ = s.ehlo("client.remote.test")
    assert code == 250
    for ext in ("pipelining", "8bitmime", "size", "enhancedstatuscodes", "smtputf8", "chunking", "starttls"):
        assert s.has_extn(ext), ext
    assert not s.has_extn("auth"), "AUTH must not be offered before TLS"
    s.sendmail("carol@remote.test", ["alice@example.test"], message("plain1"))
    ok("smtp plain delivery accepted")
    code, text = s.docmd("MAIL FROM:<carol@remote.test>")
    assert code == 250, (code, text)
    code, text = s.docmd("RCPT TO:<nobody@example.test>")
    assert code == 550 and b"5.1.1" in text, (code, text)
    ok("smtp unknown user 550 5.1.1")
    code, text = s.docmd("RCPT TO:<someone@elsewhere.test>")
    assert code == 554 and b"5.7.1" in text, (code, text)
    ok("smtp relay denied 5.7.1")
    s.rset()

with smtplib.SMTP(*smtp, timeout=10) as s:
    s.starttls(context=insecure)
    s.ehlo("client.remote.test")
    assert s.has_extn("auth")
    s.sendmail("carol@remote.test", ["alice@example.test", "bob@example.test"], message("tls1"))
    ok("smtp starttls delivery accepted")

# --- submission: AUTH required, then relay allowed ---
with smtplib.SMTP(*submission, timeout=10) as s:
    s.ehlo("laptop")
    code, text = s.docmd("MAIL FROM:<alice@example.test>")
    assert code == 530, (code, text)
    ok("submission requires auth 530")
    s.starttls(context=insecure)
    s.ehlo("laptop")
    try:
        s.login("alice@example.test", "wrong")
        raise AssertionError("bad password accepted")
    except smtplib.SMTPAuthenticationError as e:
        assert e.smtp_code == 535, e
    ok("submission bad password 535")
    s.login("alice@example.test", "secret-pw")
    code, text = s.docmd("MAIL FROM:<bob@example.test>")
    assert code == 553 and b"5.7.1" in text, (code, text)
    s.rset()
    ok("submission refuses a sender the user does not own 553 5.7.1")
    s.sendmail("alice@example.test", ["bob@example.test"], message("sub1", sender="alice@example.test", to="bob@example.test"))
    ok("submission authenticated delivery accepted")
    s.sendmail("alice@example.test", ["friend@elsewhere.test"], message("out1", sender="alice@example.test", to="friend@elsewhere.test"))
    ok("submission authenticated relay accepted")

# --- submissions: implicit TLS, AUTH LOGIN ---
with smtplib.SMTP_SSL(*submissions, timeout=10, context=insecure) as s:
    s.ehlo("laptop")
    s.user, s.password = "bob@example.test", "secret-pw"
    code, text = s.auth("LOGIN", s.auth_login)
    assert code == 235, (code, text)
    s.sendmail("bob@example.test", ["alice@example.test"], message("ssl1", sender="bob@example.test"))
    ok("submissions implicit TLS + AUTH LOGIN")

# --- LMTP: one reply per recipient after the data ---
# smtplib.LMTP.sendmail reads one reply after DATA (Python's own limitation), so the
# per-recipient replies (RFC 2033 4.2) are read by hand.
with smtplib.LMTP(*lmtp, timeout=10) as s:
    code, _ = s.ehlo("relay.remote.test")
    assert code == 250
    assert s.mail("carol@remote.test")[0] == 250
    assert s.rcpt("alice@example.test")[0] == 250
    code, text = s.rcpt("nobody@example.test")
    assert code == 550, (code, text)
    assert s.rcpt("bob@example.test")[0] == 250
    code, text = s.data(message("lmtp1"))
    assert code == 250, (code, text)
    code, text = s.getreply()
    assert code == 250, (code, text)
    ok("lmtp one reply per accepted recipient")

# --- POP3: STLS, USER/PASS, STAT/LIST/UIDL/RETR/TOP/DELE/QUIT, IN-USE, restart-stable UIDL ---
# alice: plain1, tls1, ssl1 (from bob), lmtp1
assert wait_for("alice@example.test", 4) == 4
p = poplib.POP3(*pop3, timeout=10)
caps = p.capa()
assert "STLS" in caps and "USER" not in caps, caps
try:
    p.user("alice@example.test")
    p.pass_("secret-pw")
    raise AssertionError("plaintext login allowed")
except poplib.error_proto:
    pass
ok("pop3 refuses plaintext login")
p.quit()

p = poplib.POP3(*pop3, timeout=10)
p.stls(context=insecure)
p.user("alice@example.test")
p.pass_("secret-pw")
count, size = p.stat()
assert count == 4, count
_, listing, _ = p.list()
assert len(listing) == 4
_, uidl, _ = p.uidl()
uids = [line.split()[1] for line in uidl]
assert len(set(uids)) == 4
_, lines, _ = p.retr(1)
body = b"\r\n".join(lines)
assert b"Subject: plain1" in body and b"Received: from" in body, body[:300]
_, top, _ = p.top(2, 0)
assert any(b"Subject:" in l for l in top) and b"hello" not in b"".join(top)
ok("pop3 stat list uidl retr top")

q = poplib.POP3_SSL(*pop3s, timeout=10, context=insecure)
q.user("alice@example.test")
try:
    q.pass_("secret-pw")
    raise AssertionError("second session got the maildrop")
except poplib.error_proto as e:
    assert b"[IN-USE]" in e.args[0], e
q.quit()
ok("pop3 maildrop lock [IN-USE]")

p.dele(1)
p.quit()

# A client that vanishes without QUIT releases the maildrop (and deletes nothing).
r = poplib.POP3_SSL(*pop3s, timeout=10, context=insecure)
r.user("alice@example.test")
r.pass_("secret-pw")
r.dele(1)
r.sock.close()
deadline = time.time() + 5
while True:
    r = poplib.POP3_SSL(*pop3s, timeout=10, context=insecure)
    r.user("alice@example.test")
    try:
        r.pass_("secret-pw")
        break
    except poplib.error_proto as e:
        assert b"[IN-USE]" in e.args[0] and time.time() < deadline, e
        r.quit()
        time.sleep(0.05)
assert r.stat()[0] == 3, "a session that never sent QUIT must not delete"
r.quit()
ok("pop3 abrupt disconnect releases the lock, deletes nothing")
p = poplib.POP3_SSL(*pop3s, timeout=10, context=insecure)
p.user("alice@example.test")
p.pass_("secret-pw")
count, _ = p.stat()
assert count == 3, count
_, uidl2, _ = p.uidl()
assert [l.split()[1] for l in uidl2] == uids[1:], (uidl2, uids)
p.quit()
ok("pop3 dele + quit expunges, uidl stable")

with open(sys.argv[7], "w") as f:
    print(" ".join(u.decode() for u in uids[1:]), file=f)
print("ALL OK", flush=True)
