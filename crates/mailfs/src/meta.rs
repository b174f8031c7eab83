//! Payloads of directory and superblock messages (docs/mailfs.md 3).
//!
//! Encoded as CBOR (RFC 8949) through serde: self-describing, compact, and a reader skips
//! fields it does not know, so a newer writer can add fields without breaking older mounts.
//! Every payload starts with a `format` number; a reader refuses a format it does not know.
//! Field names are one or two letters because a large directory repeats them per entry.

use serde::{Deserialize, Serialize};

use crate::FsError;

/// The payload format this code writes and reads.
pub const META_FORMAT: u8 = 1;
/// Longest name of a directory entry (as Linux, NAME_MAX).
pub const NAME_BYTES_MAX: usize = 255;
/// Longest symlink target (as Linux, PATH_MAX).
pub const SYMLINK_BYTES_MAX: usize = 4096;
/// Most entries in one directory. A directory's checkpoint is cut into pages of about
/// `DIR_PAGE_BYTES` (one message each), so the envelope's payload limit does not bound it;
/// memory does (a mount holds a loaded directory whole, about 200 bytes an entry).
pub const DIR_ENTRIES_MAX: usize = 1_000_000;
/// Target size of one page of a directory's checkpoint.
pub const DIR_PAGE_BYTES: usize = 4 << 20;
/// A file of at most this many bytes (and at most one block) is kept in its entry instead
/// of in a block message (docs/mailfs.md 12a, inline data): a small file costs one
/// directory change, not a block message per replica and the round trip to write it.
pub const INLINE_BYTES_MAX: usize = 16 << 10;
/// Inline data one directory may hold in all: past it, small files get blocks again. A
/// loaded directory is held in memory whole, inline content included, and its checkpoint
/// carries it (in pages of `DIR_PAGE_BYTES`).
pub const DIR_INLINE_BYTES_MAX: usize = 64 << 20;

/// POSIX attributes. Directories keep theirs in their own message; files and symlinks keep
/// theirs in their parent's entry (the thesis's layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attr {
    /// Permission bits only (07777); the type is the entry's kind.
    #[serde(rename = "m")]
    pub mode: u32,
    #[serde(rename = "u")]
    pub uid: u32,
    #[serde(rename = "g")]
    pub gid: u32,
    /// Nanoseconds since the epoch.
    #[serde(rename = "a")]
    pub atime: i64,
    #[serde(rename = "t")]
    pub mtime: i64,
    #[serde(rename = "c")]
    pub ctime: i64,
}

impl Attr {
    pub fn new(mode: u32, uid: u32, gid: u32, now: i64) -> Attr {
        Attr {
            mode: mode & 0o7777,
            uid,
            gid,
            atime: now,
            mtime: now,
            ctime: now,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    #[serde(rename = "d")]
    Dir,
    #[serde(rename = "f")]
    File,
    #[serde(rename = "l")]
    Symlink,
    /// Special files (mknod(2), mkfifo(3), bind(2) of a Unix socket): an entry with a mode
    /// and, for devices, a device number, and nothing stored. The kernel serves their I/O
    /// (a FIFO's data never reaches mailfs; a device is never opened by it).
    #[serde(rename = "p")]
    Fifo,
    #[serde(rename = "c")]
    CharDevice,
    #[serde(rename = "b")]
    BlockDevice,
    #[serde(rename = "s")]
    Socket,
}

impl Kind {
    /// A FIFO, device or socket: an entry with nothing stored.
    pub fn is_special(self) -> bool {
        matches!(
            self,
            Kind::Fifo | Kind::CharDevice | Kind::BlockDevice | Kind::Socket
        )
    }
}

/// One stored block of a file: which message holds it and what it must contain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockRef {
    /// Block number: the block covers `[index * block_size, ...)`.
    #[serde(rename = "i")]
    pub index: u64,
    /// The file version that wrote this block (the message's version field).
    #[serde(rename = "v")]
    pub version: u64,
    /// The replication group holding it.
    #[serde(rename = "g")]
    pub group: u8,
    /// Plain length (the last block may be short).
    #[serde(rename = "n")]
    pub len: u32,
    /// BLAKE3 of the plain content: checked after opening (belt and braces with the AEAD)
    /// and used by fsck and dedup.
    #[serde(rename = "h", with = "serde_bytes")]
    pub hash: [u8; 32],
}

impl BlockRef {
    /// The block message's identity in `file`.
    pub fn name_id(&self, file: u64) -> crate::message_name::NameId {
        crate::message_name::NameId {
            kind: mailfs_format::Kind::Block,
            object: file,
            index: self.index,
            version: self.version,
        }
    }
}

/// A deduplicated block's message holds this instead of the data (docs/mailfs.md 5): the
/// block is its chunks, in order, each a content-addressed chunk message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    #[serde(rename = "f")]
    pub format: u8,
    #[serde(rename = "c")]
    pub chunks: Vec<ChunkRef>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkRef {
    /// Keyed BLAKE3 of the chunk's plain content, first 128 bits: its message's name.
    #[serde(rename = "i", with = "serde_bytes")]
    pub id: [u8; 16],
    #[serde(rename = "n")]
    pub len: u32,
}

impl ChunkRef {
    /// The chunk message's identity (version 0: a chunk's content never changes).
    pub fn name_id(&self) -> crate::message_name::NameId {
        let (object, index) = self.name();
        crate::message_name::NameId {
            kind: mailfs_format::Kind::Chunk,
            object,
            index,
            version: 0,
        }
    }

