//! The web view's listener and its [`web::Backend`] over this server's directory and store.
//!
//! Logins go through the same throttle and log line as IMAP's (`conn::check_login`, protocol
//! `web`). Every store call names the session's user, so a folder or UID of another user is
//! simply not found. In a cluster every node's view serves every user: requests of another
//! node's users are forwarded to it (`web_cluster.rs`).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use store::Mailstore as _;
use web::{BackendError, Flag, FolderInfo, FolderPage, Listed, LoginError, ScriptError, Stored};

use crate::login::{Login, check_login};
use crate::shell::Shell;

/// Where the view keeps a copy of what a user sends.
const SENT: &str = "Sent";

/// A TLS handshake that takes longer is dropped (a client that connects and sends nothing
/// holds no task past it).
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A request's header must arrive within this, also after a keep-alive pause (hyper's
/// `header_read_timeout`): a client that trickles a header or idles holds its connection no
/// longer.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// No connection lives longer, whatever it does (requests have their own deadline in the
/// web crate: `request_timeout`).
const CONNECTION_LIFETIME_MAX: Duration = Duration::from_secs(600);

/// What the web view needs beside the shell: the store, the road new mail takes into it
/// (the Sent copy), the queue (sending), the DKIM signers, and the admin pages.
pub(crate) struct WebParts {
    pub(crate) store: Arc<store::Store>,
    pub(crate) deposit: Arc<mailboxes::Deposit>,
    pub(crate) queue: Arc<queue::Queue>,
    pub(crate) wakeup: Arc<delivery::Wakeup>,
    pub(crate) signers: Arc<crate::dkim::Signers>,
    /// Messages made durable in the queue since start.
    pub(crate) accepted: Arc<std::sync::atomic::AtomicU64>,
    /// The operator's commands, for the admin pages.
    pub(crate) operations: Arc<admin::Operations>,
    /// Learns from moves into and out of Junk (docs/spam.md 3).
    pub(crate) filter: Arc<filter::Filter>,
    /// What the autoconfiguration documents and the MTA-STS policy describe.
    pub(crate) published: Arc<web::Published>,
}

pub(crate) struct ServerBackend {
    shell: Arc<Shell>,
    parts: Arc<WebParts>,
}

fn store_error(e: store::StoreError) -> BackendError {
    match e {
        store::StoreError::NoSuchUser(_)
        | store::StoreError::NoSuchFolder { .. }
        | store::StoreError::NoSuchMessage { .. }
        | store::StoreError::InvalidName { .. } => BackendError::NotFound,
        other => BackendError::Failed(other.to_string()),
    }
}

/// A list row: the index's entry and the summary stored with the message.
fn listed(m: &store::MessageInfo, s: store::Summary) -> Listed {
    Listed {
        uid: m.uid,
        received_at: m.internal_date,
        size: m.size,
        from: s.from,
        to: s.to,
        subject: s.subject,
        sent_at: s.date,
        has_attachment: s.has_attachment,
        preview: s.preview,
        seen: m.flags.contains(store::Flags::SEEN),
        flagged: m.flags.contains(store::Flags::FLAGGED),
    }
}

/// The directory's errors for the Rules pages, mapped here once: what the user did wrong
/// (a name, a limit, an active script) is a sentence for the page; a missing script or user
/// is not found; anything else is the directory being unavailable.
fn script_error(e: directory::DirectoryError) -> ScriptError {
    use directory::DirectoryError as E;
    match e {
        E::NoSuchScript { .. } | E::NoSuchUser(_) => ScriptError::Backend(BackendError::NotFound),
        E::ScriptExists { .. } | E::ScriptActive(_) | E::InvalidScriptName { .. } | E::Limit(_) => {
            ScriptError::Refused(e.to_string())
        }
        other => ScriptError::Backend(BackendError::Unavailable(other.to_string())),
    }
}

