//! The milter client and rspamd training against real peers on loopback: rspamd 3.4 (its
//! proxy in milter mode, its controller) and clamav-milter in front of clamd, from Debian's
//! packages (test-peers), plus sockets that refuse or never answer.
//!
//! Each real peer is started once, by the one test that drives it through several SMTP
//! transactions, so that the file stays well under a minute.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use filter::milter::{
    ConnectInfo, Decision, DefaultAction, MilterAddress, MilterConfig, MilterError, MilterSession,
    Modification, apply,
};
use filter::rspamd::{Learn, learn};

fn config(name: &str, address: &str, timeout: Duration) -> Arc<MilterConfig> {
    Arc::new(MilterConfig {
        name: name.to_string(),
        address: address.parse::<MilterAddress>().unwrap(),
        connect_timeout: Duration::from_secs(5),
        timeout,
        default_action: DefaultAction::TempFail,
        reply_bytes_max: 1 << 20,
        submission: false,
    })
}

fn client() -> ConnectInfo {
    ConnectInfo {
        client_ip: IpAddr::from([203, 0, 113, 7]),
        client_port: 40000,
        client_name: "[203.0.113.7]".to_string(),
        our_hostname: "mx.mailstow.test".to_string(),
        daemon_name: "mailstow-mx".to_string(),
    }
}

/// A message as the server queues it: CRLF lines.
fn message(id: &str, subject: &str, body: &str) -> Vec<u8> {
    format!(
        "Received: from client.example ([203.0.113.7]) by mx.mailstow.test with ESMTP id {id}\r\n\
         From: Alice <alice@example.org>\r\n\
         To: Bob <bob@example.net>\r\n\
         Subject: {subject}\r\n\
         Date: Sat, 28 Nov 2026 12:00:00 +0000\r\n\
         Message-ID: <{id}@example.org>\r\n\
         MIME-Version: 1.0\r\n\
         Content-Type: text/plain; charset=utf-8\r\n\
         \r\n\
         {body}\r\n"
    )
    .replace("\r\n", "\n")
    .replace('\n', "\r\n")
    .into_bytes()
}

/// MAIL, RCPT and the message through an open session.
async fn transaction(
    session: &mut MilterSession,
    queue_id: &str,
    message: &[u8],
) -> (Decision, Vec<Modification>) {
    session.abort().await.unwrap();
    let mail = session
        .mail(
            "alice@example.org",
            &[],
            &[("i", queue_id), ("{mail_addr}", "alice@example.org")],
        )
        .await
        .unwrap();
    assert_eq!(mail, Decision::Continue);
    let rcpt = session
        .rcpt(
            "bob@example.net",
            &[],
            &[("i", queue_id), ("{rcpt_addr}", "bob@example.net")],
        )
        .await
        .unwrap();
    assert_eq!(rcpt, Decision::Continue);
    session.message(message).await.unwrap()
}

/// The header section of a message, as text.
fn header(message: &[u8]) -> String {
    let text = String::from_utf8_lossy(message);
    let end = text.find("\r\n\r\n").expect("a header section");
    text[..end + 2].to_string()
}

