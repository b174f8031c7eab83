//! The admin socket: the operator commands that need the running server's state or its
//! engines, `mailstow queue stats|list|show|retry|remove`, `store stats|fsck`, `user
//! del|rename|list|show`, `auth blocked|unblock`, `mailbox import|export`, and the CLI's
//! notice that it changed the directory.
//!
//! While `mailstow serve` runs it owns the queue, so the CLI cannot open it: it sends the
//! command to `<data_dir>/admin.sock` instead, and the server runs it on its own `Queue`.
//! When no server answers there, the CLI opens the queue itself and calls [`execute`]
//! directly. Both paths produce their text here, so they print the same.
//!
//! Protocol: the client sends one request line (`list`, `show ID`, `retry ID`, `remove ID`,
//! `user del ADDRESS`, `user rename OLD NEW`, `user list [DOMAIN]`, `user show ADDRESS`,
//! `auth blocked`, `auth unblock ADDRESS|USER`, `queue stats`, `store stats`, `store fsck`,
//! `directory changed`, `mailbox import USER PATH`, `mailbox export USER FORMAT PATH`; at
//! most [`REQUEST_BYTES_MAX`] bytes); the server answers with a status line, `ok` or
//! `error: <one line>`, then (after `ok`) the command's output verbatim, and closes the
//! connection. The end of the output is the end of the stream, so message content needs no
//! escaping. `mailbox` requests stream lines instead, the last one `done SUMMARY` or
//! `error: TEXT` (see [`request_streaming`]). The socket is mode 0600: only the user the
//! server runs as can use it.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use queue::{MessageDetail, MessageId, Queue, QueueEntry, RecipientStatus};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{UnixListener, UnixStream};

use crate::Ctx;

/// Longest request line accepted (the longest real one is `user rename` and two 254-byte
/// addresses).
pub const REQUEST_BYTES_MAX: usize = 1024;
/// A client that has not sent its request line by then is dropped.
const REQUEST_WAIT_MAX: Duration = Duration::from_secs(10);

/// Where the server listens for admin commands.
pub fn socket_path(data_dir: &Path) -> PathBuf {
    data_dir.join("admin.sock")
}

/// One operator command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    List,
    Show(MessageId),
    Retry(MessageId),
    Remove(MessageId),
    /// Delete a user and its mail, closing its sessions (`mailstow user del`).
    DeleteUser(String),
    /// Rename a user keeping its mail, closing its sessions (`mailstow user rename`).
    RenameUser(String, String),
    /// Users (of one domain, or all) with their usage (`mailstow user list`).
    UserList(Option<String>),
    /// A user's limits, usage and folders (`mailstow user show`).
    UserShow(String),
    /// Failed-login blocks in force (`mailstow auth blocked`).
    AuthBlocked,
    /// Clear the failed-login counters of an address or a user (`mailstow auth unblock`).
    AuthUnblock(String),
    /// The queue's counters (`mailstow queue stats`).
    QueueStats,
    /// Per-folder counters and the volume's space (`mailstow store stats`).
    StoreStats,
    /// Check the store without repairing (`mailstow store fsck`).
    StoreCheck,
    /// The directory was changed by the CLI: reload its cache now (`mailstow user|alias|
    /// domain …` send it after every change).
    DirectoryChanged,
    /// Import a maildir or mbox at an absolute path into a user's folders (`mailstow mailbox
    /// import`); the answer streams (see [`request_streaming`]).
    Import {
        user: String,
        path: PathBuf,
    },
    /// Export a user's folders to an absolute path (`mailstow mailbox export`); streams.
    Export {
        user: String,
        path: PathBuf,
        format: crate::migrate::Format,
    },
}

