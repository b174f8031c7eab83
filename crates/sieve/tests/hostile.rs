//! Hostile scripts and messages: no panic, bounded work.

mod common;
use common::*;
use proptest::prelude::*;
use sieve::Limits;
use std::time::{Duration, Instant};

/// Pieces scripts are made of, so that random scripts often get past the lexer.
const PIECES: &[&str] = &[
    "require [\"fileinto\", \"variables\", \"imap4flags\", \"editheader\", \"relational\", \"regex\", \"body\", \"date\", \"index\", \"envelope\", \"subaddress\", \"vacation\", \"reject\", \"duplicate\", \"include\", \"ihave\", \"mailbox\", \"copy\", \"environment\", \"spamtestplus\", \"virustest\", \"encoded-character\", \"comparator-i;ascii-numeric\"];",
    "if ",
    "elsif ",
    "else ",
    "{ ",
    "} ",
    "( ",
    ") ",
    ", ",
    "; ",
    "not ",
    "allof ",
    "anyof ",
    "true ",
    "false ",
    "header ",
    "address ",
    "envelope ",
    "exists ",
    "size ",
    "string ",
    "body ",
    "date ",
    "currentdate ",
    "hasflag ",
    "duplicate ",
    "environment ",
    "spamtest ",
    "virustest ",
    "mailboxexists ",
    "ihave ",
    ":is ",
    ":contains ",
    ":matches ",
    ":regex ",
    ":value \"gt\" ",
    ":count \"eq\" ",
    ":comparator \"i;ascii-numeric\" ",
    ":index 1 ",
    ":last ",
    ":over ",
    ":under ",
    ":domain ",
    ":localpart ",
    ":user ",
    ":detail ",
    ":raw ",
    ":text ",
    ":content \"text\" ",
    ":zone \"+0100\" ",
    ":originalzone ",
    ":copy ",
    ":flags ",
    ":create ",
    ":lower ",
    ":length ",
    "\"subject\" ",
    "\"from\" ",
    "\"to\" ",
    "\"date\" ",
    "\"year\" ",
    "\"*a*?b\" ",
    "\"${1}\" ",
    "\"${x}\" ",
    "\"(a|b)+\" ",
    "[\"a\", \"b\"] ",
    "\"\\\\Seen x\" ",
    "100 ",
    "1K ",
    "text:\r\nline\r\n.\r\n ",
    "keep ",
    "discard ",
    "stop ",
    "fileinto ",
    "redirect ",
    "reject ",
    "vacation ",
    "set ",
    "setflag ",
    "addflag ",
    "removeflag ",
    "addheader ",
    "deleteheader ",
    "error ",
    "return ",
    "include ",
    "global ",
    "\"x\" ",
    "\"a@b.c\" ",
    "/* c */ ",
    "# c\n",
    "\"${hex:41}\" ",
    "\"${unicode:263a}\" ",
];

fn script() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PIECES), 0..60).prop_map(|v| v.concat())
}

fn message() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..400),
        prop::collection::vec(
            prop::sample::select(vec![
                "Subject: a\r\n",
                "From: x@y\r\n",
                "To: <a@b>, c\r\n",
                "Date: Mon, 1 Jan 2024 00:00:00 +0000\r\n",
                "X: =?utf-8?q?=C3?=\r\n",
                " folded\r\n",
                "\r\n",
                "Content-Type: multipart/mixed; boundary=b\r\n",
                "--b\r\n",
                "--b--\r\n",
                "body text\r\n",
                "Received: x; bad date\r\n",
                "Message-ID: <1@x>\r\n",
            ]),
            0..30,
        )
        .prop_map(|v| v.concat().into_bytes()),
    ]
}

const HEADER: &str = "require [\"fileinto\", \"variables\", \"imap4flags\", \"editheader\", \"relational\", \"regex\", \"body\", \"date\", \"index\", \"envelope\", \"subaddress\", \"vacation-seconds\", \"duplicate\", \"include\", \"mailbox\", \"copy\", \"environment\", \"spamtestplus\", \"virustest\", \"comparator-i;ascii-numeric\"];\n";

