//! An account over IMAP (docs/mailfs.md 9): a pool of `connections` sessions selected on
//! the file system's folder, used from the engine's threads. Each session has its own
//! current-thread runtime, driven by the engine thread that holds the session: its socket
//! is polled in that thread, with no wake-ups across threads per command.
//!
//! Each message is a small RFC 5322 message whose one body part is the envelope:
//! `Content-Transfer-Encoding: binary` sent as a literal8 when the server has BINARY
//! (RFC 3516), base64 otherwise; it is read back with `BINARY.PEEK[1]` (decoded by the
//! server) or `BODY.PEEK[TEXT]` decoded here.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};

use base64::Engine;
use imap_client::{Client, Error as ImapError};

use crate::FsError;
use crate::config::{AccountSection, TlsMode};
use crate::remote::{Remote, RemoteError};

/// The header every message is found by (docs/mailfs.md 2).
pub const NAME_HEADER: &str = "X-Mailfs";

pub struct ImapRemote {
    cfg: imap_client::Config,
    folder: String,
    connections_max: usize,
    pool: Mutex<Pool>,
    returned: Condvar,
    /// Learned from the first session: send binary literals and read BINARY.
    binary: AtomicBool,
}

/// One session and the runtime its socket belongs to.
struct Conn {
    rt: tokio::runtime::Runtime,
    client: Client,
}

struct Pool {
    idle: Vec<Conn>,
    /// Sessions alive, idle or busy.
    open: usize,
}

fn remote_error(e: ImapError) -> RemoteError {
    match e {
        ImapError::No(t) | ImapError::Bad(t) => RemoteError::Refused(t),
        ImapError::Unsupported(t) | ImapError::InvalidArgument(t) => RemoteError::Refused(t),
        other => RemoteError::Unavailable(other.to_string()),
    }
}

impl ImapRemote {
    pub fn new(
        account: &AccountSection,
        folder: &str,
        timeout: std::time::Duration,
    ) -> Result<ImapRemote, FsError> {
        let mut cfg = imap_client::Config::new(
            account.host.clone(),
            account.port,
            account.user.clone(),
            account.password()?,
        );
        cfg.tls = match account.tls {
            TlsMode::Implicit => imap_client::Tls::Implicit,
            TlsMode::Starttls => imap_client::Tls::StartTls,
            TlsMode::None => imap_client::Tls::None,
        };
        cfg.accept_invalid_certs = account.accept_invalid_certs;
        cfg.timeout = timeout;
        // A block plus base64 growth and the FETCH wrapping.
        cfg.response_bytes_max = (mailfs_format::PAYLOAD_BYTES_MAX / 3 * 4) + (4 << 20);
        Ok(ImapRemote {
            cfg,
            folder: folder.to_string(),
            connections_max: account.connections.max(1),
            pool: Mutex::new(Pool {
                idle: Vec::new(),
                open: 0,
            }),
            returned: Condvar::new(),
            binary: AtomicBool::new(false),
        })
    }

    /// Runs `f` on a pooled session (connecting one if the pool has room), and puts the
    /// session back unless the error left it unusable.
    fn with<T>(
        &self,
        select: bool,
        f: impl AsyncFnOnce(&mut Client) -> Result<T, ImapError>,
    ) -> Result<T, RemoteError> {
        let taken = {
            let mut pool = self.pool.lock().unwrap();
            loop {
                if let Some(c) = pool.idle.pop() {
                    break Some(c);
                }
                if pool.open < self.connections_max {
                    pool.open += 1;
                    break None;
                }
                pool = self.returned.wait(pool).unwrap();
            }
        };
        let release_slot = || {
            let mut pool = self.pool.lock().unwrap();
            pool.open -= 1;
            self.returned.notify_one();
        };
        let mut conn = match taken {
            Some(c) => c,
            None => {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        release_slot();
                        return Err(RemoteError::Unavailable(format!("runtime: {e}")));
                    }
                };
                let cfg = self.cfg.clone();
                let folder = self.folder.clone();
                let connected = rt.block_on(async move {
                    let mut c = Client::connect(&cfg).await?;
                    if select {
                        c.select(&folder).await?;
                    }
                    Ok::<Client, ImapError>(c)
                });
                match connected {
                    Ok(client) => {
                        self.binary
                            .store(client.capabilities().binary, Ordering::Relaxed);
                        Conn { rt, client }
                    }
                    Err(e) => {
                        release_slot();
                        return Err(remote_error(e));
                    }
                }
            }
        };
        let r = conn.rt.block_on(f(&mut conn.client));
        if conn.client.is_usable() {
            let mut pool = self.pool.lock().unwrap();
            pool.idle.push(conn);
            self.returned.notify_one();
        } else {
            release_slot();
        }
        r.map_err(remote_error)
    }

    /// Drops every pooled session (the next command reconnects).
    pub fn reset(&self) {
        let mut pool = self.pool.lock().unwrap();
        let n = pool.idle.len();
        pool.idle.clear();
        pool.open -= n;
    }
}