impl Request {
    /// Parses a request line (without or with its line end).
    pub fn parse(line: &str) -> Result<Request, String> {
        if let Some(rest) = line.strip_prefix("mailbox ") {
            return Request::parse_mailbox(rest.trim_end_matches(['\r', '\n']));
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let id = |w: &str| {
            w.parse::<MessageId>()
                .map_err(|_| format!("'{}' is not a message id", one_line(w)))
        };
        match words.as_slice() {
            ["list"] => Ok(Request::List),
            ["show", n] => Ok(Request::Show(id(n)?)),
            ["retry", n] => Ok(Request::Retry(id(n)?)),
            ["remove", n] => Ok(Request::Remove(id(n)?)),
            ["user", "del", address] => Ok(Request::DeleteUser((*address).to_string())),
            ["user", "rename", old, new] => {
                Ok(Request::RenameUser((*old).to_string(), (*new).to_string()))
            }
            ["user", "list"] => Ok(Request::UserList(None)),
            ["user", "list", domain] => Ok(Request::UserList(Some((*domain).to_string()))),
            ["user", "show", address] => Ok(Request::UserShow((*address).to_string())),
            ["auth", "blocked"] => Ok(Request::AuthBlocked),
            ["auth", "unblock", what] => Ok(Request::AuthUnblock((*what).to_string())),
            ["queue", "stats"] => Ok(Request::QueueStats),
            ["store", "stats"] => Ok(Request::StoreStats),
            ["store", "fsck"] => Ok(Request::StoreCheck),
            ["directory", "changed"] => Ok(Request::DirectoryChanged),
            _ => Err(
                "expected: list | show ID | retry ID | remove ID | user del ADDRESS | \
                      user rename OLD NEW | user list [DOMAIN] | user show ADDRESS | \
                      auth blocked | auth unblock ADDRESS|USER | queue stats | store stats | \
                      store fsck | directory changed"
                    .into(),
            ),
        }
    }

    /// `import USER PATH` or `export USER FORMAT PATH`: the path is the rest of the line (it
    /// may hold spaces), and absolute (the server's working directory is not the CLI's).
    fn parse_mailbox(rest: &str) -> Result<Request, String> {
        let usage = "expected: mailbox import USER PATH | mailbox export USER maildir|mbox PATH";
        let (verb, rest) = rest.split_once(' ').ok_or(usage)?;
        let (user, rest) = rest.split_once(' ').ok_or(usage)?;
        let (format, path) = match verb {
            "import" => (None, rest),
            "export" => {
                let (format, path) = rest.split_once(' ').ok_or(usage)?;
                let format = crate::migrate::Format::parse(format)
                    .ok_or_else(|| format!("'{}' is not maildir or mbox", one_line(format)))?;
                (Some(format), path)
            }
            _ => return Err(usage.into()),
        };
        let path = PathBuf::from(path);
        if !path.is_absolute() {
            return Err(format!("{} is not an absolute path", path.display()));
        }
        let user = user.to_string();
        Ok(match format {
            None => Request::Import { user, path },
            Some(format) => Request::Export { user, path, format },
        })
    }

    /// Whether the answer is streamed: progress lines, then a last line (see
    /// [`request_streaming`]).
    pub fn is_streaming(&self) -> bool {
        matches!(self, Request::Import { .. } | Request::Export { .. })
    }

    /// The request line, without its line end.
    pub fn line(&self) -> String {
        match self {
            Request::List => "list".into(),
            Request::Show(id) => format!("show {id}"),
            Request::Retry(id) => format!("retry {id}"),
            Request::Remove(id) => format!("remove {id}"),
            Request::DeleteUser(address) => format!("user del {address}"),
            Request::RenameUser(old, new) => format!("user rename {old} {new}"),
            Request::UserList(None) => "user list".into(),
            Request::UserList(Some(domain)) => format!("user list {domain}"),
            Request::UserShow(address) => format!("user show {address}"),
            Request::AuthBlocked => "auth blocked".into(),
            Request::AuthUnblock(what) => format!("auth unblock {what}"),
            Request::QueueStats => "queue stats".into(),
            Request::StoreStats => "store stats".into(),
            Request::StoreCheck => "store fsck".into(),
            Request::DirectoryChanged => "directory changed".into(),
            Request::Import { user, path } => {
                format!("mailbox import {user} {}", path.display())
            }
            Request::Export { user, path, format } => {
                format!("mailbox export {user} {} {}", format.name(), path.display())
            }
        }
    }

    /// Whether the queue alone answers it (so the CLI can run it without a server).
    pub fn is_queue(&self) -> bool {
        matches!(
            self,
            Request::List
                | Request::Show(_)
                | Request::Retry(_)
                | Request::Remove(_)
                | Request::QueueStats
        )
    }
}

/// Runs a queue `request` on `queue` and returns the text to print.
pub fn execute(queue: &Queue, request: &Request) -> Result<Vec<u8>, queue::QueueError> {
    Ok(match request {
        Request::List => format_list(&queue.list()?).into_bytes(),
        Request::Show(id) => format_show(&queue.show(*id)?),
        Request::Retry(id) => {
            queue.retry(*id)?;
            format!("retried {id}\n").into_bytes()
        }
        Request::Remove(id) => {
            queue.remove(*id)?;
            format!("removed {id}\n").into_bytes()
        }
        Request::QueueStats => format_queue_stats(&queue.stats()).into_bytes(),
        _ => b"this command needs the running server\n".to_vec(),
    })
}

/// `queue stats`'s answer.
pub fn format_queue_stats(s: &queue::QueueStats) -> String {
    format!(
        "segments: {} main, {} deferred, {} free\n\
         messages: {} pending, {} deferred, {} bounces, {} quarantined\n\
         bytes in use: {}\n",
        s.main_segments,
        s.deferred_segments,
        s.free_segments,
        s.pending_messages,
        s.deferred_messages,
        s.bounces,
        s.quarantined,
        s.bytes_used
    )
}

/// `store stats`'s answer: one line per folder, then the volume.
pub fn format_store_stats(stats: &store::StoreStats) -> String {
    let mut out = format!(
        "{:<32} {:<24} {:>10} {:>14} {:>10}\n",
        "user", "folder", "messages", "bytes", "fragments"
    );
    for folder in &stats.folders {
        out.push_str(&format!(
            "{:<32} {:<24} {:>10} {:>14} {:>10}\n",
            folder.user, folder.folder, folder.messages, folder.bytes, folder.fragments
        ));
    }
    out.push_str(&format!(
        "volume: {} bytes, used {}, free {} in {} extents, reserved {}\n",
        stats.volume_bytes,
        stats.used_bytes,
        stats.free_bytes,
        stats.free_extents,
        stats.reserved_bytes
    ));
    out
}

/// `user rename`'s answer.
pub fn format_renamed(old: &str, new: &str, moved: &store::Usage) -> String {
    format!(
        "user renamed: {old} -> {new} ({} folders, {} messages, {} bytes kept)\n",
        moved.folders, moved.messages, moved.bytes
    )
}

/// `user list`'s answer: one line per user with what it holds (from the store's index; all
/// zero without a store), its limits and its last login.
pub fn format_user_list(users: &[directory::UserInfo], store: Option<&store::Store>) -> String {
    let mut out = format!(
        "{:<40} {:>9} {:>8} {:>8} {:>9}  {}\n",
        "address", "messages", "size", "quota", "max msgs", "last login"
    );
    for user in users {
        let used = store.map(|s| s.usage(&user.address)).unwrap_or_default();
        out.push_str(&format!(
            "{:<40} {:>9} {:>8} {:>8} {:>9}  {}\n",
            user.address,
            used.messages,
            human_bytes(used.bytes),
            user.quota_bytes.map_or("none".into(), human_bytes),
            user.quota_messages
                .map_or("none".into(), |max| max.to_string()),
            last_login(user.last_login_at)
        ));
        // In a cluster, the owner node last, as `node=NAME`.
        if let Some(node) = &user.node {
            out.truncate(out.len() - 1);
            out.push_str(&format!(" node={node}\n"));
        }
    }
    out.push_str(&format!("{} users\n", users.len()));
    out
}

/// `user show`'s answer: the user's limits, usage and last login, then every folder with
/// its messages and bytes.
pub fn format_user_show(user: &directory::UserInfo, store: Option<&store::Store>) -> String {
    let used = store.map(|s| s.usage(&user.address)).unwrap_or_default();
    let limit = |max: Option<u64>, show: fn(u64) -> String| max.map_or("none".into(), show);
    let mut out = format!(
        "address: {}\nquota: {}\nmax messages: {}\nusage: {} messages, {} ({} bytes) in {} folders\n\
         last login: {}\nadmin: {}\n",
        user.address,
        limit(user.quota_bytes, human_bytes),
        limit(user.quota_messages, |max| max.to_string()),
        used.messages,
        human_bytes(used.bytes),
        used.bytes,
        used.folders,
        last_login(user.last_login_at),
        if user.admin { "yes" } else { "no" }
    );
    out.push_str(&format!(
        "{:<40} {:>9} {:>14} {:>8}\n",
        "folder", "messages", "bytes", "size"
    ));
    let Some(store) = store else {
        return out;
    };
    let mut folders = store.list_folders(&user.address);
    folders.sort();
    for folder in folders {
        // Deleted meanwhile: left out.
        let Ok(status) = store.status(&user.address, &folder) else {
            continue;
        };
        out.push_str(&format!(
            "{:<40} {:>9} {:>14} {:>8}\n",
            one_line(&folder),
            status.messages,
            status.bytes,
            human_bytes(status.bytes)
        ));
    }
    out
}

/// A size in binary units, as `user quota` takes them: `0`, `512B`, `1.5K`, `500M`, `2G`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "K", "M", "G", "T"];
    if bytes == 0 {
        return "0".into();
    }
    let mut unit = 0;
    while unit + 1 < UNITS.len() && bytes >= 1u64 << (10 * (unit + 1)) {
        unit += 1;
    }
    if unit == 0 {
        return format!("{bytes}B");
    }
    let whole = 1u64 << (10 * unit);
    if bytes.is_multiple_of(whole) {
        return format!("{}{}", bytes / whole, UNITS[unit]);
    }
    let tenths = (bytes as f64 / whole as f64 * 10.0).round() / 10.0;
    format!("{tenths}{}", UNITS[unit])
}

