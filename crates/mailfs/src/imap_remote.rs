//! An account over IMAP (docs/mailfs.md 9): a pool of `connections` sessions selected on
//! the file system's folder, used from the engine's threads. Each session has its own
//! current-thread runtime, driven by the engine thread that holds the session: its socket
//! is polled in that thread, with no wake-ups across threads per command.
//!
//! Each message is a small RFC 5322 message whose one body part is the envelope, in base64
//! read back with `BODY.PEEK[TEXT]` and decoded here (the default), or, with
//! `transfer = "binary"` and a server offering BINARY (RFC 3516), as a literal8 with
//! `Content-Transfer-Encoding: binary` read back with `BINARY.PEEK[1]` (decoded by the
//! server). A body is recognised by what it holds, not by how it was written: one that
//! starts with the envelope's magic is the envelope, anything else is base64. So a file
//! system written in one transfer mode reads in the other.

use std::sync::{Condvar, Mutex};

use base64_simd::{Out, STANDARD};
use imap_client::{Client, Error as ImapError};

use crate::FsError;
use crate::config::{AccountSection, TlsMode, Transfer};
use crate::locking::{CondvarExt, MutexExt};
use crate::remote::{Remote, RemoteError};

/// The header every message is found by (docs/mailfs.md 2).
pub const NAME_HEADER: &str = "X-Mailfs";

pub struct ImapRemote {
    /// Its `timeout` is the member deadline: connecting, and each read or write of the
    /// commands on the file system's path.
    cfg: imap_client::Config,
    /// The silence allowed to commands the server may think about at length.
    slow_timeout: std::time::Duration,
    folder: String,
    connections_max: usize,
    pool: Mutex<Pool>,
    returned: Condvar,
}

/// How long a command may wait for a byte from the server.
#[derive(Clone, Copy)]
enum Patience {
    /// APPEND, FETCH, NOOP: the member deadline.
    Deadline,
    /// Listing the folder, SEARCH, EXPUNGE, QUOTA, CREATE: `timeout_ms`.
    Slow,
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
    /// Commands that went silent past their limit. A command waiting for a session when
    /// this changes fails at once: the member it waits for has just been found silent,
    /// and each queued command would otherwise wait a deadline of its own on a fresh
    /// session to a server that answers no greeting (issue 41: 40 s for 40 MiB).
    stalls: u64,
}

fn remote_error(e: ImapError) -> RemoteError {
    match e {
        ImapError::No(t) | ImapError::Bad(t) => RemoteError::Refused(t),
        ImapError::Unsupported(t) | ImapError::InvalidArgument(t) => RemoteError::Refused(t),
        other => RemoteError::Unavailable(other.to_string()),
    }
}

impl ImapRemote {
    /// `deadline`: the silence after which a command on the file system's path fails
    /// (`member_deadline_ms`); `slow_timeout` the one for slow commands (`timeout_ms`).
    pub fn new(
        account: &AccountSection,
        folder: &str,
        deadline: std::time::Duration,
        slow_timeout: std::time::Duration,
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
        cfg.use_binary = account.transfer == Transfer::Binary;
        cfg.timeout = deadline;
        // A block plus base64 growth and the FETCH wrapping.
        cfg.response_bytes_max = (mailfs_format::PAYLOAD_BYTES_MAX / 3 * 4) + (4 << 20);
        Ok(ImapRemote {
            cfg,
            slow_timeout: slow_timeout.max(deadline),
            folder: folder.to_string(),
            connections_max: account.connections.max(1),
            pool: Mutex::new(Pool {
                idle: Vec::new(),
                open: 0,
                stalls: 0,
            }),
            returned: Condvar::new(),
        })
    }

