//! Upgrades (docs/operations.md, "Upgrading and rolling back"): this build opens a data
//! directory written by an older one (`tests/fixtures/datadir-bf8fae5.tar.gz`, README there),
//! serves its mail over IMAP and POP3 and delivers new mail into it; and refuses, without a
//! panic and without touching the file, a directory or a file that a newer build wrote
//! (forged here by raising its format version).

mod common;

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Imap, Server, mailstow, must, smtp_reply};

const CONFIG: &str = "[server]\nhostname = \"mail.example.test\"\nauth_without_tls = true\n";

/// The fixture unpacked into a new temporary directory: (its handle, the data directory).
fn unpack() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let archive =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/datadir-bf8fae5.tar.gz");
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(dir.path())
        .status()
        .expect("run tar");
    assert!(status.success(), "tar -xzf {}", archive.display());
    let data = dir.path().join("data");
    std::fs::write(dir.path().join("mailstow.toml"), CONFIG).unwrap();
    (dir, data)
}

fn config(data: &Path) -> PathBuf {
    data.parent().unwrap().join("mailstow.toml")
}

/// A blocking POP3 client over plain TCP.
struct Pop3 {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Pop3 {
    /// Logs in, waiting while the previous session's lock on the maildrop is let go (the
    /// server releases it as that session ends, which may be after its QUIT answered).
    fn login(address: &str, user: &str, password: &str) -> Pop3 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match Pop3::try_login(address, user, password) {
                Ok(pop) => return pop,
                Err(answer) if answer.contains("[IN-USE]") && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(answer) => panic!("POP3 login as {user}: {answer}"),
            }
        }
    }

    fn try_login(address: &str, user: &str, password: &str) -> Result<Pop3, String> {
        let stream = TcpStream::connect(address).expect("connect pop3");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut pop = Pop3 {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
        };
        assert!(pop.line().starts_with("+OK"));
        for command in [format!("USER {user}"), format!("PASS {password}")] {
            let answer = pop.command(&command);
            if !answer.starts_with("+OK") {
                return Err(answer);
            }
        }
        Ok(pop)
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        line.trim_end().to_string()
    }

    fn command(&mut self, command: &str) -> String {
        self.writer
            .write_all(format!("{command}\r\n").as_bytes())
            .unwrap();
        self.line()
    }

    /// The lines of a multi-line answer, after its `+OK` line, up to the ".".
    fn lines(&mut self, command: &str) -> Vec<String> {
        let answer = self.command(command);
        assert!(answer.starts_with("+OK"), "{command}: {answer}");
        let mut lines = Vec::new();
        loop {
            let line = self.line();
            if line == "." {
                return lines;
            }
            lines.push(line);
        }
    }
}

/// One message over SMTP-like `address` (LMTP, or submission with AUTH PLAIN as `login`).
fn send(address: &str, lmtp: bool, login: Option<(&str, &str)>, to: &str, subject: &str) {
    let stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let mut step = |line: &str, code: u16| {
        if !line.is_empty() {
            writer.write_all(format!("{line}\r\n").as_bytes()).unwrap();
        }
        assert_eq!(smtp_reply(&mut reader).unwrap(), code, "{line}");
    };
    step("", 220);
    step(if lmtp { "LHLO t" } else { "EHLO t" }, 250);
    if let Some((user, password)) = login {
        use base64::Engine as _;
        let token =
            base64::engine::general_purpose::STANDARD.encode(format!("\0{user}\0{password}"));
        step(&format!("AUTH PLAIN {token}"), 235);
    }
    let from = login.map_or("carol@elsewhere.test", |(user, _)| user);
    step(&format!("MAIL FROM:<{from}>"), 250);
    step(&format!("RCPT TO:<{to}>"), 250);
    step("DATA", 354);
    step(
        &format!("From: {from}\r\nTo: {to}\r\nSubject: {subject}\r\n\r\nBody of {subject}.\r\n."),
        250,
    );
    step("QUIT", 221);
}

/// Logs in to IMAP as alice.
fn alice(server: &Server) -> Imap {
    let mut imap = Imap::connect(&server.addr("imap"));
    let answer = imap.run("LOGIN alice@example.test alice-secret");
    assert!(answer.last().unwrap().contains("OK"), "{answer:?}");
    imap
}

