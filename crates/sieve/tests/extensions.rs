//! The extensions, one section each, with the RFCs' examples where they give them.

mod common;
use common::*;
use sieve::{Action, Context, Limits, Location, Vacation};

// ---- reject, ereject: RFC 5429 ----

// RFC 5429 2.1, 2.2, 2.4
#[test]
fn reject() {
    let o = run("require \"reject\"; reject \"go away\";");
    assert_eq!(
        o,
        vec![Action::Reject {
            reason: "go away".into(),
            extended: false
        }]
    );
    let o = run("require \"ereject\"; ereject \"no\";");
    assert_eq!(
        o,
        vec![Action::Reject {
            reason: "no".into(),
            extended: true
        }]
    );
    assert!(compile("require \"reject\"; if true { reject \"x\"; }").may_reject());
    assert!(!compile("keep;").may_reject());
    compile_err("reject \"x\";");
    let host = TestHost::default();
    // Only one reject; not with vacation; not with delivering actions.
    for src in [
        "require [\"reject\", \"ereject\"]; reject \"a\"; ereject \"b\";",
        "require [\"reject\", \"vacation\"]; vacation \"away\"; reject \"a\";",
        "require [\"reject\", \"vacation\"]; reject \"a\"; vacation \"away\";",
        "require \"reject\"; keep; reject \"a\";",
        "require \"reject\"; reject \"a\"; redirect \"x@y.z\";",
        "require [\"reject\", \"fileinto\"]; reject \"a\"; fileinto \"x\";",
    ] {
        assert!(try_run_on(src, MSG, &context(), &host).is_err(), "{src}");
    }
    // discard is fine.
    assert_eq!(run("require \"reject\"; discard; reject \"a\";").len(), 1);
}

// ---- fileinto, copy, mailbox: RFC 5228 4.1, RFC 3894, RFC 5490 ----

// RFC 3894 3
#[test]
fn copy() {
    let o =
        run("require [\"fileinto\", \"copy\"]; fileinto :copy \"a\"; redirect :copy \"x@y.z\";");
    assert_eq!(
        o,
        vec![
            fileinto("a"),
            Action::Redirect {
                address: "x@y.z".into()
            },
            keep()
        ]
    );
    compile_err("require \"fileinto\"; fileinto :copy \"a\";");
}

