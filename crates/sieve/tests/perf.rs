//! A 50-rule script must cost a few microseconds per message beyond the parse. The bound
//! asserted here is loose (debug builds, shared machines); `cargo test --release -p sieve
//! --test perf -- --nocapture` prints the real figures.

mod common;
use common::*;
use sieve::Limits;
use std::time::Instant;

fn fifty_rules() -> String {
    let mut s = String::from("require [\"fileinto\", \"envelope\", \"imap4flags\"];\n");
    for i in 0..50 {
        match i % 5 {
            0 => s.push_str(&format!("if header :contains \"subject\" \"topic{i}\" {{ fileinto \"f{i}\"; stop; }}\n")),
            1 => s.push_str(&format!("if address :is \"from\" \"sender{i}@example.com\" {{ fileinto \"f{i}\"; stop; }}\n")),
            2 => s.push_str(&format!("if anyof (header :is \"list-id\" \"<l{i}.example.com>\", address :domain :is \"to\" \"d{i}.example\") {{ fileinto \"f{i}\"; }}\n")),
            3 => s.push_str(&format!("if envelope :is \"from\" \"bounce{i}@example.com\" {{ addflag \"\\\\Seen\"; }}\n")),
            _ => s.push_str(&format!("if header :matches \"x-spam\" \"*level{i}*\" {{ discard; stop; }}\n")),
        }
    }
    s
}

#[test]
fn fifty_rules_are_cheap() {
    let script = sieve::compile(&fifty_rules(), &Limits::default()).unwrap();
    let empty = sieve::compile("", &Limits::default()).unwrap();
    let ctx = context();
    let host = TestHost::default();
    let lim = Limits::default();
    let n = 2000;
    let time = |s: &sieve::Script| {
        let start = Instant::now();
        for _ in 0..n {
            let o = sieve::run(s, MSG.as_bytes(), &ctx, &host, &lim).unwrap();
            assert_eq!(o.actions.len(), 1);
        }
        start.elapsed() / n
    };
    time(&script);
    let base = time(&empty);
    let full = time(&script);
    println!("per message: empty script {base:?}, 50 rules {full:?}");
    assert!(full.as_micros() < 2000, "{full:?}");
}

#[test]
#[ignore]
fn rule_kinds() {
    let kinds = [
        "if header :contains \"subject\" \"topicN\" { fileinto \"fN\"; stop; }",
        "if address :is \"from\" \"senderN@example.com\" { fileinto \"fN\"; stop; }",
        "if envelope :is \"from\" \"bounceN@example.com\" { addflag \"\\\\Seen\"; }",
        "if header :matches \"x-spam\" \"*levelN*\" { discard; stop; }",
        "if true { }",
    ];
    let ctx = context();
    let host = TestHost::default();
    let lim = Limits::default();
    for k in kinds {
        let mut s = String::from("require [\"fileinto\", \"envelope\", \"imap4flags\"];\n");
        for i in 0..50 {
            s.push_str(&k.replace('N', &i.to_string()));
        }
        let script = sieve::compile(&s, &lim).unwrap();
        let start = Instant::now();
        for _ in 0..2000 {
            sieve::run(&script, MSG.as_bytes(), &ctx, &host, &lim).unwrap();
        }
        println!("{:?} {k}", start.elapsed() / 2000);
    }
}
