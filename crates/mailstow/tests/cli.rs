//! The `mailstow` binary as an operator meets it: real processes, real files. Exit codes,
//! one-line errors, and `store fsck` finding and repairing a corrupt message.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

fn mailstow(data_dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mailstow"))
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .output()
        .expect("run mailstow")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// An error is one line on stderr, prefixed, with a failing exit code.
fn assert_one_line_error(output: &Output, needle: &str) {
    assert!(!output.status.success(), "expected failure: {output:?}");
    let stderr = text(&output.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {stderr:?}");
    assert!(lines[0].starts_with("mailstow: error: "), "{stderr:?}");
    assert!(lines[0].contains(needle), "{stderr:?} lacks {needle:?}");
}

#[test]
fn init_then_stats_and_fsck_on_an_empty_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let init = mailstow(&data, &["init"]);
    assert!(init.status.success(), "{init:?}");
    assert!(text(&init.stdout).contains("queue: 0 pending"));
    // Idempotent.
    assert!(mailstow(&data, &["init"]).status.success());
    let stats = mailstow(&data, &["store", "stats"]);
    assert!(stats.status.success(), "{stats:?}");
    assert!(text(&stats.stdout).contains("fragments"));
    let queue = mailstow(&data, &["queue", "stats"]);
    assert!(queue.status.success(), "{queue:?}");
    assert!(text(&queue.stdout).contains("0 pending"));
    assert!(mailstow(&data, &["store", "fsck"]).status.success());
    assert!(mailstow(&data, &["queue", "fsck"]).status.success());
}

#[test]
fn bad_paths_and_config_are_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nothing-here");
    assert_one_line_error(
        &mailstow(&missing, &["store", "stats"]),
        "no data directory at",
    );
    assert_one_line_error(
        &mailstow(&missing, &["queue", "stats"]),
        "no data directory at",
    );
    // Nothing was created by asking.
    assert!(!missing.exists());
    // An existing folder that holds no store is named too.
    std::fs::create_dir(&missing).unwrap();
    assert_one_line_error(
        &mailstow(&missing, &["store", "stats"]),
        "no mailbox store at",
    );
    assert_one_line_error(&mailstow(&missing, &["queue", "stats"]), "no mail queue at");
    let config = dir.path().join("mailstow.toml");
    std::fs::write(&config, "data_dir = 'x'\nunknown_key = 1\n").unwrap();
    let output = mailstow(
        &missing,
        &["--config", config.to_str().unwrap(), "store", "stats"],
    );
    assert_one_line_error(&output, "unknown_key");
    let output = mailstow(
        &missing,
        &["--config", "/no/such/file.toml", "store", "stats"],
    );
    assert_one_line_error(&output, "cannot read config file");
}

#[test]
fn store_fsck_reports_a_flipped_byte_and_repair_expunges_that_message() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    assert!(mailstow(&data, &["init"]).status.success());
    let store_dir = data.join("store");
    {
        let (store, _) =
            store::Store::open(Arc::new(disk::RealDisk), &store_dir, Default::default()).unwrap();
        for (i, marker) in ["FIRST-MESSAGE-MARKER", "SECOND-MESSAGE-MARKER"]
            .iter()
            .enumerate()
        {
            let content = format!("Subject: {i}\r\n\r\n{marker} {}\r\n", "x".repeat(2000));
            let message = store::NewMessage {
                flags: store::Flags::default(),
                keywords: Vec::new(),
                internal_date: 1_795_000_000,
                content: content.into_bytes(),
            };
            store.append("ann@example.com", "INBOX", message).unwrap();
        }
    }
    // Flip a byte inside the second message's content, on disk.
    let volume = store_dir.join("volume.dat");
    let mut bytes = std::fs::read(&volume).unwrap();
    let at = bytes
        .windows(b"SECOND-MESSAGE-MARKER".len())
        .position(|w| w == b"SECOND-MESSAGE-MARKER")
        .expect("message data in the volume");
    bytes[at] ^= 0x20;
    std::fs::write(&volume, &bytes).unwrap();

    let fsck = mailstow(&data, &["store", "fsck"]);
    assert!(
        !fsck.status.success(),
        "fsck must fail on corruption: {fsck:?}"
    );
    let report = text(&fsck.stdout);
    assert!(report.contains("problem"), "{report}");
    assert!(text(&fsck.stderr).contains("--repair"), "{fsck:?}");

    let repair = mailstow(&data, &["store", "fsck", "--repair"]);
    assert!(repair.status.success(), "{repair:?}");
    let again = mailstow(&data, &["store", "fsck"]);
    assert!(again.status.success(), "clean after repair: {again:?}");
    let stats = text(&mailstow(&data, &["store", "stats"]).stdout);
    let inbox = stats
        .lines()
        .find(|l| l.starts_with("ann@example.com"))
        .expect("folder line");
    assert_eq!(
        inbox.split_whitespace().nth(2),
        Some("1"),
        "one message left: {stats}"
    );
}

