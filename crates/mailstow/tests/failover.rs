//! Replication and failover over real networks (issue 40, docs/replication.md): three nodes,
//! each in a network namespace of the test's own, and PostgreSQL in a fourth, linked by a
//! private bridge that iptables cuts (`test_peers::Netns`). Traffic never leaves the machine.
//!
//! An owner cut from PostgreSQL fences itself within its lease and its partner takes it over;
//! every acknowledged message and flag change is there, with the same UIDVALIDITY, UIDs and
//! contents; nothing is stored twice; after the cut heals, the old owner comes back as a
//! standby, is handed the node back, and serves the same mailbox.

mod common;

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::smtp_reply;
use test_peers::Netns;

const PASSWORD: &str = "secret-pw";

struct Node {
    name: String,
    host: usize,
    config: PathBuf,
    child: Option<Child>,
    log: Arc<Mutex<Vec<String>>>,
}

struct Cluster {
    net: Netns,
    db: usize,
    nodes: Vec<Node>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Cluster {
        let mut net = Netns::new(3).expect("network namespaces (root, iproute2, iptables)");
        let db = net.start_postgres().expect("PostgreSQL in a namespace");
        let url = net.postgres_url().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("cluster.secret");
        std::fs::write(&secret, "an example cluster secret, 32 bytes or so\n").unwrap();
        let mut nodes = Vec::new();
        for host in 0..3 {
            let name = format!("n{}", host + 1);
            let ip = net.addr(host);
            let config = dir.path().join(format!("{name}.toml"));
            std::fs::write(
                &config,
                format!(
                    "data_dir = {data:?}\n\
                     [directory]\nurl = \"{url}\"\n\
                     [cluster]\nnode = \"{name}\"\nsecret_file = {secret:?}\n\
                     replicas = 2\nreplication = \"{ip}:7025\"\n\
                     [server]\nhostname = \"{name}.example.test\"\n\
                     smtp = \"{ip}:25\"\nlmtp = \"{ip}:24\"\nimap = \"{ip}:143\"\n\
                     pop3 = \"{ip}:110\"\nweb = \"\"\nmanagesieve = \"\"\n\
                     submission = \"\"\nsubmissions = \"\"\nimaps = \"\"\npop3s = \"\"\n\
                     auth_without_tls = true\nsender_checks = false\n",
                    data = dir.path().join(&name),
                ),
            )
            .unwrap();
            nodes.push(Node {
                name,
                host,
                config,
                child: None,
                log: Arc::default(),
            });
        }
        let cluster = Cluster {
            net,
            db,
            nodes,
            _dir: dir,
        };
        for node in &cluster.nodes {
            cluster.must(node, &["init"]);
        }
        let n1 = &cluster.nodes[0];
        cluster.must(n1, &["domain", "add", "example.test"]);
        for node in &cluster.nodes {
            let ip = cluster.net.addr(node.host);
            cluster.must(
                n1,
                &[
                    "node",
                    "add",
                    &node.name,
                    "--lmtp",
                    &format!("{ip}:24"),
                    "--imap",
                    &format!("{ip}:143"),
                    "--pop3",
                    &format!("{ip}:110"),
                ],
            );
        }
        for i in 1..=3 {
            cluster.must(
                n1,
                &[
                    "user",
                    "add",
                    &format!("u{i}@example.test"),
                    "--node",
                    &format!("n{i}"),
                    "--password",
                    PASSWORD,
                ],
            );
        }
        let mut cluster = cluster;
        for i in 0..3 {
            cluster.start_node(i);
        }
        cluster
    }

    /// `mailstow --config <node's> ARGS` inside the node's namespace.
    fn cli(&self, node: &Node, args: &[&str]) -> std::process::Output {
        self.net
            .command(node.host, env!("CARGO_BIN_EXE_mailstow"))
            .arg("--config")
            .arg(&node.config)
            .args(args)
            .output()
            .expect("run mailstow")
    }

