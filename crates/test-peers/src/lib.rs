//! Peers to measure against: a private Dovecot 2.3 instance on loopback, for integration
//! tests, for `bench/` (through the `dovecot` example) and for `mailstow sim validate`'s
//! mail file system cells. Nothing else in mailstow starts one. Also a private PostgreSQL
//! ([`Postgres`], in `postgres.rs`) for the directory's cluster tests, and the mail filters of
//! `crates/filter`'s tests: rspamd with its Redis ([`Rspamd`], in `rspamd.rs`) and ClamAV
//! behind clamav-milter ([`ClamAv`], in `clamav.rs`). For the ACME, DNS, DANE and MTA-STS
//! tests: BIND 9 as an authoritative server with DNSSEC-signed zones and a validating
//! resolver ([`Bind`], in `bind.rs`), and the ACME server acme2certifier with a local CA
//! ([`Acme2Certifier`], in `acme.rs`). [`free_loopback_address`] finds a 127.x.y.z whose
//! ports 80 and 443 a test can bind, for the ACME challenges. [`Netns`] (in `netns.rs`)
//! puts a test's hosts in network namespaces of its own on a private bridge, with
//! PostgreSQL on one of them and links cut by iptables.
//!
//! Each [`Dovecot`] runs its own `dovecot -F` master with everything under one temporary
//! directory:
//!
//! ```text
//! <tmp>/dovecot.conf   the whole configuration (no includes of /etc/dovecot)
//! <tmp>/users          passwd-file: userN:{PLAIN}pwN:<vmail uid>:<vmail gid>::<tmp>/mail/userN
//! <tmp>/run/           base_dir (master.pid, unix sockets, login/)
//! <tmp>/state/         state_dir
//! <tmp>/mail/userN/    home and maildir (owned by vmail)
//! <tmp>/dovecot.log    log_path (everything: info, debug, errors)
//! ```
//!
//! What was needed to make Dovecot accept a config living under `/tmp` as root:
//! * `tempfile` creates its directory with mode 0700; Dovecot's unprivileged processes
//!   (auth runs as `dovecot`, imap-login as `dovenull`, imap as `vmail`) must traverse it,
//!   so the temp directory and its subdirectories are chmod 0755 and the users file 0644.
//! * The mail root and each home are chowned to `vmail`, because `imap` runs as `vmail`
//!   and creates the maildir and its index files there.
//! * Every instance has its own `base_dir`, `state_dir` and `instance_name` (and port),
//!   so several masters coexist and none touches the system instance in /run/dovecot.
//! * `ssl = no` and `disable_plaintext_auth = no` for plain LOGIN over loopback; the
//!   `imaps` listener gets `port = 0` so nothing binds 993.
//! * `auth_failure_delay = 0`, so tests of wrong passwords do not sleep 2 s each.
//! * `first_valid_uid`/`first_valid_gid` are set to vmail's ids so that Dovecot accepts them.

mod acme;
mod bind;
mod clamav;
mod daemon;
mod netns;
mod postgres;
mod rspamd;

pub use acme::{Acme2Certifier, AcmeOptions};
pub use bind::{Bind, Zone};
pub use clamav::{ClamAv, EICAR, EICAR_SIGNATURE};
pub use netns::{HOSTS_MAX, Netns};
pub use postgres::Postgres;
pub use rspamd::Rspamd;

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long [`Dovecot::start`] and [`Dovecot::restart`] wait for the greeting.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long [`Dovecot::stop`] waits after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// A private Dovecot instance serving plain IMAP on `127.0.0.1:<port>`.
pub struct Dovecot {
    dir: Option<tempfile::TempDir>,
    root: PathBuf,
    port: u16,
    users: usize,
    child: Option<Child>,
}

impl Dovecot {
    /// Starts `dovecot -F -c <tmp>/dovecot.conf` with users `user1..=userN` (password
    /// `pw<N>`), IMAP on 127.0.0.1 at a free port, maildir under the temp directory.
    /// Waits until the port accepts and the greeting arrives; returns an error carrying
    /// the log tail if it does not come up within 20 s.
    pub fn start(users: usize) -> io::Result<Dovecot> {
        Dovecot::start_in(&std::env::temp_dir(), users)
    }

    /// [`Dovecot::start`] with its directory (mail included) under `parent`, e.g. a tmpfs
    /// so that the server's writes cost CPU and never wait for a disk.
    pub fn start_in(parent: &Path, users: usize) -> io::Result<Dovecot> {
        let (uid, gid) = ensure_vmail()?;
        let dir = tempfile::Builder::new()
            .prefix("test-peers-dovecot-")
            .tempdir_in(parent)?;
        let root = dir.path().to_path_buf();
        let port = free_port()?;
        write_files(&root, port, users, uid, gid)?;
        let mut dovecot = Dovecot {
            dir: Some(dir),
            root,
            port,
            users,
            child: None,
        };
        dovecot.spawn()?;
        Ok(dovecot)
    }

