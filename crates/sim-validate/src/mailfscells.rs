//! The mail file system's striping model (docs/simulator.md 8b) predicted for this machine,
//! then measured: a private Dovecot on loopback holds the accounts, and a real mount (the
//! `mailstow` binary) writes and reads files over stripe widths, connections and block
//! sizes, as the thesis's sweeps (and `bench/run-mailfs.sh`) do.
//!
//! The model is calibrated on the same Dovecot, never on the cells it is judged on:
//! - the server's CPU per command and per wire byte, appending and fetching: plain IMAP of
//!   32 KiB and 1 MiB messages, the machine's CPU time less this process's;
//! - the mount's CPU per message and per byte, written and read: one large file through a
//!   real mount in 1 MiB blocks and one in 128 KiB blocks (the mount server's CPU time);
//! - the serial path of a call, per byte: writing into a mount whose blocks are too large
//!   for anything to be uploaded yet, and reading back what its memory cache holds;
//! - what opening a file costs beyond its messages: a 4 KiB file written and read, less
//!   what the rest of the model says for it;
//! - half a NOOP's round trip as the one-way latency.
//!
//! Everything shares this machine's cores, as in the model (`shared_cores`).

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use sim_models::Op;
use sim_run::mailfs::MailfsParams;
use sim_run::{Workload, WorkloadKind};
use test_peers::Dovecot;

use crate::ValidateError;

/// Accounts on the private Dovecot: the widest stripe.
const USERS: usize = 8;
/// The calibration's stripe and the program's write and read size.
const CALIBRATION_ACCOUNTS: usize = 4;
const CALIBRATION_CONNECTIONS: usize = 2;
const RECORD_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, Serialize)]
pub struct MailfsCellResult {
    pub name: String,
    /// Milliseconds for the whole file: open, write, fsync, close; or a fresh mount's read.
    pub real_ms: f64,
    pub sim_ms: f64,
    /// |real - sim| / sim: the error on the rate.
    pub error: f64,
}

/// The model's costs as measured here.
#[derive(Debug, Clone, Serialize)]
pub struct MailfsCalibration {
    pub latency_us: f64,
    pub server_append_ns: f64,
    pub server_append_ns_per_byte: f64,
    pub server_fetch_ns: f64,
    pub server_fetch_ns_per_byte: f64,
    pub client_write_message_ns: f64,
    pub client_write_ns_per_byte: f64,
    pub client_read_message_ns: f64,
    pub client_read_ns_per_byte: f64,
    pub program_write_ns_per_byte: f64,
    pub program_read_ns_per_byte: f64,
    pub file_write_ns: f64,
    pub file_read_ns: f64,
    pub connect_ns: f64,
    pub client_metadata_ns: f64,
    pub cores: u32,
}

fn io(what: &str) -> impl Fn(std::io::Error) -> ValidateError + '_ {
    move |e| ValidateError::Io(what.into(), e)
}

/// CPU time of a process, from `/proc/PID/stat` (all its threads).
fn process_cpu(pid: &str) -> Duration {
    let ticks = rustix::param::clock_ticks_per_second().max(1);
    let Ok(text) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Duration::ZERO;
    };
    // After the command name in parentheses: state is field 3, utime 14 and stime 15.
    let after = text.rsplit_once(')').map_or("", |(_, rest)| rest);
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    let t = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    Duration::from_nanos(t * 1_000_000_000 / ticks)
}

/// Busy CPU time of the whole machine, from `/proc/stat`.
fn machine_cpu() -> Duration {
    let ticks = rustix::param::clock_ticks_per_second().max(1);
    let text = fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<u64> = text
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // user nice system idle iowait irq softirq steal: all but idle and iowait.
    let busy: u64 = [0, 1, 2, 5, 6]
        .iter()
        .map(|&i| f.get(i).copied().unwrap_or(0))
        .sum();
    Duration::from_nanos(busy * 1_000_000_000 / ticks)
}

