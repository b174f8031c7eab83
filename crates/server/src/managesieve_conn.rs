//! One ManageSieve connection (RFC 5804): the `managesieve::Session` under the connection
//! driver. Logins are checked like IMAP's (the throttle, the directory, the login lines);
//! every script decision is answered from the directory, which keeps users' scripts
//! (`directory::Directory::sieve_*`), after compiling a script with the interpreter
//! (`sieve::compile`) before it is stored or made active.
//!
//! In a cluster a login for another node's user is handed to that node (its registered
//! ManageSieve address, `node add --managesieve`), as IMAP's and POP3's are: the owner's
//! session then serves the scripts and is the one that ends when the user is deleted, renamed
//! or moved (the directory is shared, but a user's sessions are revoked only on its node).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use directory::DirectoryError;
use limits::Deadlines;
use managesieve::{AuthResult, Event, Failure, Quota, ScriptInfo};

use crate::driver::{Conn, Protocol, Step};
use crate::login::{Login, Preauth, authzid_allowed, check_login, preauth};
use crate::shell::Shell;

const PROTO: &str = "managesieve";
/// Replies held before the shell writes them out within a step.
const OUT_FLUSH_BYTES: usize = 64 << 10;

/// A ManageSieve session and its shell.
pub(crate) struct ManageSieve {
    session: managesieve::Session,
    ip: IpAddr,
    /// The connection handed to the user's node (cluster). Boxed: rare.
    handover: Option<Box<cluster::Handover>>,
}

impl ManageSieve {
    pub(crate) fn new(shell: &Shell, peer: SocketAddr, tls: bool) -> ManageSieve {
        ManageSieve {
            session: managesieve::Session::new(shell.live().managesieve.clone(), tls),
            ip: peer.ip(),
            handover: None,
        }
    }
}

