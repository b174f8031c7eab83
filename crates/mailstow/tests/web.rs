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
