#!/usr/bin/env python3
"""Server memory per IMAP connection in IDLE, and the helpers that fill the mailboxes for it.

  imap-idle-memory.py fill-maildirs --users-file FILE --users U --count K
        write K messages (imap-bench.py's generator) into Maildir/cur of each of the first U
        users of Dovecot's passwd-file FILE (user0001@example.com ...), like gen-maildir.
  imap-idle-memory.py fill-lmtp HOST:PORT --users U --count K [--threads 8]
        deliver the same K messages to each of user0001..U over LMTP (mailstow).
  imap-idle-memory.py run --port P --peer NAME (--server-pid PID | --dovecot-master PID)
                          [--n 10000] [--users 1000] [--src-addrs 50] [...]
        open N connections (asyncio, CONCURRENCY handshakes at a time), connection i from
        127.0.0.(2 + i % SRC_ADDRS) as user ((i % USERS) + 1), each: greeting, LOGIN (plain
        text), SELECT INBOX, IDLE, until "+ idling". The server's memory is read before (after a
        warm-up of 8 concurrent logins that were logged out again) and after all N are idling,
        each time once it has settled (two samples 10 s apart within 1 %; for Dovecot with
        hibernation also no more than --imap-procs-ok imap processes left, as the idle ones
        are ended by its idle_kill; at most --settle-max s). mailstow: VmRSS and Pss (/proc/PID/smaps_rollup) of its one process; Dovecot: the
        sum over its master and every process below it (imap, imap-login, imap-hibernate,
        anvil, auth, log, config, stats, ...), Rss and Pss. Per connection = (after - before) / N.
        Then checks every connection is still open (no EOF from the server), closes them all.
        One line on stdout:
        RESULT peer=NAME test=idle n=N alive=A before_rss=B before_pss=B after_rss=B
               after_pss=B per_conn_rss=B per_conn_pss=B open_s=S settle_s=S
        and the per-process-name breakdown on stderr.
Kernel memory (socket buffers, inotify instances) is in neither figure: it is the kernel's.
"""
import argparse
import asyncio
import importlib.util
import os
import random
import resource
import socket
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def bench_module():
    spec = importlib.util.spec_from_file_location("imap_bench", os.path.join(HERE, "imap-bench.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- fill
def cmd_fill_maildirs(a):
    ib = bench_module()
    homes = {}
    with open(a.users_file) as f:
        for line in f:
            p = line.rstrip("\n").split(":")
            if len(p) >= 6:
                homes[p[0]] = p[5]
    total = 0
    gen = ib.Gen("", a.seed)  # one generator (its line pool is costly); user k gets messages
    for k in range(1, a.users + 1):  # (k - 1) * count + 1 ... k * count
        user = a.user_fmt % k
        home = homes[user]
        gen.rcpt = user
        cur = os.path.join(home, "Maildir", "cur")
        for d in ("cur", "new", "tmp"):
            os.makedirs(os.path.join(home, "Maildir", d), exist_ok=True)
        for i in range((k - 1) * a.count + 1, k * a.count + 1):
            t, m = gen.message(i)
            vsize = len(m) + m.count(b"\n")
            name = f"{t}.M{i}P{k}.bench,S={len(m)},W={vsize}:2,"
            p = os.path.join(cur, name)
            with open(p, "wb") as fh:
                fh.write(m)
            os.utime(p, (t, t))
            total += len(m)
    log(f"fill-maildirs: {a.users} users x {a.count} messages, {total} bytes")


def cmd_fill_lmtp(a):
    import smtplib
    ib = bench_module()
    host, port = a.target.rsplit(":", 1)
    errors, total = [], [0]
    pool = ib.Gen("", a.seed).pool

    def worker(w):
        try:
            s = smtplib.LMTP(host, int(port), timeout=120)
            gen = ib.Gen.__new__(ib.Gen)  # the same messages as fill-maildirs, one pool
            gen.seed, gen.lo, gen.hi, gen.pool = a.seed, 2560, 10240, pool
            for k in range(w + 1, a.users + 1, a.threads):
                user = a.user_fmt % k
                gen.rcpt = user
                for i in range((k - 1) * a.count + 1, k * a.count + 1):
                    _, m = gen.message(i)
                    m = ib.crlf(m)
                    s.sendmail("sender@example.org", [user], m)
                    total[0] += len(m)
            s.quit()
        except Exception as e:  # noqa: BLE001
            errors.append(f"thread {w}: {e!r}")

    t0 = time.perf_counter()
    ts = [threading.Thread(target=worker, args=(w,)) for w in range(a.threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for e in errors:
        log("fill error:", e)
    log(f"fill-lmtp: {a.users} users x {a.count} messages, {total[0]} bytes, "
        f"{time.perf_counter() - t0:.1f} s")
    sys.exit(1 if errors else 0)


# ---------------------------------------------------------------- memory of a process tree
def procs():
    """pid -> (ppid, comm) for every process."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                s = f.read()
        except OSError:
            continue
        r = s.rindex(b")")
        comm = s[s.index(b"(") + 1:r].decode(errors="replace")
        out[int(d)] = (int(s[r + 2:].split()[1]), comm)
    return out


def tree(root):
    ps = procs()
    kids = {}
    for pid, (pp, _) in ps.items():
        kids.setdefault(pp, []).append(pid)
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        if p in ps:
            out.append((p, ps[p][1]))
            todo.extend(kids.get(p, []))
    return out


def rollup(pid):
    """(Rss, Pss) in bytes from /proc/PID/smaps_rollup, or None if the process is gone."""
    rss = pss = None
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1]) * 1024
    except OSError:
        return None
    return (rss, pss) if rss is not None and pss is not None else None


def measure(a):
    """{'rss': B, 'pss': B, 'procs': n, 'by': {comm: [n, rss, pss]}} of the server."""
    pids = [(a.server_pid, "mailstow")] if a.server_pid else tree(a.dovecot_master)
    tot = {"rss": 0, "pss": 0, "procs": 0, "by": {}}
    for pid, comm in pids:
        r = rollup(pid)
        if r is None:
            continue
        tot["rss"] += r[0]
        tot["pss"] += r[1]
        tot["procs"] += 1
        b = tot["by"].setdefault(comm, [0, 0, 0])
        b[0] += 1
        b[1] += r[0]
        b[2] += r[1]
        if comm == "imap":  # verbose_proctitle: "imap [user addr IDLE]" while it holds a session
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"@" in f.read():
                        tot["imap_sessions"] = tot.get("imap_sessions", 0) + 1
            except OSError:
                pass
    if a.server_pid:  # the one process's VmRSS, as `ps` shows it
        with open(f"/proc/{a.server_pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    tot["vmrss"] = int(line.split()[1]) * 1024
    return tot


def fmt_by(m):
    return ", ".join(f"{c} x{n} rss {r / 2**20:.1f} MiB pss {p / 2**20:.1f} MiB"
                     for c, (n, r, p) in sorted(m["by"].items(), key=lambda kv: -kv[1][2]))


# ---------------------------------------------------------------- the client
class Failed(Exception):
    pass


async def read_until(reader, pred, what):
    while True:
        line = await reader.readline()
        if not line:
            raise Failed(f"closed by server during {what}")
        if pred(line):
            return line


async def open_idle(a, i, stats):
    k = i % a.users + 1
    user, pw = a.user_fmt % k, a.pass_fmt % k
    src = f"127.0.0.{a.src_first + i % a.src_addrs}"
    last = None
    for attempt in range(a.retries):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        writer = None
        try:
            sock.setsockopt(socket.SOL_IP, 24, 1)  # IP_BIND_ADDRESS_NO_PORT: port chosen at connect
            sock.bind((src, 0))
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, (a.host, a.port))
            reader, writer = await asyncio.open_connection(sock=sock, limit=1 << 16)
            g = await reader.readline()
            if not g.startswith(b"* OK"):
                raise Failed(f"greeting {g[:80]!r}")
            writer.write(f'a LOGIN "{user}" "{pw}"\r\n'.encode())
            t = await read_until(reader, lambda x: x.startswith(b"a "), "LOGIN")
            if not t.startswith(b"a OK"):
                raise Failed(f"LOGIN {t[:120]!r}")
            writer.write(b"b SELECT INBOX\r\n")
            t = await read_until(reader, lambda x: x.startswith(b"b "), "SELECT")
            if not t.startswith(b"b OK"):
                raise Failed(f"SELECT {t[:120]!r}")
            writer.write(b"c IDLE\r\n")
            t = await read_until(reader, lambda x: x.startswith(b"+") or x.startswith(b"c "), "IDLE")
            if not t.startswith(b"+"):
                raise Failed(f"IDLE {t[:120]!r}")
            return reader, writer
        except (Failed, OSError, asyncio.IncompleteReadError) as e:
            last = e
            stats["retries"] += 1
            if writer is not None:  # the transport owns the socket: let it close it
                writer.transport.abort()
                await asyncio.sleep(0.01)
            else:
                sock.close()
            await asyncio.sleep(0.2 * (attempt + 1) + random.random() * 0.2)
    raise Failed(f"connection {i} ({user} from {src}): {last}")


async def watch(reader, i, state):
    """Reads what the server sends while idling; records EOF (the server closed it)."""
    try:
        while True:
            d = await reader.read(4096)
            if not d:
                state["eof"].add(i)
                return
            state["bytes"] += len(d)
    except (OSError, asyncio.CancelledError):
        return


async def warmup(a):
    """8 concurrent logins (users 1..8) with SELECT, then LOGOUT: the server's lazily created
    pieces (password verifier threads, login processes) exist before the 'before' figure."""
    class W:
        pass
    w = W()
    w.__dict__.update(vars(a))
    w.users, w.src_addrs, w.retries = min(8, a.users), 1, 3

    async def one(i):
        r, wr = await open_idle(w, i, {"retries": 0})
        wr.write(b"DONE\r\nd LOGOUT\r\n")
        await read_until(r, lambda x: x.startswith(b"d "), "LOGOUT")
        wr.close()
        await wr.wait_closed()
    await asyncio.gather(*(one(i) for i in range(w.users)))


async def settle(a, what):
    """Samples every settle_step s until two are within 1 % (and, for hibernating Dovecot, at
    most imap_procs_ok imap processes are left), at most settle_max s: (measure, seconds)."""
    t1 = time.perf_counter()
    prev = measure(a)
    while True:
        await asyncio.sleep(a.settle_step)
        cur = measure(a)
        imap_procs = cur["by"].get("imap", [0])[0]
        stable = abs(cur["pss"] - prev["pss"]) <= 0.01 * max(cur["pss"], 1)
        ok = a.server_pid or a.imap_procs_ok < 0 or imap_procs <= a.imap_procs_ok
        log(f"  settle {what} {time.perf_counter() - t1:.0f} s: pss {cur['pss'] / 2**20:.1f} MiB, "
            f"rss {cur['rss'] / 2**20:.1f} MiB, {cur['procs']} processes ({imap_procs} imap, "
            f"{cur.get('imap_sessions', 0)} of them holding a session)")
        if (stable and ok) or time.perf_counter() - t1 > a.settle_max:
            if not (stable and ok):
                log(f"WARN: {a.peer}: {what}: not settled after {a.settle_max} s; measured as it is")
            return measure(a), time.perf_counter() - t1
        prev = cur


async def run(a):
    await warmup(a)
    await asyncio.sleep(a.before_wait)
    before, before_s = await settle(a, "before")
    log(f"{a.peer}: before: {before['procs']} processes, rss {before['rss'] / 2**20:.1f} MiB, "
        f"pss {before['pss'] / 2**20:.1f} MiB: {fmt_by(before)}")
    stats = {"retries": 0}
    sem = asyncio.Semaphore(a.concurrency)
    conns, errors = {}, []
    done = [0]

    async def one(i):
        async with sem:
            try:
                conns[i] = await open_idle(a, i, stats)
            except Failed as e:
                errors.append(str(e))
            done[0] += 1
            if done[0] % 1000 == 0:
                log(f"  {done[0]} of {a.n} opened ({len(errors)} failed), {time.perf_counter() - t0:.1f} s")

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(a.n)))
    open_s = time.perf_counter() - t0
    log(f"{a.peer}: {len(conns)} of {a.n} connections idling after {open_s:.1f} s "
        f"({stats['retries']} retries, {len(errors)} failed{': first ' + errors[0] if errors else ''})")
    state = {"eof": set(), "bytes": 0}
    watchers = [asyncio.ensure_future(watch(r, i, state)) for i, (r, _) in conns.items()]
    after, settle_s = await settle(a, "after")
    await asyncio.sleep(0.5)
    alive = len(conns) - len(state["eof"])
    log(f"{a.peer}: after: {after['procs']} processes, rss {after['rss'] / 2**20:.1f} MiB, "
        f"pss {after['pss'] / 2**20:.1f} MiB: {fmt_by(after)}")
    log(f"{a.peer}: {alive} of {len(conns)} connections still open at the end "
        f"({state['bytes']} bytes received while idling)")
    n = max(alive, 1)
    extra = ""
    if a.server_pid:
        extra = f" before_vmrss={before['vmrss']} after_vmrss={after['vmrss']}"
    print(f"RESULT peer={a.peer} test=idle n={a.n} alive={alive} before_rss={before['rss']} "
          f"before_pss={before['pss']} after_rss={after['rss']} after_pss={after['pss']} "
          f"per_conn_rss={(after['rss'] - before['rss']) / n:.0f} "
          f"per_conn_pss={(after['pss'] - before['pss']) / n:.0f} "
          f"open_s={open_s:.1f} before_settle_s={before_s:.0f} settle_s={settle_s:.0f} procs_after={after['procs']} "
          f"imap_sessions_after={after.get('imap_sessions', 0)}{extra}",
          flush=True)
    for w in watchers:
        w.cancel()
    for _, wr in conns.values():
        wr.transport.abort()
    await asyncio.sleep(0.5)
    return 0 if alive == a.n else 1


def cmd_run(a):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < a.n + 200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, a.n + 1000), hard))
    sys.exit(asyncio.run(run(a)))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sp = p.add_subparsers(dest="cmd", required=True)
    for name in ("fill-maildirs", "fill-lmtp"):
        f = sp.add_parser(name)
        if name == "fill-lmtp":
            f.add_argument("target")
            f.add_argument("--threads", type=int, default=8)
        else:
            f.add_argument("--users-file", required=True)
        f.add_argument("--users", type=int, default=1000)
        f.add_argument("--count", type=int, default=10)
        f.add_argument("--user-fmt", default="user%04d@example.com")
        f.add_argument("--seed", type=int, default=20261126)
    r = sp.add_parser("run")
    r.add_argument("--host", default="127.0.0.1")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--peer", required=True)
    g = r.add_mutually_exclusive_group(required=True)
    g.add_argument("--server-pid", type=int, help="mailstow: its one process")
    g.add_argument("--dovecot-master", type=int, help="Dovecot: its master; all below count")
    r.add_argument("--n", type=int, default=10000)
    r.add_argument("--users", type=int, default=1000)
    r.add_argument("--user-fmt", default="user%04d@example.com")
    r.add_argument("--pass-fmt", default="pw%04d")
    r.add_argument("--src-addrs", type=int, default=50, help="client addresses 127.0.0.2...")
    r.add_argument("--src-first", type=int, default=2)
    r.add_argument("--concurrency", type=int, default=64, help="handshakes in flight")
    r.add_argument("--retries", type=int, default=20)
    r.add_argument("--before-wait", type=float, default=3.0)
    r.add_argument("--settle-step", type=float, default=10.0)
    r.add_argument("--settle-max", type=float, default=180.0)
    r.add_argument("--imap-procs-ok", type=int, default=-1,
                   help="Dovecot with hibernation: settled once at most this many imap processes remain")
    a = p.parse_args()
    {"fill-maildirs": cmd_fill_maildirs, "fill-lmtp": cmd_fill_lmtp, "run": cmd_run}[a.cmd](a)


if __name__ == "__main__":
    main()
