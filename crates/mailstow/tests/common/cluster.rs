//! The cluster harness shared by `tests/cluster.rs` and `tests/replication.rs`: a private
//! PostgreSQL and three `mailstow serve` nodes, each on its own loopback address, and the
//! clients the tests drive them with.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Imap, smtp_reply};

pub(crate) const PASSWORD: &str = "secret-pw";
pub(crate) const PORT_SMTP: u16 = 2525;
pub(crate) const PORT_LMTP: u16 = 2424;
pub(crate) const PORT_IMAP: u16 = 1143;
pub(crate) const PORT_POP3: u16 = 1110;
pub(crate) const PORT_WEB: u16 = 8080;
pub(crate) const PORT_MANAGESIEVE: u16 = 4190;
pub(crate) const PORT_REPLICATION: u16 = 7025;

/// One node: its loopback address, data directory and configuration, and the process.
pub(crate) struct Node {
    pub(crate) name: String,
    pub(crate) ip: String,
    pub(crate) config: PathBuf,
    pub(crate) child: Option<Child>,
    /// stderr (the mail log) lines.
    pub(crate) log: Arc<Mutex<Vec<String>>>,
}

impl Node {
    pub(crate) fn addr(&self, port: u16) -> String {
        format!("{}:{port}", self.ip)
    }

    pub(crate) fn cli(&self, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_mailstow"))
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .output()
            .expect("run mailstow")
    }

    pub(crate) fn must(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(out.status.success(), "mailstow {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub(crate) fn start(&mut self) {
        self.start_as(&["serve"]);
    }

    /// Starts the node with `args` (`serve`, or a command that serves, like `node replace`).
    pub(crate) fn start_as(&mut self, args: &[&str]) {
        assert!(self.child.is_none());
        let mut child = Command::new(env!("CARGO_BIN_EXE_mailstow"))
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start mailstow serve");
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let log = self.log.clone();
        let name = self.name.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if line.contains("level=warn") || line.contains("level=error") {
                    eprintln!("[{name}] {line}");
                }
                log.lock().unwrap().push(line);
            }
        });
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut listening = 0;
        while listening < 4 {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "{} did not start: {:?}",
                    self.name,
                    self.log.lock().unwrap()
                )
            });
            if line.contains(" listening on ") {
                listening += 1;
            }
        }
        std::thread::spawn(move || while rx.recv().is_ok() {});
        self.child = Some(child);
    }

    pub(crate) fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("running").id();
        let sent = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    }

    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub(crate) fn log_lines(&self, needle: &str) -> Vec<String> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(needle))
            .cloned()
            .collect()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
        }
        self.kill();
    }
}

/// A private PostgreSQL and three nodes n1, n2, n3 on 127.<net>.0.1-3; user `u<i>` lives on
/// node i.
pub(crate) struct Cluster {
    pub(crate) nodes: Vec<Node>,
    pub(crate) pg: test_peers::Postgres,
    pub(crate) _dir: tempfile::TempDir,
}

impl Cluster {
    pub(crate) fn start(net: u8) -> Cluster {
        Cluster::start_with(net, false)
    }

    /// With `replicated`, every node keeps a copy of its partner's engines' files
    /// (`[cluster] replicas = 2`, docs/replication.md).
    pub(crate) fn start_with(net: u8, replicated: bool) -> Cluster {
        let pg =
            test_peers::Postgres::new().expect("a private PostgreSQL (apt-get install postgresql)");
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("cluster.secret");
        std::fs::write(&secret, "an example cluster secret, 32 bytes or so\n").unwrap();
        let mut nodes = Vec::new();
        for i in 1..=3u8 {
            let name = format!("n{i}");
            let ip = format!("127.{net}.0.{i}");
            let data = dir.path().join(&name);
            let config = dir.path().join(format!("{name}.toml"));
            let replication = if replicated {
                format!("replicas = 2\nreplication = \"{ip}:{PORT_REPLICATION}\"\n")
            } else {
                String::new()
            };
            std::fs::write(
                &config,
                format!(
                    "data_dir = {data:?}\n\
                     [directory]\nurl = \"{url}\"\n\
                     [cluster]\nnode = \"{name}\"\nsecret_file = {secret:?}\n{replication}\
                     [server]\nhostname = \"{name}.example.test\"\n\
                     smtp = \"{ip}:{PORT_SMTP}\"\nlmtp = \"{ip}:{PORT_LMTP}\"\n\
                     imap = \"{ip}:{PORT_IMAP}\"\npop3 = \"{ip}:{PORT_POP3}\"\n\
                     web = \"{ip}:{PORT_WEB}\"\n\
                     managesieve = \"{ip}:{PORT_MANAGESIEVE}\"\n\
                     submission = \"\"\nsubmissions = \"\"\nimaps = \"\"\npop3s = \"\"\n\
                     auth_without_tls = true\nsender_checks = false\n",
                    url = pg.url()
                ),
            )
            .unwrap();
            nodes.push(Node {
                name,
                ip,
                config,
                child: None,
                log: Arc::default(),
            });
        }
        for node in &nodes {
            node.must(&["init"]);
        }
        let n1 = &nodes[0];
        n1.must(&["domain", "add", "example.test"]);
        for node in &nodes {
            n1.must(&[
                "node",
                "add",
                &node.name,
                "--lmtp",
                &node.addr(PORT_LMTP),
                "--imap",
                &node.addr(PORT_IMAP),
                "--pop3",
                &node.addr(PORT_POP3),
                "--web",
                &node.addr(PORT_WEB),
                "--managesieve",
                &node.addr(PORT_MANAGESIEVE),
            ]);
        }
        for i in 1..=3 {
            n1.must(&[
                "user",
                "add",
                &format!("u{i}@example.test"),
                "--node",
                &format!("n{i}"),
                "--password",
                PASSWORD,
            ]);
        }
        for node in &mut nodes {
            node.start();
        }
        let cluster = Cluster {
            nodes,
            pg,
            _dir: dir,
        };
        // Every node sees every other one up (leases renewed, polled each second).
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let list = cluster.nodes[0].must(&["node", "list"]);
            if list.lines().filter(|l| l.contains(" up ")).count() == 3 {
                break;
            }
            assert!(Instant::now() < deadline, "nodes not up: {list}");
            std::thread::sleep(Duration::from_millis(200));
        }
        std::thread::sleep(Duration::from_millis(1500));
        cluster
    }

    pub(crate) fn node(&self, i: usize) -> &Node {
        &self.nodes[i - 1]
    }
}

