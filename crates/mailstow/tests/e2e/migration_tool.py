#!/usr/bin/env python3
"""Helpers for tests/migration.rs: mail written by Python's `mailbox` module, mail put into a
Dovecot over IMAP, and dumps of what an IMAP server or a maildir/mbox tree holds, compared.

  migration_tool.py build-maildir ROOT          a Maildir++ tree (INBOX, Work, Work.Old, Grüße)
  migration_tool.py build-mbox DIR              DIR/INBOX, DIR/Lists, DIR/Lists.sbd/rust (mboxo)
  migration_tool.py fill-imap HOST PORT USER PASS   folders and messages by APPEND, some expunged
  migration_tool.py dump-maildir ROOT OUT.json  read with mailbox.Maildir (+ dovecot-keywords)
  migration_tool.py dump-mbox DIR OUT.json      read with mailbox.mbox
  migration_tool.py dump-imap HOST PORT USER PASS OUT.json
  migration_tool.py compare A.json B.json FIELD,...   exit 1 and print the differences

A dump is {folder: {"uidvalidity": n|null, "messages": {Message-ID: {"body", "flags",
"keywords", "date", "uid"}}}}. Folder names use "/" as separator. "body" is the message with
LF line ends and without the mbox metadata fields (Status, X-Status, X-Keywords, X-UID,
X-IMAPbase, Content-Length); "flags" are IMAP system flags, "keywords" the rest (maildir P is
$Forwarded), both sorted; "date" the internal date in Unix seconds.
"""
import base64
import calendar
import imaplib
import json
import mailbox
import os
import re
import sys
import time

METADATA = ("status", "x-status", "x-keywords", "x-uid", "x-imapbase", "content-length")
T0 = 1_600_000_000


def body_text(i, folder):
    extra = ""
    if i % 3 == 0:
        # A line an mbox writer must quote; no line starts with ">From " (mboxo is lossy there).
        extra = "From the start of this line, quoting matters.\n"
    if i % 5 == 0:
        extra += "Tr\u00e4ume, \u00e9t\u00e9, \u65e5\u672c\n"
    return f"Hello {i} in {folder}.\n{extra}\nRegards,\nsomeone\n"


def message_bytes(i, folder):
    date = time.strftime("%a, %d %b %Y %H:%M:%S +0000", time.gmtime(T0 + i * 3600))
    head = (f"Date: {date}\nFrom: Sender {i} <s{i}@example.org>\nTo: alice@example.test\n"
            f"Subject: message {i} in {folder}\nMessage-ID: <m{i}.{folder.replace('/', '-')}"
            f"@example.org>\nMIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n"
            f"Content-Transfer-Encoding: 8bit\n\n")
    return (head + body_text(i, folder)).encode()


MAILDIR_FLAGS = ["", "S", "FS", "RS", "DS", "T", "PS", "F"]


def build_maildir(root):
    md = mailbox.Maildir(root, create=True)
    folders = {"INBOX": md}
    for name in ["Work", "Work.Old", "Grüße"]:
        folders[name.replace(".", "/")] = md.add_folder(name)
    # Dovecot-style keyword letters: a = $Label1, b = project (dovecot-keywords per folder).
    i = 0
    for name, box in folders.items():
        for k in range(6 if name == "INBOX" else 3):
            i += 1
            m = mailbox.MaildirMessage(message_bytes(i, name))
            flags = MAILDIR_FLAGS[i % len(MAILDIR_FLAGS)]
            if flags or k > 0:
                m.set_subdir("cur")
            m.set_flags(flags)
            m.set_date(T0 + i * 3600 + 7)
            key = box.add(m)
            if i % 4 == 0 and m.get_subdir() == "cur":
                # Keyword letters at the end of the file name, as Dovecot writes them.
                path = os.path.join(box._path, box._lookup(key))
                letters = "ab" if i % 8 == 0 else "b"
                os.rename(path, path + letters)
                os.utime(path + letters, (T0, T0 + i * 3600 + 7))
        with open(os.path.join(box._path, "dovecot-keywords"), "w") as f:
            f.write("0 $Label1\n1 project\n")