fn last_login(at: Option<i64>) -> String {
    match at {
        Some(at) => mail_parser::DateTime::from_timestamp(at).to_rfc3339(),
        None => "never".into(),
    }
}

/// `user del`'s answer.
pub fn format_deleted(user: &str, deleted: &store::DeletedUser, node: Option<&str>) -> String {
    if let Some(node) = node {
        return format!("user removed: {user} (its mail is removed by its node, {node})\n");
    }
    format!(
        "user removed: {user} ({} folders, {} messages, {} bytes freed)\n",
        deleted.folders, deleted.messages, deleted.bytes
    )
}

/// One line per message, then `<n> messages`:
/// `<id> <class> <arrival> <size> <attempts> from=<sender> to=<rcpt>:<status>,...`.
pub fn format_list(entries: &[QueueEntry]) -> String {
    let mut out = String::new();
    for e in entries {
        out.push_str(&format!(
            "{} {} {} {} {} ",
            e.id,
            e.class.name(),
            rfc3339(e.envelope.arrival_ms),
            e.size,
            e.attempts
        ));
        match &e.damage {
            Some(why) => out.push_str(&format!("damaged: {}", one_line(why))),
            None => {
                let to: Vec<String> = e
                    .envelope
                    .recipients
                    .iter()
                    .map(|r| format!("{}:{}", one_line(&r.address), status_name(r.status)))
                    .collect();
                out.push_str(&format!(
                    "from={} to={}",
                    sender(&e.envelope.sender),
                    to.join(",")
                ));
            }
        }
        out.push('\n');
    }
    out.push_str(&format!("{} messages\n", entries.len()));
    out
}

