//! Shared by the server tests: run the binary, start and stop `mailstow serve`.
#![allow(dead_code)]

pub(crate) mod cluster;
pub(crate) mod mail;

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(crate) fn mailstow(data_dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mailstow"))
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .output()
        .expect("run mailstow")
}

pub(crate) fn must(output: Output) -> String {
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Every listener `Server::start` opens, each on an ephemeral loopback port (the web
/// view's and ManageSieve's too: their defaults, 127.0.0.1:8080 and 0.0.0.0:4190, would be
/// shared by every test's server; ManageSieve over implicit TLS is off by default).
pub(crate) const SERVICES: [&str; 11] = [
    "smtp",
    "submission",
    "submissions",
    "lmtp",
    "pop3",
    "pop3s",
    "imap",
    "imaps",
    "managesieve",
    "managesieves",
    "web",
];

/// How many of the server's last output lines a failed stop shows.
const OUTPUT_LINES_MAX: usize = 200;

/// The repository's tiny authoritative DNS server (`tests/e2e/fake_dns.py`) on a loopback
/// port, serving `zone` (see the script for the line forms); killed when dropped.
pub(crate) struct FakeDns {
    child: Child,
    pub(crate) address: SocketAddr,
}

impl FakeDns {
    pub(crate) fn start(zone: &[&str]) -> FakeDns {
        let dir = tempfile::tempdir().expect("temporary directory");
        let port_file = dir.path().join("dns.port");
        let mut child = Command::new("python3")
            .arg(script("fake_dns.py"))
            .arg(&port_file)
            .args(zone)
            .spawn()
            .expect("python3");
        let deadline = Instant::now() + Duration::from_secs(10);
        let port: u16 = loop {
            if let Ok(port) = std::fs::read_to_string(&port_file)
                && let Ok(port) = port.trim().parse()
            {
                break port;
            }
            assert!(Instant::now() < deadline, "fake DNS did not start");
            assert!(child.try_wait().unwrap().is_none(), "fake DNS exited");
            std::thread::sleep(Duration::from_millis(20));
        };
        FakeDns {
            child,
            address: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }
}

impl Drop for FakeDns {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running server; killed if the test fails before stopping it.
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) addresses: HashMap<String, SocketAddr>,
    /// Where `/metrics` and `/healthz` are served, when asked for.
    pub(crate) metrics: Option<SocketAddr>,
    /// Everything the server printed on stdout before its listeners were up (data directory,
    /// certificate, listeners).
    pub(crate) banner: Vec<String>,
    /// The server's last stdout and stderr lines, for the message of a failed stop.
    output: Arc<Mutex<VecDeque<String>>>,
    /// The name server it asks, when the test did not name one: an empty zone, so SPF, DKIM
    /// and DMARC checks of MX mail get quick answers (none) instead of waiting for a name
    /// server this machine cannot reach.
    _dns: Option<FakeDns>,
    /// The file given with `--config` (the test's own, or a copy naming the private name
    /// server).
    config_file: Option<PathBuf>,
}

/// `text` with `dns_servers` naming `name_server`, first in its `[server]` table.
fn with_name_server(text: &str, name_server: SocketAddr) -> String {
    let line = format!("dns_servers = [\"{name_server}\"]\n");
    match text.find("[server]\n") {
        Some(at) => {
            let at = at + "[server]\n".len();
            format!("{}{line}{}", &text[..at], &text[at..])
        }
        None => format!("[server]\n{line}{text}"),
    }
}

/// Keeps `line` among the last [`OUTPUT_LINES_MAX`].
fn remember(output: &Mutex<VecDeque<String>>, line: String) {
    let mut output = output.lock().unwrap();
    if output.len() == OUTPUT_LINES_MAX {
        output.pop_front();
    }
    output.push_back(line);
}

impl Server {
    /// Starts `mailstow serve` with every listener on an ephemeral loopback port and waits for
    /// the "<service> listening on <addr>" lines.
    pub(crate) fn start(data_dir: &Path) -> Server {
        Server::start_with(data_dir, None)
    }

    /// [`Server::start`] with a configuration file. Unless it sets `dns_servers`, the server
    /// gets a private empty-zone name server (see `Server::_dns`).
    pub(crate) fn start_with(data_dir: &Path, config: Option<&Path>) -> Server {
        Server::start_opts(data_dir, config, Some("warn"), &[])
    }

    /// [`Server::start_with`], with `RUST_LOG` set to `rust_log` (or left unset, so the
    /// config file's `[log] level` rules) and more arguments for `serve`. With `--metrics` in
    /// `args` (or `metrics` in the file) it also waits for the metrics listener. A service of
    /// [`SERVICES`] named in `args` (`--web ADDR`) is the test's: not set here, not waited for.
    pub(crate) fn start_opts(
        data_dir: &Path,
        config: Option<&Path>,
        rust_log: Option<&str>,
        args: &[&str],
    ) -> Server {
        let text = config
            .map(|c| std::fs::read_to_string(c).expect("config file"))
            .unwrap_or_default();
        let mut dns = None;
        let config = if text.contains("dns_servers") {
            config.map(Path::to_path_buf)
        } else {
            let fake = FakeDns::start(&[]);
            let path = data_dir.with_extension("server.toml");
            std::fs::write(&path, with_name_server(&text, fake.address)).expect("config file");
            dns = Some(fake);
            Some(path)
        };
        let services: Vec<&str> = SERVICES
            .iter()
            .copied()
            .filter(|s| !args.contains(&format!("--{s}").as_str()))
            .collect();
        let mut command = Command::new(env!("CARGO_BIN_EXE_mailstow"));
        if let Some(config) = &config {
            command.arg("--config").arg(config);
        }
        let mut child = command
            .arg("--data-dir")
            .arg(data_dir)
            .arg("serve")
            .args(
                services
                    .iter()
                    .flat_map(|s| [format!("--{s}"), "127.0.0.1:0".to_string()]),
            )
            .args(args)
            .env_remove("RUST_LOG")
            .envs(rust_log.map(|level| ("RUST_LOG", level)))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start mailstow serve");
        let output = Arc::new(Mutex::new(VecDeque::new()));
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        let kept = output.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                remember(&kept, line.clone());
                let _ = tx.send(line);
            }
        });
        // stderr still reaches the terminal, and is kept for a failed stop's message.
        let stderr = child.stderr.take().expect("stderr");
        let kept = output.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                eprintln!("{line}");
                remember(&kept, line);
            }
        });
        let wants_metrics = args.contains(&"--metrics")
            || text.lines().any(|l| l.trim_start().starts_with("metrics"));
        let mut addresses = HashMap::new();
        let mut metrics = None;
        let mut banner = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while services.iter().any(|s| !addresses.contains_key(*s))
            || (wants_metrics && metrics.is_none())
        {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(left)
                .expect("server printed its listeners in time");
            banner.push(line.clone());
            match line.split_once(" listening on ") {
                Some(("metrics", address)) => metrics = Some(address.parse().expect("address")),
                Some((service, address)) => {
                    addresses.insert(service.to_string(), address.parse().expect("address"));
                }
                None => {}
            }
        }
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || while rx.recv().is_ok() {});
        Server {
            child,
            addresses,
            metrics,
            banner,
            output,
            _dns: dns,
            config_file: config,
        }
    }

    /// Replaces the configuration file the server reads (keeping its private name server),
    /// for a reload.
    pub(crate) fn rewrite_config(&self, text: &str) {
        let path = self
            .config_file
            .as_ref()
            .expect("started with a config file");
        let text = match &self._dns {
            Some(dns) => with_name_server(text, dns.address),
            None => text.to_string(),
        };
        std::fs::write(path, text).expect("config file");
    }

    /// Sends SIGHUP (reload).
    pub(crate) fn hangup(&self) {
        let sent = Command::new("kill")
            .args(["-HUP", &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(sent.success());
    }

    /// The server's last stdout and stderr lines so far (at most [`OUTPUT_LINES_MAX`]).
    pub(crate) fn output(&self) -> Vec<String> {
        self.output.lock().unwrap().iter().cloned().collect()
    }

    pub(crate) fn addr(&self, service: &str) -> String {
        self.addresses[service].to_string()
    }

    /// [`Server::stop`], which must end in exit 0; otherwise fails showing the status and the
    /// server's last output.
    pub(crate) fn stop_cleanly(self) {
        let output = self.output.clone();
        let status = self.stop();
        if !status.success() {
            // The pipes reach end of file once the process is gone; give the readers a moment.
            std::thread::sleep(Duration::from_millis(200));
            let output = output.lock().unwrap();
            let lines: Vec<&str> = output.iter().map(String::as_str).collect();
            panic!(
                "serve exited with {status:?}; its last output:\n{}",
                lines.join("\n")
            );
        }
    }

    /// SIGTERM, then the exit status within a deadline.
    pub(crate) fn stop(mut self) -> std::process::ExitStatus {
        let pid = self.child.id() as i32;
        let sent = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("kill");
        assert!(sent.success());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "server did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A temporary directory holding `data`, made and [`setup`]; the directory lives as long as
/// the returned handle.
pub(crate) fn set_up_data_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("data directory");
    setup(&data);
    (dir, data)
}

pub(crate) fn setup(data: &Path) {
    must(mailstow(data, &["domain", "add", "example.test"]));
    let password_file = data.parent().unwrap().join("password");
    std::fs::write(&password_file, "secret-pw\n").unwrap();
    must(mailstow(
        data,
        &[
            "user",
            "add",
            "alice@example.test",
            "--password-file",
            password_file.to_str().unwrap(),
        ],
    ));
    must(mailstow(
        data,
        &["user", "add", "bob@example.test", "--password", "secret-pw"],
    ));
}

pub(crate) fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/e2e")
        .join(name)
}

impl Server {
    /// The Subject of every message in `user`'s maildrop, one per line (POP3S, Python's
    /// poplib).
    pub(crate) fn subjects(&self, user: &str, password: &str) -> String {
        let out = Command::new("python3")
            .arg(script("pop3_subjects.py"))
            .arg(self.addr("pop3s"))
            .args([user, password])
            .output()
            .expect("python3");
        assert!(out.status.success(), "pop3_subjects.py: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// SIGKILL: no shutdown path runs.
    pub(crate) fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One SMTP reply from a blocking client: the code of its last line (RFC 5321 4.2.1: "ddd-"
/// continues, "ddd " ends).
pub(crate) fn smtp_reply(reader: &mut BufReader<std::net::TcpStream>) -> std::io::Result<u16> {
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let code = line.get(..3).and_then(|c| c.parse().ok()).unwrap_or(0);
        if line.as_bytes().get(3) != Some(&b'-') {
            return Ok(code);
        }
    }
}

/// A blocking IMAP client over plain TCP.
pub(crate) struct Imap {
    pub(crate) reader: BufReader<TcpStream>,
    writer: TcpStream,
    tag: u32,
}

impl Imap {
    pub(crate) fn connect(address: &str) -> Imap {
        let stream = TcpStream::connect(address).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut imap = Imap {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
            tag: 0,
        };
        let greeting = imap.line();
        assert!(greeting.starts_with("* OK"), "{greeting}");
        imap
    }

    pub(crate) fn line(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        line.trim_end().to_string()
    }

    /// Runs one command under the next tag; returns every line of the answer, the tagged
    /// one last.
    pub(crate) fn run(&mut self, command: &str) -> Vec<String> {
        self.tag += 1;
        let tag = format!("a{}", self.tag);
        self.writer
            .write_all(format!("{tag} {command}\r\n").as_bytes())
            .unwrap();
        let mut lines = Vec::new();
        loop {
            let line = self.line();
            assert!(!line.is_empty(), "connection closed after {lines:?}");
            let done = line.starts_with(&format!("{tag} "));
            lines.push(line);
            if done {
                return lines;
            }
        }
    }
}

/// Standard base64 (RFC 4648 4), for AUTH PLAIN in the tests' SMTP clients.
pub(crate) fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