/// The folder's messages as `UID subject flags` lines (flags sorted), in UID order.
fn messages(imap: &mut Imap, folder: &str) -> Vec<String> {
    let answer = imap.run(&format!("EXAMINE {folder}"));
    assert!(answer.last().unwrap().contains("OK"), "{answer:?}");
    let answer = imap.run("UID FETCH 1:* (FLAGS ENVELOPE)");
    let mut out = Vec::new();
    for line in answer.iter().filter(|l| l.contains(" FETCH (")) {
        let field = |name: &str| line.split(name).nth(1).unwrap().to_string();
        let uid = field("UID ");
        let uid = uid.split([' ', ')']).next().unwrap();
        let flags = field("FLAGS (");
        // Flag order is the server's business.
        let mut flags: Vec<&str> = flags.split(')').next().unwrap().split(' ').collect();
        flags.sort_unstable();
        let flags = flags.join(" ");
        // ENVELOPE (date subject ...): the date is a quoted string or NIL.
        let envelope = field("ENVELOPE (");
        let after_date = match envelope.strip_prefix("NIL ") {
            Some(rest) => rest,
            None => envelope.splitn(3, '"').nth(2).unwrap().trim_start(),
        };
        let subject = after_date.split('"').nth(1).unwrap();
        out.push(format!("{uid} {subject} {flags}"));
    }
    out
}