    fn must(&self, node: &Node, args: &[&str]) -> String {
        let out = self.cli(node, args);
        assert!(out.status.success(), "mailstow {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn start_node(&mut self, i: usize) {
        let node = &self.nodes[i];
        assert!(node.child.is_none());
        let mut child = self
            .net
            .command(node.host, env!("CARGO_BIN_EXE_mailstow"))
            .arg("--config")
            .arg(&node.config)
            .arg("serve")
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start mailstow serve");
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let log = node.log.clone();
        let name = node.name.clone();
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
        let deadline = Instant::now() + Duration::from_secs(90);
        let mut listening = 0;
        while listening < 4 {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "{} did not start: {:?}",
                    node.name,
                    node.log.lock().unwrap()
                )
            });
            if line.contains(" listening on ") {
                listening += 1;
            }
        }
        std::thread::spawn(move || while rx.recv().is_ok() {});
        self.nodes[i].child = Some(child);
    }

    fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.nodes[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn log_lines(&self, i: usize, needle: &str) -> Vec<String> {
        self.nodes[i]
            .log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(needle))
            .cloned()
            .collect()
    }

    fn wait_list(&self, want: &[&str], within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let list = self.must(&self.nodes[2], &["node", "list"]);
            if want.iter().all(|w| list.contains(w)) {
                return list;
            }
            assert!(
                Instant::now() < deadline,
                "node list never showed {want:?}: {list}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Runs `f` inside host `host`'s namespace (the test's clients).
    fn within<T: Send>(&self, host: usize, f: impl FnOnce() -> T + Send) -> T {
        self.net.within(host, f).expect("a thread in the namespace")
    }

    fn addr(&self, i: usize, port: u16) -> String {
        format!("{}:{port}", self.net.addr(i))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill(i);
        }
    }
}

/// One SMTP transaction; the final reply code, or the error that ended it.
fn send(address: &str, to: &str, subject: &str) -> Result<u16, String> {
    let address = address.parse().unwrap();
    let stream =
        TcpStream::connect_timeout(&address, Duration::from_secs(3)).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let mut step = |line: String, want: u16| -> Result<u16, String> {
        if !line.is_empty() {
            writer
                .write_all(line.as_bytes())
                .map_err(|e| e.to_string())?;
        }
        let code = smtp_reply(&mut reader).map_err(|e| e.to_string())?;
        if want != 0 && code != want {
            return Err(format!("{} answered {code}", line.trim_end()));
        }
        Ok(code)
    };
    step(String::new(), 220)?;
    step("EHLO client.example\r\n".into(), 250)?;
    step("MAIL FROM:<sender@example.org>\r\n".into(), 250)?;
    step(format!("RCPT TO:<{to}>\r\n"), 250)?;
    step("DATA\r\n".into(), 354)?;
    let code = step(
        format!("From: sender@example.org\r\nSubject: {subject}\r\n\r\nbody of {subject}\r\n.\r\n"),
        0,
    )?;
    let _ = step("QUIT\r\n".into(), 0);
    Ok(code)
}

/// A small IMAP client that reads literals (message contents hold empty lines).
struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    tag: u32,
}

/// One response line with the literals inside it: the text, and the literals' bytes.
type Response = (String, Vec<Vec<u8>>);

impl Client {
    fn connect(address: &str) -> Result<Client, String> {
        let address = address.parse().unwrap();
        let stream = TcpStream::connect_timeout(&address, Duration::from_secs(3))
            .map_err(|e| e.to_string())?;
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut client = Client {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
            tag: 0,
        };
        let greeting = client.response()?;
        if !greeting.0.starts_with("* OK") {
            return Err(greeting.0);
        }
        Ok(client)
    }

    fn response(&mut self) -> Result<Response, String> {
        let mut text = String::new();
        let mut literals = Vec::new();
        loop {
            let mut line = String::new();
            let n = self
                .reader
                .read_line(&mut line)
                .map_err(|e| e.to_string())?;
            if n == 0 {
                return Err(format!("connection closed after {text:?}"));
            }
            let line = line.trim_end_matches(['\r', '\n']);
            text.push_str(line);
            // "... {N}": N bytes of literal follow, then the rest of the response.
            let Some(len) = line
                .strip_suffix('}')
                .and_then(|l| l.rsplit_once('{'))
                .and_then(|(_, n)| n.parse::<usize>().ok())
            else {
                return Ok((text, literals));
            };
            let mut literal = vec![0; len];
            std::io::Read::read_exact(&mut self.reader, &mut literal).map_err(|e| e.to_string())?;
            literals.push(literal);
        }
    }

