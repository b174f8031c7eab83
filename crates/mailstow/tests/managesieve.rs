//! ManageSieve (RFC 5804) through the real binary, with real clients: Debian's
//! python3-sievelib (every command, over STARTTLS and over implicit TLS) and sieve-connect
//! (upload, list, activate, download), a hand-written hostile client (commands before login,
//! guessed passwords until the throttle answers, an oversized literal, a literal that stops
//! arriving), and `mailstow sieve list` to see what the directory holds.

mod common;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::{Server, must, script, set_up_data_dir};

/// Scripts are small in these tests, so "too large" is cheap to send.
const SCRIPT_BYTES_MAX: usize = 1024;

/// A server on `data` with a mail log in `log`, small scripts and `extra` settings.
fn start(data: &Path, log: &Path, extra: &str) -> Server {
    let config = data.parent().unwrap().join("managesieve.toml");
    std::fs::write(
        &config,
        format!(
            "[log]\nfile = \"{}\"\nlevel = \"info\"\n\
             [server]\nsieve_script_bytes_max = {SCRIPT_BYTES_MAX}\ntarpit_delay_ms = 100\n{extra}",
            log.display()
        ),
    )
    .unwrap();
    Server::start_opts(data, Some(&config), None, &[])
}

/// The mail log's lines so far.
fn log_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Waits until a line of the log contains every one of `parts`.
fn wait_for_log(log: &Path, parts: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(line) = log_lines(log)
            .into_iter()
            .find(|l| parts.iter().all(|p| l.contains(p)))
        {
            return line;
        }
        assert!(
            Instant::now() < deadline,
            "no line with {parts:?} in the log:\n{}",
            log_lines(log).join("\n")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The SIEVE capability the server must announce: the interpreter's extensions.
fn extensions() -> String {
    sieve::EXTENSIONS.join(" ")
}

/// Runs the sievelib session (`tests/e2e/managesieve_sievelib.py`) against `address`.
fn sievelib(address: &str, user: &str, mode: &str) {
    let out = Command::new("/usr/bin/python3")
        .arg(script("managesieve_sievelib.py"))
        .args([
            address,
            user,
            "secret-pw",
            mode,
            &extensions(),
            &SCRIPT_BYTES_MAX.to_string(),
        ])
        .output()
        .expect("/usr/bin/python3 (apt-get install python3-sievelib)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim_end().ends_with("ok"),
        "managesieve_sievelib.py {mode}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `mailstow sieve list USER`: name, bytes, active, one script a line.
fn sieve_list(data: &Path, user: &str) -> String {
    let config = data.parent().unwrap().join("managesieve.toml");
    must(common::mailstow(
        data,
        &["--config", config.to_str().unwrap(), "sieve", "list", user],
    ))
}

/// A blocking ManageSieve client over plain TCP, for what no well-behaved client sends.
struct Raw {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Raw {
    /// Connects and reads the greeting (the capabilities, then OK).
    fn connect(address: &str) -> (Raw, String) {
        let stream = TcpStream::connect(address).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut raw = Raw {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
        };
        let greeting = raw.response();
        assert!(greeting.contains("\"SIEVE\""), "{greeting}");
        assert!(
            greeting.lines().last().unwrap().starts_with("OK"),
            "{greeting}"
        );
        (raw, greeting)
    }

    fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
    }

    /// One response: every line up to and including the one starting OK, NO or BYE (a
    /// literal's content included); empty if the server closed first.
    fn response(&mut self) -> String {
        let mut all = String::new();
        loop {
            let mut line = String::new();
            if self.reader.read_line(&mut line).unwrap_or(0) == 0 {
                return all;
            }
            all.push_str(&line);
            if let Some(size) = line
                .trim_end()
                .strip_suffix('}')
                .and_then(|l| l.rsplit_once('{'))
                .and_then(|(_, n)| n.trim_end_matches('+').parse::<usize>().ok())
            {
                let mut literal = vec![0u8; size];
                self.reader.read_exact(&mut literal).unwrap();
                all.push_str(&String::from_utf8_lossy(&literal));
                continue;
            }
            if ["OK", "NO", "BYE"].iter().any(|s| line.starts_with(s)) {
                return all;
            }
        }
    }

    fn run(&mut self, command: &str) -> String {
        self.send(format!("{command}\r\n").as_bytes());
        self.response()
    }

    /// AUTHENTICATE PLAIN with an initial response.
    fn login(&mut self, user: &str, password: &str) -> String {
        let plain =
            base64::engine::general_purpose::STANDARD.encode(format!("\0{user}\0{password}"));
        self.run(&format!("AUTHENTICATE \"PLAIN\" \"{plain}\""))
    }

    /// Whether the server closed the connection (within the read timeout).
    fn closed(&mut self) -> bool {
        let mut rest = Vec::new();
        self.reader.read_to_end(&mut rest).is_ok() && rest.is_empty()
    }
}

/// (a) python3-sievelib over STARTTLS: AUTHENTICATE PLAIN, the capabilities (SIEVE is
/// exactly the interpreter's extensions), and HAVESPACE, PUTSCRIPT, LISTSCRIPTS, SETACTIVE,
/// GETSCRIPT, RENAMESCRIPT, DELETESCRIPT (the active one refused), CHECKSCRIPT (an oversized
/// script refused); then the directory holds what the session left, the log has one line per
/// change, and PLAIN is refused before TLS.
#[test]
fn sievelib_over_starttls_edits_the_scripts_the_directory_holds() {
    let (dir, data) = set_up_data_dir();
    let log = dir.path().join("mail.log");
    let server = start(&data, &log, "");
    sievelib(
        &server.addr("managesieve"),
        "alice@example.test",
        "starttls",
    );
    let listed = sieve_list(&data, "alice@example.test");
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 1, "{listed}");
    assert!(
        lines[0].starts_with("filing\t") && lines[0].ends_with("\tactive"),
        "{listed}"
    );
    let got = must(common::mailstow(
        &data,
        &["sieve", "get", "alice@example.test", "filing"],
    ));
    assert!(got.contains("fileinto \"Reports\";"), "{got}");
    wait_for_log(
        &log,
        &[
            "event=login",
            "proto=managesieve",
            "user=alice@example.test",
            "result=ok",
        ],
    );
    for (action, script) in [
        ("putscript", "rules"),
        ("putscript", "away"),
        ("setactive", "rules"),
        ("renamescript", "rules"),
        ("deletescript", "away"),
    ] {
        wait_for_log(
            &log,
            &[
                "event=managesieve",
                &format!("action={action}"),
                "user=alice@example.test",
                &format!("script={script}"),
            ],
        );
    }
    // Refused changes are not logged as changes.
    assert!(
        !log_lines(&log)
            .iter()
            .any(|l| l.contains("event=managesieve") && l.contains("script=big")),
        "an oversized script was logged as stored"
    );

    // Before TLS (auth_without_tls is off): no mechanism offered, PLAIN refused.
    let (mut raw, greeting) = Raw::connect(&server.addr("managesieve"));
    assert!(greeting.contains("\"SASL\" \"\"\r\n"), "{greeting}");
    assert!(greeting.contains("\"STARTTLS\""), "{greeting}");
    let answer = raw.login("alice@example.test", "secret-pw");
    assert!(answer.starts_with("NO (ENCRYPT-NEEDED)"), "{answer}");
    server.stop_cleanly();
}

/// (b) sieve-connect: upload, list, activate, download.
#[test]
fn sieve_connect_uploads_lists_activates_and_downloads() {
    let (dir, data) = set_up_data_dir();
    let log = dir.path().join("mail.log");
    let server = start(&data, &log, "");
    let address = server.addresses["managesieve"];
    let local = dir.path().join("vacation.sieve");
    let source = "require \"vacation\";\r\nvacation :days 7 \"On holiday.\";\r\n";
    std::fs::write(&local, source).unwrap();
    let sieve_connect = |args: &[&str]| -> String {
        let mut child = Command::new("sieve-connect")
            .args([
                "--server",
                &address.ip().to_string(),
                "--port",
                &address.port().to_string(),
                "--nosrv",
                "--user",
                "bob@example.test",
                "--authmech",
                "PLAIN",
                "--passwordfd",
                "0",
                "--notlsverify",
            ])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("sieve-connect (apt-get install sieve-connect)");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"secret-pw\n")
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "sieve-connect {args:?}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    sieve_connect(&[
        "--upload",
        "--localsieve",
        local.to_str().unwrap(),
        "--remotesieve",
        "holiday",
    ]);
    let listed = sieve_connect(&["--list"]);
    assert!(listed.contains("holiday"), "{listed}");
    assert!(!listed.contains("ACTIVE"), "{listed}");
    sieve_connect(&["--activate", "--remotesieve", "holiday"]);
    let listed = sieve_connect(&["--list"]);
    assert!(listed.contains("holiday"), "{listed}");
    let directory = sieve_list(&data, "bob@example.test");
    assert_eq!(
        directory,
        format!("holiday\t{}\tactive\n", source.len()),
        "{directory}"
    );
    let downloaded = dir.path().join("downloaded.sieve");
    sieve_connect(&[
        "--download",
        "--remotesieve",
        "holiday",
        "--localsieve",
        downloaded.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read_to_string(&downloaded).unwrap(), source);
    server.stop_cleanly();
}

/// (d) The implicit-TLS listener (`managesieves`): the same sievelib session over a
/// connection that is TLS from its first byte.
#[test]
fn sievelib_over_implicit_tls() {
    let (dir, data) = set_up_data_dir();
    let log = dir.path().join("mail.log");
    let server = start(&data, &log, "");
    sievelib(&server.addr("managesieves"), "bob@example.test", "implicit");
    assert!(
        sieve_list(&data, "bob@example.test").ends_with("\tactive\n"),
        "the session's active script is in the directory"
    );
    server.stop_cleanly();
}

/// (c) Commands before login are refused and counted; a guesser is answered NO until the
/// session's failure limit says BYE, then the throttle refuses even the right password
/// (TRYLATER), and an address over its limit is refused at connect.
#[test]
fn a_guesser_meets_the_session_limit_then_the_throttle() {
    let (dir, data) = set_up_data_dir();
    let log = dir.path().join("mail.log");
    let server = start(
        &data,
        &log,
        "auth_without_tls = true\nauth_user_failures_max = 3\nauth_failures_max = 5\n",
    );
    let address = server.addr("managesieve");

    // Script commands before login.
    let (mut raw, _) = Raw::connect(&address);
    for command in ["LISTSCRIPTS", "GETSCRIPT \"x\"", "SETACTIVE \"\""] {
        let answer = raw.run(command);
        assert!(answer.starts_with("NO"), "{command}: {answer}");
    }
    assert!(raw.run("NOOP").starts_with("OK"));

    // Guesses: each NO; the session's third failure ends it.
    for n in 1..=3 {
        let answer = raw.login("alice@example.test", "guess");
        assert!(answer.starts_with("NO"), "guess {n}: {answer}");
    }
    let bye = raw.response();
    assert!(bye.starts_with("BYE"), "{bye}");
    assert!(raw.closed(), "the session ended after its failure limit");

    // The user is throttled from this address now: even the password is refused, for later.
    let (mut raw, _) = Raw::connect(&address);
    let answer = raw.login("alice@example.test", "secret-pw");
    assert!(answer.starts_with("NO (TRYLATER)"), "{answer}");
    wait_for_log(
        &log,
        &[
            "event=throttled",
            "proto=managesieve",
            "user=alice@example.test",
        ],
    );
    wait_for_log(
        &log,
        &[
            "event=login",
            "proto=managesieve",
            "user=alice@example.test",
            "result=failed",
        ],
    );

    // More guesses at other names: the address is over its limit and refused at connect.
    for n in 0..2 {
        let answer = raw.login(&format!("nobody{n}@example.test"), "guess");
        assert!(answer.starts_with("NO"), "{answer}");
    }
    drop(raw);
    let mut refused = TcpStream::connect(&address).unwrap();
    refused
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut line = String::new();
    refused.read_to_string(&mut line).unwrap();
    assert!(
        line.starts_with("BYE (TRYLATER) \"too many failed logins from your address"),
        "{line}"
    );
    // Once the operator unblocks the address, logins work again.
    must(common::mailstow(&data, &["auth", "unblock", "127.0.0.1"]));
    let (mut raw, _) = Raw::connect(&address);
    assert!(raw.login("bob@example.test", "secret-pw").starts_with("OK"));
    server.stop_cleanly();
}

/// (c) A literal past the script bound is read and dropped, answered QUOTA/MAXSIZE, and
/// the session goes on; a literal that stops arriving meets its deadline; so does a client
/// that never logs in.
#[test]
fn oversized_and_stalled_literals_and_a_silent_client() {
    let (dir, data) = set_up_data_dir();
    let log = dir.path().join("mail.log");
    let server = start(
        &data,
        &log,
        "auth_without_tls = true\nlogin_deadline_seconds = 3\ncommand_deadline_seconds = 2\n\
         transfer_deadline_seconds = 2\ntransfer_deadline_max_seconds = 3\n",
    );
    let address = server.addr("managesieve");

    let (mut raw, _) = Raw::connect(&address);
    assert!(
        raw.login("alice@example.test", "secret-pw")
            .starts_with("OK")
    );
    let big = vec![b'#'; SCRIPT_BYTES_MAX * 4];
    raw.send(format!("PUTSCRIPT \"big\" {{{}+}}\r\n", big.len()).as_bytes());
    raw.send(&big);
    let answer = raw.run("");
    assert!(answer.starts_with("NO (QUOTA/MAXSIZE)"), "{answer}");
    assert!(raw.run("NOOP").starts_with("OK"));
    assert_eq!(raw.run("LISTSCRIPTS"), "OK \"Listscripts completed\"\r\n");

    // Half a literal, then silence: BYE within the transfer deadline, and the close.
    raw.send(b"PUTSCRIPT \"slow\" {500+}\r\nrequire \"fileinto\";\r\n");
    let started = Instant::now();
    let answer = raw.response();
    assert!(answer.starts_with("BYE"), "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(raw.closed());

    // Connected, never logged in: the login deadline.
    let (mut raw, _) = Raw::connect(&address);
    let started = Instant::now();
    let answer = raw.response();
    assert!(answer.starts_with("BYE"), "{answer}");
    assert!(
        started.elapsed() >= Duration::from_secs(2) && started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    server.stop_cleanly();
}

/// A stored script that no longer compiles (here: stored with a larger bound than the
/// server's) can be read, but is not made active; HAVESPACE and PUTSCRIPT past the bound
/// answer QUOTA/MAXSIZE, and past `sieve_scripts_max` QUOTA/MAXSCRIPTS.
#[test]
fn setactive_refuses_a_script_that_no_longer_compiles_and_quotas_answer() {
    let (dir, data) = set_up_data_dir();
    let log = dir.path().join("mail.log");
    let server = start(
        &data,
        &log,
        "auth_without_tls = true\nsieve_scripts_max = 2\n",
    );
    // Stored by the CLI under a larger bound.
    let larger = dir.path().join("larger.toml");
    std::fs::write(&larger, "[server]\nsieve_script_bytes_max = 65536\n").unwrap();
    let source = dir.path().join("long.sieve");
    std::fs::write(
        &source,
        format!("{}\nkeep;\n", "#".repeat(SCRIPT_BYTES_MAX * 2)),
    )
    .unwrap();
    must(common::mailstow(
        &data,
        &[
            "--config",
            larger.to_str().unwrap(),
            "sieve",
            "put",
            "alice@example.test",
            "long",
            source.to_str().unwrap(),
        ],
    ));

    let (mut raw, _) = Raw::connect(&server.addr("managesieve"));
    assert!(
        raw.login("alice@example.test", "secret-pw")
            .starts_with("OK")
    );
    let got = raw.run("GETSCRIPT \"long\"");
    assert!(got.ends_with("OK \"Getscript completed\"\r\n"), "{got}");
    let answer = raw.run("SETACTIVE \"long\"");
    assert!(
        answer.starts_with("NO") && answer.contains("line 1, column 1"),
        "{answer}"
    );
    let listed = raw.run("LISTSCRIPTS");
    assert!(!listed.contains("ACTIVE"), "{listed}");

    let answer = raw.run(&format!("HAVESPACE \"x\" {}", SCRIPT_BYTES_MAX + 1));
    assert!(answer.starts_with("NO (QUOTA/MAXSIZE)"), "{answer}");
    assert!(
        raw.run("PUTSCRIPT \"two\" {7+}\r\nkeep;\r\n")
            .starts_with("OK")
    );
    // Two scripts already: a third is over sieve_scripts_max; replacing one is not.
    let answer = raw.run("HAVESPACE \"three\" 10");
    assert!(answer.starts_with("NO (QUOTA/MAXSCRIPTS)"), "{answer}");
    let answer = raw.run("PUTSCRIPT \"three\" {7+}\r\nkeep;\r\n");
    assert!(answer.starts_with("NO (QUOTA/MAXSCRIPTS)"), "{answer}");
    assert!(raw.run("HAVESPACE \"two\" 10").starts_with("OK"));
    assert!(raw.run("LOGOUT").starts_with("OK"));
    server.stop_cleanly();
}

/// A script with a syntax error is refused by CHECKSCRIPT and PUTSCRIPT with its line and
/// column (needs the interpreter's parser; this worktree's `compile` checks only the size).
#[test]
fn a_syntax_error_is_answered_with_its_line_and_column() {
    let (dir, data) = set_up_data_dir();
    let log = dir.path().join("mail.log");
    let server = start(&data, &log, "auth_without_tls = true\n");
    let (mut raw, _) = Raw::connect(&server.addr("managesieve"));
    assert!(
        raw.login("alice@example.test", "secret-pw")
            .starts_with("OK")
    );
    let broken = "if true { keep";
    for command in ["CHECKSCRIPT", "PUTSCRIPT \"broken\""] {
        let answer = raw.run(&format!("{command} {{{}+}}\r\n{broken}", broken.len()));
        assert!(
            answer.starts_with("NO") && answer.contains("line 1, column"),
            "{command}: {answer}"
        );
    }
    assert_eq!(sieve_list(&data, "alice@example.test"), "");
    server.stop_cleanly();
}
