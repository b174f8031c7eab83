#!/usr/bin/env python3
"""The mail file system against its ceiling and a local directory (issue 5 benchmarks).

Driven by bench/run-mailfs.sh, which builds the binaries. One private Dovecot (8 users) on
loopback holds every account. Rows (RESULT lines on stdout):

  sweep   whole-file write (open, write, fsync, close) and read (fresh mount, empty cache)
          latency for 32 KiB and 32 MiB files over block sizes 128 KiB..4 MiB, stripe widths
          1, 2, 4, 8 and 1 or 2 connections per account (thesis figures 4.2 to 4.5);
  raw     the same bytes as plain IMAP APPEND/FETCH over the same accounts/connections;
  big     large-file bandwidth through the mount vs raw (the 70 % target), twice: with
          every process sharing both cores, and with Dovecot on core 0 and the client side
          (the mount and the program reading or writing, or raw_imap) on core 1, as when the
          accounts are on another machine (rows big and big_pinned);
  meta    stat and readdir per second through the mount (the 20,000/s target);
  postmark the thesis's Postmark configurations, on the mount and on a local directory;
  small   everyday small-file work on the mount and on a local directory (issues 23, 41): extract
          a tar of this project's tree (`git archive HEAD`), `git clone` of this repository,
          `rm -rf` of both, each timed alone and until durable (`sync -f` and `sync` of the
          directory on both sides, the same commands), REPS times alternating, as medians
          and ranges of mount/local; the unmount after; and the messages each account's
          folders gain from the tar (IMAP STATUS), per entry;
  fio     sequential and random runs on the mount and on a local directory;
  flat    creates, renames and unlinks per second in one directory as it grows to
          FLAT_ENTRIES (100,000) entries, on the mount and on a local directory, with the
          messages each account gains per created file and the CPU Dovecot and the mount
          spend per operation (issue 23);
  rewrite an fsx-style run (issue 41): REWRITE_OPS (100,000) random writes of up to
          REWRITE_WRITE_MAX (64 KiB, fsx's default), reads and truncates of one file of at
          most REWRITE_BYTES (256 KiB; 8 MiB is the multi-block case), checked against a
          model in memory, fsync every 4 operations, on one group of two accounts with the
          default retention, versions_max and reclaim_delay_ms; per tenth of the run the
          operations per second and each account's messages and bytes (IMAP STATUS and
          GETQUOTAROOT) against the live bytes; then a BOUND line: each account at most
          4x live + 64 MiB at the end, and the last tenth's rate within 1.5x of the first's.

Each section (and each stripe width of the sweep, and each Postmark configuration) gets a
fresh Dovecot whose maildirs live in MAILDIR_TMP (default /dev/shm): the accounts' disk is
then memory, so the rows compare the file system's overhead with plain IMAP rather than two
runs of the same disk's writeback. The mount's cache stays on disk (WORK, under /tmp).
The big rows are repeated (REPS, default 3) and reported as medians.

Env: ONLY=sweep,raw,big,meta,postmark,fio,small,flat,rewrite (default all), QUICK=1 (fewer sweep
points), FLAT_ENTRIES (default 100000),
PLACEMENTS=shared,pinned (the big rows' CPU placements, default both), BIG_MEMBERS (accounts
per group in the big rows, default 1; 2 keeps two copies on both sides, skipping the 8-wide
row for want of users),
MAILDIR_TMP, THREADS (the mount's FUSE threads), REPS, BIG_ROWS (only the first N large-file configurations), CIPHER
(auto, the default: AES-256-GCM on CPUs with AES instructions; xchacha20poly1305; aes-256-gcm),
TRANSFER (base64, the default, or binary: the accounts' `transfer`, and the raw ceiling's),
DIRECT_IO (true or false: the mounts' `direct_io`; unset, the default, false), WRITEBACK_CACHE
(true or false: the mounts' `writeback_cache`; unset, the default, true), NEGATIVE_LOOKUP_MS
(the mounts' `negative_lookup_ms`; unset, the default, 1000; 0 as before issue 41), ATTR_CACHE_MS
(the mounts' `attr_cache_ms`; unset, the default), BIN_DIR (where
mailstow and the examples raw_imap and dovecot are: target/release), SMOKE=1 (every row and
placement once with tiny sizes: 1 MiB sweep and 8 MiB large files, 20 Postmark transactions,
fio runs of a second, the tar of docs/ only, 40 entries in the flat directory, 1,000 rewrite
operations). REWRITE_OPS, REWRITE_BYTES, REWRITE_WRITE_MAX.
"""
import os, resource, subprocess, sys, time, shutil, tempfile, re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN_DIR = os.environ.get("BIN_DIR") or os.path.join(ROOT, "target/release")
MAILSTOW = os.path.join(BIN_DIR, "mailstow")
RAW = os.path.join(BIN_DIR, "examples/raw_imap")
DOVECOT = os.path.join(BIN_DIR, "examples/dovecot")
ONLY = set((os.environ.get("ONLY") or "sweep,raw,big,meta,postmark,fio,small,flat,rewrite").split(","))
SMOKE = os.environ.get("SMOKE") == "1"
FLAT_ENTRIES = int(os.environ.get("FLAT_ENTRIES", "40" if SMOKE else "100000"))
REWRITE_OPS = int(os.environ.get("REWRITE_OPS", "1000" if SMOKE else "100000"))
REWRITE_BYTES = int(os.environ.get("REWRITE_BYTES", str(256 << 10)))
REWRITE_WRITE_MAX = int(os.environ.get("REWRITE_WRITE_MAX", str(64 << 10)))
dovecot_pid = [0]
QUICK = os.environ.get("QUICK") == "1"
MAILDIR_TMP = os.environ.get("MAILDIR_TMP", "/dev/shm")
REPS = int(os.environ.get("REPS", "1" if SMOKE else "3"))
# The sweep's large file and the raw ceiling's bytes; the big rows' file.
SWEEP_BIG = (1 << 20) if SMOKE else (32 << 20)
BIG_TOTAL = (8 << 20) if SMOKE else (512 << 20)
CIPHER = os.environ.get("CIPHER", "auto")
TRANSFER = os.environ.get("TRANSFER", "base64")
USERS = 8
WORK = tempfile.mkdtemp(prefix="mailfs-bench-")
run_no = [0]
# Accounts per group in the big rows, on the mount and for raw IMAP alike.
BIG_MEMBERS = int(os.environ.get("BIG_MEMBERS", "1"))
PLACEMENTS = (os.environ.get("PLACEMENTS") or "shared,pinned").split(",")
# The CPU a process runs on, by role, in the current placement (None: anywhere).
cpu = {"server": None, "client": None}


