//! Users' mail rules at final delivery: the active Sieve script (RFC 5228) of each recipient
//! runs on its copy before the copy is stored, wherever that happens (queue delivery, a copy
//! handed over by another node), because both come through [`crate::Deposit`].
//!
//! What a run decides becomes, for the copy: the folders it is stored in (keep, fileinto,
//! with flags), nothing (discard, or only redirects), or a refusal (reject/ereject, which
//! the caller turns into a DSN or an LMTP refusal). Mail the rules send (redirects, vacation
//! replies) goes through the [`Outbox`] before the copy is stored, so a copy is never
//! acknowledged before what it caused is durable.
//!
//! **A rule never loses mail.** A script that does not compile, fails at run time, names a
//! folder that cannot be used or whose outgoing mail cannot be queued leaves the copy in
//! INBOX (RFC 5228 2.10.6), and the reason is logged (`event=sieve_error`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use directory::Directory;
use sieve::{Action, Location};
use store::{Flags, Mailstore as _};
use telemetry::DeliveryEvents;

/// Compiled scripts kept (users x scripts); past it the cache starts again empty.
const COMPILED_MAX: usize = 10_000;

/// How long a run may wait for the directory (the duplicate test, a vacation's record).
const TRACKING_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Where the rules' own mail goes: the queue, durable before these return.
pub trait Outbox: Send + Sync {
    /// Queues `content` for `to`, redirected by `user`'s rules; the implementation rewrites
    /// `original_sender` (SRS) so the next hop's SPF check passes. The queue id.
    fn redirect(
        &self,
        user: &str,
        original_sender: &str,
        to: &str,
        content: Vec<u8>,
    ) -> Result<u64, String>;
    /// Queues an automatic reply from `user` to `to` with a null reverse path (RFC 3834 3.3),
    /// DKIM-signed when `user`'s domain has a key. The queue id.
    fn reply(&self, user: &str, to: &str, content: Vec<u8>) -> Result<u64, String>;
}

/// The envelope of a copy the rules run on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Envelope {
    /// MAIL FROM, empty for the null sender.
    pub sender: String,
    /// The recipient address as given at RCPT (an alias, a subaddress, or the user).
    pub recipient: String,
}

/// Where a copy goes after the rules ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disposition {
    /// Store it in each of these folders (never empty).
    Store {
        folders: Vec<Placement>,
        /// The message as the rules edited it (editheader), when they did.
        edited: Option<Vec<u8>>,
    },
    /// Nothing to store: discarded, or only sent on (redirect).
    Disposed,
    /// Refused by the user's rules (RFC 5429), with the reason to give the sender.
    Rejected { reason: String },
}

/// One folder a copy is stored in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub folder: String,
    pub flags: Flags,
    pub keywords: Vec<String>,
}

impl Placement {
    fn default_folder(folder: &str) -> Placement {
        Placement {
            folder: folder.to_string(),
            flags: Flags::EMPTY,
            keywords: Vec::new(),
        }
    }
}

/// Identifies a copy in the rules' log lines: its queue id here, or the origin another node
/// gave.
#[derive(Debug, Clone, Copy)]
pub enum CopyId<'a> {
    Queued(u64),
    HandedOver(&'a str),
}

/// The rules of every user, compiled on first use. Cheap to share (`Arc`).
pub struct Rules {
    directory: Directory,
    store: Arc<store::Store>,
    outbox: Arc<dyn Outbox>,
    events: Arc<dyn DeliveryEvents>,
    limits: sieve::Limits,
    /// This host's name (the `environment` items "host" and "domain").
    hostname: String,
    runtime: tokio::runtime::Handle,
    /// (user, script name or `:global:name`) -> (its source, what compiling it gave).
    compiled: Mutex<HashMap<(String, String), CompiledScript>>,
}

type CompiledScript = (Arc<str>, Result<sieve::Script, sieve::CompileError>);

