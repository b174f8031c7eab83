//! Asynchronous mode's write-back journal (docs/mailfs.md 6): every directory update and
//! block batch is fsynced here before the operation is acknowledged (M6), then sent in
//! order by the background writer. Order is kept across accounts, so a directory version
//! never reaches a server before the blocks it names were sent. A record is deleted only
//! once its messages are on the servers (or owed through a member's backlog).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use disk::Disk;
use mailfs_format::Kind as MsgKind;
use serde::{Deserialize, Serialize};

use crate::FsError;
use crate::durable;
use crate::locking::{CondvarExt, MutexExt};
use crate::message_name::MessageName;
use crate::meta::BlockRef;

#[derive(Serialize, Deserialize)]
pub(crate) enum Record {
    /// A directory (or superblock) message for every account.
    #[serde(rename = "d")]
    Dir {
        // "key" on disk: journals written before the rename still replay.
        #[serde(rename = "key")]
        name: String,
        #[serde(with = "serde_bytes")]
        payload: Vec<u8>,
    },
    #[serde(rename = "b")]
    Blocks {
        file: u64,
        blocks: Vec<(BlockRef, serde_bytes::ByteBuf)>,
    },
}

/// What one [`Journal::drain`] did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Drained {
    /// Records sent.
    pub(crate) sent: usize,
    /// Directory records skipped because a later version of the same directory follows.
    pub(crate) coalesced: usize,
}

pub(crate) struct Journal {
    disk: Arc<dyn Disk>,
    dir: PathBuf,
    state: Mutex<State>,
    drained: Condvar,
    bytes_max: u64,
}

#[derive(Default)]
struct State {
    next: u64,
    records: u64,
    bytes: u64,
    /// Blocks only the journal holds yet: (file, index, version) → record number.
    pending_blocks: HashMap<(u64, u64, u64), u64>,
    /// What each record is: the directory it updates (`Some`), or blocks (`None`).
    kinds: std::collections::BTreeMap<u64, Option<u64>>,
}

/// The directory a record updates (superblocks count as one more "directory").
fn dir_of(record: &Record) -> Option<u64> {
    match record {
        Record::Dir { name, .. } => Some(match MessageName::parse(name) {
            Some(k) if k.kind == MsgKind::Directory => k.object,
            _ => u64::MAX,
        }),
        Record::Blocks { .. } => None,
    }
}

impl Journal {
    pub(crate) fn open(
        disk: Arc<dyn Disk>,
        dir: &Path,
        bytes_max: u64,
    ) -> Result<Journal, FsError> {
        let io = |e: std::io::Error| FsError::Local(format!("journal {}: {e}", dir.display()));
        disk.create_dir_all(dir).map_err(io)?;
        let mut st = State::default();
        durable::remove_leftovers(&*disk, dir);
        for seq in durable::sequence(&*disk, dir, RECORD_SUFFIX) {
            let path = record_path(dir, seq);
            st.next = st.next.max(seq + 1);
            st.records += 1;
            st.bytes += durable::file_len(&*disk, &path);
            match read(&*disk, &path) {
                Ok(Record::Blocks { file, blocks }) => {
                    for (b, _) in blocks {
                        st.pending_blocks.insert((file, b.index, b.version), seq);
                    }
                    st.kinds.insert(seq, None);
                }
                Ok(record) => {
                    st.kinds.insert(seq, dir_of(&record));
                }
                Err(_) => {}
            }
        }
        Ok(Journal {
            disk,
            dir: dir.to_path_buf(),
            state: Mutex::new(st),
            drained: Condvar::new(),
            bytes_max,
        })
    }

    pub(crate) fn pending(&self) -> (u64, u64) {
        let st = self.state.lock_or_panic();
        (st.records, st.bytes)
    }

    /// Appends a record durably; waits while the journal is over its size limit (data is
    /// never dropped: writers slow down instead).
    pub(crate) fn append(&self, record: &Record) -> Result<(), FsError> {
        let bytes = crate::meta::encode(record);
        let mut st = self.state.lock_or_panic();
        while st.bytes > 0 && st.bytes + bytes.len() as u64 > self.bytes_max {
            st = self
                .drained
                .wait_timeout_or_panic(st, Duration::from_millis(200))
                .0;
        }
        let seq = st.next;
        durable::write_file(&*self.disk, &self.dir, &record_name(seq), &[&bytes])
            .map_err(|e| FsError::Local(format!("journal {}: {e}", self.dir.display())))?;
        st.next += 1;
        st.records += 1;
        st.bytes += bytes.len() as u64;
        st.kinds.insert(seq, dir_of(record));
        if let Record::Blocks { file, blocks } = record {
            for (b, _) in blocks {
                st.pending_blocks.insert((*file, b.index, b.version), seq);
            }
        }
        Ok(())
    }

