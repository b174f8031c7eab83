//! `MilterSession` against a scripted filter on a loopback socket: the protocol paths real
//! filters seldom take (steps without replies, SMFIR_SKIP, progress, quarantine, errors and
//! the bounds).

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use filter::milter::{
    ConnectInfo, Decision, DefaultAction, MilterConfig, MilterError, MilterSession, Modification,
};
use milter::{action, protocol};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One packet the filter got: its command and data.
type Packet = (u8, Vec<u8>);

/// A filter's answer to a packet: the packets it writes back (each a code and data; the code
/// `.` is no packet but a pause of 80 ms).
type Script = Box<dyn FnMut(u8, &[u8]) -> Vec<(u8, Vec<u8>)> + Send>;

/// Starts a filter that answers OPTNEG with `actions` and `protocol`, then each packet as
/// `script` says; returns its address and what it got.
async fn filter(
    actions: u32,
    protocol: u32,
    mut script: Script,
) -> (String, Arc<Mutex<Vec<Packet>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let got = Arc::new(Mutex::new(Vec::new()));
    let log = got.clone();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        loop {
            let mut length = [0u8; 4];
            if stream.read_exact(&mut length).await.is_err() {
                return;
            }
            let mut packet = vec![0u8; u32::from_be_bytes(length) as usize];
            if stream.read_exact(&mut packet).await.is_err() {
                return;
            }
            let (command, data) = (packet[0], packet[1..].to_vec());
            log.lock().unwrap().push((command, data.clone()));
            let answers = if command == b'O' {
                let mut words = 6u32.to_be_bytes().to_vec();
                words.extend(actions.to_be_bytes());
                words.extend(protocol.to_be_bytes());
                vec![(b'O', words)]
            } else {
                script(command, &data)
            };
            for (code, data) in answers {
                if code == b'.' {
                    tokio::time::sleep(Duration::from_millis(80)).await;
                    continue;
                }
                let mut out = ((data.len() + 1) as u32).to_be_bytes().to_vec();
                out.push(code);
                out.extend(data);
                if stream.write_all(&out).await.is_err() {
                    return;
                }
            }
        }
    });
    (address, got)
}

/// Continue to every step that wants a reply (end of message included).
fn continue_to(no_reply: u32) -> Script {
    Box::new(move |command, _| {
        let silent = match command {
            b'C' => no_reply & protocol::NR_CONN != 0,
            b'H' => no_reply & protocol::NR_HELO != 0,
            b'M' => no_reply & protocol::NR_MAIL != 0,
            b'R' => no_reply & protocol::NR_RCPT != 0,
            b'T' => no_reply & protocol::NR_DATA != 0,
            b'L' => no_reply & protocol::NR_HDR != 0,
            b'N' => no_reply & protocol::NR_EOH != 0,
            b'B' => no_reply & protocol::NR_BODY != 0,
            b'D' | b'A' | b'Q' => true,
            _ => false,
        };
        if silent { vec![] } else { vec![(b'c', vec![])] }
    })
}

fn config(address: &str, timeout: Duration) -> Arc<MilterConfig> {
    Arc::new(MilterConfig {
        name: "scripted".into(),
        address: address.parse().unwrap(),
        connect_timeout: Duration::from_secs(2),
        timeout,
        default_action: DefaultAction::Accept,
        reply_bytes_max: 4096,
        submission: false,
    })
}

fn client() -> ConnectInfo {
    ConnectInfo {
        client_ip: IpAddr::from([192, 0, 2, 9]),
        client_port: 1234,
        client_name: "client.example".into(),
        our_hostname: "mx.example".into(),
        daemon_name: "mx".into(),
    }
}

const MESSAGE: &[u8] = b"Subject: hi\r\nX-Folded: a\r\n\tb\r\n\r\nbody\r\n";

async fn open(address: &str, timeout: Duration) -> MilterSession {
    let (session, decision) = MilterSession::open(config(address, timeout), &client())
        .await
        .unwrap();
    assert_eq!(decision, Decision::Continue);
    session
}

async fn envelope(session: &mut MilterSession) {
    let mail = session.mail(
        "a@example.org",
        &[],
        &[("i", "Q1"), ("{mail_addr}", "a@example.org")],
    );
    assert_eq!(mail.await.unwrap(), Decision::Continue);
    let rcpt = session.rcpt("b@example.net", &[], &[("{rcpt_addr}", "b@example.net")]);
    assert_eq!(rcpt.await.unwrap(), Decision::Continue);
}

fn commands(got: &Arc<Mutex<Vec<Packet>>>) -> String {
    got.lock()
        .unwrap()
        .iter()
        .map(|(c, _)| char::from(*c))
        .collect()
}