/// CPU spent by the machine and by this process around `f`.
struct Spent {
    machine: Duration,
    own: Duration,
}

fn spent<T>(f: impl FnOnce() -> Result<T, ValidateError>) -> Result<(T, Spent), ValidateError> {
    let (m0, o0) = (machine_cpu(), process_cpu("self"));
    let r = f()?;
    let s = Spent {
        machine: machine_cpu().saturating_sub(m0),
        own: process_cpu("self").saturating_sub(o0),
    };
    Ok((r, s))
}

/// A straight line through two points: (intercept, slope).
fn line(x0: f64, y0: f64, x1: f64, y1: f64) -> (f64, f64) {
    let slope = ((y1 - y0) / (x1 - x0)).max(0.0);
    ((y0 - slope * x0).max(0.0), slope)
}

/// Plain IMAP over `CALIBRATION_ACCOUNTS` × `CALIBRATION_CONNECTIONS` sessions: `count`
/// messages of `bytes` appended (as the mount builds them, base64), then fetched back.
/// The server's CPU for each phase: the machine's less this process's.
fn raw_imap(
    rt: &tokio::runtime::Runtime,
    server: &Dovecot,
    folder: &str,
    count: usize,
    bytes: usize,
) -> Result<RawCosts, ValidateError> {
    let net = |e: imap_client::Error| ValidateError::Io("IMAP".into(), std::io::Error::other(e));
    let (mut sessions, connect) = spent(|| {
        let mut sessions = Vec::new();
        for a in 0..CALIBRATION_ACCOUNTS {
            let (user, password) = server.user(a + 1);
            for _ in 0..CALIBRATION_CONNECTIONS {
                let mut cfg = imap_client::Config::new(
                    "127.0.0.1",
                    server.port(),
                    user.clone(),
                    password.clone(),
                );
                cfg.tls = imap_client::Tls::None;
                let folder = folder.to_string();
                let c = rt
                    .block_on(async move {
                        let mut c = imap_client::Client::connect(&cfg).await?;
                        c.create(&folder).await?;
                        c.select(&folder).await?;
                        Ok::<_, imap_client::Error>(c)
                    })
                    .map_err(net)?;
                sessions.push(c);
            }
        }
        Ok(sessions)
    })?;
    let payload: Arc<Vec<u8>> = Arc::new((0..bytes).map(|i| (i * 7 + 3) as u8).collect());
    let per = count.div_ceil(sessions.len());
    let folder = folder.to_string();
    let (done, append) = spent(|| {
        rt.block_on(async {
            let mut tasks = Vec::new();
            for (s, mut c) in sessions.drain(..).enumerate() {
                let payload = payload.clone();
                let folder = folder.clone();
                tasks.push(tokio::spawn(async move {
                    let mut uids = Vec::new();
                    for i in 0..per {
                        let m = mailfs::imap_remote::build_message(
                            &format!("calibration {s}.{i}"),
                            &payload,
                            false,
                        );
                        let got = c.append(&folder, &[m.as_slice()], false).await?;
                        uids.extend(got.into_iter().flatten());
                    }
                    Ok::<_, imap_client::Error>((c, uids))
                }));
            }
            let mut done = Vec::new();
            for t in tasks {
                done.push(
                    t.await
                        .map_err(|e| imap_client::Error::Unusable(e.to_string()))??,
                );
            }
            Ok::<_, imap_client::Error>(done)
        })
        .map_err(net)
    })?;
    let (_, fetch) = spent(|| {
        rt.block_on(async {
            let mut tasks = Vec::new();
            for (mut c, uids) in done {
                tasks.push(tokio::spawn(async move {
                    for u in uids {
                        if let Some(m) = c.uid_fetch_message(u).await? {
                            let body = &m[imap_client::body_start(&m)..];
                            let _ = mailfs::imap_remote::decode_base64_lines(body);
                        }
                    }
                    Ok::<_, imap_client::Error>(())
                }));
            }
            for t in tasks {
                t.await
                    .map_err(|e| imap_client::Error::Unusable(e.to_string()))??;
            }
            Ok::<_, imap_client::Error>(())
        })
        .map_err(net)
    })?;
    let n = (per * CALIBRATION_ACCOUNTS * CALIBRATION_CONNECTIONS) as u32;
    Ok(RawCosts {
        connect: connect.machine.saturating_sub(connect.own)
            / (CALIBRATION_ACCOUNTS * CALIBRATION_CONNECTIONS) as u32,
        append: append.machine.saturating_sub(append.own) / n,
        fetch: fetch.machine.saturating_sub(fetch.own) / n,
    })
}