impl Rules {
    pub fn new(
        directory: Directory,
        store: Arc<store::Store>,
        outbox: Arc<dyn Outbox>,
        events: Arc<dyn DeliveryEvents>,
        limits: sieve::Limits,
        hostname: String,
        runtime: tokio::runtime::Handle,
    ) -> Rules {
        Rules {
            directory,
            store,
            outbox,
            events,
            limits,
            hostname,
            runtime,
            compiled: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `user` has an active script (no run, no I/O).
    pub fn active(&self, user: &str) -> bool {
        self.directory
            .cache()
            .sieve_scripts(user)
            .is_some_and(|s| s.active.is_some())
    }

    /// `user`'s active script compiled, if it has one that compiles. `Err` carries the
    /// script's name and the compile error.
    fn active_script(&self, user: &str) -> Option<Result<sieve::Script, String>> {
        let scripts = self.directory.cache().sieve_scripts(user)?;
        let name = scripts.active.as_ref()?;
        let source = scripts.get(name)?;
        Some(
            self.compile(user, name, source)
                .map_err(|e| format!("script {name:?}: {e}")),
        )
    }

    fn compile(
        &self,
        user: &str,
        name: &str,
        source: &Arc<str>,
    ) -> Result<sieve::Script, sieve::CompileError> {
        let key = (user.to_string(), name.to_string());
        let compiled = self.compiled.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((cached, result)) = compiled.get(&key)
            && (Arc::ptr_eq(cached, source) || **cached == **source)
        {
            return result.clone();
        }
        drop(compiled);
        let result = sieve::compile(source, &self.limits);
        let mut compiled = self.compiled.lock().unwrap_or_else(|p| p.into_inner());
        if compiled.len() >= COMPILED_MAX {
            compiled.clear();
        }
        compiled.insert(key, (source.clone(), result.clone()));
        result
    }

    /// What `user`'s active script would do with this message, without doing any of it
    /// (no mail sent, nothing recorded): for a server that can still refuse the message
    /// (LMTP's per-recipient reply, SMTP before its `250`). `Some(reason)` if it rejects.
    /// `session` names the arriving message in the `sieve` line of a refusal.
    pub fn would_reject(
        &self,
        session: &str,
        user: &str,
        envelope: &Envelope,
        content: &[u8],
    ) -> Option<String> {
        let script = self.active_script(user)?.ok()?;
        if !script.may_reject() {
            return None;
        }
        let host = Host {
            rules: self,
            user,
            dry_run: true,
        };
        let outcome = sieve::run(
            &script,
            content,
            &self.context(envelope, content),
            &host,
            &self.limits,
        )
        .ok()?;
        let reason = outcome.actions.into_iter().find_map(|a| match a {
            Action::Reject { reason, .. } => Some(reason),
            _ => None,
        })?;
        self.events.sieve_action(
            telemetry::SieveCopy::Arriving(session),
            user,
            "refused",
            &reason,
        );
        Some(reason)
    }

    /// Runs `user`'s active script on a copy and carries out what it sends (redirects,
    /// vacation replies); returns where the copy goes. Without an active script, and for
    /// `keep` (RFC 5228 4.3: "the default location"): `default_folder` (INBOX, or Junk for
    /// a copy the spam filter flagged, docs/spam.md 2).
    pub fn apply(
        &self,
        id: CopyId<'_>,
        user: &str,
        envelope: &Envelope,
        content: &[u8],
        default_folder: &str,
    ) -> Disposition {
        let keep = || Disposition::Store {
            folders: vec![Placement::default_folder(default_folder)],
            edited: None,
        };
        let script = match self.active_script(user) {
            None => return keep(),
            Some(Ok(script)) => script,
            Some(Err(e)) => {
                self.events.sieve_error(copy_id(id), user, &e);
                return keep();
            }
        };
        let host = Host {
            rules: self,
            user,
            dry_run: false,
        };
        let outcome = match sieve::run(
            &script,
            content,
            &self.context(envelope, content),
            &host,
            &self.limits,
        ) {
            Ok(outcome) => outcome,
            Err(e) => {
                self.events.sieve_error(copy_id(id), user, &e.message);
                return keep();
            }
        };
        match self.carry_out(id, user, envelope, content, outcome, default_folder) {
            Ok(disposition) => disposition,
            Err(e) => {
                self.events.sieve_error(copy_id(id), user, &e);
                keep()
            }
        }
    }

    /// Turns a run's actions into a disposition, sending what they send. `Err` (keep in
    /// INBOX) when a folder cannot be used or the rules' mail cannot be queued: then no
    /// action after the failing one is taken.
    fn carry_out(
        &self,
        id: CopyId<'_>,
        user: &str,
        envelope: &Envelope,
        content: &[u8],
        outcome: sieve::Outcome,
        default_folder: &str,
    ) -> Result<Disposition, String> {
        let message = outcome.edited_message.as_deref().unwrap_or(content);
        let mut folders: Vec<Placement> = Vec::new();
        let mut rejected = None;
        for action in &outcome.actions {
            match action {
                Action::Keep { flags } => {
                    folders.push(placement(default_folder, flags));
                    self.events
                        .sieve_action(copy_id(id), user, "keep", default_folder);
                }
                Action::FileInto {
                    mailbox,
                    flags,
                    create,
                } => {
                    let folder = self.usable_folder(user, mailbox, *create)?;
                    self.events
                        .sieve_action(copy_id(id), user, "fileinto", &folder);
                    folders.push(placement(&folder, flags));
                }
                Action::Redirect { address } => {
                    if let Some(why) = redirect_loop(message, address) {
                        return Err(format!("redirect to {address}: {why}"));
                    }
                    self.outbox
                        .redirect(user, &envelope.sender, address, message.to_vec())
                        .map_err(|e| format!("redirect to {address}: {e}"))?;
                    self.events
                        .sieve_action(copy_id(id), user, "redirect", address);
                }
                Action::Reject { reason, extended } => {
                    let action = if *extended { "ereject" } else { "reject" };
                    self.events.sieve_action(copy_id(id), user, action, reason);
                    rejected = Some(reason.clone());
                }
                Action::Vacation(vacation) => {
                    self.vacation(id, user, envelope, content, vacation)?;
                }
            }
        }
        for (handle, tracked, period) in &outcome.duplicate_marks {
            self.track(user, &format!("dup:{handle}:{tracked}"), *period);
        }
        if let Some(reason) = rejected {
            return Ok(Disposition::Rejected { reason });
        }
        if folders.is_empty() {
            self.events.sieve_action(copy_id(id), user, "discard", "");
            return Ok(Disposition::Disposed);
        }
        // RFC 5228 2.10.3: the same folder twice is one copy, with the flags together.
        let mut merged: Vec<Placement> = Vec::new();
        for p in folders {
            match merged.iter_mut().find(|m| m.folder == p.folder) {
                Some(m) => {
                    m.flags = m.flags.union(p.flags);
                    for k in p.keywords {
                        if !m.keywords.contains(&k) {
                            m.keywords.push(k);
                        }
                    }
                }
                None => merged.push(p),
            }
        }
        Ok(Disposition::Store {
            folders: merged,
            edited: outcome.edited_message,
        })
    }

    /// The folder `fileinto` names, made if `create` (RFC 5490 3.2), or why it cannot be
    /// used (RFC 5228 4.1 lets a missing folder be an error: the copy stays in INBOX).
    fn usable_folder(&self, user: &str, mailbox: &str, create: bool) -> Result<String, String> {
        let folder = if mailbox.eq_ignore_ascii_case("INBOX") {
            "INBOX".to_string()
        } else {
            mailbox.to_string()
        };
        if self.store.list_folders(user).contains(&folder) {
            return Ok(folder);
        }
        if !create {
            return Err(format!(
                "fileinto {folder:?}: no such folder (and no :create)"
            ));
        }
        self.store
            .create_folder_path(user, &folder)
            .map_err(|e| format!("fileinto :create {folder:?}: {e}"))?;
        Ok(folder)
    }

    /// A vacation action: RFC 3834's and RFC 5230's rules, once per sender and handle per
    /// period, then the reply queued and recorded.
    fn vacation(
        &self,
        id: CopyId<'_>,
        user: &str,
        envelope: &Envelope,
        content: &[u8],
        vacation: &sieve::Vacation,
    ) -> Result<(), String> {
        let mut own = vec![user.to_string(), envelope.recipient.clone()];
        own.extend(vacation.addresses.iter().cloned());
        let sieve_envelope = sieve_envelope(envelope);
        if let Err(why) = sieve::vacation::check(content, &sieve_envelope, &own) {
            self.events
                .sieve_action(copy_id(id), user, "vacation_skipped", &format!("{why:?}"));
            return Ok(());
        }
        let sender = envelope.sender.to_ascii_lowercase();
        let key = format!("vac:{}:{}", short_hash(&vacation.handle), sender);
        if self.tracked(user, &key) {
            self.events
                .sieve_action(copy_id(id), user, "vacation_skipped", "already replied");
            return Ok(());
        }
        let now = now_s();
        // RFC 5230 4.5/5.4: without :from, the user's address the sender wrote to (an alias
        // named in :addresses, as Pigeonhole picks it), else the user's own.
        let from = vacation
            .from
            .clone()
            .or_else(|| sieve::vacation::reply_from(content, &sieve_envelope, &vacation.addresses))
            .unwrap_or_else(|| user.to_string());
        let reply = sieve::vacation::compose(
            vacation,
            content,
            &from,
            &envelope.sender,
            &self.hostname,
            &rfc5322_date(now),
            &format!("{:x}.{}", now, short_hash(&format!("{user}{sender}"))),
        );
        self.outbox
            .reply(user, &envelope.sender, reply)
            .map_err(|e| format!("vacation reply to {}: {e}", envelope.sender))?;
        self.track(user, &key, vacation.period_seconds);
        self.events
            .sieve_action(copy_id(id), user, "vacation", &envelope.sender);
        Ok(())
    }

    /// RFC 5235: `spamtest` and `spamtestplus` read our filter's verdict in the copy's
    /// `X-Spam-*` fields (docs/spam.md 2; arriving fields of those names were removed).
    fn context(&self, envelope: &Envelope, content: &[u8]) -> sieve::Context {
        let spam = spam::status_of(content).map(|status| status.spamtest());
        let now = now_s();
        let domain = self
            .hostname
            .split_once('.')
            .map_or(self.hostname.as_str(), |(_, d)| d);
        sieve::Context {
            envelope: sieve_envelope(envelope),
            now,
            zone_minutes: 0,
            environment: vec![
                ("domain".into(), domain.to_string()),
                ("host".into(), self.hostname.clone()),
                ("location".into(), "MDA".into()),
                ("name".into(), "mailstow".into()),
                ("phase".into(), "during".into()),
                ("version".into(), env!("CARGO_PKG_VERSION").into()),
            ],
            spam_score: spam.map(|(value, _)| value),
            spam_percent: spam.map(|(_, percent)| percent),
            virus_score: None,
        }
    }

    /// Whether `user` has tracking row `key` (a directory read; a directory that does not
    /// answer counts as "not seen": a second vacation reply is better than a lost message).
    fn tracked(&self, user: &str, key: &str) -> bool {
        let directory = self.directory.clone();
        let (user, key) = (user.to_string(), key.to_string());
        self.wait(async move { directory.sieve_tracked(&user, &key, now_s()).await })
            .unwrap_or(false)
    }

    fn track(&self, user: &str, key: &str, period_seconds: u64) {
        let directory = self.directory.clone();
        let (user, key) = (user.to_string(), key.to_string());
        let now = now_s();
        let expires = now.saturating_add(i64::try_from(period_seconds).unwrap_or(i64::MAX));
        if self
            .wait(async move { directory.sieve_track(&user, &key, expires, now).await })
            .is_none()
        {
            tracing::warn!(event = "sieve_error", error = "tracking row not written");
        }
    }

    /// Runs a directory call on the runtime from this (blocking) thread, for at most
    /// [`TRACKING_WAIT`]. `None` when it failed or took too long.
    fn wait<T: Send + 'static>(
        &self,
        call: impl std::future::Future<Output = Result<T, directory::DirectoryError>> + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.runtime.spawn(async move {
            let _ = tx.send(tokio::time::timeout(TRACKING_WAIT, call).await);
        });
        match rx.recv_timeout(TRACKING_WAIT + std::time::Duration::from_secs(1)) {
            Ok(Ok(Ok(value))) => Some(value),
            Ok(Ok(Err(e))) => {
                tracing::warn!(event = "sieve_error", error = %e, msg = "directory");
                None
            }
            _ => None,
        }
    }
}

/// A reject's reason as one line of an SMTP reply or a DSN's diagnostic (RFC 5429 2.1.1:
/// the reason is the script author's text): control characters become spaces, and at most
/// 200 characters are kept.
pub fn refusal_text(reason: &str) -> String {
    let line: String = reason
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(200)
        .collect();
    let line = line.trim();
    if line.is_empty() {
        "rejected by the recipient's mail rules".to_string()
    } else {
        format!("rejected by the recipient's mail rules: {line}")
    }
}

/// What a run asks while it runs.
struct Host<'r> {
    rules: &'r Rules,
    user: &'r str,
    /// A run that only looks (`would_reject`): no directory reads.
    dry_run: bool,
}