/// Waits until `count(imap)` is `want`.
fn wait_until(what: &str, want: usize, mut count: impl FnMut() -> usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found = count();
        if found == want {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {found}, want {want}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_data_directory_of_bf8fae5_serves_its_mail_and_takes_new_mail() {
    let (_dir, data) = unpack();
    let server = Server::start_with(&data, Some(&config(&data)));

    // IMAP: folders, subscriptions, messages, flags and keywords as the old build left them.
    let mut imap = alice(&server);
    let list = imap.run("LIST \"\" *").join("\n");
    assert!(
        list.contains("\"INBOX\"") || list.contains(" INBOX"),
        "{list}"
    );
    assert!(list.contains("Projects"), "{list}");
    let subscribed = imap.run("LSUB \"\" *").join("\n");
    assert!(subscribed.contains("Projects"), "{subscribed}");
    assert_eq!(
        messages(&mut imap, "INBOX"),
        ["1 one \\Flagged \\Seen", "2 two $Label1 \\Answered"],
        "INBOX"
    );
    assert_eq!(
        messages(&mut imap, "Projects"),
        ["1 four ", "2 kept note $Important \\Seen"],
        "Projects"
    );
    let body = imap.run("UID FETCH 1 BODY.PEEK[TEXT]").join("\n");
    assert!(body.contains("Body of four."), "{body}");

    // POP3: bob's message.
    let mut pop = Pop3::login(&server.addr("pop3"), "bob@example.test", "bob-secret");
    assert!(pop.command("STAT").starts_with("+OK 1 "));
    let message = pop.lines("RETR 1");
    assert!(
        message.iter().any(|l| l == "Subject: for bob"),
        "{message:?}"
    );
    assert!(
        message.iter().any(|l| l == "Body of for bob."),
        "{message:?}"
    );
    assert!(pop.command("QUIT").starts_with("+OK"));

    // The queue: the deferred message is still there (the admin socket of the running
    // server).
    let queued = must(mailstow(&data, &["queue", "list"]));
    assert!(queued.contains("dave@remote.test"), "{queued}");

    // New mail, over LMTP and submission, read back.
    send(
        &server.addr("lmtp"),
        true,
        None,
        "alice@example.test",
        "after upgrade",
    );
    send(
        &server.addr("submission"),
        false,
        Some(("alice@example.test", "alice-secret")),
        "bob@example.test",
        "alice to bob",
    );
    wait_until("alice's INBOX", 3, || messages(&mut imap, "INBOX").len());
    let inbox = messages(&mut imap, "INBOX");
    // UIDs go on after the old build's: 3 and 4 were used (and expunged).
    assert!(inbox[2].starts_with("5 after upgrade "), "{inbox:?}");
    let pop_count = || {
        let mut pop = Pop3::login(&server.addr("pop3"), "bob@example.test", "bob-secret");
        let stat = pop.command("STAT");
        assert!(pop.command("QUIT").starts_with("+OK"));
        stat.split(' ').nth(1).unwrap().parse().unwrap()
    };
    wait_until("bob's maildrop", 2, pop_count);
    let mut pop = Pop3::login(&server.addr("pop3"), "bob@example.test", "bob-secret");
    let message = pop.lines("RETR 2");
    assert!(
        message.iter().any(|l| l == "Subject: alice to bob"),
        "{message:?}"
    );
    drop(imap);
    server.stop_cleanly();

    // Offline: the store and the queue check clean; the directory now says its format.
    let fsck = must(mailstow(&data, &["store", "fsck"]));
    assert!(fsck.contains("clean"), "{fsck}");
    let check = mailstow(&data, &["queue", "fsck"]);
    assert!(check.status.success(), "{check:?}");
    assert_eq!(
        std::fs::read_to_string(data.join("FORMAT")).unwrap(),
        "mailstow data directory format 1\n"
    );
}

/// Runs `serve` on `data`, which must refuse to start: returns its stderr.
fn serve_refused(data: &Path) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mailstow"))
        .arg("--config")
        .arg(config(data))
        .arg("--data-dir")
        .arg(data)
        .arg("serve")
        .args(
            common::SERVICES
                .iter()
                .flat_map(|s| [format!("--{s}"), "127.0.0.1:0".to_string()]),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mailstow serve");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve started on a newer data directory");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().unwrap();
    // A refusal is an error line and exit 1, not a panic (101).
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Writes `version` (u32, little-endian) at `offset` of `file`, keeping its length.
fn forge(file: &Path, offset: u64, version: u32) {
    use std::os::unix::fs::FileExt as _;
    let f = std::fs::OpenOptions::new().write(true).open(file).unwrap();
    f.write_all_at(&version.to_le_bytes(), offset).unwrap();
}

fn digest(file: &Path) -> blake3::Hash {
    let mut hasher = blake3::Hasher::new();
    std::io::copy(&mut std::fs::File::open(file).unwrap(), &mut hasher).unwrap();
    hasher.finalize()
}

/// Every file under `dir` (but `lock`, which every command opens) with its digest.
fn tree(dir: &Path) -> Vec<(PathBuf, blake3::Hash)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(tree(&path));
        } else if path.file_name().unwrap() != "lock" {
            out.push((path.clone(), digest(&path)));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn a_newer_data_directory_is_refused_whole_before_anything_is_touched() {
    let (_dir, data) = unpack();
    std::fs::write(data.join("FORMAT"), "mailstow data directory format 2\n").unwrap();
    let before = tree(&data);
    let message = format!(
        "{} was written by a newer mailstow (data directory format 2); this build reads up to \
         format 1: run the newer mailstow, or restore the backup taken before the upgrade",
        data.display()
    );
    let stderr = serve_refused(&data);
    assert!(stderr.contains(&message), "{stderr}");
    for args in [
        &["init"][..],
        &["store", "fsck", "--repair"],
        &["queue", "fsck"],
        &["user", "list"],
    ] {
        let output = mailstow(&data, args);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(&message), "{args:?}: {stderr}");
    }
    assert!(tree(&data) == before, "the refused directory changed");
}

#[test]
fn a_newer_queue_or_store_file_is_refused_and_left_alone() {
    // (file, offset of its format version, the format this build reads up to: the store's
    // index files are of format 2 since issue 40's delivered keys)
    for (file, at, supported) in [
        ("queue/main-00000001.seg", 8, 1),
        ("queue/deferred-00000003.seg", 8, 1),
        ("store/volume.dat", 8, 1),
        ("store/index-00000002.log", 8, 2),
        ("store/index.snap", 13, 2),
    ] {
        let (_dir, data) = unpack();
        let path = data.join(file);
        forge(&path, at, 7);
        let before = digest(&path);
        let stderr = serve_refused(&data);
        let message = format!(
            "{} was written by a newer mailstow (format 7); this build reads up to format \
             {supported}: run the newer mailstow, or restore the backup taken before the upgrade",
            path.display()
        );
        assert!(stderr.contains(&message), "{file}: {stderr}");
        let fsck = if file.starts_with("queue") {
            mailstow(&data, &["queue", "fsck", "--repair"])
        } else {
            mailstow(&data, &["store", "fsck", "--repair"])
        };
        assert_eq!(fsck.status.code(), Some(1), "{file}: {fsck:?}");
        assert!(
            String::from_utf8_lossy(&fsck.stderr).contains(&message),
            "{file}: {fsck:?}"
        );
        assert_eq!(digest(&path), before, "{file} changed");
        assert!(!data.join("FORMAT").exists(), "{file}: FORMAT written");
    }
}

#[test]
fn a_newer_directory_schema_is_refused_and_left_alone() {
    let (_dir, data) = unpack();
    let db = data.join("directory.db");
    let sql = |statement: &str| {
        let output = Command::new("python3")
            .arg("-c")
            .arg(
                "import sqlite3, sys\n\
                 c = sqlite3.connect(sys.argv[1])\n\
                 print(c.execute(sys.argv[2]).fetchall())\n\
                 c.commit()\n",
            )
            .arg(&db)
            .arg(statement)
            .output()
            .expect("python3");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    };
    sql("UPDATE meta SET value = 99 WHERE key = 'schema_version'");
    let stderr = serve_refused(&data);
    assert!(
        stderr.contains(
            "the directory was migrated by a newer mailstow (schema version 99); this build \
             reads up to schema version"
        ),
        "{stderr}"
    );
    let output = mailstow(&data, &["user", "list"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(
        sql("SELECT value FROM meta WHERE key = 'schema_version'"),
        "[(99,)]"
    );
}
