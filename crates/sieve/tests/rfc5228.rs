//! RFC 5228 (the base language): grammar, control, actions, tests, match types,
//! comparators, implicit keep, errors.

mod common;
use common::*;
use sieve::{Action, Limits};

const EXTENDED_EXAMPLE: &str = r#"
    #
    # Example Sieve Filter
    # Declare any optional features or extension used by the script
    #
    require ["fileinto"];

    if header :is "Sender" "owner-ietf-mta-filters@imc.org"
            {
            fileinto "filter";  # move to "filter" mailbox
            }
    elsif address :DOMAIN :is ["From", "To"] "example.com"
            {
            keep;               # keep in "In" mailbox
            }
    elsif anyof (NOT address :all :contains
                   ["To", "Cc", "Bcc"] "me@example.com",
                 header :matches "subject"
                   ["*make*money*fast*", "*university*dipl*mas*"])
            {
            fileinto "spam";   # move to "spam" mailbox
            }
    else
            {
            fileinto "personal";
            }
"#;

// RFC 5228 9
#[test]
fn extended_example() {
    assert_eq!(run(EXTENDED_EXAMPLE), vec![fileinto("spam")]);
    let to_me = MSG.replace("Cc: elmer@hunting.example.net", "Cc: me@example.com");
    assert_eq!(
        run_on(EXTENDED_EXAMPLE, &to_me).actions,
        vec![fileinto("personal")]
    );
    let company = MSG.replace(
        "From: \"Wile E. Coyote\" <coyote@desert.example.org>",
        "From: boss@example.com",
    );
    assert_eq!(run_on(EXTENDED_EXAMPLE, &company).actions, vec![keep()]);
    let list = MSG.replace(
        "Sender: coyote+tools@desert.example.org",
        "Sender: owner-ietf-mta-filters@imc.org",
    );
    assert_eq!(
        run_on(EXTENDED_EXAMPLE, &list).actions,
        vec![fileinto("filter")]
    );
}

// RFC 5228 2.10.2
#[test]
fn implicit_keep() {
    assert_eq!(run(""), vec![keep()]);
    assert_eq!(run("discard;"), vec![]);
    assert_eq!(run("keep;"), vec![keep()]);
    assert_eq!(
        run("require \"fileinto\"; fileinto \"a\";"),
        vec![fileinto("a")]
    );
    assert_eq!(
        run("redirect \"x@example.org\";"),
        vec![Action::Redirect {
            address: "x@example.org".into()
        }]
    );
    // A test alone does not cancel it.
    assert_eq!(run("if true { }"), vec![keep()]);
}

// RFC 5228 2.10.3
#[test]
fn duplicate_actions_are_one() {
    let a = run(
        "require \"fileinto\"; fileinto \"a\"; fileinto \"a\"; keep; keep; redirect \"x@y.z\"; redirect \"x@y.z\";",
    );
    assert_eq!(
        a,
        vec![
            fileinto("a"),
            keep(),
            Action::Redirect {
                address: "x@y.z".into()
            }
        ]
    );
    // RFC 5228 4.3: keep is a `fileinto "INBOX"`, so the two are one store (the first).
    assert_eq!(
        run("require \"fileinto\"; keep; fileinto \"INBOX\";"),
        vec![keep()]
    );
    assert_eq!(
        run("require \"fileinto\"; fileinto \"inbox\"; keep;"),
        vec![fileinto("inbox")]
    );
    // Redirect addresses are compared once normalized (RFC 5228 4.2).
    assert_eq!(
        run("redirect \"x@y.z\"; redirect \"X <x@y.z>\";"),
        vec![Action::Redirect {
            address: "x@y.z".into()
        }]
    );
}

// RFC 5228 3.1, 3.3
#[test]
fn control() {
    assert_eq!(
        run("if false { discard; } elsif true { stop; } else { discard; } discard;"),
        vec![keep()]
    );
    assert_eq!(
        run("if false { discard; } elsif false { discard; } else { stop; }"),
        vec![keep()]
    );
    assert_eq!(run("stop; discard;"), vec![keep()]);
    compile_err("elsif true { }");
    compile_err("else { }");
    compile_err("if true keep;");
    compile_err("if true { } else true { }");
}