    /// Runs `f` on a pooled session (connecting one if the pool has room), and puts the
    /// session back unless the error left it unusable. A command waiting for a session
    /// fails when another command to this account goes silent past its limit meanwhile
    /// (`Pool::stalls`).
    fn with<T>(
        &self,
        select: bool,
        patience: Patience,
        f: impl AsyncFnOnce(&mut Client) -> Result<T, ImapError>,
    ) -> Result<T, RemoteError> {
        let taken = {
            let mut pool = self.pool.lock_or_panic();
            let stalls = pool.stalls;
            loop {
                if pool.stalls != stalls {
                    return Err(RemoteError::Unavailable(
                        "the account went silent while this command waited for a session".into(),
                    ));
                }
                if let Some(c) = pool.idle.pop() {
                    break Some(c);
                }
                if pool.open < self.connections_max {
                    pool.open += 1;
                    break None;
                }
                pool = self.returned.wait_or_panic(pool);
            }
        };
        let release_slot = || {
            let mut pool = self.pool.lock_or_panic();
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
                    Ok(client) => Conn { rt, client },
                    Err(e) => {
                        // Waiters learn of the silence before the slot frees: one woken by
                        // the slot would otherwise connect and wait a deadline of its own.
                        let e = self.failed(e);
                        release_slot();
                        return Err(e);
                    }
                }
            }
        };
        conn.client.set_timeout(match patience {
            Patience::Deadline => self.cfg.timeout,
            Patience::Slow => self.slow_timeout,
        });
        let r = conn
            .rt
            .block_on(f(&mut conn.client))
            .map_err(|e| self.failed(e));
        if conn.client.is_usable() {
            let mut pool = self.pool.lock_or_panic();
            pool.idle.push(conn);
            self.returned.notify_one();
        } else {
            release_slot();
        }
        r
    }

    /// The error as the engine sees it. A silent server also fails the commands queued
    /// for its sessions, and its idle sessions are dropped: they are as silent.
    fn failed(&self, e: ImapError) -> RemoteError {
        if matches!(e, ImapError::Timeout) {
            let mut pool = self.pool.lock_or_panic();
            pool.stalls += 1;
            let idle = pool.idle.len();
            pool.idle.clear();
            pool.open -= idle;
            self.returned.notify_all();
        }
        remote_error(e)
    }

    /// Drops every pooled session (the next command reconnects).
    pub fn reset(&self) {
        let mut pool = self.pool.lock_or_panic();
        let n = pool.idle.len();
        pool.idle.clear();
        pool.open -= n;
    }
}

/// RFC 2045 6.8: encoded lines of at most 76 characters; ours are all 76 but the last.
const BASE64_LINE: usize = 76;
/// Bytes one full line encodes.
const BASE64_LINE_BYTES: usize = BASE64_LINE / 4 * 3;
/// Lines encoded or decoded per step, through a scratch buffer that stays in L1.
const BASE64_STEP_LINES: usize = 64;

/// The RFC 5322 message around an envelope.
pub fn build_message(name: &str, envelope: &[u8], binary: bool) -> Vec<u8> {
    let date = chrono::Utc::now().format("%a, %d %b %Y %H:%M:%S +0000");
    let id: u64 = rand::random();
    let header = format!(
        "From: mailfs <mailfs@invalid>\r\nDate: {date}\r\nSubject: {name}\r\nMessage-ID: <{id:016x}@mailfs.invalid>\r\n{NAME_HEADER}: {name}\r\nMIME-Version: 1.0\r\nContent-Type: application/x-mailfs\r\nContent-Transfer-Encoding: {}\r\n\r\n",
        if binary { "binary" } else { "base64" }
    );
    if binary {
        let mut m = Vec::with_capacity(header.len() + envelope.len());
        m.extend_from_slice(header.as_bytes());
        m.extend_from_slice(envelope);
        return m;
    }
    let lines = envelope.len().div_ceil(BASE64_LINE_BYTES);
    let mut m = Vec::with_capacity(header.len() + lines * (BASE64_LINE + 2));
    m.extend_from_slice(header.as_bytes());
    encode_base64_lines(envelope, &mut m);
    m
}