fn directory_error(e: directory::DirectoryError) -> BackendError {
    match script_error(e) {
        ScriptError::Backend(e) => e,
        ScriptError::Refused(why) | ScriptError::Invalid { message: why, .. } => {
            BackendError::Failed(why)
        }
    }
}

impl ServerBackend {
    /// Checks a script with the interpreter and the server's limits, as `mailstow sieve put`
    /// does before it stores one.
    fn compile(&self, source: &str) -> Result<(), ScriptError> {
        sieve::compile(source, &self.shell.config.sieve)
            .map(|_| ())
            .map_err(|e| ScriptError::Invalid {
                line: e.line,
                column: e.column,
                message: e.message,
            })
    }

    /// The user's mailbox is here and usable now.
    fn reachable(&self, user: &str) -> Result<(), BackendError> {
        if self.parts.deposit.gate().held(user) {
            return Err(BackendError::Unavailable("it is being moved".into()));
        }
        if let Some(cluster) = &self.shell.cluster {
            match cluster.home(&self.shell.directory, user) {
                cluster::Home::Local => {}
                cluster::Home::Unavailable(why) => {
                    return Err(BackendError::Unavailable(why));
                }
                cluster::Home::Node(owner) => {
                    return Err(BackendError::Unavailable(format!(
                        "it is served by node {}",
                        owner.name
                    )));
                }
            }
        }
        Ok(())
    }

    /// The store's page, or an empty one for an INBOX not made yet (no mail ever came).
    fn page_or_empty_inbox(
        &self,
        user: &str,
        folder: &str,
        before: Option<u32>,
        count: usize,
    ) -> Result<store::Page, store::StoreError> {
        match self.parts.store.page(user, folder, before, count) {
            Err(store::StoreError::NoSuchUser(_) | store::StoreError::NoSuchFolder { .. })
                if folder == "INBOX" =>
            {
                Ok(store::Page {
                    status: store::FolderStatus {
                        messages: 0,
                        bytes: 0,
                        uidvalidity: 0,
                        uidnext: 1,
                        highest_modseq: 0,
                    },
                    unseen: 0,
                    messages: Vec::new(),
                })
            }
            other => other,
        }
    }

    /// Whether `uid` is in the folder, and its flags.
    fn flags(&self, user: &str, folder: &str, uid: u32) -> Result<store::Flags, BackendError> {
        let page = self
            .parts
            .store
            .page(user, folder, uid.checked_add(1), 1)
            .map_err(store_error)?;
        page.messages
            .first()
            .filter(|m| m.uid == uid)
            .map(|m| m.flags)
            .ok_or(BackendError::NotFound)
    }
}

impl web::Backend for ServerBackend {
    async fn login(
        &self,
        username: &str,
        password: &str,
        client: IpAddr,
    ) -> Result<String, LoginError> {
        let attempt = Login {
            proto: "web",
            mechanism: "password",
            username,
            ip: client,
        };
        let user = match check_login(&self.shell, &attempt, password).await {
            Ok(user) => user,
            Err(refused) => {
                return Err(match refused.temporary() {
                    Some(text) => LoginError::Temporary(text.to_string()),
                    None => LoginError::BadCredentials,
                });
            }
        };
        if let Err(BackendError::Unavailable(why)) = self.reachable(&user) {
            attempt.unavailable(&self.shell, &user, &why);
            return Err(LoginError::Temporary(format!("your mailbox: {why}")));
        }
        attempt.ok(&self.shell, &user);
        Ok(user)
    }

    fn logout(&self, user: &str, client: IpAddr) {
        tracing::info!(event = "logout", proto = "web", user = %telemetry::shown(user), client = %client);
    }

