//! `mailstow setup` run as a script runs it (flags, standard input not a terminal): the
//! configuration it writes passes `config check`, the server it makes starts and lets the
//! admin log in over IMAP, the records it prints are `mailstow dns`'s, and a second run
//! changes nothing. The real binary over real sockets.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{Imap, Server, mailstow, must};

const ADDRESS: &str = "192.0.2.10";

/// `mailstow --config CONFIG --data-dir DATA ARGS` with standard input not a terminal.
fn run(config: &Path, data: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mailstow"))
        .arg("--config")
        .arg(config)
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run mailstow")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn setup_makes_a_server_whose_admin_logs_in() {
    let dir = tempfile::tempdir().unwrap();
    // A folder that does not exist yet.
    let config = dir.path().join("etc/mailstow.toml");
    let data = dir.path().join("data");
    let out = run(
        &config,
        &data,
        &[
            "setup",
            "--hostname",
            "Mail.Example.Test",
            "--domain",
            "example.test",
            "--admin",
            "admin@example.test",
            "--address",
            ADDRESS,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], format!("config written: {}", config.display()));
    assert_eq!(lines[1], format!("data directory made: {}", data.display()));
    assert_eq!(lines[2], "domain added: example.test");
    let password = lines[3]
        .strip_prefix("admin user added: admin@example.test, password ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("{}", lines[3]));
    assert_eq!(password.len(), 20, "{password}");
    let selector = lines[4]
        .strip_prefix("dkim key added: ")
        .and_then(|rest| rest.strip_suffix("._domainkey.example.test (rsa 2048)"))
        .unwrap_or_else(|| panic!("{}", lines[4]));
    assert!(selector.starts_with("ms20"), "{selector}");
    assert_eq!(lines[5], "");

    // The records are exactly what `mailstow dns` prints for the domain.
    let records_end = lines.iter().position(|l| l.starts_with("next: ")).unwrap();
    let printed = lines[6..records_end].join("\n");
    let dns = must(run(
        &config,
        &data,
        &["dns", "example.test", "--address", ADDRESS],
    ));
    assert_eq!(printed.trim_end(), dns.trim_end());
    assert!(
        dns.lines().any(|l| l.split_whitespace().collect::<Vec<_>>()
            == ["example.test.", "IN", "MX", "10", "mail.example.test."]),
        "{dns}"
    );
    assert!(
        dns.contains(&format!("{selector}._domainkey.example.test.")),
        "{dns}"
    );
    let next = &lines[records_end..];
    assert_eq!(next.len(), 3, "{next:?}");
    assert!(
        next[0].ends_with(&format!(
            "--config {} dns check example.test --address {ADDRESS}",
            config.display()
        )),
        "{}",
        next[0]
    );
    assert!(
        next[1].ends_with(&format!("--config {} serve", config.display())),
        "{}",
        next[1]
    );
    assert_eq!(
        next[2],
        "next: the web view: http://127.0.0.1:8080/ (log in as admin@example.test)"
    );

    // The file passes `config check` and names the data directory: no --data-dir needed.
    let checked = must(
        Command::new(env!("CARGO_BIN_EXE_mailstow"))
            .arg("--config")
            .arg(&config)
            .args(["config", "check"])
            .output()
            .unwrap(),
    );
    assert!(
        checked.contains("hostname = \"mail.example.test\""),
        "{checked}"
    );
    assert!(
        checked.contains(&format!("data_dir = \"{}\"", data.display())),
        "{checked}"
    );
    let keys = must(mailstow(&data, &["dkim", "list"]));
    assert!(
        keys.starts_with(&format!(
            "example.test {selector} rsa signing v=DKIM1; k=rsa; p="
        )),
        "{keys}"
    );

    // The admin logs in with the printed password (plain IMAP allowed for the test only).
    let serve_config = dir.path().join("serve.toml");
    let written = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &serve_config,
        written.replacen("[server]\n", "[server]\nauth_without_tls = true\n", 1),
    )
    .unwrap();
    let server = Server::start_with(&data, Some(&serve_config));
    let mut imap = Imap::connect(&server.addr("imap"));
    let answer = imap.run(&format!("LOGIN admin@example.test {password}"));
    assert!(answer.last().unwrap().contains("OK"), "{answer:?}");
    let answer = imap.run("SELECT INBOX");
    assert!(answer.last().unwrap().contains("OK"), "{answer:?}");
    let mut other = Imap::connect(&server.addr("imap"));
    let answer = other.run("LOGIN admin@example.test wrong-password");
    assert!(answer.last().unwrap().contains("NO"), "{answer:?}");
    drop(imap);
    drop(other);
    server.stop_cleanly();
}