    /// The IMAP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Login name and password of user `n` (1-based), e.g. `("user1", "pw1")`.
    pub fn user(&self, n: usize) -> (String, String) {
        assert!(
            (1..=self.users).contains(&n),
            "user {n} out of 1..={}",
            self.users
        );
        (format!("user{n}"), format!("pw{n}"))
    }

    /// The temporary directory holding configuration, mail and log.
    pub fn dir(&self) -> &Path {
        &self.root
    }

    /// Whether the master process is running (started and not stopped).
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Stops the instance but keeps configuration and mail: SIGTERM to the master,
    /// wait (SIGKILL after 5 s), then SIGKILL to what is left of its process group, so
    /// every open connection (authenticated or not) is closed and the port refuses.
    pub fn stop(&mut self) {
        // A paused instance would hold SIGTERM until the grace runs out.
        self.resume();
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = rustix::process::Pid::from_child(&child);
        if matches!(child.try_wait(), Ok(None)) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            let deadline = Instant::now() + STOP_GRACE;
            loop {
                match child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() >= deadline => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        } else {
            let _ = child.wait();
        }
        // Login processes outlive the master with their pre-auth clients still connected
        // (seen with 2.3.19). The master was spawned as the leader of its own process
        // group, so kill whatever is left of the group: every connection is now closed.
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline && greeting_ok(self.port, Duration::from_millis(200)) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Makes the instance hang without closing anything (a provider that fails by going
    /// silent): SIGSTOP to its whole process group. Connections stay open and new ones are
    /// accepted by the kernel, but no byte comes back until [`Dovecot::resume`].
    pub fn pause(&self) {
        self.signal_group(rustix::process::Signal::STOP);
    }

    /// Undoes [`Dovecot::pause`]: SIGCONT to the process group.
    pub fn resume(&self) {
        self.signal_group(rustix::process::Signal::CONT);
    }

    fn signal_group(&self, signal: rustix::process::Signal) {
        if let Some(child) = &self.child {
            let pid = rustix::process::Pid::from_child(child);
            let _ = rustix::process::kill_process_group(pid, signal);
        }
    }

    /// Starts the instance again on the same port with the same mail.
    pub fn restart(&mut self) -> io::Result<()> {
        self.stop();
        self.spawn()
    }

    /// The last ~40 lines of the Dovecot log.
    pub fn log_tail(&self) -> String {
        log_tail(&self.root.join("dovecot.log"), 40)
    }

    fn spawn(&mut self) -> io::Result<()> {
        let conf = self.root.join("dovecot.conf");
        let child = Command::new("/usr/sbin/dovecot")
            // Own process group, so that stop() can end the children too.
            .process_group(0)
            .arg("-F")
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.root.join("dovecot.stderr"))?)
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("spawning /usr/sbin/dovecot: {e}")))?;
        self.child = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if greeting_ok(self.port, Duration::from_secs(2)) {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(io::Error::other(format!(
                    "dovecot exited with {status} before serving 127.0.0.1:{}\n--- stderr ---\n{}\n--- log ---\n{}",
                    self.port,
                    log_tail(&self.root.join("dovecot.stderr"), 40),
                    self.log_tail()
                )));
            }
            if Instant::now() >= deadline {
                self.stop();
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "dovecot did not greet on 127.0.0.1:{} within {:?}\n--- stderr ---\n{}\n--- log ---\n{}",
                        self.port,
                        START_TIMEOUT,
                        log_tail(&self.root.join("dovecot.stderr"), 40),
                        self.log_tail()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Dovecot {
    fn drop(&mut self) {
        self.stop();
        if let Some(dir) = self.dir.take() {
            if std::env::var_os("TEST_PEERS_KEEP").is_some() {
                let kept = dir.keep();
                eprintln!("test-peers: kept {}", kept.display());
            } else {
                let _ = dir.close();
            }
        }
    }
}

/// Whether a connection to the port gets an IMAP `* OK` greeting within `timeout`.
fn greeting_ok(port: u16, timeout: Duration) -> bool {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(stream) = TcpStream::connect_timeout(&addr, timeout) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(timeout));
    let mut line = String::new();
    let ok = BufReader::new(&stream).read_line(&mut line).is_ok() && line.starts_with("* OK");
    if ok {
        let _ = (&stream).write_all(b"z LOGOUT\r\n");
    }
    ok
}

/// A port that was free a moment ago (bind 127.0.0.1:0, read, close).
fn free_port() -> io::Result<u16> {
    let listener = TcpListener::bind(("127.0.0.1", 0))?;
    Ok(listener.local_addr()?.port())
}

/// How many random addresses [`free_loopback_address`] tries.
const LOOPBACK_TRIES_MAX: u32 = 64;