impl sieve::Host for Host<'_> {
    fn mailbox_exists(&self, name: &str) -> bool {
        name.eq_ignore_ascii_case("INBOX")
            || self
                .rules
                .store
                .list_folders(self.user)
                .iter()
                .any(|f| f == name)
    }

    fn duplicate(&self, handle: &str, id: &str, _period_seconds: u64) -> bool {
        !self.dry_run && self.rules.tracked(self.user, &format!("dup:{handle}:{id}"))
    }

    fn include(&self, location: Location, name: &str) -> Result<sieve::Script, String> {
        let cache = self.rules.directory.cache();
        let (key, source) = match location {
            Location::Personal => (
                name.to_string(),
                cache
                    .sieve_scripts(self.user)
                    .and_then(|s| s.get(name).cloned()),
            ),
            Location::Global => (format!(":global:{name}"), cache.sieve_global(name)),
        };
        let source = source.ok_or_else(|| format!("no script {name:?} to include"))?;
        self.rules
            .compile(self.user, &key, &source)
            .map_err(|e| format!("included script {name:?}: {e}"))
    }
}

fn sieve_envelope(envelope: &Envelope) -> sieve::Envelope {
    sieve::Envelope {
        from: envelope.sender.clone(),
        to: envelope.recipient.clone(),
        orig_to: None,
        auth: None,
    }
}

