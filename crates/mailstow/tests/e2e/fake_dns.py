#!/usr/bin/env python3
"""A tiny authoritative DNS server on loopback (UDP) for the direct-delivery test.

Usage: fake_dns.py PORTFILE ZONE...   ZONE = "name MX host" | "name A ip" | "name NULLMX"
Binds 127.0.0.1 on a free port, writes the port to PORTFILE, answers A, AAAA and MX queries
from the zone lines (NXDOMAIN for unknown names, an empty answer for a known name and another
type) until killed.
"""
import socket
import struct
import sys

records = {}  # (name, type) -> [rdata bytes]
names = set()


def encode_name(name):
    out = b""
    for label in name.strip(".").split("."):
        if label:
            out += bytes([len(label)]) + label.encode()
    return out + b"\0"


for zone in sys.argv[2:]:
    parts = zone.split()
    name = parts[0].lower().strip(".")
    names.add(name)
    if parts[1] == "MX":
        records.setdefault((name, 15), []).append(struct.pack("!H", 10) + encode_name(parts[2]))
    elif parts[1] == "NULLMX":
        records.setdefault((name, 15), []).append(struct.pack("!H", 0) + b"\0")
    elif parts[1] == "A":
        records.setdefault((name, 1), []).append(socket.inet_aton(parts[2]))

sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.bind(("127.0.0.1", 0))
with open(sys.argv[1], "w") as f:
    f.write(str(sock.getsockname()[1]))

while True:
    data, peer = sock.recvfrom(4096)
    if len(data) < 12:
        continue
    qid, flags = struct.unpack("!HH", data[:4])
    pos, labels = 12, []
    while pos < len(data) and data[pos] != 0:
        n = data[pos]
        labels.append(data[pos + 1 : pos + 1 + n].decode(errors="replace"))
        pos += 1 + n
    qname_end = pos + 1
    qtype, qclass = struct.unpack("!HH", data[qname_end : qname_end + 4])
    question = data[12 : qname_end + 4]
    name = ".".join(labels).lower()
    answers = records.get((name, qtype), [])
    rcode = 0 if name in names else 3  # NXDOMAIN
    header = struct.pack("!HHHHHH", qid, 0x8400 | (flags & 0x0100) | rcode, 1, len(answers), 0, 0)
    body = b""
    for rdata in answers:
        body += b"\xc0\x0c" + struct.pack("!HHIH", qtype, 1, 60, len(rdata)) + rdata
    sock.sendto(header + question + body, peer)
