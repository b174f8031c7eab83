//! Issue 19, item 10: `mailstow mailbox import|export` against the real binary. Maildir and
//! mbox trees written by Python's `mailbox` module, and a real Dovecot maildir (written by a
//! private Dovecot over IMAP, with `dovecot-uidlist` and `dovecot-keywords`), are imported
//! (offline, and through a running server), read back over IMAP (imaplib: FLAGS,
//! INTERNALDATE, UID, body), exported in both formats and compared with the source: bodies
//! byte for byte, flags, keywords, internal dates, and UIDs and UIDVALIDITY where the source
//! had them. The reading and comparing is `tests/e2e/migration_tool.py`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{Server, mailstow, must, script, set_up_data_dir};

const ALICE: &str = "alice@example.test";
const BOB: &str = "bob@example.test";

/// Starts the server with plain-text IMAP logins allowed (the scripts speak plain IMAP).
fn start(data: &Path) -> Server {
    let config = data.parent().unwrap().join("mailstow.toml");
    std::fs::write(&config, "[server]\nauth_without_tls = true\n").unwrap();
    Server::start_with(data, Some(&config))
}

/// Runs the helper script; panics with its output unless it succeeds.
fn tool(args: &[&str]) -> String {
    let output = Command::new("python3")
        .arg(script("migration_tool.py"))
        .args(args)
        .output()
        .expect("python3");
    assert!(
        output.status.success(),
        "migration_tool.py {args:?}: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Dumps the account over IMAP into `out`.
fn dump_imap(server: &Server, user: &str, out: &Path) {
    let address = server.addr("imap");
    let (host, port) = address.rsplit_once(':').unwrap();
    tool(&["dump-imap", host, port, user, "secret-pw", p(out)]);
}

/// Compares two dumps on `fields`; prints the tool's summary line.
fn same(a: &Path, b: &Path, fields: &str) {
    let summary = tool(&["compare", p(a), p(b), fields]);
    eprintln!("{}", summary.trim_end());
}

/// A failed command: exit status non-zero, one error line, no panic.
fn fails(output: Output, expected: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{output:?}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let error: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("mailstow: error:"))
        .collect();
    assert_eq!(error.len(), 1, "{stderr}");
    assert!(error[0].contains(expected), "{expected:?} not in {stderr}");
}

#[test]
fn python_maildir_and_mbox_round_trip_offline_and_through_the_server() {
    let (dir, data) = set_up_data_dir();
    let work = dir.path();
    must(mailstow(&data, &["init"]));
    let maildir = work.join("Maildir");
    let mbox = work.join("mbox");
    tool(&["build-maildir", p(&maildir)]);
    tool(&["build-mbox", p(&mbox)]);
    let source_maildir = work.join("source-maildir.json");
    let source_mbox = work.join("source-mbox.json");
    tool(&["dump-maildir", p(&maildir), p(&source_maildir)]);
    tool(&["dump-mbox", p(&mbox), p(&source_mbox)]);

    // Bad input: a clear one-line error each, nothing imported.
    let missing = work.join("missing");
    fails(
        mailstow(&data, &["mailbox", "import", ALICE, p(&missing)]),
        "no such file or directory",
    );
    let neither = work.join("neither");
    std::fs::create_dir_all(&neither).unwrap();
    std::fs::write(neither.join("notes.txt"), "just text\n").unwrap();
    fails(
        mailstow(&data, &["mailbox", "import", ALICE, p(&neither)]),
        "neither a maildir",
    );
    fails(
        mailstow(
            &data,
            &["mailbox", "import", ALICE, p(&neither.join("notes.txt"))],
        ),
        "not an mbox file",
    );
    fails(
        mailstow(
            &data,
            &["mailbox", "import", "carol@example.test", p(&maildir)],
        ),
        "no such user",
    );

    // Offline: the maildir into alice (the CLI does the work; its log line goes to stderr).
    let output = mailstow(&data, &["mailbox", "import", ALICE, p(&maildir)]);
    let stdout = must(output.clone());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stdout.contains("imported 4 folders, 15 messages"),
        "{stdout}"
    );
    assert!(stderr.contains("event=import"), "{stderr}");
    assert!(stderr.contains("user=alice@example.test"), "{stderr}");

    // Through the running server: the mbox directory into bob, plus a directory with one
    // file that is not an mbox (reported, not fatal).
    let server = start(&data);
    std::fs::copy(neither.join("notes.txt"), mbox.join("notes")).unwrap();
    let output = mailstow(&data, &["mailbox", "import", BOB, p(&mbox)]);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let stdout = must(output);
    assert!(
        stdout.contains("imported 3 folders, 15 messages"),
        "{stdout}"
    );
    // The server's problem lines reach the CLI's stderr.
    assert!(
        stderr.contains("mailstow: warning:") && stderr.contains("notes: not an mbox file"),
        "{stderr}"
    );
    assert!(stdout.contains("1 problems"), "{stdout}");
    std::fs::remove_file(mbox.join("notes")).unwrap();

    // Over IMAP: every message with its flags, keywords, internal date and body.
    let imap_alice = work.join("imap-alice.json");
    let imap_bob = work.join("imap-bob.json");
    dump_imap(&server, ALICE, &imap_alice);
    dump_imap(&server, BOB, &imap_bob);
    same(&source_maildir, &imap_alice, "body,flags,keywords,date");
    same(&source_mbox, &imap_bob, "body,flags,keywords,date");

    // Export while the server runs, both formats, and compare with the sources.
    let alice_mbox = work.join("alice-mbox");
    let bob_maildir = work.join("bob-maildir");
    must(mailstow(
        &data,
        &[
            "mailbox",
            "export",
            ALICE,
            p(&alice_mbox),
            "--format",
            "mbox",
        ],
    ));
    must(mailstow(
        &data,
        &[
            "mailbox",
            "export",
            BOB,
            p(&bob_maildir),
            "--format",
            "maildir",
        ],
    ));
    fails(
        mailstow(
            &data,
            &["mailbox", "export", BOB, p(&maildir), "--format", "mbox"],
        ),
        "not an empty directory",
    );
    server.stop_cleanly();

    // Offline export of the other two.
    let alice_maildir = work.join("alice-maildir");
    let bob_mbox = work.join("bob-mbox");
    must(mailstow(
        &data,
        &[
            "mailbox",
            "export",
            ALICE,
            p(&alice_maildir),
            "--format",
            "maildir",
        ],
    ));
    must(mailstow(
        &data,
        &["mailbox", "export", BOB, p(&bob_mbox), "--format", "mbox"],
    ));
    for (export, kind, source, imap) in [
        (&alice_maildir, "dump-maildir", &source_maildir, &imap_alice),
        (&alice_mbox, "dump-mbox", &source_maildir, &imap_alice),
        (&bob_maildir, "dump-maildir", &source_mbox, &imap_bob),
        (&bob_mbox, "dump-mbox", &source_mbox, &imap_bob),
    ] {
        let dumped = PathBuf::from(format!("{}.json", export.display()));
        tool(&[kind, p(export), p(&dumped)]);
        same(source, &dumped, "body,flags,keywords,date");
        // The export carries the store's UIDs and UIDVALIDITY.
        same(imap, &dumped, "uid,uidvalidity");
    }
    // A maildir written by Python, exported again as a maildir: INBOX has as many files in
    // cur/ (their bytes were compared above).
    let inbox_source = std::fs::read_dir(maildir.join("cur")).unwrap().count();
    let inbox_export = std::fs::read_dir(alice_maildir.join("cur"))
        .unwrap()
        .count();
    assert_eq!(inbox_source, inbox_export);

    // Our own mbox export carries X-IMAPbase and X-UID: imported into a new user, every
    // folder keeps its UIDVALIDITY and every message its UID.
    let dave = "dave@example.test";
    must(mailstow(
        &data,
        &["user", "add", dave, "--password", "secret-pw"],
    ));
    let output = must(mailstow(
        &data,
        &["mailbox", "import", dave, p(&alice_mbox)],
    ));
    assert!(output.contains("15 UIDs kept"), "{output}");
    let server = start(&data);
    let imap_dave = work.join("imap-dave.json");
    dump_imap(&server, dave, &imap_dave);
    server.stop_cleanly();
    same(
        &imap_alice,
        &imap_dave,
        "body,flags,keywords,date,uid,uidvalidity",
    );
}

