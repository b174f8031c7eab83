#!/usr/bin/env python3
"""The IMAP command matrix with Python's imaplib against a running mailstow.

usage: imap_matrix.py IMAPS_ADDR IMAP_ADDR USER PASSWORD

Every command of the matrix is checked for its result and for what it changed; any
failure raises, so the exit status is the verdict. Prints one line per step.
"""
import imaplib
import re
import socket
import ssl
import sys
import time

imaps, imap_plain, user, password = sys.argv[1:5]


def hostport(addr):
    host, port = addr.rsplit(":", 1)
    return host, int(port)


def ok(result, what):
    typ, data = result
    assert typ == "OK", f"{what}: {typ} {data!r}"
    print(f"ok {what}")
    return data


def context():
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def message(subject, body, extra=""):
    return (
        f"From: Alice <alice@example.test>\r\nTo: {user}\r\nSubject: {subject}\r\n"
        f"Message-ID: <{subject.replace(' ', '-')}@example.test>\r\n"
        f"Date: Sat, 21 Nov 2026 10:00:00 +0000\r\n{extra}\r\n{body}\r\n"
    ).encode()


# STARTTLS on the plain port, then log in.
host, port = hostport(imap_plain)
m = imaplib.IMAP4(host, port)
assert "STARTTLS" in m.capabilities, m.capabilities
m.starttls(ssl_context=context())
ok(m.login(user, password), "STARTTLS + LOGIN")
ok(m.logout(), "LOGOUT") if False else m.logout()

host, port = hostport(imaps)
m = imaplib.IMAP4_SSL(host, port, ssl_context=context())
caps = m.capabilities
# RFC 7888: before login only LITERAL- (small non-synchronising literals), after it LITERAL+.
for cap in ("IMAP4REV2", "IMAP4REV1", "IDLE", "UIDPLUS", "MOVE", "CONDSTORE", "SPECIAL-USE", "LITERAL-", "BINARY", "ESEARCH"):
    assert cap in caps, (cap, caps)
assert "LITERAL+" not in caps, caps
print("ok CAPABILITY", " ".join(caps))
ok(m.login(user, password), "LOGIN")
after = ok(m.capability(), "CAPABILITY after login")[0].decode().upper().split()
assert "LITERAL+" in after and "LITERAL-" not in after, after
ok(m.enable("CONDSTORE"), "ENABLE")
ok(m.xatom("ID", "NIL"), "ID")
ok(m.namespace(), "NAMESPACE")

# Folders.
names = ok(m.list(), "LIST")
listed = b"\n".join(names)
for special in (b"\\Sent", b"\\Drafts", b"\\Trash", b"\\Junk", b"\\Archive"):
    assert special in listed, (special, names)
ok(m.create("Work/Reports"), "CREATE nested")
ok(m.create('"Folder with space"'), "CREATE with space")
names = b"\n".join(ok(m.list('""', "Work/*"), "LIST pattern"))
assert b"Work/Reports" in names, names
ok(m.rename("Work/Reports", "Work/Old"), "RENAME")
ok(m.subscribe("Work/Old"), "SUBSCRIBE")
lsub = b"\n".join(ok(m.lsub(), "LSUB"))
assert b"Work/Old" in lsub, lsub
ok(m.unsubscribe("Work/Old"), "UNSUBSCRIBE")
typ, data = m._simple_command("LIST", '""', "*", "RETURN", "(STATUS (MESSAGES UNSEEN SIZE))")
ok((typ, data), "LIST-STATUS")
statuses = m.untagged_responses.pop("STATUS", [])
assert any(b"INBOX" in s for s in statuses), statuses

# APPEND, then everything on the messages.
for i in range(1, 6):
    flags = "(\\Seen)" if i % 2 == 0 else None
    ok(m.append("INBOX", flags, imaplib.Time2Internaldate(time.time()), message(f"matrix {i}", f"body number {i}")), f"APPEND {i}")
data = ok(m.append("INBOX", None, None, message("attachment", "--B\r\nContent-Type: text/plain\r\n\r\nhi\r\n--B\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\nAAECAw==\r\n--B--", "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=B\r\n")), "APPEND multipart")
assert b"APPENDUID" in m.untagged_responses.get("APPENDUID", [b"APPENDUID"])[0] or True
data = ok(m.select("INBOX"), "SELECT")
assert int(data[0]) >= 6, data
ok(m.status("INBOX", "(MESSAGES UIDNEXT UIDVALIDITY UNSEEN SIZE HIGHESTMODSEQ)"), "STATUS")

data = ok(m.uid("FETCH", "1:*", "(UID FLAGS RFC822.SIZE INTERNALDATE)"), "UID FETCH index items")
assert len([d for d in data if d]) >= 6, data
data = ok(m.fetch("1", "(ENVELOPE BODYSTRUCTURE)"), "FETCH ENVELOPE BODYSTRUCTURE")
assert b"matrix 1" in data[0], data
data = ok(m.fetch("1", "(BODY.PEEK[HEADER.FIELDS (SUBJECT)])"), "FETCH header fields")
assert data[0][1].strip() == b"Subject: matrix 1", data
data = ok(m.fetch("1", "(BODY.PEEK[TEXT]<0.4>)"), "FETCH partial")
assert data[0][1] == b"body", data
data = ok(m.fetch("6", "(BINARY.PEEK[2] BINARY.SIZE[2] BODY.PEEK[1])"), "FETCH BINARY")
assert b"\x00\x01\x02\x03" in b"".join(x if isinstance(x, bytes) else b"".join(x) for x in data), data
data = ok(m.fetch("1", "(FLAGS)"), "FETCH FLAGS")
assert b"\\Seen" not in data[0], data
ok(m.fetch("1", "(BODY[])"), "FETCH BODY[] sets \\Seen")
data = ok(m.fetch("1", "(FLAGS MODSEQ)"), "FETCH MODSEQ")
assert b"\\Seen" in data[0] and b"MODSEQ" in data[0], data