#[test]
fn store_defrag_joins_the_fragments_deletions_left() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    assert!(mailstow(&data, &["init"]).status.success());
    // Per-folder reservations off and the rule off while deleting: appends to two users
    // interleave message by message, and deleting all of bo's mail leaves ann's messages
    // each its own fragment, with a hole between each pair.
    let config = dir.path().join("mailstow.toml");
    std::fs::write(
        &config,
        "[store]\nreservation_bytes = 0\ndefrag_on_delete = false\n",
    )
    .unwrap();
    {
        let store_config = store::StoreConfig {
            reservation_bytes: 0,
            defrag_on_delete: false,
            ..Default::default()
        };
        let (store, _) =
            store::Store::open(Arc::new(disk::RealDisk), &data.join("store"), store_config)
                .unwrap();
        for i in 0..20 {
            for user in ["ann@example.com", "bo@example.com"] {
                let content = format!("Subject: {i}\r\n\r\n{}\r\n", "y".repeat(1000)).into_bytes();
                let message = store::NewMessage {
                    flags: store::Flags::default(),
                    keywords: Vec::new(),
                    internal_date: 1_795_000_000,
                    content,
                };
                store.append(user, "INBOX", message).unwrap();
            }
        }
        store.expunge_all("bo@example.com", "INBOX").unwrap();
    }
    let fragments = |data: &Path| -> u64 {
        let stats = mailstow(
            data,
            &["--config", config.to_str().unwrap(), "store", "stats"],
        );
        let out = text(&stats.stdout);
        let line = out
            .lines()
            .find(|l| l.starts_with("ann@example.com"))
            .expect("ann");
        line.split_whitespace().nth(4).unwrap().parse().unwrap()
    };
    assert_eq!(fragments(&data), 20);
    let defrag = mailstow(
        &data,
        &["--config", config.to_str().unwrap(), "store", "defrag"],
    );
    assert!(defrag.status.success(), "{defrag:?}");
    assert_eq!(
        fragments(&data),
        1,
        "defrag made one fragment: {}",
        text(&defrag.stdout)
    );
    assert!(mailstow(&data, &["store", "fsck"]).status.success());
}