impl Protocol for ManageSieve {
    async fn step(&mut self, conn: &mut Conn) -> Step {
        while let Some(event) = self.session.poll() {
            match event {
                Event::Reply(bytes) => {
                    conn.out.extend_from_slice(&bytes);
                    // Pipelined commands' replies go out as they come (the session pauses
                    // past its reply queue; this keeps the shell's side bounded too).
                    if conn.out.len() >= OUT_FLUSH_BYTES && conn.flush().await.is_err() {
                        return Step::Close;
                    }
                }
                Event::StartTls => {
                    if conn.start_tls().await.is_err() {
                        return Step::Close;
                    }
                    self.session.tls_started();
                }
                Event::Authenticate {
                    mechanism,
                    authcid,
                    password,
                    authzid,
                } => {
                    // The replies so far go out before the (possibly slow) check.
                    if conn.flush().await.is_err() {
                        return Step::Close;
                    }
                    let attempt = Login {
                        proto: PROTO,
                        mechanism,
                        username: &authcid,
                        ip: self.ip,
                    };
                    // Another node handing over one of our users.
                    if let Some(preauth) = preauth(
                        &conn.shell,
                        conn.stream.tls_exporter(),
                        PROTO,
                        &authzid,
                        &authcid,
                        &password,
                    ) {
                        let result = match preauth {
                            Preauth::Valid { user, client, node } => {
                                enter(conn, &attempt, user, Some((client, &node)))
                            }
                            Preauth::Invalid => AuthResult::BadCredentials,
                            Preauth::NotHere(text) => AuthResult::Unavailable(text),
                        };
                        self.session.authenticated(result);
                        continue;
                    }
                    if !authzid_allowed(&authzid, &authcid) {
                        attempt.failed(&conn.shell);
                        self.session.authenticated(AuthResult::BadCredentials);
                        continue;
                    }
                    match login(conn, &attempt, &password, self.ip).await {
                        Ok(result) => self.session.authenticated(result),
                        Err(handover) => {
                            let to_owner = self.session.hand_over().unwrap_or_default();
                            self.handover = Some(Box::new(cluster::Handover {
                                to_owner,
                                ..handover
                            }));
                            return Step::Proxy;
                        }
                    }
                }
                Event::ListScripts { user } => {
                    let listed = conn.shell.directory.sieve_list(&user).await;
                    self.session.scripts_listed(
                        listed
                            .map(|scripts| {
                                scripts
                                    .into_iter()
                                    .map(|s| ScriptInfo {
                                        name: s.name,
                                        active: s.active,
                                    })
                                    .collect()
                            })
                            .map_err(|e| failure(&conn.shell, &user, e, None)),
                    );
                }
                Event::GetScript { user, name } => {
                    let got = conn.shell.directory.sieve_get(&user, &name).await;
                    self.session.script_got(
                        got.map(String::into_bytes)
                            .map_err(|e| failure(&conn.shell, &user, e, None)),
                    );
                }
                Event::PutScript { user, name, script } => {
                    let result = put(&conn.shell, &user, &name, &script).await;
                    self.session.script_put(result);
                }
                Event::CheckScript { user: _, script } => {
                    self.session.script_checked(compile(&conn.shell, &script));
                }
                Event::HaveSpace { user, name, size } => {
                    let size = size as usize;
                    let fits = conn
                        .shell
                        .directory
                        .sieve_have_space(&user, &name, size)
                        .await;
                    self.session.space_checked(
                        fits.map_err(|e| failure(&conn.shell, &user, e, Some(size))),
                    );
                }
                Event::SetActive { user, name } => {
                    let result = set_active(&conn.shell, &user, name.as_deref()).await;
                    self.session.active_set(result);
                }
                Event::DeleteScript { user, name } => {
                    let deleted = conn.shell.directory.sieve_delete(&user, &name).await;
                    if deleted.is_ok() {
                        conn.shell.telemetry.managesieve_change(
                            "deletescript",
                            &user,
                            Some(&name),
                            None,
                        );
                    }
                    self.session
                        .script_deleted(deleted.map_err(|e| failure(&conn.shell, &user, e, None)));
                }
                Event::RenameScript { user, from, to } => {
                    let renamed = conn.shell.directory.sieve_rename(&user, &from, &to).await;
                    if renamed.is_ok() {
                        conn.shell.telemetry.managesieve_change(
                            "renamescript",
                            &user,
                            Some(&from),
                            Some(&to),
                        );
                    }
                    self.session
                        .script_renamed(renamed.map_err(|e| failure(&conn.shell, &user, e, None)));
                }
                Event::Close => return Step::Close,
            }
        }
        if self.session.is_closed() {
            Step::Close
        } else if self.session.wants_input() {
            Step::Read
        } else {
            // Replies were queued past the session's bound: poll again once they are out.
            Step::Again
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        self.session.feed(bytes);
    }

    fn timeout(&self) -> Duration {
        self.session.timeout()
    }

    fn deadlines(&self) -> Deadlines {
        self.session.deadlines()
    }

    fn timed_out(&mut self) {
        self.session.timed_out();
    }

    fn deadline_passed(&mut self) {
        tracing::debug!(event = "deadline", proto = PROTO, client = %self.ip);
        self.session.deadline_passed();
    }

    fn shutting_down(&mut self) {
        self.session.shutting_down();
    }

    fn revoked(&mut self, why: mailboxes::Ending) {
        match why {
            mailboxes::Ending::Removed => self.session.revoked(),
            mailboxes::Ending::Moving => self.session.moving(),
        }
    }

    fn take_handover(&mut self) -> Option<cluster::Handover> {
        self.handover.take().map(|h| *h)
    }
}

/// Checks the password (throttled, logged and counted like every login), then enters the
/// session here, or (`Err`) hands the connection to the user's node in a cluster.
async fn login(
    conn: &mut Conn,
    attempt: &Login<'_>,
    password: &str,
    client: IpAddr,
) -> Result<AuthResult, cluster::Handover> {
    let shell = conn.shell.clone();
    let user = match check_login(&shell, attempt, password).await {
        Ok(user) => user,
        Err(refused) => {
            return Ok(match refused.temporary() {
                Some(text) => AuthResult::Unavailable(text.into()),
                None => AuthResult::BadCredentials,
            });
        }
    };
    if let Some(cluster) = &shell.cluster {
        match cluster.home(&shell.directory, &user) {
            cluster::Home::Local => {}
            cluster::Home::Unavailable(text) => {
                attempt.unavailable(&shell, &user, &text);
                return Ok(AuthResult::Unavailable(text));
            }
            cluster::Home::Node(owner) => {
                return match cluster.open_managesieve(&owner, &user, client).await {
                    Ok((upstream, to_client)) => {
                        attempt.proxied(&shell, &user, &owner.name);
                        Err(cluster::Handover {
                            upstream,
                            to_client,
                            to_owner: Vec::new(),
                        })
                    }
                    Err(text) => {
                        attempt.unavailable(&shell, &user, &text);
                        Ok(AuthResult::Unavailable(text))
                    }
                };
            }
        }
    }
    Ok(enter(conn, attempt, user, None))
}

/// A logged-in user's session starts here: it joins the user's sessions, so that deleting,
/// renaming or moving the user ends it. `via`: the client's address and the node that handed
/// the session over.
fn enter(
    conn: &mut Conn,
    attempt: &Login<'_>,
    user: String,
    via: Option<(IpAddr, &str)>,
) -> AuthResult {
    let shell = conn.shell.clone();
    match shell
        .sessions
        .enter(&user, mailboxes::Protocol::ManageSieve)
    {
        Ok(member) => {
            match via {
                Some((client, node)) => {
                    shell
                        .telemetry
                        .login_cluster(PROTO, &user, "cluster", "ok", client, node);
                }
                None => attempt.ok(&shell, &user),
            }
            conn.member = Some(member);
            AuthResult::Success { user }
        }
        Err(_) => {
            attempt.refused(&shell, &user);
            AuthResult::Unavailable("account unavailable".into())
        }
    }
}

/// Compiles a script with the server's Sieve limits: `Failure::Invalid` carries the
/// interpreter's error (`line L, column C: message`).
fn compile(shell: &Shell, script: &str) -> Result<Option<String>, Failure> {
    match sieve::compile(script, &shell.config.sieve) {
        Ok(_) => Ok(None),
        Err(error) => Err(Failure::Invalid(error.to_string())),
    }
}

/// PUTSCRIPT: compiled, then stored (within the user's script count and the size bound).
async fn put(
    shell: &Shell,
    user: &str,
    name: &str,
    script: &str,
) -> Result<Option<String>, Failure> {
    let warnings = compile(shell, script)?;
    shell
        .directory
        .sieve_put(user, name, script)
        .await
        .map_err(|e| failure(shell, user, e, Some(script.len())))?;
    shell
        .telemetry
        .managesieve_change("putscript", user, Some(name), None);
    Ok(warnings)
}

/// SETACTIVE: a stored script that no longer compiles (the limits were lowered since, or the
/// interpreter got stricter) is not made active: every message would be kept in INBOX with
/// an error instead.
async fn set_active(shell: &Shell, user: &str, name: Option<&str>) -> Result<(), Failure> {
    if let Some(name) = name {
        let source = shell
            .directory
            .sieve_get(user, name)
            .await
            .map_err(|e| failure(shell, user, e, None))?;
        compile(shell, &source)?;
    }
    shell
        .directory
        .sieve_activate(user, name)
        .await
        .map_err(|e| failure(shell, user, e, None))?;
    shell
        .telemetry
        .managesieve_change("setactive", user, name, None);
    Ok(())
}

/// A directory error as the session's answer, with the server's script bound.
fn failure(shell: &Shell, user: &str, error: DirectoryError, size: Option<usize>) -> Failure {
    failure_of(error, user, size, shell.config.sieve.script_bytes_max)
}

/// The one place a directory error becomes the session's answer (RFC 5804 1.3's response
/// codes). `size`: the script's size, when the command had one (a `Limit` past
/// `script_bytes_max` is `QUOTA/MAXSIZE`, any other `QUOTA/MAXSCRIPTS`).
fn failure_of(
    error: DirectoryError,
    user: &str,
    size: Option<usize>,
    script_bytes_max: usize,
) -> Failure {
    match error {
        DirectoryError::NoSuchScript { .. } => Failure::NonExistent,
        DirectoryError::ScriptExists { .. } => Failure::AlreadyExists,
        DirectoryError::ScriptActive(_) => Failure::Active,
        DirectoryError::Limit(_) if size.is_some_and(|size| size > script_bytes_max) => {
            Failure::Quota(Quota::MaxSize)
        }
        DirectoryError::Limit(_) => Failure::Quota(Quota::MaxScripts),
        // The session checks names first; the directory's rule is the last word.
        error @ DirectoryError::InvalidScriptName { .. } => Failure::Invalid(error.to_string()),
        // Deleted (or renamed) while logged in; the revocation ends the session next.
        DirectoryError::NoSuchUser(_) => Failure::Unavailable("account unavailable".into()),
        error => {
            tracing::warn!(
                event = "directory_error",
                proto = PROTO,
                user = %telemetry::shown(user),
                error = %error
            );
            Failure::Unavailable("directory unavailable, try later".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_errors_become_rfc_5804_response_codes() {
        let failure = |error, size| failure_of(error, "a@example.test", size, 100);
        let script = || DirectoryError::NoSuchScript {
            address: "a@example.test".into(),
            name: "\"x\"".into(),
        };
        assert_eq!(failure(script(), None), Failure::NonExistent);
        assert_eq!(
            failure(
                DirectoryError::ScriptExists {
                    address: "a@example.test".into(),
                    name: "\"x\"".into()
                },
                None
            ),
            Failure::AlreadyExists
        );
        assert_eq!(
            failure(DirectoryError::ScriptActive("\"x\"".into()), None),
            Failure::Active
        );
        let limit = || DirectoryError::Limit("reached".into());
        assert_eq!(failure(limit(), Some(101)), Failure::Quota(Quota::MaxSize));
        assert_eq!(
            failure(limit(), Some(100)),
            Failure::Quota(Quota::MaxScripts)
        );
        assert_eq!(failure(limit(), None), Failure::Quota(Quota::MaxScripts));
        assert!(matches!(
            failure(
                DirectoryError::InvalidScriptName {
                    name: "\"\"".into(),
                    reason: "empty"
                },
                None
            ),
            Failure::Invalid(text) if text.contains("empty")
        ));
        assert!(matches!(
            failure(DirectoryError::NoSuchUser("a@example.test".into()), None),
            Failure::Unavailable(_)
        ));
        // A directory failure says nothing of the directory's insides to the client.
        let down = failure(DirectoryError::Corrupt("bad row".into()), None);
        assert_eq!(
            down,
            Failure::Unavailable("directory unavailable, try later".into())
        );
    }
}
