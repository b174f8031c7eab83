//! Two private Dovecot instances side by side; stop and restart one of them.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use test_peers::Dovecot;

/// Sends `line` and reads until the tagged response for `tag`; returns all lines.
fn command(reader: &mut BufReader<TcpStream>, tag: &str, line: &str) -> Vec<String> {
    reader
        .get_mut()
        .write_all(format!("{tag} {line}\r\n").as_bytes())
        .unwrap();
    let mut lines = Vec::new();
    loop {
        let mut buf = String::new();
        let n = reader.read_line(&mut buf).unwrap();
        assert!(n > 0, "connection closed, got {lines:?}");
        let done = buf.starts_with(&format!("{tag} "));
        lines.push(buf);
        if done {
            return lines;
        }
    }
}

fn login_and_capability(dovecot: &Dovecot, n: usize) {
    let stream = TcpStream::connect(("127.0.0.1", dovecot.port())).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reader = BufReader::new(stream);
    let mut greeting = String::new();
    reader.read_line(&mut greeting).unwrap();
    assert!(greeting.starts_with("* OK"), "greeting {greeting:?}");
    let (user, password) = dovecot.user(n);
    let login = command(&mut reader, "a", &format!("LOGIN {user} {password}"));
    assert!(
        login.last().unwrap().starts_with("a OK"),
        "{login:?}\n{}",
        dovecot.log_tail()
    );
    let caps = command(&mut reader, "b", "CAPABILITY");
    assert!(caps.last().unwrap().starts_with("b OK"), "{caps:?}");
    let caps = caps.join("");
    for cap in ["IMAP4rev1", "QUOTA", "UIDPLUS", "BINARY", "MULTIAPPEND"] {
        assert!(caps.contains(cap), "{cap} missing in {caps:?}");
    }
    let quota = command(&mut reader, "c", "GETQUOTAROOT INBOX");
    assert!(quota.last().unwrap().starts_with("c OK"), "{quota:?}");
    assert!(quota.iter().any(|l| l.starts_with("* QUOTA ")), "{quota:?}");
    let bad = command(&mut reader, "d", &format!("LOGIN {user} wrong"));
    assert!(!bad.last().unwrap().starts_with("d OK"), "{bad:?}");
    command(&mut reader, "e", "LOGOUT");
}

#[test]
fn two_instances_stop_restart() {
    let mut one = Dovecot::start(2).unwrap();
    let two = Dovecot::start(1).unwrap();
    assert_ne!(one.port(), two.port());
    assert_eq!(one.user(2), ("user2".to_string(), "pw2".to_string()));

    login_and_capability(&one, 1);
    login_and_capability(&one, 2);
    login_and_capability(&two, 1);

    // A connection open across stop is closed by the server.
    let open = TcpStream::connect(("127.0.0.1", one.port())).unwrap();
    open.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut open = BufReader::new(open);
    let mut greeting = String::new();
    open.read_line(&mut greeting).unwrap();
    assert!(greeting.starts_with("* OK"));

    one.stop();
    assert!(!one.is_running());
    assert!(TcpStream::connect(("127.0.0.1", one.port())).is_err());
    let mut rest = String::new();
    // EOF or a reset, promptly (not the 10 s read timeout): the connection is gone.
    let t = std::time::Instant::now();
    let r = open.read_line(&mut rest);
    assert!(matches!(r, Ok(0)) || r.is_err(), "{r:?} {rest:?}");
    assert!(t.elapsed() < Duration::from_secs(5));
    // The other instance is unaffected.
    login_and_capability(&two, 1);

    let port = one.port();
    one.restart().unwrap();
    assert_eq!(one.port(), port);
    login_and_capability(&one, 1);
    assert!(one.log_tail().contains("imap-login"), "{}", one.log_tail());
}
