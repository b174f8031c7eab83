//! The three record formats of a backup's objects (docs/operations.md, Backups), written to
//! a stream and read back one record at a time, so neither side holds more than a message:
//!
//! - a **pack**: `MSTWPACK`, format u32; per message `uid u32, internal date i64,
//!   length u32, content`;
//! - a **state**: `MSTWSTAT`, format u32; per message `uid u32, flags u8, MODSEQ u64,
//!   keyword count u8, keywords (u16 length + bytes)`;
//! - a **queue**: `MSTWQUEU`, format u32; per message `id u64, arrival ms u64, attempts u32,
//!   sender, recipient count u16, per recipient (address, status u8, last error), content`,
//!   strings as u16 length + bytes, the content as u32 length + bytes.
//!
//! Integers are little-endian. A reader knows the object's length (from the manifest) and
//! refuses a length field that runs past it, so damaged bytes never make it allocate more
//! than the object holds.

use std::io::{Read, Write};

use anyhow::{Result, bail};

use super::FORMAT_VERSION;

pub(crate) const PACK_MAGIC: [u8; 8] = *b"MSTWPACK";
pub(crate) const STATE_MAGIC: [u8; 8] = *b"MSTWSTAT";
pub(crate) const QUEUE_MAGIC: [u8; 8] = *b"MSTWQUEU";

/// One message of a pack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Packed {
    pub(crate) uid: u32,
    pub(crate) internal_date: i64,
    pub(crate) content: Vec<u8>,
}

/// One message of a state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Kept {
    pub(crate) uid: u32,
    pub(crate) flags: u8,
    pub(crate) modseq: u64,
    pub(crate) keywords: Vec<String>,
}

/// One message of the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Queued {
    pub(crate) id: u64,
    pub(crate) attempts: u32,
    pub(crate) envelope: queue::Envelope,
    pub(crate) content: Vec<u8>,
}

pub(crate) fn write_header(out: &mut impl Write, magic: &[u8; 8]) -> std::io::Result<()> {
    out.write_all(magic)?;
    out.write_all(&FORMAT_VERSION.to_le_bytes())
}

pub(crate) fn write_packed(
    out: &mut impl Write,
    uid: u32,
    internal_date: i64,
    content: &[u8],
) -> Result<()> {
    let len = u32::try_from(content.len())?;
    out.write_all(&uid.to_le_bytes())?;
    out.write_all(&internal_date.to_le_bytes())?;
    out.write_all(&len.to_le_bytes())?;
    out.write_all(content)?;
    Ok(())
}

fn write_short(out: &mut impl Write, s: &str) -> Result<()> {
    let len = u16::try_from(s.len())?;
    out.write_all(&len.to_le_bytes())?;
    out.write_all(s.as_bytes())?;
    Ok(())
}

pub(crate) fn write_kept(out: &mut impl Write, kept: &Kept) -> Result<()> {
    out.write_all(&kept.uid.to_le_bytes())?;
    out.write_all(&[kept.flags])?;
    out.write_all(&kept.modseq.to_le_bytes())?;
    out.write_all(&[u8::try_from(kept.keywords.len())?])?;
    for k in &kept.keywords {
        write_short(out, k)?;
    }
    Ok(())
}

pub(crate) fn status_code(status: queue::RecipientStatus) -> u8 {
    match status {
        queue::RecipientStatus::Pending => 0,
        queue::RecipientStatus::Delivered => 1,
        queue::RecipientStatus::Failed => 2,
        queue::RecipientStatus::Moved => 3,
    }
}

fn status_of(code: u8) -> Option<queue::RecipientStatus> {
    Some(match code {
        0 => queue::RecipientStatus::Pending,
        1 => queue::RecipientStatus::Delivered,
        2 => queue::RecipientStatus::Failed,
        3 => queue::RecipientStatus::Moved,
        _ => return None,
    })
}

pub(crate) fn write_queued(out: &mut impl Write, q: &Queued) -> Result<()> {
    out.write_all(&q.id.to_le_bytes())?;
    out.write_all(&q.envelope.arrival_ms.to_le_bytes())?;
    out.write_all(&q.attempts.to_le_bytes())?;
    write_short(out, &q.envelope.sender)?;
    out.write_all(&u16::try_from(q.envelope.recipients.len())?.to_le_bytes())?;
    for r in &q.envelope.recipients {
        write_short(out, &r.address)?;
        out.write_all(&[status_code(r.status)])?;
        write_short(out, r.last_error.as_deref().unwrap_or(""))?;
    }
    out.write_all(&u32::try_from(q.content.len())?.to_le_bytes())?;
    out.write_all(&q.content)?;
    Ok(())
}

/// Reads records of one object, knowing how many bytes it holds.
pub(crate) struct Records<R> {
    input: R,
    left: u64,
}