#[tokio::test]
async fn every_step_in_order_with_its_macros_and_values() {
    let (address, got) = filter(action::ALL, 0, continue_to(0)).await;
    let mut session = open(&address, Duration::from_secs(2)).await;
    assert_eq!(
        session.helo("client.example").await.unwrap(),
        Decision::Continue
    );
    envelope(&mut session).await;
    let (decision, modifications) = session.message(MESSAGE).await.unwrap();
    assert_eq!((decision, modifications), (Decision::Continue, vec![]));
    session.abort().await.unwrap();
    session.quit().await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(commands(&got), "ODCHDMDRDTDLDLDNDBDEAQ");
    let packets = got.lock().unwrap().clone();
    assert_eq!(
        packets[1].1,
        b"Cj\0mx.example\0{daemon_name}\0mx\0_\0client.example [192.0.2.9]\0"
    );
    assert_eq!(packets[2].1, b"client.example\x004\x04\xd2192.0.2.9\0");
    assert_eq!(packets[5].1, b"<a@example.org>\0");
    // The queue id from MAIL goes with DATA, the headers, end of headers and end of message.
    assert_eq!(packets[8].1, b"Ti\0Q1\0");
    // Without SMFIP_HDR_LEADSPC the space after the colon is dropped; folds are LF.
    assert_eq!(packets[11].1, b"Subject\0hi\0");
    assert_eq!(packets[13].1, b"X-Folded\0a\n\tb\0");
    assert_eq!(packets[17].1, b"body\r\n");
}

#[tokio::test]
async fn steps_declined_or_unanswered_are_not_waited_for() {
    let no_reply = protocol::NR_HELO | protocol::NR_HDR | protocol::NR_EOH | protocol::NR_BODY;
    let declined = protocol::NOCONNECT | protocol::NODATA;
    let (address, got) = filter(
        action::ALL,
        no_reply | declined | protocol::HDR_LEADSPC,
        continue_to(no_reply),
    )
    .await;
    let mut session = open(&address, Duration::from_secs(2)).await;
    assert_eq!(
        session.helo("client.example").await.unwrap(),
        Decision::Continue
    );
    envelope(&mut session).await;
    let (decision, _) = session.message(MESSAGE).await.unwrap();
    assert_eq!(decision, Decision::Continue);
    assert_eq!(commands(&got), "OHDMDRDLDLDNDBDE");
    // With SMFIP_HDR_LEADSPC the value keeps its leading space.
    assert_eq!(got.lock().unwrap()[7].1, b"Subject\0 hi\0");
}

#[tokio::test]
async fn skip_ends_the_body_and_modifications_come_back() {
    let script: Script = Box::new(|command, _| match command {
        b'B' => vec![(b's', vec![])],
        b'E' => vec![
            (b'h', b"X-Added\0yes\0".to_vec()),
            (b'm', b"\0\0\0\x01Subject\0\0".to_vec()),
            (b'q', b"held for review\0".to_vec()),
            (b'c', vec![]),
        ],
        b'D' => vec![],
        _ => vec![(b'c', vec![])],
    });
    let (address, got) = filter(action::ALL, 0, script).await;
    let mut session = open(&address, Duration::from_secs(2)).await;
    envelope(&mut session).await;
    let mut message = b"Subject: big\r\n\r\n".to_vec();
    message.extend(vec![b'x'; 70_000]);
    let (decision, modifications) = session.message(&message).await.unwrap();
    assert_eq!(decision, Decision::Quarantine("held for review".into()));
    assert_eq!(
        modifications,
        vec![
            Modification::AddHeader {
                name: "X-Added".into(),
                value: " yes".into()
            },
            Modification::ChangeHeader {
                index: 1,
                name: "Subject".into(),
                value: String::new()
            },
            Modification::Quarantine("held for review".into()),
        ]
    );
    // One body chunk of the two, then the end.
    assert!(commands(&got).ends_with("DNDBDE"), "{}", commands(&got));
}

#[tokio::test]
async fn accept_at_connect_ends_the_conversation() {
    let (address, got) = filter(
        action::ALL,
        0,
        Box::new(|command, _| match command {
            b'C' => vec![(b'a', vec![])],
            _ => vec![],
        }),
    )
    .await;
    let (mut session, decision) =
        MilterSession::open(config(&address, Duration::from_secs(2)), &client())
            .await
            .unwrap();
    assert_eq!(decision, Decision::Accept);
    assert_eq!(session.helo("x").await.unwrap(), Decision::Continue);
    envelope(&mut session).await;
    assert_eq!(
        session.message(MESSAGE).await.unwrap().0,
        Decision::Continue
    );
    session.quit().await;
    assert_eq!(commands(&got), "ODC");
}

#[tokio::test]
async fn a_reject_with_a_reply_and_a_tempfail_per_recipient() {
    let script: Script = Box::new(|command, data| match command {
        b'R' if data.starts_with(b"<b@") => vec![(b'y', b"550 5.1.1 No such user\0".to_vec())],
        b'R' => vec![(b't', vec![])],
        b'D' => vec![],
        _ => vec![(b'c', vec![])],
    });
    let (address, _) = filter(action::ALL, 0, script).await;
    let mut session = open(&address, Duration::from_secs(2)).await;
    assert_eq!(
        session.mail("a@x", &[], &[]).await.unwrap(),
        Decision::Continue
    );
    let Decision::Reject(Some(reply)) = session.rcpt("b@x", &[], &[]).await.unwrap() else {
        panic!("not a reject with a reply");
    };
    assert_eq!(
        (reply.code, reply.enhanced, reply.text.as_str()),
        (550, Some((5, 1, 1)), "No such user")
    );
    assert_eq!(
        session.rcpt("c@x", &[], &[]).await.unwrap(),
        Decision::TempFail(None)
    );
}

