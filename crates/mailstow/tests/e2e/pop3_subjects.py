#!/usr/bin/env python3
"""Prints the Subject of every message in a maildrop, one per line (POP3S, TOP n 0).

Usage: pop3_subjects.py HOST:PORT USER PASSWORD
"""
import poplib
import ssl
import sys

context = ssl.create_default_context()
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE
host, port = sys.argv[1].rsplit(":", 1)
p = poplib.POP3_SSL(host, int(port), context=context, timeout=30)
p.user(sys.argv[2])
p.pass_(sys.argv[3])
count, _ = p.stat()
for n in range(1, count + 1):
    _, lines, _ = p.top(n, 0)
    for line in lines:
        if line.lower().startswith(b"subject: "):
            print(line[9:].decode())
            break
p.quit()
