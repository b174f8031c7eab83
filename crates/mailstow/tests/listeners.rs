//! `mailstow serve`'s listeners (issue 36): the mail listeners are the service and are bound
//! before anything is created; the web view and the metrics are optional, so one that cannot
//! be bound leaves the mail services running, is named in `/healthz` and is bound once free.

mod common;

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Imap, Server, set_up_data_dir};

/// `GET http://{address}{path}` with curl: the body and the status code, `"000"` when
/// nothing answers.
fn get(address: &str, path: &str) -> (String, String) {
    let out = Command::new("curl")
        .args(["-s", "-m", "10", "-w", "\n%{http_code}"])
        .arg(format!("http://{address}{path}"))
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "000"));
    (body.to_string(), code.to_string())
}

/// The log file's lines, waiting up to 30 s for one `wanted` accepts.
fn wait_for_line(path: &Path, wanted: impl Fn(&str) -> bool) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        if lines.iter().any(|l| wanted(l)) {
            return lines;
        }
        assert!(
            Instant::now() < deadline,
            "no such line in the log:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The value of `key=` in a logfmt line (unquoted values).
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split(' ')
        .find_map(|pair| pair.strip_prefix(&format!("{key}=")))
}

/// `listeners=` of the `started` line equals the `listening on` lines printed.
fn started_counts_the_printed_listeners(server: &Server, log: &Path) {
    let printed = server
        .banner
        .iter()
        .filter(|l| l.contains(" listening on "))
        .count();
    let lines = wait_for_line(log, |l| field(l, "event") == Some("started"));
    let started = lines
        .iter()
        .find(|l| field(l, "event") == Some("started"))
        .unwrap();
    assert_eq!(
        field(started, "listeners"),
        Some(printed.to_string().as_str()),
        "{started} vs {:?}",
        server.banner
    );
}

