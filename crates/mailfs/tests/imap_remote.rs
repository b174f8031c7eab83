//! The IMAP account against a real Dovecot: what the engine's in-memory accounts cannot show.

use mailfs::config::{AccountSection, TlsMode, Transfer};
use mailfs::imap_remote::ImapRemote;
use mailfs::remote::Remote;
use test_peers::Dovecot;

fn remote(server: &Dovecot, connections: usize, transfer: Transfer) -> ImapRemote {
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
    ImapRemote::new(
        &account,
        "mailfs",
        std::time::Duration::from_secs(10),
        std::time::Duration::from_secs(10),
    )
    .unwrap()
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