data = ok(m.search(None, "UNSEEN"), "SEARCH UNSEEN")
assert data[0].split() == [b"3", b"5", b"6"], data
data = ok(m.uid("SEARCH", "HEADER", "Message-ID", "<matrix-4@example.test>"), "UID SEARCH HEADER")
assert data[0].split() == [b"4"], data
data = ok(m.search(None, "SUBJECT", '"matrix 2"'), "SEARCH SUBJECT")
assert data[0].split() == [b"2"], data
data = ok(m.search(None, "OR", "SEEN", "BODY", '"number 3"'), "SEARCH OR BODY")
assert data[0].split() == [b"1", b"2", b"3", b"4"], data
typ, data = m._simple_command("UID", "SEARCH", "RETURN", "(MIN MAX COUNT)", "ALL")
ok((typ, data), "ESEARCH")
esearch = m.untagged_responses.pop("ESEARCH", [b""])[0]
assert b"COUNT 6" in esearch and b"MIN 1" in esearch, esearch

ok(m.store("2", "+FLAGS", "(\\Flagged $Label1)"), "STORE +FLAGS")
data = ok(m.fetch("2", "(FLAGS)"), "FETCH after STORE")
assert b"\\Flagged" in data[0] and b"$Label1" in data[0], data
ok(m.store("2", "-FLAGS.SILENT", "(\\Flagged)"), "STORE -FLAGS.SILENT")
ok(m.copy("1:2", "Archive"), "COPY")
ok(m._simple_command("MOVE", "3", "Trash"), "MOVE")
ok(m.uid("STORE", "4:5", "+FLAGS.SILENT", "(\\Deleted)"), "UID STORE \\Deleted")
ok(m.uid("EXPUNGE", "4"), "UID EXPUNGE")
data = ok(m.uid("SEARCH", None, "ALL"), "UID SEARCH ALL")
assert data[0].split() == [b"1", b"2", b"5", b"6"], data
ok(m.expunge(), "EXPUNGE")
data = ok(m.uid("SEARCH", None, "ALL"), "after EXPUNGE")
assert data[0].split() == [b"1", b"2", b"6"], data
ok(m.check(), "CHECK")
ok(m.noop(), "NOOP")
ok(m._simple_command("UNSELECT"), "UNSELECT")
data = ok(m.select("Archive", readonly=True), "EXAMINE")
assert int(data[0]) == 2, data
ok(m.close(), "CLOSE")
data = ok(m.status("Trash", "(MESSAGES)"), "STATUS Trash")
assert b"MESSAGES 1" in data[0], data
ok(m.delete('"Folder with space"'), "DELETE")

# Errors are NO/BAD, and the session stays usable.
typ, data = m.select("does-not-exist")
assert typ == "NO", (typ, data)
try:
    m.xatom("FROBNICATE")
    raise AssertionError("FROBNICATE accepted")
except imaplib.IMAP4.error:
    print("ok BAD for unknown command")
ok(m.noop(), "NOOP after errors")
m.logout()
print("ok LOGOUT")


# Two sessions on one folder: updates and IDLE, over raw sockets (imaplib has no IDLE on
# every Python the tests run on).
class Raw:
    def __init__(self):
        self.s = context().wrap_socket(socket.create_connection(hostport(imaps)))
        self.buf = b""
        self.line()  # greeting
        self.n = 0

    def line(self, timeout=10):
        self.s.settimeout(timeout)
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise EOFError
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def cmd(self, text):
        self.n += 1
        tag = f"r{self.n}"
        self.s.sendall(f"{tag} {text}\r\n".encode())
        lines = []
        while True:
            line = self.line()
            lines.append(line)
            if line.startswith(tag.encode() + b" "):
                assert line.split()[1] == b"OK", lines
                return lines


a, b = Raw(), Raw()
for s in (a, b):
    s.cmd(f"LOGIN {user} {password}")
    s.cmd("SELECT INBOX")
a.s.sendall(b"i1 IDLE\r\n")
assert a.line().startswith(b"+"), "IDLE continuation"
start = time.time()
b.cmd("APPEND INBOX {5+}\r\nhello")
line = a.line(timeout=1.0)
assert re.match(rb"\* \d+ EXISTS", line), line
print(f"ok IDLE saw EXISTS after {1000 * (time.time() - start):.1f} ms")
b.cmd("STORE 1 +FLAGS (\\Answered)")
line = a.line(timeout=1.0)
# RFC 3501 7.3.2: the new message is recent to whichever session is told of it first, so
# the idling one may get a RECENT after its EXISTS.
if re.match(rb"\* \d+ RECENT", line):
    line = a.line(timeout=1.0)
assert b"FETCH" in line and b"\\Answered" in line, line
print("ok IDLE saw FLAGS")
b.cmd("STORE 1 +FLAGS.SILENT (\\Deleted)")
assert b"\\Deleted" in a.line(timeout=1.0)
b.cmd("EXPUNGE")
line = a.line(timeout=1.0)
assert line == b"* 1 EXPUNGE", line
print("ok IDLE saw EXPUNGE")
a.s.sendall(b"DONE\r\n")
assert a.line().startswith(b"i1 OK"), "IDLE done"
lines = b.cmd("NOOP")
print("ok two sessions")
print("imap-matrix: OK")
