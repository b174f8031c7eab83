#!/usr/bin/env python3
"""Hostile clients against a running mail server, for bench/run-hostile.sh.

Usage: hostile.py ATTACK --pid PID [options]

Attacks (each the finding of issue 18 it reproduces):
  imap-logins-one      64 parallel wrong IMAP logins from one address
  imap-logins-many     520 wrong IMAP logins from 520 addresses (one per /24), 64 at a time
  submission-logins    64 parallel wrong AUTH PLAIN logins on submission, from 64 addresses
  prelogin-literals    64 connections: `a LOGIN {50331648}`, and 64 sending a 48 MiB LITERAL+
  unfinished-data      16 SMTP DATA transfers of 48 MiB left unfinished, then finished
  trickle              N connections (--connections, default 1000) each sending one byte every
                       --every seconds (default 10) to SMTP, IMAP and POP3 in turn
  flood                wrong POP3 passwords from --addresses source addresses (default 256, one
                       per /24) on --threads threads, for --seconds, as fast as answered
  warm                 one right POP3 login for every user of --users FILE (8 at a time), so
                       later logins are remembered and the measurement sees no first logins
  legit                right POP3 logins (USER, PASS, QUIT) of the users of --users FILE from
                       127.0.0.1 on --threads threads for --seconds: a client that counts its own
                       successes, beside rabid

For every attack but flood it prints one line per phase:
  RESULT hostile attack=NAME rss_before_mib=.. rss_peak_mib=.. rss_after_mib=.. rss_1min_mib=..
  plus counts of what the server answered. The server's resident memory is read from
  /proc/PID/status (VmRSS) every 50 ms while the attack runs, right after it, and 60 s later
  (--settle).
"""
import argparse
import socket
import threading
import time

parser = argparse.ArgumentParser()
parser.add_argument("attack")
parser.add_argument("--pid", type=int, required=True)
parser.add_argument("--host", default="127.0.0.1")
parser.add_argument("--imap", type=int, default=1143)
parser.add_argument("--pop3", type=int, default=1110)
parser.add_argument("--smtp", type=int, default=2525)
parser.add_argument("--submission", type=int, default=5587)
parser.add_argument("--user", default="user0001@example.com")
parser.add_argument("--rcpt", default="user0002@example.com")
parser.add_argument("--connections", type=int, default=1000)
parser.add_argument("--every", type=float, default=10.0)
parser.add_argument("--addresses", type=int, default=256)
parser.add_argument("--threads", type=int, default=32)
parser.add_argument("--seconds", type=float, default=60.0)
parser.add_argument("--settle", type=float, default=60.0)
parser.add_argument("--offset", type=int, default=0, help="first attacker address number")
parser.add_argument("--users", help="address password per line (warm)")
args = parser.parse_args()