    /// The (object, index) pair of the chunk message's name and header.
    pub fn name(&self) -> (u64, u64) {
        let mut hi = [0u8; 8];
        let mut lo = [0u8; 8];
        hi.copy_from_slice(&self.id[..8]);
        lo.copy_from_slice(&self.id[8..]);
        (u64::from_be_bytes(hi), u64::from_be_bytes(lo))
    }
}

pub fn decode_manifest(bytes: &[u8]) -> Result<Manifest, FsError> {
    let m: Manifest =
        ciborium::from_reader(bytes).map_err(|e| FsError::Corrupt(format!("manifest: {e}")))?;
    if m.format != META_FORMAT {
        return Err(FsError::Corrupt(format!(
            "manifest format {} is not {META_FORMAT}",
            m.format
        )));
    }
    Ok(m)
}

/// The state a dirty file can roll back to (invariant M5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Previous {
    #[serde(rename = "v")]
    pub version: u64,
    #[serde(rename = "s")]
    pub size: u64,
    #[serde(rename = "b")]
    pub blocks: Vec<BlockRef>,
    /// The previous content when it was inline.
    #[serde(
        rename = "d",
        default,
        skip_serializing_if = "Option::is_none",
        with = "opt_bytes"
    )]
    pub inline: Option<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileMeta {
    /// Grows by one with every committed content change.
    #[serde(rename = "v")]
    pub version: u64,
    #[serde(rename = "z")]
    pub block_size: u32,
    /// Sorted by index; a missing index is a hole (zeros).
    #[serde(rename = "b")]
    pub blocks: Vec<BlockRef>,
    /// Set between the two metadata updates of a write (thesis 3.3.1): the file is being
    /// changed from this previous state to `version`/`blocks`.
    #[serde(rename = "p", default, skip_serializing_if = "Option::is_none")]
    pub dirty: Option<Previous>,
    /// The whole content of a small file, kept here instead of in blocks (`blocks` is then
    /// empty; at most [`INLINE_BYTES_MAX`] bytes and one block).
    #[serde(
        rename = "d",
        default,
        skip_serializing_if = "Option::is_none",
        with = "opt_bytes"
    )]
    pub inline: Option<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    #[serde(rename = "n", with = "serde_bytes")]
    pub name: Vec<u8>,
    #[serde(rename = "k")]
    pub kind: Kind,
    #[serde(rename = "i")]
    pub id: u64,
    /// For files and symlinks; a directory's attributes are in its own message.
    #[serde(rename = "a", default, skip_serializing_if = "Option::is_none")]
    pub attr: Option<Attr>,
    #[serde(rename = "s", default)]
    pub size: u64,
    #[serde(
        rename = "l",
        default,
        skip_serializing_if = "Option::is_none",
        with = "opt_bytes"
    )]
    pub target: Option<Vec<u8>>,
    #[serde(rename = "f", default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FileMeta>,
    /// A rename across directories in progress: the directory the entry comes from
    /// (docs/mailfs.md 5). Cleared by the third step or by repair.
    #[serde(rename = "r", default, skip_serializing_if = "Option::is_none")]
    pub moving_from: Option<u64>,
    /// The same rename seen from the source: the directory the entry is going to. With
    /// both marks, whichever directory is read first finishes (or undoes) the rename.
    #[serde(rename = "o", default, skip_serializing_if = "Option::is_none")]
    pub moving_to: Option<u64>,
    /// A device's number (`st_rdev`, as the kernel encodes it); 0 for everything else.
    #[serde(rename = "dv", default, skip_serializing_if = "is_zero")]
    pub rdev: u64,
    /// A hard link (docs/mailfs.md 12b): this name stands for inode `id`, whose
    /// attributes and data are its entry in the inode directory. Such an entry holds only
    /// its name, kind and id.
    #[serde(rename = "hl", default, skip_serializing_if = "is_false")]
    pub link: bool,
    /// In the inode directory only: how many names the file has (`st_nlink`); 0
    /// everywhere else (an ordinary entry is its file's only name).
    #[serde(rename = "nl", default, skip_serializing_if = "is_zero32")]
    pub links: u32,
}