/// Valid tests and actions, so that generated scripts compile and their runs reach
/// every part of the interpreter.
const TESTS: &[&str] = &[
    "header :matches \"subject\" \"*?*\"",
    "header :regex \"subject\" \"(.)(.*)\"",
    "address :detail \"to\" \"*\"",
    "address :count \"ge\" :comparator \"i;ascii-numeric\" [\"to\", \"cc\"] \"1\"",
    "envelope :user \"from\" \"${1}\"",
    "exists \"x\"",
    "size :over 10",
    "string :matches \"${0}${a}\" \"*\"",
    "hasflag :contains \"s\"",
    "body :text :contains \"a\"",
    "body :raw :matches \"*\"",
    "body :content \"text\" :contains \"b\"",
    "date :value \"ge\" :index 1 :last \"date\" \"year\" \"2000\"",
    "currentdate :zone \"-1200\" \"std11\" \"*\"",
    "duplicate :uniqueid \"${a}\"",
    "environment \"domain\" \"x\"",
    "spamtest :percent :value \"gt\" \"5\"",
    "virustest :count \"eq\" \"0\"",
    "mailboxexists \"${a}\"",
    "header :index 2 [\"x\", \"subject\"] \"a\"",
    "true",
    "not false",
];
const ACTIONS: &[&str] = &[
    "set \"a\" \"${a}${1}${0}\";",
    "set :upper :length \"b\" \"${a}\";",
    "addflag \"s ${a}\";",
    "removeflag \"s\";",
    "addheader \"x\" \"${a}\";",
    "deleteheader :index 1 :regex \"x\" \".\";",
    "deleteheader \"subject\";",
    "fileinto :copy :flags \"${b}\" \"m${b}\";",
    "redirect :copy \"a@b.c\";",
    "keep;",
    "discard;",
    "vacation :seconds 5 :subject \"${a}\" \"r\";",
    "include :optional \"x\";",
    "stop;",
];

fn valid_script() -> impl Strategy<Value = String> {
    prop::collection::vec(
        (
            prop::sample::select(TESTS),
            prop::sample::select(TESTS),
            prop::collection::vec(prop::sample::select(ACTIONS), 1..4),
        ),
        1..12,
    )
    .prop_map(|rules| {
        let mut s = HEADER.to_string();
        for (a, b, actions) in rules {
            s.push_str(&format!(
                "if anyof({a}, not {b}) {{ {} }}\n",
                actions.concat()
            ));
        }
        s
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    /// Random scripts from plausible pieces compile or fail cleanly, and run without
    /// panicking on random messages.
    #[test]
    fn random_scripts_never_panic(src in script(), msg in message()) {
        let lim = Limits::default();
        if let Ok(s) = sieve::compile(&src, &lim) {
            let _ = sieve::run(&s, &msg, &context(), &TestHost::default(), &lim);
            let _ = sieve::run(&s, MSG.as_bytes(), &context(), &TestHost::default(), &lim);
        }
    }

    /// Generated valid scripts run without panicking on random messages.
    #[test]
    fn valid_scripts_never_panic(src in valid_script(), msg in message()) {
        let lim = Limits::default();
        let s = sieve::compile(&src, &lim).map_err(|e| TestCaseError::fail(format!("{e}\n{src}")))?;
        let _ = sieve::run(&s, &msg, &context(), &TestHost::default(), &lim);
        let _ = sieve::run(&s, MSG.as_bytes(), &context(), &TestHost::default(), &lim);
    }

    /// Arbitrary bytes as a script.
    #[test]
    fn arbitrary_source_never_panics(src in "\\PC{0,200}") {
        let _ = sieve::compile(&src, &Limits::default());
    }

    /// Mutations of a valid script.
    #[test]
    fn mutated_scripts_never_panic(cut in 0usize..400, insert in "[ -~]{0,8}", msg in message()) {
        let base = include_str!("hostile_base.sieve");
        let at = cut.min(base.len());
        let at = (0..=at).rev().find(|&i| base.is_char_boundary(i)).unwrap_or(0);
        let src = format!("{}{}{}", &base[..at], insert, &base[at..]);
        let lim = Limits::default();
        if let Ok(s) = sieve::compile(&src, &lim) {
            let _ = sieve::run(&s, &msg, &context(), &TestHost::default(), &lim);
        }
    }
}

/// The vacation helpers on arbitrary messages.
#[test]
fn vacation_helpers_on_junk() {
    let v = sieve::Vacation {
        period_seconds: 1,
        subject: None,
        from: None,
        addresses: vec![],
        mime: false,
        handle: String::new(),
        reason: String::new(),
    };
    for m in [
        &b""[..],
        b"\xff\xfe: \r\n\r\n",
        b"Subject: =?x?q?\r\n",
        b"To:\r\n\r\n",
    ] {
        let _ = sieve::vacation::check(m, &context().envelope, &[]);
        let _ = sieve::vacation::compose(&v, m, "a@b", "c@d", "d", "date", "u");
    }
}

/// RFC 5228 2.7.1 `:matches` must not backtrack exponentially.
#[test]
fn pathological_matches_is_fast() {
    let long = "a".repeat(60_000);
    let msg = format!("Subject: {long}\r\n\r\n");
    let src = "if header :matches \"subject\" \"*a*a*a*a*a*a*b\" { discard; }";
    let start = Instant::now();
    let o = run_on(src, &msg);
    assert_eq!(o.actions, vec![keep()]);
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "took {:?}",
        start.elapsed()
    );
    let src =
        "require \"variables\"; if header :matches \"subject\" \"*a*a*a*a*a*a*b\" { discard; }";
    let start = Instant::now();
    run_on(src, &msg);
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "took {:?}",
        start.elapsed()
    );
}