/// Delivered-To fields a message may carry before a redirect is refused as a loop.
const DELIVERED_TO_MAX: usize = 25;

/// RFC 5228 4.2: "implementations SHOULD take measures to implement loop control". Local
/// delivery adds `Delivered-To: user` (as Postfix does): a message that was delivered to the
/// redirect's target already, or has passed through too many mailboxes, is looping.
fn redirect_loop(message: &[u8], address: &str) -> Option<&'static str> {
    let mut count = 0;
    for line in message.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            break;
        }
        let Some(value) = line
            .get(..13)
            .filter(|name| name.eq_ignore_ascii_case(b"Delivered-To:"))
            .map(|_| &line[13..])
        else {
            continue;
        };
        count += 1;
        if String::from_utf8_lossy(value)
            .trim()
            .eq_ignore_ascii_case(address.trim())
        {
            return Some("the message was delivered there already (a loop)");
        }
        if count >= DELIVERED_TO_MAX {
            return Some("the message passed through too many mailboxes (a loop)");
        }
    }
    None
}

/// imap4flags' flags (RFC 5232) as the store keeps them: system flags, then keywords.
fn placement(folder: &str, flags: &[String]) -> Placement {
    let mut placement = Placement {
        folder: folder.to_string(),
        flags: Flags::EMPTY,
        keywords: Vec::new(),
    };
    for flag in flags {
        match Flags::parse(flag) {
            Some(f) => placement.flags = placement.flags.union(f),
            // `\Recent` or an unknown system flag cannot be set (RFC 5232 3).
            None if flag.starts_with('\\') => {}
            None => {
                if !placement
                    .keywords
                    .iter()
                    .any(|k| k.eq_ignore_ascii_case(flag))
                {
                    placement.keywords.push(flag.clone());
                }
            }
        }
    }
    placement
}