fn header_names(modifications: &[Modification]) -> Vec<String> {
    modifications
        .iter()
        .filter_map(|m| match m {
            Modification::AddHeader { name, .. }
            | Modification::ChangeHeader { name, .. }
            | Modification::InsertHeader { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rspamd_rejects_gtube_adds_its_headers_to_ham_and_learns() {
    let started = Instant::now();
    let rspamd = tokio::task::spawn_blocking(test_peers::Rspamd::start)
        .await
        .unwrap()
        .expect("rspamd");
    eprintln!("rspamd up in {:?}", started.elapsed());
    let config = config("rspamd", &rspamd.milter_address(), Duration::from_secs(10));
    let (mut session, connected) = MilterSession::open(config, &client()).await.unwrap();
    eprintln!("rspamd negotiated {:?}", session.negotiated());
    assert_eq!(connected, Decision::Continue);
    assert_eq!(
        session.helo("client.example").await.unwrap(),
        Decision::Continue
    );

    let gtube = message(
        "gtube1",
        "Test spam mail (GTUBE)",
        "XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X",
    );
    let (decision, modifications) = transaction(&mut session, "GTUBE1", &gtube).await;
    eprintln!("rspamd on GTUBE: {decision:?} {modifications:?}");
    match &decision {
        Decision::Reject(reply) => {
            if let Some(reply) = reply {
                assert!((500..600).contains(&reply.code), "{reply:?}");
            }
        }
        other => panic!("GTUBE: {other:?}\n{}", rspamd.log_tail()),
    }
    assert!(modifications.is_empty());

    let ham = message(
        "ham1",
        "Lunch on Thursday",
        "Hi Bob,\r\n\r\nshall we meet for lunch on Thursday at noon?\r\n\r\nAlice",
    );
    let (decision, modifications) = transaction(&mut session, "HAM1", &ham).await;
    eprintln!("rspamd on ham: {decision:?} {modifications:#?}");
    assert!(
        matches!(decision, Decision::Continue | Decision::Accept),
        "ham: {decision:?}\n{}",
        rspamd.log_tail()
    );
    let names = header_names(&modifications);
    assert!(
        names
            .iter()
            .any(|n| n.eq_ignore_ascii_case("X-Spamd-Result"))
            && names
                .iter()
                .any(|n| n.eq_ignore_ascii_case("X-Rspamd-Server")),
        "{modifications:?}"
    );
    let delivered = apply(&ham, &modifications);
    let delivered_header = header(&delivered);
    assert!(
        delivered_header.contains("X-Spamd-Result: "),
        "{delivered_header}"
    );
    assert!(
        delivered_header.contains("X-Rspamd-Server: "),
        "{delivered_header}"
    );
    assert!(delivered.ends_with(b"\r\n\r\nAlice\r\n"));
    session.abort().await.unwrap();
    session.quit().await;

    // Training: learned once, then "already learned" (208) is success too; the password
    // is checked.
    let controller = rspamd.controller_address();
    let spam = message(
        "learn1",
        "Cheap pills",
        "Buy cheap pills now, best offer, click today",
    );
    let timeout = Duration::from_secs(10);
    learn(
        &controller,
        Some(rspamd.password()),
        Learn::Spam,
        &spam,
        timeout,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", rspamd.log_tail()));
    learn(
        &controller,
        Some(rspamd.password()),
        Learn::Spam,
        &spam,
        timeout,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", rspamd.log_tail()));
    let wrong = learn(&controller, Some("wrong"), Learn::Ham, &spam, timeout).await;
    assert!(
        wrong.as_ref().is_err_and(|e| e.contains("401")),
        "{wrong:?}"
    );
    learn(
        &controller,
        Some(rspamd.password()),
        Learn::Ham,
        &spam,
        timeout,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", rspamd.log_tail()));
    let stopping = Instant::now();
    drop(rspamd);
    eprintln!(
        "rspamd test took {:?}, of which stopping {:?}",
        started.elapsed(),
        stopping.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clamav_milter_rejects_eicar_and_marks_clean_mail() {
    let started = Instant::now();
    let clamav = tokio::task::spawn_blocking(test_peers::ClamAv::start)
        .await
        .unwrap()
        .expect("clamav");
    eprintln!("clamav up in {:?}", started.elapsed());
    let config = config("clamav", &clamav.milter_address(), Duration::from_secs(10));
    let (mut session, connected) = MilterSession::open(config, &client()).await.unwrap();
    eprintln!("clamav-milter negotiated {:?}", session.negotiated());
    assert_eq!(connected, Decision::Continue);
    assert_eq!(
        session.helo("client.example").await.unwrap(),
        Decision::Continue
    );

    let infected = message("virus1", "Your invoice", test_peers::EICAR);
    let (decision, modifications) = transaction(&mut session, "VIRUS1", &infected).await;
    eprintln!("clamav-milter on EICAR: {decision:?} {modifications:?}");
    assert!(
        matches!(decision, Decision::Reject(_)),
        "EICAR: {decision:?}\n{}",
        clamav.log_tail()
    );

    let clean = message("clean1", "Minutes", "The minutes of Monday's meeting.");
    let (decision, modifications) = transaction(&mut session, "CLEAN1", &clean).await;
    eprintln!("clamav-milter on clean mail: {decision:?} {modifications:?}");
    assert!(
        matches!(decision, Decision::Continue | Decision::Accept),
        "clean: {decision:?}\n{}",
        clamav.log_tail()
    );
    let names = header_names(&modifications);
    assert!(
        names
            .iter()
            .any(|n| n.eq_ignore_ascii_case("X-Virus-Scanned")),
        "{modifications:?}"
    );
    let delivered_header = header(&apply(&clean, &modifications));
    assert!(
        delivered_header.contains("X-Virus-Scanned: "),
        "{delivered_header}"
    );
    session.abort().await.unwrap();
    session.quit().await;
    let stopping = Instant::now();
    drop(clamav);
    eprintln!(
        "clamav test took {:?}, of which stopping {:?}",
        started.elapsed(),
        stopping.elapsed()
    );
}

#[tokio::test]
async fn a_filter_that_never_answers_costs_its_timeout() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    // Accepts and holds the connections, reads nothing, answers nothing.
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let timeout = Duration::from_millis(500);
    let started = Instant::now();
    let result = MilterSession::open(config("silent", &address, timeout), &client()).await;
    let elapsed = started.elapsed();
    assert!(
        matches!(result, Err(MilterError::Timeout("optneg"))),
        "{result:?}"
    );
    assert!(
        elapsed >= timeout && elapsed < timeout + Duration::from_secs(1),
        "{elapsed:?}"
    );
    holder.abort();
}

#[tokio::test]
async fn a_refused_connection_fails_at_once() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = Instant::now();
    let address = format!("inet:127.0.0.1:{port}");
    let result = MilterSession::open(
        config("refused", &address, Duration::from_secs(5)),
        &client(),
    )
    .await;
    assert!(matches!(result, Err(MilterError::Connect(_))), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(1));
}
