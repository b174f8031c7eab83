#!/usr/bin/env python3
"""The cluster's benchmarks (issue 20), driven by bench/run-cluster.sh.

A private PostgreSQL (the shared directory, as the `postgres` user in a temporary directory,
with pg_stat_statements) and 1 to 3 `mailstow serve` nodes on 127.77.0.<i>, users spread
evenly over the nodes, 8 KiB messages from an open-loop load generator (threads holding
persistent SMTP connections, each sending on a fixed schedule).

  cpu       CPU per stored message, local against remote (handed over LMTP), from
            /proc/<pid>/stat of the node processes; directory statements per message from
            pg_stat_statements (less the idle background, measured in its own window); bytes
            between the nodes per message from `ss -tin` on the LMTP connections.
  scale     1, 2 and 3 nodes, each in its own cgroup (cpu.cfs_quota_us) on CPU 1, the load
            generator and PostgreSQL on CPU 0: the seed's method, a constant rate raised until
            a backlog appears.
  failover  SIGKILL and SIGSTOP of a node: time to its users' NO [UNAVAILABLE] through the
            other nodes, and from its restart (or SIGCONT) to its queued mail delivered.

Every result is a `RESULT name key=value ...` line on stdout; everything else is commentary.
"""

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

PG_BINS = ["/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin"]
PORT_SMTP, PORT_LMTP, PORT_IMAP, PORT_POP3 = 2525, 2424, 1143, 1110
PASSWORD = "secret-pw"
MESSAGE_BYTES = 8192
USERS_PER_NODE = 8
CGROUP_ROOT = "/sys/fs/cgroup/cpu"
TICK = os.sysconf("SC_CLK_TCK")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def result(name, **kv):
    fields = " ".join(f"{k}={v}" for k, v in kv.items())
    print(f"RESULT {name} {fields}", flush=True)


def median_range(xs):
    xs = sorted(xs)
    return f"{statistics.median(xs):.4g}", f"{xs[0]:.4g}-{xs[-1]:.4g}"


def cpu_seconds(pid):
    """utime + stime of a process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def context_switches(pid):
    """Voluntary + involuntary context switches of every thread of a process so far (threads
    that exited are not counted: the server's threads live as long as it does)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


# ---------------------------------------------------------------- PostgreSQL


class Postgres:
    def __init__(self, cpus):
        self.bin = next(b for b in PG_BINS if os.path.isfile(os.path.join(b, "pg_ctl")))
        self.dir = tempfile.mkdtemp(prefix="mailstow-bench-pg")
        shutil.chown(self.dir, "postgres", "postgres")
        os.makedirs(f"{self.dir}/run")
        shutil.chown(f"{self.dir}/run", "postgres", "postgres")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.pg("initdb", "-D", f"{self.dir}/data", "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        opts = (f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.dir}/run "
                "-c fsync=off -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all")
        self.pg("pg_ctl", "start", "-w", "-D", f"{self.dir}/data", "-l", f"{self.dir}/postgres.log", "-o", opts)
        self.sql("CREATE EXTENSION pg_stat_statements")
        # The postmaster and its backends on the load generator's CPU.
        pid = int(open(f"{self.dir}/data/postmaster.pid").readline())
        subprocess.run(["taskset", "-a", "-p", "-c", cpus, str(pid)], capture_output=True)
        self.postmaster = pid

    def pg(self, prog, *args):
        subprocess.run(["runuser", "-u", "postgres", "--", f"{self.bin}/{prog}", *args],
                       cwd=self.dir, check=True, capture_output=True)

    def url(self):
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def sql(self, query):
        """Runs `query` in template1 (so our own statements are not the nodes' database's)."""
        out = subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d",
                              "template1", "-AtXq", "-c", query], check=True, capture_output=True, text=True)
        return out.stdout.strip()

    def counters(self):
        """(statements executed, transactions committed, tuples returned) in the nodes' database."""
        calls = self.sql("SELECT coalesce(sum(calls),0) FROM pg_stat_statements s JOIN pg_database d "
                         "ON d.oid = s.dbid WHERE d.datname = 'postgres'")
        xact, tup = self.sql("SELECT xact_commit, tup_returned FROM pg_stat_database "
                             "WHERE datname = 'postgres'").split("|")
        return int(calls), int(xact), int(tup)

    def top_statements(self, n=8):
        return self.sql("SELECT calls, left(regexp_replace(query, '\\s+', ' ', 'g'), 90) FROM pg_stat_statements s "
                        "JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = 'postgres' "
                        f"ORDER BY calls DESC LIMIT {n}")

    def reset_statements(self):
        self.sql("SELECT pg_stat_statements_reset()")

    def stop(self):
        try:
            self.pg("pg_ctl", "stop", "-m", "immediate", "-D", f"{self.dir}/data")
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


