#!/usr/bin/env python3
"""A tiny authoritative DNS server on loopback (UDP and TCP) for the tests.

Usage: fake_dns.py PORTFILE ZONE...
  ZONE = "name MX host" | "name A ip" | "name AAAA ip" | "name NULLMX" | "name TXT text"
  | "name SILENT"
The TXT text is the rest of the argument (spaces and semicolons included); text longer than
255 bytes is split into several character-strings of one record (RFC 1035 3.3.14), as DKIM
RSA keys are. Repeating a name and type adds records to its set. A SILENT name is never
answered, over either transport (a dead name server, for timeout tests); "* SILENT" silences
every name.

Binds 127.0.0.1 on a free port, UDP and TCP on the same number, writes the port to PORTFILE,
and answers A, AAAA, MX and TXT queries from the zone lines (NXDOMAIN for unknown names, an
empty answer for a known name and another type) until killed. A UDP answer larger than the
client's limit (512 bytes, or its EDNS0 payload size, RFC 6891 6.2.5) goes out truncated with
TC set, so the client retries over TCP (RFC 1035 4.2.1, RFC 7766). With FAKE_DNS_LOG set, each
question is appended to that file as "name TYPE-NUMBER" (to count a client's lookups).
"""
import os
import socket
import struct
import sys
import threading

log_path = os.environ.get("FAKE_DNS_LOG")
log_lock = threading.Lock()
records = {}  # (name, type) -> [rdata bytes]
names = set()
silent = set()

TYPE_A, TYPE_MX, TYPE_TXT, TYPE_AAAA, TYPE_OPT = 1, 15, 16, 28, 41


def encode_name(name):
    out = b""
    for label in name.strip(".").split("."):
        if label:
            out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def encode_txt(text):
    data = text.encode()
    chunks = [data[i : i + 255] for i in range(0, len(data), 255)] or [b""]
    return b"".join(bytes([len(chunk)]) + chunk for chunk in chunks)


for zone in sys.argv[2:]:
    parts = zone.split()
    name = parts[0].lower().strip(".")
    if parts[1] == "SILENT":
        silent.add(name)
        continue
    names.add(name)
    if parts[1] == "MX":
        records.setdefault((name, TYPE_MX), []).append(struct.pack("!H", 10) + encode_name(parts[2]))
    elif parts[1] == "NULLMX":
        records.setdefault((name, TYPE_MX), []).append(struct.pack("!H", 0) + b"\0")
    elif parts[1] == "A":
        records.setdefault((name, TYPE_A), []).append(socket.inet_aton(parts[2]))
    elif parts[1] == "AAAA":
        records.setdefault((name, TYPE_AAAA), []).append(socket.inet_pton(socket.AF_INET6, parts[2]))
    elif parts[1] == "TXT":
        text = zone.split(None, 2)[2] if len(parts) > 2 else ""
        records.setdefault((name, TYPE_TXT), []).append(encode_txt(text))


def answer(data, udp):
    """The response to one query message, or None to stay silent."""
    if len(data) < 12:
        return None
    qid, flags, qdcount, _, _, arcount = struct.unpack("!HHHHHH", data[:12])
    pos, labels = 12, []
    while pos < len(data) and data[pos] != 0:
        n = data[pos]
        labels.append(data[pos + 1 : pos + 1 + n].decode(errors="replace"))
        pos += 1 + n
    qname_end = pos + 1
    if qname_end + 4 > len(data):
        return None
    qtype, qclass = struct.unpack("!HH", data[qname_end : qname_end + 4])
    question = data[12 : qname_end + 4]
    name = ".".join(labels).lower()
    if log_path:
        with log_lock, open(log_path, "a") as log:
            log.write(f"{name} {qtype}\n")
    if name in silent or "*" in silent:
        return None
    # The client's UDP payload limit: its EDNS0 OPT record, if it sent one (RFC 6891 6.1.2).
    limit = 512
    rest = data[qname_end + 4 :]
    if arcount and len(rest) >= 11 and rest[0] == 0:
        opt_type, payload = struct.unpack("!HH", rest[1:5])
        if opt_type == TYPE_OPT:
            limit = max(512, payload)
    answers = records.get((name, qtype), [])
    rcode = 0 if name in names else 3  # NXDOMAIN
    body = b""
    for rdata in answers:
        body += b"\xc0\x0c" + struct.pack("!HHIH", qtype, 1, 60, len(rdata)) + rdata
    header = struct.pack("!HHHHHH", qid, 0x8400 | (flags & 0x0100) | rcode, 1, len(answers), 0, 0)
    if udp and len(header) + len(question) + len(body) > limit:
        header = struct.pack("!HHHHHH", qid, 0x8600 | (flags & 0x0100) | rcode, 1, 0, 0, 0)
        return header + question
    return header + question + body


def serve_tcp_connection(conn):
    # RFC 1035 4.2.2: each message is preceded by its two-byte length.
    with conn:
        buffer = b""
        while True:
            data = conn.recv(65536)
            if not data:
                return
            buffer += data
            while len(buffer) >= 2:
                length = struct.unpack("!H", buffer[:2])[0]
                if len(buffer) < 2 + length:
                    break
                response = answer(buffer[2 : 2 + length], udp=False)
                buffer = buffer[2 + length :]
                if response is not None:
                    conn.sendall(struct.pack("!H", len(response)) + response)


def serve_tcp(listener):
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve_tcp_connection, args=(conn,), daemon=True).start()


# One port number for both transports: take a free UDP port, then the same TCP port (retry
# with another UDP port if that TCP port is taken).
while True:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        listener.close()
        continue
    listener.listen(16)
    break
threading.Thread(target=serve_tcp, args=(listener,), daemon=True).start()

with open(sys.argv[1], "w") as f:
    f.write(str(port))

while True:
    data, peer = sock.recvfrom(4096)
    response = answer(data, udp=True)
    if response is not None:
        sock.sendto(response, peer)