def on_cpu(role, cmd):
    """`cmd` under taskset when the current placement pins `role`."""
    return cmd if cpu[role] is None else ["taskset", "-c", str(cpu[role]), *cmd]


class Pinned:
    """Runs a block with the server on core 0 and the client (this process too) on core 1."""

    def __init__(self, placement):
        self.placement = placement

    def __enter__(self):
        if self.placement == "pinned":
            cpu.update(server=0, client=1)
            os.sched_setaffinity(0, {1})

    def __exit__(self, *exc):
        cpu.update(server=None, client=None)
        os.sched_setaffinity(0, range(os.cpu_count()))


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def result(**kv):
    print("RESULT " + " ".join(f"{k}={v}" for k, v in kv.items()), flush=True)


class Dovecot:
    """A fresh private Dovecot for one section; stopped (and its maildirs removed) on exit."""

    def __enter__(self):
        env = dict(os.environ, TMPDIR=MAILDIR_TMP)
        self.proc = subprocess.Popen(on_cpu("server", [DOVECOT, str(USERS)]), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)
        dovecot_pid[0] = self.proc.pid
        line = self.proc.stdout.readline()
        m = re.search(r"port=(\d+)", line)
        if not m:
            sys.exit(f"dovecot did not start: {line}")
        return int(m.group(1))

    def __exit__(self, *exc):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


