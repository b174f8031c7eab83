//! The one login check every protocol (and the web view) uses, and what a login's log line
//! names; a node's pre-authentication as the owner checks it.

use std::net::IpAddr;

use crate::shell::Shell;
use crate::throttle::Gate;

/// RFC 4616 2: SASL PLAIN may name an authorization identity. Acting as another user is not
/// offered, so only an empty one or the login name itself is acceptable; anything else must
/// fail the login, never be silently ignored.
pub(crate) fn authzid_allowed(authzid: &str, username: &str) -> bool {
    authzid.is_empty() || authzid.eq_ignore_ascii_case(username)
}

/// A node's pre-authentication (see `cluster.rs`), as checked on the owner.
pub(crate) enum Preauth {
    /// Valid on this connection, and the user's mail is here.
    Valid {
        user: String,
        client: IpAddr,
        /// `cluster:<node>`: who handed the session over.
        node: String,
    },
    /// Not valid (logged).
    Invalid,
    /// Valid, but the user's mail is not (or no longer) here: the text for the client.
    NotHere(String),
}

/// Checks a node's pre-authentication on this connection; `None` for an ordinary login.
pub(crate) fn preauth(
    shell: &Shell,
    binding: Option<[u8; 32]>,
    proto: &'static str,
    authzid: &str,
    username: &str,
    password: &str,
) -> Option<Preauth> {
    let cluster = shell.cluster.as_ref()?;
    let checked = cluster.check_preauth(proto, authzid, username, password, binding)?;
    Some(match checked {
        Ok((user, client)) => match cluster.home(&shell.directory, &user) {
            cluster::Home::Local => Preauth::Valid {
                user,
                client,
                node: username.to_string(),
            },
            _ => Preauth::NotHere("mailbox is not on this node; log in again".into()),
        },
        Err(why) => {
            tracing::warn!(
                event = "cluster_preauth_refused",
                proto,
                node = %telemetry::shown(username),
                error = why
            );
            Preauth::Invalid
        }
    })
}

/// Why a login was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LoginRefused {
    /// Too many recent failures (of this user from this address, of this address, or of its
    /// network).
    Throttled,
    /// Unknown user or wrong password.
    BadCredentials,
    /// The directory could not answer, or too many logins are being checked.
    Unavailable,
}

impl LoginRefused {
    /// What a client is told about a temporary refusal (`None`: wrong credentials, which get
    /// the protocol's own failure answer).
    pub(crate) fn temporary(self) -> Option<&'static str> {
        match self {
            LoginRefused::Throttled => Some("too many failed logins, try later"),
            LoginRefused::Unavailable => Some("directory unavailable, try later"),
            LoginRefused::BadCredentials => None,
        }
    }
}

/// The one login check every protocol uses: the throttle (refuse, or count the attempt and
/// delay it), the password against the directory, the verdict back to the throttle. Logs the
/// refusals (`throttled`, `login result=failed|unavailable`); a caller that gets `Ok` logs the
/// login's outcome with [`Login::ok`] or [`Login::refused`] once it has admitted the session.
pub(crate) async fn check_login(
    ctx: &Shell,
    login: &Login<'_>,
    password: &str,
) -> Result<String, LoginRefused> {
    let (ip, username) = (login.ip, login.username);
    let (ticket, priority) = match ctx.throttle.gate(ip, username).await {
        Gate::Refuse(level) => {
            ctx.telemetry
                .throttled(login.proto, username, ip, level.name());
            login.attempt(ctx, None, directory::Attempt::Throttled);
            // A guesser that is refused at once just asks again: make it wait.
            tokio::time::sleep(ctx.live().config.tarpit_delay).await;
            return Err(LoginRefused::Throttled);
        }
        Gate::Check {
            delay,
            suspect,
            ticket,
        } => {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let priority = if suspect {
                directory::Priority::Suspect
            } else {
                directory::Priority::Normal
            };
            (ticket, priority)
        }
    };
    match ctx
        .directory
        .authenticate_with(username, password, priority)
        .await
    {
        Ok(Some(user)) => {
            ticket.succeeded();
            login.attempt(ctx, Some(&user), directory::Attempt::Ok);
            Ok(user)
        }
        Ok(None) => {
            ticket.failed();
            login.attempt(ctx, None, directory::Attempt::Failed);
            login.log(ctx, username, "failed");
            Err(LoginRefused::BadCredentials)
        }
        Err(e) => {
            ticket.abandoned();
            tracing::warn!(
                event = "directory_error",
                user = %telemetry::shown(username),
                error = %e
            );
            login.log(ctx, username, "unavailable");
            Err(LoginRefused::Unavailable)
        }
    }
}

/// Who is logging in, how and from where: what a `login` log line names.
pub(crate) struct Login<'a> {
    pub(crate) proto: &'static str,
    pub(crate) mechanism: &'static str,
    pub(crate) username: &'a str,
    pub(crate) ip: IpAddr,
}

impl Login<'_> {
    /// The session is open as `user`; its last login is recorded (`user list`).
    pub(crate) fn ok(&self, ctx: &Shell, user: &str) {
        self.log(ctx, user, "ok");
        ctx.directory.note_login(user);
    }

    /// The password was right but the session was not opened (too many sessions, the
    /// account is being deleted, the maildrop is locked).
    pub(crate) fn refused(&self, ctx: &Shell, user: &str) {
        self.log(ctx, user, "refused");
    }

    /// The password was right and the session was handed to the user's node.
    pub(crate) fn proxied(&self, ctx: &Shell, user: &str, node: &str) {
        ctx.telemetry
            .login_cluster(self.proto, user, self.mechanism, "proxied", self.ip, node);
        ctx.directory.note_login(user);
    }

    /// The password was right but the user's node is down or does not answer.
    pub(crate) fn unavailable(&self, ctx: &Shell, user: &str, why: &str) {
        ctx.telemetry.login_cluster(
            self.proto,
            user,
            self.mechanism,
            "unavailable",
            self.ip,
            why,
        );
    }

    /// Adds the attempt to the user's login history (the web view's account page): `user`
    /// when the password was right, else the name given when it is an existing user's
    /// address (guesses at unknown names have no history to join).
    fn attempt(&self, ctx: &Shell, user: Option<&str>, result: directory::Attempt) {
        let user = match user {
            Some(user) => user.to_string(),
            None if ctx.directory.cache().is_user(self.username) => {
                self.username.to_ascii_lowercase()
            }
            None => return,
        };
        ctx.directory
            .note_attempt(&user, self.ip, self.proto, result);
    }

    /// Refused before the password was checked (an authorization identity we do not allow).
    pub(crate) fn failed(&self, ctx: &Shell) {
        self.log(ctx, self.username, "failed");
    }

    fn log(&self, ctx: &Shell, user: &str, result: &'static str) {
        ctx.telemetry
            .login(self.proto, user, self.mechanism, result, self.ip);
    }
}
