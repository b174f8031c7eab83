#!/usr/bin/env python3
"""IMAP benchmark client: one big folder (INBOX of one user), the same rows for every server.

  imap-bench.py gen-maildir --out MAILDIR --count N [--rcpt ADDR] [--seed S]
        write N messages straight into MAILDIR/cur as Dovecot-style files (S=, W= in the name,
        no flags, mtime = the message's date): the fast way to fill a Dovecot maildir.
  imap-bench.py fill HOST:PORT ADDR --count N [--threads 8] [--proto lmtp|smtp] [--seed S]
        deliver the same N messages over LMTP (or SMTP), THREADS sessions reusing their
        connection: how mailstow (and, with DOVECOT_FILL=lmtp, Dovecot) is filled.
  imap-bench.py run --host H --port P --user U --password PW --peer NAME --messages N [...]
        the rows below, in this order, on one folder; one line per figure on stdout:
        RESULT peer=NAME row=ROW value=NUMBER unit=ms|msg/s   (value=NA when a row failed)
        details (every run, checks) go to stderr.

Rows (ms unless said otherwise):
  select_prime      the first SELECT INBOX after the fill (Dovecot, filled by writing files,
                    builds its index here; informational)
  select            SELECT INBOX to tagged OK, a fresh logged-in connection each run, median
  fetch_all_first   UID FETCH 1:* (UID FLAGS RFC822.SIZE), first time, whole response
  fetch_all         the same, median of the following RUNS
  search_msgid_first / search_msgid     UID SEARCH HEADER Message-ID <existing id>, first run
                    and median of RUNS more (each run looks for another existing id)
  search_subject_first / search_subject SEARCH SUBJECT <word found in exactly one subject>
  body_fetch_total / body_fetch_p50 / body_fetch_p99
                    UID FETCH n BODY.PEEK[] for BODY_FETCHES random UIDs, one after the other
  append            msg/s: APPEND_TOTAL messages of 8 KiB over APPEND_CONNS connections at once
                    (each appends its share one by one, waiting for the tagged OK), into a
                    separate folder (BenchAppend) so INBOX keeps its size; append_p50/p99: ms
                    per APPEND (send to tagged OK)
  expunge           UID EXPUNGE of EXPUNGE_COUNT random UIDs (flagged \\Deleted first by
                    UID STORE, not timed); UIDPLUS
  idle_from_ok_max / idle_from_ok_p50 / idle_from_send_max / idle_from_send_p50
                    IDLE_SESSIONS sessions in IDLE on INBOX; another connection APPENDs one
                    message to INBOX; time until each session has read "* n EXISTS", measured
                    from the APPEND's tagged OK (can be negative) and from sending the APPEND;
                    median over IDLE_ROUNDS rounds of the per-round max and p50; the sessions
                    have idled --idle-settle seconds (default 1) before each APPEND
  sort_date_first / sort_date, thread_refs_first / thread_refs
                    UID SORT (REVERSE DATE) UTF-8 ALL and UID THREAD REFERENCES UTF-8 ALL on the
                    whole folder: first run and median of RUNS more (row `sort`)
  qresync_first / qresync
                    a QRESYNC client's state (UIDVALIDITY, HIGHESTMODSEQ) is taken, then
                    EXPUNGE_COUNT random messages are expunged (not timed); then ENABLE QRESYNC
                    and SELECT INBOX (QRESYNC (uidvalidity modseq 1:maxuid)) on fresh
                    connections, to tagged OK (row `qresync`)
Every client socket has TCP_NODELAY and sends each command in one write.
"""
import argparse
import faulthandler
import os
import random
import re
import resource
import selectors
import signal
import smtplib
import socket
import statistics
import sys
import threading
import time

SEED = 20261121
BASE_T = 1700000000

# ---------------------------------------------------------------- message generator
_FIRST = ("Alice Bob Carol Dave Erin Frank Grace Heidi Ivan Judy Mallory Niaj Olivia Peggy "
          "Rupert Sybil Trent Victor Walter Yvonne Zoe Anna Marek Ines Jonas Lena Tomas").split()
_LAST = ("Smith Jones Brown Miller Davis Garcia Wilson Moore Taylor Anderson Thomas Jackson "
         "White Harris Martin Clark Lewis Walker Hall Young King Wright Scott Green Baker").split()
_DOMAINS = ("example.org example.net mail.example.org lists.example.net corp.example.org "
            "shop.example.net news.example.org").split()
# topic texts: real words, checked below never to contain a subject token
_TOPICS = ["Quarterly budget review", "Meeting notes", "Invoice for October", "Release plan",
           "Build failed on main", "Lunch on Friday?", "Your order has shipped",
           "Weekly newsletter", "Holiday schedule", "Question about the contract",
           "Server maintenance window", "Slides for tomorrow", "Welcome to the team",
           "Password expiry notice", "Travel booking confirmation", "Draft for comment",
           "Photos from the trip", "Call me when you can", "Project status update",
           "Customer feedback summary", "Backup report", "Security advisory",
           "Minutes of the board meeting", "Reminder: dentist appointment",
           "Pull request ready for review", "Monthly statement available"]