    async fn account(&self, user: &str) -> Result<web::Account, BackendError> {
        self.reachable(user)?;
        let info = self
            .shell
            .directory
            .user(user)
            .await
            .map_err(|e| BackendError::Unavailable(e.to_string()))?
            .ok_or(BackendError::NotFound)?;
        let usage = self.parts.store.usage(user);
        Ok(web::Account {
            address: info.address,
            used_bytes: usage.bytes,
            used_messages: usage.messages,
            quota_bytes: info.quota_bytes,
            quota_messages: info.quota_messages,
            last_login_at: info.last_login_at,
            logins: self
                .shell
                .directory
                .recent_logins(user)
                .await
                .map_err(|e| BackendError::Unavailable(e.to_string()))?
                .into_iter()
                .map(|l| web::LoginRow {
                    client: l.client,
                    protocol: l.protocol,
                    result: l.result.as_str().to_string(),
                    attempts: l.attempts,
                    first_at: l.first_at,
                    last_at: l.last_at,
                })
                .collect(),
        })
    }

    async fn change_password(
        &self,
        user: &str,
        current: &str,
        new: &str,
        client: IpAddr,
    ) -> Result<(), web::PasswordError> {
        // The current password is checked like a login: throttled, and logged.
        let attempt = Login {
            proto: "web",
            mechanism: "password-change",
            username: user,
            ip: client,
        };
        match check_login(&self.shell, &attempt, current).await {
            Ok(checked) if checked == user => {}
            Ok(_) => return Err(web::PasswordError::WrongPassword),
            Err(refused) => {
                return Err(match refused.temporary() {
                    Some(text) => web::PasswordError::Temporary(text.to_string()),
                    None => web::PasswordError::WrongPassword,
                });
            }
        }
        match self.shell.directory.set_password(user, new).await {
            Ok(()) => Ok(()),
            Err(directory::DirectoryError::InvalidPassword(why)) => {
                Err(web::PasswordError::Refused(why.to_string()))
            }
            Err(e) => Err(web::PasswordError::Temporary(e.to_string())),
        }
    }