fn is_false(v: &bool) -> bool {
    !*v
}

fn is_zero32(v: &u32) -> bool {
    *v == 0
}

impl Entry {
    /// An entry with a name, kind and id and nothing else: what a directory entry (whose
    /// attributes are in its own message) holds, and the base of every other.
    pub fn bare(name: &[u8], kind: Kind, id: u64) -> Entry {
        Entry {
            name: name.to_vec(),
            kind,
            id,
            attr: None,
            size: 0,
            target: None,
            file: None,
            moving_from: None,
            moving_to: None,
            rdev: 0,
            link: false,
            links: 0,
        }
    }

    /// The name `name` as a hard link to this entry's object.
    pub fn link_to(&self, name: &[u8]) -> Entry {
        Entry {
            link: true,
            ..Entry::bare(name, self.kind, self.id)
        }
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

mod opt_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(b) => s.serialize_bytes(b),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Vec<u8>>, D::Error> {
        Ok(Option::<serde_bytes::ByteBuf>::deserialize(d)?.map(|b| b.into_vec()))
    }
}

/// One directory: its own attributes and its children's entries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dir {
    #[serde(rename = "F")]
    pub format: u8,
    #[serde(rename = "i")]
    pub id: u64,
    /// The parent directory (the root is its own parent).
    #[serde(rename = "p")]
    pub parent: u64,
    #[serde(rename = "a")]
    pub attr: Attr,
    /// When this version was written (seconds since the epoch): gc's retention clock.
    #[serde(rename = "w")]
    pub written_at: i64,
    #[serde(rename = "e")]
    pub entries: Vec<Entry>,
    /// How many messages (pages, indexes 0..n) this version is cut into; each holds some
    /// of the entries and the same header fields. Absent: 1.
    #[serde(rename = "n", default = "one", skip_serializing_if = "is_one")]
    pub pages: u32,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

/// A snapshot pins one version of every directory of the tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    #[serde(rename = "n")]
    pub name: String,
    #[serde(rename = "t")]
    pub created: i64,
    /// (directory id, version), sorted by id.
    #[serde(rename = "d")]
    pub dirs: Vec<(u64, u64)>,
}

/// The file system's description, one copy in every account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Superblock {
    #[serde(rename = "F")]
    pub format: u8,
    #[serde(rename = "z")]
    pub block_size: u32,
    /// RAID indexes of each replication group's members; block placement is over groups.
    #[serde(rename = "g")]
    pub groups: Vec<Vec<u8>>,
    #[serde(rename = "c")]
    pub cipher: String,
    /// The data key, sealed under the passphrase key: 24-byte nonce then ciphertext.
    #[serde(rename = "k", with = "serde_bytes")]
    pub wrapped_key: Vec<u8>,
    #[serde(rename = "t")]
    pub created: i64,
    #[serde(rename = "s", default)]
    pub snapshots: Vec<Snapshot>,
    /// The metadata log's checkpoint (docs/mailfs.md 12a): every directory change in log
    /// pages up to this sequence number is in a directory message. A mount replays the
    /// pages after it. 0: no page was ever checkpointed (or the file system has none).
    #[serde(rename = "l", default, skip_serializing_if = "is_zero")]
    pub log_from: u64,
    /// A checkpoint holds the inode directory (docs/mailfs.md 12b): from then on a mount
    /// that finds no version of it reports it unavailable instead of starting it empty.
    #[serde(rename = "hi", default, skip_serializing_if = "is_false")]
    pub inodes: bool,
}

/// One page of the metadata log (docs/mailfs.md 12a): the directory changes of one batch,
/// appended as one message, so a crash keeps all of them or none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogPage {
    #[serde(rename = "F")]
    pub format: u8,
    /// Its sequence number (also the message's index): pages replay in this order.
    #[serde(rename = "s")]
    pub seq: u64,
    /// Seconds since the epoch (gc's retention clock).
    #[serde(rename = "w")]
    pub written_at: i64,
    #[serde(rename = "d")]
    pub dirs: Vec<DirDelta>,
}

