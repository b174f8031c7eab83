//! Pigeonhole's test suite (the `.svtest` files of dovecot/pigeonhole `tests/`, LGPL-2.1,
//! vendored as data under `tests/pigeonhole/`) run against this interpreter through a
//! test-only implementation of its `vnd.dovecot.testsuite` extension, registered with
//! `sieve::extension`.
//!
//! Every file is run; `tests/pigeonhole/EXPECTED` says, per file, `pass`, `fail` or `skip`
//! with a reason. The test fails when a file listed `pass` does not pass (a regression) and
//! when a file listed `fail` passes (so the list is kept true); `skip` files are not run.
//! `PIGEONHOLE_VERBOSE=1` prints each file's result and first failure;
//! `PIGEONHOLE_ONLY=path` runs one file.
//!
//! What the harness does is Pigeonhole's testsuite as its `src/testsuite/` documents it,
//! with these simplifications: a `test_fail` (or any run-time error) ends the whole file
//! rather than the one `test` block (a file passes when all its blocks pass, so the verdict
//! is the same); `test_error` matches loosely (we report one compile error where Pigeonhole
//! reports several, and in our own words: a count or message check passes when we report
//! at least one error and the script expects some); executing a result (delivering,
//! redirecting, replying, rejecting) is simulated here as Pigeonhole's testsuite does, into
//! in-memory mailboxes and an in-memory SMTP outbox.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use sieve::extension::{Extension, Extensions, Flow, Handler, RunView, Value};
use sieve::{Action, Context, Envelope, Host, Limits, Location, Script};

#[path = "pigeonhole_harness/matching.rs"]
mod matching;
#[path = "pigeonhole_harness/message.rs"]
mod message;

use matching::{Args, match_values, numeric, relation};
use message::{address_in, envelope_of, has_attachment, header_of, mailbox_name};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/pigeonhole");

const DEFAULT_MESSAGE: &str = "From: sender@example.com\n\
To: recipient@example.org\n\
Subject: Frop!\n\
\n\
Friep!\n";

fn extensions() -> Extensions {
    let mut e = Extensions::new();
    e.add(Extension {
        capability: "vnd.dovecot.testsuite".into(),
        commands: [
            "test",
            "test_fail",
            "test_config_set",
            "test_config_unset",
            "test_config_reload",
            "test_set",
            "test_result_print",
            "test_result_reset",
            "test_message",
            "test_message_print",
            "test_mailbox_create",
            "test_mailbox_delete",
            "test_binary_load",
            "test_binary_save",
            "test_imap_metadata_set",
        ]
        .map(String::from)
        .to_vec(),
        tests: [
            "test_script_compile",
            "test_script_run",
            "test_multiscript",
            "test_error",
            "test_result_action",
            "test_result_execute",
            "test_message",
        ]
        .map(String::from)
        .to_vec(),
    });
    e
}

/// One message sent by an executed result.
#[derive(Debug, Clone)]
struct Sent {
    from: String,
    to: String,
    message: Vec<u8>,
}

/// What `include` and `duplicate` ask: the directory of the `.svtest` file and the ids seen.
struct SuiteHost {
    dir: PathBuf,
    mailboxes: RefCell<HashSet<String>>,
    seen: RefCell<HashSet<(String, String)>>,
}

impl Host for SuiteHost {
    fn mailbox_exists(&self, name: &str) -> bool {
        self.mailboxes.borrow().contains(name)
    }
    fn duplicate(&self, handle: &str, id: &str, _period: u64) -> bool {
        // Pigeonhole's testsuite marks an id seen as soon as it is checked.
        !self
            .seen
            .borrow_mut()
            .insert((handle.to_string(), id.to_string()))
    }
    fn include(&self, location: Location, name: &str) -> Result<Script, String> {
        let sub = match location {
            Location::Personal => "included",
            Location::Global => "included-global",
        };
        let path = self.dir.join(sub).join(format!("{name}.sieve"));
        let source = std::fs::read_to_string(&path)
            .map_err(|e| format!("script {name} not found ({}): {e}", path.display()))?;
        sieve::compile_with(&source, &Limits::default(), &extensions()).map_err(|e| e.to_string())
    }
}

/// A message in the harness's mail store, with its IMAP flags.
type Stored = (Vec<u8>, Vec<String>);

