#!/usr/bin/env python3
"""The smoke mode's check (bench/lib.sh smoke_check): every named mailstow figure of a
benchmark log is there and above zero.

  nonzero.py LOG SPEC...

SPEC is "FILTER... : FIELD...". A FILTER is a RESULT line's name (its first word, when that
has no '=') or key=value; a line matches when every filter holds. Each SPEC must match at
least one RESULT line, and on every line it matches each FIELD must be a number above zero
(a field may name several values: "1.5,2.0" or "12/3" each count). Exit 1 with the offending
lines otherwise.
"""
import re
import sys


def fields(line):
    words = line.split()[1:]
    name = words[0] if words and "=" not in words[0] else None
    kv = dict(w.split("=", 1) for w in words if "=" in w)
    return name, kv


def positive(value):
    parts = [p for p in re.split(r"[,/]", value.strip("'\"")) if p]
    try:
        return bool(parts) and all(float(p) > 0 for p in parts)
    except ValueError:
        return False


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    lines = [l for l in open(sys.argv[1], errors="replace") if l.startswith("RESULT ")]
    bad, failed = [], set()
    for spec in sys.argv[2:]:
        filters, _, wanted = spec.partition(":")
        filters, wanted = filters.split(), wanted.split()
        matched = 0
        for line in lines:
            name, kv = fields(line)
            if not all((f.split("=", 1)[1] == kv.get(f.split("=", 1)[0])) if "=" in f else f == name
                       for f in filters):
                continue
            matched += 1
            for w in wanted:
                if not positive(kv.get(w, "")):
                    bad.append(f"{spec}: {w}={kv.get(w, '(missing)')} in {line.strip()}")
                    failed.add(spec)
        if not matched:
            bad.append(f"{spec}: no RESULT line")
            failed.add(spec)
    for b in bad:
        print(f"ZERO: {b}", file=sys.stderr)
    checked = len(sys.argv) - 2
    print(f"smoke check: {checked - len(failed)} of {checked} result kinds non-zero", file=sys.stderr)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