    fn folders(&self, user: &str) -> Result<Vec<FolderInfo>, BackendError> {
        self.reachable(user)?;
        let mut names = self.parts.store.list_folders(user);
        // A user who never received mail has no INBOX in the store yet; it is listed
        // anyway, empty (RFC 3501 5.1: INBOX always exists for a user).
        if !names.iter().any(|n| n == "INBOX") {
            names.push("INBOX".into());
        }
        // INBOX first, the rest by name.
        names.sort_by_key(|n| (n != "INBOX", n.clone()));
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            let Ok(page) = self.page_or_empty_inbox(user, &name, None, 0) else {
                continue;
            };
            out.push(FolderInfo {
                name,
                total: page.status.messages,
                unseen: page.unseen,
            });
        }
        Ok(out)
    }

    fn page(
        &self,
        user: &str,
        folder: &str,
        before: Option<u32>,
        count: usize,
    ) -> Result<FolderPage, BackendError> {
        self.reachable(user)?;
        let page = self
            .page_or_empty_inbox(user, folder, before, count)
            .map_err(store_error)?;
        let mut messages = Vec::with_capacity(page.messages.len());
        for m in page.messages {
            // The summary only: a list never reads a message body.
            let s = match self.parts.store.summary(user, folder, m.uid) {
                Ok(s) => s,
                // Expunged between the page and here.
                Err(store::StoreError::NoSuchMessage { .. }) => continue,
                Err(e) => return Err(store_error(e)),
            };
            messages.push(listed(&m, s));
        }
        Ok(FolderPage {
            total: page.status.messages,
            unseen: page.unseen,
            version: page.status.highest_modseq,
            messages,
        })
    }

    fn message(&self, user: &str, folder: &str, uid: u32) -> Result<Stored, BackendError> {
        self.reachable(user)?;
        let flags = self.flags(user, folder, uid)?;
        let content = self
            .parts
            .store
            .read(user, folder, uid)
            .map_err(store_error)?;
        Ok(Stored {
            content,
            seen: flags.contains(store::Flags::SEEN),
            flagged: flags.contains(store::Flags::FLAGGED),
        })
    }

    fn set_flag(
        &self,
        user: &str,
        folder: &str,
        uid: u32,
        flag: Flag,
        on: bool,
    ) -> Result<(), BackendError> {
        self.reachable(user)?;
        self.flags(user, folder, uid)?;
        let flags = match flag {
            Flag::Seen => store::Flags::SEEN,
            Flag::Flagged => store::Flags::FLAGGED,
        };
        let op = if on {
            store::FlagOp::Add
        } else {
            store::FlagOp::Remove
        };
        self.parts
            .store
            .set_flags(user, folder, &[uid], op, flags, &[])
            .map_err(store_error)?;
        Ok(())
    }

    fn move_to(&self, user: &str, folder: &str, uid: u32, dest: &str) -> Result<(), BackendError> {
        self.reachable(user)?;
        if folder == dest {
            return Ok(());
        }
        if dest == web::TRASH {
            match self.parts.store.create_folder(user, dest) {
                Ok(_) | Err(store::StoreError::FolderExists { .. }) => {}
                Err(e) => return Err(store_error(e)),
            }
        }
        self.parts.store.status(user, dest).map_err(store_error)?;
        let info = self
            .parts
            .store
            .page(user, folder, uid.checked_add(1), 1)
            .map_err(store_error)?
            .messages
            .into_iter()
            .find(|m| m.uid == uid)
            .ok_or(BackendError::NotFound)?;
        let content = self
            .parts
            .store
            .read(user, folder, uid)
            .map_err(store_error)?;
        // Copy, then expunge: a crash between the two leaves the message in both folders,
        // never in neither. Within one user's folders the quota's usage ends where it began.
        let appended = self
            .parts
            .store
            .append(
                user,
                dest,
                store::NewMessage {
                    flags: info.flags,
                    keywords: info.keywords,
                    internal_date: info.internal_date,
                    content,
                },
            )
            .map_err(store_error)?;
        self.parts
            .store
            .expunge(user, folder, &[uid])
            .map_err(store_error)?;
        self.parts.filter.filed(filter::Filed {
            user: user.to_string(),
            from: folder.to_string(),
            to: dest.to_string(),
            uids: vec![appended.uid],
        });
        Ok(())
    }

    async fn send(
        &self,
        user: &str,
        recipients: &[String],
        message: Vec<u8>,
        client: IpAddr,
    ) -> Result<(), web::SendError> {
        use web::SendError;
        let started = std::time::Instant::now();
        let (shell, parts) = (&self.shell, &self.parts);
        let live = shell.live();
        if message.len() as u64 > live.config.message_bytes_max {
            return Err(SendError::Refused(format!(
                "the message is larger than {} bytes",
                live.config.message_bytes_max
            )));
        }
        if recipients.len() > live.config.recipients_max {
            return Err(SendError::Refused(format!(
                "more than {} recipients",
                live.config.recipients_max
            )));
        }
        // As the submission service's RCPT: local addresses through the aliases (an
        // unknown one refused), others relayed for the logged-in user.
        let cache = shell.directory.cache();
        let mut targets = Vec::new();
        for recipient in recipients {
            match cache.try_resolve(recipient) {
                Ok(directory::Resolution::Local(expanded)) => {
                    for target in expanded {
                        targets.push(match target {
                            directory::Target::User(u) => u,
                            directory::Target::Remote(a) => a,
                        });
                    }
                }
                Ok(directory::Resolution::UnknownUser) => {
                    return Err(SendError::Recipient(format!(
                        "there is no mailbox {recipient}"
                    )));
                }
                Ok(directory::Resolution::NotLocal) => targets.push(recipient.to_ascii_lowercase()),
                Err(limit) => {
                    return Err(SendError::Recipient(format!("{recipient}: {limit}")));
                }
            }
        }
        targets.sort();
        targets.dedup();
        // RFC 6376: signed with the key of the From: domain, as submission signs.
        let mut signed = Vec::with_capacity(message.len() + 1024);
        let mut dkim_signed = None;
        if let Some(domain) = sender_auth::from_domain(&message)
            && let Some(signer) = parts.signers.for_domain(&shell.directory, &domain)
        {
            match signer.sign(&message) {
                Ok(signature) => {
                    signed.extend_from_slice(signature.as_bytes());
                    dkim_signed = Some(format!("{}:{}", signer.domain(), signer.selector()));
                }
                Err(e) => {
                    tracing::warn!(event = "dkim_error", domain = %telemetry::shown(&domain), error = %e)
                }
            }
        }
        signed.extend_from_slice(&message);
        let size = message.len();
        let durable = {
            let telemetry = shell.telemetry.clone();
            let accepted = parts.accepted.clone();
            let user = user.to_string();
            let to = targets.clone();
            Box::new(move |queue_id| {
                accepted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                telemetry.accepted(
                    &telemetry::Accepted {
                        proto: "web",
                        queue_id,
                        from: &user,
                        to: &to,
                        size,
                        client,
                        user: Some(&user),
                        checks: None,
                        dkim_signed,
                    },
                    started.elapsed(),
                );
            })
        };
        let queued = crate::enqueue::enqueue(
            &parts.queue,
            &parts.wakeup,
            user,
            &targets,
            delivery::now_ms(),
            signed,
            durable,
        );
        match queued.await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::error!(event = "queue_error", error = %e);
                return Err(SendError::Temporary("the queue failed".into()));
            }
            Err(_) => return Err(SendError::Temporary("the server is stopping".into())),
        }
        // A copy in Sent, read (RFC 6154 \Sent); the message is on its way whatever happens
        // to the copy.
        let (store, deposit) = (parts.store.clone(), parts.deposit.clone());
        let user = user.to_string();
        let copy = tokio::task::spawn_blocking(move || {
            if store.status(&user, SENT).is_err() {
                store.create_folder(&user, SENT)?;
            }
            let gate = deposit.gate().clone();
            let shared = gate.shared();
            let copy = mailboxes::Copy {
                append: store::AppendRequest {
                    user,
                    folder: SENT.to_string(),
                    message: store::NewMessage {
                        flags: store::Flags::SEEN,
                        internal_date: (delivery::now_ms() / 1000) as i64,
                        content: message,
                        ..store::NewMessage::default()
                    },
                },
                origin: mailboxes::Origin::Own,
                rules: None,
            };
            match deposit.deposit(&shared, vec![copy]).pop() {
                Some(mailboxes::Deposited::Stored(appended)) => Ok(appended),
                Some(mailboxes::Deposited::Failed(e)) => Err(e),
                _ => Err(store::StoreError::Failed("the mailbox is held".into())),
            }
        })
        .await;
        if !matches!(copy, Ok(Ok(_))) {
            tracing::warn!(event = "web_error", msg = "the copy in Sent was not kept");
        }
        Ok(())
    }

    fn changes(&self, user: &str) -> Result<web::Changes, BackendError> {
        self.reachable(user)?;
        // A member of the user's sessions: woken by the store's observer like IMAP IDLE, and
        // ended (and waited for) when the user is deleted or renamed.
        let member = self
            .shell
            .sessions
            .enter(user, mailboxes::Protocol::Web)
            .map_err(|_| BackendError::Unavailable("the account is being changed".into()))?;
        // The view only needs to know that the stream ends, not why.
        let (ended_tx, ended) = tokio::sync::watch::channel(false);
        let mut revoked = member.revoked.clone();
        tokio::spawn(async move {
            tokio::select! {
                r = revoked.wait_for(Option::is_some) => if r.is_ok() {
                    ended_tx.send_replace(true);
                },
                () = ended_tx.closed() => {}
            }
        });
        Ok(web::Changes {
            changed: member.changes.clone(),
            ended,
            guard: Box::new(member),
        })
    }

    fn expunge(&self, user: &str, folder: &str, uid: u32) -> Result<(), BackendError> {
        self.reachable(user)?;
        self.flags(user, folder, uid)?;
        self.parts
            .store
            .expunge(user, folder, &[uid])
            .map_err(store_error)?;
        Ok(())
    }

    fn expunge_all(&self, user: &str, folder: &str) -> Result<(), BackendError> {
        self.reachable(user)?;
        self.parts
            .store
            .expunge_all(user, folder)
            .map_err(store_error)?;
        Ok(())
    }

    fn search(
        &self,
        user: &str,
        folder: &str,
        query: &str,
        count: usize,
        examined_max: usize,
    ) -> Result<(FolderPage, bool), BackendError> {
        const STEP: usize = 256;
        self.reachable(user)?;
        let needle = query.to_lowercase();
        let mut found = Vec::new();
        let mut examined = 0;
        let mut before = None;
        let (total, unseen, version) = loop {
            let page = self
                .parts
                .store
                .page(user, folder, before, STEP.min(examined_max - examined))
                .map_err(store_error)?;
            let done = page.messages.len() < STEP;
            before = page.messages.last().map(|m| m.uid);
            for m in page.messages {
                examined += 1;
                let Ok(s) = self.parts.store.summary(user, folder, m.uid) else {
                    continue;
                };
                // The summary first (sender, subject, the text's start); the whole text of
                // the message, decoded, only when that did not match.
                let hit = [&s.from, &s.subject, &s.preview]
                    .iter()
                    .any(|field| field.to_lowercase().contains(&needle))
                    || self
                        .parts
                        .store
                        .read(user, folder, m.uid)
                        .ok()
                        .and_then(|content| {
                            mail_parser::MessageParser::default()
                                .parse(&content)
                                .map(|parsed| {
                                    (0..parsed.text_body.len()).any(|i| {
                                        parsed
                                            .body_text(i)
                                            .is_some_and(|t| t.to_lowercase().contains(&needle))
                                    })
                                })
                        })
                        .unwrap_or(false);
                if hit {
                    found.push(listed(&m, s));
                    if found.len() == count {
                        break;
                    }
                }
            }
            if done || found.len() == count || examined >= examined_max {
                break (
                    page.status.messages,
                    page.unseen,
                    page.status.highest_modseq,
                );
            }
        };
        let stopped = examined >= examined_max && found.len() < count;
        Ok((
            FolderPage {
                total,
                unseen,
                version,
                messages: found,
            },
            stopped,
        ))
    }

    fn is_user(&self, user: &str) -> bool {
        self.shell.directory.cache().is_user(user)
    }

    fn is_admin(&self, user: &str) -> bool {
        self.shell.directory.cache().is_admin(user)
    }

    fn serves_domain(&self, domain: &str) -> bool {
        self.shell.directory.cache().is_local_domain(domain)
    }

    async fn sieve_scripts(&self, user: &str) -> Result<Vec<web::ScriptInfo>, BackendError> {
        let scripts = self
            .shell
            .directory
            .sieve_list(user)
            .await
            .map_err(directory_error)?;
        Ok(scripts
            .into_iter()
            .map(|s| web::ScriptInfo {
                name: s.name,
                active: s.active,
                bytes: s.bytes,
            })
            .collect())
    }

    async fn sieve_script(&self, user: &str, name: &str) -> Result<String, BackendError> {
        self.shell
            .directory
            .sieve_get(user, name)
            .await
            .map_err(directory_error)
    }

    async fn sieve_save(
        &self,
        user: &str,
        name: &str,
        source: &str,
        activate: bool,
    ) -> Result<(), ScriptError> {
        self.compile(source)?;
        let directory = &self.shell.directory;
        directory
            .sieve_put(user, name, source)
            .await
            .map_err(script_error)?;
        if activate {
            directory
                .sieve_activate(user, Some(name))
                .await
                .map_err(script_error)?;
        }
        tracing::info!(event = "sieve_changed", proto = "web", user = %telemetry::shown(user), script = %telemetry::shown(name), action = if activate { "put_activate" } else { "put" }, bytes = source.len());
        Ok(())
    }

    async fn sieve_activate(&self, user: &str, name: Option<&str>) -> Result<(), ScriptError> {
        let directory = &self.shell.directory;
        if let Some(name) = name {
            // A stored script that no longer compiles (stricter limits since) is not made
            // active, as `mailstow sieve activate` refuses it.
            let source = directory
                .sieve_get(user, name)
                .await
                .map_err(script_error)?;
            self.compile(&source)?;
        }
        directory
            .sieve_activate(user, name)
            .await
            .map_err(script_error)?;
        tracing::info!(event = "sieve_changed", proto = "web", user = %telemetry::shown(user), script = %telemetry::shown(name.unwrap_or("")), action = if name.is_some() { "activate" } else { "deactivate" });
        Ok(())
    }

    async fn sieve_delete(&self, user: &str, name: &str) -> Result<(), ScriptError> {
        self.shell
            .directory
            .sieve_delete(user, name)
            .await
            .map_err(script_error)?;
        tracing::info!(event = "sieve_changed", proto = "web", user = %telemetry::shown(user), script = %telemetry::shown(name), action = "delete");
        Ok(())
    }

    async fn admin_data(&self, what: web::AdminView) -> Result<web::AdminData, BackendError> {
        admin::pages::data(&self.parts.operations, what).await
    }

    async fn admin_act(
        &self,
        admin: &str,
        client: IpAddr,
        action: web::AdminAction,
    ) -> Result<String, String> {
        admin::pages::act(&self.parts.operations, admin, client, action).await
    }
}

