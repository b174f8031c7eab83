#!/usr/bin/env python3
"""Prints the SHA-256 fingerprint (AB:CD:...) of the certificate a TLS server presents.

usage: tls_fingerprint.py HOST PORT
"""
import hashlib
import socket
import ssl
import sys

host, port = sys.argv[1], int(sys.argv[2])
context = ssl.create_default_context()
# A self-signed or test certificate: we want to see it, not trust it.
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE
with socket.create_connection((host, port), timeout=10) as raw:
    with context.wrap_socket(raw, server_hostname="localhost") as tls:
        der = tls.getpeercert(binary_form=True)
print(":".join(f"{b:02X}" for b in hashlib.sha256(der).digest()))