    /// Runs a command; every response, the tagged one last.
    fn run(&mut self, command: &str) -> Result<Vec<Response>, String> {
        self.tag += 1;
        let tag = format!("a{} ", self.tag);
        self.writer
            .write_all(format!("{tag}{command}\r\n").as_bytes())
            .map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        loop {
            let response = self.response()?;
            let done = response.0.starts_with(&tag);
            out.push(response);
            if done {
                return Ok(out);
            }
        }
    }
}

/// What a client sees of a folder: UIDVALIDITY, and per message its UID, flags and a hash
/// of its content, ordered by UID.
type Mailbox = (String, Vec<(u32, String, String)>);

fn mailbox(address: &str, user: &str) -> Result<Mailbox, String> {
    let mut imap = Client::connect(address)?;
    let login = imap.run(&format!("LOGIN {user} {PASSWORD}"))?;
    let last = &login.last().unwrap().0;
    if !last.contains(" OK") {
        return Err(last.clone());
    }
    let select = imap.run("SELECT INBOX")?;
    let uidvalidity = select
        .iter()
        .find_map(|(l, _)| l.split("[UIDVALIDITY ").nth(1))
        .and_then(|r| r.split(']').next())
        .ok_or_else(|| format!("no UIDVALIDITY: {select:?}"))?
        .to_string();
    let fetched = imap.run("UID FETCH 1:* (UID FLAGS BODY.PEEK[])")?;
    let _ = imap.run("LOGOUT");
    let mut messages: Vec<(u32, String, String)> = fetched
        .iter()
        .filter(|(l, _)| l.starts_with("* ") && l.contains(" FETCH ("))
        .map(|(line, literals)| {
            let uid = line
                .split("UID ")
                .nth(1)
                .unwrap()
                .split([' ', ')'])
                .next()
                .unwrap();
            let flags = line
                .split("FLAGS (")
                .nth(1)
                .unwrap()
                .split(')')
                .next()
                .unwrap();
            let mut flags: Vec<&str> = flags
                .split(' ')
                .filter(|f| !f.is_empty() && *f != "\\Recent")
                .collect();
            flags.sort();
            let body = literals
                .first()
                .map(|b| blake3::hash(b).to_hex().to_string());
            (
                uid.parse().unwrap(),
                flags.join(" "),
                body.unwrap_or_default(),
            )
        })
        .collect();
    messages.sort();
    Ok((uidvalidity, messages))
}