impl<R: Read> Records<R> {
    /// Checks the magic number and the format version.
    pub(crate) fn open(mut input: R, len: u64, magic: &[u8; 8]) -> Result<Records<R>> {
        let mut head = [0u8; 12];
        if len < 12 {
            bail!("shorter than its header");
        }
        input.read_exact(&mut head)?;
        if head[..8] != magic[..] {
            bail!("not a {} object", String::from_utf8_lossy(&magic[4..]));
        }
        let version = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
        if version != FORMAT_VERSION {
            bail!("format {version}, this program reads {FORMAT_VERSION}");
        }
        Ok(Records {
            input,
            left: len - 12,
        })
    }

    pub(crate) fn at_end(&self) -> bool {
        self.left == 0
    }

    fn bytes(&mut self, n: u64) -> Result<Vec<u8>> {
        if n > self.left {
            bail!("a record runs past the end ({n} bytes, {} left)", self.left);
        }
        let mut buf = vec![0u8; n as usize];
        self.input.read_exact(&mut buf)?;
        self.left -= n;
        Ok(buf)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let v = self.bytes(N as u64)?;
        let mut a = [0u8; N];
        a.copy_from_slice(&v);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn text(&mut self, len: u64) -> Result<String> {
        String::from_utf8(self.bytes(len)?).map_err(|_| anyhow::anyhow!("a string is not UTF-8"))
    }

    pub(crate) fn packed(&mut self) -> Result<Packed> {
        let uid = self.u32()?;
        let internal_date = self.u64()? as i64;
        let len = self.u32()?;
        Ok(Packed {
            uid,
            internal_date,
            content: self.bytes(len as u64)?,
        })
    }

    pub(crate) fn kept(&mut self) -> Result<Kept> {
        let uid = self.u32()?;
        let flags = self.u8()?;
        let modseq = self.u64()?;
        let count = self.u8()?;
        let mut keywords = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let len = self.u16()?;
            keywords.push(self.text(len as u64)?);
        }
        Ok(Kept {
            uid,
            flags,
            modseq,
            keywords,
        })
    }

    pub(crate) fn queued(&mut self) -> Result<Queued> {
        let id = self.u64()?;
        let arrival_ms = self.u64()?;
        let attempts = self.u32()?;
        let n = self.u16()?;
        let sender = self.text(n as u64)?;
        let count = self.u16()?;
        let mut recipients = Vec::with_capacity(count.min(1024) as usize);
        for _ in 0..count {
            let n = self.u16()?;
            let address = self.text(n as u64)?;
            let code = self.u8()?;
            let status = status_of(code)
                .ok_or_else(|| anyhow::anyhow!("recipient status {code} is not one we write"))?;
            let n = self.u16()?;
            let error = self.text(n as u64)?;
            recipients.push(queue::Recipient {
                address,
                status,
                last_error: (!error.is_empty()).then_some(error),
            });
        }
        let len = self.u32()?;
        Ok(Queued {
            id,
            attempts,
            envelope: queue::Envelope {
                sender,
                recipients,
                arrival_ms,
            },
            content: self.bytes(len as u64)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_and_refuse_what_runs_past_the_end() {
        let mut out = Vec::new();
        write_header(&mut out, &QUEUE_MAGIC).unwrap();
        let q = Queued {
            id: 7,
            attempts: 2,
            envelope: queue::Envelope {
                sender: "a@x.test".into(),
                recipients: vec![
                    queue::Recipient {
                        address: "b@y.test".into(),
                        status: queue::RecipientStatus::Pending,
                        last_error: Some("451 later".into()),
                    },
                    queue::Recipient {
                        address: "c@y.test".into(),
                        status: queue::RecipientStatus::Delivered,
                        last_error: None,
                    },
                ],
                arrival_ms: 1_700_000_000_000,
            },
            content: b"Subject: x\r\n\r\nhi\r\n".to_vec(),
        };
        write_queued(&mut out, &q).unwrap();
        let mut r = Records::open(&out[..], out.len() as u64, &QUEUE_MAGIC).unwrap();
        assert_eq!(r.queued().unwrap(), q);
        assert!(r.at_end());
        // Cut short: the content's length runs past the end.
        let cut = &out[..out.len() - 3];
        let mut r = Records::open(cut, cut.len() as u64, &QUEUE_MAGIC).unwrap();
        assert!(r.queued().is_err());
        assert!(Records::open(&out[..], out.len() as u64, &PACK_MAGIC).is_err());

        let mut out = Vec::new();
        write_header(&mut out, &STATE_MAGIC).unwrap();
        let kept = Kept {
            uid: 3,
            flags: 5,
            modseq: 9,
            keywords: vec!["$Junk".into(), "work".into()],
        };
        write_kept(&mut out, &kept).unwrap();
        let mut r = Records::open(&out[..], out.len() as u64, &STATE_MAGIC).unwrap();
        assert_eq!(r.kept().unwrap(), kept);
        assert!(r.at_end());

        let mut out = Vec::new();
        write_header(&mut out, &PACK_MAGIC).unwrap();
        write_packed(&mut out, 4, -1, b"body").unwrap();
        let mut r = Records::open(&out[..], out.len() as u64, &PACK_MAGIC).unwrap();
        let packed = r.packed().unwrap();
        assert_eq!((packed.uid, packed.internal_date), (4, -1));
        assert_eq!(packed.content, b"body");
        assert!(r.at_end());
    }
}