/// The envelope as `key: value` lines, a blank line, then the content as stored.
pub fn format_show(m: &MessageDetail) -> Vec<u8> {
    let e = &m.entry;
    let mut head = format!(
        "id: {}\nclass: {}\nsegment: {}\narrival: {}\nsize: {}\nattempts: {}\nnext-attempt: {}\n\
         leased: {}\nfrom: {}\n",
        e.id,
        e.class.name(),
        if e.deferred { "deferred" } else { "main" },
        rfc3339(e.envelope.arrival_ms),
        e.size,
        e.attempts,
        if e.next_attempt_ms == 0 {
            "now".to_string()
        } else {
            rfc3339(e.next_attempt_ms)
        },
        if e.leased { "yes" } else { "no" },
        sender(&e.envelope.sender),
    );
    for r in &e.envelope.recipients {
        head.push_str(&format!(
            "to: {} {}\n",
            one_line(&r.address),
            status_name(r.status)
        ));
    }
    for r in &e.envelope.recipients {
        if let Some(why) = &r.last_error {
            head.push_str(&format!(
                "last-error: {} {}\n",
                one_line(&r.address),
                one_line(why)
            ));
        }
    }
    head.push('\n');
    let mut out = head.into_bytes();
    out.extend_from_slice(&m.content);
    out
}