/// A random loopback address in 127.1.0.1 to 127.255.255.254 on which every TCP port in
/// `ports` could be bound a moment ago: for a test that must listen on fixed ports (80 and
/// 443 for ACME's HTTP-01 and TLS-ALPN-01) beside other tests doing the same, with a DNS name
/// pointing at it. Linux routes all of 127.0.0.0/8 to the loopback interface.
pub fn free_loopback_address(ports: &[u16]) -> io::Result<std::net::Ipv4Addr> {
    use std::hash::{BuildHasher, Hasher};
    for attempt in 0..LOOPBACK_TRIES_MAX {
        // RandomState is seeded randomly per process; the attempt makes each try differ.
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(attempt);
        hasher.write_u32(std::process::id());
        let [_, b, c, d, ..] = hasher.finish().to_be_bytes();
        if b == 0 || d == 0 || d == 255 {
            continue;
        }
        let address = std::net::Ipv4Addr::new(127, b, c, d);
        let bound: io::Result<Vec<TcpListener>> = ports
            .iter()
            .map(|port| TcpListener::bind((address, *port)))
            .collect();
        if bound.is_ok() {
            return Ok(address);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        format!("no loopback address with TCP ports {ports:?} free"),
    ))
}

/// The uid and gid of `vmail`, creating the system user if missing (we run as root).
fn ensure_vmail() -> io::Result<(u32, u32)> {
    fn id(flag: &str) -> io::Result<Option<u32>> {
        let out = Command::new("id").arg(flag).arg("vmail").output()?;
        if !out.status.success() {
            return Ok(None);
        }
        let text = String::from_utf8_lossy(&out.stdout);
        text.trim()
            .parse()
            .map(Some)
            .map_err(|e| io::Error::other(format!("id {flag} vmail: {e}")))
    }
    if id("-u")?.is_none() {
        let status = Command::new("useradd")
            .args(["-r", "-M", "-s", "/usr/sbin/nologin", "vmail"])
            .status()?;
        if !status.success() && id("-u")?.is_none() {
            return Err(io::Error::other(format!("useradd vmail failed: {status}")));
        }
    }
    match (id("-u")?, id("-g")?) {
        (Some(uid), Some(gid)) => Ok((uid, gid)),
        _ => Err(io::Error::other("user vmail not found")),
    }
}

fn chmod(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

fn write_files(root: &Path, port: u16, users: usize, uid: u32, gid: u32) -> io::Result<()> {
    chmod(root, 0o755)?;
    for sub in ["run", "state", "mail"] {
        let path = root.join(sub);
        std::fs::create_dir(&path)?;
        chmod(&path, 0o755)?;
    }
    let mail = root.join("mail");
    std::os::unix::fs::chown(&mail, Some(uid), Some(gid))?;

    let mut passwd = String::new();
    for n in 1..=users {
        let home = mail.join(format!("user{n}"));
        std::fs::create_dir(&home)?;
        chmod(&home, 0o700)?;
        std::os::unix::fs::chown(&home, Some(uid), Some(gid))?;
        passwd.push_str(&format!(
            "user{n}:{{PLAIN}}pw{n}:{uid}:{gid}::{}::\n",
            home.display()
        ));
    }
    let users_file = root.join("users");
    std::fs::write(&users_file, passwd)?;
    chmod(&users_file, 0o644)?;

    let conf = config(root, port, uid, gid);
    let conf_file = root.join("dovecot.conf");
    std::fs::write(&conf_file, conf)?;
    chmod(&conf_file, 0o644)?;
    Ok(())
}

fn config(root: &Path, port: u16, uid: u32, gid: u32) -> String {
    let root = root.display();
    format!(
        r#"# Generated by test-peers: a private, self-contained Dovecot 2.3 instance.
instance_name = test-peers-{port}
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
info_log_path = {root}/dovecot.log
debug_log_path = {root}/dovecot.log

protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
# Tests try wrong passwords on purpose; do not wait 2 s after each.
auth_failure_delay = 0

default_internal_user = dovecot
default_login_user = dovenull
mail_uid = vmail
mail_gid = vmail
first_valid_uid = {uid}
first_valid_gid = {gid}

mail_location = maildir:~/Maildir
mail_max_userip_connections = 100
mail_plugins = $mail_plugins quota

passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/users
}}
userdb {{
  driver = passwd-file
  args = username_format=%u {root}/users
}}

protocol imap {{
  mail_plugins = $mail_plugins imap_quota
  mail_max_userip_connections = 100
}}

plugin {{
  quota = maildir:User quota
  quota_rule = *:storage=10G
}}

service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
"#
    )
}

fn log_tail(path: &Path, lines: usize) -> String {
    let mut text = String::new();
    match std::fs::File::open(path) {
        Ok(mut file) => {
            let mut bytes = Vec::new();
            if file.read_to_end(&mut bytes).is_err() {
                return format!("(cannot read {})", path.display());
            }
            text.push_str(&String::from_utf8_lossy(&bytes));
        }
        Err(e) => return format!("(no {}: {e})", path.display()),
    }
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