/// The directory commands against a PostgreSQL directory (`[directory] url` in the config
/// file), with no server running: nodes, fewest-users placement, `node list`'s lines, and a
/// node that owns a user refused.
#[test]
fn directory_commands_work_against_postgres() {
    let pg = match test_peers::Postgres::new() {
        Ok(pg) => pg,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("skipping: {e}");
            return;
        }
        Err(e) => panic!("start PostgreSQL: {e}"),
    };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let config = dir.path().join("mailstow.toml");
    let secret = dir.path().join("cluster.secret");
    std::fs::write(&secret, "0123456789abcdef0123456789abcdef\n").unwrap();
    std::fs::write(
        &config,
        format!(
            "[directory]\nurl = \"{}\"\n[cluster]\nnode = \"n1\"\nsecret_file = {secret:?}\n",
            pg.url()
        ),
    )
    .unwrap();
    let run = |args: &[&str]| {
        let mut all = vec!["--config", config.to_str().unwrap()];
        all.extend_from_slice(args);
        mailstow(&data, &all)
    };
    let ok = |args: &[&str]| {
        let output = run(args);
        assert!(output.status.success(), "{args:?}: {output:?}");
        text(&output.stdout)
    };
    ok(&["domain", "add", "example.org"]);
    ok(&[
        "node",
        "add",
        "n1",
        "--lmtp",
        "10.0.0.1:24",
        "--imap",
        "10.0.0.1:143",
        "--pop3",
        "10.0.0.1:110",
    ]);
    ok(&[
        "node",
        "add",
        "n2",
        "--lmtp",
        "10.0.0.2:24",
        "--imap",
        "10.0.0.2:143",
        "--pop3",
        "10.0.0.2:110",
        "--web",
        "10.0.0.2:80",
    ]);
    assert!(
        ok(&[
            "user",
            "add",
            "a@example.org",
            "--password",
            "password1",
            "--node",
            "n2"
        ])
        .contains("node=n2")
    );
    // The fewest users: n1.
    assert!(ok(&["user", "add", "b@example.org", "--password", "password1"]).contains("node=n1"));
    assert_eq!(ok(&["node", "list"]), "n1 down users=1\nn2 down users=1\n");
    // Admins of the web view.
    assert_eq!(
        ok(&[
            "user",
            "add",
            "root@example.org",
            "--password",
            "password1",
            "--node",
            "n1",
            "--admin"
        ]),
        "user added: root@example.org node=n1 admin\n"
    );
    assert!(ok(&["user", "show", "root@example.org"]).contains("\nadmin: yes\n"));
    assert_eq!(
        ok(&["user", "admin", "B@example.org", "on"]),
        "admin on: b@example.org\n"
    );
    assert_eq!(
        ok(&["user", "admin", "b@example.org", "on"]),
        "admin on: b@example.org (already)\n"
    );
    assert_eq!(
        ok(&["user", "admin", "b@example.org", "off"]),
        "admin off: b@example.org\n"
    );
    assert!(ok(&["user", "show", "b@example.org"]).contains("\nadmin: no\n"));
    assert_one_line_error(
        &run(&["user", "admin", "nobody@example.org", "on"]),
        "no such user",
    );
    assert!(
        !run(&["user", "admin", "b@example.org", "maybe"])
            .status
            .success()
    );
    ok(&["user", "del", "root@example.org"]);
    assert_one_line_error(
        &run(&["node", "del", "n2"]),
        "node n2 still owns 1 user(s); move them first",
    );
    assert_one_line_error(
        &run(&[
            "user",
            "add",
            "c@example.org",
            "--password",
            "password1",
            "--node",
            "n9",
        ]),
        "no such node n9",
    );
    // The SQLite file was never made: everything went to PostgreSQL.
    assert!(!data.join("directory.db").exists());
    assert_eq!(ok(&["domain", "list"]), "example.org\n");
    let list = ok(&["user", "list"]);
    let a = list
        .lines()
        .find(|l| l.starts_with("a@example.org"))
        .unwrap();
    assert!(a.ends_with(" node=n2"), "{list}");
    // `config check` shows both sections.
    let check = ok(&["config", "check"]);
    assert!(
        check.contains("[directory]") && check.contains("[cluster]"),
        "{check}"
    );
    // A cluster node without its secret, or with a short one, is refused before it starts.
    std::fs::write(&secret, "short\n").unwrap();
    let refused = run(&["config", "check"]);
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("at least 16 random bytes"),
        "{refused:?}"
    );
}

