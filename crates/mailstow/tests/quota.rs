//! Issue 19, items 6 and 7, against the real binary: one quota for every path that adds
//! mail (IMAP APPEND, COPY and MOVE answer `NO [OVERQUOTA]`, SMTP RCPT 452 4.2.2 and 552
//! 5.2.2), the QUOTA extension (GETQUOTAROOT, GETQUOTA), `user quota` with units, `user list`
//! and `user show` with usage while the server runs and without it, and `user rename` keeping
//! the mail (same UIDs and UIDVALIDITY) while the server runs, without it, and after a crash
//! cut it short.

mod common;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Imap, Server, mailstow, must, set_up_data_dir};

/// What these tests add to the shared client.
impl Imap {
    fn login(address: &str, user: &str) -> Imap {
        let mut imap = Imap::connect(address);
        let answer = imap.run(&format!("LOGIN {user} secret-pw"));
        assert!(answer.last().unwrap().contains(" OK "), "{answer:?}");
        imap
    }

    /// APPEND of a message of exactly `size` bytes; returns the tagged answer, untagged.
    fn append(&mut self, folder: &str, size: usize) -> String {
        let head = format!("Subject: {size} bytes\r\n\r\n");
        let body = "x".repeat(size - head.len());
        let answer = self.run(&format!("APPEND {folder} {{{size}+}}\r\n{head}{body}"));
        status(&answer).to_string()
    }
}

/// The tagged answer without its tag.
fn status(lines: &[String]) -> &str {
    let last = lines.last().expect("an answer");
    last.split_once(' ').map_or(last.as_str(), |(_, rest)| rest)
}

/// A blocking SMTP client; `send` returns the reply's last line.
struct Smtp {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Smtp {
    fn connect(address: &str) -> Smtp {
        let stream = TcpStream::connect(address).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut smtp = Smtp {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
        };
        assert!(smtp.reply().starts_with("220"));
        assert!(smtp.send("EHLO client.test").starts_with("250"));
        smtp
    }

    fn reply(&mut self) -> String {
        loop {
            let mut line = String::new();
            assert!(self.reader.read_line(&mut line).unwrap() > 0, "closed");
            if line.as_bytes().get(3) != Some(&b'-') {
                return line.trim_end().to_string();
            }
        }
    }

