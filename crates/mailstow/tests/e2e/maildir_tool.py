#!/usr/bin/env python3
"""Helpers for mbsync_roundtrip.sh: build, snapshot, compare and modify maildir trees in mbsync's
"SubFolders Verbatim" layout (ROOT/INBOX, ROOT/Sent, ROOT/Archive/2024, ...; a folder is a
directory holding cur/ new/ tmp/), and look at / empty the IMAP account.

  maildir_tool.py build ROOT COUNT [--seed S]        a fresh tree, COUNT messages over 5 folders
  maildir_tool.py snapshot ROOT OUT.json             folder -> {Message-ID: [body sha256, flags]}
  maildir_tool.py compare A.json B.json [NAME_A NAME_B] [--extra-empty-ok]
                                                     exit 1 and print the differences
  maildir_tool.py mutate ROOT EXPECTED.json [--seed S]    change flags of some messages, delete
                                                     some; write the tree's state afterwards
  maildir_tool.py imap-check HOST PORT USER PASS EXPECTED.json   STATUS MESSAGES of every folder
                                                     on the server == the snapshot's counts
  maildir_tool.py imap-wipe HOST PORT USER PASS      delete every folder but INBOX, empty INBOX
  maildir_tool.py imap-count HOST PORT USER PASS     print the messages the account holds

Flags are maildir info letters (D draft, F flagged, R answered, S seen, T trashed), sorted.
Body hash: sha256 of everything after the header/body blank line, CRLF turned into LF (mbsync
writes LF; the server stores CRLF).
"""
import hashlib
import imaplib
import json
import os
import random
import re
import sys
import time

FOLDERS = [("INBOX", 0.40), ("Sent", 0.20), ("Archive/2024", 0.15), ("Archive/2025", 0.15),
           ("Folder with space", 0.10)]
# (flags, weight): none, seen, seen+flagged, seen+answered, seen+answered+flagged, draft, flagged
FLAGSETS = [("", 30), ("S", 35), ("FS", 8), ("RS", 12), ("FRS", 5), ("D", 5), ("F", 5)]
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
         "november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu "
         "meeting invoice report budget schedule review release deadline project customer "
         "server backup contract agenda attached please thanks regards").split()