def build_mbox(root):
    os.makedirs(os.path.join(root, "Lists.sbd"), exist_ok=True)
    i = 100
    for name, path in [("INBOX", "INBOX"), ("Lists", "Lists"), ("Lists/rust", "Lists.sbd/rust")]:
        box = mailbox.mbox(os.path.join(root, path), create=True)
        box.lock()
        for k in range(5):
            i += 1
            m = mailbox.mboxMessage(message_bytes(i, name))
            m.set_from(f"s{i}@example.org", time.gmtime(T0 + i * 3600 + 11))
            m.set_flags(["", "RO", "RAO", "FO", "RDO", "O"][i % 6])
            if i % 3 == 0:
                m["X-Keywords"] = "$Label1 project" if i % 2 else "project"
            box.add(m)
        box.flush()
        box.unlock()
        box.close()


def clean_body(raw):
    """LF line ends, the metadata fields removed from the header."""
    raw = raw.replace(b"\r\n", b"\n")
    head, sep, rest = raw.partition(b"\n\n")
    lines = head.split(b"\n")
    kept = []
    skipping = False
    for line in lines:
        if line[:1] in (b" ", b"\t") and kept is not None:
            if not skipping:
                kept.append(line)
            continue
        name = line.split(b":", 1)[0].strip().lower().decode("latin-1")
        skipping = name in METADATA
        if not skipping:
            kept.append(line)
    return b"\n".join(kept) + sep + rest


def message_id(raw):
    m = re.search(rb"(?im)^Message-ID:\s*(<[^>]*>)", raw)
    return m.group(1).decode() if m else None


def record(raw, flags, keywords, date, uid):
    return message_id(raw), {
        "body": clean_body(raw).decode("utf-8", "surrogateescape"),
        "flags": sorted(flags), "keywords": sorted(keywords), "date": date, "uid": uid}


MAILDIR_TO_IMAP = {"D": "\\Draft", "F": "\\Flagged", "R": "\\Answered", "S": "\\Seen",
                   "T": "\\Deleted"}


def maildir_uids(path):
    """UIDVALIDITY and base name -> UID from dovecot-uidlist, if there is one."""
    try:
        with open(os.path.join(path, "dovecot-uidlist")) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None, {}
    v = re.search(r"\bV(\d+)", lines[0])
    uids = {}
    for line in lines[1:]:
        m = re.match(r"(\d+)(?: [^:]*)? :(.*)", line)
        if m:
            uids[m.group(2).split(":")[0]] = int(m.group(1))
    return int(v.group(1)) if v else None, uids


def mutf7_decode(name):
    """IMAP's modified UTF-7 (RFC 3501 5.1.3); a name that is not valid is kept (UTF-8)."""
    def run(m):
        text = m.group(1)
        if not text:
            return "&"
        b64 = text.replace(",", "/")
        return base64.b64decode(b64 + "=" * (-len(b64) % 4)).decode("utf-16-be")
    try:
        return re.sub(r"&([A-Za-z0-9+,]*)-", run, name)
    except Exception:
        return name


def mutf7_encode(name):
    out, run = [], []

    def flush():
        if run:
            b64 = base64.b64encode("".join(run).encode("utf-16-be")).decode()
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


def dump_maildir(root):
    md = mailbox.Maildir(root, factory=None, create=False)
    out = {}
    boxes = [("INBOX", root)] + [("/".join(mutf7_decode(p) for p in f.split(".")),
                                  os.path.join(root, "." + f)) for f in md.list_folders()]
    for name, path in boxes:
        box = mailbox.Maildir(path, create=False)
        letters = {}
        try:
            with open(os.path.join(path, "dovecot-keywords")) as f:
                for line in f:
                    n, k = line.rstrip("\n").split(" ", 1)
                    letters[chr(ord("a") + int(n))] = k
        except FileNotFoundError:
            pass
        uidvalidity, uids = maildir_uids(path)
        messages = {}
        for key in box.keys():
            msg = box.get_message(key)
            fname = os.path.basename(box._lookup(key))
            info = msg.get_info()
            flags = set()
            keywords = set()
            if msg.get_subdir() == "cur" and info.startswith("2,"):
                for c in info[2:]:
                    if c in MAILDIR_TO_IMAP:
                        flags.add(MAILDIR_TO_IMAP[c])
                    elif c == "P":
                        keywords.add("$Forwarded")
                    elif c in letters:
                        keywords.add(letters[c])
            with open(os.path.join(path, box._lookup(key)), "rb") as f:
                raw = f.read()
            mtime = int(os.stat(os.path.join(path, box._lookup(key))).st_mtime)
            mid, rec = record(raw, flags, keywords, mtime, uids.get(fname.split(":")[0]))
            messages[mid] = rec
        out[name] = {"uidvalidity": uidvalidity, "messages": messages}
    return out