class Mount:
    def __init__(self, port, width, conns, block, mode="sync", members=1):
        run_no[0] += 1
        self.dir = os.path.join(WORK, f"run{run_no[0]}")
        os.makedirs(self.dir)
        self.mnt = os.path.join(self.dir, "mnt")
        os.makedirs(self.mnt)
        self.cache = os.path.join(self.dir, "cache")
        cfg = [
            "[fs]", f"block_size = {block}", f'folder = "fs{run_no[0]}"', f'mode = "{mode}"',
            *([f"direct_io = {os.environ['DIRECT_IO']}"] if os.environ.get("DIRECT_IO") else []),
            *([f"writeback_cache = {os.environ['WRITEBACK_CACHE']}"]
              if os.environ.get("WRITEBACK_CACHE") else []),
            *([f"negative_lookup_ms = {os.environ['NEGATIVE_LOOKUP_MS']}"]
              if os.environ.get("NEGATIVE_LOOKUP_MS") else []),
            *([f"attr_cache_ms = {os.environ['ATTR_CACHE_MS']}"]
              if os.environ.get("ATTR_CACHE_MS") else []),
            "[cache]", f'dir = "{self.cache}"',
            "[encryption]", 'passphrase = "bench"', f'cipher = "{CIPHER}"',
        ]
        for g in range(width):
            cfg += ["[[group]]"]
            for m in range(members):
                u = g * members + m + 1
                cfg += ["[[group.account]]", 'host = "127.0.0.1"', f"port = {port}",
                        'tls = "none"', f'user = "user{u}"', f'password = "pw{u}"',
                        f"connections = {conns}", f'transfer = "{TRANSFER}"']
        self.config = os.path.join(self.dir, "fs.toml")
        with open(self.config, "w") as f:
            f.write("\n".join(cfg) + "\n")
        self.fs("mkfs")

    def fs(self, *args):
        r = subprocess.run(on_cpu("client", [MAILSTOW, "fs", "--config", self.config, *args]),
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"mailstow fs {args}: {r.stdout}{r.stderr}")
        return r.stdout

    def mount(self, wipe_cache=False):
        if wipe_cache:
            shutil.rmtree(self.cache, ignore_errors=True)
        threads = ["--threads", os.environ["THREADS"]] if os.environ.get("THREADS") else []
        self.fs("mount", self.mnt, *threads)

    def umount(self):
        subprocess.run([MAILSTOW, "fs", "umount", self.mnt], check=True, capture_output=True)

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def write_file(path, data):
    t = time.perf_counter()
    view = memoryview(data)  # slices without copying, as dd would write
    with open(path, "wb") as f:
        for i in range(0, len(data), 1 << 20):
            f.write(view[i:i + (1 << 20)])
        f.flush()
        os.fsync(f.fileno())
    return time.perf_counter() - t


def read_file(path):
    t = time.perf_counter()
    n = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            n += len(b)
    return time.perf_counter() - t, n


def children_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def raw(port, width, conns, block, total, copies=1):
    """Raw IMAP's write and read seconds for `total` bytes over `width` groups of `copies`
    accounts each (numbered as Mount numbers them), and the CPU seconds raw_imap used."""
    users = ",".join(f"user{u + 1}:pw{u + 1}" for u in range(width * copies))
    cpu_before = children_cpu_s()
    out = subprocess.run(on_cpu("client", [RAW, str(port), users, str(conns), str(block), str(total),
                                           TRANSFER, str(copies)]),
                         capture_output=True, text=True, check=True).stdout
    m = dict(re.findall(r"(\w+)=([\d.]+)", out))
    return float(m["raw_write_s"]), float(m["raw_read_s"]), children_cpu_s() - cpu_before


def sweep_point(port, width, conns, block, sizes):
    m = Mount(port, width, conns, block)
    m.mount()
    data = {s: os.urandom(s) for s in sizes}
    w = {s: write_file(os.path.join(m.mnt, f"f{s}"), data[s]) for s in sizes}
    m.umount()
    m.mount(wipe_cache=True)
    r = {s: read_file(os.path.join(m.mnt, f"f{s}"))[0] for s in sizes}
    m.umount()
    m.remove()
    for s in sizes:
        result(row="sweep", file_bytes=s, block=block, width=width, conns=conns,
               write_s=f"{w[s]:.4f}", read_s=f"{r[s]:.4f}")
    if "raw" in ONLY:
        rw, rr, _ = raw(port, width, conns, block, SWEEP_BIG)
        result(row="raw", file_bytes=SWEEP_BIG, block=block, width=width, conns=conns,
               write_s=f"{rw:.4f}", read_s=f"{rr:.4f}")


def sweep():
    sizes = [32 << 10, SWEEP_BIG]
    blocks = [128 << 10, 1 << 20, 4 << 20] if QUICK else [128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20]
    widths = [1, 4] if QUICK else [1, 2, 4, 8]
    if SMOKE:
        blocks, widths = [128 << 10], [1, 2]
    for conns in ((1,) if SMOKE else (1, 2)):
        for width in widths:
            with Dovecot() as port:
                for block in blocks:
                    sweep_point(port, width, conns, block, sizes)


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def big():
    """Large-file bandwidth through the mount against raw IMAP on a fresh server each, in
    each CPU placement.

    The machine's speed drifts (it is a shared virtual machine), so each repetition measures
    the mount and raw back to back, alternating which goes first, and the reported ratio is
    the median of the per-repetition ratios."""
    total = BIG_TOTAL
    data = os.urandom(total)
    mb = total / 1e6
    # Groups of BIG_MEMBERS accounts: with 2, both sides keep two copies of every block.
    configs = [c for c in [(4, 2, 1 << 20), (4, 2, 4 << 20), (8, 2, 1 << 20)]
               if c[0] * BIG_MEMBERS <= USERS]
    for placement in PLACEMENTS:
        with Pinned(placement):
            # Unmeasured warm-up: in every run the first repetition's first write was 2-3x
            # slower than the rest, whichever side went first (this virtual machine hands
            # freed memory back to its host, and the first pass over it faults it in).
            with Dovecot() as port:
                raw(port, 4, 2, 1 << 20, total)
            for width, conns, block in configs[:int(os.environ.get("BIG_ROWS", 1 if SMOKE else len(configs)))]:
                big_config(placement, data, width, conns, block)