def message(i, folder, rnd, flags):
    t = 1700000000 + i * 61
    date = time.strftime("%a, %d %b %Y %H:%M:%S +0000", time.gmtime(t))
    mid = f"<rt.{i}.{rnd.getrandbits(40):010x}@example.org>"
    frm, to = ("me@example.com", f"friend{i % 13}@example.org") if folder == "Sent" \
        else (f"friend{i % 13}@example.org", "me@example.com")
    kind = rnd.random()
    hdr = (f"Date: {date}\nFrom: <{frm}>\nTo: <{to}>\nSubject: round trip {i} in {folder}"
           f" ({''.join(flags) or 'no flags'})\nMessage-ID: {mid}\nMIME-Version: 1.0\n")
    if kind < 0.02:   # a larger message with a base64 attachment (60-300 KiB)
        b = f"b{i}"
        blob = rnd.randbytes(rnd.randint(45000, 225000))
        import base64
        enc = base64.encodebytes(blob).decode()
        body = (f"--{b}\nContent-Type: text/plain; charset=us-ascii\n\nSee the attachment.\n"
                f"--{b}\nContent-Type: application/octet-stream; name=\"data{i}.bin\"\n"
                f"Content-Transfer-Encoding: base64\nContent-Disposition: attachment\n\n{enc}--{b}--\n")
        hdr += f"Content-Type: multipart/mixed; boundary=\"{b}\"\n"
    elif kind < 0.05:  # 8-bit UTF-8 text
        hdr += "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 8bit\n"
        body = "Grüße aus Köln, ça va? Ελληνικά, 日本語のテキスト, emoji 📬.\n" * rnd.randint(1, 20)
    elif kind < 0.07:  # tricky lines: From_ line, dot lines, a long line, trailing spaces
        hdr += "Content-Type: text/plain; charset=us-ascii\n"
        body = ("From the desk of the editor\n.\n..leading dots\n" + "x" * 900 + "\n"
                "trailing spaces   \n\n\nend\n")
    else:
        hdr += "Content-Type: text/plain; charset=us-ascii\n"
        lines = []
        for _ in range(rnd.randint(3, 80)):
            lines.append(" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(4, 14))))
        body = "\n".join(lines) + "\n"
    return t, mid, (hdr + "\n" + body).encode()


def build(root, count, seed):
    rnd = random.Random(seed)
    if os.path.exists(root) and os.listdir(root):
        sys.exit(f"build: {root} is not empty")
    for f, _ in FOLDERS:
        for d in ("cur", "new", "tmp"):
            os.makedirs(os.path.join(root, f, d), exist_ok=True)
    names, weights = [f for f, _ in FOLDERS], [w for _, w in FOLDERS]
    fl, fw = [f for f, _ in FLAGSETS], [w for _, w in FLAGSETS]
    for i in range(1, count + 1):
        folder = rnd.choices(names, weights)[0] if i > len(names) else names[i - 1]
        flags = rnd.choices(fl, fw)[0]
        if folder != "Sent" and "D" in flags:
            flags = "S"
        t, mid, data = message(i, folder, rnd, flags)
        base = f"{t}.M{i}P{os.getpid()}.roundtrip"
        if flags == "" and rnd.random() < 0.5:
            path = os.path.join(root, folder, "new", base)       # not yet seen by any client
        else:
            path = os.path.join(root, folder, "cur", f"{base}:2,{flags}")
        with open(path, "wb") as f:
            f.write(data)
        os.utime(path, (t, t))


def folders(root):
    out = []
    for dirpath, dirnames, _ in os.walk(root):
        if all(os.path.isdir(os.path.join(dirpath, d)) for d in ("cur", "new", "tmp")):
            out.append(os.path.relpath(dirpath, root))
        dirnames[:] = [d for d in dirnames if d not in ("cur", "new", "tmp")]
    return sorted(out)


def msg_files(root, folder):
    for sub in ("cur", "new"):
        d = os.path.join(root, folder, sub)
        for n in os.listdir(d):
            if not n.startswith("."):
                yield sub, n, os.path.join(d, n)


def flags_of(name):
    return "".join(sorted(name.split(":2,", 1)[1])) if ":2," in name else ""


def parse(data):
    data = data.replace(b"\r\n", b"\n")
    head, sep, body = data.partition(b"\n\n")
    m = re.search(rb"(?im)^message-id:[ \t]*(\S+)", head)
    mid = m.group(1).decode() if m else "sha256:" + hashlib.sha256(data).hexdigest()
    return mid, hashlib.sha256(body).hexdigest()


def snapshot(root):
    snap = {}
    for f in folders(root):
        msgs = {}
        for _, n, p in msg_files(root, f):
            with open(p, "rb") as fh:
                mid, h = parse(fh.read())
            if mid in msgs:
                mid = f"{mid}#dup{len(msgs)}"
            msgs[mid] = [h, flags_of(n)]
        snap[f] = msgs
    return snap


def compare(a, b, na="A", nb="B", extra_empty_ok=False):
    """Differences between two snapshots. extra_empty_ok: empty folders only in b are fine (a
    server's default folders, e.g. Drafts or Trash, that mbsync creates locally)."""
    errs = []
    fa, fb = set(a), set(b)
    if extra_empty_ok:
        for f in sorted(fb - fa):
            if not b[f]:
                print(f"  note: empty folder '{f}' only in {nb}")
                fb.discard(f)
    for f in sorted(fa - fb):
        errs.append(f"folder '{f}' only in {na} ({len(a[f])} messages)")
    for f in sorted(fb - fa):
        errs.append(f"folder '{f}' only in {nb} ({len(b[f])} messages)")
    for f in sorted(fa & fb):
        ma, mb = a[f], b[f]
        if len(ma) != len(mb):
            errs.append(f"folder '{f}': {len(ma)} messages in {na}, {len(mb)} in {nb}")
        for mid in sorted(set(ma) - set(mb))[:10]:
            errs.append(f"folder '{f}': {mid} only in {na}")
        for mid in sorted(set(mb) - set(ma))[:10]:
            errs.append(f"folder '{f}': {mid} only in {nb}")
        nbody = nflag = 0
        for mid in sorted(set(ma) & set(mb)):
            (ha, fla), (hb, flb) = ma[mid], mb[mid]
            if ha != hb:
                nbody += 1
                if nbody <= 10:
                    errs.append(f"folder '{f}': {mid} body differs")
            if fla != flb:
                nflag += 1
                if nflag <= 10:
                    errs.append(f"folder '{f}': {mid} flags {na}='{fla}' {nb}='{flb}'")
        if nbody > 10 or nflag > 10:
            errs.append(f"folder '{f}': {nbody} body and {nflag} flag differences in all")
    return errs


def mutate(root, seed):
    """Flag changes on ~6% of the messages and deletion of ~2%: what a user does on a second
    device. Returns a description."""
    rnd = random.Random(seed)
    changed = deleted = 0
    for f in folders(root):
        for sub, n, p in sorted(msg_files(root, f)):
            r = rnd.random()
            if r < 0.02:
                os.unlink(p)
                deleted += 1
            elif r < 0.08:
                fl = set(flags_of(n))
                op = rnd.choice(["toggle S", "toggle F", "add R", "clear"])
                if op == "toggle S":
                    fl ^= {"S"}
                elif op == "toggle F":
                    fl ^= {"F"}
                elif op == "add R":
                    fl |= {"R", "S"}
                else:
                    fl -= {"S", "F", "R"}
                base = n.split(":2,", 1)[0]
                new = os.path.join(root, f, "cur", f"{base}:2,{''.join(sorted(fl))}")
                if new != p:
                    os.rename(p, new)
                    changed += 1
    return f"changed flags of {changed} messages, deleted {deleted}"


def imap(host, port, user, password):
    c = imaplib.IMAP4(host, int(port))
    c.login(user, password)
    return c


LIST_RE = re.compile(rb'\((?P<attrs>[^)]*)\) (?:"(?P<d>[^"]*)"|NIL) (?P<name>.*)$')


def imap_folders(c):
    typ, data = c.list('""', "*")
    out = []
    for item in data:
        if isinstance(item, tuple):  # name as a literal
            head, name = item[0], item[1]
            m = LIST_RE.match(head.rsplit(b" {", 1)[0] + b" x")
        else:
            m = LIST_RE.match(item)
            name = m.group("name") if m else None
        if not m or name is None:
            continue
        if isinstance(name, bytes):
            name = name.decode()
        if name.startswith('"') and name.endswith('"'):
            name = name[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        attrs = m.group("attrs").decode().lower()
        delim = (m.group("d") or b"").decode()
        out.append((name, delim, "\\noselect" in attrs or "\\nonexistent" in attrs))
    return out


def quote(name):
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def imap_counts(c):
    counts = {}
    for name, delim, noselect in imap_folders(c):
        if noselect:
            continue
        typ, data = c.status(quote(name), "(MESSAGES)")
        m = re.search(rb"MESSAGES (\d+)", data[0] if data and data[0] else b"")
        canon = name.replace(delim, "/") if delim and delim != "/" else name
        counts[canon] = int(m.group(1)) if m else -1
    return counts


def main():
    a = sys.argv[1:]
    cmd = a[0] if a else ""
    seed = 42
    if "--seed" in a:
        i = a.index("--seed")
        seed = int(a[i + 1])
        del a[i:i + 2]
    if cmd == "build":
        build(a[1], int(a[2]), seed)
    elif cmd == "snapshot":
        with open(a[2], "w") as f:
            json.dump(snapshot(a[1]), f, indent=0, sort_keys=True)
    elif cmd == "compare":
        extra_empty_ok = "--extra-empty-ok" in a
        a = [x for x in a if x != "--extra-empty-ok"]
        with open(a[1]) as f:
            sa = json.load(f)
        with open(a[2]) as f:
            sb = json.load(f)
        errs = compare(sa, sb, *(a[3:5] if len(a) >= 5 else ("A", "B")), extra_empty_ok=extra_empty_ok)
        for e in errs:
            print("  DIFF", e)
        sys.exit(1 if errs else 0)
    elif cmd == "mutate":
        print(mutate(a[1], seed))
        with open(a[2], "w") as f:
            json.dump(snapshot(a[1]), f, indent=0, sort_keys=True)
    elif cmd == "imap-check":
        c = imap(*a[1:5])
        counts = imap_counts(c)
        c.logout()
        with open(a[5]) as f:
            want = {k: len(v) for k, v in json.load(f).items()}
        errs = [f"server folder '{k}': {counts.get(k, 'missing')} messages, expected {v}"
                for k, v in sorted(want.items()) if counts.get(k) != v]
        errs += [f"server has an extra folder '{k}' ({v} messages)" for k, v in sorted(counts.items())
                 if k not in want and v]
        print("  server: " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())))
        for e in errs:
            print("  DIFF", e)
        sys.exit(1 if errs else 0)
    elif cmd == "imap-count":
        c = imap(*a[1:5])
        counts = imap_counts(c)
        c.logout()
        print(sum(v for v in counts.values() if v > 0), " ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    elif cmd == "imap-wipe":
        c = imap(*a[1:5])
        fs = imap_folders(c)
        for name, delim, _ in sorted(fs, key=lambda x: -len(x[0])):
            if name.upper() != "INBOX":
                c.delete(quote(name))
        typ, data = c.select("INBOX")
        if typ == "OK" and int(data[0] or 0) > 0:
            c.store("1:*", "+FLAGS.SILENT", "(\\Deleted)")
            c.expunge()
        c.logout()
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