fn status_name(s: RecipientStatus) -> &'static str {
    match s {
        RecipientStatus::Pending => "pending",
        RecipientStatus::Delivered => "delivered",
        RecipientStatus::Failed => "failed",
        RecipientStatus::Moved => "moved",
    }
}

fn sender(s: &str) -> String {
    if s.is_empty() {
        "<>".into()
    } else {
        one_line(s)
    }
}

/// Keeps a field on its line: control characters (a CR/LF in a remote error text) become
/// spaces.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

fn rfc3339(ms: u64) -> String {
    mail_parser::DateTime::from_timestamp((ms / 1000) as i64).to_rfc3339()
}

/// Sends `request` to a running server. `None` when no server listens at the socket (it does
/// not exist, or nobody accepts: a stale file left by a killed server); then the caller may
/// open the queue itself.
pub fn request(data_dir: &Path, request: &Request) -> Option<Result<Vec<u8>, String>> {
    let path = socket_path(data_dir);
    let mut stream = std::os::unix::net::UnixStream::connect(&path).ok()?;
    let mut exchange = || -> std::io::Result<Vec<u8>> {
        stream.write_all(format!("{}\n", request.line()).as_bytes())?;
        stream.shutdown(std::net::Shutdown::Write)?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response)?;
        Ok(response)
    };
    let response = match exchange() {
        Ok(r) => r,
        Err(e) => return Some(Err(format!("{}: {e}", path.display()))),
    };
    let (status, output) = match response.iter().position(|&b| b == b'\n') {
        Some(n) => (&response[..n], &response[n + 1..]),
        None => (&response[..], &[][..]),
    };
    Some(match std::str::from_utf8(status) {
        Ok("ok") => Ok(output.to_vec()),
        Ok(s) if s.starts_with("error: ") => Err(s["error: ".len()..].to_string()),
        _ => Err(format!(
            "{}: the server closed the connection without an answer",
            path.display()
        )),
    })
}

/// Binds the admin socket and serves it until the returned task is aborted.
pub(crate) fn start(ctx: Arc<Ctx>) -> Result<tokio::task::JoinHandle<()>> {
    let path = socket_path(&ctx.config.data_dir);
    // Bound under a temporary name and made private before it gets its real name, so there
    // is no moment at which another user could connect.
    let tmp = path.with_extension("sock.tmp");
    for p in [&path, &tmp] {
        match std::fs::remove_file(p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("removing {}", p.display())),
        }
    }
    let listener =
        UnixListener::bind(&tmp).with_context(|| format!("admin socket {}", tmp.display()))?;
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("chmod 600 {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    tokio::spawn(serve_one(ctx.clone(), stream));
                }
                Err(e) => {
                    tracing::warn!(event = "admin_error", error = %e, msg = "accept");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }))
}

