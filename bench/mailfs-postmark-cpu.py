#!/usr/bin/env python3
"""Postmark on one mount with the CPU time of the mount server and of Dovecot's imap
processes, and the mount's peak resident memory: what the allocator tunables of the mount
server were chosen by (docs/mailfs.md 6, docs/benchmarks.md).

    python3 bench/mailfs-postmark-cpu.py                 the mount as shipped
    TUNABLES="glibc.malloc...." python3 bench/mailfs-postmark-cpu.py
                                                         the mount server with these tunables
    TUNABLES=none ...                                    glibc's defaults
    FILES=100 DIRECT_IO=true ...                         as bench/mailfs-bench.py
    SMOKE=1 BIN_DIR=target/ci ...                        a few small files (as mailfs-bench.py's)

Needs the binaries (BIN_DIR, as for bench/mailfs-bench.py), Dovecot and Postmark, as
bench/run-mailfs.sh (which runs this too, and builds and installs them)."""

import importlib.util
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("mailfs_bench", os.path.join(HERE, "mailfs-bench.py"))
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

FILES = int(os.environ.get("FILES", "50"))
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def imap_cpu_seconds():
    total = 0.0
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            if open(f"/proc/{p}/comm").read().strip() == "imap":
                total += cpu_seconds(p)
        except OSError:
            pass
    return total


def main():
    tunables = os.environ.get("TUNABLES")
    with bench.Dovecot() as port:
        m = bench.Mount(port, 4, 2, 1 << 20)
        # Only the mount server gets them: Dovecot is already running, Postmark starts after.
        if tunables:
            os.environ["GLIBC_TUNABLES"] = "" if tunables == "none" else tunables
        m.mount()
        os.environ.pop("GLIBC_TUNABLES", None)
        pid = bench.mount_pid(m.config)
        if not pid:
            sys.exit("no mount server")
        mount0, imap0 = cpu_seconds(pid), imap_cpu_seconds()
        script = (f"set location {m.mnt}\nset number {FILES}\nset transactions {bench.POSTMARK_TRANSACTIONS}\n"
                  f"set size 4096 {bench.POSTMARK_SIZE_MAX}\nset bias read 5\nset bias create 5\nset seed 42\n"
                  "run\nquit\n")
        t = time.perf_counter()
        subprocess.run(["postmark"], input=script, capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t
        mount_cpu, imap_cpu = cpu_seconds(pid) - mount0, imap_cpu_seconds() - imap0
        status = {line.split(":")[0]: int(line.split()[1])
                  for line in open(f"/proc/{pid}/status") if line.startswith(("VmHWM", "VmRSS"))}
        m.umount()
        m.remove()
    bench.result(row="postmark_cpu", files=FILES, wall_s=f"{wall:.2f}",
                 mount_cpu_s=f"{mount_cpu:.2f}", imap_cpu_s=f"{imap_cpu:.2f}",
                 mount_peak_rss_mb=f"{status['VmHWM'] / 1000:.0f}",
                 tunables=(tunables or "shipped").replace(":", ","))


if __name__ == "__main__":
    main()