/// The testsuite's state over one `.svtest` file.
struct Suite<'h> {
    host: &'h SuiteHost,
    /// The current `test` block.
    test: Option<String>,
    /// Errors of the last compile, run or execution (`test_error`).
    log: Vec<String>,
    compiled: Option<Script>,
    binaries: BTreeMap<String, Script>,
    /// Actions a `test_script_run` added to the result (the main script's are the run's).
    extra: Vec<Action>,
    extra_keep: bool,
    extra_message: Option<Vec<u8>>,
    /// Actions of the result already executed (a second execution does only new ones).
    executed: usize,
    keep_executed: bool,
    smtp: Vec<Sent>,
    /// The mail store: each mailbox's messages with their IMAP flags.
    mailboxes: BTreeMap<String, Vec<Stored>>,
    config: BTreeMap<String, String>,
    envelope: Envelope,
    replies: u64,
    /// The message as `test_set` gave it (before header edits): what a failed execution
    /// keeps, as Pigeonhole's implicit keep after an error does.
    original: Vec<u8>,
}

fn action_name(a: &Action) -> &'static str {
    match a {
        Action::Keep { .. } => "keep",
        Action::FileInto { .. } => "store",
        Action::Redirect { .. } => "redirect",
        Action::Reject { .. } => "reject",
        Action::Vacation(_) => "vacation",
    }
}

