//! `mailstow fs`: the mail file system (docs/mailfs.md). Every subcommand takes the file
//! system's config with `--config FILE`.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Subcommand;
use mailfs::imap_remote::ImapRemote;
use mailfs::remote::Remote;
use mailfs::{Config, Fs, FsError};

use crate::progress::with_progress;

/// How long `mount` waits for the background server to have the mount ready.
const MOUNT_WAIT_MAX: Duration = Duration::from_secs(120);

#[derive(Subcommand)]
pub(crate) enum FsCommand {
    /// Prepare the accounts: create the folder, write the superblock and the root.
    Mkfs,
    /// Mount with FUSE; returns once the mount is ready and keeps serving in the
    /// background (`--foreground` stays attached).
    Mount {
        mountpoint: PathBuf,
        #[arg(long)]
        foreground: bool,
        /// FUSE worker threads.
        #[arg(long, default_value_t = 4)]
        threads: usize,
        /// Let other users than the mounting one in (needs user_allow_other for non-root).
        #[arg(long)]
        allow_other: bool,
    },
    /// Unmount (the server flushes and exits).
    Umount { mountpoint: PathBuf },
    /// Check every directory and block on every replica; rewrite what is missing or damaged.
    Fsck {
        /// First rebuild what lost directory messages hid: unreadable directories are
        /// recreated empty and unnamed files come back under /lost+found from their blocks.
        #[arg(long)]
        rebuild: bool,
    },
    /// Remove superseded versions past the retention, deleted files' blocks and crash
    /// orphans (UID EXPUNGE only).
    Gc,
    /// List the retained versions of a file (path inside the file system).
    Versions { path: String },
    /// Make an old version of a file current again.
    Restore {
        path: String,
        #[arg(long)]
        version: u64,
    },
    /// Pin the whole tree under a name (shown read-only under /.snapshots in the mount).
    Snapshot { name: String },
    /// Pending replication work, account health and counters.
    Stats,
}