/// The server's CPU per session taken (connect, LOGIN, CREATE, SELECT), per APPEND and per
/// FETCH.
struct RawCosts {
    connect: Duration,
    append: Duration,
    fetch: Duration,
}

/// Half a NOOP's round trip on one session.
fn noop_latency(rt: &tokio::runtime::Runtime, server: &Dovecot) -> Result<Duration, ValidateError> {
    let (user, password) = server.user(1);
    let mut cfg = imap_client::Config::new("127.0.0.1", server.port(), user, password);
    cfg.tls = imap_client::Tls::None;
    let rounds = 200u32;
    rt.block_on(async {
        let mut c = imap_client::Client::connect(&cfg).await?;
        let t = Instant::now();
        for _ in 0..rounds {
            c.noop().await?;
        }
        Ok::<_, imap_client::Error>(t.elapsed() / rounds / 2)
    })
    .map_err(|e| ValidateError::Io("IMAP".into(), std::io::Error::other(e)))
}

/// One mail file system on the private Dovecot: `accounts` accounts in as many groups.
struct Rig<'a> {
    mailstow: &'a Path,
    dir: PathBuf,
    config: PathBuf,
    mnt: PathBuf,
    server_pid: Option<String>,
}

impl<'a> Rig<'a> {
    fn new(
        mailstow: &'a Path,
        work: &Path,
        server: &Dovecot,
        n: usize,
        accounts: usize,
        connections: usize,
        block: u64,
    ) -> Result<Rig<'a>, ValidateError> {
        let dir = work.join(format!("fs{n}"));
        let mnt = dir.join("mnt");
        fs::create_dir_all(&mnt).map_err(io("mount point"))?;
        let mut text = format!(
            "[fs]\nblock_size = {block}\nfolder = \"fs{n}\"\n[cache]\ndir = {:?}\n[encryption]\npassphrase = \"validate\"\n",
            dir.join("cache")
        );
        for a in 0..accounts {
            let (user, password) = server.user(a + 1);
            text.push_str(&format!(
                "[[group]]\n[[group.account]]\nhost = \"127.0.0.1\"\nport = {}\ntls = \"none\"\nuser = \"{user}\"\npassword = \"{password}\"\nconnections = {connections}\n",
                server.port()
            ));
        }
        let config = dir.join("fs.toml");
        fs::write(&config, text).map_err(io("fs.toml"))?;
        let rig = Rig {
            mailstow,
            dir,
            config,
            mnt,
            server_pid: None,
        };
        rig.fs(&["mkfs"])?;
        Ok(rig)
    }

    fn fs(&self, args: &[&str]) -> Result<String, ValidateError> {
        let out = Command::new(self.mailstow)
            .arg("fs")
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .output()
            .map_err(io("mailstow fs"))?;
        if !out.status.success() {
            return Err(ValidateError::Io(
                format!("mailstow fs {}", args.join(" ")),
                std::io::Error::other(String::from_utf8_lossy(&out.stderr).into_owned()),
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Mounts (with an empty cache if `fresh`); the server's pid for its CPU time.
    fn mount(&mut self, fresh: bool) -> Result<(), ValidateError> {
        if fresh {
            let _ = fs::remove_dir_all(self.dir.join("cache"));
        }
        let mnt = self.mnt.to_string_lossy().into_owned();
        let out = self.fs(&["mount", &mnt])?;
        self.server_pid = out
            .split("server pid ")
            .nth(1)
            .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
            .map(str::to_string);
        Ok(())
    }

    fn umount(&mut self) -> Result<(), ValidateError> {
        let out = Command::new(self.mailstow)
            .args(["fs", "umount"])
            .arg(&self.mnt)
            .output()
            .map_err(io("mailstow fs umount"))?;
        self.server_pid = None;
        if !out.status.success() {
            return Err(ValidateError::Io(
                "mailstow fs umount".into(),
                std::io::Error::other(String::from_utf8_lossy(&out.stderr).into_owned()),
            ));
        }
        Ok(())
    }

    fn server_cpu(&self) -> Duration {
        self.server_pid
            .as_deref()
            .map_or(Duration::ZERO, process_cpu)
    }
}

impl Drop for Rig<'_> {
    fn drop(&mut self) {
        if self.server_pid.is_some() {
            let _ = self.umount();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Open, write in 1 MiB calls, fsync, close.
fn write_file(path: &Path, data: &[u8]) -> Result<Duration, ValidateError> {
    let t = Instant::now();
    let mut f = fs::File::create(path).map_err(io("write"))?;
    for piece in data.chunks(RECORD_BYTES) {
        f.write_all(piece).map_err(io("write"))?;
    }
    f.sync_all().map_err(io("fsync"))?;
    drop(f);
    Ok(t.elapsed())
}

fn read_file(path: &Path, len: usize) -> Result<Duration, ValidateError> {
    let t = Instant::now();
    let mut f = fs::File::open(path).map_err(io("read"))?;
    let mut buf = vec![0u8; RECORD_BYTES];
    let mut n = 0;
    loop {
        let got = f.read(&mut buf).map_err(io("read"))?;
        if got == 0 {
            break;
        }
        n += got;
    }
    if n != len {
        return Err(ValidateError::Io(
            path.display().to_string(),
            std::io::Error::other(format!("read {n} bytes of {len}")),
        ));
    }
    Ok(t.elapsed())
}

/// The mount's CPU (server process) and the program's (this one) for a file of `bytes`
/// written, then read from a fresh mount, in `block` blocks.
struct MountCost {
    blocks: f64,
    bytes: f64,
    mount_write: Duration,
    mount_read: Duration,
}

fn mount_cost(
    mailstow: &Path,
    work: &Path,
    server: &Dovecot,
    n: usize,
    bytes: usize,
    block: u64,
) -> Result<MountCost, ValidateError> {
    let mut rig = Rig::new(
        mailstow,
        work,
        server,
        n,
        CALIBRATION_ACCOUNTS,
        CALIBRATION_CONNECTIONS,
        block,
    )?;
    let data = pattern(bytes, n as u64);
    let file = rig.mnt.join("calibration");
    rig.mount(false)?;
    let before = rig.server_cpu();
    write_file(&file, &data)?;
    let mount_write = rig.server_cpu().saturating_sub(before);
    rig.umount()?;
    rig.mount(true)?;
    let before = rig.server_cpu();
    read_file(&file, bytes)?;
    let mount_read = rig.server_cpu().saturating_sub(before);
    rig.umount()?;
    Ok(MountCost {
        blocks: bytes.div_ceil(block as usize) as f64,
        bytes: bytes as f64,
        mount_write,
        mount_read,
    })
}

/// `runs` new files of `data`, each written on a mount and read back from a fresh one
/// with an empty cache: their write and read times.
fn write_then_read(
    rig: &mut Rig<'_>,
    data: &[u8],
    runs: usize,
) -> Result<(Vec<Duration>, Vec<Duration>), ValidateError> {
    let (mut writes, mut reads) = (Vec::new(), Vec::new());
    for r in 0..runs {
        let file = rig.mnt.join(format!("f{}.{r}", data.len()));
        rig.mount(false)?;
        writes.push(write_file(&file, data)?);
        rig.umount()?;
        rig.mount(true)?;
        reads.push(read_file(&file, data.len())?);
        rig.umount()?;
    }
    Ok((writes, reads))
}

fn pattern(n: usize, seed: u64) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u64).wrapping_mul(0x9e37_79b9).wrapping_add(seed) as u8)
        .collect()
}

/// The serial path of a call, per byte written and read: 16 MiB written into 4 MiB blocks
/// (the write-behind batch is 8 blocks: nothing is uploaded until the fsync, untimed), then
/// read back from the memory cache.
fn serial_path(
    mailstow: &Path,
    work: &Path,
    server: &Dovecot,
) -> Result<(f64, f64), ValidateError> {
    let bytes = 16 << 20;
    let mut rig = Rig::new(
        mailstow,
        work,
        server,
        1002,
        CALIBRATION_ACCOUNTS,
        CALIBRATION_CONNECTIONS,
        4 << 20,
    )?;
    let data = pattern(bytes, 2);
    let path = rig.mnt.join("serial");
    rig.mount(false)?;
    let mut f = fs::File::create(&path).map_err(io("write"))?;
    let t = Instant::now();
    for piece in data.chunks(RECORD_BYTES) {
        f.write_all(piece).map_err(io("write"))?;
    }
    let write = t.elapsed();
    f.sync_all().map_err(io("fsync"))?;
    drop(f);
    let read = read_file(&path, bytes)?;
    rig.umount()?;
    Ok((
        write.as_nanos() as f64 / bytes as f64,
        read.as_nanos() as f64 / bytes as f64,
    ))
}

/// A 4 KiB file written (create, write, fsync, close) and read from a fresh mount over
/// `accounts` accounts, medians of five: (write, read) less what the model predicts for it
/// without per-file costs, in ns.
fn small_file_residual(
    mailstow: &Path,
    work: &Path,
    server: &Dovecot,
    cal: &MailfsCalibration,
    accounts: usize,
) -> Result<(f64, f64), ValidateError> {
    let bytes = 4096;
    let mut rig = Rig::new(
        mailstow,
        work,
        server,
        1003 + accounts,
        accounts,
        CALIBRATION_CONNECTIONS,
        1 << 20,
    )?;
    let (writes, reads) = write_then_read(&mut rig, &pattern(bytes, 3), 5)?;
    let p = params(cal, accounts, CALIBRATION_CONNECTIONS, 1 << 20);
    let w = median_ms(writes) * 1e6 - predict(&p, Op::Write, bytes as u64)? * 1e9;
    let r = median_ms(reads) * 1e6 - predict(&p, Op::Read, bytes as u64)? * 1e9;
    Ok((w, r))
}

/// What a file costs beyond its messages' modelled costs, and what each directory
/// message costs the mount (its encoding, sealing and the engine's bookkeeping): small
/// files over one account and over four, whose writes differ by nine directory messages.
fn per_file(
    mailstow: &Path,
    work: &Path,
    server: &Dovecot,
    cal: &MailfsCalibration,
) -> Result<(f64, f64, f64), ValidateError> {
    let (w1, r1) = small_file_residual(mailstow, work, server, cal, 1)?;
    let (w4, r4) = small_file_residual(mailstow, work, server, cal, 4)?;
    // A write sends three directory rounds, one message per account each.
    let per_message = ((w4 - w1) / 9.0).max(0.0);
    let file_write = (w1 - 3.0 * per_message).max(0.0);
    Ok((file_write, ((r1 + r4) / 2.0).max(0.0), per_message))
}

fn calibrate(
    mailstow: &Path,
    work: &Path,
    server: &Dovecot,
    quick: bool,
) -> Result<MailfsCalibration, ValidateError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(io("runtime"))?;
    let wire = |b: usize| b as f64 * 78.0 / 57.0 + 400.0;
    let (small, large) = (32 << 10, 1 << 20);
    let (small_n, large_n) = if quick { (512, 128) } else { (1024, 256) };
    let small_costs = raw_imap(&rt, server, "calibrate-small", small_n, small)?;
    let large_costs = raw_imap(&rt, server, "calibrate-large", large_n, large)?;
    let (command_append, append_per_byte) = line(
        wire(small),
        small_costs.append.as_nanos() as f64,
        wire(large),
        large_costs.append.as_nanos() as f64,
    );
    let (command_fetch, fetch_per_byte) = line(
        wire(small),
        small_costs.fetch.as_nanos() as f64,
        wire(large),
        large_costs.fetch.as_nanos() as f64,
    );
    let connect = (small_costs.connect + large_costs.connect) / 2;
    let latency = noop_latency(&rt, server)?;
    let (program_write, program_read) = serial_path(mailstow, work, server)?;
    let bytes = if quick { 128 << 20 } else { 256 << 20 };
    let big = mount_cost(mailstow, work, server, 1000, bytes, 1 << 20)?;
    let many = mount_cost(mailstow, work, server, 1001, bytes / 2, 128 << 10)?;
    // Per message and per byte from two runs: (blocks, bytes) differ in both.
    let fit = |a: Duration, b: Duration| {
        let (ya, yb) = (a.as_nanos() as f64, b.as_nanos() as f64);
        // ya = m * blocks_a + c * bytes_a; yb likewise: two equations, two unknowns.
        let det = big.blocks * many.bytes - many.blocks * big.bytes;
        let m = (ya * many.bytes - yb * big.bytes) / det;
        let c = (big.blocks * yb - many.blocks * ya) / det;
        (m.max(0.0), c.max(0.0))
    };
    let (message_w, write_per_byte) = fit(big.mount_write, many.mount_write);
    let (message_r, read_per_byte) = fit(big.mount_read, many.mount_read);
    let mut cal = MailfsCalibration {
        latency_us: latency.as_secs_f64() * 1e6,
        server_append_ns: command_append,
        server_append_ns_per_byte: append_per_byte,
        server_fetch_ns: command_fetch,
        server_fetch_ns_per_byte: fetch_per_byte,
        client_write_message_ns: message_w,
        // The mount's share of the serial path is in its CPU time too: not twice.
        client_write_ns_per_byte: (write_per_byte - program_write).max(0.0),
        client_read_message_ns: message_r,
        client_read_ns_per_byte: (read_per_byte - program_read).max(0.0),
        program_write_ns_per_byte: program_write,
        program_read_ns_per_byte: program_read,
        file_write_ns: 0.0,
        file_read_ns: 0.0,
        connect_ns: connect.as_nanos() as f64,
        client_metadata_ns: 0.0,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()) as u32,
    };
    let (file_write, file_read, per_message) = per_file(mailstow, work, server, &cal)?;
    cal.file_write_ns = file_write;
    cal.file_read_ns = file_read;
    cal.client_metadata_ns = per_message;
    Ok(cal)
}

