//! Helpers shared by the integration tests: a host with fixed answers, and shorthands.
#![allow(dead_code, unreachable_pub)]

use std::cell::RefCell;
use std::collections::HashMap;

use sieve::{
    Action, CompileError, Context, Envelope, Host, Limits, Location, Outcome, RuntimeError, Script,
};

#[derive(Default)]
pub struct TestHost {
    pub mailboxes: Vec<String>,
    /// (handle, id) pairs already seen.
    pub seen: Vec<(String, String)>,
    pub scripts: HashMap<(Location, String), String>,
    pub asked: RefCell<Vec<(String, String, u64)>>,
}

impl Host for TestHost {
    fn mailbox_exists(&self, name: &str) -> bool {
        self.mailboxes.iter().any(|m| m == name)
    }
    fn duplicate(&self, handle: &str, id: &str, period: u64) -> bool {
        self.asked
            .borrow_mut()
            .push((handle.into(), id.into(), period));
        self.seen.iter().any(|(h, i)| h == handle && i == id)
    }
    fn include(&self, location: Location, name: &str) -> Result<Script, String> {
        match self.scripts.get(&(location, name.to_string())) {
            Some(src) => sieve::compile(src, &Limits::default()).map_err(|e| e.to_string()),
            None => Err("no such script".into()),
        }
    }
}

pub const MSG: &str = "Return-Path: <coyote@desert.example.org>\r\n\
Received: from a by b; Mon, 1 Jan 2024 00:00:00 +0000\r\n\
Date: Tue, 1 Apr 1997 09:06:31 -0800\r\n\
From: \"Wile E. Coyote\" <coyote@desert.example.org>\r\n\
Sender: coyote+tools@desert.example.org\r\n\
To: roadrunner@acme.example.com, Bugs <bugs+carrots@acme.example.com>\r\n\
Cc: elmer@hunting.example.net\r\n\
Subject: I have a present for you\r\n\
X-Caffeine: C8H10N4O2\r\n\
Message-ID: <1234@desert.example.org>\r\n\
\r\n\
Look, I'm sorry about the whole anvil thing, and I really\r\n\
didn't mean to try and drop it on you from the top of the\r\n\
cliff.  I want to try to make it up to you.\r\n";

pub fn context() -> Context {
    Context {
        envelope: Envelope {
            from: "coyote@desert.example.org".into(),
            to: "roadrunner+sieve@acme.example.com".into(),
            orig_to: Some("rr@acme.example.com".into()),
            auth: None,
        },
        now: 1_700_000_000, // 2023-11-14T22:13:20Z
        zone_minutes: 60,
        environment: vec![
            ("domain".into(), "acme.example.com".into()),
            ("location".into(), "MDA".into()),
            ("phase".into(), "during".into()),
        ],
        spam_score: None,
        spam_percent: None,
        virus_score: None,
    }
}

pub fn compile(src: &str) -> Script {
    match sieve::compile(src, &Limits::default()) {
        Ok(s) => s,
        Err(e) => panic!("compile failed: {e}\n{src}"),
    }
}

pub fn compile_err(src: &str) -> CompileError {
    match sieve::compile(src, &Limits::default()) {
        Ok(_) => panic!("compiled but should not have:\n{src}"),
        Err(e) => e,
    }
}

pub fn try_run_on(
    src: &str,
    msg: &str,
    ctx: &Context,
    host: &TestHost,
) -> Result<Outcome, RuntimeError> {
    sieve::run(&compile(src), msg.as_bytes(), ctx, host, &Limits::default())
}

pub fn run_on(src: &str, msg: &str) -> Outcome {
    match try_run_on(src, msg, &context(), &TestHost::default()) {
        Ok(o) => o,
        Err(e) => panic!("run failed: {e}\n{src}"),
    }
}

pub fn run(src: &str) -> Vec<Action> {
    run_on(src, MSG).actions
}

pub fn keep() -> Action {
    Action::Keep { flags: Vec::new() }
}

pub fn fileinto(m: &str) -> Action {
    Action::FileInto {
        mailbox: m.into(),
        flags: Vec::new(),
        create: false,
    }
}

/// Whether the script files into "yes" (the shorthand tests use for "the test was true").
pub fn is_true(test: &str, requires: &str) -> bool {
    let src = format!("require [\"fileinto\"{requires}];\nif {test} {{ fileinto \"yes\"; }}");
    run(&src).contains(&fileinto("yes"))
}