#[test]
fn setup_refuses_to_run_twice_and_names_a_missing_flag() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mailstow.toml");
    let data = dir.path().join("data");
    let password_file = dir.path().join("password");
    std::fs::write(&password_file, "a-good-password\n").unwrap();

    // Not a terminal: a missing value is an error naming its flag, and nothing is written.
    let out = run(
        &config,
        &data,
        &["setup", "--hostname", "mail.example.test"],
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("--domain is required"),
        "{}",
        stderr(&out)
    );
    assert!(!config.exists() && !data.exists());

    let args = [
        "setup",
        "--hostname",
        "mail.example.test",
        "--domain",
        "example.test",
        "--admin",
        "postmaster@example.test",
        "--password-file",
        password_file.to_str().unwrap(),
        "--standard-ports",
        "--acme-directory",
        "https://acme.invalid/directory",
        "--acme-contact",
        "mailto:postmaster@example.test",
        "--address",
        ADDRESS,
    ];
    let out = run(&config, &data, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.lines()
            .any(|l| l == "admin user added: postmaster@example.test"),
        "{text}"
    );
    assert!(!text.contains("a-good-password"), "{text}");
    // The standard ports are in the file and in the SRV records.
    let checked = must(run(&config, &data, &["config", "check"]));
    assert!(checked.contains("smtp = \"0.0.0.0:25\""), "{checked}");
    assert!(checked.contains("https = \"0.0.0.0:443\""), "{checked}");
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == [
                    "_submission._tcp.example.test.",
                    "IN",
                    "SRV",
                    "10",
                    "1",
                    "587",
                    "mail.example.test."
                ]),
        "{text}"
    );
    // [acme]: written, and until the certificate is issued no TLSA but a comment; MTA-STS
    // enforce by default; the web view on the public HTTPS listener.
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(
        written.contains(
            "[acme]\n# The certificate for the host name (and our domains' mta-sts. and \
             autoconfig.\n# names) from this ACME directory (RFC 8555), renewed before it \
             expires.\ndirectory_url = \"https://acme.invalid/directory\"\n\
             contact = [\"mailto:postmaster@example.test\"]\n"
        ),
        "{written}"
    );
    assert!(
        text.contains("; no TLSA record yet: ACME has not issued the certificate"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("_mta-sts.example.test.")),
        "{text}"
    );
    assert!(
        text.contains("MTA-STS: senders must use TLS to us"),
        "{text}"
    );
    assert_eq!(
        text.lines().last().unwrap(),
        "next: the web view: https://mail.example.test/ (log in as postmaster@example.test)"
    );
    let users = must(mailstow(&data, &["user", "list", "example.test"]));
    assert!(users.contains("postmaster@example.test"), "{users}");

    // Again: refused, the file and the directory as they were.
    let before = std::fs::read(&config).unwrap();
    let directory_before = std::fs::read(data.join("directory.db")).unwrap();
    let out = run(&config, &data, &args);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("exists: setup writes a new configuration (--force"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    let mut forced = args.to_vec();
    forced.push("--force");
    let out = run(&config, &data, &forced);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("is not empty: setup makes a new server"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read(&config).unwrap(), before);
    assert_eq!(
        std::fs::read(data.join("directory.db")).unwrap(),
        directory_before
    );
}