/// Serves the web view on `listener` (TLS with the server's certificate when `tls`) until the
/// task running it is aborted.
/// Which listener a web connection came in on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Door {
    /// `[server] web`: plain HTTP, or TLS with `web_tls`.
    View { tls: bool },
    /// `[server] https`: TLS with ACME's TLS-ALPN-01 answered (RFC 8737).
    Https,
    /// `[server] http`: ACME's HTTP-01 challenges and the autoconfiguration documents;
    /// everything else is redirected to HTTPS.
    Http,
}

impl Door {
    fn tls(self) -> bool {
        match self {
            Door::View { tls } => tls,
            Door::Https => true,
            Door::Http => false,
        }
    }
}

pub(crate) async fn serve_on(
    shell: Arc<Shell>,
    parts: Arc<WebParts>,
    listener: tokio::net::TcpListener,
    door: Door,
) {
    let tls = door.tls();
    let config = web::Config {
        secure_cookie: tls,
        message_bytes_max: usize::try_from(shell.config.message_bytes_max).unwrap_or(usize::MAX),
        inflight: Some(shell.inflight.clone()),
        sessions_max: shell.config.web_sessions_max,
        request_bytes_max: shell.config.web_request_bytes_max,
        script_bytes_max: shell.config.sieve.script_bytes_max,
        published: Some(parts.published.clone()),
        ..web::Config::default()
    };
    let connections_max = shell.config.web_connections_max;
    let backend = Arc::new(ServerBackend {
        shell: shell.clone(),
        parts: parts.clone(),
    });
    let router = match door {
        Door::Http => {
            let challenges = shell.challenges.clone();
            web::plain_router(
                backend,
                config,
                Arc::new(move |token: &str| challenges.http01(token)),
            )
        }
        _ => web::router(backend, config),
    };
    // The plain listener's answers are the same on every node: nothing to forward.
    let forwarder = shell
        .cluster
        .clone()
        .filter(|_| door != Door::Http)
        .map(|cluster| {
            Arc::new(cluster::forward::Forwarder::new(
                shell.directory.clone(),
                cluster,
                tls,
                shell.config.web_request_bytes_max,
            ))
        });
    serve(listener, shell, door, router, forwarder, connections_max).await;
}