pub(crate) fn run(command: FsCommand, config_path: Option<&Path>) -> anyhow::Result<()> {
    if let FsCommand::Umount { mountpoint } = &command {
        return umount(mountpoint);
    }
    let Some(config_path) = config_path else {
        bail!("mailstow fs needs --config FILE (the file system's config, docs/mailfs.md 10)");
    };
    let mut config = load_config(config_path)?;
    if let FsCommand::Mount {
        mountpoint,
        foreground: false,
        threads,
        allow_other,
    } = &command
    {
        return mount_in_background(config_path, &config, mountpoint, *threads, *allow_other);
    }
    if let FsCommand::Mount {
        foreground: true, ..
    } = &command
    {
        reexec_with_malloc_tunables();
    }
    if let FsCommand::Stats = &command
        && let Some(text) = stats_file(&config)
    {
        print!("{text}");
        return Ok(());
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    // Secrets only now: `stats` of a running mount and the parent of a background mount
    // do without them.
    read_secret_files(&mut config)?;
    let remotes = remotes(&config)?;
    match command {
        FsCommand::Mkfs => {
            let fsid = Fs::mkfs(&config, remotes)?;
            let n: usize = config.groups.iter().map(|g| g.accounts.len()).sum();
            out!(
                "mkfs: file system {} on {n} accounts in {} groups, block size {}, cipher {}",
                hex(&fsid),
                config.groups.len(),
                config.fs.block_size,
                mailfs::keys::resolve_cipher(&config.encryption.cipher)
            );
        }
        FsCommand::Mount {
            mountpoint,
            threads,
            allow_other,
            ..
        } => {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_default_env()
                        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,fuser=error")),
                )
                .with_writer(std::io::stderr)
                .try_init();
            let fs = Fs::open(&config, remotes)?;
            let opts = mailfs_fuse::MountOptions {
                threads,
                allow_other,
                direct_io: config.fs.direct_io,
                writeback_cache: config.fs.writeback_cache,
                negative_lookup: Duration::from_millis(config.fs.negative_lookup_ms),
                attr_cache: Duration::from_millis(config.fs.attr_cache_ms),
            };
            spawn_signal_unmount(&rt, &mountpoint)?;
            mailfs_fuse::serve(fs, &mountpoint, &opts)
                .with_context(|| format!("mounting {}", mountpoint.display()))?;
        }
        FsCommand::Fsck { rebuild } => {
            let fs = Fs::open(&config, remotes)?;
            if rebuild {
                let r = progress("rebuild", |p| fs.rebuild(p))?;
                out!("directories_recreated={}", r.directories_recreated);
                out!("files_recovered={}", r.files_recovered);
            }
            let report = progress("fsck", |p| fs.fsck(p))?;
            out!("log_pages={}", report.log_pages);
            out!("directories={}", report.directories);
            out!("inodes={}", report.inodes);
            out!("blocks={}", report.blocks);
            out!("chunks={}", report.chunks);
            out!("foreign_messages={}", report.foreign_messages);
            out!("accounts_down={}", report.accounts_down);
            for r in &report.repaired {
                out!("repaired: {r}");
            }
            for u in &report.unrecoverable {
                out!("unrecoverable: {u}");
            }
            out!("repaired={}", report.repaired.len());
            out!("unrecoverable={}", report.unrecoverable.len());
            if !report.unrecoverable.is_empty() {
                bail!("fsck found damage it could not repair");
            }
            out!(
                "fsck: {}",
                if report.repaired.is_empty() && report.accounts_down == 0 {
                    "clean"
                } else {
                    "repaired"
                }
            );
        }
        FsCommand::Gc => {
            let fs = Fs::open(&config, remotes)?;
            let r = progress("gc", |p| fs.gc(p))?;
            out!(
                "gc: removed directories={} blocks={} other={} chunks={} log_pages={}",
                r.directories,
                r.blocks,
                r.other,
                r.chunks,
                r.log_pages
            );
        }
        FsCommand::Versions { path } => {
            let fs = Fs::open(&config, remotes)?;
            fs.set_read_only(true);
            for v in fs.versions(&path)? {
                out!(
                    "version={} size={} mtime={} dir_version={}",
                    v.version,
                    v.size,
                    chrono_like(v.mtime_ns),
                    v.dir_version
                );
            }
        }
        FsCommand::Restore { path, version } => {
            let fs = Fs::open(&config, remotes)?;
            let new = fs.restore(&path, version)?;
            out!("restored {path} version {version} as version {new}");
        }
        FsCommand::Snapshot { name } => {
            let fs = Fs::open(&config, remotes)?;
            let dirs = fs.snapshot(&name)?;
            out!("snapshot {name}: {dirs} directories pinned");
        }
        FsCommand::Stats => {
            let fs = Fs::open(&config, remotes)?;
            print!("{}", fs.stats_text());
        }
        FsCommand::Umount { .. } => unreachable!("handled above"),
    }
    Ok(())
}

