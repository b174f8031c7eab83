//! IMAP end to end: the real binary on loopback, driven by Python's imaplib (the command
//! matrix and two sessions in IDLE), curl (LIST, FETCH, APPEND), mbsync (a folder tree
//! round trip with flags) and NeoMutt in tmux (thread and date views).

mod common;

use std::process::Command;

use common::{Server, script, set_up_data_dir};

/// Runs `tests/e2e/<name>` with python3 against the server's IMAPS address as alice, and
/// checks it exited 0 and printed `<marker>: OK`; returns its standard output.
fn run_alice_script(server: &Server, name: &str, marker: &str) -> String {
    let run = Command::new("python3")
        .arg(script(name))
        .arg(server.addr("imaps"))
        .args(["alice@example.test", "secret-pw"])
        .output()
        .expect("python3");
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(
        run.status.success() && stdout.contains(&format!("{marker}: OK")),
        "{name} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    stdout
}

fn curl(args: &[&str]) -> std::process::Output {
    Command::new("curl")
        .args([
            "-sS",
            "-k",
            "--max-time",
            "30",
            "-u",
            "bob@example.test:secret-pw",
        ])
        .args(args)
        .output()
        .expect("curl")
}

#[test]
fn imaplib_command_matrix_and_idle_between_two_sessions() {
    let (_dir, data) = set_up_data_dir();
    let server = Server::start(&data);
    let run = Command::new("python3")
        .arg(script("imap_matrix.py"))
        .args([server.addr("imaps"), server.addr("imap")])
        .args(["alice@example.test", "secret-pw"])
        .output()
        .expect("python3");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && stdout.contains("imap-matrix: OK"),
        "imap_matrix.py failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    server.stop_cleanly();
}

#[test]
fn curl_lists_appends_and_fetches() {
    let (dir, data) = set_up_data_dir();
    let server = Server::start(&data);
    let base = format!("imaps://{}", server.addr("imaps"));
    let upload = dir.path().join("upload.eml");
    std::fs::write(
        &upload,
        "From: carol@example.test\r\nTo: bob@example.test\r\nSubject: via curl imap\r\n\r\nappended by curl\r\n",
    )
    .unwrap();
    let out = curl(&["-T", upload.to_str().unwrap(), &format!("{base}/INBOX")]);
    assert!(out.status.success(), "APPEND: {out:?}");
    let out = curl(&[&format!("{base}/")]);
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && listing.contains("INBOX") && listing.contains("\\Sent"),
        "{out:?}"
    );
    let out = curl(&[&format!("{base}/INBOX;UID=1")]);
    let fetched = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && fetched.contains("appended by curl"),
        "{out:?}"
    );
    let out = curl(&[&format!("{base}/INBOX?SUBJECT%20curl")]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("SEARCH 1"),
        "{out:?}"
    );
    // STARTTLS on the plain port.
    let out = curl(&[
        "--ssl-reqd",
        &format!("imap://{}/INBOX;UID=1;SECTION=HEADER", server.addr("imap")),
    ]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Subject: via curl imap"),
        "{out:?}"
    );
    server.stop_cleanly();
}

#[test]
fn mbsync_round_trips_a_folder_tree_with_flags() {
    let (dir, data) = set_up_data_dir();
    // mbsync speaks plain IMAP here (SSLType None), so LOGIN without TLS must be allowed.
    let config = dir.path().join("mailstow.toml");
    std::fs::write(&config, "[server]\nauth_without_tls = true\n").unwrap();
    let server = Server::start_with(&data, Some(&config));
    let address = server.addr("imap");
    let (host, port) = address.rsplit_once(':').unwrap();
    let messages = std::env::var("MBSYNC_MESSAGES").unwrap_or_else(|_| "3000".into());
    let run = Command::new("bash")
        .arg(script("mbsync_roundtrip.sh"))
        .args([host, port, "alice@example.test", "secret-pw"])
        .arg(dir.path().join("sync"))
        .arg(&messages)
        .env("KEEP", "0")
        .output()
        .expect("bash");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && stdout.contains("mbsync-roundtrip: OK"),
        "mbsync round trip failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    server.stop_cleanly();
}

