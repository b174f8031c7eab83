//! Message names: the `X-Mailfs` header and Subject every message carries
//! (docs/mailfs.md 2), made from the envelope header plus the time it was written.
//! (Not to be confused with [`crate::keys`], the encryption keys.)

use mailfs_format::{Header, Kind, search_key};

/// What a message's name says about it. Nothing here is trusted until the envelope opens
/// with the same fields (M1); a name only tells a reader where to look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MessageName {
    pub fsid: [u8; 16],
    pub kind: Kind,
    pub object: u64,
    pub index: u64,
    pub version: u64,
    /// Seconds since the epoch when written: gc's grace clock for unreferenced blocks.
    pub time: i64,
}

impl MessageName {
    pub fn header(&self, raid_index: u8) -> Header {
        Header {
            kind: self.kind,
            // Blocks are sealed in segments, so a part of one can be fetched and
            // authenticated alone (docs/mailfs.md 3).
            flags: if self.kind == Kind::Block {
                mailfs_format::FLAG_SEGMENTED
            } else {
                0
            },
            fsid: self.fsid,
            object: self.object,
            index: self.index,
            version: self.version,
            raid_index,
        }
    }

    /// The name without its time: two messages with the same [`NameId`] hold the same
    /// thing.
    pub fn id(&self) -> NameId {
        NameId {
            kind: self.kind,
            object: self.object,
            index: self.index,
            version: self.version,
        }
    }

    pub fn render(&self) -> String {
        format!("{} t{}", search_key(&self.header(0)), self.time)
    }

    /// Parses a rendered name; None for anything else (foreign mail in the folder).
    pub fn parse(text: &str) -> Option<MessageName> {
        let mut words = text.split_ascii_whitespace();
        let fsid_hex = words.next()?;
        let kind = words.next()?;
        let mut fsid = [0u8; 16];
        if fsid_hex.len() != 32 {
            return None;
        }
        for (i, b) in fsid.iter_mut().enumerate() {
            *b = u8::from_str_radix(fsid_hex.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        let hex = |s: &str| u64::from_str_radix(s, 16).ok();
        let dec = |s: &str| s.parse::<u64>().ok();
        let version_of = |s: Option<&str>| s?.strip_prefix('v').and_then(dec);
        let (kind, object, index, version) = match kind {
            "sb" => (
                Kind::Superblock,
                0,
                dec(words.next()?)?,
                version_of(words.next())?,
            ),
            "dir" | "blk" => {
                let (o, i) = words.next()?.split_once('.')?;
                let k = if kind == "dir" {
                    Kind::Directory
                } else {
                    Kind::Block
                };
                (k, hex(o)?, dec(i)?, version_of(words.next())?)
            }
            "chk" => {
                let id = words.next()?;
                if id.len() != 32 {
                    return None;
                }
                (Kind::Chunk, hex(&id[..16])?, hex(&id[16..])?, 0)
            }
            "log" => (
                Kind::LogPage,
                0,
                dec(words.next()?)?,
                version_of(words.next())?,
            ),
            "jnl" => (
                Kind::JournalPage,
                0,
                hex(words.next()?)?,
                version_of(words.next())?,
            ),
            _ => return None,
        };
        let time = words.next()?.strip_prefix('t')?.parse().ok()?;
        if words.next().is_some() {
            return None;
        }
        Some(MessageName {
            fsid,
            kind,
            object,
            index,
            version,
            time,
        })
    }
}

/// A message name less its time: what the message holds (kind, object, index, version).
/// The per-account index maps these to UIDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NameId {
    pub kind: Kind,
    pub object: u64,
    pub index: u64,
    pub version: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_foreign_names_are_none() {
        for kind in [
            Kind::Superblock,
            Kind::Directory,
            Kind::Block,
            Kind::Chunk,
            Kind::LogPage,
        ] {
            let k = MessageName {
                fsid: [0xab; 16],
                kind,
                object: if matches!(kind, Kind::Superblock | Kind::LogPage) {
                    0
                } else {
                    0xa3f2
                },
                index: if kind == Kind::Chunk {
                    u64::MAX - 3
                } else {
                    17
                },
                version: if kind == Kind::Chunk { 0 } else { 42 },
                time: 1_700_000_000,
            };
            assert_eq!(MessageName::parse(&k.render()), Some(k), "{}", k.render());
        }
        for foreign in [
            "",
            "hello world",
            "abab dir 1.0 v1 t1",
            "abababababababababababababababab dir 1.0 v1",
            "abababababababababababababababab dir 1.0 v1 t1 extra",
            "abababababababababababababababab xyz 1.0 v1 t1",
        ] {
            assert_eq!(MessageName::parse(foreign), None, "{foreign}");
        }
    }
}