def rss_mib():
    with open(f"/proc/{args.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Sampler:
    def __init__(self):
        self.peak = rss_mib()
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop:
            self.peak = max(self.peak, rss_mib())
            time.sleep(0.05)

    def done(self):
        self.stop = True
        self.thread.join()
        return self.peak


def source(i):
    """The i-th attacker address: one per /24, away from 127.0.0.0/24 (the legitimate one)."""
    i += args.offset
    return f"127.{10 + i // 250}.{i % 250}.1"


def connect(port, src="127.0.0.1"):
    s = socket.create_connection((args.host, port), timeout=120, source_address=(src, 0))
    return s


def read_line(f):
    return f.readline().decode(errors="replace")


def imap_login(src, password):
    try:
        s = connect(args.imap, src)
        f = s.makefile("rb")
        read_line(f)
        s.sendall(f"a LOGIN {args.user} {password}\r\n".encode())
        while True:
            line = read_line(f)
            if not line or line.startswith("a "):
                s.close()
                return line
    except OSError as e:
        return f"error {e}"


def run_parallel(jobs, width):
    results = []
    lock = threading.Lock()
    it = iter(jobs)

    def worker():
        while True:
            with lock:
                job = next(it, None)
            if job is None:
                return
            r = job()
            with lock:
                results.append(r)

    threads = [threading.Thread(target=worker) for _ in range(width)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def outcome(answers):
    failed = sum("AUTHENTICATIONFAILED" in a or a.startswith("535") or a.startswith("-ERR [AUTH]")
                 or "authentication failed" in a.lower() for a in answers)
    refused = len(answers) - failed
    return f"answers={len(answers)} checked_wrong={failed} refused_or_later={refused}"


def smtp_reply(f):
    while True:
        line = read_line(f)
        if len(line) < 4 or line[3] != "-":
            return line


def attack():
    name = args.attack
    if name == "imap-logins-one":
        return outcome(run_parallel([lambda n=n: imap_login("127.0.0.1", f"guess{n}") for n in range(64)], 64))
    if name == "imap-logins-many":
        return outcome(run_parallel([lambda n=n: imap_login(source(n), "wrong") for n in range(520)], 64))
    if name == "submission-logins":
        import base64

        def login(n):
            try:
                s = connect(args.submission, source(n))
                f = s.makefile("rb")
                smtp_reply(f)
                token = base64.b64encode(f"\0{args.user}\0guess{n}".encode()).decode()
                s.sendall(f"EHLO x\r\nAUTH PLAIN {token}\r\n".encode())
                smtp_reply(f)
                answer = smtp_reply(f)
                s.close()
                return answer
            except OSError as e:
                return f"error {e}"
        return outcome(run_parallel([lambda n=n: login(n) for n in range(64)], 64))
    if name == "prelogin-literals":
        def sync(n):
            try:
                s = connect(args.imap, source(n))
                f = s.makefile("rb")
                read_line(f)
                s.sendall(b"a LOGIN {50331648}\r\n")
                return read_line(f)
            except OSError as e:
                return f"error {e}"

        def plus(n):
            try:
                s = connect(args.imap, source(100 + n))
                f = s.makefile("rb")
                read_line(f)
                s.sendall(b"a LOGIN {50331648+}\r\n")
                chunk = b"x" * (1 << 20)
                for _ in range(48):
                    s.sendall(chunk)
            except OSError:
                pass
            try:
                return read_line(f)
            except (OSError, UnboundLocalError):
                return "closed"
        answers = run_parallel([lambda n=n: sync(n) for n in range(64)] + [lambda n=n: plus(n) for n in range(64)], 128)
        toobig = sum("TOOBIG" in a for a in answers)
        plus_sent = sum(a.startswith("+") for a in answers)
        return f"answers={len(answers)} toobig={toobig} continuation_requests={plus_sent}"
    if name == "unfinished-data":
        line = b"m" * 998 + b"\r\n"
        block = line * 1024

        def open_data(n):
            s = connect(args.smtp, source(200 + n))
            f = s.makefile("rb")
            smtp_reply(f)
            s.sendall(f"EHLO x\r\nMAIL FROM:<x@remote.example>\r\nRCPT TO:<{args.rcpt}>\r\nDATA\r\n".encode())
            for _ in range(4):
                smtp_reply(f)
            for _ in range(48):
                s.sendall(block)
            return (s, f)
        conns = run_parallel([lambda n=n: open_data(n) for n in range(16)], 16)
        during = rss_mib()
        codes = []
        for s, f in conns:
            s.sendall(b".\r\n")
            codes.append(smtp_reply(f)[:3])
            s.close()
        return f"rss_unfinished_mib={during:.1f} accepted={codes.count('250')} refused_452={codes.count('452')}"
    if name == "trickle":
        ports = [args.smtp, args.imap, args.pop3]
        socks = []
        for n in range(args.connections):
            try:
                socks.append(connect(ports[n % 3], source(300 + n // 60)))
            except OSError:
                pass
        opened = len(socks)
        started = time.time()
        alive = socks
        closed_at = None
        while alive and time.time() - started < 600:
            still = []
            for s in alive:
                try:
                    s.sendall(b"N")
                    still.append(s)
                except OSError:
                    s.close()
            alive = still
            # Anything the server closed shows up on the next send; also drain replies.
            for s in alive:
                s.setblocking(False)
                try:
                    while True:
                        data = s.recv(4096)
                        if not data:
                            break
                except (BlockingIOError, OSError):
                    pass
                s.setblocking(True)
            if closed_at is None and len(alive) < opened * 0.01:
                closed_at = time.time() - started
            time.sleep(args.every)
        return f"connections={opened} all_closed_after_s={closed_at if closed_at is not None else 'never'}"
    if name == "flood":
        stop = time.time() + args.seconds
        counts = {"checked": 0, "refused": 0, "error": 0}
        lock = threading.Lock()

        def worker(t):
            i = t
            while time.time() < stop:
                src = source(i % args.addresses)
                i += args.threads
                try:
                    s = connect(args.pop3, src)
                    f = s.makefile("rb")
                    read_line(f)
                    s.sendall(f"USER {args.user}\r\nPASS wrong{i}\r\n".encode())
                    read_line(f)
                    answer = read_line(f)
                    s.close()
                    key = "refused" if "SYS/TEMP" in answer else "checked"
                except OSError:
                    key = "error"
                with lock:
                    counts[key] += 1
        threads = [threading.Thread(target=worker, args=(t,)) for t in range(args.threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return " ".join(f"{k}={v}" for k, v in counts.items())
    if name == "legit":
        with open(args.users) as f:
            users = [line.split()[:2] for line in f if line.strip()]
        stop = time.time() + args.seconds
        counts = {"ok": 0, "failed": 0}
        lock = threading.Lock()

        def worker(t):
            i = t
            while time.time() < stop:
                user, password = users[i % len(users)]
                i += args.threads
                try:
                    s = connect(args.pop3)
                    f = s.makefile("rb")
                    read_line(f)
                    s.sendall(f"USER {user}\r\nPASS {password}\r\nQUIT\r\n".encode())
                    read_line(f)
                    ok = read_line(f).startswith("+OK")
                    read_line(f)
                    s.close()
                except OSError:
                    ok = False
                with lock:
                    counts["ok" if ok else "failed"] += 1
        threads = [threading.Thread(target=worker, args=(t,)) for t in range(args.threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return f"logins={counts['ok']} failed={counts['failed']} per_s={counts['ok'] / args.seconds:.1f}"
    if name == "warm":
        def login(line):
            user, password = line.split()[:2]
            try:
                s = connect(args.pop3)
                f = s.makefile("rb")
                read_line(f)
                s.sendall(f"USER {user}\r\nPASS {password}\r\nQUIT\r\n".encode())
                read_line(f)
                answer = read_line(f)
                s.close()
                return answer
            except OSError as e:
                return f"error {e}"
        with open(args.users) as f:
            lines = [line for line in f if line.strip()]
        answers = run_parallel([lambda line=line: login(line) for line in lines], 8)
        return f"users={len(lines)} ok={sum(a.startswith('+OK') for a in answers)}"
    raise SystemExit(f"unknown attack {name}")


if args.attack in ("flood", "warm", "legit"):
    print(f"RESULT hostile_{args.attack} {attack()}", flush=True)
else:
    before = rss_mib()
    sampler = Sampler()
    detail = attack()
    peak = sampler.done()
    after = rss_mib()
    time.sleep(args.settle)
    settled = rss_mib()
    print(f"RESULT hostile attack={args.attack} rss_before_mib={before:.1f} rss_peak_mib={peak:.1f} "
          f"rss_after_mib={after:.1f} rss_1min_mib={settled:.1f} {detail}", flush=True)