/// Sends one message through SMTP at `address`; the final reply code.
pub(crate) fn send(address: &str, to: &[&str], subject: &str) -> u16 {
    let stream = TcpStream::connect(address).expect("connect smtp");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    assert_eq!(smtp_reply(&mut reader).unwrap(), 220);
    let mut command = |line: String| -> u16 {
        writer.write_all(line.as_bytes()).unwrap();
        smtp_reply(&mut reader).unwrap()
    };
    assert_eq!(command("EHLO client.example\r\n".into()), 250);
    assert_eq!(command("MAIL FROM:<sender@example.org>\r\n".into()), 250);
    for rcpt in to {
        let code = command(format!("RCPT TO:<{rcpt}>\r\n"));
        assert_eq!(code, 250, "RCPT {rcpt} at {address}");
    }
    assert_eq!(command("DATA\r\n".into()), 354);
    let code = command(format!(
        "From: sender@example.org\r\nSubject: {subject}\r\n\r\nbody of {subject}\r\n.\r\n"
    ));
    let _ = command("QUIT\r\n".into());
    code
}

/// The Subject of every message in `user`'s maildrop through POP3 at `address`; `Err` with
/// the server's answer when the login is refused.
pub(crate) fn pop3_subjects(address: &str, user: &str) -> Result<Vec<String>, String> {
    let stream = TcpStream::connect(address).expect("connect pop3");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = || {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        line.trim_end().to_string()
    };
    assert!(line().starts_with("+OK"));
    writer
        .write_all(format!("USER {user}\r\n").as_bytes())
        .unwrap();
    assert!(line().starts_with("+OK"));
    writer
        .write_all(format!("PASS {PASSWORD}\r\n").as_bytes())
        .unwrap();
    let answer = line();
    if !answer.starts_with("+OK") {
        return Err(answer);
    }
    writer.write_all(b"STAT\r\n").unwrap();
    let stat = line();
    let count: usize = stat.split(' ').nth(1).unwrap().parse().unwrap();
    let mut subjects = Vec::new();
    for n in 1..=count {
        writer
            .write_all(format!("TOP {n} 0\r\n").as_bytes())
            .unwrap();
        assert!(line().starts_with("+OK"));
        loop {
            let l = line();
            if l == "." {
                break;
            }
            if let Some(subject) = l.strip_prefix("Subject: ") {
                subjects.push(subject.to_string());
            }
        }
    }
    writer.write_all(b"QUIT\r\n").unwrap();
    let _ = line();
    subjects.sort();
    Ok(subjects)
}

/// Waits until `user` (checked through `address`) has `want` messages; their subjects.
pub(crate) fn wait_for(address: &str, user: &str, want: usize, within: Duration) -> Vec<String> {
    let deadline = Instant::now() + within;
    loop {
        let subjects = pop3_subjects(address, user).unwrap_or_default();
        if subjects.len() >= want || Instant::now() >= deadline {
            return subjects;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// An IMAP LOGIN at `address`: the tagged answer.
pub(crate) fn imap_login(address: &str, user: &str) -> (Imap, String) {
    let mut imap = Imap::connect(address);
    let answer = imap.run(&format!("LOGIN {user} {PASSWORD}"));
    let last = answer.last().unwrap().clone();
    (imap, last)
}

/// Sends to `users` through `entries` in turns until `stop`; every message's subject and
/// reply, in order.
pub(crate) fn load(
    cluster: &Cluster,
    entries: &[usize],
    users: &'static [&'static str],
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<(String, String, u16)>> {
    let addresses: Vec<String> = entries
        .iter()
        .map(|&e| cluster.node(e).addr(PORT_SMTP))
        .collect();
    std::thread::spawn(move || {
        let mut sent = Vec::new();
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            for user in users {
                let subject = format!("load-{n}");
                let address = &addresses[n as usize % addresses.len()];
                let code = send(address, &[user], &subject);
                sent.push((user.to_string(), subject, code));
                n += 1;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        sent
    })
}