// RFC 5228 3.2
#[test]
fn require_is_enforced() {
    let e = compile_err("if true {\n    fileinto \"x\";\n}");
    assert_eq!((e.line, e.column), (2, 5));
    assert!(
        e.message
            .contains("fileinto requires \"fileinto\" in require"),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "line 2, column 5: fileinto requires \"fileinto\" in require"
    );
    let e = compile_err("require \"nonesuch\";");
    assert!(e.message.contains("unsupported extension"));
    let e = compile_err("keep;\nrequire \"fileinto\";");
    assert_eq!(e.line, 2);
    compile_err("if envelope :is \"from\" \"x\" { }");
    compile_err("if header :regex \"a\" \"b\" { }");
    compile_err("if header :value \"gt\" \"a\" \"b\" { }");
    compile_err("if header :comparator \"i;ascii-numeric\" \"a\" \"b\" { }");
    // Always available comparators.
    compile(
        "require [\"comparator-i;octet\", \"comparator-i;ascii-casemap\"]; if header :comparator \"i;octet\" \"a\" \"b\" { }",
    );
    let s = compile("require [\"fileinto\", \"Variables\"];");
    assert_eq!(
        s.required(),
        &["fileinto".to_string(), "variables".to_string()]
    );
}

#[test]
fn unknown_names_are_errors_with_positions() {
    let e = compile_err("keep;\n  frobnicate;");
    assert_eq!((e.line, e.column), (2, 3));
    assert!(e.message.contains("unknown command"));
    let e = compile_err("if nonesuch { }");
    assert_eq!((e.line, e.column), (1, 4));
    let e = compile_err("if header :bogus \"a\" \"b\" { }");
    assert_eq!((e.line, e.column), (1, 11));
    compile_err("if header :comparator \"i;nonesuch\" \"a\" \"b\" { }");
    compile_err("keep \"x\";");
    compile_err("discard :copy;");
    compile_err("redirect \"not an address\";");
    compile_err("if header :is :contains \"a\" \"b\" { }");
    compile_err("if size :over \"x\" { }");
    compile_err("if not (true, false) { }");
    compile_err("if allof true { }");
}

// RFC 5228 5.1
#[test]
fn address_test() {
    assert!(is_true(
        "address :is \"to\" \"roadrunner@acme.example.com\"",
        ""
    ));
    assert!(is_true(
        "address :domain :is \"from\" \"DESERT.example.org\"",
        ""
    ));
    assert!(is_true("address :localpart :is \"from\" \"coyote\"", ""));
    assert!(is_true(
        "address :all :is \"to\" \"bugs+carrots@acme.example.com\"",
        ""
    ));
    assert!(!is_true("address :is \"from\" \"Wile E. Coyote\"", ""));
    assert!(!is_true("address :is \"x-none\" \"\"", ""));
}

// RFC 5228 5.2-5.3, 5.5-5.9
#[test]
fn other_tests() {
    assert!(is_true("allof (true, exists \"subject\")", ""));
    assert!(!is_true("allof (true, false)", ""));
    assert!(is_true("anyof (false, true)", ""));
    assert!(!is_true("anyof (false, not true)", ""));
    assert!(is_true("exists [\"From\", \"Date\"]", ""));
    assert!(!is_true("exists [\"From\", \"X-None\"]", ""));
    assert!(is_true("header :contains \"X-Caffeine\" \"c8h10\"", ""));
    assert!(!is_true(
        "header :comparator \"i;octet\" :contains \"X-Caffeine\" \"c8h10\"",
        ""
    ));
    assert!(is_true(
        "header :is [\"x-none\", \"subject\"] \"i have a PRESENT for you\"",
        ""
    ));
    assert!(is_true("size :over 100", ""));
    assert!(is_true("size :under 1M", ""));
    assert!(!is_true("size :over 1K", ""));
    assert!(!is_true("size :under 10", ""));
}

// RFC 5228 2.7.1 and 2.7.3
#[test]
fn match_types_and_comparators() {
    assert!(is_true(
        "header :matches \"subject\" \"I have ? present*\"",
        ""
    ));
    assert!(is_true("header :matches \"subject\" \"*\"", ""));
    assert!(!is_true("header :matches \"subject\" \"present\"", ""));
    assert!(is_true("header :matches \"x-caffeine\" \"c?h10*\"", ""));
    assert!(!is_true(
        "header :comparator \"i;octet\" :matches \"x-caffeine\" \"c?h10*\"",
        ""
    ));
    // An empty header value is still a value (RFC 5228 5.7).
    let m = MSG.replace("X-Caffeine: C8H10N4O2", "X-Empty:");
    let src = "require \"fileinto\"; if header :is \"x-empty\" \"\" { fileinto \"yes\"; }";
    assert_eq!(run_on(src, &m).actions, vec![fileinto("yes")]);
}