    /// Whether the journal holds this block (not yet on the servers).
    pub(crate) fn has_block(&self, file: u64, b: &BlockRef) -> bool {
        self.state
            .lock_or_panic()
            .pending_blocks
            .contains_key(&(file, b.index, b.version))
    }

    pub(crate) fn block(&self, file: u64, b: &BlockRef) -> Option<Vec<u8>> {
        let seq = *self
            .state
            .lock_or_panic()
            .pending_blocks
            .get(&(file, b.index, b.version))?;
        match read(&*self.disk, &record_path(&self.dir, seq)).ok()? {
            Record::Blocks { blocks, .. } => blocks
                .into_iter()
                .find(|(r, _)| r.index == b.index && r.version == b.version)
                .map(|(_, d)| d.into_vec()),
            Record::Dir { .. } => None,
        }
    }

    /// Sends records in order through `send` until the journal is empty or a record fails
    /// (retried on the next call). The journal knows its order and its files, not where a
    /// record goes: the caller's `send` puts it on the servers.
    pub(crate) fn drain(
        &self,
        mut send: impl FnMut(&Record) -> Result<(), FsError>,
    ) -> Result<Drained, FsError> {
        let mut drained = Drained::default();
        for seq in durable::sequence(&*self.disk, &self.dir, RECORD_SUFFIX) {
            let path = record_path(&self.dir, seq);
            let len = durable::file_len(&*self.disk, &path);
            if self.superseded(seq) {
                // Batched metadata: a later version of the same directory follows, with no
                // other directory's update in between, so this one need never be sent
                // ("latest wins"; its blocks still go first, in order).
                let _ = self.disk.remove(&path);
                let mut st = self.state.lock_or_panic();
                st.kinds.remove(&seq);
                st.records = st.records.saturating_sub(1);
                st.bytes = st.bytes.saturating_sub(len);
                self.drained.notify_all();
                drained.coalesced += 1;
                continue;
            }
            let record = read(&*self.disk, &path)?;
            send(&record)?;
            let _ = self.disk.remove(&path);
            let mut st = self.state.lock_or_panic();
            if let Record::Blocks { file, blocks } = &record {
                for (b, _) in blocks {
                    if st.pending_blocks.get(&(*file, b.index, b.version)) == Some(&seq) {
                        st.pending_blocks.remove(&(*file, b.index, b.version));
                    }
                }
            }
            st.kinds.remove(&seq);
            st.records = st.records.saturating_sub(1);
            st.bytes = st.bytes.saturating_sub(len);
            self.drained.notify_all();
            drained.sent += 1;
        }
        Ok(drained)
    }
}

impl Journal {
    /// Is directory record `seq` followed by a newer version of the same directory before
    /// any other directory's record? Skipping it then keeps every cross-directory order
    /// (renames) and every "blocks before the directory that names them" order.
    fn superseded(&self, seq: u64) -> bool {
        let st = self.state.lock_or_panic();
        let Some(Some(dir)) = st.kinds.get(&seq).copied() else {
            return false;
        };
        for (_, kind) in st.kinds.range(seq + 1..) {
            match kind {
                None => continue,
                Some(d) => return *d == dir && dir != u64::MAX,
            }
        }
        false
    }
}

const RECORD_SUFFIX: &str = ".rec";

fn record_name(seq: u64) -> String {
    format!("{seq:016}{RECORD_SUFFIX}")
}

fn record_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(record_name(seq))
}

fn read(disk: &dyn Disk, path: &Path) -> Result<Record, FsError> {
    let bytes = durable::read_file(disk, path)
        .map_err(|e| FsError::Local(format!("journal {}: {e}", path.display())))?;
    ciborium::from_reader(bytes.as_slice())
        .map_err(|e| FsError::Corrupt(format!("journal {}: {e}", path.display())))
}