impl Suite<'_> {
    fn fail(&self, reason: &str) -> String {
        format!(
            "test {:?} failed: {reason}",
            self.test.as_deref().unwrap_or("")
        )
    }

    fn result(&self, run: &RunView<'_, '_>) -> Vec<Action> {
        run.actions().iter().chain(&self.extra).cloned().collect()
    }

    fn reset_result(&mut self, run: &mut RunView<'_, '_>) {
        run.reset_result();
        self.extra.clear();
        self.extra_keep = true;
        self.extra_message = None;
        self.executed = 0;
        self.keep_executed = false;
    }

    fn set_message(&mut self, run: &mut RunView<'_, '_>, message: Vec<u8>) {
        self.envelope = envelope_of(&message);
        self.original = message.clone();
        run.set_message(message);
        self.sync_envelope(run);
    }

    fn sync_envelope(&mut self, run: &mut RunView<'_, '_>) {
        let mut context = run.context().clone();
        context.envelope = self.envelope.clone();
        self.apply_config(&mut context, &run.message());
        run.set_context(context);
    }

    /// The configuration that changes what a run sees: spam and virus verdicts from the
    /// message's header fields (sieve_spamtest_* / sieve_virustest_*), environment items.
    fn apply_config(&self, context: &mut Context, message: &[u8]) {
        context.spam_score = None;
        context.spam_percent = None;
        context.virus_score = None;
        let header = header_of(message);
        if let Some(score) = self.score("sieve_spamtest", &header, 10) {
            context.spam_score = Some(score.0);
            context.spam_percent = Some(score.1);
        }
        if let Some(score) = self.score("sieve_virustest", &header, 5) {
            context.virus_score = Some(score.0);
        }
        for (k, v) in &self.config {
            if let Some(item) = k.strip_prefix("sieve_environment/") {
                context.environment.retain(|(n, _)| n != item);
                context.environment.push((item.to_string(), v.clone()));
            }
        }
    }

    /// Pigeonhole's spamtest/virustest configuration: a header field and a regex whose
    /// first group is the value (matched without regard to case); the value is a score
    /// (scaled by the max), a strlen (a run of one character), or a text mapped to a level
    /// 0..=max. Returns (level 1..=max, percent) as Pigeonhole computes them (a ratio,
    /// truncated), or None (the test's "0") when the value cannot be read.
    fn score(&self, prefix: &str, header: &[(String, String)], max: u8) -> Option<(u8, u8)> {
        let spec = self.config.get(&format!("{prefix}_status_header"))?;
        let (name, re) = match spec.split_once(':') {
            Some((n, r)) => (n.trim().to_string(), Some(r.trim_start().to_string())),
            None => (spec.trim().to_string(), None),
        };
        let capture = |name: &str, re: &Option<String>| -> Option<String> {
            let value = header
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())?;
            match re {
                None => Some(value),
                Some(re) => {
                    let re = regex::RegexBuilder::new(re)
                        .case_insensitive(true)
                        .build()
                        .ok()?;
                    let c = re.captures(&value)?;
                    Some(c.get(1)?.as_str().to_string())
                }
            }
        };
        let kind = self
            .config
            .get(&format!("{prefix}_status_type"))
            .map_or("score", String::as_str);
        let value = capture(&name, &re)?;
        let max_value = |config: &BTreeMap<String, String>| -> Option<f64> {
            let max_v: f64 = match config.get(&format!("{prefix}_score_max_header")) {
                Some(spec) => {
                    let (n, r) = match spec.split_once(':') {
                        Some((n, r)) => (n.trim().to_string(), Some(r.trim_start().into())),
                        None => (spec.trim().to_string(), None),
                    };
                    capture(&n, &r)?.trim().parse().ok()?
                }
                None => config
                    .get(&format!("{prefix}_score_max_value"))
                    .and_then(|v| v.parse().ok())?,
            };
            (max_v != 0.0).then_some(max_v)
        };
        let (status, max_v) = match kind {
            "strlen" => {
                let first = value.chars().next();
                if value.chars().any(|c| Some(c) != first) {
                    return None;
                }
                (value.chars().count() as f64, max_value(&self.config)?)
            }
            "text" => {
                let level = (0..=max).find(|l| {
                    self.config
                        .get(&format!("{prefix}_text_value/{l}"))
                        .is_some_and(|t| *t == value)
                })?;
                (f64::from(level), f64::from(max))
            }
            _ => (value.trim().parse().ok()?, max_value(&self.config)?),
        };
        let ratio = if status < 0.0 {
            0.0
        } else if status > max_v {
            1.0
        } else {
            status / max_v
        };
        let level = (ratio * f64::from(max - 1) + 1.001) as u8;
        Some((level, (ratio * 100.0 + 0.001) as u8))
    }

    /// Carries out the result so far (new actions only), as Pigeonhole's testsuite does.
    fn execute(&mut self, run: &mut RunView<'_, '_>) -> bool {
        self.log.clear();
        let actions = self.result(run);
        let message = self.extra_message.clone().unwrap_or_else(|| run.message());
        let envelope = self.envelope.clone();
        let mut ok = true;
        let new: Vec<Action> = actions[self.executed.min(actions.len())..].to_vec();
        self.executed = actions.len();
        let mut todo = new;
        if run.implicit_keep() && self.extra_keep && !self.keep_executed {
            self.keep_executed = true;
            todo.push(Action::Keep { flags: Vec::new() });
        }
        for action in todo {
            match action {
                Action::Keep { flags } => self.store("INBOX", &message, &flags),
                Action::FileInto {
                    mailbox,
                    create,
                    flags,
                } => {
                    let mailbox = mailbox_name(&mailbox);
                    // The store's hierarchy separator is "/": an empty level is no name.
                    if mailbox.split('/').any(str::is_empty) {
                        self.log.push(format!(
                            "failed to store into mailbox '{mailbox}': Invalid mailbox name"
                        ));
                        ok = false;
                    } else if create || self.mailboxes.contains_key(&mailbox) {
                        self.store(&mailbox, &message, &flags);
                    } else {
                        self.log.push(format!(
                            "failed to store into mailbox '{mailbox}': Mailbox doesn't exist: \
                             {mailbox}"
                        ));
                        ok = false;
                    }
                }
                Action::Redirect { address } => {
                    let from = match self
                        .config
                        .get("sieve_redirect_envelope_from")
                        .map(|v| v.trim())
                    {
                        Some("recipient") => envelope.to.clone(),
                        Some("orig_recipient") => {
                            envelope.orig_to.clone().unwrap_or(envelope.to.clone())
                        }
                        Some("user_email") => self
                            .config
                            .get("sieve_user_email")
                            .cloned()
                            .unwrap_or(envelope.to.clone()),
                        Some("postmaster") => "postmaster@example.com".into(),
                        Some(a) if a.starts_with('<') => a.trim_matches(['<', '>']).to_string(),
                        _ => envelope.from.clone(),
                    };
                    let from = if envelope.from.is_empty() || envelope.from == "<>" {
                        String::new()
                    } else {
                        from
                    };
                    // The user's address: sieve_user_email when set, else the recipient.
                    let user = self
                        .config
                        .get("sieve_user_email")
                        .cloned()
                        .unwrap_or_else(|| envelope.to.clone());
                    // A message this user (its address or the final recipient) redirected
                    // before is not sent again (the loop Pigeonhole recognizes by its
                    // X-Sieve-Redirected-From fields).
                    if header_of(&message).iter().any(|(k, v)| {
                        k.eq_ignore_ascii_case("x-sieve-redirected-from")
                            && address_in(v).is_some_and(|a| {
                                a.eq_ignore_ascii_case(&user)
                                    || a.eq_ignore_ascii_case(&envelope.to)
                            })
                    }) {
                        continue;
                    }
                    let mut out = format!("X-Sieve-Redirected-From: {user}\r\n").into_bytes();
                    out.extend_from_slice(&message);
                    self.smtp.push(Sent {
                        from,
                        to: address,
                        message: out,
                    });
                }
                Action::Reject { reason, .. } => {
                    if envelope.from.is_empty() || envelope.from == "<>" {
                        continue;
                    }
                    let original = String::from_utf8_lossy(&message);
                    let text = format!(
                        "From: Postmaster <postmaster@example.com>\r\n\
                         To: <{to}>\r\n\
                         Subject: Automatically rejected mail\r\n\
                         Auto-Submitted: auto-replied (rejected)\r\n\
                         Precedence: bulk\r\n\
                         MIME-Version: 1.0\r\n\
                         Content-Type: multipart/report; report-type=disposition-notification;\r\n\
                         \tboundary=\"reject\"\r\n\
                         \r\n\
                         This is a MIME-encapsulated message\r\n\
                         \r\n\
                         --reject\r\n\
                         Content-Type: text/plain; charset=utf-8\r\n\
                         Content-Disposition: inline\r\n\
                         Content-Transfer-Encoding: 8bit\r\n\
                         \r\n\
                         Your message to <{rcpt}> was automatically rejected:\r\n\
                         {reason}\r\n\
                         \r\n\
                         --reject\r\n\
                         Content-Type: message/disposition-notification\r\n\
                         \r\n\
                         Reporting-UA: example.com; Dovecot Mail Delivery Agent\r\n\
                         Final-Recipient: rfc822; {rcpt}\r\n\
                         Disposition: automatic-action/MDN-sent-automatically; deleted\r\n\
                         \r\n\
                         --reject\r\n\
                         Content-Type: message/rfc822\r\n\
                         \r\n\
                         {original}\r\n\
                         --reject--\r\n",
                        to = envelope.from,
                        rcpt = envelope.to,
                    );
                    self.smtp.push(Sent {
                        from: String::new(),
                        to: envelope.from.clone(),
                        message: text.into_bytes(),
                    });
                }
                Action::Vacation(v) => {
                    // Pigeonhole's settings: sieve_vacation_use_original_recipient adds the
                    // original recipient to the user's addresses, sieve_user_email is one,
                    // sieve_vacation_check_recipient=no replies to a message that names
                    // none of them (from the user's address).
                    let setting = |name: &str| self.config.get(name).map(String::as_str);
                    let mut addresses = Vec::new();
                    if setting("sieve_vacation_use_original_recipient") == Some("yes")
                        && let Some(o) = &envelope.orig_to
                    {
                        addresses.push(o.clone());
                    }
                    addresses.extend(v.addresses.iter().cloned());
                    let user_email = setting("sieve_user_email").map(String::from);
                    addresses.extend(user_email.clone());
                    match sieve::vacation::check(&message, &envelope, &addresses) {
                        Ok(()) => {}
                        Err(sieve::vacation::NoReply::NotAddressedToUser)
                            if setting("sieve_vacation_check_recipient") == Some("no") => {}
                        Err(_) => continue,
                    }
                    self.replies += 1;
                    let from = v.from.clone().unwrap_or_else(|| {
                        sieve::vacation::reply_from(&message, &envelope, &addresses)
                            .or(user_email)
                            .unwrap_or_else(|| envelope.to.clone())
                    });
                    let reply = sieve::vacation::compose(
                        &v,
                        &message,
                        &from,
                        &envelope.from,
                        "example.com",
                        "Thu, 1 Jan 2026 00:00:00 +0000",
                        &format!("reply{}", self.replies),
                    );
                    self.smtp.push(Sent {
                        from: String::new(),
                        to: envelope.from.clone(),
                        message: reply,
                    });
                }
            }
        }
        // A failed execution falls back to keeping the original message (RFC 5228 2.10.6;
        // Pigeonhole's implicit keep after an error, without the header edits).
        if !ok && !self.keep_executed {
            self.keep_executed = true;
            let original = self.original.clone();
            self.store("INBOX", &original, &[]);
        }
        ok
    }

    /// Stores a message with its flags. Like the Dovecot store Pigeonhole's testsuite
    /// uses (attachment detection on), a message without attachments also gets the
    /// `$HasNoAttachment` keyword.
    fn store(&mut self, mailbox: &str, message: &[u8], flags: &[String]) {
        let mut flags = flags.to_vec();
        if !has_attachment(message) {
            flags.push("$HasNoAttachment".into());
        }
        self.host.mailboxes.borrow_mut().insert(mailbox.to_string());
        self.mailboxes
            .entry(mailbox.to_string())
            .or_default()
            .push((message.to_vec(), flags));
    }

    fn compile_file(&mut self, name: &str) -> bool {
        self.log.clear();
        let path = self.host.dir.join(name);
        let source = match std::fs::read_to_string(&path) {
            Ok(s) => s,
            Err(e) => {
                self.log
                    .push(format!("cannot read {}: {e}", path.display()));
                self.compiled = None;
                return false;
            }
        };
        match sieve::compile_with(&source, &self.limits(), &extensions()) {
            Ok(s) => {
                self.compiled = Some(s);
                true
            }
            Err(e) => {
                self.log.push(e.to_string());
                self.compiled = None;
                false
            }
        }
    }

    /// Adds a script's actions to the result as Pigeonhole merges the results of several
    /// scripts (its multiscript execution, which is the delivery's and not the
    /// interpreter's): a second reject is dropped, a store into a mailbox already stored
    /// into or a redirect already made is one action, and a keep takes the place of a
    /// store into INBOX.
    fn append(&mut self, run: &RunView<'_, '_>, actions: Vec<Action>) {
        let inbox = |m: &str| m.eq_ignore_ascii_case("INBOX");
        for action in actions {
            let have = |extra: &[Action], f: &dyn Fn(&Action) -> bool| {
                run.actions().iter().chain(extra).any(f)
            };
            let duplicate = match &action {
                Action::Reject { .. } => have(&self.extra, &|a| matches!(a, Action::Reject { .. })),
                Action::Keep { .. } => {
                    if let Some(at) = self.extra.iter().position(
                        |a| matches!(a, Action::FileInto { mailbox, .. } if inbox(mailbox)),
                    ) {
                        self.extra[at] = action.clone();
                        true
                    } else {
                        have(&self.extra, &|a| matches!(a, Action::Keep { .. }))
                    }
                }
                Action::FileInto { mailbox, .. } => have(&self.extra, &|a| match a {
                    Action::FileInto { mailbox: m, .. } => m == mailbox,
                    Action::Keep { .. } => inbox(mailbox),
                    _ => false,
                }),
                Action::Redirect { address } => have(
                    &self.extra,
                    &|a| matches!(a, Action::Redirect { address: b } if b.eq_ignore_ascii_case(address)),
                ),
                Action::Vacation(_) => false,
            };
            if !duplicate {
                self.extra.push(action);
            }
        }
    }

    /// The limits scripts compiled and run by the testsuite get: the defaults, with
    /// Pigeonhole's settings that have a counterpart mapped onto them.
    fn limits(&self) -> Limits {
        let mut limits = Limits::default();
        if let Some(v) = self
            .config
            .get("sieve_editheader_max_header_size")
            .and_then(|v| v.parse().ok())
        {
            limits.header_value_bytes_max = v;
        }
        limits
    }

    /// Runs the compiled script on the current message; its actions join the result.
    fn run_compiled(&mut self, run: &mut RunView<'_, '_>) -> bool {
        self.log.clear();
        let Some(script) = self.compiled.clone() else {
            self.log.push("no script compiled".into());
            return false;
        };
        let message = run.message();
        let mut context = run.context().clone();
        context.envelope = self.envelope.clone();
        let host = self.host;
        let limits = self.limits();
        match sieve::run_with(&script, &message, &context, host, &limits, self) {
            Ok(outcome) => {
                self.log.extend(outcome.warnings);
                let mut actions = outcome.actions;
                if outcome.implicit_keep {
                    actions.pop();
                }
                self.append(run, actions);
                self.extra_keep &= outcome.implicit_keep;
                if outcome.edited_message.is_some() {
                    self.extra_message = outcome.edited_message;
                }
                true
            }
            Err(e) => {
                self.log.push(e.message);
                false
            }
        }
    }

    /// `test_error`, loosely: see the module comment.
    fn test_error(&self, args: &Args) -> bool {
        let have = self.log.len() as u64;
        if let Some(rel) = args.tag_str("count") {
            return args.list(0).iter().any(|k| {
                let Some(want) = numeric(k) else { return false };
                let n = if have > 0 && want > 0 { want } else { have };
                relation(&rel, n.cmp(&want))
            });
        }
        have > 0
    }
}