/// What one page changes in one directory: from version `base` to `version`, the entries
/// put (added or replaced whole) and the names removed. A directory created in the page has
/// base 0 and starts empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirDelta {
    #[serde(rename = "i")]
    pub id: u64,
    #[serde(rename = "b")]
    pub base: u64,
    #[serde(rename = "v")]
    pub version: u64,
    #[serde(rename = "p")]
    pub parent: u64,
    #[serde(rename = "a")]
    pub attr: Attr,
    #[serde(rename = "e", default)]
    pub put: Vec<Entry>,
    #[serde(rename = "x", default)]
    pub removed: Vec<serde_bytes::ByteBuf>,
}

pub fn decode_log_page(bytes: &[u8]) -> Result<LogPage, FsError> {
    let page: LogPage =
        ciborium::from_reader(bytes).map_err(|e| FsError::Corrupt(format!("log page: {e}")))?;
    if page.format != META_FORMAT {
        return Err(FsError::Corrupt(format!(
            "log page format {} is not {META_FORMAT}",
            page.format
        )));
    }
    Ok(page)
}

pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail, and every type here serializes.
    ciborium::into_writer(value, &mut out).expect("CBOR encoding into memory");
    out
}

pub fn decode_dir(bytes: &[u8]) -> Result<Dir, FsError> {
    let dir: Dir =
        ciborium::from_reader(bytes).map_err(|e| FsError::Corrupt(format!("directory: {e}")))?;
    if dir.format != META_FORMAT {
        return Err(FsError::Corrupt(format!(
            "directory format {} is not {META_FORMAT}",
            dir.format
        )));
    }
    if dir.entries.len() > DIR_ENTRIES_MAX {
        return Err(FsError::Corrupt("directory has too many entries".into()));
    }
    Ok(dir)
}

pub fn decode_superblock(bytes: &[u8]) -> Result<Superblock, FsError> {
    let sb: Superblock =
        ciborium::from_reader(bytes).map_err(|e| FsError::Corrupt(format!("superblock: {e}")))?;
    if sb.format != META_FORMAT {
        return Err(FsError::Corrupt(format!(
            "superblock format {} is not {META_FORMAT}",
            sb.format
        )));
    }
    Ok(sb)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> Dir {
        let attr = Attr::new(0o755, 1, 2, 3);
        Dir {
            format: META_FORMAT,
            id: 1,
            parent: 1,
            attr,
            written_at: 10,
            pages: 1,
            entries: vec![
                Entry {
                    name: b"a\xff file".to_vec(),
                    kind: Kind::File,
                    id: 77,
                    attr: Some(attr),
                    size: 5,
                    target: None,
                    file: Some(FileMeta {
                        version: 2,
                        block_size: 4096,
                        blocks: vec![BlockRef {
                            index: 0,
                            version: 2,
                            group: 1,
                            len: 5,
                            hash: [9; 32],
                        }],
                        dirty: Some(Previous {
                            version: 1,
                            size: 0,
                            blocks: vec![],
                            inline: Some(b"was small".to_vec()),
                        }),
                        inline: None,
                    }),
                    moving_from: None,
                    moving_to: None,
                    rdev: 0,
                    link: false,
                    links: 0,
                },
                Entry {
                    name: b"link".to_vec(),
                    kind: Kind::Symlink,
                    id: 78,
                    attr: Some(attr),
                    size: 3,
                    target: Some(b"a\xff file".to_vec()),
                    file: None,
                    moving_from: Some(5),
                    moving_to: None,
                    rdev: 0,
                    link: false,
                    links: 0,
                },
            ],
        }
    }

    #[test]
    fn directory_round_trip() {
        let d = dir();
        assert_eq!(decode_dir(&encode(&d)).unwrap(), d);
    }

    #[test]
    fn unknown_fields_are_skipped_and_unknown_formats_refused() {
        // A newer writer adds a field: an older reader still reads the directory.
        #[derive(Serialize)]
        struct Newer<'a> {
            #[serde(flatten)]
            dir: &'a Dir,
            #[serde(rename = "zz")]
            future: u32,
        }
        let d = dir();
        let bytes = encode(&Newer { dir: &d, future: 7 });
        assert_eq!(decode_dir(&bytes).unwrap(), d);
        let mut wrong = d.clone();
        wrong.format = 9;
        assert!(matches!(
            decode_dir(&encode(&wrong)),
            Err(FsError::Corrupt(_))
        ));
        assert!(decode_dir(b"\xff\x00garbage").is_err());
    }

    #[test]
    fn an_entry_costs_tens_of_bytes() {
        let d = dir();
        let one = encode(&d).len();
        assert!(one < 300, "{one}");
    }
}