// RFC 5490 3.1, 3.2
#[test]
fn mailbox() {
    let host = TestHost {
        mailboxes: vec!["Lists".into()],
        ..TestHost::default()
    };
    let src = "require [\"fileinto\", \"mailbox\"];
        if mailboxexists \"Lists\" { fileinto :create \"Lists/a\"; }
        if mailboxexists [\"Lists\", \"Nope\"] { fileinto \"no\"; }";
    let o = try_run_on(src, MSG, &context(), &host).unwrap();
    assert_eq!(
        o.actions,
        vec![Action::FileInto {
            mailbox: "Lists/a".into(),
            flags: vec![],
            create: true
        }]
    );
    compile_err("require \"fileinto\"; fileinto :create \"a\";");
}

// ---- envelope: RFC 5228 5.4 ----

#[test]
fn envelope() {
    let r = ", \"envelope\"";
    assert!(is_true(
        "envelope :is \"from\" \"coyote@desert.example.org\"",
        r
    ));
    assert!(is_true(
        "envelope :domain :is \"to\" \"acme.example.com\"",
        r
    ));
    assert!(is_true(
        "envelope :is \"orig_to\" \"rr@acme.example.com\"",
        r
    ));
    assert!(!is_true("envelope :is \"auth\" \"\"", r));
    compile_err("require \"envelope\"; if envelope :is \"bcc\" \"x\" { }");
    // The null reverse path is the empty string.
    let mut ctx = context();
    ctx.envelope.from = String::new();
    let src = "require [\"envelope\", \"fileinto\"]; if envelope :is \"from\" \"\" { fileinto \"null\"; }";
    let o = try_run_on(src, MSG, &ctx, &TestHost::default()).unwrap();
    assert_eq!(o.actions, vec![fileinto("null")]);
}

// ---- subaddress: RFC 5233 ----

// RFC 5233 4 (its example)
#[test]
fn subaddress() {
    let r = ", \"envelope\", \"subaddress\"";
    assert!(is_true("envelope :user \"to\" \"roadrunner\"", r));
    assert!(is_true("envelope :detail \"to\" \"sieve\"", r));
    assert!(is_true("address :detail \"to\" \"carrots\"", r));
    assert!(!is_true("address :detail :matches \"from\" \"*\"", r));
    compile_err("require \"envelope\"; if envelope :user \"to\" \"x\" { }");
}

// ---- encoded-character: RFC 5228 2.4.2.4 ----

#[test]
fn encoded_character() {
    // RFC 5228 2.4.2.4's example, with a subject of "$$$".
    let m = MSG.replace("Subject: I have a present for you", "Subject: $$$");
    let src = "require \"encoded-character\"; if header :contains \"Subject\" \"$${hex:24 24}\" { discard; }";
    assert_eq!(run_on(src, &m).actions, vec![]);
    // Without the require, the sequence is literal.
    let src = "if header :contains \"Subject\" \"$${hex:24 24}\" { discard; }";
    assert_eq!(run_on(src, &m).actions, vec![keep()]);
    compile_err("require \"encoded-character\"; keep :flags \"${unicode:DF01}\";");
}

// ---- variables: RFC 5229 ----

#[test]
fn variables() {
    // RFC 5229 3.2's examples.
    let src = r#"require ["fileinto", "variables"];
        if header :matches "Subject" "I * a *" {
            fileinto "INBOX.lists.${1}.${2}"; stop;
        }"#;
    assert_eq!(run(src), vec![fileinto("INBOX.lists.have.present for you")]);
    let src = r#"require ["fileinto", "variables"];
        if address :matches ["To", "Cc"] ["bugs@**.com", "roadrunner@**.com"] {
            fileinto "INBOX.business.${2}.${1}.${0}"; stop;
        }"#;
    assert_eq!(
        run(src),
        vec![fileinto(
            "INBOX.business.acme.example..roadrunner@acme.example.com"
        )]
    );
    // RFC 5229 4: set, references, case-insensitive names.
    let src = r#"require ["fileinto", "variables"];
        set "honorific" "Mr"; set "last_name" "Coyote";
        set "vacation" text:
Dear ${HONORIFIC} ${last_name},
.
;
        if string :matches "${vacation}" "Dear Mr Coyote,?*" { fileinto "ok"; }
        if string :is "${unset}" "" { fileinto "empty"; }"#;
    assert_eq!(run(src), vec![fileinto("ok"), fileinto("empty")]);
    // RFC 5229 4.1: modifiers, applied by precedence.
    let src = r#"require ["fileinto", "variables"];
        set :upperfirst :lower "a" "juMBlEd lETteRS";
        set :length "b" "${a}";
        set :quotewildcard "c" "a*b";
        fileinto "${a}|${b}|${c}";"#;
    assert_eq!(run(src), vec![fileinto("Jumbled letters|15|a\\*b")]);
    compile_err("require \"variables\"; set :lower :upper \"a\" \"b\";");
    compile_err("require \"variables\"; set \"1\" \"b\";");
    compile_err("require \"variables\"; set \"a.b\" \"b\";");
    compile_err("require [\"variables\", \"fileinto\"]; fileinto \"${ns.x}\";");
    compile_err("set \"a\" \"b\";");
    // RFC 5229 5: the string test; :count skips empty strings.
    let src = r#"require ["fileinto", "variables", "relational"];
        set "e" "";
        if string :count "eq" ["${e}", "x", "y"] "2" { fileinto "two"; }"#;
    assert_eq!(run(src), vec![fileinto("two")]);
    // Without "variables" a ${...} is literal.
    assert_eq!(
        run("require \"fileinto\"; fileinto \"${x}\";"),
        vec![fileinto("${x}")]
    );
}

#[test]
fn variable_limits() {
    let lim = Limits {
        variable_bytes_max: 4,
        variables_max: 2,
        ..Limits::default()
    };
    let s = sieve::compile(
        "require [\"variables\", \"fileinto\"]; set \"a\" \"abcdefgh\"; fileinto \"${a}\";",
        &lim,
    )
    .unwrap();
    let o = sieve::run(&s, MSG.as_bytes(), &context(), &TestHost::default(), &lim).unwrap();
    assert_eq!(o.actions, vec![fileinto("abcd")]);
    let s = sieve::compile("require \"variables\"; set \"a\" \"1\"; set \"b\" \"2\"; set \"a\" \"3\"; set \"c\" \"4\";", &lim).unwrap();
    let e = sieve::run(&s, MSG.as_bytes(), &context(), &TestHost::default(), &lim).unwrap_err();
    assert!(e.message.contains("sieve_variables_max"));
}

// ---- vacation: RFC 5230, RFC 6131 ----

#[test]
fn vacation() {
    let src = r#"require "vacation";
        if header :contains "subject" "cyrus" {
            vacation "I'm out -- send mail to cyrus-bugs";
        } else {
            vacation :days 23 :addresses ["tjs@example.edu", "ts4z@landru.example.edu"]
                :subject "gone" :from "me@example.edu" :mime "Content-Type: text/plain\r\n\r\nI'm out";
        }"#;
    let a = run(src);
    assert_eq!(a.len(), 2);
    let Action::Vacation(v) = &a[0] else {
        panic!("{a:?}")
    };
    assert_eq!(v.period_seconds, 23 * 86400);
    assert_eq!(v.subject.as_deref(), Some("gone"));
    assert_eq!(v.from.as_deref(), Some("me@example.edu"));
    assert_eq!(
        v.addresses,
        vec!["tjs@example.edu", "ts4z@landru.example.edu"]
    );
    assert!(v.mime);
    assert!(v.handle.starts_with("vacation-"));
    assert_eq!(a[1], keep());
    assert!(compile(src).may_reply());
    // RFC 5230 4.1: :days below 1 is 1; default 7; our cap 90.
    let days = |src: &str| match &run(src)[0] {
        Action::Vacation(Vacation { period_seconds, .. }) => *period_seconds,
        other => panic!("{other:?}"),
    };
    assert_eq!(days("require \"vacation\"; vacation :days 0 \"x\";"), 86400);
    assert_eq!(days("require \"vacation\"; vacation \"x\";"), 7 * 86400);
    assert_eq!(
        days("require \"vacation\"; vacation :days 1000 \"x\";"),
        90 * 86400
    );
    // RFC 6131 2
    assert_eq!(
        days("require \"vacation-seconds\"; vacation :seconds 1800 \"x\";"),
        1800
    );
    assert_eq!(
        days("require \"vacation-seconds\"; vacation :seconds 0 \"x\";"),
        0
    );
    compile_err("require \"vacation\"; vacation :seconds 10 \"x\";");
    compile_err("require \"vacation-seconds\"; vacation :days 1 :seconds 10 \"x\";");
    // RFC 5230 4.2: the same arguments give the same handle; :handle names it.
    let handle = |src: &str| match &run(src)[0] {
        Action::Vacation(v) => v.handle.clone(),
        other => panic!("{other:?}"),
    };
    let h1 = handle("require \"vacation\"; vacation :subject \"s\" \"x\";");
    assert_eq!(
        h1,
        handle("require \"vacation\"; vacation :days 3 :subject \"s\" \"x\";")
    );
    assert_ne!(
        h1,
        handle("require \"vacation\"; vacation :subject \"t\" \"x\";")
    );
    assert_eq!(
        handle("require \"vacation\"; vacation :handle \"ran-away\" \"x\";"),
        "ran-away"
    );
    // One vacation per run (sieve_vacation_max).
    let host = TestHost::default();
    assert!(
        try_run_on(
            "require \"vacation\"; vacation \"a\"; vacation \"b\";",
            MSG,
            &context(),
            &host
        )
        .is_err()
    );
}

// ---- relational and i;ascii-numeric: RFC 5231, RFC 4790 9.1 ----

#[test]
fn relational() {
    let r = ", \"relational\", \"comparator-i;ascii-numeric\"";
    // RFC 5231 6's examples, on its message.
    let m = "Received: ...\r\nReceived: ...\r\nSubject: example\r\nTo: foo@example.com, baz@example.com\r\nCC: qux@example.com\r\n\r\n";
    let t = |test: &str| {
        let src = format!("require [\"fileinto\"{r}]; if {test} {{ fileinto \"yes\"; }}");
        run_on(&src, m).actions.contains(&fileinto("yes"))
    };
    assert!(t(
        "header :count \"ge\" :comparator \"i;ascii-numeric\" [\"received\"] [\"2\"]"
    ));
    assert!(t(
        "header :count \"ge\" :comparator \"i;ascii-numeric\" [\"received\", \"subject\"] [\"3\"]"
    ));
    assert!(!t(
        "header :count \"ge\" :comparator \"i;ascii-numeric\" [\"to\", \"cc\"] [\"3\"]"
    ));
    assert!(t(
        "address :count \"ge\" :comparator \"i;ascii-numeric\" [\"to\", \"cc\"] [\"3\"]"
    ));
    assert!(t("header :value \"lt\" \"subject\" \"f\""));
    assert!(t(
        "header :value \"gt\" :comparator \"i;octet\" \"subject\" \"Z\""
    ));
    assert!(is_true("header :value \"ne\" \"x-caffeine\" \"x\"", r));
    // RFC 4790 9.1: non-digits are positive infinity.
    let m2 = "X-N: 0042\r\nX-W: abc\r\n\r\n";
    let t2 = |test: &str| {
        let src = format!("require [\"fileinto\"{r}]; if {test} {{ fileinto \"yes\"; }}");
        run_on(&src, m2).actions.contains(&fileinto("yes"))
    };
    assert!(t2(
        "header :comparator \"i;ascii-numeric\" :is \"x-n\" \"42\""
    ));
    assert!(t2(
        "header :comparator \"i;ascii-numeric\" :value \"gt\" \"x-n\" \"9\""
    ));
    assert!(t2(
        "header :comparator \"i;ascii-numeric\" :value \"gt\" \"x-w\" \"99999999999999999999\""
    ));
    compile_err(
        "require [\"comparator-i;ascii-numeric\"]; if header :comparator \"i;ascii-numeric\" :contains \"a\" \"1\" { }",
    );
    compile_err("require [\"relational\"]; if header :value \"gx\" \"a\" \"1\" { }");
}

// ---- imap4flags: RFC 5232 ----

#[test]
fn imap4flags() {
    // RFC 5232 7's example (shortened).
    let src = r#"require ["imap4flags", "fileinto"];
        if header :contains "from" "coyote@desert.example.org" {
            setflag "\\Deleted";
            addflag "\\Answered";
            addflag "\\deleted Junk";
        }
        if hasflag :contains "junk" { fileinto "junk-ish"; }
        if hasflag "\\ANSWERED" { removeflag "\\Answered"; }
        keep;"#;
    let a = run(src);
    assert_eq!(
        a,
        vec![
            Action::FileInto {
                mailbox: "junk-ish".into(),
                flags: vec!["\\Deleted".into(), "\\Answered".into(), "Junk".into()],
                create: false
            },
            Action::Keep {
                flags: vec!["\\Deleted".into(), "Junk".into()]
            },
        ]
    );
    // :flags replaces the internal variable for that action; the implicit keep uses it.
    let a = run(r#"require ["imap4flags", "fileinto"]; addflag "\\Seen"; fileinto :flags "\\Flagged" "a"; fileinto :copy "b";"#.replace(":copy ", "").as_str());
    assert_eq!(
        a[0],
        Action::FileInto {
            mailbox: "a".into(),
            flags: vec!["\\Flagged".into()],
            create: false
        }
    );
    assert_eq!(
        a[1],
        Action::FileInto {
            mailbox: "b".into(),
            flags: vec!["\\Seen".into()],
            create: false
        }
    );
    let a = run(r#"require "imap4flags"; addflag ["a b", "B", "c"];"#);
    assert_eq!(
        a,
        vec![Action::Keep {
            flags: vec!["a".into(), "b".into(), "c".into()]
        }]
    );
    // RFC 5232 3: flags held in a variable.
    let src = r#"require ["imap4flags", "variables", "fileinto"];
        setflag "f" "x"; addflag "f" "y x"; removeflag "f" "X";
        if hasflag "f" "y" { fileinto "${f}"; }
        if hasflag :count "eq" "f" "1" { fileinto "one"; }"#
        .replace(":count \"eq\" ", "");
    let a = run(&src);
    assert_eq!(a[0], fileinto("y"));
    compile_err("addflag \"x\";");
    compile_err("require \"fileinto\"; fileinto :flags \"x\" \"a\";");
    // RFC 5232 3: when keep/fileinto repeat and duplicates are merged, "the last flag list
    // value MUST win" (Pigeonhole's imap4flags/execute.svtest).
    let a = run(r#"require ["imap4flags", "fileinto"]; setflag "IMPLICIT";
        fileinto :flags "\\Seen \\Draft" "Junk"; fileinto :flags "NONSENSE" "Junk";
        keep; keep :flags "\\Seen";
        fileinto :flags "\\Seen" "Nonsense"; fileinto "Nonsense";"#);
    assert_eq!(
        a,
        vec![
            Action::FileInto {
                mailbox: "Junk".into(),
                flags: vec!["NONSENSE".into()],
                create: false
            },
            Action::Keep {
                flags: vec!["\\Seen".into()]
            },
            Action::FileInto {
                mailbox: "Nonsense".into(),
                flags: vec!["IMPLICIT".into()],
                create: false
            },
        ]
    );
}

// ---- body: RFC 5173 ----

const MULTIPART: &str = "From: a@b.c\r\nTo: d@e.f\r\nSubject: m\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"XX\"\r\n\r\npreamble\r\n--XX\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nMeet me at the caf=C3=A9 at noon.\r\n--XX\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\nU0VDUkVUIGJpbmFyeQ==\r\n--XX--\r\n";

#[test]
fn body() {
    let t = |test: &str, msg: &str| {
        let src = format!("require [\"fileinto\", \"body\"]; if {test} {{ fileinto \"yes\"; }}");
        run_on(&src, msg).actions.contains(&fileinto("yes"))
    };
    // RFC 5173 5: :text decodes text parts.
    assert!(t("body :contains \"café\"", MULTIPART));
    // RFC 5173 5.3 ("best effort at extracting UTF-8 encoded text"): HTML without its
    // markup; a part whose Content-Type is not one type/subtype, or whose
    // Content-Transfer-Encoding is unknown (RFC 2045 6.4: application/octet-stream), is
    // no text.
    let odd = "From: a@b.c\r\nContent-Type: multipart/mixed; boundary=X\r\n\r\n--X\r\nContent-Type: text/html\r\n\r\n<html><body>Say Hello</body></html>\r\n--X\r\nContent-Type: text/plain/stupid\r\n\r\nStupid text\r\n--X\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: multipart/related\r\n\r\nBroken text\r\n--X--\r\n";
    assert!(t("body :text :contains \"Say Hello\"", odd));
    assert!(!t("body :text :contains \"<body>\"", odd));
    assert!(t("body :content \"text/html\" :contains \"<body>\"", odd));
    assert!(!t("body :text :contains \"Stupid\"", odd));
    assert!(!t("body :text :contains \"Broken\"", odd));
    // i;ascii-casemap folds ASCII only.
    assert!(!t("body :text :contains \"CAFÉ\"", MULTIPART));
    assert!(!t("body :text :contains \"SECRET\"", MULTIPART));
    assert!(t("body :raw :contains \"caf=C3=A9\"", MULTIPART));
    assert!(t(
        "body :content \"application\" :contains \"SECRET\"",
        MULTIPART
    ));
    assert!(!t(
        "body :content \"text/html\" :contains \"café\"",
        MULTIPART
    ));
    assert!(t(
        "body :content \"text/plain\" :contains \"café\"",
        MULTIPART
    ));
    assert!(t("body :contains \"anvil\"", MSG));
    compile_err("if body :contains \"x\" { }");
    // Bounded by body_bytes_max.
    let lim = Limits {
        body_bytes_max: 10,
        ..Limits::default()
    };
    let s = sieve::compile(
        "require [\"body\", \"fileinto\"]; if body :raw :contains \"anvil\" { fileinto \"yes\"; }",
        &lim,
    )
    .unwrap();
    let o = sieve::run(&s, MSG.as_bytes(), &context(), &TestHost::default(), &lim).unwrap();
    assert_eq!(o.actions, vec![keep()]);
}

// ---- date and index: RFC 5260 ----

#[test]
fn date() {
    let r = ", \"date\", \"relational\", \"index\"";
    // Date: Tue, 1 Apr 1997 09:06:31 -0800
    assert!(is_true("date :originalzone \"date\" \"hour\" \"09\"", r));
    assert!(is_true("date :zone \"+0000\" \"date\" \"hour\" \"17\"", r));
    // Local zone is +0100 in the test context.
    assert!(is_true("date \"date\" \"time\" \"18:06:31\"", r));
    assert!(is_true("date :originalzone \"date\" \"zone\" \"-0800\"", r));
    assert!(is_true("date :originalzone \"date\" \"weekday\" \"2\"", r));
    assert!(is_true(
        "date :originalzone \"date\" \"date\" \"1997-04-01\"",
        r
    ));
    assert!(is_true(
        "date :originalzone \"date\" \"julian\" \"50539\"",
        r
    ));
    assert!(is_true(
        "date :originalzone \"date\" \"iso8601\" \"1997-04-01T09:06:31-08:00\"",
        r
    ));
    assert!(is_true(
        "date :originalzone \"date\" \"std11\" \"Tue, 01 Apr 1997 09:06:31 -0800\"",
        r
    ));
    assert!(is_true(
        "date :value \"ge\" :originalzone \"date\" \"hour\" \"09\"",
        r
    ));
    // RFC 5260 4: the date after the semicolon of Received.
    assert!(is_true(
        "date :zone \"+0000\" \"received\" \"year\" \"2024\"",
        r
    ));
    assert!(!is_true("date \"subject\" \"year\" \"2024\"", r));
    assert!(is_true("date :count \"eq\" \"subject\" \"year\" \"0\"", r));
    // RFC 5260 5: currentdate (now = 2023-11-14T22:13:20Z, local +0100).
    assert!(is_true("currentdate \"date\" \"2023-11-14\"", r));
    assert!(is_true("currentdate \"hour\" \"23\"", r));
    assert!(is_true(
        "currentdate :zone \"+0200\" \"date\" \"2023-11-15\"",
        r
    ));
    assert!(is_true("currentdate :value \"ge\" \"year\" \"2023\"", r));
    compile_err("require \"date\"; if date :zone \"0100\" \"date\" \"year\" \"x\" { }");
    compile_err("require \"date\"; if date \"date\" \"fortnight\" \"x\" { }");
    compile_err("require \"date\"; if currentdate :originalzone \"year\" \"x\" { }");
    compile_err(
        "require \"date\"; if date :zone \"+0100\" :originalzone \"date\" \"year\" \"x\" { }",
    );
}

// RFC 5260 6
#[test]
fn index() {
    let m = "Received: from a by b; Mon, 1 Jan 2024 00:00:00 +0000\r\nReceived: from c by d; Sun, 31 Dec 2023 00:00:00 +0000\r\nX-A: 1\r\nX-B: 2\r\nX-A: 3\r\n\r\n";
    let t = |test: &str| {
        let src = format!(
            "require [\"fileinto\", \"index\", \"date\", \"relational\"]; if {test} {{ fileinto \"yes\"; }}"
        );
        run_on(&src, m).actions.contains(&fileinto("yes"))
    };
    assert!(t("header :index 2 \"x-a\" \"3\""));
    assert!(t("header :index 1 :last \"x-a\" \"3\""));
    assert!(!t("header :index 3 \"x-a\" \"3\""));
    // All named fields counted in the order of the list.
    assert!(t("header :index 3 [\"x-a\", \"x-b\"] \"2\""));
    assert!(t(
        "date :index 2 :zone \"+0000\" \"received\" \"year\" \"2023\""
    ));
    assert!(t(
        "date :value \"gt\" :index 2 :zone \"-0500\" \"received\" \"iso8601\" \"2007-02-26T09:00:00-05:00\""
    ));
    compile_err("require \"index\"; if header :last \"x\" \"y\" { }");
    compile_err("if header :index 1 \"x\" \"y\" { }");
    compile_err("require \"index\"; if header :index 0 \"x\" \"y\" { }");
}

// ---- include: RFC 6609 ----

fn include_host() -> TestHost {
    let mut h = TestHost::default();
    let mut add = |loc, name: &str, src: &str| {
        h.scripts.insert((loc, name.to_string()), src.to_string());
    };
    add(
        Location::Personal,
        "spam",
        "require [\"fileinto\"]; if header :contains \"subject\" \"present\" { fileinto \"spam\"; stop; }",
    );
    add(
        Location::Global,
        "lists",
        "require [\"fileinto\", \"include\"]; fileinto \"lists\"; return; fileinto \"never\";",
    );
    add(
        Location::Personal,
        "loop",
        "require \"include\"; include \"loop\";",
    );
    add(
        Location::Personal,
        "setter",
        "require [\"include\", \"variables\"]; global \"who\"; set \"who\" \"coyote\";",
    );
    add(
        Location::Personal,
        "once",
        "require [\"fileinto\"]; fileinto \"once\";",
    );
    h
}

#[test]
fn include() {
    let host = include_host();
    let ctx = context();
    // RFC 6609 3.2: stop in an included script ends everything.
    let o = try_run_on(
        "require [\"include\", \"fileinto\"]; include \"spam\"; fileinto \"after\";",
        MSG,
        &ctx,
        &host,
    )
    .unwrap();
    assert_eq!(o.actions, vec![fileinto("spam")]);
    // return ends only the included script.
    let o = try_run_on(
        "require [\"include\", \"fileinto\"]; include :global \"lists\"; fileinto \"after\";",
        MSG,
        &ctx,
        &host,
    )
    .unwrap();
    assert_eq!(o.actions, vec![fileinto("lists"), fileinto("after")]);
    // :once
    let o = try_run_on(
        "require [\"include\"]; include :once \"once\"; include :once \"once\";",
        MSG,
        &ctx,
        &host,
    )
    .unwrap();
    assert_eq!(o.actions, vec![fileinto("once")]);
    // Missing: an error unless :optional.
    assert!(try_run_on("require \"include\"; include \"nope\";", MSG, &ctx, &host).is_err());
    let o = try_run_on(
        "require \"include\"; include :optional \"nope\";",
        MSG,
        &ctx,
        &host,
    )
    .unwrap();
    assert_eq!(o.actions, vec![keep()]);
    // Recursion is an error.
    assert!(try_run_on("require \"include\"; include \"loop\";", MSG, &ctx, &host).is_err());
    // RFC 6609 3.5: global variables.
    let src = "require [\"include\", \"variables\", \"fileinto\"]; global \"who\"; include \"setter\"; fileinto \"${who}\"; fileinto \"${global.who}\";";
    let o = try_run_on(src, MSG, &ctx, &host).unwrap();
    assert_eq!(o.actions, vec![fileinto("coyote")]);
    compile_err("require \"include\"; include \"a/b\";");
    compile_err("require \"include\"; include :personal :global \"a\";");
    compile_err("return;");
    compile_err("require \"include\"; global \"x\";");
}

#[test]
fn include_depth() {
    let mut host = TestHost::default();
    for i in 0..10 {
        host.scripts.insert(
            (Location::Personal, format!("s{i}")),
            format!("require \"include\"; include \"s{}\";", i + 1),
        );
    }
    host.scripts
        .insert((Location::Personal, "s10".into()), "discard;".into());
    let e = try_run_on(
        "require \"include\"; include \"s0\";",
        MSG,
        &context(),
        &host,
    )
    .unwrap_err();
    assert!(e.message.contains("sieve_include_depth_max"), "{e}");
}

// ---- editheader: RFC 5293 ----

#[test]
fn editheader() {
    let src = r#"require ["editheader", "fileinto"];
        addheader "X-Sieve" "seen";
        addheader :last "X-Last" "Grüße";
        deleteheader "subject";
        deleteheader :index 1 "x-caffeine";
        if exists "x-sieve" { fileinto "edited"; }
        if not exists "subject" { fileinto "nosubject"; }"#;
    let o = run_on(src, MSG);
    assert_eq!(o.actions, vec![fileinto("edited"), fileinto("nosubject")]);
    let edited = String::from_utf8(o.edited_message.unwrap()).unwrap();
    assert!(edited.starts_with("X-Sieve: seen\r\nReturn-Path:"));
    assert!(!edited.contains("Subject:"));
    assert!(!edited.contains("X-Caffeine"));
    assert!(edited.contains("X-Last: =?utf-8?B?R3LDvMOfZQ==?=\r\n\r\nLook"));
    // RFC 5293 6: Received and Auto-Submitted are never deleted (silently).
    let o = run_on("require \"editheader\"; deleteheader \"Received\";", MSG);
    assert!(o.edited_message.is_none());
    // Deleting by value, with a match type (RFC 5293 5).
    let m = "X-A: one\r\nX-A: two\r\nX-A: three\r\n\r\n";
    let o = run_on(
        "require \"editheader\"; deleteheader :matches \"x-a\" \"t*\";",
        m,
    );
    assert_eq!(o.edited_message.unwrap(), b"X-A: one\r\n\r\n");
    let o = run_on(
        "require \"editheader\"; deleteheader :index 1 :last \"x-a\";",
        m,
    );
    assert_eq!(o.edited_message.unwrap(), b"X-A: one\r\nX-A: two\r\n\r\n");
    compile_err("require \"editheader\"; addheader \"bad name\" \"x\";");
    compile_err("require \"editheader\"; deleteheader :last \"x\";");
    compile_err("addheader \"x\" \"y\";");
    // Bounded by header_edits_max.
    let lim = Limits {
        header_edits_max: 2,
        ..Limits::default()
    };
    let s = sieve::compile("require \"editheader\"; addheader \"a\" \"1\"; addheader \"a\" \"1\"; addheader \"a\" \"1\";", &lim).unwrap();
    assert!(sieve::run(&s, MSG.as_bytes(), &context(), &TestHost::default(), &lim).is_err());
}

// RFC 5293 4: the value must be "unstructured" (or be encoded) and may be length-limited
// (not under 998): a NUL or a value over header_value_bytes_max is an error (a constant at
// compile time, a value built from variables at run time); line breaks are folding.
#[test]
fn addheader_values() {
    let eh = "require [\"editheader\", \"encoded-character\", \"variables\"];";
    compile_err(&format!("{eh} addheader \"X-A\" \"Woah${{hex:00}}!\";"));
    compile(&format!("{eh} addheader \"X-A\" \"Yeah${{hex:07}}!\";"));
    let s = format!("{eh} set \"v\" \"a${{hex:00}}\"; addheader \"X-A\" \"${{v}}\";");
    assert!(try_run_on(&s, MSG, &context(), &TestHost::default()).is_err());
    let long = "A".repeat(2049);
    compile_err(&format!("{eh} addheader \"X-A\" \"{long}\";"));
    let lim = Limits {
        header_value_bytes_max: 4096,
        ..Limits::default()
    };
    assert!(sieve::compile(&format!("{eh} addheader \"X-A\" \"{long}\";"), &lim).is_ok());
    let o = run_on(
        "require \"editheader\"; addheader \"X-A\" \"one\r\n  two\";",
        "Subject: x\r\n\r\nbody\r\n",
    );
    assert_eq!(
        o.edited_message.unwrap(),
        b"X-A: one two\r\nSubject: x\r\n\r\nbody\r\n"
    );
}

// ---- duplicate: RFC 7352 ----

#[test]
fn duplicate() {
    let host = TestHost {
        seen: vec![(String::new(), "<1234@desert.example.org>".into())],
        ..TestHost::default()
    };
    let src = "require [\"duplicate\", \"fileinto\"]; if duplicate { fileinto \"dup\"; }";
    let o = try_run_on(src, MSG, &context(), &host).unwrap();
    assert_eq!(o.actions, vec![fileinto("dup")]);
    assert!(o.duplicate_marks.is_empty());
    // Not seen: the id is to be recorded.
    let o = try_run_on(src, MSG, &context(), &TestHost::default()).unwrap();
    assert_eq!(o.actions, vec![keep()]);
    assert_eq!(
        o.duplicate_marks,
        vec![(String::new(), "<1234@desert.example.org>".into(), 7 * 86400)]
    );
    // RFC 7352 3.1-3.4: :handle, :header, :uniqueid, :seconds, :last.
    let src = "require [\"duplicate\", \"variables\"]; if duplicate :handle \"h\" :header \"subject\" :seconds 60 :last { }";
    let o = try_run_on(src, MSG, &context(), &TestHost::default()).unwrap();
    assert_eq!(
        o.duplicate_marks,
        vec![("h".into(), "I have a present for you".into(), 60)]
    );
    let src = "require [\"duplicate\", \"variables\"]; if header :matches \"subject\" \"* present *\" { if duplicate :uniqueid \"${1}\" { } }";
    let o = try_run_on(src, MSG, &context(), &TestHost::default()).unwrap();
    assert_eq!(o.duplicate_marks[0].1, "I have a");
    compile_err("require \"duplicate\"; if duplicate :header \"a\" :uniqueid \"b\" { }");
}

// ---- environment: RFC 5183 ----

#[test]
fn environment() {
    let r = ", \"environment\"";
    assert!(is_true("environment :is \"location\" \"MDA\"", r));
    assert!(is_true("environment :contains \"domain\" \"acme\"", r));
    assert!(!is_true("environment :matches \"nonesuch\" \"*\"", r));
    compile_err("if environment \"domain\" \"x\" { }");
}

// ---- ihave and error: RFC 5463 ----

#[test]
fn ihave() {
    let r = ", \"ihave\"";
    assert!(is_true("ihave \"fileinto\"", r));
    assert!(!is_true("ihave [\"fileinto\", \"nonesuch\"]", r));
    // RFC 5463 4: a block under ihave of a missing extension still compiles.
    let src = "require [\"ihave\", \"fileinto\"];
        if ihave \"x-unknown\" { x_unknown_command :weird 1 [\"a\"] { nested; } }
        elsif ihave \"copy\" { fileinto :copy \"b\"; }";
    assert_eq!(run(src), vec![fileinto("b"), keep()]);
    // RFC 5463 4: never "variables" or "encoded-character" (they change how strings are
    // read): the test fails, even when the extension is required already.
    assert!(!is_true("ihave \"variables\"", r));
    assert!(!is_true("ihave \"encoded-character\"", r));
    assert!(!is_true(
        "ihave \"variables\"",
        ", \"ihave\", \"variables\""
    ));
    let e = try_run_on(
        "require \"ihave\"; error \"custom failure\";",
        MSG,
        &context(),
        &TestHost::default(),
    )
    .unwrap_err();
    assert!(e.message.contains("custom failure"));
    compile_err("error \"x\";");
    // Outside that block the extension is still not required.
    compile_err("require [\"ihave\", \"fileinto\"]; if ihave \"copy\" { } fileinto :copy \"a\";");
}

// ---- spamtest, spamtestplus, virustest: RFC 5235 ----

#[test]
fn spam_and_virus() {
    let t = |ctx: &Context, test: &str| {
        let src = format!(
            "require [\"fileinto\", \"spamtestplus\", \"virustest\", \"relational\", \"comparator-i;ascii-numeric\"]; if {test} {{ fileinto \"yes\"; }}"
        );
        try_run_on(&src, MSG, ctx, &TestHost::default())
            .unwrap()
            .actions
            .contains(&fileinto("yes"))
    };
    let mut ctx = context();
    // Not tested: "0", count 0.
    assert!(t(
        &ctx,
        "spamtest :value \"eq\" :comparator \"i;ascii-numeric\" \"0\""
    ));
    assert!(t(&ctx, "spamtest :count \"eq\" \"0\""));
    assert!(t(&ctx, "virustest :value \"eq\" \"0\""));
    ctx.spam_score = Some(8);
    ctx.spam_percent = Some(75);
    ctx.virus_score = Some(5);
    // RFC 5235 3.1's example.
    assert!(t(
        &ctx,
        "spamtest :value \"ge\" :comparator \"i;ascii-numeric\" \"3\""
    ));
    assert!(t(&ctx, "spamtest :count \"eq\" \"1\""));
    assert!(t(&ctx, "spamtest :percent :value \"gt\" \"50\""));
    assert!(!t(&ctx, "spamtest :percent :value \"gt\" \"80\""));
    assert!(t(&ctx, "virustest :value \"eq\" \"5\""));
    assert!(t(&ctx, "spamtest \"8\""));
    // The default comparator is RFC 5228 2.7.3's i;ascii-casemap (RFC 5235 3.2 and 3.3
    // name none, unlike RFC 3685), so pattern matches are allowed, and a relational
    // comparison without `:comparator "i;ascii-numeric"` compares text, as in Pigeonhole.
    assert!(t(&ctx, "spamtest :matches \"*\""));
    assert!(t(&ctx, "virustest :matches \"5*\""));
    assert!(t(&ctx, "spamtest :percent :contains \"7\""));
    ctx.spam_score = Some(10);
    assert!(!t(&ctx, "spamtest :value \"ge\" \"3\""));
    assert!(t(
        &ctx,
        "spamtest :value \"ge\" :comparator \"i;ascii-numeric\" \"3\""
    ));
    compile_err(
        "require [\"spamtest\", \"comparator-i;ascii-numeric\"]; if spamtest :matches :comparator \"i;ascii-numeric\" \"*\" { }",
    );
    compile_err("require \"spamtest\"; if spamtest :percent \"1\" { }");
    compile_err("if virustest \"1\" { }");
}

// ---- regex: draft-ietf-sieve-regex-01 ----

#[test]
fn regex() {
    let r = ", \"regex\", \"variables\"";
    assert!(is_true(
        "header :regex \"subject\" \"^I have (a|an) PRESENT\"",
        r
    ));
    assert!(!is_true(
        "header :regex :comparator \"i;octet\" \"subject\" \"PRESENT\"",
        r
    ));
    assert!(is_true(
        "address :regex :domain \"from\" \"[[:alpha:]]+\\\\.example\\\\.org$\"",
        r
    ));
    let src = "require [\"regex\", \"variables\", \"fileinto\"];
        if header :regex \"subject\" \"^I have (.*) for (.*)$\" { fileinto \"${1}-${2}-${0}\"; }";
    assert_eq!(
        run(src),
        vec![fileinto("a present-you-I have a present for you")]
    );
    // A bad literal regex is a compile error; one from a variable matches nothing, the
    // run goes on and says why in `warnings` (as Pigeonhole: the message is not kept by
    // error for it); the other keys are still tried.
    compile_err("require \"regex\"; if header :regex \"subject\" \"(\" { }");
    let src = "require [\"regex\", \"variables\", \"fileinto\"]; set \"p\" \"(\"; if header :regex \"subject\" \"${p}\" { fileinto \"yes\"; } else { fileinto \"no\"; }";
    let o = try_run_on(src, MSG, &context(), &TestHost::default()).unwrap();
    assert_eq!(o.actions, vec![fileinto("no")]);
    assert_eq!(o.warnings.len(), 1);
    let src = "require [\"regex\", \"variables\", \"fileinto\"]; set \"p\" \"(\"; if header :regex \"subject\" [\"${p}\", \"present\"] { fileinto \"yes\"; }";
    let o = try_run_on(src, MSG, &context(), &TestHost::default()).unwrap();
    assert_eq!(o.actions, vec![fileinto("yes")]);
    // :quoteregex
    let src = "require [\"regex\", \"variables\", \"fileinto\"]; set :quoteregex \"q\" \"a.b\"; fileinto \"${q}\";";
    assert_eq!(run(src), vec![fileinto("a\\.b")]);
}