// RFC 5228 2.7.2 (header values compared decoded)
#[test]
fn encoded_words_are_decoded() {
    let m = MSG.replace(
        "Subject: I have a present for you",
        "Subject: =?utf-8?q?Gr=C3=BC=C3=9Fe?= aus Bern",
    );
    let src =
        "require \"fileinto\"; if header :is \"subject\" \"Grüße aus Bern\" { fileinto \"yes\"; }";
    assert_eq!(run_on(src, &m).actions, vec![fileinto("yes")]);
}

// RFC 5228 2.4.2 and 8.1
#[test]
fn strings_and_comments() {
    let src = "require \"fileinto\"; /* a\nbracket comment */ if header :is \"subject\" text: # comment\r\nI have a present for you\r\n.\r\n{ fileinto \"no\"; } # hash\nfileinto \"a\\\"b\";";
    assert_eq!(run(src), vec![fileinto("a\"b")]);
}

// RFC 5228 2.10.6: a run-time error is the caller's to handle (keep in INBOX).
#[test]
fn runtime_errors() {
    let lim = Limits {
        redirects_max: 1,
        ..Limits::default()
    };
    let s = compile("redirect \"a@b.c\"; redirect \"d@e.f\";");
    let r = sieve::run(&s, MSG.as_bytes(), &context(), &TestHost::default(), &lim);
    assert!(r.unwrap_err().message.contains("sieve_redirects_max"));
}

// RFC 5228 2.10.4: a site may limit the number of actions (sieve_actions_max, 32 by
// default as Pigeonhole's sieve_max_actions); duplicates and the implicit keep do not count.
#[test]
fn actions_are_limited() {
    let lim = Limits {
        actions_max: 3,
        ..Limits::default()
    };
    let s = compile(
        "require [\"fileinto\", \"copy\"]; fileinto :copy \"a\"; fileinto :copy \"b\"; fileinto :copy \"a\"; redirect :copy \"x@y.z\";",
    );
    let o = sieve::run(&s, MSG.as_bytes(), &context(), &TestHost::default(), &lim).unwrap();
    assert_eq!(o.actions.len(), 4, "the implicit keep is not counted");
    let s = compile(
        "require \"fileinto\"; fileinto \"a\"; fileinto \"b\"; fileinto \"c\"; fileinto \"d\";",
    );
    let r = sieve::run(&s, MSG.as_bytes(), &context(), &TestHost::default(), &lim);
    assert!(r.unwrap_err().message.contains("sieve_actions_max"));
    assert_eq!(Limits::default().actions_max, 32);
}

// RFC 5228 2.4.2.4 and 4.1: octets that are not UTF-8 make no mailbox name.
#[test]
fn fileinto_name_not_utf8() {
    let r = try_run_on(
        "require [\"fileinto\", \"variables\", \"encoded-character\"]; set \"m\" \"${hex:ff}rop\"; fileinto \"${m}\";",
        MSG,
        &context(),
        &TestHost::default(),
    );
    assert!(r.unwrap_err().message.contains("invalid folder name"));
}

#[test]
fn instructions_are_counted() {
    let o = run_on("if true { keep; }", MSG);
    assert_eq!(o.instructions, 3);
    let lim = Limits {
        instructions_max: 10,
        ..Limits::default()
    };
    let s = compile(&"if true { }\n".repeat(20));
    let r = sieve::run(&s, MSG.as_bytes(), &context(), &TestHost::default(), &lim);
    assert!(r.unwrap_err().message.contains("sieve_instructions_max"));
}

#[test]
fn script_size_and_nesting() {
    let lim = Limits {
        script_bytes_max: 10,
        ..Limits::default()
    };
    assert!(sieve::compile("keep; keep; keep;", &lim).is_err());
    let deep = format!("if {}true {{ }}", "not ".repeat(10_000));
    assert!(sieve::compile(&deep, &Limits::default()).is_err());
    let big = Limits {
        nesting_max: usize::MAX,
        script_bytes_max: usize::MAX,
        ..Limits::default()
    };
    let deeper = format!(
        "if {}true{} {{ }}",
        "anyof(".repeat(100_000),
        ")".repeat(100_000)
    );
    assert!(sieve::compile(&deeper, &big).is_err());
}

// The Script is shared between threads.
#[test]
fn script_is_send_sync() {
    fn check<T: Send + Sync + Clone>() {}
    check::<sieve::Script>();
}
