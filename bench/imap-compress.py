#!/usr/bin/env python3
"""COMPRESS=DEFLATE (RFC 4978) against plain: `UID FETCH 1:* BODY.PEEK[]` of a whole folder.

  imap-compress.py --port P --user U --password PW --peer NAME
                   (--server-pid PID | --dovecot-master PID) [--runs 5] [--messages N]

Each measurement is a fresh connection: LOGIN, (COMPRESS DEFLATE,) SELECT INBOX, then the timed
part: `UID FETCH 1:* BODY.PEEK[]` from sending it to its tagged OK. One warm-up plain fetch
first (not counted: the page cache holds the folder for both modes). Then RUNS pairs, plain and
compressed alternating. Per measurement:
  wire_bytes    bytes read from the socket (compressed bytes when compressed)
  data_bytes    the IMAP response bytes (after inflating)
  server_cpu_ms utime+stime (/proc/PID/stat) of the server over the timed part: mailstow's one
                process; Dovecot: every process below its master (the session's imap process
                does the work; processes started during the interval count whole)
  client_cpu_ms this client's CPU (time.process_time: recv, and inflate when compressed)
  wall_ms       send to tagged OK
RESULT lines (medians over RUNS, with min and max):
  RESULT peer=NAME mode=plain|deflate metric=M median=X min=X max=X runs=R
The client sends with a raw DEFLATE stream (wbits -15) flushed with Z_SYNC_FLUSH per command,
as RFC 4978 asks. Both servers compress at DEFLATE level 6 (their default).
"""
import argparse
import os
import re
import socket
import statistics
import sys
import time
import zlib

TICK = os.sysconf("SC_CLK_TCK")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def ticks_tree(a):
    """pid -> utime+stime ticks of the server's processes."""
    if a.server_pid:
        pids = [a.server_pid]
    else:
        ps = {}
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat", "rb") as f:
                        s = f.read()
                    ps[int(d)] = int(s[s.rindex(b")") + 2:].split()[1])
                except OSError:
                    pass
        kids = {}
        for p, pp in ps.items():
            kids.setdefault(pp, []).append(p)
        pids, todo = [], [a.dovecot_master]
        while todo:
            p = todo.pop()
            pids.append(p)
            todo.extend(kids.get(p, []))
    out = {}
    for p in pids:
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                s = f.read()
        except OSError:
            continue
        f = s[s.rindex(b")") + 2:].split()
        out[p] = int(f[11]) + int(f[12])  # utime, stime (fields 14, 15)
    return out


def cpu_delta(b, e):
    return sum(t - b.get(p, 0) for p, t in e.items()) * 1000.0 / TICK


class Session:
    def __init__(self, a, compress):
        self.sock = socket.create_connection((a.host, a.port), timeout=300)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        self.z_out = self.z_in = None
        self.buf = b""
        self.n = 0
        self.line()  # greeting
        self.cmd(f'LOGIN "{a.user}" "{a.password}"')
        if compress:
            self.cmd("COMPRESS DEFLATE")
            self.z_out = zlib.compressobj(6, zlib.DEFLATED, -15)
            self.z_in = zlib.decompressobj(-15)
            if self.buf:
                self.buf = self.z_in.decompress(self.buf)
        data, _ = self.cmd("SELECT INBOX")
        m = re.search(rb"\* (\d+) EXISTS", data)
        self.exists = int(m.group(1)) if m else -1

    def send(self, data):
        if self.z_out:
            data = self.z_out.compress(data) + self.z_out.flush(zlib.Z_SYNC_FLUSH)
        self.sock.sendall(data)

    def recv(self):
        d = self.sock.recv(1 << 20)
        if not d:
            raise RuntimeError("closed by server")
        return d

    def line(self):
        while b"\r\n" not in self.buf:
            d = self.recv()
            self.buf += self.z_in.decompress(d) if self.z_in else d
        i = self.buf.index(b"\r\n")
        ln, self.buf = self.buf[:i], self.buf[i + 2:]
        return ln

    def cmd(self, c):
        self.n += 1
        tag = b"C%d" % self.n
        self.send(tag + b" " + c.encode() + b"\r\n")
        out = []
        while True:
            ln = self.line()
            if ln.startswith(tag + b" "):
                if not ln.startswith(tag + b" OK"):
                    raise RuntimeError(f"{c} -> {ln[:200]!r}")
                return b"\r\n".join(out), ln
            out.append(ln)

    def fetch_all(self):
        """The timed FETCH: the response is counted, not kept. The tagged line is searched in
        the last bytes of the (inflated) stream; the tag (Znnn) appears in no message."""
        self.n += 1
        tag = b"\r\nZ%d OK" % self.n
        self.send(b"Z%d UID FETCH 1:* BODY.PEEK[]\r\n" % self.n)
        wire = data = 0
        tail = b"\r\n"
        recv, z = self.sock.recv, self.z_in
        while True:
            d = recv(1 << 20)
            if not d:
                raise RuntimeError("closed by server")
            wire += len(d)
            if z:
                d = z.decompress(d)
            data += len(d)
            tail = (tail + d)[-256:]
            if tag in tail and tail.endswith(b"\r\n"):
                return wire, data, tail

    def close(self):
        try:
            self.send(b"L LOGOUT\r\n")
        except OSError:
            pass
        self.sock.close()


def measure(a, compress):
    s = Session(a, compress)
    c0, w0 = time.process_time(), time.perf_counter()
    t0 = ticks_tree(a)
    wire, data, _ = s.fetch_all()
    t1 = ticks_tree(a)
    w1, c1 = time.perf_counter(), time.process_time()
    s.close()
    return {"wire_bytes": wire, "data_bytes": data, "server_cpu_ms": cpu_delta(t0, t1),
            "client_cpu_ms": (c1 - c0) * 1000, "wall_ms": (w1 - w0) * 1000, "exists": s.exists}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--peer", required=True)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--server-pid", type=int)
    g.add_argument("--dovecot-master", type=int)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--messages", type=int, help="expected EXISTS (a warning when different)")
    a = p.parse_args()
    w = measure(a, False)
    log(f"{a.peer}: warm-up plain fetch: {w['exists']} messages, {w['data_bytes']} bytes, "
        f"{w['wall_ms']:.0f} ms")
    if a.messages and w["exists"] != a.messages:
        log(f"WARN: INBOX has {w['exists']} messages, expected {a.messages}")
    res = {"plain": [], "deflate": []}
    for r in range(a.runs):
        for mode in ("plain", "deflate") if r % 2 == 0 else ("deflate", "plain"):
            m = measure(a, mode == "deflate")
            res[mode].append(m)
            log(f"{a.peer} run {r} {mode}: wire {m['wire_bytes']} data {m['data_bytes']} "
                f"server cpu {m['server_cpu_ms']:.0f} ms client cpu {m['client_cpu_ms']:.0f} ms "
                f"wall {m['wall_ms']:.0f} ms")
    ok = True
    for mode, ms in res.items():
        for k in ("wire_bytes", "data_bytes", "server_cpu_ms", "client_cpu_ms", "wall_ms"):
            xs = [m[k] for m in ms]
            print(f"RESULT peer={a.peer} mode={mode} metric={k} median={statistics.median(xs):.1f} "
                  f"min={min(xs):.1f} max={max(xs):.1f} runs={len(xs)}", flush=True)
    pd = {m["data_bytes"] for m in res["plain"]}
    dd = {m["data_bytes"] for m in res["deflate"]}
    if pd != dd:
        log(f"WARN: {a.peer}: response sizes differ between plain {sorted(pd)} and deflate {sorted(dd)}")
        ok = False
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