/// Removes the socket file at shutdown.
pub(crate) fn remove_socket(data_dir: &Path) {
    let _ = std::fs::remove_file(socket_path(data_dir));
}

async fn serve_one(ctx: Arc<Ctx>, stream: UnixStream) {
    let (read, mut write) = stream.into_split();
    let mut line = Vec::new();
    let mut reader = BufReader::new(read.take(REQUEST_BYTES_MAX as u64 + 1));
    let got = tokio::time::timeout(REQUEST_WAIT_MAX, reader.read_until(b'\n', &mut line)).await;
    let response = match got {
        Err(_) => Err("no request line in time".to_string()),
        Ok(Err(e)) => Err(format!("reading the request: {e}")),
        Ok(Ok(_)) if line.len() > REQUEST_BYTES_MAX => Err(format!(
            "request line longer than {REQUEST_BYTES_MAX} bytes"
        )),
        Ok(Ok(_)) => match std::str::from_utf8(&line)
            .map_err(|_| "the request line is not UTF-8".to_string())
            .and_then(Request::parse)
        {
            Ok(request) if request.is_streaming() => {
                return stream_migration(ctx, request, write).await;
            }
            Ok(request) => run(&ctx, request).await,
            Err(e) => Err(e),
        },
    };
    let bytes = match response {
        Ok(output) => {
            let mut b = b"ok\n".to_vec();
            b.extend_from_slice(&output);
            b
        }
        Err(e) => format!("error: {}\n", one_line(&e)).into_bytes(),
    };
    if let Err(e) = write.write_all(&bytes).await {
        tracing::debug!(event = "admin_error", error = %e);
    }
    let _ = write.shutdown().await;
}