/// Reads and parses the file system's config (`fs.toml`, docs/mailfs.md 10) and checks it
/// ([`Config::check`]). Errors name the file; toml's name the line, column and key.
fn load_config(path: &Path) -> Result<Config, FsError> {
    let in_file = |e: &dyn std::fmt::Display| FsError::Config(format!("{}: {e}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| in_file(&e))?;
    let config: Config = toml::from_str(&text).map_err(|e| in_file(&e))?;
    config.check()?;
    Ok(config)
}

/// Reads the secret files the config names into the values the engine uses:
/// `passphrase_file` into `passphrase`, each account's `password_file` into `password`
/// (an inline value wins, as it always has), without the trailing newline.
fn read_secret_files(config: &mut Config) -> Result<(), FsError> {
    for a in config.groups.iter_mut().flat_map(|g| g.accounts.iter_mut()) {
        if let (None, Some(f)) = (&a.password, &a.password_file) {
            a.password = Some(read_secret(f)?);
        }
    }
    let e = &mut config.encryption;
    if let (None, Some(f)) = (&e.passphrase, &e.passphrase_file) {
        e.passphrase = Some(read_secret(f)?);
    }
    Ok(())
}

fn read_secret(path: &Path) -> Result<String, FsError> {
    let s = std::fs::read_to_string(path)
        .map_err(|e| FsError::Config(format!("{}: {e}", path.display())))?;
    Ok(s.trim_end_matches(['\r', '\n']).to_string())
}

fn remotes(config: &Config) -> anyhow::Result<Vec<Box<dyn Remote>>> {
    let mut out: Vec<Box<dyn Remote>> = Vec::new();
    for g in &config.groups {
        for a in &g.accounts {
            out.push(Box::new(ImapRemote::new(
                a,
                &config.fs.folder,
                config.member_deadline(),
                config.timeout(),
            )?));
        }
    }
    Ok(out)
}

fn progress<T>(label: &str, work: impl FnOnce(mailfs::maint::Progress) -> T) -> T {
    with_progress(label, |report| {
        let cell = RefCell::new(report);
        let f = |done, total| (cell.borrow_mut())(done, total);
        work(&f)
    })
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn chrono_like(ns: i64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// The stats a running mount writes every second, if there is one.
fn stats_file(config: &Config) -> Option<String> {
    let dirs: Vec<PathBuf> = std::fs::read_dir(&config.cache.dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("stats").exists())
        .collect();
    match dirs.as_slice() {
        [one] => std::fs::read_to_string(one.join("stats")).ok(),
        _ => None,
    }
}

fn is_mounted(mountpoint: &Path) -> bool {
    let Ok(target) = std::fs::canonicalize(mountpoint) else {
        return false;
    };
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let target = target.to_string_lossy().to_string();
    // Fields: id parent dev root mountpoint options [optional...] - fstype source super.
    info.lines().any(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        let after = f.iter().position(|x| *x == "-").map(|i| &f[i + 1..]);
        f.get(4).is_some_and(|m| unescape_mount(m) == target)
            && after.is_some_and(|a| {
                a.first().is_some_and(|t| t.starts_with("fuse"))
                    && a.get(1).is_some_and(|s| *s == "mailfs")
            })
    })
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape_mount(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// glibc's allocator tuned for the mount server (docs/mailfs.md 6, "Memory"). Every block
/// passes through several buffers of about a block each (the FUSE request, the writer's
/// block, the sealed envelope, its base64, the IMAP message): with glibc's defaults each
/// one is fresh memory, mapped and zeroed by the kernel and given back when freed, which
/// was a third to a half of the mount's CPU time under Postmark. Buffers up to 32 MiB come
/// from the heap, freed memory up to 256 MiB is kept for the next ones (64 MiB of padding
/// each time a heap grows), and two arenas bound what is kept.
const MOUNT_MALLOC_TUNABLES: &str = "glibc.malloc.mmap_threshold=33554432:\
glibc.malloc.trim_threshold=268435456:glibc.malloc.top_pad=67108864:glibc.malloc.arena_max=2";

/// Runs this mount server again with [`MOUNT_MALLOC_TUNABLES`] (glibc reads tunables only
/// at start). An operator's own `GLIBC_TUNABLES` is left alone, and so is a failed exec:
/// the server then runs with the allocator's defaults.
fn reexec_with_malloc_tunables() {
    if std::env::var_os("GLIBC_TUNABLES").is_some() {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let e = std::os::unix::process::CommandExt::exec(
        std::process::Command::new(exe)
            .args(std::env::args_os().skip(1))
            .env("GLIBC_TUNABLES", MOUNT_MALLOC_TUNABLES),
    );
    eprintln!("mailstow fs mount: running with the allocator's defaults ({e})");
}

fn mount_in_background(
    config_path: &Path,
    config: &Config,
    mountpoint: &Path,
    threads: usize,
    allow_other: bool,
) -> anyhow::Result<()> {
    if !mountpoint.is_dir() {
        bail!("{}: not a directory", mountpoint.display());
    }
    if is_mounted(mountpoint) {
        bail!("{} is already a mailfs mount", mountpoint.display());
    }
    std::fs::create_dir_all(&config.cache.dir)
        .with_context(|| format!("creating {}", config.cache.dir.display()))?;
    let log_path = config.cache.dir.join("mount.log");
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("creating {}", log_path.display()))?;
    let exe = std::env::current_exe().context("finding the mailstow binary")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("fs")
        .arg("--config")
        .arg(config_path)
        .arg("mount")
        .arg(mountpoint)
        .arg("--foreground")
        .arg("--threads")
        .arg(threads.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    if allow_other {
        cmd.arg("--allow-other");
    }
    // Its own process group: a Ctrl-C at the terminal that ran `mount` does not reach it.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().context("starting the mount server")?;
    let started = Instant::now();
    loop {
        if is_mounted(mountpoint) {
            out!(
                "mounted {} (server pid {}, log {})",
                mountpoint.display(),
                child.id(),
                log_path.display()
            );
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(5).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            bail!("mount server exited ({status}): {}", tail.join(" | "));
        }
        if started.elapsed() > MOUNT_WAIT_MAX {
            let _ = child.kill();
            bail!("the mount was not ready within {MOUNT_WAIT_MAX:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// How long `umount` waits for the server to finish after the kernel let go of the mount
/// (it still writes what it owes: the journal in asynchronous mode, queued cache files).
const SERVER_EXIT_WAIT_MAX: Duration = Duration::from_secs(120);

/// The servers (`mailstow fs ... mount MOUNTPOINT --foreground`) of this mount point.
fn server_pids(mountpoint: &Path) -> Vec<u32> {
    use std::os::unix::ffi::OsStrExt;
    let Ok(target) = std::fs::canonicalize(mountpoint) else {
        return Vec::new();
    };
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id();
    procs
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                return false;
            };
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            if !args.contains(&&b"--foreground"[..]) || !args.contains(&&b"mount"[..]) {
                return false;
            }
            let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
            args.iter().any(|a| {
                let p = Path::new(std::ffi::OsStr::from_bytes(a));
                let p = if p.is_absolute() {
                    p.to_path_buf()
                } else {
                    cwd.join(p)
                };
                p == target || std::fs::canonicalize(&p).is_ok_and(|c| c == target)
            })
        })
        .collect()
}

/// Gone, or a zombie waiting for its parent.
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

fn umount(mountpoint: &Path) -> anyhow::Result<()> {
    if !is_mounted(mountpoint) {
        bail!("{} is not a mailfs mount", mountpoint.display());
    }
    let servers = server_pids(mountpoint);
    let status = std::process::Command::new("fusermount3")
        .arg("-u")
        .arg(mountpoint)
        .status()
        .or_else(|_| {
            std::process::Command::new("umount")
                .arg(mountpoint)
                .status()
        })
        .context("running fusermount3 -u / umount")?;
    if !status.success() {
        bail!("unmounting {} failed ({status})", mountpoint.display());
    }
    let started = Instant::now();
    while is_mounted(mountpoint) {
        if started.elapsed() > Duration::from_secs(30) {
            bail!("{} is still mounted", mountpoint.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Return once the server has finished, so what it still writes (the journal, cache
    // files) is done when a script goes on.
    let started = Instant::now();
    while servers.iter().any(|&pid| !exited(pid)) {
        if started.elapsed() > SERVER_EXIT_WAIT_MAX {
            eprintln!(
                "warning: the server of {} (pid {servers:?}) is still finishing",
                mountpoint.display()
            );
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    out!("unmounted {}", mountpoint.display());
    Ok(())
}

/// SIGTERM or SIGINT unmounts, so the server flushes and exits instead of leaving a dead
/// mount behind.
/// The handlers are registered before this returns, so a signal sent as soon as the mount
/// is ready is never the default (killing) action.
fn spawn_signal_unmount(rt: &tokio::runtime::Runtime, mountpoint: &Path) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mountpoint = mountpoint.to_path_buf();
    let _runtime = rt.enter();
    let mut term = signal(SignalKind::terminate()).context("handling SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("handling SIGINT")?;
    rt.spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        let _ = tokio::task::spawn_blocking(move || umount(&mountpoint)).await;
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE_ACCOUNT: &str = "[[group]]\n[[group.account]]\nhost = \"127.0.0.1\"\nuser = \"u1\"\n";

    #[test]
    fn the_config_file_and_its_secret_files_are_read_here() {
        let dir = tempfile::tempdir().unwrap();
        let pass = dir.path().join("fs.pass");
        let pw = dir.path().join("u1.pass");
        std::fs::write(&pass, "correct horse\r\n").unwrap();
        std::fs::write(&pw, "secret\n").unwrap();
        let path = dir.path().join("fs.toml");
        std::fs::write(
            &path,
            format!(
                "[encryption]\npassphrase_file = {pass:?}\n{ONE_ACCOUNT}password_file = {pw:?}\n"
            ),
        )
        .unwrap();
        let mut config = load_config(&path).unwrap();
        // Not read yet: the engine refuses a file it would have to read itself.
        assert!(
            config
                .passphrase()
                .unwrap_err()
                .to_string()
                .contains("fs.pass")
        );
        read_secret_files(&mut config).unwrap();
        assert_eq!(
            config.passphrase().unwrap().as_deref(),
            Some("correct horse")
        );
        assert_eq!(config.groups[0].accounts[0].password().unwrap(), "secret");

        // An inline value wins over a file, which is then not read at all.
        std::fs::write(
            &path,
            format!(
                "[encryption]\ncipher = \"none\"\n{ONE_ACCOUNT}password = \"inline\"\npassword_file = \"/no/such/file\"\n"
            ),
        )
        .unwrap();
        let mut config = load_config(&path).unwrap();
        read_secret_files(&mut config).unwrap();
        assert_eq!(config.groups[0].accounts[0].password().unwrap(), "inline");
        assert_eq!(config.passphrase().unwrap(), None);
    }

    #[test]
    fn errors_name_the_file_the_line_and_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fs.toml");
        let missing = load_config(&path).unwrap_err().to_string();
        assert!(
            missing.starts_with("configuration: ") && missing.contains("fs.toml"),
            "{missing}"
        );
        std::fs::write(&path, "[fs]\nbogus = 1\n").unwrap();
        let unknown = load_config(&path).unwrap_err().to_string();
        for want in ["fs.toml", "line 2", "bogus"] {
            assert!(unknown.contains(want), "{unknown} lacks {want}");
        }
        // Parsed, then checked by the engine.
        std::fs::write(
            &path,
            format!("[fs]\nblock_size = 1000\n{ONE_ACCOUNT}password = \"p\"\n"),
        )
        .unwrap();
        let checked = load_config(&path).unwrap_err().to_string();
        assert!(checked.contains("fs.block_size 1000"), "{checked}");
        std::fs::write(
            &path,
            format!("[encryption]\ncipher = \"none\"\n{ONE_ACCOUNT}password_file = \"/no/such/u1.pass\"\n"),
        )
        .unwrap();
        let mut config = load_config(&path).unwrap();
        let unreadable = read_secret_files(&mut config).unwrap_err().to_string();
        assert!(unreadable.contains("/no/such/u1.pass"), "{unreadable}");
    }

    /// docs/mailfs.md section 10 stays a valid config as this command reads it.
    #[test]
    fn the_documented_example_loads() {
        let doc = include_str!("../../../docs/mailfs.md");
        let start = doc.find("## 10. Configuration").expect("section 10");
        let block = &doc[start..];
        let from = block.find("```toml\n").expect("toml block") + "```toml\n".len();
        let to = from + block[from..].find("```").expect("end of block");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fs.toml");
        std::fs::write(&path, &block[from..to]).unwrap();
        let c = load_config(&path).unwrap();
        assert_eq!(c.groups.len(), 2);
        assert!(c.groups.iter().all(|g| g.accounts.len() == 2));
    }
}