fn copy_id(id: CopyId<'_>) -> telemetry::SieveCopy<'_> {
    match id {
        CopyId::Queued(queue_id) => telemetry::SieveCopy::Queued(queue_id),
        CopyId::HandedOver(origin) => telemetry::SieveCopy::HandedOver(origin),
    }
}

/// A short stable hash (FNV-1a, 64 bits, hex) for tracking keys of bounded length.
fn short_hash(text: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// RFC 5322 3.3 date-time in UTC.
fn rfc5322_date(unix: i64) -> String {
    mail_parser::DateTime::from_timestamp(unix).to_rfc822()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_rfc5322() {
        assert_eq!(rfc5322_date(0), "Thu, 1 Jan 1970 00:00:00 +0000");
    }

    #[test]
    fn redirect_loops_are_seen_in_delivered_to() {
        let message = b"Return-Path: <x@y>\r\nDelivered-To: b@ours\r\nReturn-Path: <x@y>\r\nDelivered-To: a@ours\r\nSubject: s\r\n\r\nDelivered-To: c@ours\r\n";
        assert!(redirect_loop(message, "A@ours").is_some());
        assert!(redirect_loop(message, "b@ours").is_some());
        assert!(
            redirect_loop(message, "c@ours").is_none(),
            "the body is not looked at"
        );
        let many = "Delivered-To: x@ours\r\n".repeat(DELIVERED_TO_MAX) + "\r\n";
        assert!(redirect_loop(many.as_bytes(), "z@ours").is_some());
    }

    #[test]
    fn reasons_become_one_line() {
        assert_eq!(
            refusal_text("no\r\nthanks"),
            "rejected by the recipient's mail rules: no  thanks"
        );
        assert_eq!(refusal_text(""), "rejected by the recipient's mail rules");
        assert!(refusal_text(&"x".repeat(1000)).len() < 260);
    }

    #[test]
    fn flags_become_system_flags_and_keywords() {
        let p = placement(
            "Work",
            &[
                "\\Seen".into(),
                "\\flagged".into(),
                "$Label1".into(),
                "\\Recent".into(),
            ],
        );
        assert_eq!(p.flags, Flags::SEEN.union(Flags::FLAGGED));
        assert_eq!(p.keywords, vec!["$Label1".to_string()]);
    }
}