_PREFIX = ["", "", "", "Re: ", "Re: ", "Fwd: ", "RE: "]
_WORDS = ("the of and to in is that for it as with was on be at by this have from or one had "
          "not but what all were when we there can an your which their said if do will each "
          "about how up out them then she many some so these would other into has more her two "
          "like him see time could no make than first been its who now people made over did "
          "down only way find use may water long little very after words called just where "
          "most know get through back much before go good new write our used me man too any "
          "day same right look think also around another came come work three word must "
          "because does part even place well such here take why things help put years "
          "different away again off went old number great tell men say small every found still "
          "between name should home big give air line set own under read last never us left "
          "end along while might next sound below saw something thought both few those always "
          "looked show large often together asked house world going want school important until "
          "form food keep children feet land side without once life enough took four head "
          "above kind began almost live page got earth need far hand high year mother light "
          "country father let night picture being study second soon story since white ever "
          "paper hard near sentence better best across during today however sure knew try told "
          "young sun thing whole hear example heard several change answer room against top "
          "turned learn point city play toward five himself usually money seen car morning "
          "meeting invoice report budget schedule review release deadline project customer "
          "server backup contract agenda attached please thanks regards office team").split()
_CONS, _VOW = "bdfgklmnprstvz", "aeiou"


def token(i):
    """A made-up 8-letter word, different for every i < 14**4 * 5**4: the subject's search key."""
    s = []
    for _ in range(4):
        i, c = divmod(i, len(_CONS))
        i, v = divmod(i, len(_VOW))
        s.append(_CONS[c] + _VOW[v])
    return "".join(s)


def _lines(seed):
    rnd = random.Random(seed)
    pool = []
    for _ in range(4096):
        w, n = [], 0
        while n < 64:
            x = rnd.choice(_WORDS)
            w.append(x)
            n += len(x) + 1
        line = " ".join(w)
        pool.append(line[0].upper() + line[1:] + ("." if rnd.random() < 0.3 else ""))
    return pool


class Gen:
    """Deterministic realistic messages (2.5-10 KiB, mean 6.4 KB: 80,000 ~ 512 MB), LF endings.
    Message i has Message-ID msgid(i) and a subject holding token(i)."""

    def __init__(self, rcpt, seed=SEED, min_bytes=2560, max_bytes=10240):
        self.rcpt, self.seed, self.lo, self.hi = rcpt, seed, min_bytes, max_bytes
        self.pool = _lines(seed)

    def msgid(self, i):
        return f"<{BASE_T + i * 37:x}.{i}.{token(i)}@{_DOMAINS[i % len(_DOMAINS)]}>"

    def subject(self, i):
        rnd = random.Random(self.seed * 1000003 + i)
        return f"{rnd.choice(_PREFIX)}{rnd.choice(_TOPICS)} [{token(i)}]"

    def message(self, i):
        """(unix time, bytes with LF line ends)."""
        rnd = random.Random(self.seed * 1000003 + i)
        subj = f"{rnd.choice(_PREFIX)}{rnd.choice(_TOPICS)} [{token(i)}]"  # same draws as subject()
        size = rnd.randint(self.lo, self.hi)
        t = BASE_T + i * 37
        date = time.strftime("%a, %d %b %Y %H:%M:%S +0000", time.gmtime(t))
        first, last = rnd.choice(_FIRST), rnd.choice(_LAST)
        dom = _DOMAINS[i % len(_DOMAINS)]
        frm = f"{first.lower()}.{last.lower()}@{dom}"
        hdr = (f"Return-Path: <{frm}>\n"
               f"Received: from mail.{dom} (mail.{dom} [192.0.2.{i % 250 + 1}])\n"
               f"\tby mx.example.com with ESMTPS id {t:x}{i:06x}\n\tfor <{self.rcpt}>; {date}\n"
               f"Date: {date}\n"
               f"From: \"{first} {last}\" <{frm}>\n"
               f"To: <{self.rcpt}>\n"
               f"Subject: {subj}\n"
               f"Message-ID: {self.msgid(i)}\n"
               f"MIME-Version: 1.0\n")
        multipart = rnd.random() < 0.15
        if multipart:
            b = f"=_alt_{i:x}_{t:x}"
            hdr += f"Content-Type: multipart/alternative; boundary=\"{b}\"\n\n"
            head = f"This is a multi-part message in MIME format.\n\n--{b}\n" \
                   "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 7bit\n\n"
            tail = f"\n--{b}\nContent-Type: text/html; charset=utf-8\n\n<html><body><p>See the " \
                   f"text part.</p></body></html>\n--{b}--\n"
        else:
            hdr += "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 7bit\n\n"
            head, tail = "", ""
        body = [head, f"Hi {rnd.choice(_FIRST)},\n\n"]
        n = len(hdr) + len(head) + len(tail) + len(body[1]) + len(first) + 20
        pool = self.pool
        while n < size:
            line = pool[rnd.randrange(4096)] + "\n"
            if rnd.random() < 0.12:
                line += "\n"
            if n + len(line) > size:
                line = line[: max(2, size - n)].rstrip(" \n") + "\n"
            body.append(line)
            n += len(line)
        body.append(f"\n-- \n{first} {last}\n" + tail)
        return t, (hdr + "".join(body)).encode()