def big_config(placement, data, width, conns, block):
    total = len(data)
    mb = total / 1e6
    rows = []
    for rep in range(REPS):
        def mount_run():
            with Dovecot() as port:
                m = Mount(port, width, conns, block, members=BIG_MEMBERS)
                m.mount()
                w = write_file(os.path.join(m.mnt, "big"), data)
                m.umount()
                m.mount(wipe_cache=True)
                r, n = read_file(os.path.join(m.mnt, "big"))
                assert n == total
                m.umount()
                m.remove()
                return w, r

        def raw_run():
            with Dovecot() as port:
                return raw(port, width, conns, block, total, BIG_MEMBERS)

        if rep % 2 == 0:
            (w, r), (rw, rr, rc) = mount_run(), raw_run()
        else:
            (rw, rr, rc), (w, r) = raw_run(), mount_run()
        rows.append((w, r, rw, rr))
        # The raw client's CPU over its wall time: well under 1 means it waited on the
        # server, not on itself (an earlier Python client was the bottleneck).
        result(row="big_rep", placement=placement, rep=rep, block=block, width=width,
               conns=conns, members=BIG_MEMBERS, mount_write_s=f"{w:.3f}", raw_write_s=f"{rw:.3f}",
               mount_read_s=f"{r:.3f}", raw_read_s=f"{rr:.3f}",
               raw_client_cpu=f"{rc / (rw + rr):.2f}")
    w = median([x[0] for x in rows])
    r = median([x[1] for x in rows])
    rw = median([x[2] for x in rows])
    rr = median([x[3] for x in rows])
    result(row="big" if placement == "shared" else f"big_{placement}", bytes=total,
           block=block, width=width, conns=conns, members=BIG_MEMBERS,
           mount_write_MBps=f"{mb / w:.1f}", raw_write_MBps=f"{mb / rw:.1f}",
           write_ratio=f"{median([x[2] / x[0] for x in rows]):.3f}",
           mount_read_MBps=f"{mb / r:.1f}", raw_read_MBps=f"{mb / rr:.1f}",
           read_ratio=f"{median([x[3] / x[1] for x in rows]):.3f}")


def meta():
    with Dovecot() as port:
        m = Mount(port, 2, 2, 1 << 20)
        m.mount()
        d = os.path.join(m.mnt, "many")
        os.mkdir(d)
        n = 100 if SMOKE else 1000
        t = time.perf_counter()
        for i in range(n):
            with open(os.path.join(d, f"f{i}"), "wb") as f:
                f.write(b"x" * 100)
        create_s = time.perf_counter() - t
        names = [os.path.join(d, f"f{i}") for i in range(n)]
        for p in names:
            os.stat(p)
        rounds = 5 if SMOKE else 50
        t = time.perf_counter()
        for _ in range(rounds):
            for p in names:
                os.stat(p)
        stat_s = time.perf_counter() - t
        t = time.perf_counter()
        for _ in range(rounds):
            os.listdir(d)
        readdir_s = time.perf_counter() - t
        # Past the kernel's 1 s attribute cache: every stat reaches the mount's own cache.
        time.sleep(1.2)
        t = time.perf_counter()
        for p in names:
            os.stat(p)
        cold_s = time.perf_counter() - t
        m.umount()
        result(row="meta", files=n, create_per_s=f"{n / create_s:.0f}",
               stat_per_s=f"{rounds * n / stat_s:.0f}",
               stat_past_kernel_cache_per_s=f"{n / cold_s:.0f}",
               readdir_1000_per_s=f"{rounds / readdir_s:.1f}",
               readdir_entries_per_s=f"{rounds * n / readdir_s:.0f}")


POSTMARK = [
    # (label, files, read bias, create bias): thesis 4.6 (files varied) and 4.7 (bias).
    ("files50", 50, 5, 5), ("files100", 100, 5, 5), ("files200", 200, 5, 5),
    ("read_heavy", 200, 8, 5), ("append_heavy", 200, 2, 5), ("create_heavy", 200, 5, 8),
]


# Postmark's transactions and largest file (smoke: a few small files).
POSTMARK_TRANSACTIONS = 20 if SMOKE else 200
POSTMARK_SIZE_MAX = (256 << 10) if SMOKE else 16777216