/// The RFC 5322 message around an envelope.
pub fn build_message(name: &str, envelope: &[u8], binary: bool) -> Vec<u8> {
    let date = chrono::Utc::now().format("%a, %d %b %Y %H:%M:%S +0000");
    let id: u64 = rand::random();
    let mut m = format!(
        "From: mailfs <mailfs@invalid>\r\nDate: {date}\r\nSubject: {name}\r\nMessage-ID: <{id:016x}@mailfs.invalid>\r\n{NAME_HEADER}: {name}\r\nMIME-Version: 1.0\r\nContent-Type: application/x-mailfs\r\nContent-Transfer-Encoding: {}\r\n\r\n",
        if binary { "binary" } else { "base64" }
    )
    .into_bytes();
    if binary {
        m.extend_from_slice(envelope);
    } else {
        // RFC 2045 6.8: lines of at most 76 characters.
        let b64 = base64::engine::general_purpose::STANDARD.encode(envelope);
        for line in b64.as_bytes().chunks(76) {
            m.extend_from_slice(line);
            m.extend_from_slice(b"\r\n");
        }
    }
    m
}

fn decode_base64_body(raw: &[u8]) -> Option<Vec<u8>> {
    let clean: Vec<u8> = raw
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    base64::engine::general_purpose::STANDARD.decode(clean).ok()
}

impl Remote for ImapRemote {
    fn describe(&self) -> String {
        format!("{}@{}:{}", self.cfg.user, self.cfg.host, self.cfg.port)
    }

    fn prepare(&self) -> Result<(), RemoteError> {
        let folder = self.folder.clone();
        self.with(false, async move |c| c.create(&folder).await)?;
        // Sessions opened before the folder existed are not selected on it.
        self.reset();
        Ok(())
    }

    fn append(&self, batch: &[(String, &[u8])]) -> Result<Vec<Option<u32>>, RemoteError> {
        let folder = self.folder.clone();
        self.with(true, async move |c| {
            let binary = c.capabilities().binary;
            let msgs: Vec<Vec<u8>> = batch
                .iter()
                .map(|(n, e)| build_message(n, e, binary))
                .collect();
            let refs: Vec<&[u8]> = msgs.iter().map(|m| m.as_slice()).collect();
            c.append(&folder, &refs, binary).await
        })
    }

    fn fetch(&self, uid: u32) -> Result<Option<Vec<u8>>, RemoteError> {
        let binary = self.binary.load(Ordering::Relaxed);
        let body = self.with(true, async move |c| c.uid_fetch_body(uid, None).await)?;
        Ok(match body {
            None => None,
            Some(b) if binary => Some(b),
            Some(b) => decode_base64_body(&b),
        })
    }

    fn list(&self) -> Result<Vec<(u32, String)>, RemoteError> {
        let folder = self.folder.clone();
        self.with(true, async move |c| {
            // A fresh SELECT makes the server report what other sessions appended.
            let mb = c.select(&folder).await?;
            if mb.exists == 0 {
                return Ok(Vec::new());
            }
            c.uid_fetch_header_field("1:*", NAME_HEADER).await
        })
    }

    fn find(&self, name: &str) -> Result<Vec<u32>, RemoteError> {
        let name = name.to_string();
        self.with(true, async move |c| {
            c.uid_search_header(NAME_HEADER, &name).await
        })
    }

    fn expunge(&self, uids: &[u32]) -> Result<(), RemoteError> {
        if uids.is_empty() {
            return Ok(());
        }
        self.with(true, async move |c| c.uid_expunge(uids).await)
    }

    fn quota(&self) -> Result<Option<(u64, u64)>, RemoteError> {
        let folder = self.folder.clone();
        self.with(true, async move |c| {
            if !c.capabilities().quota {
                return Ok(None);
            }
            c.quota(&folder).await
        })
    }

    fn ping(&self) -> Result<(), RemoteError> {
        self.with(true, async move |c| c.noop().await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_carry_the_name_and_round_trip_in_base64() {
        let env: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let m = build_message("abc dir 1.0 v1 t1", &env, false);
        let text = String::from_utf8(m.clone()).unwrap();
        assert!(text.contains("\r\nX-Mailfs: abc dir 1.0 v1 t1\r\n"));
        assert!(text.contains("\r\nSubject: abc dir 1.0 v1 t1\r\n"));
        assert!(text.lines().all(|l| l.len() <= 998));
        let body = &m[text.find("\r\n\r\n").unwrap() + 4..];
        assert_eq!(decode_base64_body(body).unwrap(), env);
        let b = build_message("n", &env, true);
        assert!(b.ends_with(&env));
    }
}