/// RFC 4978 COMPRESS=DEFLATE with Python's zlib as the client: the same FETCH plain and
/// compressed gives the same bytes, fewer of them on the wire (`tests/e2e/imap_compress.py`).
#[test]
fn compress_deflate_with_a_zlib_client() {
    let (_dir, data) = set_up_data_dir();
    let server = Server::start(&data);
    let stdout = run_alice_script(&server, "imap_compress.py", "imap-compress");
    eprintln!("{stdout}");
    server.stop_cleanly();
}

/// QRESYNC resynchronisation with Python's imaplib after another session's expunges and flag
/// change, with SORT and THREAD on the way (`tests/e2e/imap_qresync.py`).
#[test]
fn imaplib_resynchronises_with_qresync() {
    let (_dir, data) = set_up_data_dir();
    let server = Server::start(&data);
    run_alice_script(&server, "imap_qresync.py", "imap-qresync");
    server.stop_cleanly();
}

/// Mailbox names across UTF8=ACCEPT (RFC 6855) and modified UTF-7 (RFC 3501 5.1.3) with
/// Python's imaplib: a client that enabled UTF8=ACCEPT creates and lists a folder under a
/// UTF-8 name and APPENDs to it with the UTF8 data item; a plain IMAP4rev1 client sees,
/// selects, fetches, STATUSes, GETQUOTAROOTs and renames it under its modified UTF-7 name,
/// is refused a badly encoded one with NO [CANNOT], and the first client sees the rename in
/// UTF-8 (`tests/e2e/imap_utf8_names.py`).
#[test]
fn imaplib_utf8_accept_and_modified_utf7_mailbox_names() {
    let (_dir, data) = set_up_data_dir();
    let server = Server::start(&data);
    run_alice_script(&server, "imap_utf8_names.py", "imap-utf8-names");
    server.stop_cleanly();
}

/// NeoMutt, a real terminal client driven in tmux, shows the INBOX threaded (In-Reply-To and
/// References chains, two replies to a missing parent) and sorted by date, newest first, as
/// expected, and the server's own UID THREAD REFERENCES and UID SORT (REVERSE DATE) agree
/// with what it showed (`tests/e2e/neomutt_threads.py`). scripts/test.sh installs NeoMutt
/// and tmux, so without them this test fails rather than skips.
#[test]
fn neomutt_shows_threads_and_date_order() {
    for tool in ["neomutt", "tmux"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|out| out.status.success());
        assert!(
            found,
            "{tool} is not installed: scripts/test.sh installs it (apt-get install neomutt tmux)"
        );
    }
    let (_dir, data) = set_up_data_dir();
    let server = Server::start(&data);
    let stdout = run_alice_script(&server, "neomutt_threads.py", "neomutt-threads");
    eprintln!("{stdout}");
    server.stop_cleanly();
}

/// `imap_compress_connections_max`: past it, COMPRESS is answered `NO [LIMIT]` and the
/// connection goes on uncompressed; a compressed connection's place is freed when it closes.
#[test]
fn compressed_connections_are_bounded() {
    let (dir, data) = set_up_data_dir();
    let config = dir.path().join("mailstow.toml");
    std::fs::write(
        &config,
        "[server]\nauth_without_tls = true\nimap_compress_connections_max = 1\n",
    )
    .unwrap();
    let server = Server::start_with(&data, Some(&config));
    let login = |imap: &mut common::Imap| {
        let out = imap.run("LOGIN alice@example.test secret-pw");
        assert!(out.last().unwrap().contains(" OK"), "{out:?}");
    };
    let mut first = common::Imap::connect(&server.addr("imap"));
    login(&mut first);
    assert_eq!(first.run("COMPRESS DEFLATE"), ["a2 OK DEFLATE active"]);
    let mut second = common::Imap::connect(&server.addr("imap"));
    login(&mut second);
    assert_eq!(
        second.run("COMPRESS DEFLATE"),
        ["a2 NO [LIMIT] Too many compressed connections, try later"]
    );
    // Still a working, plain connection.
    assert_eq!(second.run("NOOP").last().unwrap(), "a3 OK NOOP completed");
    drop(first);
    // The place comes back once the first connection is gone (the server sees the close).
    let started = std::time::Instant::now();
    loop {
        let mut third = common::Imap::connect(&server.addr("imap"));
        login(&mut third);
        let answer = third.run("COMPRESS DEFLATE");
        if answer == ["a2 OK DEFLATE active"] {
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "the place was never freed: {answer:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    server.stop_cleanly();
}
