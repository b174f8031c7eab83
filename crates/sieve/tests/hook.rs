//! The extension hook a test harness uses (the shape a `vnd.dovecot.testsuite` runner
//! would take): registered commands with blocks, registered tests, and the run view.

mod common;
use common::*;
use sieve::Action;
use sieve::extension::{Extension, Extensions, Flow, Handler, RunView, Value};

#[derive(Default)]
struct Harness {
    log: Vec<String>,
}

impl Handler for Harness {
    fn command(
        &mut self,
        name: &str,
        args: &[Value],
        _test: Option<bool>,
        run: &mut RunView<'_, '_>,
    ) -> Result<Flow, String> {
        match (name, args) {
            ("test", [Value::Strings(n)]) => {
                self.log.push(format!("test {}", n[0]));
                run.reset_result();
                Ok(Flow::RunBlock)
            }
            ("test_set", [Value::Strings(what), Value::Strings(value)]) if what[0] == "message" => {
                run.set_message(value[0].clone().into_bytes());
                Ok(Flow::Continue)
            }
            ("test_fail", [Value::Strings(m)]) => Err(format!("test failed: {}", m[0])),
            _ => Err(format!("bad use of {name}")),
        }
    }

    fn test(
        &mut self,
        name: &str,
        args: &[Value],
        run: &mut RunView<'_, '_>,
    ) -> Result<bool, String> {
        match (name, args) {
            ("test_result_action_count", [Value::Strings(n)]) => {
                Ok(run.actions().len().to_string() == n[0])
            }
            ("test_result_has_fileinto", [Value::Strings(m)]) => Ok(run
                .actions()
                .iter()
                .any(|a| matches!(a, Action::FileInto { mailbox, .. } if *mailbox == m[0]))),
            _ => Err(format!("bad use of {name}")),
        }
    }
}

fn extensions() -> Extensions {
    let mut e = Extensions::new();
    e.add(Extension {
        capability: "vnd.dovecot.testsuite".into(),
        commands: vec!["test".into(), "test_set".into(), "test_fail".into()],
        tests: vec![
            "test_result_action_count".into(),
            "test_result_has_fileinto".into(),
        ],
    });
    e
}

#[test]
fn harness_commands_and_tests() {
    let src = r#"require ["vnd.dovecot.testsuite", "fileinto", "variables"];
        test_set "message" text:
Subject: hello
From: a@b.c

body
.
;
        test "first" {
            if header :is "subject" "hello" { fileinto "greetings"; }
            if not test_result_has_fileinto "greetings" { test_fail "no fileinto"; }
            if not test_result_action_count "1" { test_fail "count"; }
        }
        test "second" {
            if test_result_action_count "0" { keep; }
        }"#;
    let lim = sieve::Limits::default();
    let script = sieve::compile_with(src, &lim, &extensions()).unwrap();
    let mut h = Harness::default();
    let o = sieve::run_with(
        &script,
        MSG.as_bytes(),
        &context(),
        &TestHost::default(),
        &lim,
        &mut h,
    )
    .unwrap();
    assert_eq!(h.log, vec!["test first", "test second"]);
    assert_eq!(o.actions, vec![keep()]);
    // A failing check is a run-time error carrying the harness's message.
    let src = "require \"vnd.dovecot.testsuite\"; test \"x\" { test_fail \"boom\"; }";
    let script = sieve::compile_with(src, &lim, &extensions()).unwrap();
    let e = sieve::run_with(
        &script,
        MSG.as_bytes(),
        &context(),
        &TestHost::default(),
        &lim,
        &mut h,
    )
    .unwrap_err();
    assert!(e.message.contains("boom"));
}

#[test]
fn registered_names_need_require_and_registration() {
    let lim = sieve::Limits::default();
    assert!(sieve::compile_with("test \"x\" { }", &lim, &extensions()).is_err());
    assert!(sieve::compile("require \"vnd.dovecot.testsuite\";", &lim).is_err());
    assert!(
        sieve::compile_with(
            "require \"vnd.dovecot.testsuite\"; if ihave \"vnd.dovecot.testsuite\" { }",
            &lim,
            &extensions()
        )
        .is_err()
    );
    assert!(sieve::compile_with("require [\"vnd.dovecot.testsuite\", \"ihave\"]; if ihave \"vnd.dovecot.testsuite\" { test \"a\" { } }", &lim, &extensions()).is_ok());
}