def postmark_run(location, files, read_bias, create_bias):
    script = (f"set location {location}\nset number {files}\nset transactions {POSTMARK_TRANSACTIONS}\n"
              f"set size 4096 {POSTMARK_SIZE_MAX}\nset bias read {read_bias}\nset bias create {create_bias}\n"
              "set seed 42\nrun\nquit\n")
    t = time.perf_counter()
    subprocess.run(["postmark"], input=script, capture_output=True, text=True, check=True)
    return time.perf_counter() - t


def postmark():
    if not shutil.which("postmark"):
        log("postmark not installed (apt-get install postmark); skipped")
        return
    labels = POSTMARK[:2] + POSTMARK[3:4] if QUICK else POSTMARK
    if SMOKE:
        labels = POSTMARK[:1]
    for label, files, rb, cb in labels:
        with Dovecot() as port:
            m = Mount(port, 4, 2, 1 << 20)
            m.mount()
            t_mount = postmark_run(m.mnt, files, rb, cb)
            m.umount()
        local = os.path.join(m.dir, "local")
        os.makedirs(local)
        t_local = postmark_run(local, files, rb, cb)
        m.remove()
        result(row="postmark", config=label, files=files, mount_s=f"{t_mount:.2f}",
               local_s=f"{t_local:.2f}", mount_over_local=f"{t_mount / t_local:.2f}")


def project_tar(path):
    """A tar of this project's own tree as committed (`git archive HEAD`; the smoke run:
    its docs only). Returns its entries (files and directories)."""
    what = ["docs"] if SMOKE else []
    with open(path, "wb") as f:
        subprocess.run(["git", "-C", ROOT, "archive", "--format=tar", "--prefix=tree/", "HEAD",
                        *what],
                       stdout=f, check=True)
    listing = subprocess.run(["tar", "-tf", path], capture_output=True, text=True, check=True)
    return len(listing.stdout.splitlines())


def timed(cmd, cwd=None):
    # Each step starts with nothing dirty in the page cache: the local directory's time is
    # then its own, not the writeback of what an earlier step (or run) left.
    os.sync()
    t = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - t