/// `mailstow bench ...` and `mailstow sim validate ...` run the `mailstow-bench` binary (here a
/// stand-in named by MAILSTOW_BENCH): every argument unchanged after the subcommand's path,
/// standard input and output shared, its exit status returned, and the `mailstow` that ran it
/// named in MAILSTOW_BIN.
#[test]
fn bench_and_sim_validate_run_mailstow_bench_with_the_arguments_unchanged() {
    use std::io::Write as _;
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("fake-bench");
    std::fs::write(
        &fake,
        "#!/bin/sh\nprintf '[%s]\\n' \"$@\"\necho \"MAILSTOW_BIN=$MAILSTOW_BIN\"\nread -r line\necho \"stdin=$line\"\nexit 7\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = |args: &[&str]| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mailstow"))
            .args(args)
            .env("MAILSTOW_BENCH", &fake)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"from the caller\n")
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let me = std::fs::canonicalize(env!("CARGO_BIN_EXE_mailstow")).unwrap();
    let tail = format!("MAILSTOW_BIN={}\nstdin=from the caller\n", me.display());
    for (args, passed) in [
        (
            &["bench", "queue", "--dir", "a b", "--seconds", "0.5"][..],
            "[bench]\n[queue]\n[--dir]\n[a b]\n[--seconds]\n[0.5]\n",
        ),
        (&["bench", "--help"], "[bench]\n[--help]\n"),
        (&["bench"], "[bench]\n"),
        (
            &["--data-dir", "/nowhere", "bench", "smtp", "--label", "-x"],
            "[bench]\n[smtp]\n[--label]\n[-x]\n",
        ),
        (
            &["sim", "validate", "--quick", "--json", "--dir", "d"],
            "[sim]\n[validate]\n[--quick]\n[--json]\n[--dir]\n[d]\n",
        ),
        (
            &["sim", "validate", "--help"],
            "[sim]\n[validate]\n[--help]\n",
        ),
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(7), "{args:?}: {out:?}");
        assert_eq!(text(&out.stdout), format!("{passed}{tail}"), "{args:?}");
        assert!(out.stderr.is_empty(), "{args:?}: {out:?}");
    }
    // `mailstow --help` still lists both commands.
    let help = Command::new(env!("CARGO_BIN_EXE_mailstow"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(text(&help.stdout).contains("\n  bench "), "{help:?}");
    let sim_help = Command::new(env!("CARGO_BIN_EXE_mailstow"))
        .args(["sim", "--help"])
        .output()
        .unwrap();
    assert!(
        text(&sim_help.stdout).contains("\n  validate "),
        "{sim_help:?}"
    );
}

/// Without `mailstow-bench`, `mailstow bench` says in one line how to get it.
#[test]
fn bench_without_mailstow_bench_says_how_to_build_it() {
    // In the target directory, so a hard link to the binary (200 MB with its debug
    // information) does instead of a copy.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    // A wrong MAILSTOW_BENCH is reported as such.
    let wrong = Command::new(env!("CARGO_BIN_EXE_mailstow"))
        .args(["bench", "queue"])
        .env("MAILSTOW_BENCH", dir.path().join("missing"))
        .output()
        .unwrap();
    assert_one_line_error(&wrong, "cannot run");
    assert!(text(&wrong.stderr).contains("missing"), "{wrong:?}");
    // A mailstow alone in its directory, with nothing on PATH.
    let alone = dir.path().join("mailstow");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_mailstow"), &alone).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_mailstow"), &alone).unwrap();
    }
    for args in [&["bench", "queue"][..], &["sim", "validate", "--quick"]] {
        let out = Command::new(&alone)
            .args(args)
            .env_remove("MAILSTOW_BENCH")
            .env("PATH", dir.path().join("empty"))
            .output()
            .unwrap();
        assert_one_line_error(&out, "cargo build --release -p mailstow-bench");
    }
}

