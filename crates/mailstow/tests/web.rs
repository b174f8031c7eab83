//! The web view (issue 21) against the real binary: mail delivered with Python's smtplib,
//! read over HTTP with Python's client and cookie jar (`tests/e2e/web_session.py`), and the
//! login lines in the mail log.

mod common;

use std::process::Command;

use common::{Server, script, set_up_data_dir};

#[test]
fn a_user_reads_mail_in_the_web_view_and_cannot_reach_anothers() {
    let (_dir, data) = set_up_data_dir();
    let server = Server::start(&data);
    let out = Command::new("python3")
        .arg(script("web_session.py"))
        .arg(server.addr("web"))
        .arg(server.addr("smtp"))
        .arg(server.addr("imap"))
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "web_session.py: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    server.stop_cleanly();
}

/// With `web_tls` the view is HTTPS with the server's certificate and the cookie is
/// `Secure`; a connection over `web_connections_max` is closed at once, and one that sends
/// no request is closed after the header deadline.
#[test]
fn the_web_listener_is_tls_and_bounded() {
    use std::io::Read as _;
    use std::net::TcpStream;
    use std::time::{Duration, Instant};

    let (dir, data) = set_up_data_dir();
    let config = dir.path().join("mailstow.toml");
    std::fs::write(
        &config,
        "[server]\nweb_tls = true\nweb_connections_max = 2\n",
    )
    .unwrap();
    let server = Server::start_with(&data, Some(&config));
    let web = server.addr("web");
    let curl = |args: &[&str]| {
        let out = Command::new("curl")
            .args(["-sk", "-o", "/dev/null", "-D", "-", "--max-time", "20"])
            .args(args)
            .output()
            .expect("curl");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let head = curl(&[&format!("https://{web}/login")]);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let login = curl(&[
        "--data",
        "username=alice%40example.test&password=secret-pw",
        &format!("https://{web}/login"),
    ]);
    assert!(login.starts_with("HTTP/1.1 303"), "{login}");
    let cookie = login
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
        .unwrap_or_default();
    assert!(cookie.contains("; Secure"), "{cookie}");
    // Plain HTTP on the TLS port gets nothing.
    assert!(!curl(&[&format!("http://{web}/login")]).starts_with("HTTP/1.1 200"));

    // Two idle connections fill the listener; a third is closed at once.
    let idle: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(&web).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut third = TcpStream::connect(&web).unwrap();
    third
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut byte = [0u8; 1];
    let closed = third.read(&mut byte);
    assert!(
        matches!(&closed, Ok(0))
            || matches!(&closed, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
        "a third connection was not closed at once: {closed:?}"
    );
    // The silent ones end within the TLS handshake deadline (10 s) and free their slots.
    let started = Instant::now();
    for mut c in idle {
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        assert!(matches!(c.read(&mut byte), Ok(0) | Err(_)));
    }
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(25),
        "idle connections held {waited:?}"
    );
    let head = curl(&[&format!("https://{web}/login")]);
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "after the idle ones: {head}"
    );
    server.stop_cleanly();
}

/// The admin pages for an admin made with the CLI while the server runs, refused to anyone
/// else; every action in the log with the admin's address and no password; the login
/// history with a failed IMAP attempt on the account page (`tests/e2e/web_admin.py`).
#[test]
fn an_admin_manages_the_server_from_the_web_view() {
    let (dir, data) = set_up_data_dir();
    let log = dir.path().join("mailstow.log");
    let config = dir.path().join("mailstow.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nauth_without_tls = true\n[log]\nfile = \"{}\"\nlevel = \"info\"\n",
            log.display()
        ),
    )
    .unwrap();
    let server = Server::start_opts(&data, Some(&config), None, &[]);
    let made = common::must(common::mailstow(
        &data,
        &["user", "admin", "alice@example.test", "on"],
    ));
    assert_eq!(made.trim(), "admin on: alice@example.test");
    let out = Command::new("python3")
        .arg(script("web_admin.py"))
        .arg(server.addr("web"))
        .arg(server.addr("imap"))
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "web_admin.py: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    server.stop_cleanly();
    let log = std::fs::read_to_string(&log).unwrap();
    let admin: Vec<&str> = log.lines().filter(|l| l.contains("event=admin ")).collect();
    for action in [
        "domain add example.net",
        "user add carol@example.net",
        "user quota carol@example.net",
        "user passwd carol@example.net",
        "alias add team@example.net carol@example.net",
        "user admin bob@example.test on",
        "user del carol@example.net",
        "queue retry 999999",
    ] {
        assert!(
            admin
                .iter()
                .any(|l| l.contains(action) && l.contains("admin=alice@example.test")),
            "no log line for {action}:\n{}",
            admin.join("\n")
        );
    }
    assert!(
        admin.iter().any(|l| l.contains("result=refused")),
        "refusals are logged too"
    );
    assert!(
        !log.contains("carols-pw") && !log.contains("new-pw"),
        "a password reached the log"
    );
    assert!(log.contains("event=admin_refused"), "bob's refusals");
}
