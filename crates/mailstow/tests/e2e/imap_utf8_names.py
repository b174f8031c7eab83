#!/usr/bin/env python3
"""Mailbox names across UTF8=ACCEPT (RFC 6855) and modified UTF-7 (RFC 3501 5.1.3) with
Python's imaplib against a running mailstow. Client U enables UTF8=ACCEPT, creates a folder
under a UTF-8 name (a space, an ampersand, CJK) and APPENDs to it with RFC 6855's UTF8 data
item; client O, a plain IMAP4rev1 client that enables nothing, sees the same folders under
their modified UTF-7 names, selects, fetches, STATUSes and renames by them, is refused a
badly encoded name with NO [CANNOT], and U sees O's changes in UTF-8.

The expected modified UTF-7 forms are computed here, independently of the server, and the
encoder is checked against RFC 3501 5.1.3's own example first.

usage: imap_utf8_names.py IMAPS_ADDR USER PASSWORD
Prints `imap-utf8-names: OK`; any failure raises.
"""
import base64
import imaplib
import re
import ssl
import sys

addr, user, password = sys.argv[1:4]
host, port = addr.rsplit(":", 1)


def mutf7(name):
    """RFC 3501 5.1.3: printable US-ASCII stands for itself except `&`, which is `&-`; any
    other run is `&`, its UTF-16 in base64 with `,` for `/` and no padding, then `-`. (UTF-7,
    RFC 2152, with `&` for `+`, `,` for `/`, and printable ASCII never encoded.)"""
    out, run = [], []

    def flush():
        if run:
            b64 = base64.b64encode("".join(run).encode("utf-16-be")).decode("ascii")
            out.append("&" + b64.rstrip("=").replace("/", ",") + "-")
            run.clear()

    for ch in name:
        if " " <= ch <= "~":
            flush()
            out.append("&-" if ch == "&" else ch)
        else:
            run.append(ch)
    flush()
    return "".join(out)


# RFC 3501 5.1.3's example, and a few more that are easy to check by hand.
assert mutf7("~peter/mail/台北/日本語") == "~peter/mail/&U,BTFw-/&ZeVnLIqe-", mutf7(
    "~peter/mail/台北/日本語")
assert mutf7("Entwürfe") == "Entw&APw-rfe", mutf7("Entwürfe")  # ü is U+00FC
assert mutf7("A&B") == "A&-B"
assert mutf7("😀") == "&2D3eAA-"  # a surrogate pair, U+D83D U+DE00
assert mutf7("INBOX") == "INBOX"


def connect():
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    c = imaplib.IMAP4_SSL(host, int(port), ssl_context=ctx)
    c.login(user, password)
    c._get_capabilities()  # some (QUOTA) are announced after login only
    return c


def ok(result, what):
    typ, data = result
    assert typ == "OK", f"{what}: {typ} {data!r}"
    return data


def quote(name):
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def astring(raw):
    """A mailbox name as it came on the wire (atom or quoted), as bytes, and the rest."""
    if raw.startswith(b'"'):
        m = re.match(rb'"((?:[^"\\]|\\.)*)"(.*)$', raw, re.S)
        assert m, raw
        return re.sub(rb"\\(.)", rb"\1", m.group(1)), m.group(2)
    name, _, rest = raw.partition(b" ")
    return name, b" " + rest if rest else b""


def names(data):
    """The mailbox names of LIST or LSUB responses, as bytes."""
    found = []
    for item in data:
        if item is None:
            continue
        if isinstance(item, tuple):  # the name came as a literal
            found.append(item[1])
            continue
        m = re.match(rb'\(([^)]*)\) (?:"(?:[^"\\]|\\.)*"|NIL) (.*)$', item)
        assert m, item
        name, rest = astring(m.group(2))
        assert rest == b"", item
        found.append(name)
    return found


def utf8_names(data):
    return {n.decode("utf-8") for n in names(data)}


def ascii_names(data):
    out = set()
    for n in names(data):
        # What an IMAP4rev1 client reads is 7-bit, printable.
        assert all(0x20 <= b <= 0x7E for b in n), f"8-bit name to a rev1 client: {n!r}"
        out.add(n.decode("ascii"))
    return out


