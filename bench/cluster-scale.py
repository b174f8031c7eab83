#!/usr/bin/env python3
"""The cluster's scale, measured and predicted (issue 40, item 5), driven by
bench/run-cluster-scale.sh.

Every node of `mailstow serve` runs in a network namespace of its own, pinned to a CPU set of
its own (taskset), on a disk of its own (a sparse file on a loop device with ext4, mounted as
its data directory); PostgreSQL (the shared directory) and the load generator run in
namespaces of their own. The namespaces hang off one bridge in a switch namespace, with
addresses in 10.200.<k>.0/24: the layout of test_peers::Netns (crates/test-peers/src/netns.rs),
so nothing leaves the machine.

  switch ms<pid>x0sw: br0 ── h<i> ═ eth0 of ms<pid>x0n<i>  10.200.k.<i>   node n<i>
                          ├─ hlg  ═ eth0 of ms<pid>x0lg    10.200.k.200  load generator
                          └─ hdb  ═ eth0 of ms<pid>x0db    10.200.k.250  PostgreSQL

Load: `mailstow bench smtp` (closed loop: each connection sends its next 8 KiB message when
the last got its 250), one process per node entering there, every connection going through
every user of every node in turn, so (N-1)/N of the copies are handed over. Throughput is
copies stored in the owners' stores (mail log `event=delivered ... folder=`) over the time
from the first message to the last copy stored. CPU per message from /proc/<pid>/stat of
each node and the generators' rusage; what saturates from each one's share of its cores,
PostgreSQL's CPU, and each disk's fdatasyncs.

First, at one node, the figures the simulator is calibrated from: each disk's fdatasync
latency and write bandwidth, a node's CPU per message, the generator's. Then every run prints
the simulator's prediction (`mailstow sim run`, docs/simulator.md 8c) beside its measurement,
and at the end the predictions for 16 and 64 nodes with their first bottleneck.

Every result is a `RESULT name key=value ...` line on stdout; everything else is commentary.
"""

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

PG_BINS = ["/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin"]
PORT_SMTP, PORT_LMTP, PORT_IMAP, PORT_POP3 = 25, 24, 143, 110
PORT_REPLICATION = 7025
PG_PORT = 5432
USERS_PER_NODE = 8
MESSAGE_BYTES = 8192
TICK = os.sysconf("SC_CLK_TCK")
GENERATOR_HOST, DB_HOST = 200, 250

# Issue 20's measured split of a handed-over copy's CPU against a local copy's, at 700 msg/s
# with the handover's batching (docs/benchmarks.md, "The 1.5x target met"): the sender 209 us,
# the owner 102 us, a local copy 215 us.
SENDER_SHARE, OWNER_SHARE = 209 / 215, 102 / 215
# Replication is not built yet (issue 40): until a REPLICAS=2 run calibrates them, a partner
# applying a write is taken to cost what an owner pays for a handed-over copy, and sending one
# a quarter of a local copy (an LMTP-like client without the queue).
REPLICA_SHARE, REPLICA_SEND_SHARE = OWNER_SHARE, 0.25
# The directory (issue 20's runs): background statements per node and CPU per statement.
NODE_QUERIES_PER_S, DIRECTORY_QUERY_NS = 2.59, 25_000.0


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def result(name, **kv):
    print(f"RESULT {name} " + " ".join(f"{k}={v}" for k, v in kv.items()), flush=True)


def run(*args, check=True, **kw):
    out = subprocess.run(list(args), capture_output=True, text=True, **kw)
    if check and out.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))}: {out.stderr.strip()}")
    return out.stdout


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def cpu_busy(cpus):
    """Seconds the CPUs `cpus` were busy so far (anything but idle and iowait; steal counts:
    the hypervisor gave the time to someone else), from /proc/stat."""
    total = 0
    for line in open("/proc/stat"):
        name, *ticks = line.split()
        if name.startswith("cpu") and name[3:] in cpus:
            t = [int(x) for x in ticks[:8]]
            total += sum(t) - t[3] - t[4]
    return total / TICK


def loadavg():
    return open("/proc/loadavg").read().split()[0]


def postgres_cpu():
    """utime + stime of every process of the `postgres` user so far (live ones), seconds."""
    uid = int(run("id", "-u", "postgres"))
    total = 0.0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.stat(f"/proc/{pid}").st_uid == uid:
                    total += cpu_seconds(pid)
            except (FileNotFoundError, ProcessLookupError):
                pass
    return total