fn params(
    cal: &MailfsCalibration,
    accounts: usize,
    connections: usize,
    block: u64,
) -> MailfsParams {
    MailfsParams {
        accounts: accounts as u32,
        connections: connections as u32,
        block_bytes: block,
        shared_cores: true,
        client_cores: cal.cores,
        latency_us: cal.latency_us,
        program_write_ns_per_byte: cal.program_write_ns_per_byte,
        program_read_ns_per_byte: cal.program_read_ns_per_byte,
        file_write_ns: cal.file_write_ns,
        file_read_ns: cal.file_read_ns,
        connect_ns: cal.connect_ns,
        client_metadata_ns: cal.client_metadata_ns,
        client_write_message_ns: cal.client_write_message_ns,
        client_write_ns_per_byte: cal.client_write_ns_per_byte,
        client_read_message_ns: cal.client_read_message_ns,
        client_read_ns_per_byte: cal.client_read_ns_per_byte,
        server_append_ns: cal.server_append_ns,
        server_append_ns_per_byte: cal.server_append_ns_per_byte,
        server_fetch_ns: cal.server_fetch_ns,
        server_fetch_ns_per_byte: cal.server_fetch_ns_per_byte,
        ..MailfsParams::default()
    }
}

fn predict(p: &MailfsParams, op: Op, bytes: u64) -> Result<f64, ValidateError> {
    let w = Workload {
        op,
        bytes,
        record_bytes: (RECORD_BYTES as u64).min(bytes),
        ..Workload::new("mailfs", WorkloadKind::Mailfs)
    };
    sim_run::mailfs::seconds(p, &w).map_err(|e| ValidateError::Sim(e.to_string()))
}

