//! The stream's frames (docs/replication.md, "The stream"): encoding and bounded parsing, no I/O.
//!
//! `frame = len u32 | kind u8 | body[len - 1]`, integers little-endian, `str = len u16 | UTF-8`.
//! Whoever reads a frame checks its length against [`FRAME_BYTES_MAX`] before reading the body,
//! and every field is checked against what is left of the body.

use std::fmt;

/// The longest frame body: a write of one full copy chunk or one engine write plus its header.
/// The engines write at most a group commit's data at once; a longer write is split
/// ([`WRITE_BYTES_MAX`]).
pub const FRAME_BYTES_MAX: usize = WRITE_BYTES_MAX + 8 * 1024;
/// The most bytes one `write` op carries: longer engine writes go as several ops.
pub const WRITE_BYTES_MAX: usize = 16 << 20;
/// The longest path in a frame.
pub const PATH_BYTES_MAX: usize = 4096;
/// The longest node name or refusal reason.
pub const NAME_BYTES_MAX: usize = 255;
/// The most files a `CopyStart` lists.
pub const COPY_FILES_MAX: u32 = 1 << 20;

pub const VERSION: u8 = 1;

/// One change to the files, relative to the data directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Write {
        path: String,
        offset: u64,
        bytes: Vec<u8>,
    },
    Zeros {
        path: String,
        offset: u64,
        len: u64,
    },
    SetLen {
        path: String,
        len: u64,
    },
    Allocate {
        path: String,
        len: u64,
    },
    Sync {
        path: String,
    },
    Create {
        path: String,
    },
    CreateDirAll {
        path: String,
    },
    Rename {
        from: String,
        to: String,
    },
    Remove {
        path: String,
    },
    SyncDir {
        path: String,
    },
}

impl Op {
    /// Bytes this op costs in the backlog (its data, or a small constant).
    pub fn weight(&self) -> usize {
        match self {
            Op::Write { bytes, .. } => bytes.len() + 64,
            _ => 64,
        }
    }

    pub fn is_sync(&self) -> bool {
        matches!(self, Op::Sync { .. } | Op::SyncDir { .. })
    }
}

/// A frame of the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Replica → owner, first: a nonce the owner's `Hello` MAC must cover.
    Greeting {
        nonce: [u8; 16],
    },
    Hello {
        node: String,
        epoch: u64,
        session: u128,
        mac: [u8; 32],
    },
    Welcome {
        session: u128,
        applied: u64,
        mac: [u8; 32],
    },
    Op {
        seq: u64,
        op: Op,
    },
    Ack {
        seq: u64,
    },
    Refuse {
        reason: String,
    },
    CopyStart {
        seq: u64,
        files: Vec<(String, u64)>,
    },
    CopyDone {
        seq: u64,
    },
}

/// A frame that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError(pub String);

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WireError {}

fn bad(what: impl Into<String>) -> WireError {
    WireError(what.into())
}

/// Appends `frame` to `out` (length prefix included).
pub fn encode(frame: &Frame, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    match frame {
        Frame::Greeting { nonce } => {
            out.push(0);
            out.extend_from_slice(nonce);
        }
        Frame::Hello {
            node,
            epoch,
            session,
            mac,
        } => {
            out.push(1);
            out.push(VERSION);
            put_str(out, node);
            out.extend_from_slice(&epoch.to_le_bytes());
            out.extend_from_slice(&session.to_le_bytes());
            out.extend_from_slice(mac);
        }
        Frame::Welcome {
            session,
            applied,
            mac,
        } => {
            out.push(2);
            out.extend_from_slice(&session.to_le_bytes());
            out.extend_from_slice(&applied.to_le_bytes());
            out.extend_from_slice(mac);
        }
        Frame::Op { seq, op } => {
            out.push(3);
            out.extend_from_slice(&seq.to_le_bytes());
            encode_op(op, out);
        }
        Frame::Ack { seq } => {
            out.push(4);
            out.extend_from_slice(&seq.to_le_bytes());
        }
        Frame::Refuse { reason } => {
            out.push(5);
            put_str(out, reason);
        }
        Frame::CopyStart { seq, files } => {
            out.push(6);
            out.extend_from_slice(&seq.to_le_bytes());
            out.extend_from_slice(&(files.len() as u32).to_le_bytes());
            for (path, len) in files {
                put_str(out, path);
                out.extend_from_slice(&len.to_le_bytes());
            }
        }
        Frame::CopyDone { seq } => {
            out.push(7);
            out.extend_from_slice(&seq.to_le_bytes());
        }
    }
    let len = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
}