/// Appends `data` in base64, CRLF after every 76 characters and after the last line.
fn encode_base64_lines(data: &[u8], out: &mut Vec<u8>) {
    let mut scratch = [0u8; BASE64_LINE * BASE64_STEP_LINES];
    // Every step but the last is a whole number of lines, a multiple of 3 bytes: no padding
    // until the very end.
    for step in data.chunks(BASE64_LINE_BYTES * BASE64_STEP_LINES) {
        let len = STANDARD.encoded_length(step.len());
        let text = STANDARD.encode(step, Out::from_slice(&mut scratch[..len]));
        // Fixed-size lines: each copy is a few vector moves, not a memcpy call.
        let (lines, last) = text.as_chunks::<BASE64_LINE>();
        for line in lines {
            out.extend_from_slice(line);
            out.extend_from_slice(b"\r\n");
        }
        if !last.is_empty() {
            out.extend_from_slice(last);
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// Decodes a base64 body: lines of 76 characters and CRLF (what we write) on a fast path,
/// anything else (other line lengths, stray white space) by dropping white space first.
/// None if it is not base64.
pub fn decode_base64_lines(text: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3 + 3);
    let mut lines_text = [0u8; BASE64_LINE * BASE64_STEP_LINES];
    let mut rest = text;
    loop {
        let mut lines = 0;
        while lines < BASE64_STEP_LINES
            && let Some((line, after)) = rest.split_first_chunk::<BASE64_LINE>()
            && after.starts_with(b"\r\n")
        {
            let at = lines * BASE64_LINE;
            lines_text[at..at + BASE64_LINE].copy_from_slice(line);
            rest = &after[2..];
            lines += 1;
        }
        if lines == 0 {
            break;
        }
        // Gathered without line breaks in a buffer that stays in L1, then decoded straight
        // into the output (reserved above: written once, never zeroed or moved).
        STANDARD
            .decode_append(&lines_text[..lines * BASE64_LINE], &mut out)
            .ok()?;
        if lines_text[lines * BASE64_LINE - 1] == b'=' {
            // Padding ends the data: nothing but white space may follow.
            return rest.iter().all(|b| b.is_ascii_whitespace()).then_some(out);
        }
    }
    let tail: Vec<u8> = rest
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    if !tail.is_empty() {
        out.extend_from_slice(&STANDARD.decode_to_vec(&tail).ok()?);
    }
    Some(out)
}

/// Runs a UID FETCH (`fetch`) and, if the message is not there, once more after a NOOP.
/// A session learns of messages other sessions appended only when a command lets the
/// server report them (RFC 3501 5.2, 6.1.2: NOOP is the poll); until then a UID FETCH of
/// one answers OK with no data. The pool hands a read any session, often not the one that
/// appended the block a moment before.
async fn seen_after_sync<T>(
    c: &mut Client,
    fetch: impl AsyncFn(&mut Client) -> Result<Option<T>, ImapError>,
) -> Result<Option<T>, ImapError> {
    if let Some(found) = fetch(c).await? {
        return Ok(Some(found));
    }
    c.noop().await?;
    fetch(c).await
}

/// A fetched body as the envelope it carries (see the module comment); None if it is
/// the envelope already (the caller keeps it as it is). A body that is neither is passed on
/// as it is, for the envelope check to reject by name.
fn envelope_of(body: &[u8]) -> Option<Vec<u8>> {
    if body.starts_with(&mailfs_format::MAGIC) {
        return None;
    }
    decode_base64_lines(body)
}

impl Remote for ImapRemote {
    fn describe(&self) -> String {
        format!("{}@{}:{}", self.cfg.user, self.cfg.host, self.cfg.port)
    }

    fn prepare(&self) -> Result<(), RemoteError> {
        let folder = self.folder.clone();
        self.with(false, Patience::Slow, async move |c| {
            c.create(&folder).await
        })?;
        // Sessions opened before the folder existed are not selected on it.
        self.reset();
        Ok(())
    }

    fn append(&self, batch: &[(String, &[u8])]) -> Result<Vec<Option<u32>>, RemoteError> {
        let folder = self.folder.clone();
        self.with(true, Patience::Deadline, async move |c| {
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
        self.with(true, Patience::Deadline, async move |c| {
            seen_after_sync(c, async |c: &mut Client| {
                if c.capabilities().binary {
                    // Decoded by the server: the envelope, or base64 written in the other
                    // mode.
                    let body = c.uid_fetch_body(uid, None).await?;
                    return Ok(body.map(|b| envelope_of(&b).unwrap_or(b)));
                }
                // The whole message, not BODY[TEXT], which costs Dovecot a scan of the
                // message. It stays in the buffer it was received in; its body is decoded
                // from there.
                let message = c.uid_fetch_message(uid).await?;
                Ok(message.map(|m| {
                    let body = &m[imap_client::body_start(&m)..];
                    envelope_of(body).unwrap_or_else(|| body.to_vec())
                }))
            })
            .await
        })
    }

    fn fetch_range(
        &self,
        uid: u32,
        start: usize,
        len: usize,
    ) -> Result<Option<Vec<u8>>, RemoteError> {
        self.with(true, Patience::Deadline, async move |c| {
            seen_after_sync(c, async |c: &mut Client| {
                if c.capabilities().binary {
                    // RFC 3516 4.2: a partial BINARY fetch counts decoded octets.
                    let origin = u64::try_from(start).unwrap_or(u64::MAX);
                    let len = u32::try_from(len).unwrap_or(u32::MAX);
                    return c.uid_fetch_body(uid, Some((origin, len))).await;
                }
                // Base64 as we write it: envelope bytes 57 L.. are text 78 L.. of the body,
                // so whole lines are fetched and decoded, and the range cut from them.
                let first_line = start / BASE64_LINE_BYTES;
                let lines = (start + len).div_ceil(BASE64_LINE_BYTES) - first_line;
                let text_start = (first_line * (BASE64_LINE + 2)) as u64;
                let text_len = u32::try_from(lines * (BASE64_LINE + 2)).unwrap_or(u32::MAX);
                let Some(text) = c.uid_fetch_body(uid, Some((text_start, text_len))).await? else {
                    return Ok(None);
                };
                // Text that is not our base64 gives bytes the envelope check rejects.
                let bytes = decode_base64_lines(&text).unwrap_or_default();
                let from = (start - first_line * BASE64_LINE_BYTES).min(bytes.len());
                Ok(Some(bytes[from..(from + len).min(bytes.len())].to_vec()))
            })
            .await
        })
    }

    fn list(&self) -> Result<Vec<(u32, String)>, RemoteError> {
        let folder = self.folder.clone();
        self.with(true, Patience::Slow, async move |c| {
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
        self.with(true, Patience::Slow, async move |c| {
            let found = c.uid_search_header(NAME_HEADER, &name).await?;
            if !found.is_empty() {
                return Ok(found);
            }
            // Perhaps appended over another session since this one last synchronised.
            c.noop().await?;
            c.uid_search_header(NAME_HEADER, &name).await
        })
    }

    fn expunge(&self, uids: &[u32]) -> Result<(), RemoteError> {
        if uids.is_empty() {
            return Ok(());
        }
        self.with(true, Patience::Slow, async move |c| {
            c.uid_expunge(uids).await
        })
    }

    fn quota(&self) -> Result<Option<(u64, u64)>, RemoteError> {
        let folder = self.folder.clone();
        self.with(true, Patience::Slow, async move |c| {
            if !c.capabilities().quota {
                return Ok(None);
            }
            c.quota(&folder).await
        })
    }

    fn ping(&self) -> Result<(), RemoteError> {
        self.with(true, Patience::Deadline, async move |c| c.noop().await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    fn body_of(m: &[u8]) -> &[u8] {
        let at = m.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        &m[at + 4..]
    }

    #[test]
    fn messages_carry_the_name_and_round_trip_in_base64() {
        let env: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let m = build_message("abc dir 1.0 v1 t1", &env, false);
        let text = String::from_utf8(m.clone()).unwrap();
        assert!(text.contains("\r\nX-Mailfs: abc dir 1.0 v1 t1\r\n"));
        assert!(text.contains("\r\nSubject: abc dir 1.0 v1 t1\r\n"));
        assert!(text.contains("\r\nContent-Transfer-Encoding: base64\r\n"));
        assert!(text.lines().all(|l| l.len() <= 998));
        assert_eq!(decode_base64_lines(body_of(&m)).unwrap(), env);
        let b = build_message("n", &env, true);
        assert!(b.ends_with(&env));
    }

    #[test]
    fn base64_lines_round_trip_at_every_boundary() {
        let step = BASE64_LINE_BYTES * BASE64_STEP_LINES;
        for len in [
            0,
            1,
            2,
            3,
            56,
            57,
            58,
            114,
            step - 1,
            step,
            step + 1,
            3 * step + 5,
            1 << 20,
        ] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 13) as u8).collect();
            let mut text = Vec::new();
            encode_base64_lines(&data, &mut text);
            // RFC 2045 6.8 lines, the same text a plain encoder makes.
            let plain = base64::engine::general_purpose::STANDARD.encode(&data);
            let expected: Vec<u8> = plain
                .as_bytes()
                .chunks(BASE64_LINE)
                .flat_map(|l| [l, b"\r\n"].concat())
                .collect();
            assert_eq!(text, expected, "len {len}");
            assert_eq!(decode_base64_lines(&text).unwrap(), data, "len {len}");
        }
    }

    #[test]
    fn base64_from_other_writers_decodes_and_garbage_does_not() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let plain = base64::engine::general_purpose::STANDARD.encode(&data);
        // 72-character lines with bare LF, as another client might write.
        let lf: Vec<u8> = plain
            .as_bytes()
            .chunks(72)
            .flat_map(|l| [l, b"\n"].concat())
            .collect();
        assert_eq!(decode_base64_lines(&lf).unwrap(), data);
        // One unbroken line, and a tail after a fast-path prefix.
        assert_eq!(decode_base64_lines(plain.as_bytes()).unwrap(), data);
        let mut mixed = Vec::new();
        encode_base64_lines(&data[..57 * 3], &mut mixed);
        assert_eq!(decode_base64_lines(&mixed).unwrap(), &data[..57 * 3]);
        assert!(decode_base64_lines(b"not base64 at all!\r\n").is_none());
        // Data after padding is not base64.
        let mut padded = Vec::new();
        let fifty_six: Vec<u8> = (1..=56).collect();
        encode_base64_lines(&fifty_six, &mut padded);
        assert_eq!(padded.len(), BASE64_LINE + 2);
        padded.extend_from_slice(b"QUJD\r\n");
        assert!(decode_base64_lines(&padded).is_none());
    }

    #[test]
    fn a_body_is_taken_for_what_it_holds() {
        let mut env = mailfs_format::MAGIC.to_vec();
        env.extend_from_slice(&[0, 1, 2, 255]);
        // Binary (BINARY.PEEK or a server that kept it) as it is, base64 decoded.
        assert_eq!(envelope_of(&env), None);
        let m = build_message("n", &env, false);
        assert_eq!(envelope_of(body_of(&m)), Some(env));
        // Neither: passed on for the envelope check to reject.
        assert_eq!(envelope_of(b"hello"), None);
    }
}
