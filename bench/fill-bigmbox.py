#!/usr/bin/env python3
"""Delivers COUNT messages of 2.5-10 KiB (the peer harness's size mix) to one address over SMTP,
with THREADS connections reusing their session: the thesis's large mailbox, built through the
real delivery path.

Usage: fill-bigmbox.py HOST:PORT ADDRESS COUNT [THREADS]
"""
import random
import smtplib
import sys
import threading

host, port = sys.argv[1].rsplit(":", 1)
address, count = sys.argv[2], int(sys.argv[3])
threads = int(sys.argv[4]) if len(sys.argv) > 4 else 8


def body(n, rng):
    size = rng.randint(2560, 10240)
    head = (
        f"From: sender{n % 97}@example.org\r\nTo: {address}\r\n"
        f"Subject: big mailbox message {n}\r\nMessage-ID: <big.{n}@example.org>\r\n"
        f"Date: Sat, 21 Nov 2026 12:00:00 +0000\r\n\r\n"
    )
    line = "the quick brown fox jumps over the lazy dog 0123456789 abcdefghij\r\n"
    # Whole lines only: a cut inside "\r\n" would be a bare CR, which the server refuses.
    text = line * max(0, (size - len(head)) // len(line))
    return (head + text).encode()


def worker(k):
    rng = random.Random(k)
    with smtplib.SMTP(host, int(port), timeout=60) as s:
        for n in range(k, count, threads):
            s.sendmail("sender@example.org", [address], body(n, rng))


ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(f"sent {count}")