MBOX_X = {"A": "\\Answered", "D": "\\Deleted", "F": "\\Flagged", "T": "\\Draft"}


def dump_mbox(root):
    out = {}
    for dirpath, _, files in os.walk(root):
        for fname in sorted(files):
            path = os.path.join(dirpath, fname)
            rel = os.path.relpath(path, root)
            name = "/".join(mutf7_decode(p[:-4] if p.endswith(".sbd") else p)
                            for p in rel.split(os.sep))
            box = mailbox.mbox(path, create=False)
            messages = {}
            uidvalidity = None
            for key in box.keys():
                msg = box.get_message(key)
                raw = box.get_bytes(key)
                # Python does not unquote: remove one ">" from ">+From " lines (mboxrd) or
                # from ">From " (both are the same for what the tests write).
                raw = re.sub(rb"(?m)^>(>*From )", rb"\1", raw)
                base = msg.get("X-IMAPbase")
                if base and uidvalidity is None:
                    uidvalidity = int(base.split()[0])
                flags = set()
                status = msg.get("Status", "") + msg.get("X-Status", "")
                if "R" in msg.get("Status", ""):
                    flags.add("\\Seen")
                for c in msg.get("X-Status", ""):
                    if c in MBOX_X:
                        flags.add(MBOX_X[c])
                del status
                keywords = set((msg.get("X-Keywords") or "").replace(",", " ").split())
                (_, rest) = msg.get_from().split(" ", 1) if msg.get_from() else ("", "")
                date = calendar.timegm(time.strptime(" ".join(rest.split()[-5:]),
                                                     "%a %b %d %H:%M:%S %Y"))
                uid = msg.get("X-UID")
                mid, rec = record(raw, flags, keywords, date, int(uid) if uid else None)
                messages[mid] = rec
            out[name] = {"uidvalidity": uidvalidity, "messages": messages}
    return out


def imap(host, port, user, password):
    c = imaplib.IMAP4(host, int(port))
    c.login(user, password)
    return c


def fill_imap(host, port, user, password):
    """Folders with messages, flags and keywords by APPEND; every third one expunged so the
    UIDs have gaps. Prints nothing; dump the server afterwards."""
    c = imap(host, port, user, password)
    typ, data = c.list()
    delim = re.search(rb'\) "(.)"', data[0]).group(1).decode()
    folders = ["INBOX", "Work", f"Work{delim}Old", "Archive"]
    for f in folders[1:]:
        c.create(f)
    flagsets = ["", "\\Seen", "\\Seen \\Flagged", "\\Answered \\Seen $Forwarded",
                "\\Draft", "$Label1 project", "\\Seen urgent", "\\Deleted \\Seen"]
    i = 200
    for f in folders:
        for k in range(7):
            i += 1
            flags = flagsets[i % len(flagsets)]
            date = imaplib.Time2Internaldate(T0 + i * 3600 + 13)
            raw = message_bytes(i, f.replace(delim, "/")).replace(b"\n", b"\r\n")
            c.append(f, f"({flags})" if flags else None, date, raw)
        c.select(f)
        typ, data = c.uid("SEARCH", None, "ALL")
        uids = data[0].split()
        gone = [u.decode() for u in uids[1::3]]
        if gone:
            c.uid("STORE", ",".join(gone), "+FLAGS.SILENT", "(\\Deleted)")
            c.expunge()
        c.close()
    c.logout()


