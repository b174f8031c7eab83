//! An independent verifier: Python's dkimpy must accept `Signer`'s signatures. The test fails
//! (does not skip) without python3 or dkimpy; scripts/test.sh installs them.

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::{MESSAGE, signed, signer};
use sender_auth::{Algorithm, dns_record};

/// dkimpy's exit code for `message` with `record` at s1._domainkey.example.org.
fn dkimpy(record: &str, message: &[u8]) -> i32 {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/dkimpy_verify.py");
    let mut child = Command::new("python3")
        .arg(script)
        .arg("s1._domainkey.example.org")
        .arg(record)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 is needed");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(message)
        .expect("write message");
    let output = child.wait_with_output().expect("dkimpy");
    let code = output.status.code().unwrap_or(-1);
    assert!(
        code == 0 || code == 1,
        "dkimpy did not run (exit {code}):\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    if code != 0 {
        eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    }
    code
}

fn verified_by_dkimpy(algorithm: Algorithm) {
    let (key, signer, _) = signer(algorithm, "example.org");
    let record = dns_record(algorithm, &key.public_key_b64);
    let message = signed(&signer, MESSAGE);
    assert_eq!(
        dkimpy(&record, &message),
        0,
        "dkimpy rejected:\n{}",
        String::from_utf8_lossy(&message)
    );

    // The same verifier must notice a change, or the check above proves nothing.
    let changed = String::from_utf8(message)
        .expect("utf-8")
        .replace("noon", "one");
    assert_eq!(dkimpy(&record, changed.as_bytes()), 1);
}

#[test]
fn dkimpy_verifies_ed25519_signatures() {
    verified_by_dkimpy(Algorithm::Ed25519);
}

#[test]
fn dkimpy_verifies_rsa_signatures() {
    verified_by_dkimpy(Algorithm::Rsa);
}