/// Runs an import or export on the running server, streaming its notes: `ok`, then
/// `progress DONE TOTAL MESSAGES` and `problem TEXT` lines, then `done SUMMARY` or
/// `error: TEXT` as the last line. A client that goes away cancels the work after its
/// current batch.
async fn stream_migration(
    ctx: Arc<Ctx>,
    request: Request,
    mut write: tokio::net::unix::OwnedWriteHalf,
) {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(64);
    let cancel = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let work = {
        let ctx = ctx.clone();
        let cancel = cancel.clone();
        tokio::task::spawn_blocking(move || {
            let mut note = |n: crate::migrate::Note| {
                let line = match n {
                    crate::migrate::Note::Progress {
                        done,
                        total,
                        messages,
                    } => format!("progress {done} {total} {messages}"),
                    crate::migrate::Note::Problem(text) => format!("problem {}", one_line(&text)),
                };
                // A client that stopped reading: stop after this batch.
                if tx.blocking_send(line).is_err() {
                    cancel.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            };
            let result = run_migration(&ctx, &request, &cancel, &mut note);
            let last = match result {
                Ok(summary) => format!("done {summary}"),
                Err(e) => format!("error: {}", one_line(&format!("{e:#}"))),
            };
            let _ = tx.blocking_send(last);
        })
    };
    let mut gone = write.write_all(b"ok\n").await.is_err();
    while let Some(line) = rx.recv().await {
        if !gone
            && write
                .write_all(format!("{line}\n").as_bytes())
                .await
                .is_err()
        {
            gone = true;
            cancel.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    if let Err(e) = work.await {
        tracing::warn!(event = "admin_error", error = %e, msg = "mailbox task");
    }
    let _ = write.shutdown().await;
}

/// An import or export with the server's guards: the user must be in the directory (checked
/// again before each batch, under the mailbox lock a deletion takes exclusively).
fn run_migration(
    ctx: &Arc<Ctx>,
    request: &Request,
    cancel: &std::sync::atomic::AtomicBool,
    note: &mut dyn FnMut(crate::migrate::Note),
) -> Result<crate::migrate::Summary> {
    let (Request::Import { user, .. } | Request::Export { user, .. }) = request else {
        anyhow::bail!("not a mailbox request");
    };
    let exists = || ctx.directory.cache().is_user(user);
    if !exists() {
        anyhow::bail!("no such user: {user}");
    }
    let guards = crate::migrate::Guards {
        mailboxes: Some(&ctx.mailboxes),
        user_exists: Some(&exists),
        cancel: Some(cancel),
    };
    match request {
        Request::Import { path, .. } => {
            crate::migrate::import(&ctx.store, user, path, &guards, note)
        }
        Request::Export { path, format, .. } => {
            crate::migrate::export(&ctx.store, user, path, *format, &guards, note)
        }
        _ => anyhow::bail!("not a mailbox request"),
    }
}

/// Sends a streaming `request` (import, export) to a running server, calling `line` with
/// each `progress` and `problem` line. `None` when no server listens; else the last line:
/// `Ok(summary)` or `Err(message)`.
pub fn request_streaming(
    data_dir: &Path,
    request: &Request,
    line: &mut dyn FnMut(&str),
) -> Option<Result<String, String>> {
    let path = socket_path(data_dir);
    let mut stream = std::os::unix::net::UnixStream::connect(&path).ok()?;
    let sent = stream
        .write_all(format!("{}\n", request.line()).as_bytes())
        .and_then(|()| stream.shutdown(std::net::Shutdown::Write));
    if let Err(e) = sent {
        return Some(Err(format!("{}: {e}", path.display())));
    }
    let mut reader = std::io::BufReader::new(stream);
    let mut first = true;
    let mut text = String::new();
    loop {
        text.clear();
        match std::io::BufRead::read_line(&mut reader, &mut text) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => return Some(Err(format!("{}: {e}", path.display()))),
        }
        let l = text.trim_end_matches(['\r', '\n']);
        if let Some(message) = l.strip_prefix("error: ") {
            return Some(Err(message.to_string()));
        }
        if std::mem::replace(&mut first, false) {
            if l != "ok" {
                break;
            }
            continue;
        }
        if let Some(summary) = l.strip_prefix("done ") {
            return Some(Ok(summary.to_string()));
        }
        line(l);
    }
    Some(Err(format!(
        "{}: the server closed the connection without an answer",
        path.display()
    )))
}

/// Runs one request on the running server.
pub(crate) async fn run(ctx: &Arc<Ctx>, request: Request) -> Result<Vec<u8>, String> {
    match request {
        Request::DeleteUser(address) => crate::accounts::delete_user(ctx, &address)
            .await
            .map(|(user, deleted, node)| {
                format_deleted(&user, &deleted, node.as_deref()).into_bytes()
            })
            .map_err(|e| format!("{e:#}")),
        Request::RenameUser(old, new) => crate::accounts::rename_user(ctx, &old, &new)
            .await
            .map(|(old, new, moved)| format_renamed(&old, &new, &moved).into_bytes())
            .map_err(|e| format!("{e:#}")),
        Request::UserList(domain) => {
            let users = ctx
                .directory
                .list_users(domain.as_deref())
                .await
                .map_err(|e| e.to_string())?;
            let store = ctx.store.clone();
            tokio::task::spawn_blocking(move || format_user_list(&users, Some(&store)))
                .await
                .map(String::into_bytes)
                .map_err(|e| format!("the command failed: {e}"))
        }
        Request::UserShow(address) => {
            let user = ctx
                .directory
                .user(&address)
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("no such user: {}", one_line(&address)))?;
            let store = ctx.store.clone();
            tokio::task::spawn_blocking(move || format_user_show(&user, Some(&store)))
                .await
                .map(String::into_bytes)
                .map_err(|e| format!("the command failed: {e}"))
        }
        Request::AuthBlocked => {
            let blocked = ctx.throttle.blocked();
            let mut out = String::new();
            for b in &blocked {
                out.push_str(&format!(
                    "{} failures={} lifts_in={}s\n",
                    b.key,
                    b.failures,
                    b.remaining.as_secs()
                ));
            }
            out.push_str(&format!("{} blocked\n", blocked.len()));
            Ok(out.into_bytes())
        }
        Request::AuthUnblock(what) => {
            let cleared = ctx.throttle.unblock(&what);
            tracing::info!(event = "unblocked", what = %one_line(&what), counters = cleared);
            Ok(format!(
                "unblocked {}: {cleared} counters cleared\n",
                one_line(&what)
            )
            .into_bytes())
        }
        Request::StoreStats => {
            let store = ctx.store.clone();
            tokio::task::spawn_blocking(move || format_store_stats(&store.stats()).into_bytes())
                .await
                .map_err(|e| format!("the command failed: {e}"))
        }
        Request::StoreCheck => {
            let store = ctx.store.clone();
            let report = tokio::task::spawn_blocking(move || store.fsck(false, &mut |_, _| {}))
                .await
                .map_err(|e| format!("the command failed: {e}"))?
                .map_err(|e| e.to_string())?;
            tracing::info!(event = "store_fsck", clean = report.is_clean());
            Ok(format!("{report}\n").into_bytes())
        }
        Request::DirectoryChanged => {
            ctx.directory
                .cache()
                .refresh_if_changed()
                .await
                .map_err(|e| format!("reloading the directory: {e}"))?;
            Ok(b"directory reloaded\n".to_vec())
        }
        request => {
            let queue = ctx.queue.clone();
            let retry = matches!(request, Request::Retry(_));
            let result = tokio::task::spawn_blocking(move || execute(&queue, &request)).await;
            match result {
                Ok(Ok(output)) => {
                    if retry {
                        // Delivery threads idle until woken or their poll interval.
                        ctx.wakeup.notify();
                    }
                    Ok(output)
                }
                Ok(Err(e)) => Err(e.to_string()),
                Err(e) => Err(format!("the command failed: {e}")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_and_print_back() {
        for r in [
            Request::List,
            Request::Show(7),
            Request::Retry(8),
            Request::Remove(u64::MAX),
            Request::DeleteUser("a@example.org".into()),
            Request::RenameUser("a@example.org".into(), "b@example.org".into()),
            Request::UserList(None),
            Request::UserList(Some("example.org".into())),
            Request::UserShow("a@example.org".into()),
            Request::AuthBlocked,
            Request::AuthUnblock("192.0.2.1".into()),
            Request::QueueStats,
            Request::StoreStats,
            Request::StoreCheck,
            Request::DirectoryChanged,
            Request::Import {
                user: "a@example.org".into(),
                path: "/tmp/with space/Maildir".into(),
            },
            Request::Export {
                user: "a@example.org".into(),
                path: "/tmp/out".into(),
                format: crate::migrate::Format::Mbox,
            },
        ] {
            assert_eq!(Request::parse(&format!("{}\r\n", r.line())), Ok(r));
        }
        assert!(Request::parse("show").is_err());
        assert!(Request::parse("show x").is_err());
        assert!(Request::parse("list 1").is_err());
        assert!(Request::parse("flush").is_err());
        assert!(Request::parse("mailbox import a@b relative/path").is_err());
        assert!(Request::parse("mailbox export a@b tar /x").is_err());
        assert!(Request::parse("mailbox import a@b").is_err());
    }

    #[test]
    fn sizes_in_binary_units() {
        assert_eq!(human_bytes(0), "0");
        assert_eq!(human_bytes(1023), "1023B");
        assert_eq!(human_bytes(1024), "1K");
        assert_eq!(human_bytes(1536), "1.5K");
        assert_eq!(human_bytes(500 << 20), "500M");
        assert_eq!(human_bytes(3 << 29), "1.5G");
        assert_eq!(human_bytes(2 << 40), "2T");
        assert_eq!(human_bytes(u64::MAX), "16777216T");
    }

    #[test]
    fn fields_stay_on_one_line() {
        assert_eq!(one_line("451 a\r\nb"), "451 a  b");
        assert_eq!(sender(""), "<>");
        assert_eq!(rfc3339(1_700_000_000_999), "2023-11-14T22:13:20Z");
    }
}
