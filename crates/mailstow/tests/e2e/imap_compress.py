#!/usr/bin/env python3
"""IMAP COMPRESS=DEFLATE (RFC 4978) against a running mailstow, with Python's zlib as the
client side: the same FETCH of every message plain and compressed must give the same bytes,
with fewer of them on the wire.

usage: imap_compress.py IMAPS_ADDR USER PASSWORD
Prints `compress: plain=N wire=M` and `imap-compress: OK`; any failure raises.
"""
import socket
import ssl
import sys
import zlib

addr, user, password = sys.argv[1:4]
host, port = addr.rsplit(":", 1)


def connect():
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    s = ctx.wrap_socket(socket.create_connection((host, int(port)), timeout=30))
    return s


class Plain:
    def __init__(self):
        self.s = connect()
        self.buf = b""
        self.wire = 0
        self.line()  # greeting

    def recv(self):
        data = self.s.recv(65536)
        assert data, "connection closed"
        self.wire += len(data)
        return data

    def line(self):
        while b"\r\n" not in self.buf:
            self.buf += self.recv()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line + b"\r\n"

    def send(self, data):
        self.s.sendall(data)

    def cmd(self, tag, text):
        """The whole answer up to the tagged line (literals included)."""
        self.send(f"{tag} {text}\r\n".encode())
        out = b""
        while True:
            line = self.line()
            out += line
            # A literal: read its bytes whole.
            if line.endswith(b"}\r\n") and b"{" in line:
                n = int(line[line.rindex(b"{") + 1:-3])
                while len(self.buf) < n:
                    self.buf += self.recv()
                out += self.buf[:n]
                self.buf = self.buf[n:]
                continue
            if line.startswith(tag.encode() + b" "):
                assert line.split()[1] == b"OK", out[-300:]
                return out


class Deflated(Plain):
    """The same, after COMPRESS DEFLATE (`start`): raw DEFLATE (wbits -15) both ways."""

    inflate = None

    def start(self):
        self.inflate = zlib.decompressobj(-15)
        self.deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
        assert not self.buf, "the server sent something after its OK"

    def recv(self):
        data = super().recv()
        return self.inflate.decompress(data) if self.inflate else data

    def send(self, data):
        if self.inflate:
            data = self.deflate.compress(data) + self.deflate.flush(zlib.Z_SYNC_FLUSH)
        self.s.sendall(data)


body = "".join(f"line {i}: the quarterly figures look much like last quarter's.\r\n" for i in range(80))
p = Plain()
p.cmd("a", f"LOGIN {user} {password}")
for i in range(20):
    m = f"From: a@example.test\r\nTo: {user}\r\nSubject: figures {i}\r\n\r\n{body}".encode()
    p.send(f"b{i} APPEND INBOX {{{len(m)}+}}\r\n".encode() + m + b"\r\n")
    while not p.line().startswith(f"b{i} OK".encode()):
        pass
p.cmd("c", "SELECT INBOX")
before = p.wire
plain_answer = p.cmd("f", "FETCH 1:* BODY.PEEK[]")
plain_bytes = p.wire - before
p.cmd("z", "LOGOUT")

d = Deflated()
d.cmd("a", f"LOGIN {user} {password}")
assert b"COMPRESS=DEFLATE" in d.cmd("k", "CAPABILITY")
assert d.cmd("x", "COMPRESS DEFLATE").endswith(b"x OK DEFLATE active\r\n")
d.start()
d.cmd("c", "SELECT INBOX")
before = d.wire
deflated_answer = d.cmd("f", "FETCH 1:* BODY.PEEK[]")
wire_bytes = d.wire - before
assert deflated_answer == plain_answer, "the compressed FETCH differs"
d.send(b"y COMPRESS DEFLATE\r\n")
assert d.line() == b"y NO [COMPRESSIONACTIVE] DEFLATE active already\r\n"
d.cmd("n", "NOOP")
d.send(b"z LOGOUT\r\n")
assert d.line().startswith(b"* BYE")
print(f"compress: plain={plain_bytes} wire={wire_bytes}")
assert wire_bytes * 4 < plain_bytes, "compression saved less than expected"
print("imap-compress: OK")