/// The web view's port is taken: SMTP accepts and IMAP logs in all the same, `/healthz` (on
/// the metrics listener) answers 503 naming the web listener, and once the port is free the
/// web view is bound within the first retry interval and `/healthz` is back to 200.
#[test]
fn a_taken_web_port_leaves_mail_served_and_is_bound_once_free() {
    let (dir, data) = set_up_data_dir();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let web = taken.local_addr().unwrap().to_string();
    let log = dir.path().join("mail.log");
    let config = dir.path().join("serve.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nauth_without_tls = true\n[log]\nfile = \"{}\"\nlevel = \"info\"\n",
            log.display()
        ),
    )
    .unwrap();
    let server = Server::start_opts(
        &data,
        Some(&config),
        None,
        &["--web", &web, "--metrics", "127.0.0.1:0"],
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !server
        .output()
        .iter()
        .any(|l| l.starts_with(&format!("web not listening on {web}: ")))
    {
        assert!(Instant::now() < deadline, "{:?}", server.output());
        std::thread::sleep(Duration::from_millis(50));
    }
    started_counts_the_printed_listeners(&server, &log);
    let lines = wait_for_line(&log, |l| field(l, "event") == Some("listen_failed"));
    assert!(
        lines
            .iter()
            .any(|l| field(l, "event") == Some("listen_failed")
                && field(l, "service") == Some("web")
                && field(l, "address") == Some(web.as_str())),
        "{lines:?}"
    );

    // The mail services run.
    let mut smtp = std::io::BufReader::new(
        std::net::TcpStream::connect(server.addr("smtp")).expect("connect"),
    );
    assert_eq!(common::smtp_reply(&mut smtp).unwrap(), 220);
    let mut send = |line: &str| {
        use std::io::Write as _;
        smtp.get_mut()
            .write_all(format!("{line}\r\n").as_bytes())
            .unwrap();
        common::smtp_reply(&mut smtp).unwrap()
    };
    assert_eq!(send("EHLO client.test"), 250);
    assert_eq!(send("MAIL FROM:<x@elsewhere.test>"), 250);
    assert_eq!(send("RCPT TO:<alice@example.test>"), 250);
    assert_eq!(send("DATA"), 354);
    assert_eq!(send("Subject: web down\r\n\r\nstill mail\r\n."), 250);
    let mut imap = Imap::connect(&server.addr("imap"));
    let answer = imap.run("LOGIN alice@example.test secret-pw");
    assert!(answer.last().unwrap().contains("OK"), "{answer:?}");

    // `/healthz` names the unbound web listener.
    let metrics = server.metrics.expect("metrics address").to_string();
    let (body, code) = get(&metrics, "/healthz");
    assert_eq!(code, "503", "{body}");
    assert!(
        body.starts_with(&format!("web listener not bound: {web}: ")) && body.lines().count() == 1,
        "{body:?}"
    );

    // Freed: bound at the first retry (5 s after the start), and healthy again.
    drop(taken);
    let deadline = Instant::now() + Duration::from_secs(20);
    while get(&metrics, "/healthz") != ("ok\n".to_string(), "200".to_string()) {
        assert!(
            Instant::now() < deadline,
            "/healthz: {:?}",
            get(&metrics, "/healthz")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(get(&web, "/login").1, "200");
    let lines = wait_for_line(&log, |l| {
        field(l, "event") == Some("listening") && field(l, "service") == Some("web")
    });
    assert!(
        lines
            .iter()
            .any(|l| field(l, "address") == Some(web.as_str()))
    );
    server.stop_cleanly();
}

/// Every listener bound: `started listeners=` counts the twelve printed (ten mail listeners,
/// the metrics and the web view).
#[test]
fn started_counts_every_listener_printed() {
    let (dir, data) = set_up_data_dir();
    let log = dir.path().join("mail.log");
    let config = dir.path().join("serve.toml");
    std::fs::write(
        &config,
        format!("[log]\nfile = \"{}\"\nlevel = \"info\"\n", log.display()),
    )
    .unwrap();
    let server = Server::start_opts(&data, Some(&config), None, &["--metrics", "127.0.0.1:0"]);
    started_counts_the_printed_listeners(&server, &log);
    let lines = wait_for_line(&log, |l| field(l, "event") == Some("started"));
    assert!(lines.iter().any(|l| field(l, "listeners") == Some("12")));
    server.stop_cleanly();
}

/// A busy SMTP port stops `serve` before it creates anything: a clear message, a non-zero
/// exit, and no data directory.
#[test]
fn a_busy_mail_port_stops_serve_before_the_data_directory_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let smtp = taken.local_addr().unwrap().to_string();
    let mut args = vec![
        "--data-dir".to_string(),
        data.display().to_string(),
        "serve".into(),
    ];
    for service in common::SERVICES {
        args.push(format!("--{service}"));
        args.push(if service == "smtp" {
            smtp.clone()
        } else {
            "127.0.0.1:0".into()
        });
    }
    let out = Command::new(env!("CARGO_BIN_EXE_mailstow"))
        .args(&args)
        .output()
        .expect("mailstow serve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        stderr.contains(&format!("smtp: cannot listen on {smtp}")),
        "{stderr}"
    );
    assert!(!data.exists(), "serve left {} behind", data.display());
    drop(taken);
}

/// Binding first does not weaken the data directory's lock: a second `serve` on the same
/// directory, with free ports, binds them and is then refused by the lock.
#[test]
fn a_second_serve_on_one_data_directory_is_refused_by_its_lock() {
    let (_dir, data) = set_up_data_dir();
    let server = Server::start(&data);
    let mut args = vec![
        "--data-dir".to_string(),
        data.display().to_string(),
        "serve".into(),
    ];
    for service in common::SERVICES {
        args.push(format!("--{service}"));
        args.push("127.0.0.1:0".into());
    }
    let out = Command::new(env!("CARGO_BIN_EXE_mailstow"))
        .args(&args)
        .output()
        .expect("mailstow serve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        stderr.contains("is in use by another mailstow process"),
        "{stderr}"
    );
    server.stop_cleanly();
}