/// Issue 36 item 6 (C2): the CLI run by a user who cannot write the data directory says so in
/// one line, naming the path and what to do, and exits non-zero (SQLite alone said `attempt
/// to write a readonly database` three times, or timed out). Needs root, to run as nobody.
#[test]
fn a_user_who_cannot_write_the_data_directory_is_told_so_in_one_line() {
    use std::os::unix::fs::PermissionsExt as _;
    use std::os::unix::process::CommandExt as _;
    let root = Command::new("id").arg("-u").output().expect("id");
    if text(&root.stdout).trim() != "0" {
        eprintln!("skipped: needs root, to run the CLI as nobody");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let data = dir.path().join("data");
    assert!(mailstow(&data, &["init"]).status.success());
    assert!(
        mailstow(&data, &["domain", "add", "example.org"])
            .status
            .success()
    );
    let as_nobody = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_mailstow"))
            .arg("--data-dir")
            .arg(&data)
            .args(args)
            .uid(65534)
            .gid(65534)
            .output()
            .expect("run mailstow as nobody")
    };
    for args in [&["domain", "add", "other.org"][..], &["user", "list"][..]] {
        let out = as_nobody(args);
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {out:?}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with(&format!(
                "mailstow: error: cannot write {}: permission denied (run as the user that owns \
                 the data directory",
                data.display()
            )),
            "{args:?}: {stderr}"
        );
    }
    // The directory writable, its database not: the database is named.
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = as_nobody(&["domain", "add", "other.org"]);
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&format!(
            "cannot write {}: permission denied",
            data.join("directory.db").display()
        )),
        "{stderr}"
    );
    // Its owner goes on as before.
    assert!(
        mailstow(&data, &["domain", "add", "other.org"])
            .status
            .success()
    );
}

/// Issue 36 (C3): every way the CLI sets a password refuses one shorter than
/// `[server] password_length_min` (8 characters by default), naming the rule; the file can
/// lower or raise it.
#[test]
fn passwords_shorter_than_password_length_min_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    assert!(mailstow(&data, &["init"]).status.success());
    assert!(
        mailstow(&data, &["domain", "add", "example.org"])
            .status
            .success()
    );
    let refused = |out: Output| {
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{out:?}");
        assert!(
            stderr.contains(
                "invalid password: password is shorter than password_length_min (8 characters)"
            ) && stderr.lines().count() == 1,
            "{stderr}"
        );
    };
    refused(mailstow(
        &data,
        &["user", "add", "a@example.org", "--password", "x"],
    ));
    refused(mailstow(
        &data,
        &["user", "add", "a@example.org", "--password", "1234567"],
    ));
    assert!(
        mailstow(
            &data,
            &["user", "add", "a@example.org", "--password", "12345678"]
        )
        .status
        .success()
    );
    refused(mailstow(
        &data,
        &["user", "passwd", "a@example.org", "--password", "short"],
    ));
    let import = dir.path().join("users.txt");
    std::fs::write(&import, "b@example.org long-enough\nc@example.org short\n").unwrap();
    let out = mailstow(&data, &["user", "import", import.to_str().unwrap()]);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        text(&out.stderr).contains("line 2: invalid password: password is shorter than"),
        "{out:?}"
    );
    // `[server] password_length_min` in the file rules.
    let config = dir.path().join("mailstow.toml");
    std::fs::write(&config, "[server]\npassword_length_min = 12\n").unwrap();
    let with_config = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_mailstow"))
            .arg("--config")
            .arg(&config)
            .arg("--data-dir")
            .arg(&data)
            .args(args)
            .output()
            .expect("run mailstow")
    };
    let out = with_config(&[
        "user",
        "passwd",
        "a@example.org",
        "--password",
        "elevenchars",
    ]);
    assert!(
        text(&out.stderr).contains("password_length_min (12 characters)"),
        "{out:?}"
    );
    assert!(
        with_config(&[
            "user",
            "passwd",
            "a@example.org",
            "--password",
            "twelve chars"
        ])
        .status
        .success()
    );
}
