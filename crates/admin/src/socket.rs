//! The server's side of the admin socket: it binds `<data_dir>/admin.sock` (mode 0600, made
//! private before it gets its name), reads one request line within [`REQUEST_WAIT_MAX`],
//! answers `ok` and the output or `error: <one line>`, and closes. Imports, exports and
//! backups stream their progress instead (see `client::request_streaming`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{UnixListener, UnixStream};

use crate::client::socket_path;
use crate::commands::Operations;
use crate::format::one_line;
use crate::request::{REQUEST_BYTES_MAX, Request};

/// A client that has not sent its request line by then is dropped.
const REQUEST_WAIT_MAX: Duration = Duration::from_secs(10);

/// Binds the admin socket and serves it until the returned task is aborted.
pub fn start(ctx: Arc<Operations>) -> Result<tokio::task::JoinHandle<()>> {
    let path = socket_path(&ctx.data_dir);
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
pub fn remove_socket(data_dir: &Path) {
    let _ = std::fs::remove_file(socket_path(data_dir));
}

async fn serve_one(ctx: Arc<Operations>, stream: UnixStream) {
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
            Ok(request) => ctx.run(request).await,
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

/// Runs an import, export or backup on the running server, streaming its notes: `ok`, then
/// `progress DONE TOTAL MESSAGES`, `step TEXT` and `problem TEXT` lines, then `done SUMMARY`
/// or `error: TEXT` as the last line. A client that goes away cancels the work (after the
/// current batch, or at the next message of a backup).
async fn stream_migration(
    ctx: Arc<Operations>,
    request: Request,
    mut write: tokio::net::unix::OwnedWriteHalf,
) {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(64);
    let cancel = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let work = {
        let ctx = ctx.clone();
        let cancel = cancel.clone();
        tokio::task::spawn_blocking(move || {
            let send = |line: String| {
                // A client that stopped reading: stop after this batch.
                if tx.blocking_send(line).is_err() {
                    cancel.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            };
            let result = if let Request::Backup { dest, files } = &request {
                run_backup(&ctx, dest, files, &cancel, &mut |n| send(n.line()))
            } else {
                // One wire form for every streamed note: backup's.
                let mut note = |n: crate::migrate::Note| send(crate::backup::Note::from(n).line());
                run_migration(&ctx, &request, &cancel, &mut note).map(|s| s.to_string())
            };
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

/// A backup on the running server: its capture point pauses this server's delivery rounds
/// and holds its gate; the directory is copied through the server's own pool.
fn run_backup(
    ctx: &Arc<Operations>,
    dest: &Path,
    files: &[(String, std::path::PathBuf)],
    cancel: &std::sync::atomic::AtomicBool,
    note: &mut dyn FnMut(crate::backup::Note),
) -> Result<String> {
    let runtime = tokio::runtime::Handle::current();
    let directory =
        |path: &Path| -> Result<bool> { Ok(runtime.block_on(ctx.directory.copy_into(path))?) };
    let sources = crate::backup::Sources {
        data_dir: &ctx.data_dir,
        queue: &ctx.queue,
        store: &ctx.store,
        running: Some((&ctx.wakeup, ctx.deposit.gate())),
        directory: &directory,
        files: files.to_vec(),
        cancel: Some(cancel),
    };
    crate::backup::take(&sources, dest, note).map(|s| s.to_string())
}

/// An import or export with the server's guards: the user must be in the directory (checked
/// again before each batch, under the mailbox lock a deletion takes exclusively).
fn run_migration(
    ctx: &Arc<Operations>,
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
        deposit: Some(&ctx.deposit),
        user_exists: Some(&exists),
        cancel: Some(cancel),
        rules: matches!(request, Request::Import { rules: true, .. }),
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