# ---------------------------------------------------------------- nodes


class Node:
    def __init__(self, cluster, i):
        self.name, self.ip = f"n{i}", f"127.77.0.{i}"
        self.data = f"{cluster.scratch}/{self.name}"
        self.config = f"{cluster.scratch}/{self.name}.toml"
        self.errlog = f"{cluster.scratch}/{self.name}.log"
        self.bin, self.proc, self.cgroup = cluster.bin, None, None
        with open(self.config, "w") as f:
            f.write(f'data_dir = "{self.data}"\n[directory]\nurl = "{cluster.pg.url()}"\n'
                    f'[cluster]\nnode = "{self.name}"\nsecret_file = "{cluster.secret}"\n'
                    f'[server]\nhostname = "{self.name}.example.test"\n'
                    f'smtp = "{self.ip}:{PORT_SMTP}"\nlmtp = "{self.ip}:{PORT_LMTP}"\n'
                    f'imap = "{self.ip}:{PORT_IMAP}"\npop3 = "{self.ip}:{PORT_POP3}"\n'
                    'submission = ""\nsubmissions = ""\nimaps = ""\npop3s = ""\nweb = ""\n'
                    'managesieve = ""\n'
                    'auth_without_tls = true\nsender_checks = false\n')

    def cli(self, *args):
        out = subprocess.run([self.bin, "--config", self.config, *args], capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"mailstow {args}: {out.stderr.strip()}")
        return out.stdout

    def start(self, cpus, quota_cores):
        """Starts `serve` pinned to `cpus`, in its own cgroup limited to `quota_cores` (None: none)."""
        out = open(f"{self.errlog}.out", "a")
        err = open(self.errlog, "a")
        self.proc = subprocess.Popen(["taskset", "-c", cpus, self.bin, "--config", self.config, "serve"],
                                     stdout=out, stderr=err, env={**os.environ, "RUST_LOG": "info"})
        if quota_cores:
            self.cgroup = f"{CGROUP_ROOT}/mailstow-bench-{self.name}"
            os.makedirs(self.cgroup, exist_ok=True)
            period = 10000
            open(f"{self.cgroup}/cpu.cfs_period_us", "w").write(str(period))
            open(f"{self.cgroup}/cpu.cfs_quota_us", "w").write(str(int(period * quota_cores)))
            open(f"{self.cgroup}/cgroup.procs", "w").write(str(self.proc.pid))
        deadline = time.time() + 60
        while time.time() < deadline:
            if open(f"{self.errlog}.out").read().count(" listening on ") - self.listen_seen >= 4:
                self.listen_seen += 4
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {open(self.errlog).read()[-2000:]}")
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not start")

    listen_seen = 0

    def signal(self, sig):
        os.kill(self.proc.pid, sig)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self.cgroup:
            try:
                os.rmdir(self.cgroup)
            except OSError:
                pass

    def stats(self):
        try:
            text = open(f"{self.data}/stats").read()
        except FileNotFoundError:
            return {}
        return {k: int(v) for k, v in (line.split() for line in text.splitlines() if line)}

    def cpu(self):
        return cpu_seconds(self.proc.pid)

    def throttled(self):
        """(periods throttled, of periods) of the node's cgroup so far."""
        if not self.cgroup:
            return 0, 0
        st = dict(line.split() for line in open(f"{self.cgroup}/cpu.stat"))
        return int(st.get("nr_throttled", 0)), int(st.get("nr_periods", 0))

    def users(self):
        return [f"{self.name}u{j}@example.test" for j in range(USERS_PER_NODE)]

    log_offset = 0
    log_stored = 0
    log_handed = 0
    log_partial = b""

    def read_log(self):
        """Counts, incrementally, the copies stored here (mail log `event=delivered ...
        folder=`) and among them those handed over by another node (`origin=`)."""
        with open(self.errlog, "rb") as f:
            f.seek(self.log_offset)
            data = f.read()
        self.log_offset += len(data)
        data = self.log_partial + data
        lines = data.split(b"\n")
        self.log_partial = lines.pop()
        for line in lines:
            if b"event=delivered" in line and b"folder=" in line:
                self.log_stored += 1
                if b"origin=" in line:
                    self.log_handed += 1
        return self.log_stored