# ---------------------------------------------------------------- namespaces


class Net:
    """The namespaces (see the module's documentation); deleted by close()."""

    def __init__(self):
        self.sweep_stale()
        pid = os.getpid()
        self.tag = f"ms{pid}x0"
        self.subnet = f"10.200.{pid % 256}"
        self.made = []
        self.switch = self.namespace("sw")
        run("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
        run("ip", "-n", self.switch, "link", "set", "br0", "up")

    @staticmethod
    def sweep_stale():
        """Namespaces of this layout whose pid no longer runs (a run killed before cleanup)."""
        for name in os.listdir("/run/netns") if os.path.isdir("/run/netns") else []:
            m = re.fullmatch(r"ms(\d+)x\d+\w*", name)
            if m and not os.path.exists(f"/proc/{m.group(1)}"):
                subprocess.run(["ip", "netns", "del", name], capture_output=True)

    def namespace(self, suffix):
        name = f"{self.tag}{suffix}"
        run("ip", "netns", "add", name)
        self.made.append(name)
        run("ip", "-n", name, "link", "set", "lo", "up")
        return name

    def host(self, suffix, last):
        """A namespace joined to the bridge, address <subnet>.<last>; (name, address)."""
        name = self.namespace(suffix)
        port = f"h{suffix}"[:15]
        run("ip", "-n", self.switch, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", name)
        run("ip", "-n", self.switch, "link", "set", port, "master", "br0", "up")
        run("ip", "-n", name, "addr", "add", f"{self.subnet}.{last}/24", "dev", "eth0")
        run("ip", "-n", name, "link", "set", "eth0", "up")
        return name, f"{self.subnet}.{last}"

    def close(self):
        for name in reversed(self.made):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
        self.made = []


# ---------------------------------------------------------------- disks


class Disk:
    """A sparse file of `gib` GiB on a loop device (direct I/O to the file, so the page cache
    is the node's own file system's only), ext4, mounted at `mount`."""

    def __init__(self, image, mount, gib):
        self.image, self.mount = image, mount
        with open(image, "wb") as f:
            f.truncate(int(gib * (1 << 30)))
        self.device = run("losetup", "--find", "--show", "--direct-io=on", image).strip()
        run("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", self.device)
        os.makedirs(mount, exist_ok=True)
        run("mount", self.device, mount)

    def sync_latency_us(self, count=200):
        """Median of `count` (8 KiB pwrite + fdatasync) on a file of this disk, µs."""
        path = f"{self.mount}/sync-probe"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        block = b"x" * MESSAGE_BYTES
        times = []
        try:
            for i in range(count):
                t0 = time.perf_counter()
                os.pwrite(fd, block, (i % 64) * MESSAGE_BYTES)
                os.fdatasync(fd)
                times.append((time.perf_counter() - t0) * 1e6)
        finally:
            os.close(fd)
            os.unlink(path)
        return statistics.median(times)

    def write_mb_s(self, mib=64):
        """Sequential write bandwidth, 1 MiB writes then one fdatasync, MB/s."""
        path = f"{self.mount}/bandwidth-probe"
        block = b"y" * (1 << 20)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            t0 = time.perf_counter()
            for _ in range(mib):
                os.write(fd, block)
            os.fdatasync(fd)
            seconds = time.perf_counter() - t0
        finally:
            os.close(fd)
            os.unlink(path)
        return mib * (1 << 20) / seconds / 1e6

    def close(self):
        subprocess.run(["umount", self.mount], capture_output=True)
        subprocess.run(["losetup", "-d", self.device], capture_output=True)
        try:
            os.unlink(self.image)
        except FileNotFoundError:
            pass


# ---------------------------------------------------------------- PostgreSQL


class Postgres:
    """A private PostgreSQL in its own namespace (as test_peers::Netns::start_postgres)."""

    def __init__(self, netns, address, cpus):
        self.netns, self.address = netns, address
        self.bin = next(b for b in PG_BINS if os.path.isfile(os.path.join(b, "pg_ctl")))
        self.dir = tempfile.mkdtemp(prefix="mailstow-scale-pg")
        shutil.chown(self.dir, "postgres", "postgres")
        os.makedirs(f"{self.dir}/run")
        shutil.chown(f"{self.dir}/run", "postgres", "postgres")
        self.pg("initdb", "-D", f"{self.dir}/data", "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        with open(f"{self.dir}/data/pg_hba.conf", "a") as f:
            f.write(f"host all all {address.rsplit('.', 1)[0]}.0/24 trust\n")
        opts = (f"-p {PG_PORT} -c listen_addresses={address} -c unix_socket_directories={self.dir}/run "
                "-c fsync=off -c max_connections=300")
        self.pg("pg_ctl", "start", "-w", "-D", f"{self.dir}/data", "-l", f"{self.dir}/postgres.log", "-o", opts)
        pid = int(open(f"{self.dir}/data/postmaster.pid").readline())
        subprocess.run(["taskset", "-a", "-p", "-c", cpus, str(pid)], capture_output=True)

    def pg(self, prog, *args):
        run("ip", "netns", "exec", self.netns, "runuser", "-u", "postgres", "--", f"{self.bin}/{prog}", *args,
            cwd=self.dir)

    def url(self):
        return f"postgres://postgres@{self.address}:{PG_PORT}/postgres"

    def stop(self):
        try:
            self.pg("pg_ctl", "stop", "-m", "immediate", "-D", f"{self.dir}/data")
        except RuntimeError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


# ---------------------------------------------------------------- nodes


class Node:
    def __init__(self, cluster, i, netns, ip, disk):
        self.name, self.netns, self.ip, self.disk = f"n{i}", netns, ip, disk
        self.bin = cluster.bin
        self.data = f"{disk.mount}/data"
        self.config = f"{cluster.scratch}/{self.name}.toml"
        self.errlog = f"{cluster.scratch}/{self.name}.log"
        self.proc = None
        self.log_offset, self.log_stored, self.log_partial = 0, 0, b""
        with open(self.config, "w") as f:
            f.write(f'data_dir = "{self.data}"\n[directory]\nurl = "{cluster.pg.url()}"\n'
                    f'[cluster]\nnode = "{self.name}"\nsecret_file = "{cluster.secret}"\n'
                    f"replicas = {cluster.replicas}\n"
                    + (f'replication = "{ip}:{PORT_REPLICATION}"\n' if cluster.replicas > 1 else "")
                    + f'[server]\nhostname = "{self.name}.example.test"\n'
                    f'smtp = "{ip}:{PORT_SMTP}"\nlmtp = "{ip}:{PORT_LMTP}"\n'
                    f'imap = "{ip}:{PORT_IMAP}"\npop3 = "{ip}:{PORT_POP3}"\n'
                    'submission = ""\nsubmissions = ""\nimaps = ""\npop3s = ""\nweb = ""\n'
                    'managesieve = ""\nhttp = ""\nhttps = ""\n'
                    'auth_without_tls = true\nsender_checks = false\n')

    def cli(self, *args):
        return run("ip", "netns", "exec", self.netns, self.bin, "--config", self.config, *args)

    def start(self, cpus):
        out = open(f"{self.errlog}.out", "a")
        err = open(self.errlog, "a")
        seen = open(f"{self.errlog}.out").read().count(" listening on ")
        # `ip netns exec` and taskset exec what follows: the child's pid is mailstow's.
        self.proc = subprocess.Popen(["ip", "netns", "exec", self.netns, "taskset", "-c", cpus, self.bin,
                                      "--config", self.config, "serve"],
                                     stdout=out, stderr=err, env={**os.environ, "RUST_LOG": "info"})
        deadline = time.time() + 60
        while time.time() < deadline:
            if open(f"{self.errlog}.out").read().count(" listening on ") - seen >= 4:
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {open(self.errlog).read()[-2000:]}")
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not start")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def cpu(self):
        return cpu_seconds(self.proc.pid)

    def stats(self):
        try:
            text = open(f"{self.data}/stats").read()
        except FileNotFoundError:
            return {}
        return {k: int(v) for k, v in (line.split() for line in text.splitlines() if line)}

    def users(self):
        return [f"{self.name}u{j}@example.test" for j in range(USERS_PER_NODE)]

    def read_log(self):
        """Copies stored here so far (mail log `event=delivered ... folder=`), read on."""
        with open(self.errlog, "rb") as f:
            f.seek(self.log_offset)
            data = f.read()
        self.log_offset += len(data)
        lines = (self.log_partial + data).split(b"\n")
        self.log_partial = lines.pop()
        self.log_stored += sum(1 for line in lines if b"event=delivered" in line and b"folder=" in line)
        return self.log_stored


class Cluster:
    def __init__(self, args, nodes, replicas, layout):
        self.bin, self.replicas, self.layout = args.bin, replicas, layout
        self.scratch = tempfile.mkdtemp(prefix="mailstow-scale-", dir=args.scratch)
        self.secret = f"{self.scratch}/cluster.secret"
        open(self.secret, "w").write("a benchmark cluster secret, 32 bytes or more\n")
        self.net, self.disks, self.nodes, self.pg = Net(), [], [], None
        try:
            db_ns, db_ip = self.net.host("db", DB_HOST)
            self.generator_ns, self.generator_ip = self.net.host("lg", GENERATOR_HOST)
            self.pg = Postgres(db_ns, db_ip, layout["postgres"])
            for i in range(1, nodes + 1):
                ns, ip = self.net.host(f"n{i}", i)
                disk = Disk(f"{self.scratch}/disk-n{i}.img", f"{self.scratch}/n{i}", args.disk_gib)
                self.disks.append(disk)
                self.nodes.append(Node(self, i, ns, ip, disk))
            # The disks as they are now (the machine's other work moves them): the model's.
            self.sync_us = statistics.median(d.sync_latency_us(100) for d in self.disks)
            for n in self.nodes:
                n.cli("init")
            n1 = self.nodes[0]
            n1.cli("domain", "add", "example.test")
            for n in self.nodes:
                n1.cli("node", "add", n.name, "--lmtp", f"{n.ip}:{PORT_LMTP}", "--imap", f"{n.ip}:{PORT_IMAP}",
                       "--pop3", f"{n.ip}:{PORT_POP3}")
            for n in self.nodes:
                for u in n.users():
                    n1.cli("user", "add", u, "--node", n.name, "--password", "secret-pw")
            for n, cpus in zip(self.nodes, layout["nodes"]):
                n.start(cpus)
            # Every node sees every other up (leases), then the peers' first renewals pass.
            deadline = time.time() + 20
            while time.time() < deadline and n1.cli("node", "list").count(" up ") < nodes:
                time.sleep(0.2)
            time.sleep(2.5)
        except BaseException:
            self.stop()
            raise

    def stored(self):
        return sum(n.read_log() for n in self.nodes)

    def recipients(self):
        # Interleaved: consecutive messages of a connection go to different nodes' users.
        return [u for j in range(USERS_PER_NODE) for n in self.nodes for u in [n.users()[j]]]

    def stop(self):
        for n in self.nodes:
            n.stop()
        if self.pg:
            self.pg.stop()
        for d in self.disks:
            d.close()
        self.net.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


# ---------------------------------------------------------------- load


def load(cluster, conns, seconds):
    """One `mailstow bench smtp` per node (entering there), all at once, from the generator's
    namespace on its CPU set. (messages acknowledged, generators' CPU seconds, errors)."""
    recipients = ",".join(cluster.recipients())
    procs = []
    for n in cluster.nodes:
        procs.append(subprocess.Popen(
            ["ip", "netns", "exec", cluster.generator_ns, "taskset", "-c", cluster.layout["generator"],
             cluster.bin, "bench", "smtp", "--address", f"{n.ip}:{PORT_SMTP}", "--connections", str(conns),
             "--seconds", str(seconds), "--recipients", recipients, "--label", n.name],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    sent, cpu, errors = 0, 0.0, []
    for p in procs:
        # wait4: the generator's own CPU (it exits, so /proc cannot be read after).
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out, err = p.stdout.read(), p.stderr.read()
        cpu += usage.ru_utime + usage.ru_stime
        m = re.search(r"\bmsgs=(\d+)", out)
        if p.returncode != 0 or not m:
            errors.append(err.strip()[-300:])
        sent += int(m.group(1)) if m else 0
    return sent, cpu, errors


def wait_stored(cluster, want, within):
    deadline = time.time() + within
    while time.time() < deadline:
        if cluster.stored() >= want:
            return time.time()
        time.sleep(0.02)
    return None


def syncs(cluster):
    return sum(n.stats().get(k, 0) for n in cluster.nodes
               for k in ("queue_fdatasyncs", "store_data_syncs", "store_journal_syncs"))


def measure(cluster, args):
    """One measured run: load for `seconds`, then until every copy is stored."""
    base = cluster.stored()
    time.sleep(1.1)  # the stats file's last write
    sy0 = syncs(cluster)
    node_cpus = cluster.layout["nodes"]
    busy0 = cpu_busy(node_cpus)
    cpu0, pg0, t0 = [n.cpu() for n in cluster.nodes], postgres_cpu(), time.time()
    sent, gen_cpu, errors = load(cluster, args.conns, args.seconds)
    if errors:
        log("load errors:", errors[:3])
    done = wait_stored(cluster, base + sent, within=120)
    t1 = done or time.time()
    cpu1, pg1, busy1 = [n.cpu() for n in cluster.nodes], postgres_cpu(), cpu_busy(node_cpus)
    time.sleep(1.1)
    sy1 = syncs(cluster)
    stored = cluster.stored() - base
    span = t1 - t0
    node_cpu = [b - a for a, b in zip(cpu0, cpu1)]
    # What else ran on the nodes' cores: the machine's other work (and, when they share
    # the nodes' cores, the generator and PostgreSQL, which the model has already).
    others = (busy1 - busy0) - sum(node_cpu)
    if cluster.layout["generator_cores"] == 0:
        others -= gen_cpu + (pg1 - pg0)
    left = min(1.0, max(0.05, 1.0 - others / span / len(cluster.nodes)))
    return {
        "cores_left": left, "sync_us": cluster.sync_us,
        "sent": sent, "stored": stored, "drained": done is not None, "span": span,
        "msgs_per_s": stored / span, "accepted_per_s": sent / args.seconds,
        "node_us": sum(node_cpu) / max(1, stored) * 1e6,
        "node_cores": [c / span for c in node_cpu],
        "generator_us": gen_cpu / max(1, sent) * 1e6,
        "generator_cores": gen_cpu / span,
        "pg_cores": (pg1 - pg0) / span,
        "syncs_per_msg": (sy1 - sy0) / max(1, stored),
        "syncs_per_s_per_node": (sy1 - sy0) / span / len(cluster.nodes),
    }


# ---------------------------------------------------------------- the layout on this machine


def layout(nodes, cores):
    """CPU sets: each node a core of its own while they last; the generator and PostgreSQL on
    the cores left, or sharing all of them when none is left. None: it does not fit."""
    if nodes > cores:
        return None
    node_sets = [str(i) for i in range(cores - nodes, cores)]
    spare = list(range(0, cores - nodes))
    rest = ",".join(map(str, spare)) if spare else f"0-{cores - 1}"
    return {"nodes": node_sets, "generator": rest, "postgres": rest, "generator_cores": len(spare)}


# ---------------------------------------------------------------- the simulator


def scenario(cal, nodes, replicas, conns, generator_cores, seconds, link_mb_s=0.0, node_cores=1.0,
             sync_us=None):
    local = cal["local_ns"]
    sync_us = cal["sync_us"] if sync_us is None else sync_us
    return f"""# written by bench/cluster-scale.py: the scale run's calibration
seed = 1
replications = 1
[device]
kind = "ssd"
[cluster]
nodes = {nodes}
node_cores = {node_cores:.3f}
local_ns = {local:.0f}.0
sender_ns = {local * SENDER_SHARE:.0f}.0
owner_ns = {local * OWNER_SHARE:.0f}.0
replicas = {replicas}
replica_ns = {local * REPLICA_SHARE:.0f}.0
replica_send_ns = {local * REPLICA_SEND_SHARE:.0f}.0
replica_wire_bytes = 8700
wire_bytes = 8600
link_mb_s = {link_mb_s}
latency_us = {cal["latency_us"]:.1f}
sync_us = {sync_us:.1f}
disk_mb_s = {cal["disk_mb_s"]:.1f}
directory_cores = 1
directory_query_ns = {DIRECTORY_QUERY_NS}
node_queries_per_s = {NODE_QUERIES_PER_S}
connections_per_node = {conns}
generator_ns = {cal["generator_ns"]:.0f}.0
generator_cores = {generator_cores}
seconds = {seconds}
[[workload]]
name = "messages"
kind = "cluster"
"""


def predict(args, text):
    """(msgs/s, bottleneck line) of `mailstow sim run` on a scenario."""
    d = tempfile.mkdtemp(prefix="mailstow-scale-sim-")
    try:
        path = f"{d}/scale.toml"
        open(path, "w").write(text)
        out = run(args.bin, "sim", "run", path, "--out", f"{d}/out")
        m = re.search(r"iops=([\d.]+) .*bottleneck=\"(.*)\"", out)
        if not m:
            raise RuntimeError(f"no result in: {out}")
        return float(m.group(1)), m.group(2)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def word(bottleneck):
    """The bottleneck's station as one word for a RESULT line: `node_n1_CPU`."""
    return re.sub(r"\W+", "_", bottleneck.split(" (")[0]).strip("_")


# ---------------------------------------------------------------- main


def saturated(m, lay):
    """What is busiest, as a fraction of what it has: each node's core, the generator's cores
    (its own, or all when shared), PostgreSQL's."""
    share = max(1, lay["generator_cores"]) if lay["generator_cores"] else os.cpu_count()
    parts = {f"n{i + 1}_cpu": c for i, c in enumerate(m["node_cores"])}
    parts["generator"] = m["generator_cores"] / share
    parts["postgres"] = m["pg_cores"] / share
    name = max(parts, key=parts.get)
    return name, parts[name]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--scratch", default="/var/tmp")
    p.add_argument("--nodes", type=int, nargs="+", default=[1, 2])
    p.add_argument("--replicas", type=int, nargs="+", default=[1],
                   help="run each node count with each (1 2: replication off and on, same run)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--conns", type=int, default=32, help="SMTP connections per entry node")
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--disk-gib", type=float, default=1.0)
    p.add_argument("--predict", type=int, nargs="*", default=[16, 64])
    p.add_argument("--predict-seconds", type=float, default=1.0)
    args = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    cores = os.cpu_count()
    fits = [n for n in args.nodes if layout(n, cores)]
    for n in args.nodes:
        if n not in fits:
            log(f"# {n} nodes do not fit {cores} cores with a core each: skipped")

    # 1. Calibration at one node (always first, whatever --nodes says).
    lay1 = layout(1, cores)
    c = Cluster(args, 1, 1, lay1)
    try:
        sync = [c.sync_us]
        bandwidth = [d.write_mb_s() for d in c.disks]
        latency = veth_latency_us(c)
        load(c, max(2, args.conns // 4), min(2.0, args.seconds))  # warm-up: every mailbox made
        wait_stored(c, 0, 1)
        cal_runs = [measure(c, args) for _ in range(max(1, min(args.runs, 2)))]
    finally:
        c.stop()
    cal = {
        "local_ns": statistics.median(r["node_us"] for r in cal_runs) * 1e3,
        "generator_ns": statistics.median(r["generator_us"] for r in cal_runs) * 1e3,
        "sync_us": statistics.median(sync),
        "disk_mb_s": statistics.median(bandwidth),
        "latency_us": latency,
    }
    result("cluster_scale_calibration", nodes=1, local_us_per_msg=f"{cal['local_ns'] / 1e3:.1f}",
           generator_us_per_msg=f"{cal['generator_ns'] / 1e3:.1f}", sync_us=f"{cal['sync_us']:.0f}",
           disk_mb_s=f"{cal['disk_mb_s']:.0f}", veth_rtt_half_us=f"{latency:.1f}",
           msgs_per_s=f"{statistics.median(r['msgs_per_s'] for r in cal_runs):.0f}",
           node_cores=f"{statistics.median(r['node_cores'][0] for r in cal_runs):.2f}", load=loadavg())

    # 2. The measured runs, each with its prediction; with several replica counts, each node
    # count is run with each, one after the other in this invocation.
    medians = {}
    for nodes, replicas in [(n, k) for n in fits for k in args.replicas if n >= k]:
        lay = layout(nodes, cores)
        measured, predictions, ideal, cpu = [], [], None, []
        for r in range(1, args.runs + 1):
            c = Cluster(args, nodes, replicas, lay)
            try:
                load(c, max(2, args.conns // 4), min(2.0, args.seconds))
                time.sleep(0.5)
                m = measure(c, args)
            finally:
                c.stop()
            # The model given this machine as it was during the run: the disks' sync latency
            # probed before it, the share of each node's core the machine's other work left.
            predicted, why = predict(args, scenario(cal, nodes, replicas, args.conns, lay["generator_cores"],
                                                     args.seconds, node_cores=m["cores_left"],
                                                     sync_us=m["sync_us"]))
            if ideal is None:
                ideal, _ = predict(args, scenario(cal, nodes, replicas, args.conns, lay["generator_cores"],
                                                  args.seconds))
            what, busy = saturated(m, lay)
            measured.append(m["msgs_per_s"])
            cpu.append(m["node_us"])
            predictions.append(predicted)
            result("cluster_scale", nodes=nodes, replicas=replicas, run=r, sent=m["sent"], stored=m["stored"],
                   drained=m["drained"], msgs_per_s=f"{m['msgs_per_s']:.0f}",
                   predicted_msgs_per_s=f"{predicted:.0f}",
                   error_pct=f"{(predicted / m['msgs_per_s'] - 1) * 100:+.1f}",
                   accepted_per_s=f"{m['accepted_per_s']:.0f}", cpu_us_per_msg=f"{m['node_us']:.1f}",
                   generator_us_per_msg=f"{m['generator_us']:.1f}",
                   node_cores="/".join(f"{x:.2f}" for x in m["node_cores"]), cores_left=f"{m['cores_left']:.2f}",
                   sync_us=f"{m['sync_us']:.0f}",
                   generator_cores=f"{m['generator_cores']:.2f}", pg_cores=f"{m['pg_cores']:.3f}",
                   syncs_per_msg=f"{m['syncs_per_msg']:.2f}", syncs_per_s_per_node=f"{m['syncs_per_s_per_node']:.0f}",
                   saturated=f"{what}:{busy:.2f}", predicted_bottleneck=word(why),
                   cpus="/".join(lay["nodes"]) + f"+gen:{lay['generator']}", load=loadavg())
            log(f"# {nodes} nodes, run {r}: the model's bottleneck: {why}")
        med, pmed = statistics.median(measured), statistics.median(predictions)
        medians[(nodes, replicas)] = (med, statistics.median(cpu))
        result("cluster_scale_summary", nodes=nodes, replicas=replicas, runs=len(measured),
               msgs_per_s_median=f"{med:.0f}", range=f"{min(measured):.0f}-{max(measured):.0f}",
               predicted_msgs_per_s=f"{pmed:.0f}", error_pct=f"{(pmed / med - 1) * 100:+.1f}",
               within_20pct=abs(pmed / med - 1) <= 0.20, predicted_whole_cores_calibration_sync=f"{ideal:.0f}")

    for nodes in fits:
        if (nodes, 1) in medians and (nodes, 2) in medians:
            (off, off_cpu), (on, on_cpu) = medians[(nodes, 1)], medians[(nodes, 2)]
            result("cluster_scale_replication", nodes=nodes, on_over_off=f"{on / off:.2f}",
                   cpu_on_over_off=f"{on_cpu / off_cpu:.2f}", off_msgs_per_s=f"{off:.0f}",
                   on_msgs_per_s=f"{on:.0f}")

    # 3. Beyond this machine: nodes of a core each with their own disk like these, gigabit
    # links, the generator on cores of its own (one per node: it is not what is measured).
    for nodes in args.predict:
        for replicas in sorted({1, 2}):
            predicted, why = predict(args, scenario(cal, nodes, replicas, args.conns, nodes, args.predict_seconds,
                                                     link_mb_s=125.0))
            result("cluster_scale_prediction", nodes=nodes, replicas=replicas, predicted_msgs_per_s=f"{predicted:.0f}",
                   per_node=f"{predicted / nodes:.0f}", bottleneck=word(why))
            log(f"# predicted, {nodes} nodes, replicas {replicas}: {predicted:.0f} msg/s; {why}")


def veth_latency_us(cluster):
    """Half the TCP connect time from the generator's namespace to n1's SMTP port over the
    bridge (median of 50): the model's one-way latency."""
    code = ("import socket,time,statistics\nts=[]\nfor _ in range(50):\n t=time.perf_counter()\n"
            f" s=socket.create_connection(('{cluster.nodes[0].ip}',{PORT_SMTP}))\n"
            " ts.append(time.perf_counter()-t)\n s.close()\nprint(statistics.median(ts)*1e6/2)")
    out = run("ip", "netns", "exec", cluster.generator_ns, "/usr/bin/python3", "-c", code)
    return float(out.strip())


if __name__ == "__main__":
    main()
