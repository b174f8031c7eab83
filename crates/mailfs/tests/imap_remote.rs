//! The IMAP account against a real Dovecot: what the engine's in-memory accounts cannot show.

use mailfs::config::{AccountSection, TlsMode, Transfer};
use mailfs::imap_remote::ImapRemote;
use mailfs::remote::Remote;
use test_peers::Dovecot;

use std::time::{Duration, Instant};

fn remote(server: &Dovecot, connections: usize, transfer: Transfer) -> ImapRemote {
    remote_with(server, connections, transfer, Duration::from_secs(10))
}

fn remote_with(
    server: &Dovecot,
    connections: usize,
    transfer: Transfer,
    deadline: Duration,
) -> ImapRemote {
    let (user, password) = server.user(1);
    let account = AccountSection {
        host: "127.0.0.1".into(),
        port: server.port(),
        tls: TlsMode::None,
        accept_invalid_certs: false,
        user,
        password: Some(password),
        password_file: None,
        connections,
        transfer,
        capacity_bytes: None,
    };
    ImapRemote::new(&account, "mailfs", deadline, Duration::from_secs(10)).unwrap()
}

/// A session hears of messages other sessions appended only when a command lets the server
/// tell it (RFC 3501 5.2); Dovecot answers a UID FETCH of one it has not announced with OK
/// and no data. The pool hands a read whichever session is free, and a second mount never
/// appended the message at all: a fetch must still find it.
#[test]
fn a_message_appended_over_another_session_is_found() {
    let server = Dovecot::start(1).unwrap();
    for (round, transfer) in [Transfer::Base64, Transfer::Binary].into_iter().enumerate() {
        let name = |block: u32| format!("fsid blk 00000000000{round}.{block} v1 t1");
        let writer = remote(&server, 1, transfer);
        let reader = remote(&server, 1, transfer);
        writer.prepare().unwrap();
        // The reader's one session is open and selected before the message exists.
        reader.ping().unwrap();
        let envelope: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let uids = writer.append(&[(name(0), &envelope)]).unwrap();
        let uid = uids[0].expect("APPENDUID");
        assert_eq!(reader.fetch(uid).unwrap().as_deref(), Some(&envelope[..]));
        let more = writer.append(&[(name(1), &envelope)]).unwrap()[0].expect("APPENDUID");
        assert_eq!(
            reader.fetch_range(more, 1000, 50).unwrap().as_deref(),
            Some(&envelope[1000..1050])
        );
        let newest = writer.append(&[(name(2), &envelope)]).unwrap()[0].expect("APPENDUID");
        assert_eq!(
            reader.find(name(2).trim_end_matches(" t1")).unwrap(),
            vec![newest]
        );
        // A UID that does not exist is still reported missing, not an error.
        assert_eq!(reader.fetch(newest + 1000).unwrap(), None);
    }
}

/// A server that goes silent (SIGSTOP) fails the command waiting for it after the deadline,
/// and every command queued behind it for the account's one session at the same moment:
/// not a deadline each (issue 41). Afterwards (SIGCONT) the account answers again.
#[test]
fn a_silent_server_fails_the_queued_commands_within_one_deadline() {
    let server = Dovecot::start(1).unwrap();
    let deadline = Duration::from_millis(1500);
    let r = std::sync::Arc::new(remote_with(&server, 1, Transfer::Base64, deadline));
    r.prepare().unwrap();
    let uid = r
        .append(&[("fsid blk 1.0 v1 t1".into(), &[7u8; 1000][..])])
        .unwrap()[0]
        .expect("APPENDUID");
    server.pause();
    let started = Instant::now();
    let waiting: Vec<_> = (0..6)
        .map(|i| {
            let r = r.clone();
            std::thread::spawn(move || {
                let got = if i % 2 == 0 {
                    r.fetch(uid).map(|_| ())
                } else {
                    r.append(&[("fsid blk 1.1 v1 t1".into(), &[8u8; 300_000][..])])
                        .map(|_| ())
                };
                (got, started.elapsed())
            })
        })
        .collect();
    for w in waiting {
        let (got, took) = w.join().unwrap();
        assert!(got.is_err(), "a command to a silent server succeeded");
        assert!(
            took < deadline * 2,
            "a command queued behind a silent one failed after {took:?}"
        );
    }
    server.resume();
    assert_eq!(r.fetch(uid).unwrap().unwrap(), vec![7u8; 1000]);
}