class Cluster:
    def __init__(self, binary, nodes, scratch_root):
        self.bin = binary
        self.scratch = tempfile.mkdtemp(prefix="mailstow-cluster-", dir=scratch_root)
        self.secret = f"{self.scratch}/cluster.secret"
        open(self.secret, "w").write("a benchmark cluster secret, 32 bytes or more\n")
        self.pg = Postgres("0")
        self.nodes = [Node(self, i) for i in range(1, nodes + 1)]
        for n in self.nodes:
            n.cli("init")
        n1 = self.nodes[0]
        n1.cli("domain", "add", "example.test")
        for n in self.nodes:
            n1.cli("node", "add", n.name, "--lmtp", f"{n.ip}:{PORT_LMTP}", "--imap", f"{n.ip}:{PORT_IMAP}",
                   "--pop3", f"{n.ip}:{PORT_POP3}")
        for n in self.nodes:
            for u in n.users():
                n1.cli("user", "add", u, "--node", n.name, "--password", PASSWORD)

    def start(self, cpus="1", quota_cores=None):
        for n in self.nodes:
            n.start(cpus, quota_cores)
        deadline = time.time() + 20
        while time.time() < deadline:
            up = self.nodes[0].cli("node", "list").count(" up ")
            if up == len(self.nodes):
                break
            time.sleep(0.2)
        time.sleep(2.5)

    def stored(self):
        return sum(n.read_log() for n in self.nodes)

    def pending(self):
        return sum(n.stats().get("queue_pending", 0) for n in self.nodes)

    def stop(self):
        for n in self.nodes:
            n.stop()
        self.pg.stop()
        shutil.rmtree(self.scratch, ignore_errors=True)


# ---------------------------------------------------------------- load