/// The connection loop: at most `connections_max` connections (one more is closed at once;
/// a connection holds its place from its accept, TLS handshake included), HTTP/1.1 with a
/// deadline for the TLS handshake, for every request header, and a longest life for every
/// connection. The handshakes use the live certificate of `shell` as `door` wants it.
async fn serve(
    listener: tokio::net::TcpListener,
    shell: Arc<Shell>,
    door: Door,
    router: axum::Router,
    forwarder: Option<Arc<cluster::forward::Forwarder>>,
    connections_max: usize,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use tower::ServiceExt as _;

    let slots = Arc::new(tokio::sync::Semaphore::new(connections_max));
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // Out of descriptors and the like: wait, do not spin.
                tracing::warn!(event = "web_error", error = %e, msg = "accept");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::info!(event = "refused", proto = "web", client = %peer.ip(), reason = "web_connections_max");
            drop(tcp);
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = match door {
            Door::View { tls: true } => Some(shell.live().tls.clone()),
            Door::Https => Some(shell.live().https.clone()),
            Door::View { tls: false } | Door::Http => None,
        };
        let router = router.clone();
        let forwarder = forwarder.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(
                move |request: hyper::Request<hyper::body::Incoming>| {
                    let router = router.clone();
                    let forwarder = forwarder.clone();
                    async move {
                        let request = request.map(axum::body::Body::new);
                        // In a cluster, another node's user is served by their node.
                        let (mut request, client) = match &forwarder {
                            Some(f) => match f.route(peer, request).await {
                                cluster::forward::Routed::Here(r, client) => (r, client),
                                cluster::forward::Routed::Answered(response) => {
                                    return Ok(response);
                                }
                            },
                            None => (request, peer),
                        };
                        request
                            .extensions_mut()
                            .insert(axum::extract::ConnectInfo(client));
                        router.oneshot(request).await
                    }
                },
            );
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT);
            let served = async {
                match acceptor {
                    Some(acceptor) => {
                        let Ok(Ok(stream)) =
                            tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await
                        else {
                            return;
                        };
                        // RFC 8737 3: a TLS-ALPN-01 validation ends with its handshake.
                        if stream.get_ref().1.alpn_protocol() == Some(crate::tls::ACME_TLS_ALPN) {
                            return;
                        }
                        let _ = http.serve_connection(TokioIo::new(stream), service).await;
                    }
                    None => {
                        let _ = http.serve_connection(TokioIo::new(tcp), service).await;
                    }
                }
            };
            let _ = tokio::time::timeout(CONNECTION_LIFETIME_MAX, served).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use directory::DirectoryError as E;

    #[test]
    fn directory_errors_map_to_what_the_rules_pages_say() {
        let refused = |e: E| match script_error(e) {
            ScriptError::Refused(why) => why,
            other => panic!("{other:?}"),
        };
        assert!(refused(E::ScriptActive("mine".into())).contains("deactivate it first"));
        assert!(refused(E::Limit("5 scripts already".into())).contains("5 scripts already"));
        assert!(
            refused(E::InvalidScriptName {
                name: "a\\nb".into(),
                reason: "control characters are not allowed (RFC 5804 1.6)",
            })
            .contains("control characters")
        );
        refused(E::ScriptExists {
            address: "a@example.org".into(),
            name: "x".into(),
        });
        for missing in [
            E::NoSuchScript {
                address: "a@example.org".into(),
                name: "x".into(),
            },
            E::NoSuchUser("a@example.org".into()),
        ] {
            assert_eq!(
                script_error(missing),
                ScriptError::Backend(BackendError::NotFound)
            );
        }
        assert!(matches!(
            directory_error(E::Hash("x".into())),
            BackendError::Unavailable(_)
        ));
    }
}