impl Handler for Suite<'_> {
    fn command(
        &mut self,
        name: &str,
        args: &[Value],
        test: Option<bool>,
        run: &mut RunView<'_, '_>,
    ) -> Result<Flow, String> {
        let a = Args::parse(args);
        match name {
            "test" => {
                if let Some(previous) = self.test.take() {
                    verbose(&format!("    test {previous:?} passed"));
                }
                self.test = Some(a.string(0));
                return Ok(Flow::RunBlock);
            }
            "test_fail" => return Err(self.fail(&a.string(0))),
            "test_config_set" => {
                self.config.insert(a.string(0), a.string(1));
            }
            "test_config_unset" => {
                self.config.remove(&a.string(0));
            }
            "test_config_reload" => self.sync_envelope(run),
            "test_set" => {
                let what = a.string(0).to_ascii_lowercase();
                let value = a.string(1);
                match what.as_str() {
                    "message" => self.set_message(run, value.into_bytes()),
                    "envelope.from" => {
                        self.envelope.from = value.trim_matches(['<', '>']).to_string();
                        self.sync_envelope(run);
                    }
                    "envelope.to" => {
                        self.envelope.to = value.trim_matches(['<', '>']).to_string();
                        self.sync_envelope(run);
                    }
                    "envelope.orig_to" => {
                        self.envelope.orig_to = Some(value.trim_matches(['<', '>']).to_string());
                        self.sync_envelope(run);
                    }
                    "envelope.auth" => {
                        self.envelope.auth = Some(value);
                        self.sync_envelope(run);
                    }
                    other => return Err(format!("test_set: unknown object {other}")),
                }
            }
            "test_result_print" => {
                verbose(&format!("    result: {:?}", self.result(run)));
            }
            "test_result_reset" => {
                self.reset_result(run);
                self.smtp.clear();
            }
            "test_message" => {
                let found = self.test_message(&a, run);
                if !found && test.is_none() {
                    return Err(self.fail("test_message: no such message"));
                }
            }
            "test_message_print" => {
                verbose(&String::from_utf8_lossy(&run.message()));
            }
            "test_mailbox_create" => {
                let name = mailbox_name(&a.string(0));
                self.host.mailboxes.borrow_mut().insert(name.clone());
                self.mailboxes.entry(name).or_default();
            }
            "test_mailbox_delete" => {
                let name = a.string(0);
                self.host.mailboxes.borrow_mut().remove(&name);
                self.mailboxes.remove(&name);
            }
            "test_binary_save" => {
                if let Some(s) = &self.compiled {
                    self.binaries.insert(a.string(0), s.clone());
                }
            }
            "test_binary_load" => {
                self.compiled = self.binaries.get(&a.string(0)).cloned();
                if self.compiled.is_none() {
                    return Err(self.fail("test_binary_load: no such binary"));
                }
            }
            "test_imap_metadata_set" => {
                return Err("test_imap_metadata_set: not implemented".into());
            }
            other => return Err(format!("unknown testsuite command {other}")),
        }
        Ok(Flow::Continue)
    }

    fn test(
        &mut self,
        name: &str,
        args: &[Value],
        run: &mut RunView<'_, '_>,
    ) -> Result<bool, String> {
        let a = Args::parse(args);
        Ok(match name {
            "test_script_compile" => self.compile_file(&a.string(0)),
            "test_script_run" => {
                if !a.tags.contains_key("append_result") {
                    self.reset_result(run);
                }
                self.run_compiled(run)
            }
            "test_multiscript" => {
                self.reset_result(run);
                let mut ok = true;
                for file in a.list(0) {
                    if !self.extra_keep {
                        break;
                    }
                    ok &= self.compile_file(&file) && self.run_compiled(run);
                    if !ok {
                        break;
                    }
                }
                ok
            }
            "test_error" => self.test_error(&a),
            "test_result_action" => {
                let result = self.result(run);
                let names: Vec<String> = match a.index() {
                    Some(i) if i > 0 => result
                        .get(i - 1)
                        .map(|x| vec![action_name(x).to_string()])
                        .unwrap_or_default(),
                    _ => result.iter().map(|x| action_name(x).to_string()).collect(),
                };
                match_values(&a, &names, &a.list(0), false)
            }
            "test_result_execute" => self.execute(run),
            "test_message" => self.test_message(&a, run),
            other => return Err(format!("unknown testsuite test {other}")),
        })
    }
}