    fn send(&mut self, line: &str) -> String {
        self.writer
            .write_all(format!("{line}\r\n").as_bytes())
            .unwrap();
        self.reply()
    }
}

fn start(data: &Path) -> Server {
    let config = data.with_extension("quota.toml");
    std::fs::write(&config, "[server]\nauth_without_tls = true\n").unwrap();
    Server::start_with(data, Some(&config))
}

/// [`start`], with the mail log (level info) in `log`.
fn start_logged(data: &Path, log: &Path) -> Server {
    let config = data.with_extension("logged.toml");
    let text = format!(
        "[server]\nauth_without_tls = true\n[log]\nfile = \"{}\"\nlevel = \"info\"\n",
        log.display()
    );
    std::fs::write(&config, text).unwrap();
    Server::start_opts(data, Some(&config), None, &[])
}

/// `mailstow ARGS` must fail; returns its standard error.
fn fails(data: &Path, args: &[&str]) -> String {
    let out = mailstow(data, args);
    assert!(!out.status.success(), "{args:?} succeeded: {out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The `user list` line of `address`, split into its columns.
fn listed(data: &Path, address: &str) -> Vec<String> {
    let list = must(mailstow(data, &["user", "list"]));
    let line = list
        .lines()
        .find(|l| l.starts_with(address))
        .unwrap_or_else(|| panic!("{address} not in\n{list}"));
    line.split_whitespace().map(str::to_string).collect()
}

#[test]
fn one_quota_for_imap_and_smtp_set_while_running() {
    let (_dir, data) = set_up_data_dir();
    let server = start(&data);
    let imap = server.addr("imap");
    let bob = "bob@example.test";
    let mut c = Imap::login(&imap, bob);
    let caps = c.run("CAPABILITY");
    assert!(
        caps[0].contains(" QUOTA QUOTA=RES-STORAGE QUOTA=RES-MESSAGE"),
        "{caps:?}"
    );
    let root = c.run("GETQUOTAROOT INBOX");
    assert_eq!(root[0], "* QUOTAROOT INBOX", "no limits, no root");
    assert_eq!(status(&root), "OK GETQUOTAROOT completed");
    assert!(c.append("INBOX", 1500).contains("OK [APPENDUID"));
    assert!(c.append("INBOX", 1500).contains("OK [APPENDUID"));

    // Set while the session is open: its next command sees it.
    let out = must(mailstow(&data, &["user", "quota", bob, "4K"]));
    assert_eq!(out.trim(), "quota set: bob@example.test 4K");
    let root = c.run("GETQUOTAROOT INBOX");
    assert_eq!(
        root[..2],
        ["* QUOTAROOT INBOX \"\"", "* QUOTA \"\" (STORAGE 3 4)"],
        "3000 bytes used of 4096"
    );
    assert_eq!(
        c.run("GETQUOTA \"\"")[0],
        "* QUOTA \"\" (STORAGE 3 4)".to_string()
    );
    assert!(status(&c.run("SETQUOTA \"\" (STORAGE 100000)")).starts_with("NO "));
    assert_eq!(
        c.append("INBOX", 1500),
        "NO [OVERQUOTA] Mailbox quota exceeded"
    );
    assert_eq!(
        c.append("INBOX", 5000),
        "NO [OVERQUOTA] Larger than the mailbox quota"
    );
    c.run("SELECT INBOX");
    assert_eq!(
        status(&c.run("COPY 1:2 Archive")),
        "NO [OVERQUOTA] Mailbox quota exceeded"
    );
    assert_eq!(
        status(&c.run("MOVE 1 Archive")),
        "NO [OVERQUOTA] Mailbox quota exceeded"
    );
    assert_eq!(
        status(&c.run("UID MOVE 1 Archive")),
        "NO [OVERQUOTA] Mailbox quota exceeded"
    );
    assert!(
        c.run("STATUS Archive (MESSAGES)")[0].contains("(MESSAGES 0)"),
        "nothing was copied"
    );

    // SMTP at RCPT: full (452 4.2.2), or larger than the quota (552 5.2.2); RFC 3463.
    let mut smtp = Smtp::connect(&server.addr("smtp"));
    assert!(
        smtp.send("MAIL FROM:<x@elsewhere.test> SIZE=2000")
            .starts_with("250")
    );
    let full = smtp.send(&format!("RCPT TO:<{bob}>"));
    assert!(full.starts_with("452 4.2.2 "), "{full}");
    assert!(smtp.send("RSET").starts_with("250"));
    assert!(
        smtp.send("MAIL FROM:<x@elsewhere.test> SIZE=5000")
            .starts_with("250")
    );
    let large = smtp.send(&format!("RCPT TO:<{bob}>"));
    assert!(large.starts_with("552 5.2.2 "), "{large}");
    // Another user has no quota.
    assert!(smtp.send("RCPT TO:<alice@example.test>").starts_with("250"));
    drop(smtp);

    // Raised while the session is open: the same session may add again.
    must(mailstow(&data, &["user", "quota", bob, "1.5M"]));
    assert_eq!(
        c.run("GETQUOTA \"\"")[0],
        "* QUOTA \"\" (STORAGE 3 1536)".to_string()
    );
    assert_eq!(status(&c.run("COPY 1 Archive")).get(..3), Some("OK "));
    // A message quota: three messages are held (two in INBOX, one in Archive).
    let out = must(mailstow(&data, &["user", "quota", bob, "--messages", "3"]));
    assert_eq!(out.trim(), "message quota set: bob@example.test 3");
    assert_eq!(
        c.run("GETQUOTAROOT Archive")[1],
        "* QUOTA \"\" (STORAGE 5 1536 MESSAGE 3 3)".to_string()
    );
    assert_eq!(
        c.append("INBOX", 100),
        "NO [OVERQUOTA] Mailbox quota exceeded"
    );

    // `user list` while running: usage from the server's store, and the last login.
    let deadline = Instant::now() + Duration::from_secs(10);
    let columns = loop {
        let columns = listed(&data, bob);
        if columns[5] != "never" || Instant::now() > deadline {
            break columns;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(columns[1..5], ["3", "4.4K", "1.5M", "3"], "{columns:?}");
    assert!(columns[5].starts_with("20"), "last login {columns:?}");
    let alice = listed(&data, "alice@example.test");
    assert_eq!(alice[1..6], ["0", "0", "none", "none", "never"]);
    // `user show`: every folder with its messages and bytes.
    let show = must(mailstow(&data, &["user", "show", bob]));
    assert!(show.contains("quota: 1.5M\nmax messages: 3\n"), "{show}");
    assert!(
        show.contains("usage: 3 messages, 4.4K (4500 bytes)"),
        "{show}"
    );
    let folder = |name: &str| -> Vec<String> {
        show.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} not in\n{show}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    assert_eq!(folder("INBOX")[1..3], ["2", "3000"]);
    assert_eq!(folder("Archive")[1..3], ["1", "1500"]);
    assert_eq!(folder("Trash")[1..3], ["0", "0"]);
    assert!(fails(&data, &["user", "show", "nobody@example.test"]).contains("no such user"));

    // Units: garbage and zero are refused and change nothing.
    for garbage in ["12X", "1.2.3G", "M", "1,5G"] {
        let message = fails(&data, &["user", "quota", bob, garbage]);
        assert!(message.contains("expected a size"), "{garbage}: {message}");
    }
    assert!(fails(&data, &["user", "quota", bob, "0"]).contains("use 'none'"));
    assert!(fails(&data, &["user", "quota", bob, "--messages", "lots"]).contains("messages"));
    assert!(fails(&data, &["user", "quota", bob]).contains("SIZE"));
    must(mailstow(
        &data,
        &["user", "quota", bob, "none", "--messages", "none"],
    ));
    assert_eq!(
        c.run("GETQUOTAROOT INBOX")[0],
        "* QUOTAROOT INBOX".to_string()
    );
    assert!(c.append("INBOX", 100).contains("OK [APPENDUID"));
    server.stop_cleanly();

    // Without a server, `user list` and `user show` open the store themselves.
    assert_eq!(listed(&data, bob)[1..5], ["4", "4.5K", "none", "none"]);
    let show = must(mailstow(&data, &["user", "show", bob]));
    assert!(show.contains("usage: 4 messages"), "{show}");
}

/// `UIDVALIDITY` and the UIDs of `folder`, from SELECT and UID FETCH.
fn uids(c: &mut Imap, folder: &str) -> (String, Vec<String>) {
    let select = c.run(&format!("SELECT {folder}"));
    let validity = select
        .iter()
        .find_map(|l| l.split_once("[UIDVALIDITY ").map(|(_, v)| v))
        .and_then(|v| v.split(']').next())
        .expect("UIDVALIDITY")
        .to_string();
    let fetch = c.run("UID FETCH 1:* (UID)");
    let uids = fetch[..fetch.len() - 1]
        .iter()
        .map(|l| {
            l.rsplit("UID ")
                .next()
                .unwrap()
                .trim_end_matches(')')
                .to_string()
        })
        .collect();
    (validity, uids)
}

fn password_file(data: &Path) -> PathBuf {
    data.parent().unwrap().join("password")
}

#[test]
fn rename_keeps_the_mail_while_running_and_offline() {
    let (dir, data) = set_up_data_dir();
    let log = dir.path().join("mail.log");
    let server = start_logged(&data, &log);
    let imap = server.addr("imap");
    let bob = "bob@example.test";
    let mut c = Imap::login(&imap, bob);
    c.run("CREATE Projects");
    for folder in ["INBOX", "INBOX", "INBOX", "Projects"] {
        assert!(c.append(folder, 300).contains("OK [APPENDUID"));
    }
    c.run("SELECT INBOX");
    c.run("UID STORE 2 +FLAGS (\\Deleted)");
    assert_eq!(status(&c.run("UID EXPUNGE 2")).get(..3), Some("OK "));
    let before = uids(&mut c, "INBOX");
    assert_eq!(before.1, ["1", "3"]);
    must(mailstow(&data, &["user", "quota", bob, "1M"]));
    must(mailstow(
        &data,
        &["alias", "add", "bobby@example.test", bob],
    ));

    // Refusals: the new name exists, the old one does not.
    assert!(
        fails(&data, &["user", "rename", bob, "alice@example.test"]).contains("exists"),
        "renaming onto a user"
    );
    assert!(
        fails(
            &data,
            &["user", "rename", "nobody@example.test", "x@example.test"]
        )
        .contains("nobody@example.test")
    );

    let out = must(mailstow(
        &data,
        &["user", "rename", bob, "Robert@Example.test"],
    ));
    assert_eq!(
        out.trim(),
        "user renamed: bob@example.test -> robert@example.test (7 folders, 3 messages, 900 bytes kept)",
    );
    // The log is written by a background thread: wait for the line.
    let deadline = Instant::now() + Duration::from_secs(10);
    let line = loop {
        let logged = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(line) = logged.lines().find(|l| l.contains("event=user_rename")) {
            break line.to_string();
        }
        assert!(Instant::now() < deadline, "no user_rename in\n{logged}");
        std::thread::sleep(Duration::from_millis(50));
    };
    for field in [
        "user=bob@example.test",
        "new_user=robert@example.test",
        "sessions_closed=1",
        "messages=3",
    ] {
        assert!(line.contains(field), "{field}: {line}");
    }
    // Bob's open session was closed.
    let mut rest = String::new();
    let _ = c.reader.read_to_string(&mut rest);
    assert!(rest.contains("* BYE"), "{rest}");
    let mut old = Imap::connect(&imap);
    assert!(status(&old.run(&format!("LOGIN {bob} secret-pw"))).starts_with("NO "));

    let robert = "robert@example.test";
    let mut c = Imap::login(&imap, robert);
    assert_eq!(uids(&mut c, "INBOX"), before, "same UIDVALIDITY and UIDs");
    assert!(c.run("STATUS Projects (MESSAGES)")[0].contains("(MESSAGES 1)"));
    // The quota and the alias moved too.
    assert!(c.run("GETQUOTAROOT INBOX")[1].contains("STORAGE 1 1024"));
    assert!(
        must(mailstow(&data, &["alias", "list"]))
            .contains("bobby@example.test -> robert@example.test")
    );
    let mut smtp = Smtp::connect(&server.addr("smtp"));
    assert!(smtp.send("MAIL FROM:<x@elsewhere.test>").starts_with("250"));
    assert!(smtp.send(&format!("RCPT TO:<{robert}>")).starts_with("250"));
    assert!(smtp.send(&format!("RCPT TO:<{bob}>")).starts_with("550"));
    drop(smtp);
    drop(c);
    // The old name is free again.
    must(mailstow(
        &data,
        &[
            "user",
            "add",
            bob,
            "--password-file",
            password_file(&data).to_str().unwrap(),
        ],
    ));
    let mut c = Imap::login(&imap, bob);
    assert!(c.run("SELECT INBOX").iter().any(|l| l == "* 0 EXISTS"));
    drop(c);
    server.stop_cleanly();

    // Offline: the CLI locks the data directory and does the same.
    let out = must(mailstow(
        &data,
        &["user", "rename", robert, "rob@example.test"],
    ));
    assert!(
        out.contains("robert@example.test -> rob@example.test (7 folders, 3 messages"),
        "{out}"
    );
    let show = must(mailstow(&data, &["user", "show", "rob@example.test"]));
    assert!(show.contains("usage: 3 messages"), "{show}");
    let server = start(&data);
    let mut c = Imap::login(&server.addr("imap"), "rob@example.test");
    assert_eq!(uids(&mut c, "INBOX"), before);
    drop(c);
    server.stop_cleanly();
}

/// A rename a crash cut short (the intent recorded, no mail moved yet) is finished by the
/// next start.
#[test]
fn a_rename_cut_short_is_finished_at_start() {
    let (_dir, data) = set_up_data_dir();
    let server = start(&data);
    let mut c = Imap::login(&server.addr("imap"), "bob@example.test");
    assert!(c.append("INBOX", 200).contains("OK [APPENDUID"));
    let before = uids(&mut c, "INBOX");
    drop(c);
    server.stop_cleanly();
    // What `Directory::begin_rename` writes, and nothing after it.
    let recorded = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import sqlite3,sys\n\
             db=sqlite3.connect(sys.argv[1])\n\
             db.execute(\"INSERT INTO renamed_users (old_address, new_address, renamed_at) \
             VALUES ('bob@example.test', 'robert@example.test', 1)\")\n\
             db.commit()",
        )
        .arg(data.join("directory.db"))
        .output()
        .expect("python3");
    assert!(recorded.status.success(), "{recorded:?}");
    assert!(
        fails(&data, &["user", "del", "bob@example.test"]).contains("renamed"),
        "a pending rename holds both names"
    );

    let server = start(&data);
    let mut c = Imap::login(&server.addr("imap"), "robert@example.test");
    assert_eq!(uids(&mut c, "INBOX"), before);
    drop(c);
    let mut old = Imap::connect(&server.addr("imap"));
    assert!(status(&old.run("LOGIN bob@example.test secret-pw")).starts_with("NO "));
    server.stop_cleanly();
}