/// A hostile regex is bounded by the regex crate (linear time) and our size limit.
#[test]
fn hostile_regex() {
    let e = sieve::compile(
        "require \"regex\"; if header :regex \"s\" \"(a{1000}){1000}\" { }",
        &Limits::default(),
    );
    assert!(e.is_err());
    let long = "a".repeat(60_000);
    let msg = format!("Subject: {long}\r\n\r\n");
    let start = Instant::now();
    run_on(
        "require \"regex\"; if header :regex \"subject\" \"(a|aa)*b\" { discard; }",
        &msg,
    );
    assert!(start.elapsed() < Duration::from_secs(3));
}

/// Loops cannot exist, but long scripts are bounded by instructions_max.
#[test]
fn instruction_bound_counts_tests() {
    let lim = Limits {
        instructions_max: 100,
        ..Limits::default()
    };
    let test = format!("anyof({}true)", "false, ".repeat(200));
    let s = sieve::compile(&format!("if {test} {{ }}"), &lim).unwrap();
    assert!(sieve::run(&s, MSG.as_bytes(), &context(), &TestHost::default(), &lim).is_err());
}

/// A deeply nested script within the limit runs; past it, compiling fails.
#[test]
fn nesting() {
    let ok = format!("if {}true {{ }}", "not ".repeat(30));
    run_on(&ok, MSG);
    let too_deep = format!("if {}true {{ }}", "not ".repeat(40));
    assert!(sieve::compile(&too_deep, &Limits::default()).is_err());
    let blocks = format!("{}{}", "if true { ".repeat(31), "} ".repeat(31));
    run_on(&blocks, MSG);
}

/// Strings full of "${" are scanned in linear time, with or without variables.
#[test]
fn many_dollar_braces_compile_fast() {
    let junk = "${".repeat(20_000);
    let start = Instant::now();
    for req in ["", "require [\"variables\", \"encoded-character\"];"] {
        let src = format!(
            "{req} if header :is \"subject\" \"{junk}\" {{ }} if header :is \"x\" \"${{hex:{}\" {{ }}",
            "0 ".repeat(8_000)
        );
        sieve::compile(&src, &Limits::default()).unwrap();
    }
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "took {:?}",
        start.elapsed()
    );
}

/// Expanding many references to a big variable is capped.
#[test]
fn expansion_is_capped() {
    let refs = "${a}".repeat(10_000);
    let src = format!(
        "require [\"variables\", \"fileinto\"]; set \"a\" \"{}\"; if string :is \"{refs}\" \"\" {{ }} keep;",
        "x".repeat(4000)
    );
    let o = run_on(&src, MSG);
    assert_eq!(o.actions, vec![keep()]);
}