def crlf(m):
    return m.replace(b"\n", b"\r\n")


def search_key(gen, count, rnd):
    """An index whose token is in no topic text (so exactly one subject holds it)."""
    topics = " ".join(_TOPICS + _PREFIX).lower()
    while True:
        k = rnd.randint(1, count)
        if token(k) not in topics:
            return k


# ---------------------------------------------------------------- fill
def cmd_gen_maildir(a):
    gen = Gen(a.rcpt, a.seed)
    for d in ("cur", "new", "tmp"):
        os.makedirs(os.path.join(a.out, d), exist_ok=True)
    cur = os.path.join(a.out, "cur")
    total = 0
    for i in range(1, a.count + 1):
        t, m = gen.message(i)
        vsize = len(m) + m.count(b"\n")
        name = f"{t}.M{i}P1.bench,S={len(m)},W={vsize}:2,"
        p = os.path.join(cur, name)
        with open(p, "wb") as f:
            f.write(m)
        os.utime(p, (t, t))
        total += len(m)
    print(f"gen-maildir {a.out}: {a.count} messages, {total} bytes", file=sys.stderr)


def cmd_fill(a):
    host, port = a.target.rsplit(":", 1)
    gen = Gen(a.address, a.seed)
    errors = []
    total = [0]

    def worker(k):
        try:
            cls = smtplib.LMTP if a.proto == "lmtp" else smtplib.SMTP
            s = cls(host, int(port), timeout=120)
            if a.proto == "smtp":
                s.ehlo("fill.example.com")
            for i in range(k + 1, a.count + 1, a.threads):
                _, m = gen.message(i)
                m = crlf(m)
                s.sendmail("sender@example.org", [a.address], m)
                total[0] += len(m)
            s.quit()
        except Exception as e:  # noqa: BLE001
            errors.append(f"thread {k}: {e!r}")

    t0 = time.perf_counter()
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(a.threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    dt = time.perf_counter() - t0
    for e in errors:
        print("fill error:", e, file=sys.stderr)
    print(f"fill {a.proto} {a.target}: {a.count} messages, {total[0]} bytes, {dt:.1f} s, "
          f"{a.count / dt:.0f} msg/s", file=sys.stderr)
    sys.exit(1 if errors else 0)


# ---------------------------------------------------------------- IMAP client
class ImapError(Exception):
    pass


_LIT = re.compile(rb"\{(\d+)\+?\}\r\n")


class Conn:
    """A minimal IMAP client. The receive buffer always starts with the CRLF that ended the last
    consumed line, so a tagged line is found with one regex search for CRLF + tag."""

    def __init__(self, host, port, timeout=120):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray(b"\r\n")
        self.tagn = 0
        self.caps = set()
        self.greeting = self.readline()
        if not self.greeting.startswith(b"* OK") and not self.greeting.startswith(b"* PREAUTH"):
            raise ImapError(f"greeting: {self.greeting!r}")

    def _recv(self):
        d = self.sock.recv(1 << 20)
        if not d:
            raise ImapError("connection closed by server")
        self.buf += d

    def readline(self):
        while True:
            i = self.buf.find(b"\r\n", 2)
            if i >= 0:
                line = bytes(self.buf[2:i])
                del self.buf[:i]
                return line
            self._recv()

    def newtag(self):
        self.tagn += 1
        return b"A%05d" % self.tagn

    def response(self, tag):
        """Read up to and including the tagged line: (untagged data bytes, tagged line)."""
        pat = re.compile(rb"\r\n" + tag + rb" (OK|NO|BAD)[^\r\n]*\r\n")
        buf = self.buf
        s = 0
        while True:
            mt = pat.search(buf, s)
            ml = _LIT.search(buf, s)
            if mt and (ml is None or mt.start() < ml.start()):
                data = bytes(buf[2:mt.start() + 2])
                tl = bytes(buf[mt.start() + 2:mt.end() - 2])
                del buf[:mt.end() - 2]
                return data, tl
            if ml:
                end = ml.end() + int(ml.group(1))
                while len(buf) < end:
                    self._recv()
                    buf = self.buf
                s = end
                continue
            last = buf.rfind(b"\r\n", s)
            if last > s:
                s = last
            self._recv()
            buf = self.buf

    def send(self, data):
        self.sock.sendall(data)

    def cmd(self, line, ok=True):
        """Send one command; return (data, tagged line, seconds from send to tagged line)."""
        if isinstance(line, str):
            line = line.encode()
        tag = self.newtag()
        t0 = time.perf_counter()
        self.sock.sendall(tag + b" " + line + b"\r\n")
        data, tl = self.response(tag)
        dt = time.perf_counter() - t0
        if ok and not tl.startswith(tag + b" OK"):
            raise ImapError(f"{line[:80]!r} -> {tl[:300]!r}")
        return data, tl, dt

    def login(self, user, password):
        self.cmd(f'LOGIN "{user}" "{password}"')
        data, _, _ = self.cmd("CAPABILITY")
        m = re.search(rb"\* CAPABILITY ([^\r\n]*)", data)
        self.caps = set(m.group(1).upper().split()) if m else set()

    def append(self, mailbox, msg, literal_plus=None):
        """APPEND one message (LITERAL+ when the server has it, unless told otherwise)."""
        if literal_plus is None:
            literal_plus = b"LITERAL+" in self.caps
        tag = self.newtag()
        t0 = time.perf_counter()
        if literal_plus:
            self.sock.sendall(b"%s APPEND %s {%d+}\r\n%s\r\n" % (tag, mailbox.encode(), len(msg), msg))
        else:
            self.sock.sendall(b"%s APPEND %s {%d}\r\n" % (tag, mailbox.encode(), len(msg)))
            while True:
                line = self.readline()
                if line.startswith(b"+"):
                    break
                if line.startswith(tag):
                    raise ImapError(f"APPEND refused: {line!r}")
            self.sock.sendall(msg + b"\r\n")
        data, tl = self.response(tag)
        t1 = time.perf_counter()
        if not tl.startswith(tag + b" OK"):
            raise ImapError(f"APPEND -> {tl[:300]!r}")
        return t0, t1, tl

    def close(self):
        try:
            self.sock.settimeout(5)
            self.cmd("LOGOUT", ok=False)
        except Exception:  # noqa: BLE001
            pass
        self.sock.close()


def exists_of(data):
    m = re.findall(rb"\* (\d+) EXISTS", data)
    return int(m[-1]) if m else None


def uid_set(uids):
    """Compact sequence set of sorted UIDs: 1:5,9,11:12."""
    uids = sorted(uids)
    out, i = [], 0
    while i < len(uids):
        j = i
        while j + 1 < len(uids) and uids[j + 1] == uids[j] + 1:
            j += 1
        out.append(str(uids[i]) if i == j else f"{uids[i]}:{uids[j]}")
        i = j + 1
    return ",".join(out)


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = max(0, min(len(xs) - 1, int(round(p / 100.0 * len(xs) + 0.5)) - 1))
    return xs[k]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- rows
class Bench:
    def __init__(self, a):
        self.a = a
        self.gen = Gen(a.rcpt or a.user, a.seed)
        self.rnd = random.Random(a.seed + 7)
        self.uids = []      # INBOX UIDs in order
        self.sizes = {}     # uid -> RFC822.SIZE
        self.failed = False

    def result(self, row, value, unit="ms", extra=""):
        v = "NA" if value is None else (f"{value:.1f}" if unit == "msg/s" else f"{value:.2f}")
        print(f"RESULT peer={self.a.peer} row={row} value={v} unit={unit}{extra}", flush=True)

    def conn(self, select=False):
        c = Conn(self.a.host, self.a.port)
        c.login(self.a.user, self.a.password)
        if select:
            c.cmd("SELECT INBOX")
        return c

    # 1. SELECT
    def row_select(self):
        c = self.conn()
        data, _, dt = c.cmd("SELECT INBOX")
        n = exists_of(data)
        log(f"select prime: {dt * 1000:.1f} ms, EXISTS {n}; caps: {' '.join(sorted(x.decode() for x in c.caps))}")
        self.result("select_prime", dt * 1000)
        c.close()
        if n != self.a.messages:
            log(f"WARN: INBOX has {n} messages, expected {self.a.messages}")
        ts = []
        for r in range(self.a.runs):
            c = self.conn()
            data, _, dt = c.cmd("SELECT INBOX")
            ts.append(dt * 1000)
            c.close()
        log(f"select runs ms: {', '.join(f'{x:.1f}' for x in ts)}")
        self.result("select", statistics.median(ts))

    # 2. UID FETCH 1:* (UID FLAGS RFC822.SIZE)
    def row_fetch_all(self):
        c = self.conn(select=True)
        ts = []
        for r in range(self.a.runs + 1):
            data, _, dt = c.cmd("UID FETCH 1:* (UID FLAGS RFC822.SIZE)")
            ts.append(dt * 1000)
            n = data.count(b" FETCH (")
            if r == 0:
                pairs = re.findall(rb"UID (\d+)[^\r\n]*?RFC822\.SIZE (\d+)|RFC822\.SIZE (\d+)[^\r\n]*?UID (\d+)", data)
                for u1, s1, s2, u2 in pairs:
                    u, s = (u1, s1) if u1 else (u2, s2)
                    self.sizes[int(u)] = int(s)
                self.uids = sorted(self.sizes)
                log(f"fetch_all: {n} FETCH responses, {len(data)} bytes, {len(self.uids)} UIDs "
                    f"{self.uids[:1]}..{self.uids[-1:]}, total size {sum(self.sizes.values())}")
        c.close()
        log(f"fetch_all runs ms: {', '.join(f'{x:.1f}' for x in ts)}")
        self.result("fetch_all_first", ts[0])
        self.result("fetch_all", statistics.median(ts[1:]))

    # 3. SEARCH
    def row_search(self):
        c = self.conn(select=True)
        for row, mk in (("search_msgid", lambda k: f"UID SEARCH HEADER Message-ID \"{self.gen.msgid(k)}\""),
                        ("search_subject", lambda k: f"SEARCH SUBJECT \"{token(k)}\"")):
            ts = []
            for r in range(self.a.runs + 1):
                k = search_key(self.gen, self.a.messages, self.rnd)
                data, _, dt = c.cmd(mk(k))
                m = re.search(rb"\* SEARCH([^\r\n]*)", data)
                hits = m.group(1).split() if m else []
                ts.append(dt * 1000)
                log(f"{row} run {r}: k={k} {dt * 1000:.1f} ms hits={[h.decode() for h in hits]}")
                if len(hits) != 1:
                    log(f"WARN: {row} expected exactly 1 hit, got {len(hits)}")
            self.result(row + "_first", ts[0])
            self.result(row, statistics.median(ts[1:]))
        c.close()

    # 4. BODY.PEEK[] of random UIDs
    def row_body(self):
        if not self.uids:
            self.load_uids()
        c = self.conn(select=True)
        pick = [self.rnd.choice(self.uids) for _ in range(self.a.body_fetches)]
        ts, nbytes, bad = [], 0, 0
        t0 = time.perf_counter()
        for u in pick:
            data, _, dt = c.cmd(f"UID FETCH {u} BODY.PEEK[]")
            ts.append(dt * 1000)
            m = _LIT.search(data)
            ln = int(m.group(1)) if m else -1
            nbytes += max(ln, 0)
            if ln != self.sizes.get(u, ln):
                bad += 1
        total = (time.perf_counter() - t0) * 1000
        c.close()
        log(f"body: {len(pick)} fetches, {nbytes} bytes, {total:.0f} ms, size mismatches {bad}")
        if bad:
            log(f"WARN: {bad} BODY[] literals differ from RFC822.SIZE")
        self.result("body_fetch_total", total)
        self.result("body_fetch_p50", pct(ts, 50))
        self.result("body_fetch_p99", pct(ts, 99))

    def load_uids(self):
        c = self.conn(select=True)
        data, _, _ = c.cmd("UID FETCH 1:* (UID RFC822.SIZE)")
        for u1, s1, s2, u2 in re.findall(rb"UID (\d+)[^\r\n]*?RFC822\.SIZE (\d+)|RFC822\.SIZE (\d+)[^\r\n]*?UID (\d+)", data):
            u, s = (u1, s1) if u1 else (u2, s2)
            self.sizes[int(u)] = int(s)
        self.uids = sorted(self.sizes)
        c.close()

    # 5. concurrent APPEND
    def append_msg(self, k, j):
        hdr = (f"From: \"Append Bench\" <append@example.org>\r\nTo: <{self.a.user}>\r\n"
               f"Subject: append bench {k}-{j}\r\nMessage-ID: <append.{k}.{j}.{os.getpid()}@example.org>\r\n"
               f"Date: Sat, 21 Nov 2026 12:00:00 +0000\r\nMIME-Version: 1.0\r\n"
               f"Content-Type: text/plain; charset=us-ascii\r\n\r\n").encode()
        line = b"append benchmark body line, the quick brown fox jumps over the lazy dog 012345\r\n"
        body = line * ((8192 - len(hdr)) // len(line))
        pad = 8192 - len(hdr) - len(body)
        if pad == 1:
            body, pad = body[:-len(line)], pad + len(line)
        if pad >= 2:
            body += b"x" * (pad - 2) + b"\r\n"
        return hdr + body

    def row_append(self):
        a = self.a
        folder = "BenchAppend"
        c = self.conn()
        c.cmd(f"DELETE {folder}", ok=False)
        c.cmd(f"CREATE {folder}")
        conns = [self.conn() for _ in range(a.append_conns)]
        per = a.append_total // a.append_conns
        msgs = [[self.append_msg(k, j) for j in range(per)] for k in range(a.append_conns)]
        lp = a.literal_plus
        log(f"append: {a.append_conns} connections x {per} messages of {len(msgs[0][0])} bytes, "
            f"LITERAL+ {'used' if (lp if lp is not None else b'LITERAL+' in c.caps) else 'not used'}")
        barrier = threading.Barrier(a.append_conns + 1)
        errors, lat = [], []

        def worker(k):
            cc, lt = conns[k], []
            barrier.wait()
            try:
                for m in msgs[k]:
                    t0, t1, _ = cc.append(folder, m, lp)
                    lt.append((t1 - t0) * 1000)
            except Exception as e:  # noqa: BLE001
                errors.append(f"conn {k}: {e}")
            lat.extend(lt)

        ts = [threading.Thread(target=worker, args=(k,)) for k in range(a.append_conns)]
        for t in ts:
            t.start()
        barrier.wait()
        t0 = time.perf_counter()
        for t in ts:
            t.join()
        dt = time.perf_counter() - t0
        for e in errors:
            log("append error:", e)
        data, _, _ = c.cmd(f"STATUS {folder} (MESSAGES)")
        m = re.search(rb"MESSAGES (\d+)", data)
        stored = int(m.group(1)) if m else -1
        log(f"append: {len(lat)} OK in {dt:.2f} s, per-append p50 {pct(lat, 50):.2f} ms p99 "
            f"{pct(lat, 99):.2f} ms; STATUS MESSAGES {stored}")
        if stored != per * a.append_conns:
            log(f"WARN: folder holds {stored} messages, expected {per * a.append_conns}")
        for cc in conns:
            cc.close()
        c.close()
        self.result("append", None if errors else len(lat) / dt, "msg/s")
        self.result("append_p50", None if errors else pct(lat, 50))
        self.result("append_p99", None if errors else pct(lat, 99))

    # 6. UID EXPUNGE
    def row_expunge(self):
        if not self.uids:
            self.load_uids()
        c = self.conn(select=True)
        if b"UIDPLUS" not in c.caps:
            log("WARN: server does not advertise UIDPLUS")
        n = self.a.expunge_count
        if n * 5 > len(self.uids):  # scaled-down runs: keep 80% of the folder for the IDLE row
            n = len(self.uids) // 5
            log(f"expunge: only {len(self.uids)} messages, expunging {n} instead of {self.a.expunge_count}")
        victims = self.rnd.sample(self.uids, n)
        s = uid_set(victims)
        _, _, dst = c.cmd(f"UID STORE {s} +FLAGS.SILENT (\\Deleted)")
        data, _, dt = c.cmd(f"UID EXPUNGE {s}")
        n = data.count(b" EXPUNGE\r\n") + data.count(b"* VANISHED")
        log(f"expunge: STORE {dst * 1000:.1f} ms (not counted), UID EXPUNGE of {len(victims)} "
            f"({len(s)}-byte set): {dt * 1000:.1f} ms, {n} EXPUNGE responses")
        if n != len(victims):
            log(f"WARN: {n} EXPUNGE responses for {len(victims)} UIDs")
        vs = set(victims)
        self.uids = [u for u in self.uids if u not in vs]
        c.close()
        self.result("expunge", dt * 1000)

    # 8. SORT and THREAD (RFC 5256) over the whole folder
    def row_sort(self):
        c = self.conn(select=True)
        for row, command in (("sort_date", "UID SORT (REVERSE DATE) UTF-8 ALL"),
                             ("thread_refs", "UID THREAD REFERENCES UTF-8 ALL")):
            ts = []
            for r in range(self.a.runs + 1):
                data, _, dt = c.cmd(command)
                ts.append(dt * 1000)
                if r == 0:
                    head = data.split(b"\r\n", 1)[0]
                    log(f"{row}: {len(data)} bytes, {head[:80]!r}...")
            log(f"{row} runs ms: {', '.join(f'{x:.1f}' for x in ts)}")
            self.result(row + "_first", ts[0])
            self.result(row, statistics.median(ts[1:]))
        c.close()

    # 9. QRESYNC: a client that last saw the folder before EXPUNGE_COUNT expunges reconnects
    def row_qresync(self):
        if not self.uids:
            self.load_uids()
        c = self.conn()
        if b"QRESYNC" not in c.caps:
            raise ImapError("no QRESYNC")
        c.cmd("ENABLE QRESYNC")
        data, _, _ = c.cmd("SELECT INBOX")
        validity = int(re.search(rb"UIDVALIDITY (\d+)", data).group(1))
        modseq = int(re.search(rb"HIGHESTMODSEQ (\d+)", data).group(1))
        n = min(self.a.expunge_count, len(self.uids) // 5)
        known = f"1:{max(self.uids)}"  # RFC 7162 3.2.5: known-uids may not use "*"
        victims = self.rnd.sample(self.uids, n)
        s = uid_set(victims)
        c.cmd(f"UID STORE {s} +FLAGS.SILENT (\\Deleted)")
        c.cmd(f"UID EXPUNGE {s}")
        vs = set(victims)
        self.uids = [u for u in self.uids if u not in vs]
        c.close()
        ts = []
        for r in range(self.a.runs + 1):
            q = self.conn()
            q.cmd("ENABLE QRESYNC")
            data, _, dt = q.cmd(f"SELECT INBOX (QRESYNC ({validity} {modseq} {known}))")
            ts.append(dt * 1000)
            if r == 0:
                m = re.search(rb"\* VANISHED \(EARLIER\) ([^\r\n]*)", data)
                log(f"qresync: {len(data)} bytes, VANISHED set of {len(m.group(1)) if m else 0} bytes, "
                    f"{data.count(b' FETCH (')} FETCH for {n} expunged")
            q.close()
        log(f"qresync runs ms: {', '.join(f'{x:.1f}' for x in ts)}")
        self.result("qresync_first", ts[0])
        self.result("qresync", statistics.median(ts[1:]))

    # 7. IDLE fan-out
    def row_idle(self):
        a = self.a
        want = a.idle_sessions
        try:
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            if soft < want + 100:
                resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, want + 1000), hard))
        except (ValueError, OSError):
            pass
        # the appender first: when the server caps sessions per user, the IDLE sessions get
        # what is left (reported as sessions=K on the RESULT lines)
        appender = self.conn()
        sess, errors = [], []
        lock = threading.Lock()

        def opener(n):
            for _ in range(n):
                try:
                    c = self.conn(select=True)
                    with lock:
                        sess.append(c)
                except Exception as e:  # noqa: BLE001
                    with lock:
                        errors.append(str(e))

        t0 = time.perf_counter()
        par = 4
        ths = [threading.Thread(target=opener, args=(want // par + (1 if k < want % par else 0),))
               for k in range(par)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        log(f"idle: {len(sess)} of {want} sessions logged in and selected in "
            f"{time.perf_counter() - t0:.1f} s")
        if errors:
            log(f"WARN: {len(errors)} sessions failed, first: {errors[0]}")
        if not sess:
            appender.close()
            for r in ("idle_from_ok_max", "idle_from_ok_p50", "idle_from_send_max", "idle_from_send_p50"):
                self.result(r, None)
            return
        tags = []
        for c in sess:
            tag = c.newtag()
            tags.append(tag)
            c.send(tag + b" IDLE\r\n")
        for c in sess:
            while True:
                line = c.readline()
                if line.startswith(b"+"):
                    break
                if line.startswith(b"A"):
                    raise ImapError(f"IDLE refused: {line!r}")
        time.sleep(a.idle_settle)
        for c in sess:
            c.sock.setblocking(False)
        sel = selectors.DefaultSelector()
        for k, c in enumerate(sess):
            sel.register(c.sock, selectors.EVENT_READ, k)
        rounds_ok, rounds_send = [], []
        for rnd_i in range(a.idle_rounds):
            for c in sess:
                c.buf = bytearray(b"\r\n")
            got = [None] * len(sess)
            msg = self.append_msg(900 + rnd_i, 0)
            lp = a.literal_plus if a.literal_plus is not None else (b"LITERAL+" in appender.caps)
            tag = appender.newtag()
            appender.sock.setblocking(True)
            t_send = time.perf_counter()
            if lp:
                appender.sock.sendall(b"%s APPEND INBOX {%d+}\r\n%s\r\n" % (tag, len(msg), msg))
            else:
                appender.sock.sendall(b"%s APPEND INBOX {%d}\r\n" % (tag, len(msg)))
                while not appender.readline().startswith(b"+"):
                    pass
                appender.sock.sendall(msg + b"\r\n")
            appender.sock.setblocking(False)
            sel.register(appender.sock, selectors.EVENT_READ, -1)
            t_ok, remaining, deadline = None, len(sess), t_send + a.idle_timeout
            while (remaining or t_ok is None) and time.perf_counter() < deadline:
                for key, _ in sel.select(timeout=max(0.0, deadline - time.perf_counter())):
                    now = time.perf_counter()
                    k = key.data
                    c = appender if k < 0 else sess[k]
                    try:
                        d = c.sock.recv(65536)
                    except BlockingIOError:
                        continue
                    if not d:
                        raise ImapError(f"session {k} closed by server")
                    c.buf += d
                    if k < 0:
                        if re.search(rb"\r\n" + tag + rb" [^\r\n]*\r\n", c.buf):
                            t_ok = now
                            if not re.search(rb"\r\n" + tag + rb" OK", c.buf):
                                raise ImapError(f"APPEND failed: {bytes(c.buf)!r}")
                    elif got[k] is None and re.search(rb"\* \d+ EXISTS\r\n", c.buf):
                        got[k] = now
                        remaining -= 1
            sel.unregister(appender.sock)
            appender.buf = bytearray(b"\r\n")
            missing = sum(1 for g in got if g is None)
            if t_ok is None:
                log(f"idle round {rnd_i}: no tagged OK for the APPEND within {a.idle_timeout} s")
                continue
            fo = [(g - t_ok) * 1000 for g in got if g is not None]
            fs = [(g - t_send) * 1000 for g in got if g is not None]
            log(f"idle round {rnd_i}: APPEND OK after {(t_ok - t_send) * 1000:.2f} ms; "
                f"{len(fs)}/{len(sess)} sessions saw EXISTS ({missing} missing after "
                f"{a.idle_timeout} s); from OK: min {min(fo, default=float('nan')):.2f} p50 "
                f"{pct(fo, 50):.2f} max {max(fo, default=float('nan')):.2f} ms; from send: p50 "
                f"{pct(fs, 50):.2f} max {max(fs, default=float('nan')):.2f} ms")
            if missing:
                self.failed = True
                log(f"WARN: idle round {rnd_i}: {missing} sessions never saw EXISTS")
                continue
            rounds_ok.append((max(fo), pct(fo, 50)))
            rounds_send.append((max(fs), pct(fs, 50)))
            time.sleep(a.idle_settle)
        extra = "" if len(sess) == want else f" sessions={len(sess)}"
        med = lambda xs: statistics.median(xs) if xs else None  # noqa: E731
        self.result("idle_from_ok_max", med([x[0] for x in rounds_ok]), extra=extra)
        self.result("idle_from_ok_p50", med([x[1] for x in rounds_ok]), extra=extra)
        self.result("idle_from_send_max", med([x[0] for x in rounds_send]), extra=extra)
        self.result("idle_from_send_p50", med([x[1] for x in rounds_send]), extra=extra)
        for c, tag in zip(sess, tags):
            try:
                c.sock.setblocking(True)
                c.sock.settimeout(10)
                c.send(b"DONE\r\n")
                c.response(tag)
            except Exception:  # noqa: BLE001
                pass
            c.close()
        appender.close()


ROWS = {"select": ("row_select", ["select_prime", "select"]),
        "fetch": ("row_fetch_all", ["fetch_all_first", "fetch_all"]),
        "search": ("row_search", ["search_msgid_first", "search_msgid", "search_subject_first",
                                  "search_subject"]),
        "body": ("row_body", ["body_fetch_total", "body_fetch_p50", "body_fetch_p99"]),
        "append": ("row_append", [("append", "msg/s"), "append_p50", "append_p99"]),
        "expunge": ("row_expunge", ["expunge"]),
        "sort": ("row_sort", ["sort_date_first", "sort_date", "thread_refs_first", "thread_refs"]),
        "qresync": ("row_qresync", ["qresync_first", "qresync"]),
        "idle": ("row_idle", ["idle_from_ok_max", "idle_from_ok_p50", "idle_from_send_max",
                              "idle_from_send_p50"])}


def cmd_run(a):
    b = Bench(a)
    for name in a.rows.split(","):
        meth, outs = ROWS[name]
        t0 = time.perf_counter()
        log(f"--- row {name} ({a.peer})")
        try:
            getattr(b, meth)()
        except Exception as e:  # noqa: BLE001
            b.failed = True
            log(f"ERROR row {name}: {type(e).__name__}: {e}")
            for o in outs:
                row, unit = o if isinstance(o, tuple) else (o, "ms")
                b.result(row, None, unit)
        log(f"--- row {name} took {time.perf_counter() - t0:.1f} s")
    sys.exit(1 if b.failed else 0)


def main():
    faulthandler.register(signal.SIGUSR1)  # kill -USR1 <pid>: where is it stuck
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sp = p.add_subparsers(dest="cmd", required=True)
    g = sp.add_parser("gen-maildir")
    g.add_argument("--out", required=True)
    g.add_argument("--count", type=int, default=80000)
    g.add_argument("--rcpt", default="user0999@example.com")
    g.add_argument("--seed", type=int, default=SEED)
    f = sp.add_parser("fill")
    f.add_argument("target")
    f.add_argument("address")
    f.add_argument("--count", type=int, default=80000)
    f.add_argument("--threads", type=int, default=8)
    f.add_argument("--proto", choices=["lmtp", "smtp"], default="lmtp")
    f.add_argument("--seed", type=int, default=SEED)
    r = sp.add_parser("run")
    r.add_argument("--host", default="127.0.0.1")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--user", required=True)
    r.add_argument("--password", required=True)
    r.add_argument("--rcpt", help="the To: the fill used (default --user)")
    r.add_argument("--peer", required=True)
    r.add_argument("--messages", type=int, default=80000, help="messages the fill put in INBOX")
    r.add_argument("--seed", type=int, default=SEED)
    r.add_argument("--rows", default="select,fetch,search,body,append,expunge,idle")
    r.add_argument("--runs", type=int, default=5)
    r.add_argument("--body-fetches", type=int, default=1000)
    r.add_argument("--append-total", type=int, default=10000)
    r.add_argument("--append-conns", type=int, default=8)
    r.add_argument("--expunge-count", type=int, default=1000)
    r.add_argument("--idle-sessions", type=int, default=200)
    r.add_argument("--idle-rounds", type=int, default=3)
    r.add_argument("--idle-timeout", type=float, default=60.0)
    r.add_argument("--idle-settle", type=float, default=1.0,
                   help="seconds in IDLE before the first APPEND and between rounds (a server "
                        "that hibernates idle sessions after N s needs more than N)")
    r.add_argument("--literal-plus", choices=["auto", "yes", "no"], default="auto")
    a = p.parse_args()
    if a.cmd == "gen-maildir":
        cmd_gen_maildir(a)
    elif a.cmd == "fill":
        cmd_fill(a)
    else:
        a.literal_plus = {"auto": None, "yes": True, "no": False}[a.literal_plus]
        cmd_run(a)


if __name__ == "__main__":
    main()