#[tokio::test]
async fn progress_restarts_the_wait_but_not_past_ten_timeouts() {
    let script: Script = Box::new(|command, _| match command {
        // Progress for 2.4 s: 30 of them, 80 ms apart.
        b'H' => (0..30)
            .flat_map(|_| [(b'.', vec![]), (b'p', vec![])])
            .collect(),
        b'D' => vec![],
        _ => vec![(b'c', vec![])],
    });
    let (address, _) = filter(action::ALL, 0, script).await;
    let mut session = open(&address, Duration::from_millis(100)).await;
    // Each progress comes within the 100 ms timeout, but the step ends at 10 x 100 ms.
    let started = Instant::now();
    let result = session.helo("x").await;
    let elapsed = started.elapsed();
    assert!(
        matches!(result, Err(MilterError::Timeout("helo"))),
        "{result:?}"
    );
    assert!(
        elapsed >= Duration::from_secs(1) && elapsed < Duration::from_millis(1600),
        "{elapsed:?}"
    );
}

#[tokio::test]
async fn a_silent_step_costs_its_timeout_and_the_session_is_then_dead() {
    let (address, got) = filter(
        action::ALL,
        0,
        Box::new(|command, _| match command {
            b'C' => vec![(b'c', vec![])],
            _ => vec![],
        }),
    )
    .await;
    let mut session = open(&address, Duration::from_millis(300)).await;
    let started = Instant::now();
    let result = session.helo("x").await;
    let elapsed = started.elapsed();
    assert!(
        matches!(result, Err(MilterError::Timeout("helo"))),
        "{result:?}"
    );
    assert!(elapsed >= Duration::from_millis(300) && elapsed < Duration::from_millis(1300));
    let started = Instant::now();
    assert!(matches!(
        session.mail("a@x", &[], &[]).await,
        Err(MilterError::Io(_))
    ));
    assert!(started.elapsed() < Duration::from_millis(50));
    assert_eq!(commands(&got), "ODCH");
}

#[tokio::test]
async fn protocol_errors() {
    // A modification before the end of the message.
    let (address, _) = filter(
        action::ALL,
        0,
        Box::new(|_, _| vec![(b'h', b"X\0v\0".to_vec())]),
    )
    .await;
    let result = MilterSession::open(config(&address, Duration::from_secs(2)), &client()).await;
    assert!(
        matches!(result, Err(MilterError::Protocol(_))),
        "{result:?}"
    );
    // A packet over reply_bytes_max (4096).
    let (address, _) = filter(
        action::ALL,
        0,
        Box::new(|_, _| vec![(b'b', vec![b'x'; 5000])]),
    )
    .await;
    let result = MilterSession::open(config(&address, Duration::from_secs(2)), &client()).await;
    assert!(
        matches!(result, Err(MilterError::Protocol(_))),
        "{result:?}"
    );
    // A shutdown.
    let (address, _) = filter(action::ALL, 0, Box::new(|_, _| vec![(b'4', vec![])])).await;
    let result = MilterSession::open(config(&address, Duration::from_secs(2)), &client()).await;
    assert!(matches!(result, Err(MilterError::Shutdown)), "{result:?}");
    // Actions we did not offer cannot be asked for.
    let (address, _) = filter(1 << 12, 0, continue_to(0)).await;
    let result = MilterSession::open(config(&address, Duration::from_secs(2)), &client()).await;
    assert!(
        matches!(result, Err(MilterError::Protocol(_))),
        "{result:?}"
    );
}

#[tokio::test]
async fn a_quarantine_asked_at_rcpt_holds_and_the_message_still_goes_to_the_filter() {
    let script: Script = Box::new(|command, _| match command {
        b'R' => vec![(b'q', b"suspicious sender\0".to_vec()), (b'c', vec![])],
        b'D' => vec![],
        _ => vec![(b'c', vec![])],
    });
    let (address, got) = filter(action::ALL, 0, script).await;
    let mut session = open(&address, Duration::from_secs(2)).await;
    assert_eq!(
        session.mail("a@x", &[], &[]).await.unwrap(),
        Decision::Continue
    );
    let held = Decision::Quarantine("suspicious sender".into());
    assert_eq!(session.rcpt("b@x", &[], &[]).await.unwrap(), held);
    assert_eq!(session.message(MESSAGE).await.unwrap(), (held, vec![]));
    assert!(commands(&got).ends_with("TLLNBE"), "{}", commands(&got));
    // The next transaction starts without it.
    session.abort().await.unwrap();
    assert_eq!(
        session.mail("a@x", &[], &[]).await.unwrap(),
        Decision::Continue
    );
}