#[test]
fn dovecot_maildir_keeps_uids_and_uidvalidity() {
    if !Path::new("/usr/sbin/dovecot").exists() {
        eprintln!("SKIPPED: /usr/sbin/dovecot is not installed (apt-get install dovecot-imapd)");
        return;
    }
    let (dir, data) = set_up_data_dir();
    let work = dir.path();
    must(mailstow(&data, &["init"]));
    // A real Dovecot fills a maildir over IMAP: folders, flags, keywords, dates, expunges.
    let mut dovecot = test_peers::Dovecot::start_in(work, 1).expect("dovecot");
    let (user, password) = dovecot.user(1);
    let port = dovecot.port().to_string();
    tool(&["fill-imap", "127.0.0.1", &port, &user, &password]);
    let expected = work.join("dovecot.json");
    tool(&[
        "dump-imap",
        "127.0.0.1",
        &port,
        &user,
        &password,
        p(&expected),
    ]);
    dovecot.stop();
    let maildir = dovecot.dir().join("mail").join(&user).join("Maildir");
    assert!(maildir.join("dovecot-uidlist").is_file());
    assert!(maildir.join(".Work").join("dovecot-keywords").is_file());

    let output = must(mailstow(&data, &["mailbox", "import", ALICE, p(&maildir)]));
    assert!(output.contains("4 UIDVALIDITYs kept"), "{output}");
    let server = start(&data);
    let ours = work.join("ours.json");
    dump_imap(&server, ALICE, &ours);
    same(&expected, &ours, "body,flags,keywords,date,uid,uidvalidity");
    // UIDNEXT was raised past the expunged UIDs: a new message gets a UID above them.
    let exported = work.join("export");
    must(mailstow(
        &data,
        &[
            "mailbox",
            "export",
            ALICE,
            p(&exported),
            "--format",
            "maildir",
        ],
    ));
    server.stop_cleanly();
    let source_list = std::fs::read_to_string(maildir.join("dovecot-uidlist")).unwrap();
    let export_list = std::fs::read_to_string(exported.join("dovecot-uidlist")).unwrap();
    let header = |text: &str| -> (String, String) {
        let first = text.lines().next().unwrap().to_string();
        let field = |c: char| {
            first
                .split(' ')
                .find(|w| w.starts_with(c))
                .unwrap_or_default()
                .to_string()
        };
        (field('V'), field('N'))
    };
    assert_eq!(header(&source_list), header(&export_list));
    let dumped = work.join("export.json");
    tool(&["dump-maildir", p(&exported), p(&dumped)]);
    same(
        &expected,
        &dumped,
        "body,flags,keywords,date,uid,uidvalidity",
    );
}