def append_utf8_item(c, mailbox, message):
    """RFC 6855 4: `APPEND mailbox UTF8 (~{n}CRLF message)`. imaplib's own append() in
    UTF-8 mode sends `APPEND mailbox {n}` with `UTF8 (message)` as the literal's content
    (CPython gh-78319), so the command is built here, through imaplib's literal callback:
    it sends the line, waits for the continuation, then sends what the callback returns."""

    class Literal:
        def __init__(self, data):
            self.data = data

        def send(self, _continuation):
            return self.data

    c.literal = Literal(message + b")").send  # must be a bound method for imaplib
    return c._simple_command("APPEND", quote(mailbox), "UTF8 (~{%d}" % len(message))


def append_plain(c, mailbox, message):
    """A plain literal (RFC 9051's APPEND; imaplib's append() cannot send one in UTF-8 mode)."""
    c.literal = message
    return c._simple_command("APPEND", quote(mailbox))


FOLDER = "Entwürfe/台北 & co"
RENAMED = "Entwürfe/日本語 & Café"
BY_OLD = "Café & Bar"
MSG1 = (
    "From: Jürgen <juergen@example.test>\r\nTo: alice@example.test\r\n"
    "Subject: Grüße aus 台北\r\nMessage-ID: <utf8-1@example.test>\r\n\r\nHallo, schöne Grüße.\r\n"
).encode("utf-8")
MSG2 = (
    "From: carol@example.test\r\nTo: alice@example.test\r\n"
    "Subject: 第二 message\r\nMessage-ID: <utf8-2@example.test>\r\n\r\nplain append\r\n"
).encode("utf-8")

# --- U: a client that enables UTF8=ACCEPT ---------------------------------------------------
u = connect()
assert "UTF8=ACCEPT" in u.capabilities, u.capabilities
ok(u.enable("UTF8=ACCEPT"), "ENABLE UTF8=ACCEPT")
assert u.utf8_enabled, "imaplib did not switch to UTF-8 mode"
assert any(b"UTF8=ACCEPT" in e.upper() for e in u.untagged_responses.get("ENABLED", [])), \
    u.untagged_responses
ok(u.create(quote(FOLDER)), "U CREATE")
data = ok(append_utf8_item(u, FOLDER, MSG1), "U APPEND UTF8 (~{n} ...)")
assert b"APPENDUID" in data[0], data
ok(append_plain(u, FOLDER, MSG2), "U APPEND")
u_before = utf8_names(ok(u.list('""', "*"), "U LIST"))
assert FOLDER in u_before and "Entwürfe" in u_before, u_before
# A UTF-8 pattern.
assert utf8_names(ok(u.list('""', quote("Entwürfe/台*")), "U LIST pattern")) == {FOLDER}
status = ok(u.status(quote(FOLDER), "(MESSAGES)"), "U STATUS")
name, rest = astring(status[0])
assert name.decode("utf-8") == FOLDER and rest == b" (MESSAGES 2)", status

# --- O: a plain IMAP4rev1 client, never enables anything ------------------------------------
o = connect()
assert not o.utf8_enabled
wire = mutf7(FOLDER)
assert wire == "Entw&APw-rfe/&U,BTFw- &- co", wire
o_names = ascii_names(ok(o.list('""', "*"), "O LIST"))
assert wire in o_names, (wire, o_names)
# The same folders, each under its modified UTF-7 name, and nothing else.
assert o_names == {mutf7(n) for n in u_before}, (o_names, u_before)
assert ascii_names(ok(o.list('""', '"Entw&APw-rfe/*"'), "O LIST pattern")) == {wire}
assert ascii_names(ok(o.list('"Entw&APw-rfe/"', "%"), "O LIST reference")) == {wire}

data = ok(o.select(quote(wire)), "O SELECT")
assert data == [b"2"], data
fetched = ok(o.fetch("1:2", "(RFC822.SIZE BODY.PEEK[])"), "O FETCH")
bodies = [item[1] for item in fetched if isinstance(item, tuple)]
# The UTF8 item's wrapping is not part of the message: stored as sent, byte for byte.
assert bodies == [MSG1, MSG2], bodies
assert f"RFC822.SIZE {len(MSG1)} ".encode() in fetched[0][0], fetched[0][0]
subject = ok(o.fetch("1", "(BODY.PEEK[HEADER.FIELDS (SUBJECT)])"), "O FETCH SUBJECT")
assert subject[0][1].strip() == "Subject: Grüße aus 台北".encode("utf-8"), subject
o.close()