impl Suite<'_> {
    fn test_message(&mut self, a: &Args, run: &mut RunView<'_, '_>) -> bool {
        let index = match a.positional.last() {
            Some(Value::Number(n)) => *n as usize,
            _ => 0,
        };
        if a.tags.contains_key("smtp") {
            let Some(sent) = self.smtp.get(index).cloned() else {
                return false;
            };
            self.set_message(run, sent.message);
            self.envelope.from = sent.from;
            self.envelope.to = sent.to;
            self.sync_envelope(run);
            true
        } else {
            let folder = a.tag_str("folder").or(a.tag_str("mailbox"));
            let Some((message, flags)) = folder
                .and_then(|f| self.mailboxes.get(&mailbox_name(&f)))
                .and_then(|m| m.get(index))
                .cloned()
            else {
                return false;
            };
            self.set_message(run, message);
            // The message's flags are the internal variable's value from here on, as in
            // Pigeonhole's testsuite.
            run.set_flags(flags);
            true
        }
    }
}

fn verbose(line: &str) {
    if std::env::var_os("PIGEONHOLE_VERBOSE").is_some() {
        println!("{line}");
    }
}

/// Runs one `.svtest` source; `Err` says what failed.
fn run_file(path: &Path, source: &str) -> Result<(), String> {
    let dir = path.parent().expect("a directory").to_path_buf();
    let host = SuiteHost {
        dir,
        mailboxes: RefCell::new(["INBOX".to_string()].into_iter().collect()),
        seen: RefCell::default(),
    };
    let limits = Limits {
        // The suite's scripts are large and some loop over many tests.
        script_bytes_max: 1 << 20,
        instructions_max: 1_000_000,
        // Pigeonhole's sieve_max_redirects and sieve_max_actions defaults (4 and 32) are
        // ours too; it has no bound on vacation actions.
        vacation_max: 64,
        header_edits_max: 1024,
        ..Limits::default()
    };
    let script = sieve::compile_with(source, &limits, &extensions())
        .map_err(|e| format!("compile error: {e}"))?;
    let envelope = envelope_of(DEFAULT_MESSAGE.as_bytes());
    let context = Context {
        envelope: envelope.clone(),
        now: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64),
        zone_minutes: 0,
        environment: vec![
            ("domain".into(), "example.com".into()),
            ("host".into(), "mx.example.com".into()),
            ("name".into(), "Pigeonhole Sieve".into()),
            ("version".into(), "0.5".into()),
            ("location".into(), "MS".into()),
            ("phase".into(), "during".into()),
        ],
        ..Context::default()
    };
    let mut suite = Suite {
        host: &host,
        test: None,
        log: Vec::new(),
        compiled: None,
        binaries: BTreeMap::new(),
        extra: Vec::new(),
        extra_keep: true,
        extra_message: None,
        executed: 0,
        keep_executed: false,
        smtp: Vec::new(),
        mailboxes: [("INBOX".to_string(), Vec::new())].into_iter().collect(),
        config: BTreeMap::new(),
        envelope,
        replies: 0,
        original: DEFAULT_MESSAGE.as_bytes().to_vec(),
    };
    sieve::run_with(
        &script,
        DEFAULT_MESSAGE.as_bytes(),
        &context,
        &host,
        &limits,
        &mut suite,
    )
    .map_err(|e| e.message)?;
    Ok(())
}