def message(subject):
    head = (f"From: sender@example.org\r\nTo: someone@example.test\r\nSubject: {subject}\r\n"
            "Message-ID: <bench@example.org>\r\n\r\n").encode()
    line = b"x" * 76 + b"\r\n"
    body = line * ((MESSAGE_BYTES - len(head)) // len(line))
    return head + body + b"x" * (MESSAGE_BYTES - len(head) - len(body) - 2) + b"\r\n"


BODY = message("cluster bench")


class Smtp:
    def __init__(self, address):
        self.sock = socket.create_connection(address, timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.reply()
        self.sock.sendall(b"EHLO bench.example\r\n")
        self.reply()

    def reply(self):
        while True:
            while b"\r\n" not in self.buf:
                data = self.sock.recv(65536)
                if not data:
                    raise ConnectionError("closed")
                self.buf += data
            line, self.buf = self.buf.split(b"\r\n", 1)
            if line[3:4] != b"-":
                return int(line[:3])

    def send(self, rcpt):
        self.sock.sendall(b"MAIL FROM:<sender@example.org>\r\nRCPT TO:<" + rcpt.encode() + b">\r\nDATA\r\n")
        codes = (self.reply(), self.reply(), self.reply())
        if codes != (250, 250, 354):
            raise RuntimeError(f"MAIL/RCPT/DATA {codes}")
        self.sock.sendall(BODY + b".\r\n")
        return self.reply()


def constant_rate(entries, recipients, rate, seconds, conns_per_entry=6):
    """Sends `rate` messages a second for `seconds` (open loop: message k is due at k / rate),
    through `entries` in turn, to `recipients` in turn. Returns (sent, refused, last send time,
    the most any message started late)."""
    total = int(rate * seconds)
    threads = len(entries) * conns_per_entry
    counts, lateness, errors = [0] * threads, [0.0] * threads, []
    start = time.time() + 0.2

    def worker(t):
        try:
            conn = Smtp(entries[t % len(entries)])
            for k in range(t, total, threads):
                # Each connection goes through every recipient in turn from its own offset,
                # so the recipients' nodes do not follow the entry node.
                rcpt = recipients[(k // threads + t) % len(recipients)]
                due = start + k / rate
                now = time.time()
                if now < due:
                    time.sleep(due - now)
                else:
                    lateness[t] = max(lateness[t], now - due)
                if conn.send(rcpt) == 250:
                    counts[t] += 1
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(repr(e))

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        log("load errors:", errors[:3])
    return sum(counts), total - sum(counts), time.time(), max(lateness)


def wait_stored(cluster, want, within=120):
    """Polls the mail logs until `want` copies are stored; the time it happened, or None."""
    deadline = time.time() + within
    while time.time() < deadline:
        if cluster.stored() >= want:
            return time.time()
        time.sleep(0.05)
    return None


def syncs(cluster):
    """fdatasyncs so far, all nodes: the queue's and the store's (data and journal)."""
    return sum(n.stats().get(k, 0) for n in cluster.nodes
               for k in ("queue_fdatasyncs", "store_data_syncs", "store_journal_syncs"))


def syncs_by_node(cluster):
    """Per node, fdatasyncs so far: (queue, store data, store journal)."""
    return [tuple(n.stats().get(k, 0) for k in ("queue_fdatasyncs", "store_data_syncs", "store_journal_syncs"))
            for n in cluster.nodes]


def peer_traffic(cluster):
    """(LMTP bytes sent, received, connections opened) by the nodes' handovers so far, from
    their stats files (`peer_*`, written once a second)."""
    t = [0, 0, 0]
    for n in cluster.nodes:
        st = n.stats()
        for i, k in enumerate(("peer_bytes_sent", "peer_bytes_received", "peer_connections")):
            t[i] += st.get(k, 0)
    return t


# ---------------------------------------------------------------- 1. CPU per message


def perf_start(cluster, label):
    """With PERF_DIR set, samples each node with `perf record` (call graphs from DWARF) for
    the run: where a handed-over copy's CPU goes. Off by default (perf costs CPU itself)."""
    out = os.environ.get("PERF_DIR")
    if not out:
        return []
    os.makedirs(out, exist_ok=True)
    return [subprocess.Popen(["perf", "record", "-q", "-F", "400", "--call-graph", "dwarf,16384",
                              "-p", str(n.proc.pid), "-o", f"{out}/{label}-{n.name}.data"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for n in cluster.nodes]


def perf_stop(procs):
    for p in procs:
        p.send_signal(signal.SIGINT)
    for p in procs:
        p.wait()


def bench_cpu(args):
    """Two nodes, no quotas, both on CPU 1; load and PostgreSQL on CPU 0. A run sends
    `rate` msg/s for `seconds` to n1: local (n1's users) or remote (n2's users)."""
    c = Cluster(args.bin, 2, args.scratch)
    try:
        c.start(cpus="1")
        n1, n2 = c.nodes
        rate, seconds = args.cpu_rate, args.cpu_seconds
        entry = [(n1.ip, PORT_SMTP)]
        # The idle background: CPU and statements per second with no mail.
        c.pg.reset_statements()
        t0, cpu0, pg0 = time.time(), [n.cpu() for n in c.nodes], c.pg.counters()
        time.sleep(args.idle_seconds)
        t1, cpu1, pg1 = time.time(), [n.cpu() for n in c.nodes], c.pg.counters()
        idle = t1 - t0
        bg_cpu = [(b - a) / idle for a, b in zip(cpu0, cpu1)]
        bg_calls, bg_xact = (pg1[0] - pg0[0]) / idle, (pg1[1] - pg0[1]) / idle
        result("cluster_idle", seconds=f"{idle:.1f}", cpu_n1_ms_per_s=f"{bg_cpu[0]*1e3:.2f}",
               cpu_n2_ms_per_s=f"{bg_cpu[1]*1e3:.2f}", statements_per_s=f"{bg_calls:.2f}",
               xact_per_s=f"{bg_xact:.2f}", per_node_statements_per_s=f"{bg_calls/2:.2f}")
        log("idle statements:\n" + c.pg.top_statements())
        # Warm-up: open the peer connections and touch every mailbox.
        constant_rate(entry, n1.users() + n2.users(), 200, 2)
        wait_stored(c, 400)
        time.sleep(1.5)
        per = {"local": [], "remote": []}
        for r in range(args.runs):
            for kind in ("local", "remote"):
                users = n1.users() if kind == "local" else n2.users()
                base = c.stored()
                c.pg.reset_statements()
                time.sleep(0.2)
                pg0, tr0, sy0, sn0 = c.pg.counters(), peer_traffic(c), syncs(c), syncs_by_node(c)
                t0, cpu0 = time.time(), [n.cpu() for n in c.nodes]
                cs0 = [context_switches(n.proc.pid) for n in c.nodes]
                perf = perf_start(c, f"{kind}-{r + 1}")
                sent, refused, _, late = constant_rate(entry, users, rate, seconds)
                done = wait_stored(c, base + sent)
                perf_stop(perf)
                time.sleep(1.2)  # the last stats write
                t1, cpu1 = time.time(), [n.cpu() for n in c.nodes]
                cs1 = [context_switches(n.proc.pid) for n in c.nodes]
                pg1, tr1, sy1, sn1 = c.pg.counters(), peer_traffic(c), syncs(c), syncs_by_node(c)
                out_b, in_b, nconn = (b - a for a, b in zip(tr0, tr1))
                span = t1 - t0
                used = [(b - a) - bg * span for a, b, bg in zip(cpu0, cpu1, bg_cpu)]
                total_us = sum(used) / sent * 1e6
                calls = (pg1[0] - pg0[0]) - bg_calls * span
                xact = (pg1[1] - pg0[1]) - bg_xact * span
                per[kind].append(total_us)
                result("cluster_cpu_per_msg", kind=kind, run=r + 1, sent=sent, refused=refused,
                       stored=c.stored() - base, drained=done is not None, seconds=f"{span:.2f}",
                       n1_us=f"{used[0]/sent*1e6:.1f}", n2_us=f"{used[1]/sent*1e6:.1f}",
                       total_us=f"{total_us:.1f}",
                       statements_per_msg=f"{calls/sent:.4f}", statements_raw=pg1[0] - pg0[0],
                       xact_per_msg=f"{xact/sent:.4f}",
                       lmtp_bytes_per_msg=f"{out_b/sent:.0f}", lmtp_reply_bytes_per_msg=f"{in_b/sent:.0f}", lmtp_connections_opened=nconn,
                       fdatasyncs_per_msg=f"{(sy1 - sy0) / sent:.3f}",
                       syncs_queue_data_journal_per_msg=" ".join(
                           "/".join(f"{(b - a) / sent:.2f}" for a, b in zip(x, y)) for x, y in zip(sn0, sn1)),
                       switches_per_msg="/".join(f"{(b - a) / sent:.2f}" for a, b in zip(cs0, cs1)), max_late_s=f"{late:.3f}", load=loadavg())
                if calls / sent > 0.01:
                    log(f"{kind} run statements:\n" + c.pg.top_statements())
        lm, lr = median_range(per["local"])
        rm, rr = median_range(per["remote"])
        ratio = statistics.median(per["remote"]) / statistics.median(per["local"])
        result("cluster_cpu_summary", local_us_median=lm, local_range=lr, remote_us_median=rm,
               remote_range=rr, ratio=f"{ratio:.3f}", target="<=1.5", met=ratio <= 1.5)
    finally:
        c.stop()


# ---------------------------------------------------------------- 2. one node against two and three


def bench_scale(args):
    """For N in 1..3: each node on CPU 1 in its own cgroup of `quota` cores; messages at a
    constant rate through every node in turn to every user in turn ((N-1)/N remote), each
    step `step_seconds`, raised by `factor` until the copies are stored more slowly than
    they are offered (a backlog: more than `slack` seconds to drain)."""
    for run in range(1, args.runs + 1):
        for nodes in args.nodes:
            c = Cluster(args.bin, nodes, args.scratch)
            try:
                c.start(cpus="1", quota_cores=args.quota)
                entries = [(n.ip, PORT_SMTP) for n in c.nodes]
                users = [u for j in range(USERS_PER_NODE) for n in c.nodes for u in [n.users()[j]]]
                constant_rate(entries, users, 50 * nodes, 2)
                wait_stored(c, c.stored())
                time.sleep(1.2)
                rate, best, steps = args.start_rate * nodes, 0.0, []
                while True:
                    base, t0 = c.stored(), time.time()
                    handed0 = sum(n.log_handed for n in c.nodes)
                    max_pending = 0
                    stop = threading.Event()

                    def watch():
                        nonlocal max_pending
                        while not stop.is_set():
                            max_pending = max(max_pending, c.pending())
                            time.sleep(0.25)

                    w = threading.Thread(target=watch)
                    w.start()
                    th0 = [n.throttled() for n in c.nodes]
                    cpu0, gen0 = [n.cpu() for n in c.nodes], os.times()
                    sent, refused, t_sent, late = constant_rate(entries, users, rate, args.step_seconds,
                                                                conns_per_entry=args.conns)
                    done = wait_stored(c, base + sent, within=60)
                    stop.set()
                    w.join()
                    handed = sum(n.log_handed for n in c.nodes) - handed0
                    th1 = [n.throttled() for n in c.nodes]
                    cpu1, gen1 = [n.cpu() for n in c.nodes], os.times()
                    span = (done or time.time()) - t0
                    node_cores = sum(b - a for a, b in zip(cpu0, cpu1)) / span / nodes
                    gen_cores = (gen1.user + gen1.system - gen0.user - gen0.system) / span
                    throttled = sum(b[0] - a[0] for a, b in zip(th0, th1)) / max(1, sum(b[1] - a[1] for a, b in zip(th0, th1)))
                    drain = (done - t_sent) if done else float("inf")
                    processed = sent / ((done or time.time()) - t0)
                    best = max(best, processed)
                    backlog = drain > args.slack or late > args.slack or refused > 0
                    steps.append(f"{rate:.0f}:{processed:.0f}")
                    result("cluster_scale_step", nodes=nodes, run=run, offered=f"{rate:.0f}", sent=sent,
                           refused=refused, processed_per_s=f"{processed:.1f}", drain_s=f"{drain:.2f}",
                           client_late_s=f"{late:.2f}", max_pending=max_pending, backlog=backlog,
                           node_cores=f"{node_cores:.3f}", throttled=f"{throttled:.2f}",
                           generator_cores=f"{gen_cores:.2f}", remote_measured=f"{handed / max(1, sent):.3f}",
                           load=loadavg())
                    if backlog or rate > args.rate_max:
                        break
                    rate *= args.factor
                    time.sleep(1.0)
                result("cluster_scale", nodes=nodes, run=run, quota_cores=args.quota,
                       max_msgs_per_s=f"{best:.1f}", per_node=f"{best/nodes:.1f}",
                       remote_share=f"{(nodes-1)/nodes:.2f}", steps=",".join(steps))
            finally:
                c.stop()


# ---------------------------------------------------------------- the directory's cost per statement


def postgres_cpu():
    """utime + stime of every process of the `postgres` user, seconds."""
    uid = int(subprocess.run(["id", "-u", "postgres"], capture_output=True, text=True).stdout)
    total = 0.0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.stat(f"/proc/{pid}").st_uid == uid:
                    total += cpu_seconds(pid)
            except (FileNotFoundError, ProcessLookupError):
                pass
    return total


def bench_directory(args):
    """The directory's CPU per statement for the nodes' background statements (a lease
    renewal and a node poll, as pg_stat_statements shows them), 5,000 of each from one
    psql session: its backend's CPU (/proc) from the first statement to a pg_sleep at the
    end, while the backend still lives."""
    c = Cluster(args.bin, 2, args.scratch)
    try:
        count = 5000
        sql = f"{c.pg.dir}/bench.sql"
        with open(sql, "w") as f:
            f.write("SELECT pg_sleep(1);\n")
            for _ in range(count):
                f.write("UPDATE nodes SET lease_until = (extract(epoch from clock_timestamp()) * 1000)::bigint"
                        " + 6000 WHERE name = 'n1';\n")
                f.write("SELECT name, lease_until > (extract(epoch from clock_timestamp()) * 1000)::bigint"
                        " FROM nodes;\n")
            f.write("SELECT pg_sleep(2);\n")
        shutil.chown(sql, "postgres", "postgres")

        def backend(state_query):
            return c.pg.sql("SELECT pid FROM pg_stat_activity WHERE datname = 'postgres' "
                            f"AND query LIKE '{state_query}%' AND pid <> pg_backend_pid()")

        for r in range(args.runs):
            psql = subprocess.Popen(["psql", "-h", "127.0.0.1", "-p", str(c.pg.port), "-U", "postgres", "-d",
                                     "postgres", "-qX", "-o", "/dev/null", "-f", sql])
            pid = ""
            while not pid:
                pid = backend("SELECT pg_sleep(1)")
                time.sleep(0.05)
            cpu0 = cpu_seconds(pid)
            t0 = time.time()
            while not backend("SELECT pg_sleep(2)"):
                time.sleep(0.05)
            cpu1, t1 = cpu_seconds(pid), time.time()
            psql.wait()
            result("cluster_directory_statement", run=r + 1, statements=2 * count,
                   backend_cpu_us_per_statement=f"{(cpu1 - cpu0) / (2 * count) * 1e6:.1f}",
                   wall_us_per_statement=f"{(t1 - t0) / (2 * count) * 1e6:.1f}", load=loadavg())
    finally:
        c.stop()


# ---------------------------------------------------------------- 4. failover


def imap_login(ip, user, timeout=10.0):
    s = socket.create_connection((ip, PORT_IMAP), timeout=timeout)
    f = s.makefile("rb")
    f.readline()
    s.sendall(f"a1 LOGIN {user} {PASSWORD}\r\n".encode())
    while True:
        line = f.readline().decode(errors="replace")
        if not line or line.startswith("a1 "):
            s.close()
            return line.strip()


def until_unavailable(ip, user, since, within=30):
    while time.time() - since < within:
        try:
            answer = imap_login(ip, user)
        except OSError as e:
            answer = repr(e)
        if "NO [UNAVAILABLE]" in answer:
            return time.time() - since
        time.sleep(0.05)
    return None


def handed_in_log(node):
    node.read_log()
    return node.log_handed


def bench_failover(args):
    c = Cluster(args.bin, 3, args.scratch)
    try:
        c.start(cpus="0-1")
        n1, n2, n3 = c.nodes
        victim_user = n3.users()[0]
        entries = [(n1.ip, PORT_SMTP), (n2.ip, PORT_SMTP)]
        for sig in ("KILL", "STOP"):
            downs, backs = [], []
            for r in range(args.failover_runs):
                before = handed_in_log(n3)
                t0 = time.time()
                if sig == "KILL":
                    n3.kill()
                else:
                    n3.signal(signal.SIGSTOP)
                down = until_unavailable(n1.ip, victim_user, t0)
                # Mail for the down node's users, accepted by the others meanwhile.
                sent, refused, _, _ = constant_rate(entries, n3.users(), 50, 1, conns_per_entry=2)
                t1 = time.time()
                if sig == "KILL":
                    n3.start("0-1", None)
                    started = time.time() - t1
                else:
                    n3.signal(signal.SIGCONT)
                    started = 0.0
                back = None
                while time.time() - t1 < 120:
                    if handed_in_log(n3) - before >= sent:
                        back = time.time() - t1
                        break
                    time.sleep(0.02)
                downs.append(down if down is not None else float("inf"))
                backs.append(back if back is not None else float("inf"))
                result("cluster_failover", signal=sig, run=r + 1, unavailable_s=f"{down:.3f}" if down else "never",
                       queued=sent, refused=refused, listening_s=f"{started:.3f}",
                       delivered_after_s=f"{back:.3f}" if back else "never", load=loadavg())
                # Every node sees n3 up again before the next round.
                deadline = time.time() + 30
                while time.time() < deadline and " OK" not in imap_login(n1.ip, victim_user):
                    time.sleep(0.1)
                time.sleep(1)
            dm, dr = median_range(downs)
            bm, br = median_range(backs)
            result("cluster_failover_summary", signal=sig, runs=args.failover_runs, unavailable_median_s=dm,
                   unavailable_range=dr, delivered_median_s=bm, delivered_range=br)
    finally:
        c.stop()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("what", nargs="+", choices=["cpu", "scale", "failover", "directory"])
    p.add_argument("--bin", required=True)
    p.add_argument("--scratch", default="/var/tmp")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--cpu-rate", type=float, default=300)
    p.add_argument("--cpu-seconds", type=float, default=10)
    p.add_argument("--idle-seconds", type=float, default=10)
    p.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--quota", type=float, default=0.1)
    p.add_argument("--conns", type=int, default=24, help="SMTP connections per entry node (scale)")
    p.add_argument("--start-rate", type=float, default=100)
    p.add_argument("--factor", type=float, default=1.25)
    p.add_argument("--rate-max", type=float, default=5000)
    p.add_argument("--step-seconds", type=float, default=8)
    p.add_argument("--slack", type=float, default=2.0)
    p.add_argument("--failover-runs", type=int, default=5)
    args = p.parse_args()
    # Clean up (nodes, PostgreSQL, cgroups) on SIGTERM, and on SIGINT even when started in
    # the background (where the shell ignores it).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.sched_setaffinity(0, {0})
    for what in args.what:
        {"cpu": bench_cpu, "scale": bench_scale, "failover": bench_failover,
         "directory": bench_directory}[what](args)


if __name__ == "__main__":
    main()