/// Waits until `user`'s INBOX through `address` has `count` messages; returns it.
fn until_count(
    cluster: &Cluster,
    client: usize,
    address: &str,
    user: &str,
    count: usize,
    within: Duration,
) -> Mailbox {
    let deadline = Instant::now() + within;
    loop {
        let seen = cluster.within(client, || mailbox(address, user));
        match seen {
            Ok(found) if found.1.len() >= count => return found,
            other => assert!(
                Instant::now() < deadline,
                "{user} through {address}: {count} messages never arrived: {other:?}"
            ),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn an_owner_cut_from_postgresql_is_fenced_and_its_partner_serves_every_change() {
    let mut cluster = Cluster::start();
    cluster.wait_list(
        &[
            "n1 up users=1 replica=n2",
            "n2 up users=1 replica=n3",
            "n3 up users=1 replica=n1",
        ],
        Duration::from_secs(90),
    );
    // Mail for u1 (n1's) through n2 and n3, and flag changes through n3's proxy.
    let (via2, via3) = (cluster.addr(1, 25), cluster.addr(2, 25));
    for i in 0..20 {
        let via = if i % 2 == 0 { &via2 } else { &via3 };
        let sent = cluster.within(2, || {
            send(via, "u1@example.test", &format!("before-{i:02}"))
        });
        assert_eq!(sent, Ok(250));
    }
    let imap3 = cluster.addr(2, 143);
    let before = until_count(
        &cluster,
        2,
        &imap3,
        "u1@example.test",
        20,
        Duration::from_secs(30),
    );
    cluster.within(2, || {
        let mut imap = Client::connect(&imap3).unwrap();
        let login = imap
            .run(&format!("LOGIN u1@example.test {PASSWORD}"))
            .unwrap();
        assert!(login.last().unwrap().0.contains(" OK"));
        imap.run("SELECT INBOX").unwrap();
        let stored = imap.run("UID STORE 1:10 +FLAGS (\\Flagged)").unwrap();
        assert!(stored.last().unwrap().0.contains(" OK"), "{stored:?}");
        imap.run("LOGOUT").unwrap();
    });
    let before = {
        let mut b = before;
        for m in b.1.iter_mut().filter(|m| m.0 <= 10) {
            let mut flags: Vec<&str> = m.1.split(' ').filter(|f| !f.is_empty()).collect();
            flags.push("\\Flagged");
            flags.sort();
            m.1 = flags.join(" ");
        }
        b
    };
    assert_eq!(
        cluster
            .within(2, || mailbox(&imap3, "u1@example.test"))
            .unwrap(),
        before
    );

    // n1 loses PostgreSQL (and only it): it must stop acknowledging within its lease, and
    // n2 take it over.
    let cut = Instant::now();
    let db = cluster.db;
    cluster.net.cut(0, db).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while cluster.log_lines(0, "reason=lease_lapsed").is_empty() {
        assert!(Instant::now() < deadline, "n1 never fenced itself");
        std::thread::sleep(Duration::from_millis(50));
    }
    let fenced = cut.elapsed();
    // Fenced: n1 answers its own user UNAVAILABLE.
    let imap1 = cluster.addr(0, 143);
    let at_n1 = cluster.within(0, || mailbox(&imap1, "u1@example.test"));
    assert!(
        at_n1.as_ref().is_err_and(|e| e.contains("UNAVAILABLE")),
        "{at_n1:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while cluster.log_lines(1, "event=failover node=n1").is_empty() {
        assert!(Instant::now() < deadline, "n2 never took n1 over");
        std::thread::sleep(Duration::from_millis(50));
    }
    let taken = cut.elapsed();
    // Served from n2's copy: the same mailbox, flags included.
    let served = until_count(
        &cluster,
        2,
        &imap3,
        "u1@example.test",
        20,
        Duration::from_secs(30),
    );
    let served_after = cut.elapsed();
    eprintln!(
        "cut from PostgreSQL: n1 fenced after {fenced:?}, taken over after {taken:?}, u1 served after {served_after:?}"
    );
    assert!(
        fenced < Duration::from_secs(6),
        "fenced after {fenced:?}: more than the lease"
    );
    assert!(fenced < taken, "n1 fenced {fenced:?}, taken over {taken:?}");
    assert_eq!(served, before);
    // New mail while n1's machine is cut: to the node where n1 lives now.
    for i in 0..6 {
        let via = if i % 2 == 0 { &via2 } else { &via3 };
        let sent = cluster.within(2, || {
            send(via, "u1@example.test", &format!("during-{i:02}"))
        });
        assert_eq!(sent, Ok(250));
    }
    let during = until_count(
        &cluster,
        2,
        &imap3,
        "u1@example.test",
        26,
        Duration::from_secs(60),
    );

    // The cut heals: the old n1 learns it was taken over and acknowledges nothing more.
    cluster.net.heal(0, db).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while cluster.log_lines(0, "reason=taken_over").is_empty() {
        assert!(
            Instant::now() < deadline,
            "n1 never learned it was taken over"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Its machine restarts it: a standby first, then n1 again, with everything.
    cluster.kill(0);
    cluster.start_node(0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while cluster.log_lines(1, "event=handed_back").is_empty() {
        assert!(Instant::now() < deadline, "n2 never handed n1 back");
        std::thread::sleep(Duration::from_millis(100));
    }
    cluster.wait_list(&["n1 up users=1 replica=n2"], Duration::from_secs(60));
    let home = cluster
        .within(0, || mailbox(&imap1, "u1@example.test"))
        .unwrap();
    // One copy of everything, no UID reused: exactly what u1 saw during the failover.
    assert_eq!(home, during);
    let uids: Vec<u32> = home.1.iter().map(|m| m.0).collect();
    let mut unique = uids.clone();
    unique.dedup();
    assert_eq!(uids, unique);
    assert_eq!(home.0, before.0, "UIDVALIDITY kept");
}

/// SIGKILL of an owner and the removal of its whole data directory under SMTP and IMAP load
/// (issue 40): every message any node acknowledged and every flag change the owner answered
/// OK is there when its partner serves the node, and nothing is there twice.
#[test]
fn a_lost_owner_under_load_loses_no_acknowledged_message_or_flag_change() {
    let mut cluster = Cluster::start();
    cluster.wait_list(
        &[
            "n1 up users=1 replica=n2",
            "n2 up users=1 replica=n3",
            "n3 up users=1 replica=n1",
        ],
        Duration::from_secs(90),
    );
    let (via2, via3, imap3) = (
        cluster.addr(1, 25),
        cluster.addr(2, 25),
        cluster.addr(2, 143),
    );
    for i in 0..10 {
        let sent = cluster.within(2, || {
            send(&via3, "u1@example.test", &format!("seed-{i:02}"))
        });
        assert_eq!(sent, Ok(250));
    }
    until_count(
        &cluster,
        2,
        &imap3,
        "u1@example.test",
        10,
        Duration::from_secs(30),
    );
    let stop = std::sync::atomic::AtomicBool::new(false);
    let acked: Mutex<Vec<String>> = Mutex::default();
    let flagged: Mutex<Vec<u32>> = Mutex::default();
    let mut n1 = cluster.nodes[0].child.take().expect("n1 runs");
    let data = cluster.nodes[0].config.with_file_name("n1");
    let killed = std::thread::scope(|scope| {
        // SMTP through n2 and n3 (the load keeps coming while n1 is lost).
        scope.spawn(|| {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let subject = format!("load-{n:04}");
                let via = if n % 2 == 0 { &via2 } else { &via3 };
                if cluster.within(2, || send(via, "u1@example.test", &subject)) == Ok(250) {
                    acked.lock().unwrap().push(subject);
                }
                n += 1;
            }
        });
        // Flag changes through n3's proxy, one UID at a time, kept when answered OK.
        scope.spawn(|| {
            let mut uid = 1;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && uid <= 10 {
                let ok = cluster.within(2, || -> Result<bool, String> {
                    let mut imap = Client::connect(&imap3)?;
                    let login = imap.run(&format!("LOGIN u1@example.test {PASSWORD}"))?;
                    if !login.last().unwrap().0.contains(" OK") {
                        return Ok(false);
                    }
                    imap.run("SELECT INBOX")?;
                    let stored = imap.run(&format!("UID STORE {uid} +FLAGS (\\Flagged)"))?;
                    Ok(stored.last().unwrap().0.contains(" OK"))
                });
                if ok == Ok(true) {
                    flagged.lock().unwrap().push(uid);
                    uid += 1;
                } else {
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        });
        std::thread::sleep(Duration::from_secs(2));
        // n1's machine is lost: process and disk.
        let _ = n1.kill();
        let _ = n1.wait();
        let killed = Instant::now();
        std::fs::remove_dir_all(&data).unwrap();
        let deadline = Instant::now() + Duration::from_secs(40);
        while cluster.log_lines(1, "event=failover node=n1").is_empty() {
            assert!(Instant::now() < deadline, "n2 never took n1 over");
            std::thread::sleep(Duration::from_millis(50));
        }
        // Load goes on against the node where n1 lives now, then stops.
        std::thread::sleep(Duration::from_secs(3));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        killed
    });
    let acked = acked.into_inner().unwrap();
    let flagged = flagged.into_inner().unwrap();
    let want = 10 + acked.len();
    let served = until_count(
        &cluster,
        2,
        &imap3,
        "u1@example.test",
        want,
        Duration::from_secs(90),
    );
    eprintln!(
        "lost owner under load: {} acknowledged during the run, {} flag changes, served {:?} after the kill",
        acked.len(),
        flagged.len(),
        killed.elapsed()
    );
    assert_eq!(
        served.1.len(),
        want,
        "every acknowledged message once, nothing twice"
    );
    for uid in flagged {
        let message = served
            .1
            .iter()
            .find(|m| m.0 == uid)
            .expect("flagged message kept");
        assert!(message.1.contains("\\Flagged"), "UID {uid}: {message:?}");
    }
}