/// Every `.svtest` file under `tests/` (and `test-address.svtest.in`), relative paths.
fn files() -> Vec<String> {
    let mut out = Vec::new();
    let mut dirs = vec![PathBuf::from(ROOT).join("tests")];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).expect("the vendored suite").flatten() {
            let p = entry.path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                let name = p.to_string_lossy().into_owned();
                if name.ends_with(".svtest") || name.ends_with(".svtest.in") {
                    let rel = p.strip_prefix(ROOT).expect("under the root");
                    out.push(rel.to_string_lossy().trim_end_matches(".in").to_string());
                }
            }
        }
    }
    out.sort();
    out
}

fn source_of(rel: &str) -> String {
    let path = PathBuf::from(ROOT).join(rel);
    match std::fs::read_to_string(&path) {
        Ok(s) => s,
        // test-address.svtest is generated from its .in; the variant for a Dovecot without
        // mail_utf8 (the `#UTF8#` lines dropped).
        Err(_) => std::fs::read_to_string(format!("{}.in", path.display()))
            .expect("the .svtest or its .in")
            .lines()
            .filter(|l| !l.starts_with("#UTF8#"))
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Pass,
    Fail,
    Skip,
}

fn expected() -> BTreeMap<String, (Expect, String)> {
    let text = std::fs::read_to_string(PathBuf::from(ROOT).join("EXPECTED")).expect("EXPECTED");
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut parts = line.splitn(3, char::is_whitespace);
        let verdict = parts.next().unwrap_or("");
        let file = parts.next().unwrap_or("").to_string();
        let reason = parts.next().unwrap_or("").trim().to_string();
        let verdict = match verdict {
            "pass" => Expect::Pass,
            "fail" => Expect::Fail,
            "skip" => Expect::Skip,
            other => panic!("EXPECTED: unknown verdict {other:?} in {line:?}"),
        };
        out.insert(file, (verdict, reason));
    }
    out
}