def made_durable(path):
    """Seconds until what was written under `path` is durable, the same commands on both
    sides: `sync -f` (syncfs: ext4 writes and commits everything; FUSE passes it on to no
    server but writes the kernel's dirty pages out), then `sync` of the directory itself
    (fsync: on the mount's root the mount commits every file still queued and writes its
    metadata batch, docs/mailfs.md 6; on ext4 the directory is already durable)."""
    t = time.perf_counter()
    for cmd in (["sync", "-f", path], ["sync", path]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            # On the mount after `git clone`: a writeback of a replaced file's pages got
            # ENOENT (the clone itself checks out whole); counted, not fatal.
            log(f"{' '.join(cmd)}: {r.stderr.strip()}")
            sync_errors[0] += 1
    return time.perf_counter() - t


def account_messages(port, users):
    """Messages in every folder of each of `users` (IMAP STATUS), summed per account."""
    import imaplib
    counts = []
    for u in users:
        c = imaplib.IMAP4("127.0.0.1", port)
        c.login(f"user{u}", f"pw{u}")
        total = 0
        for line in c.list()[1]:
            m = re.match(r'\(.*?\) (?:"[^"]*"|NIL) (.*)$', line.decode() if line else "")
            if not m:
                continue
            name = m.group(1).strip('"')
            typ, data = c.status(f'"{name}"', "(MESSAGES)")
            if typ == "OK":
                total += int(re.search(rb"MESSAGES (\d+)", data[0]).group(1))
        c.logout()
        counts.append(total)
    return counts


SMALL_STEPS = ("tar", "clone", "rm")
sync_errors = [0]


def small_steps(where, tar, after_tar=lambda: None):
    """The three steps in `where`, each timed alone and with what makes it durable:
    {step: (seconds, seconds until durable)}."""
    # (the smoke run clones only the last commit)
    clone = ["--depth", "1", f"file://{ROOT}"] if SMOKE else ["--no-hardlinks", ROOT]
    cmds = {"tar": ["tar", "-xf", tar], "clone": ["git", "clone", "-q", *clone, "clone"],
            "rm": ["rm", "-rf", "tree", "clone"]}
    out = {}
    for step in SMALL_STEPS:
        t = timed(cmds[step], cwd=where)
        out[step] = (t, t + made_durable(where))
        if step == "tar":
            after_tar()
    return out


def small():
    """Everyday small-file work (issue 41, item 3): a tar of the project's tree extracted,
    `git clone` of it, `rm -rf` of both, on the mount and on a local directory (ext4 here)
    in the same run, alternating, REPS times; each step also with what makes it durable
    (`made_durable`) counted on both sides. Ratios: median over the repetitions, and their
    range."""
    tar = os.path.join(WORK, "small.tar")
    entries = project_tar(tar)
    with Dovecot() as port:
        m = Mount(port, 4, 2, 1 << 20)
        before = account_messages(port, range(1, 5))
        m.mount()
        local = os.path.join(m.dir, "local")
        os.makedirs(local)
        runs = {"mount": [], "local": []}
        after = []
        for rep in range(REPS):
            count = (lambda: after.append(account_messages(port, range(1, 5)))) if rep == 0 else (lambda: None)
            runs["mount"].append(small_steps(m.mnt, tar, count))
            runs["local"].append(small_steps(local, tar))
        t = time.perf_counter()
        m.umount()
        t_umount = time.perf_counter() - t
        m.remove()
    kv = {"entries": entries, "reps": REPS}
    for step in SMALL_STEPS:
        for i, kind in ((0, ""), (1, "durable_")):
            mount = [r[step][i] for r in runs["mount"]]
            local = [r[step][i] for r in runs["local"]]
            ratios = [a / b for a, b in zip(mount, local)]
            kv[f"{step}_{kind}mount_s"] = f"{median(mount):.3f}"
            kv[f"{step}_{kind}local_s"] = f"{median(local):.3f}"
            kv[f"{step}_{kind}ratio"] = f"{median(ratios):.2f}"
            kv[f"{step}_{kind}ratio_range"] = f"{min(ratios):.2f}-{max(ratios):.2f}"
    added = [a - b for a, b in zip(after[0], before)]
    result(row="small", **kv, umount_s=f"{t_umount:.2f}", sync_errors=sync_errors[0],
           messages_per_account_per_entry=f"{max(added) / entries:.2f}",
           messages_added_per_account="/".join(str(a) for a in added))


def tree_cpu(root):
    """CPU seconds (user and system) of process `root` and its descendants, including
    children they have already reaped."""
    tick = os.sysconf("SC_CLK_TCK")
    parent, cpu = {}, {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(pid)] = int(fields[1])
        cpu[int(pid)] = sum(int(x) for x in fields[11:15]) / tick
    def under(pid):
        while pid > 1:
            if pid == root:
                return True
            pid = parent.get(pid, 0)
        return False
    return sum(c for pid, c in cpu.items() if under(pid))


def mount_pid(config):
    out = subprocess.run(["pgrep", "-f", f"fs --config {config} mount"], capture_output=True,
                         text=True).stdout.split()
    return int(out[-1]) if out else 0


def flat():
    window = 20 if SMOKE else 2000
    steps = [FLAT_ENTRIES * k // 4 for k in range(5)]
    with Dovecot() as port:
        m = Mount(port, 4, 2, 1 << 20)
        m.mount()
        mpid = mount_pid(m.config)
        local = os.path.join(m.dir, "local")
        os.makedirs(local)
        payload = b"x" * 100
        for where, label in ((m.mnt, "mount"), (local, "local")):
            d = os.path.join(where, "flat")
            os.mkdir(d)
            size = 0
            for target in steps:
                while size < target:
                    with open(os.path.join(d, f"f{size}"), "wb") as f:
                        f.write(payload)
                    size += 1
                if label == "mount":
                    time.sleep(1)  # the batch so far reaches the servers
                    before = account_messages(port, range(1, 5))
                    cpu0 = (tree_cpu(dovecot_pid[0]), tree_cpu(mpid))
                t = time.perf_counter()
                for i in range(window):
                    with open(os.path.join(d, f"w{i}"), "wb") as f:
                        f.write(payload)
                t_create = time.perf_counter() - t
                if label == "mount":
                    time.sleep(1)
                    after = account_messages(port, range(1, 5))
                t = time.perf_counter()
                for i in range(window):
                    os.rename(os.path.join(d, f"w{i}"), os.path.join(d, f"r{i}"))
                t_rename = time.perf_counter() - t
                t = time.perf_counter()
                for i in range(window):
                    os.unlink(os.path.join(d, f"r{i}"))
                t_unlink = time.perf_counter() - t
                row = dict(row="flat", where=label, entries=target,
                           creates_per_s=f"{window / t_create:.0f}",
                           renames_per_s=f"{window / t_rename:.0f}",
                           unlinks_per_s=f"{window / t_unlink:.0f}")
                if label == "mount":
                    time.sleep(1)
                    cpu1 = (tree_cpu(dovecot_pid[0]), tree_cpu(mpid))
                    added = [a - b for a, b in zip(after, before)]
                    row.update(
                        messages_per_account_per_file=f"{max(added) / window:.3f}",
                        dovecot_cpu_us_per_op=f"{(cpu1[0] - cpu0[0]) / (3 * window) * 1e6:.0f}",
                        mount_cpu_us_per_op=f"{(cpu1[1] - cpu0[1]) / (3 * window) * 1e6:.0f}",
                        folder_messages="/".join(str(a) for a in after))
                result(**row)
        m.umount()
        m.remove()


FIO = [
    ("seq_write", "--rw=write --bs=1M --size=256M --end_fsync=1"),
    # seq_write's file from a fresh mount with empty caches (a file fio laid out itself
    # would still be in the mount's memory cache).
    ("seq_read", "--rw=read --bs=1M --size=256M --filename=seq_write.0.0"),
    ("rand_read", "--rw=randread --bs=4k --size=64M --runtime=15 --time_based"),
    # The same file from a fresh mount with empty caches: every read goes to the servers
    # (partial FETCH of the segments it needs).
    ("rand_read_cold", "--rw=randread --bs=4k --size=64M --runtime=15 --time_based --filename=rand_read.0.0"),
    ("rand_write", "--rw=randwrite --bs=64k --size=64M --end_fsync=1 --runtime=15 --time_based"),
]


def fio_run(directory, name, args):
    if SMOKE:
        # A second of each job on a few MiB.
        args = (args.replace("--size=256M", "--size=8M").replace("--size=64M", "--size=4M")
                .replace("--runtime=15", "--runtime=1"))
    cmd = ["fio", f"--name={name}", f"--directory={directory}", "--ioengine=psync",
           "--numjobs=1", "--group_reporting", "--output-format=terse", "--terse-version=3"] + args.split()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"fio {name} in {directory} failed: {r.stdout}{r.stderr}")
    out = r.stdout.strip().splitlines()[-1]
    f = out.split(";")
    # terse v3: read bw (KiB/s) field 7, read iops 8; write bw field 48, write iops 49.
    rbw, wbw = float(f[6]), float(f[47])
    return (rbw + wbw) / 1024


def fio():
    if not shutil.which("fio"):
        log("fio not installed; skipped")
        return
    with Dovecot() as port:
        fio_on(port)


def fio_on(port):
    m = Mount(port, 4, 2, 1 << 20)
    m.mount()
    local = os.path.join(m.dir, "local")
    os.makedirs(local)
    for name, args in FIO:
        if name in ("seq_read", "rand_read_cold"):
            # Cold: a fresh mount with an empty cache, and a dropped local page cache.
            m.umount()
            m.mount(wipe_cache=True)
            subprocess.run(["sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches"], check=False)
        mbps_mount = fio_run(m.mnt, name, args)
        mbps_local = fio_run(local, name, args)
        result(row="fio", job=name, mount_MiBps=f"{mbps_mount:.1f}", local_MiBps=f"{mbps_local:.1f}")
    m.umount()


def account_usage(port, user, folder):
    """(messages, bytes) of one account's folder: STATUS MESSAGES and GETQUOTAROOT STORAGE
    (the test Dovecot keeps a maildir quota; the folder is the account's only one)."""
    import imaplib
    c = imaplib.IMAP4("127.0.0.1", port)
    c.login(f"user{user}", f"pw{user}")
    typ, data = c.status(f'"{folder}"', "(MESSAGES)")
    messages = int(re.search(rb"MESSAGES (\d+)", data[0]).group(1))
    typ, data = c.getquotaroot(folder)
    used = 0
    for line in data[1] if len(data) > 1 else []:
        m = re.search(rb"STORAGE (\d+) \d+", line or b"")
        if m:
            used = int(m.group(1)) * 1024
    c.logout()
    return messages, used


def rewrite():
    """fsx-style rewrites of one file (issue 41): account size against live bytes, and the
    rate per tenth of the run."""
    import random
    rng = random.Random(41)
    with Dovecot() as port:
        m = Mount(port, 1, 2, 128 << 10, members=2)
        m.mount()
        folder = f"fs{run_no[0]}"
        path = os.path.join(m.mnt, "db")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        model = bytearray()
        tenth = max(REWRITE_OPS // 10, 1)
        rates, samples = [], []
        t = time.perf_counter()
        for op in range(REWRITE_OPS):
            roll = rng.randrange(12)
            if roll < 6:
                off = rng.randrange(REWRITE_BYTES)
                n = 1 + rng.randrange(min(REWRITE_BYTES - off, REWRITE_WRITE_MAX))
                data = rng.randbytes(n)
                os.pwrite(fd, data, off)
                if len(model) < off + n:
                    model.extend(bytes(off + n - len(model)))
                model[off:off + n] = data
            elif roll < 10:
                if model:
                    off = rng.randrange(len(model))
                    n = 1 + rng.randrange(min(len(model) - off, REWRITE_WRITE_MAX))
                    if os.pread(fd, n, off) != model[off:off + n]:
                        sys.exit(f"rewrite: op {op}: read of {n} bytes at {off} differs")
            else:
                size = rng.randrange(REWRITE_BYTES + 1)
                os.ftruncate(fd, size)
                del model[size:]
                model.extend(bytes(size - len(model)))
            if op % 4 == 3:
                os.fsync(fd)
            if op % tenth == tenth - 1:
                now = time.perf_counter()
                rates.append(tenth / (now - t))
                samples.append([account_usage(port, u, folder) for u in (1, 2)])
                log(f"rewrite: {op + 1} ops, {rates[-1]:.0f} ops/s, accounts {samples[-1]}")
                t = time.perf_counter()
        os.fsync(fd)
        os.close(fd)
        time.sleep(4)  # reclaim runs reclaim_delay_ms (2 s) behind the commits
        end = [account_usage(port, u, folder) for u in (1, 2)]
        stats = dict(l.split("=", 1) for l in m.fs("stats").splitlines() if "=" in l)
        m.umount()
        m.remove()
    live = len(model)
    bytes_max = max(a[1] for a in end)
    result(row="rewrite", ops=REWRITE_OPS, file_bytes_max=REWRITE_BYTES,
           write_max=REWRITE_WRITE_MAX, live_bytes=live,
           account_messages="/".join(str(a[0]) for a in end),
           account_bytes="/".join(str(a[1]) for a in end),
           account_bytes_max=bytes_max,
           bytes_per_live=f"{bytes_max / max(live, 1):.1f}",
           first_ops_per_s=f"{rates[0]:.0f}", last_ops_per_s=f"{rates[-1]:.0f}",
           last_to_first=f"{rates[-1] / rates[0]:.2f}",
           ops_per_s_by_tenth="/".join(f"{r:.0f}" for r in rates),
           messages_by_tenth="/".join(str(max(a[0] for a in s)) for s in samples),
           mib_by_tenth="/".join(f"{max(a[1] for a in s) / 2**20:.1f}" for s in samples),
           **{f"account{u}_messages_by_tenth": "/".join(str(s[u - 1][0]) for s in samples)
              for u in (1, 2)},
           **{f"account{u}_mib_by_tenth": "/".join(f"{s[u - 1][1] / 2**20:.1f}" for s in samples)
              for u in (1, 2)},
           reclaimed_messages=stats.get("reclaimed_messages", "0"),
           reclaimed_bytes=stats.get("reclaimed_bytes", "0"),
           reclaimed_log_pages=stats.get("reclaimed_log_pages", "0"),
           reclaim_dropped=stats.get("reclaim_dropped", "0"))
    # Issue 41's stated bound: each account at most 4x live + 64 MiB, and the last tenth of
    # the run within 1.5x of the first's rate.
    limit = 4 * live + (64 << 20)
    ratio = rates[-1] / rates[0]
    space_ok, rate_ok = bytes_max <= limit, ratio * 1.5 >= 1 and ratio <= 1.5
    print(f"BOUND rewrite: account bytes {bytes_max} <= 4 x live {live} + 64 MiB = {limit}: "
          f"{'ok' if space_ok else 'FAIL'}; last/first tenth {rates[-1]:.0f}/{rates[0]:.0f} ops/s "
          f"= {ratio:.2f}, within 1.5x: {'ok' if rate_ok else 'FAIL'}", flush=True)


def main():
    for b in (MAILSTOW, RAW, DOVECOT):
        if not os.path.exists(b):
            sys.exit(f"{b} missing: bench/run-mailfs.sh builds it (BIN_DIR: where it is)")
    log(f"maildirs in {MAILDIR_TMP}, work in {WORK}")
    try:
        if "big" in ONLY:
            big()
        if "meta" in ONLY:
            meta()
        if "sweep" in ONLY:
            sweep()
        if "postmark" in ONLY:
            postmark()
        if "fio" in ONLY:
            fio()
        if "small" in ONLY:
            small()
        if "flat" in ONLY:
            flat()
        if "rewrite" in ONLY:
            rewrite()
    finally:
        # A run that failed half way leaves its mount: unmount before removing it.
        for run in sorted(os.listdir(WORK)) if os.path.isdir(WORK) else []:
            mnt = os.path.join(WORK, run, "mnt")
            if os.path.ismount(mnt):
                subprocess.run([MAILSTOW, "fs", "umount", mnt], capture_output=True)
        shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