def dump_imap(host, port, user, password):
    c = imap(host, port, user, password)
    typ, data = c.list()
    out = {}
    for line in data:
        if isinstance(line, tuple):
            # The name came as a literal: "(flags) "/" {n}" and then the name's bytes.
            head, raw_name = line
            line = head[:head.rindex(b"{")] + b'"' + raw_name + b'"'
        if not line:
            continue
        m = re.match(rb'\(([^)]*)\) "(.)" (.*)', line)
        flags, delim, raw_name = m.group(1), m.group(2).decode(), m.group(3)
        if b"\\Noselect" in flags or b"\\NonExistent" in flags:
            continue
        raw_name = raw_name.strip(b'"')
        name = mutf7_decode(raw_name.decode("utf-8"))
        if raw_name.isascii():
            typ, _ = c.select(b'"' + raw_name + b'"', readonly=True)
        else:
            # A name LISTed with 8-bit bytes (UTF-8) goes back as a literal, as it came.
            c.untagged_responses = {}
            c.literal = raw_name
            typ, _ = c._simple_command("EXAMINE")
            c.state = "SELECTED"
        assert typ == "OK", (typ, raw_name)
        uidvalidity = int(c.untagged_responses.get("UIDVALIDITY", [b"0"])[0])
        messages = {}
        typ, fetched = c.uid("FETCH", "1:*", "(UID FLAGS INTERNALDATE BODY.PEEK[])")
        for item in fetched:
            if not isinstance(item, tuple):
                continue
            meta, raw = item
            uid = int(re.search(rb"UID (\d+)", meta).group(1))
            flags_text = re.search(rb"FLAGS \(([^)]*)\)", meta).group(1)
            date = re.search(rb'INTERNALDATE "([^"]*)"', meta).group(1)
            words = flags_text.decode().split()
            system = {w for w in words if w.startswith("\\") and w != "\\Recent"}
            keywords = {w for w in words if not w.startswith("\\")}
            t = imaplib.Internaldate2tuple(b'INTERNALDATE "' + date + b'"')
            mid, rec = record(raw, system, keywords, int(time.mktime(t)), uid)
            messages[mid] = rec
        c.close()
        out[name.replace(delim, "/")] = {"uidvalidity": uidvalidity, "messages": messages}
    c.logout()
    return out


def compare(a, b, fields):
    problems = []
    for folder in sorted(set(a) | set(b)):
        if folder not in a and not b[folder]["messages"] or \
                folder not in b and not a[folder]["messages"]:
            continue  # an empty folder (a server's Drafts, Sent, ...)
        if folder not in a or folder not in b:
            problems.append(f"folder {folder!r} only in {'A' if folder in a else 'B'}")
            continue
        fa, fb = a[folder], b[folder]
        # An empty mbox has no X-IMAPbase to carry its UIDVALIDITY (docs/migration.md).
        if "uidvalidity" in fields and fa["uidvalidity"] != fb["uidvalidity"] and \
                fa["messages"] and fb["messages"]:
            problems.append(f"{folder}: UIDVALIDITY {fa['uidvalidity']} != {fb['uidvalidity']}")
        ma, mb = fa["messages"], fb["messages"]
        for mid in sorted(set(ma) | set(mb), key=str):
            if mid not in ma or mid not in mb:
                problems.append(f"{folder} {mid}: only in {'A' if mid in ma else 'B'}")
                continue
            for field in fields:
                if field == "uidvalidity":
                    continue
                if ma[mid][field] != mb[mid][field]:
                    problems.append(f"{folder} {mid} {field}: {ma[mid][field]!r} != "
                                    f"{mb[mid][field]!r}")
    for p in problems:
        print(p)
    total = sum(len(f["messages"]) for f in a.values())
    print(f"{total} messages in {len(a)} folders compared on {','.join(fields)}: "
          f"{len(problems)} differences")
    return not problems


def main(argv):
    cmd = argv[1]
    if cmd == "build-maildir":
        build_maildir(argv[2])
    elif cmd == "build-mbox":
        build_mbox(argv[2])
    elif cmd == "fill-imap":
        fill_imap(*argv[2:6])
    elif cmd in ("dump-maildir", "dump-mbox", "dump-imap"):
        dump = {"dump-maildir": dump_maildir, "dump-mbox": dump_mbox,
                "dump-imap": dump_imap}[cmd](*argv[2:-1])
        with open(argv[-1], "w") as f:
            json.dump(dump, f, indent=1, sort_keys=True)
    elif cmd == "compare":
        with open(argv[2]) as f:
            a = json.load(f)
        with open(argv[3]) as f:
            b = json.load(f)
        sys.exit(0 if compare(a, b, argv[4].split(",")) else 1)
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main(sys.argv)
