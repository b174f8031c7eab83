#!/usr/bin/env python3
"""An independent DKIM verifier for sender-auth's tests: dkimpy.

Usage: dkimpy_verify.py NAME RECORD < message
NAME is where the key record lives (s1._domainkey.example.org), RECORD its TXT text.
Exits 0 when every DKIM-Signature of the message verifies, 1 when one does not, 2 when
dkimpy (or PyNaCl, which dkimpy needs for ed25519) is missing, and 3 on anything else.
"""
import logging
import sys
import traceback

try:
    import dkim
    import nacl.signing  # noqa: F401  (dkimpy's ed25519 backend)
except ImportError as err:
    print(f"missing {err.name}: pip install 'dkimpy[ed25519]'", file=sys.stderr)
    sys.exit(2)

name, record = sys.argv[1].lower().rstrip("."), sys.argv[2].encode()


def dnsfunc(query, timeout=5):
    query = query.decode() if isinstance(query, bytes) else query
    return record if query.lower().rstrip(".") == name else None


logging.basicConfig(stream=sys.stderr, level=logging.DEBUG)
message = sys.stdin.buffer.read()
verifier = dkim.DKIM(message, logger=logging.getLogger("dkimpy"))
signatures = sum(1 for field, _ in verifier.headers if field.lower() == b"dkim-signature")
try:
    ok = signatures > 0 and all(verifier.verify(idx=i, dnsfunc=dnsfunc) for i in range(signatures))
except dkim.DKIMException as err:
    print(f"invalid: {err}")
    sys.exit(1)
except Exception:
    traceback.print_exc()
    sys.exit(3)
print("valid" if ok else "invalid")
sys.exit(0 if ok else 1)