status = ok(o.status(quote(wire), "(MESSAGES UIDNEXT)"), "O STATUS")
name, rest = astring(status[0])
assert name == wire.encode("ascii"), status
assert rest.startswith(b" (MESSAGES 2 "), status
# An atom name (no space) comes back as an atom or quoted; either way modified UTF-7.
status = ok(o.status("Entw&APw-rfe", "(MESSAGES)"), "O STATUS parent")
assert astring(status[0])[0] == b"Entw&APw-rfe", status

# GETQUOTAROOT echoes the name (RFC 9208 4.2.2), in the client's form.
assert "QUOTA" in o.capabilities, o.capabilities
roots = ok(o.getquotaroot(quote(wire)), "O GETQUOTAROOT")[0]
name, _ = astring(roots[0])
assert name == wire.encode("ascii"), f"GETQUOTAROOT to a rev1 client: {roots!r}"
roots = ok(u.getquotaroot(quote(FOLDER)), "U GETQUOTAROOT")[0]
name, _ = astring(roots[0])
assert name.decode("utf-8") == FOLDER, roots

# Badly encoded modified UTF-7 (RFC 3501 5.1.3 allows one encoding only), and 8-bit names
# from a client that did not enable UTF8=ACCEPT: NO [CANNOT], nothing created.
for what, result in [
    ("SELECT &Jjo!", o.select('"&Jjo!"')),
    ("CREATE &Jjo!", o.create('"&Jjo!"')),
    ("STATUS &Jjo!", o._simple_command("STATUS", '"&Jjo!"', "(MESSAGES)")),
    ("CREATE &APx-", o.create('"&APx-"')),  # non-zero leftover bits
    ("CREATE &AGE-", o.create('"&AGE-"')),  # "a" encoded
    ("CREATE 8-bit", o._simple_command("CREATE", quote("Entwürfe/raw").encode("utf-8"))),
]:
    typ, data = result
    assert typ == "NO" and b"[CANNOT]" in data[0], f"{what}: {typ} {data!r}"

# O creates, subscribes and renames in modified UTF-7; U sees UTF-8.
ok(o.create(quote(mutf7(BY_OLD))), "O CREATE")
assert mutf7(BY_OLD) == "Caf&AOk- &- Bar"
ok(o.subscribe(quote(mutf7(BY_OLD))), "O SUBSCRIBE")
assert mutf7(BY_OLD) in ascii_names(ok(o.lsub('""', "*"), "O LSUB"))
assert BY_OLD in utf8_names(ok(u.lsub('""', "*"), "U LSUB"))
ok(o.rename(quote(wire), quote(mutf7(RENAMED))), "O RENAME")
u_after = utf8_names(ok(u.list('""', "*"), "U LIST"))
assert RENAMED in u_after and FOLDER not in u_after and BY_OLD in u_after, u_after
assert u_after == u_before - {FOLDER} | {RENAMED, BY_OLD}, (u_before, u_after)
o_after = ascii_names(ok(o.list('""', "*"), "O LIST"))
assert o_after == {mutf7(n) for n in u_after}, (o_after, u_after)

# The messages moved with the folder; U selects and searches it in UTF-8.
data = ok(u.select(quote(RENAMED)), "U SELECT")
assert data == [b"2"], data
found = ok(u.search(None, "SUBJECT", quote("台北")), "U SEARCH")
assert found == [b"1"], found
fetched = ok(u.fetch("1:2", "(BODY.PEEK[HEADER.FIELDS (SUBJECT)])"), "U FETCH")
subjects = [item[1].strip() for item in fetched if isinstance(item, tuple)]
assert subjects == [s.encode("utf-8") for s in
                    ["Subject: Grüße aus 台北", "Subject: 第二 message"]], subjects
u.close()

ok(u.delete(quote(BY_OLD)), "U DELETE")
assert BY_OLD not in utf8_names(ok(u.list('""', "*"), "U LIST"))
assert mutf7(BY_OLD) not in ascii_names(ok(o.list('""', "*"), "O LIST"))
u.logout()
o.logout()
print("imap-utf8-names: OK")