fn median_ms(mut xs: Vec<Duration>) -> f64 {
    bench::median(&mut xs).as_secs_f64() * 1e3
}

fn cell(name: String, real_ms: f64, sim_s: f64) -> MailfsCellResult {
    let sim_ms = sim_s * 1e3;
    MailfsCellResult {
        name,
        real_ms,
        sim_ms,
        error: (real_ms - sim_ms).abs() / sim_ms.max(1e-9),
    }
}

/// The sweep: predicted, then measured, for each stripe.
pub(crate) fn cells(
    mailstow: Option<&Path>,
    dir: &Path,
    quick: bool,
    skipped: &mut Vec<String>,
) -> Result<(Option<MailfsCalibration>, Vec<MailfsCellResult>), ValidateError> {
    let Some(mailstow) = mailstow else {
        skipped.push("mail file system cells: no mailstow binary to mount with".into());
        return Ok((None, Vec::new()));
    };
    if !Path::new("/dev/fuse").exists() {
        skipped.push("mail file system cells: no /dev/fuse".into());
        return Ok((None, Vec::new()));
    }
    // Maildirs in memory, as `bench/run-mailfs.sh` keeps them: the server's work is CPU,
    // not a disk's flushes.
    let shm = Path::new("/dev/shm");
    let parent = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let server = match Dovecot::start_in(&parent, USERS) {
        Ok(s) => s,
        Err(e) => {
            skipped.push(format!(
                "mail file system cells: Dovecot did not start ({e})"
            ));
            return Ok((None, Vec::new()));
        }
    };
    let work = dir.join("mailfs");
    fs::create_dir_all(&work).map_err(io("mailfs work"))?;
    let cal = calibrate(mailstow, &work, &server, quick)?;
    let blocks: &[u64] = if quick {
        &[128 << 10, 1 << 20]
    } else {
        &[128 << 10, 512 << 10, 1 << 20, 4 << 20]
    };
    let widths: &[usize] = if quick { &[1, 4] } else { &[1, 2, 4, 8] };
    let conns: &[usize] = if quick { &[2] } else { &[1, 2] };
    let sizes = [32usize << 10, 32 << 20];
    let repeats = if quick { 3 } else { 5 };
    let mut out = Vec::new();
    let mut n = 0;
    for &c in conns {
        for &w in widths {
            for &b in blocks {
                n += 1;
                let p = params(&cal, w, c, b);
                let mut rig = Rig::new(mailstow, &work, &server, n, w, c, b)?;
                for &size in &sizes {
                    let runs = if size < 1 << 20 { repeats } else { 3 };
                    let (writes, reads) =
                        write_then_read(&mut rig, &pattern(size, n as u64), runs)?;
                    let label =
                        |op: &str| format!("mailfs-{op}-{}k-b{}k-w{w}-c{c}", size >> 10, b >> 10);
                    out.push(cell(
                        label("write"),
                        median_ms(writes),
                        predict(&p, Op::Write, size as u64)?,
                    ));
                    out.push(cell(
                        label("read"),
                        median_ms(reads),
                        predict(&p, Op::Read, size as u64)?,
                    ));
                }
            }
        }
    }
    let _ = fs::remove_dir_all(&work);
    Ok((Some(cal), out))
}