fn encode_op(op: &Op, out: &mut Vec<u8>) {
    match op {
        Op::Write {
            path,
            offset,
            bytes,
        } => {
            out.push(1);
            put_str(out, path);
            out.extend_from_slice(&offset.to_le_bytes());
            out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            out.extend_from_slice(bytes);
        }
        Op::Zeros { path, offset, len } => {
            out.push(2);
            put_str(out, path);
            out.extend_from_slice(&offset.to_le_bytes());
            out.extend_from_slice(&len.to_le_bytes());
        }
        Op::SetLen { path, len } => {
            out.push(3);
            put_str(out, path);
            out.extend_from_slice(&len.to_le_bytes());
        }
        Op::Allocate { path, len } => {
            out.push(4);
            put_str(out, path);
            out.extend_from_slice(&len.to_le_bytes());
        }
        Op::Sync { path } => {
            out.push(5);
            put_str(out, path);
        }
        Op::Create { path } => {
            out.push(6);
            put_str(out, path);
        }
        Op::CreateDirAll { path } => {
            out.push(7);
            put_str(out, path);
        }
        Op::Rename { from, to } => {
            out.push(8);
            put_str(out, from);
            put_str(out, to);
        }
        Op::Remove { path } => {
            out.push(9);
            put_str(out, path);
        }
        Op::SyncDir { path } => {
            out.push(10);
            put_str(out, path);
        }
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    // Every string written is checked by its maker against PATH_BYTES_MAX (< u16::MAX).
    let len = u16::try_from(s.len()).expect("a string of at most PATH_BYTES_MAX bytes");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Reads the length prefix: the body's length, refused past [`FRAME_BYTES_MAX`] or empty.
pub fn body_len(prefix: [u8; 4]) -> Result<usize, WireError> {
    let len = u32::from_le_bytes(prefix) as usize;
    if len == 0 {
        return Err(bad("an empty frame"));
    }
    if len > FRAME_BYTES_MAX {
        return Err(bad(format!(
            "a frame of {len} bytes (at most {FRAME_BYTES_MAX})"
        )));
    }
    Ok(len)
}

/// Parses a frame body (kind byte first).
pub fn decode(body: &[u8]) -> Result<Frame, WireError> {
    let mut d = Dec { rest: body };
    let kind = d.u8()?;
    let frame = match kind {
        0 => Frame::Greeting { nonce: d.array()? },
        1 => {
            let version = d.u8()?;
            if version != VERSION {
                return Err(bad(format!(
                    "stream version {version} (this node speaks 1)"
                )));
            }
            Frame::Hello {
                node: d.name()?,
                epoch: d.u64()?,
                session: d.u128()?,
                mac: d.array()?,
            }
        }
        2 => Frame::Welcome {
            session: d.u128()?,
            applied: d.u64()?,
            mac: d.array()?,
        },
        3 => Frame::Op {
            seq: d.u64()?,
            op: decode_op(&mut d)?,
        },
        4 => Frame::Ack { seq: d.u64()? },
        5 => Frame::Refuse { reason: d.name()? },
        6 => {
            let seq = d.u64()?;
            let count = d.u32()?;
            if count > COPY_FILES_MAX {
                return Err(bad(format!("a copy of {count} files")));
            }
            let mut files = Vec::new();
            for _ in 0..count {
                files.push((d.path()?, d.u64()?));
            }
            Frame::CopyStart { seq, files }
        }
        7 => Frame::CopyDone { seq: d.u64()? },
        other => return Err(bad(format!("unknown frame kind {other}"))),
    };
    if !d.rest.is_empty() {
        return Err(bad(format!("{} bytes after a frame", d.rest.len())));
    }
    Ok(frame)
}

fn decode_op(d: &mut Dec<'_>) -> Result<Op, WireError> {
    Ok(match d.u8()? {
        1 => {
            let path = d.path()?;
            let offset = d.u64()?;
            let len = d.u32()? as usize;
            if len > WRITE_BYTES_MAX {
                return Err(bad(format!("a write of {len} bytes")));
            }
            Op::Write {
                path,
                offset,
                bytes: d.take(len)?.to_vec(),
            }
        }
        2 => Op::Zeros {
            path: d.path()?,
            offset: d.u64()?,
            len: d.u64()?,
        },
        3 => Op::SetLen {
            path: d.path()?,
            len: d.u64()?,
        },
        4 => Op::Allocate {
            path: d.path()?,
            len: d.u64()?,
        },
        5 => Op::Sync { path: d.path()? },
        6 => Op::Create { path: d.path()? },
        7 => Op::CreateDirAll { path: d.path()? },
        8 => Op::Rename {
            from: d.path()?,
            to: d.path()?,
        },
        9 => Op::Remove { path: d.path()? },
        10 => Op::SyncDir { path: d.path()? },
        other => return Err(bad(format!("unknown op {other}"))),
    })
}

/// A relative path a replica may write: not empty, at most [`PATH_BYTES_MAX`] bytes, no
/// leading `/`, no empty, `.` or `..` component, no NUL; or `.` alone, the copy's own
/// directory. Also what the owner checks before mirroring a name.
pub fn check_path(path: &str) -> Result<(), WireError> {
    if path == "." {
        return Ok(());
    }
    if path.is_empty() || path.len() > PATH_BYTES_MAX {
        return Err(bad("a path that is empty or too long"));
    }
    if path.contains('\0') {
        return Err(bad("a path with NUL"));
    }
    if path
        .split('/')
        .any(|part| part.is_empty() || part == "." || part == "..")
    {
        return Err(bad(format!("a path outside the copy: {path:?}")));
    }
    Ok(())
}

struct Dec<'a> {
    rest: &'a [u8],
}

impl<'a> Dec<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if self.rest.len() < n {
            return Err(bad("a frame shorter than its fields"));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn u128(&mut self) -> Result<u128, WireError> {
        Ok(u128::from_le_bytes(self.array()?))
    }

    fn str(&mut self, max: usize) -> Result<String, WireError> {
        let len = u16::from_le_bytes(self.array()?) as usize;
        if len > max {
            return Err(bad(format!("a string of {len} bytes (at most {max})")));
        }
        String::from_utf8(self.take(len)?.to_vec()).map_err(|_| bad("a string that is not UTF-8"))
    }

    fn name(&mut self) -> Result<String, WireError> {
        self.str(NAME_BYTES_MAX)
    }

    fn path(&mut self) -> Result<String, WireError> {
        let path = self.str(PATH_BYTES_MAX)?;
        check_path(&path)?;
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(frame: Frame) {
        let mut out = Vec::new();
        encode(&frame, &mut out);
        let len = body_len(out[..4].try_into().unwrap()).unwrap();
        assert_eq!(len, out.len() - 4);
        assert_eq!(decode(&out[4..]).unwrap(), frame);
    }

    #[test]
    fn every_frame_and_op_round_trips() {
        round_trip(Frame::Greeting { nonce: [7; 16] });
        round_trip(Frame::Hello {
            node: "n1".into(),
            epoch: 3,
            session: u128::MAX - 5,
            mac: [1; 32],
        });
        round_trip(Frame::Welcome {
            session: 9,
            applied: 11,
            mac: [2; 32],
        });
        round_trip(Frame::Ack { seq: 42 });
        round_trip(Frame::Refuse {
            reason: "stale epoch".into(),
        });
        round_trip(Frame::CopyStart {
            seq: 5,
            files: vec![
                ("store/volume.dat".into(), 1 << 30),
                ("queue/seg-1".into(), 0),
            ],
        });
        round_trip(Frame::CopyDone { seq: 6 });
        let p = || "store/index-00000001.log".to_string();
        for op in [
            Op::Write {
                path: p(),
                offset: 4096,
                bytes: b"record".to_vec(),
            },
            Op::Zeros {
                path: p(),
                offset: 1,
                len: 2,
            },
            Op::SetLen { path: p(), len: 3 },
            Op::Allocate { path: p(), len: 4 },
            Op::Sync { path: p() },
            Op::Create { path: p() },
            Op::CreateDirAll {
                path: "store".into(),
            },
            Op::Rename {
                from: "store/index.snap.tmp".into(),
                to: "store/index.snap".into(),
            },
            Op::Remove { path: p() },
            Op::SyncDir {
                path: "store".into(),
            },
        ] {
            round_trip(Frame::Op { seq: 1, op });
        }
    }

    #[test]
    fn hostile_frames_are_refused_not_trusted() {
        assert!(body_len(0u32.to_le_bytes()).is_err());
        assert!(body_len(((FRAME_BYTES_MAX + 1) as u32).to_le_bytes()).is_err());
        // Every prefix of a valid frame is refused, never a panic.
        let mut out = Vec::new();
        encode(
            &Frame::Op {
                seq: 1,
                op: Op::Rename {
                    from: "a/b".into(),
                    to: "a/c".into(),
                },
            },
            &mut out,
        );
        for cut in 5..out.len() {
            assert!(decode(&out[4..cut]).is_err(), "prefix {cut}");
        }
        // Paths that would leave the copy.
        for path in ["/etc/passwd", "../x", "a/../../x", "a//b", "./a", "", "a/."] {
            assert!(check_path(path).is_err(), "{path}");
            let mut out = Vec::new();
            out.extend_from_slice(&[0; 4]);
            out.push(3);
            out.extend_from_slice(&1u64.to_le_bytes());
            out.push(9);
            out.extend_from_slice(&(path.len() as u16).to_le_bytes());
            out.extend_from_slice(path.as_bytes());
            assert!(decode(&out[4..]).is_err(), "{path}");
        }
        // A write longer than its frame, an unknown kind, trailing bytes.
        let mut w = vec![3];
        w.extend_from_slice(&1u64.to_le_bytes());
        w.push(1);
        w.extend_from_slice(&1u16.to_le_bytes());
        w.push(b'a');
        w.extend_from_slice(&0u64.to_le_bytes());
        w.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&w).is_err());
        assert!(decode(&[99]).is_err());
        assert!(decode(&[4, 0, 0, 0, 0, 0, 0, 0, 0, 1]).is_err());
        assert!(check_path("store/volume.dat").is_ok());
    }
}