#[test]
fn pigeonhole_suite() {
    let expected = expected();
    let only = std::env::var("PIGEONHOLE_ONLY").ok();
    let all = std::env::var_os("PIGEONHOLE_ALL").is_some();
    let mut passed = Vec::new();
    let mut failed = Vec::new();
    let mut skipped = 0;
    let mut wrong = Vec::new();
    let files = files();
    for file in &expected {
        if !files.contains(file.0) {
            wrong.push(format!(
                "EXPECTED lists {}, which is not in the suite",
                file.0
            ));
        }
    }
    for rel in &files {
        if only.as_ref().is_some_and(|o| !rel.contains(o.as_str())) {
            continue;
        }
        let (want, reason) = expected
            .get(rel)
            .cloned()
            .unwrap_or((Expect::Fail, "not listed in EXPECTED".into()));
        if want == Expect::Skip && !all && only.is_none() {
            skipped += 1;
            continue;
        }
        let path = PathBuf::from(ROOT).join(rel);
        let source = source_of(rel);
        let got = std::panic::catch_unwind(|| run_file(&path, &source))
            .unwrap_or_else(|_| Err("panicked".into()));
        // Pigeonhole runs tests/failures/ with -F: the file must fail (and not crash).
        let got = if rel.starts_with("tests/failures/") {
            match got {
                Ok(()) => Err("expected to fail (run with -F), but passed".to_string()),
                Err(e) if e == "panicked" => Err(e),
                Err(_) => Ok(()),
            }
        } else {
            got
        };
        match &got {
            Ok(()) => {
                verbose(&format!("PASS {rel}"));
                passed.push(rel.clone());
                if want == Expect::Fail {
                    wrong.push(format!(
                        "{rel} passes now but EXPECTED says fail ({reason}): mark it pass"
                    ));
                }
            }
            Err(e) => {
                verbose(&format!("FAIL {rel}: {e}"));
                failed.push(rel.clone());
                if want == Expect::Pass {
                    wrong.push(format!("{rel} no longer passes: {e}"));
                }
            }
        }
        if !expected.contains_key(rel) {
            wrong.push(format!(
                "{rel} is not in EXPECTED (it {})",
                if got.is_ok() { "passes" } else { "fails" }
            ));
        }
    }
    println!(
        "Pigeonhole suite: {} passed, {} failed, {} skipped (of {} files)",
        passed.len(),
        failed.len(),
        skipped,
        files.len()
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
