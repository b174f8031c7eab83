//! The in-memory index: users → folders → messages, and how a journaled [`Op`] changes it.
//!
//! The same [`apply`] runs at replay and after a live commit, so a reopened store is exactly
//! the store that acknowledged the operations. Each message costs one `BTreeMap` slot of a
//! 4-byte key and a 56-byte [`Entry`]: no summary, no keyword strings (those live in the
//! volume and in the folder's keyword table).
//!
//! Locking: the catalog (names) is one `RwLock`; each folder has its own `RwLock`. Readers
//! take a lock only to copy entries out, never across I/O; the writer takes a write lock only
//! to apply a committed change (docs/storage.md, "Readers and the writer").

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::flags::{self, KeywordSet};
use crate::format::units_for;
use crate::journal::{AppendOp, Op};

/// One message in the index (56 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    /// First unit of the message's extent in the volume.
    pub(crate) start: u64,
    pub(crate) modseq: u64,
    pub(crate) internal_date: i64,
    pub(crate) keywords: KeywordSet,
    pub(crate) content_len: u32,
    pub(crate) summary_len: u32,
    /// CRC-32C of summary + content, as in the message header.
    pub(crate) data_crc: u32,
    pub(crate) flags: u8,
}

/// No extent reaches past this unit: far beyond any volume (2^50 units of 512 bytes), and
/// low enough that every unit number times the unit size, and every `start + units`, stays
/// inside u64.
pub(crate) const UNITS_MAX: u64 = 1 << 50;

/// Folder ids count up from 1 and MODSEQs by one per change; a value read from disk above
/// these is damage. The headroom keeps the store's own `+ 1` on them inside the type
/// (found by fuzzing, docs/fuzzing.md).
pub(crate) const FOLDER_ID_MAX: u32 = 1 << 31;
pub(crate) const MODSEQ_MAX: u64 = 1 << 62;

/// Whether an extent read from a journal or snapshot lies where data may: past the volume
/// header and below [`UNITS_MAX`]. A damaged record that names one elsewhere would otherwise
/// overflow the arithmetic on it, or have the volume grown to its end (found by fuzzing,
/// docs/fuzzing.md).
pub(crate) fn extent_fits(start: u64, units: u64) -> bool {
    start >= crate::format::DATA_START_UNIT
        && start.checked_add(units).is_some_and(|end| end <= UNITS_MAX)
}

impl Entry {
    /// The message has `\Seen`.
    pub(crate) fn seen(&self) -> bool {
        self.flags & crate::Flags::SEEN.bits() != 0
    }

    pub(crate) fn units(&self) -> u64 {
        units_for(self.summary_len, self.content_len)
    }
    pub(crate) fn end(&self) -> u64 {
        self.start + self.units()
    }
}

/// One folder's state.
#[derive(Debug, Clone)]
pub(crate) struct Folder {
    pub(crate) id: u32,
    pub(crate) user: String,
    pub(crate) name: String,
    pub(crate) uidvalidity: u32,
    pub(crate) uidnext: u32,
    pub(crate) highest_modseq: u64,
    /// Sum of content lengths.
    pub(crate) bytes: u64,
    /// Messages without `\Seen`, kept as entries come, go and change (derived, never
    /// journaled or snapshotted: replay and snapshot loading count as they go).
    pub(crate) unseen: u64,
    pub(crate) keywords: Vec<String>,
    pub(crate) messages: BTreeMap<u32, Entry>,
    /// Set when the folder is deleted, so a reader holding the cell sees it gone.
    pub(crate) deleted: bool,
}

impl Folder {
    pub(crate) fn new(id: u32, user: &str, name: &str, uidvalidity: u32) -> Folder {
        Folder {
            id,
            user: user.to_string(),
            name: name.to_string(),
            uidvalidity,
            uidnext: 1,
            highest_modseq: 1,
            bytes: 0,
            unseen: 0,
            keywords: Vec::new(),
            messages: BTreeMap::new(),
            deleted: false,
        }
    }

    /// Where the folder's last message (highest UID) ends: appends go right after it.
    pub(crate) fn tail_end(&self) -> Option<u64> {
        self.messages.last_key_value().map(|(_, e)| e.end())
    }

    pub(crate) fn keyword_names(&self, set: KeywordSet) -> Vec<String> {
        set.iter()
            .filter_map(|i| self.keywords.get(i).cloned())
            .collect()
    }

    /// Inserts an entry, counting it.
    pub(crate) fn insert(&mut self, uid: u32, e: Entry) {
        self.bytes += e.content_len as u64;
        self.unseen += u64::from(!e.seen());
        if let Some(old) = self.messages.insert(uid, e) {
            self.bytes -= old.content_len as u64;
            self.unseen -= u64::from(!old.seen());
        }
    }

    pub(crate) fn remove(&mut self, uid: u32, freed: &mut Vec<Freed>) {
        if let Some(e) = self.messages.remove(&uid) {
            self.bytes -= e.content_len as u64;
            self.unseen -= u64::from(!e.seen());
            freed.push(Freed {
                uid,
                start: e.start,
                units: e.units(),
            });
        }
    }
}

/// A folder and its lock. Shared by the catalog and by readers that looked it up.
#[derive(Debug)]
pub(crate) struct FolderCell {
    pub(crate) id: u32,
    state: RwLock<Folder>,
}

impl FolderCell {
    pub(crate) fn new(folder: Folder) -> FolderCell {
        FolderCell {
            id: folder.id,
            state: RwLock::new(folder),
        }
    }
    /// A poisoned lock only means another thread panicked while holding it; every change
    /// under the lock is applied whole before it could panic, so the state is still usable.
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Folder> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, Folder> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }
}

/// Names and ids of every folder.
#[derive(Debug, Default)]
pub(crate) struct Catalog {
    /// user → canonical folder name → folder id.
    pub(crate) users: BTreeMap<String, BTreeMap<String, u32>>,
    pub(crate) folders: HashMap<u32, Arc<FolderCell>>,
    /// Folder ids are never reused (readers detect reuse of an extent by folder id + UID).
    pub(crate) next_folder_id: u32,
    /// UIDVALIDITY values ascend store-wide, so a re-created folder never repeats one.
    pub(crate) last_uidvalidity: u32,
    /// Keys of handed-over copies kept (docs/storage.md, "Delivered keys").
    pub(crate) delivered: crate::delivered::DeliveredKeys,
}

impl Catalog {
    pub(crate) fn new() -> Catalog {
        Catalog {
            next_folder_id: 1,
            ..Catalog::default()
        }
    }

    pub(crate) fn lookup(&self, user: &str, folder: &str) -> Option<Arc<FolderCell>> {
        let id = self.users.get(user)?.get(folder)?;
        self.folders.get(id).cloned()
    }

    pub(crate) fn insert_folder(&mut self, folder: Folder) {
        self.users
            .entry(folder.user.clone())
            .or_default()
            .insert(folder.name.clone(), folder.id);
        self.next_folder_id = self.next_folder_id.max(folder.id.saturating_add(1));
        self.last_uidvalidity = self.last_uidvalidity.max(folder.uidvalidity);
        self.folders
            .insert(folder.id, Arc::new(FolderCell::new(folder)));
    }
}

/// An extent a change stopped naming.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Freed {
    pub(crate) uid: u32,
    pub(crate) start: u64,
    pub(crate) units: u64,
}

/// Applies one journaled operation. `Err` means the operation does not fit the index (a
/// damaged or foreign journal at replay; a bug live): the index is unchanged by that op.
/// Extents the op stops naming are pushed to `freed` for the allocator (S6: the caller frees
/// them only because the record is already durable).
///
/// One phase per kind of operation: each checks the operation whole against the index
/// (errors, since at replay the operation comes from disk), then changes the index, then
/// asserts what the change established (docs/storage.md, "Phases of index apply").
pub(crate) fn apply(
    catalog: &RwLock<Catalog>,
    op: &Op,
    freed: &mut Vec<Freed>,
) -> Result<(), String> {
    match op {
        Op::CreateFolder {
            folder,
            uidvalidity,
            user,
            name,
        } => create_folder(catalog, *folder, *uidvalidity, user, name),
        Op::RenameFolder { folder, name } => rename_folder(catalog, *folder, name),
        Op::DeleteFolder { folder } => delete_folder(catalog, *folder, freed),
        Op::ChangeUser { folder, user } => change_user(catalog, *folder, user),
        Op::DefineKeyword {
            folder,
            index,
            name,
        } => in_folder(catalog, *folder, |f| define_keyword(f, *index, name)),
        Op::Append(a) => in_folder(catalog, a.folder, |f| append(f, a)),
        Op::SetFlags {
            folder,
            modseq,
            op,
            flags,
            keywords,
            uids,
        } => in_folder(catalog, *folder, |f| {
            set_flags(f, *modseq, *op, *flags, *keywords, uids)
        }),
        Op::Expunge {
            folder,
            modseq,
            uids,
        } => in_folder(catalog, *folder, |f| expunge(f, *modseq, uids, freed)),
        Op::ExpungeBelow {
            folder,
            modseq,
            uid,
        } => in_folder(catalog, *folder, |f| expunge_below(f, *modseq, *uid, freed)),
        Op::SetUidNext {
            folder,
            modseq,
            uidnext,
        } => in_folder(catalog, *folder, |f| set_uidnext(f, *modseq, *uidnext)),
        Op::RestoreModseqs {
            folder,
            highest,
            entries,
        } => in_folder(catalog, *folder, |f| restore_modseqs(f, *highest, entries)),
        Op::Move { folder, uid, start } => {
            in_folder(catalog, *folder, |f| move_message(f, *uid, *start, freed))
        }
        Op::Delivered { at, keys } => {
            delivered(&mut write_catalog(catalog).delivered, *at, keys);
            Ok(())
        }
    }
}

/// Phase `delivered`: the keys kept (no folder changes); `DeliveredKeys::insert` asserts
/// its post: the op's last key known unless recorded past `retain`, at most `max` kept,
/// each once.
fn delivered(keys: &mut crate::delivered::DeliveredKeys, at: u64, new: &[[u8; 16]]) {
    keys.insert(at, new);
}

fn write_catalog(catalog: &RwLock<Catalog>) -> RwLockWriteGuard<'_, Catalog> {
    catalog.write().unwrap_or_else(|p| p.into_inner())
}

/// Runs `change` on folder `id` under the folder's write lock (the catalog's only to find it).
fn in_folder(
    catalog: &RwLock<Catalog>,
    id: u32,
    change: impl FnOnce(&mut Folder) -> Result<(), String>,
) -> Result<(), String> {
    let cell = {
        let cat = catalog.read().unwrap_or_else(|p| p.into_inner());
        cat.folders
            .get(&id)
            .cloned()
            .ok_or_else(|| format!("folder id {id} does not exist"))?
    };
    let mut f = cell.write();
    change(&mut f)
}

/// CREATE: a folder under an id never used and a name the user does not have.
fn create_folder(
    catalog: &RwLock<Catalog>,
    folder: u32,
    uidvalidity: u32,
    user: &str,
    name: &str,
) -> Result<(), String> {
    if folder > FOLDER_ID_MAX {
        return Err(format!("folder id {folder} is out of range"));
    }
    let mut cat = write_catalog(catalog);
    if cat.folders.contains_key(&folder) {
        return Err(format!("folder id {folder} created twice"));
    }
    if cat.users.get(user).is_some_and(|f| f.contains_key(name)) {
        return Err(format!("folder {user}/{name} created twice"));
    }
    cat.insert_folder(Folder::new(folder, user, name, uidvalidity));
    // Folder ids are never reused; UIDVALIDITY never goes down store-wide.
    assert!(cat.next_folder_id > folder);
    assert!(cat.last_uidvalidity >= uidvalidity);
    assert_eq!(cat.users.get(user).and_then(|f| f.get(name)), Some(&folder));
    Ok(())
}

/// RENAME of one folder (a rename of a hierarchy is one op per folder, in one record).
fn rename_folder(catalog: &RwLock<Catalog>, folder: u32, name: &str) -> Result<(), String> {
    let mut cat = write_catalog(catalog);
    let cell = cat
        .folders
        .get(&folder)
        .cloned()
        .ok_or("rename of a missing folder")?;
    let mut f = cell.write();
    let names = cat.users.entry(f.user.clone()).or_default();
    if names.contains_key(name) {
        return Err(format!("rename onto existing folder {name}"));
    }
    names.remove(&f.name);
    names.insert(name.to_string(), folder);
    let old = std::mem::replace(&mut f.name, name.to_string());
    // The folder answers to its new name, and to its old one no more.
    assert_eq!(names.get(name), Some(&folder));
    assert!(!names.contains_key(&old));
    Ok(())
}

/// DELETE of a folder: it leaves the catalog and every extent it names is freed.
fn delete_folder(
    catalog: &RwLock<Catalog>,
    folder: u32,
    freed: &mut Vec<Freed>,
) -> Result<(), String> {
    let mut cat = write_catalog(catalog);
    let cell = cat
        .folders
        .remove(&folder)
        .ok_or("delete of a missing folder")?;
    let mut f = cell.write();
    if let Some(names) = cat.users.get_mut(&f.user) {
        names.remove(&f.name);
        if names.is_empty() {
            cat.users.remove(&f.user);
        }
    }
    let (freed_before, messages) = (freed.len(), f.messages.len());
    let uids: Vec<u32> = f.messages.keys().copied().collect();
    for uid in uids {
        f.remove(uid, freed);
    }
    f.deleted = true;
    assert_eq!(
        freed.len() - freed_before,
        messages,
        "every extent is freed"
    );
    assert!(f.messages.is_empty() && f.bytes == 0 && f.unseen == 0);
    assert!(
        cat.users
            .get(&f.user)
            .is_none_or(|names| !names.contains_key(&f.name))
    );
    Ok(())
}

/// A user rename, one op per folder: the folder keeps its id, name and messages.
fn change_user(catalog: &RwLock<Catalog>, folder: u32, user: &str) -> Result<(), String> {
    let mut cat = write_catalog(catalog);
    let cell = cat
        .folders
        .get(&folder)
        .cloned()
        .ok_or("user change of a missing folder")?;
    let mut f = cell.write();
    let taken = cat.users.get(user);
    if taken.is_some_and(|names| names.contains_key(&f.name)) {
        return Err(format!("folder {user}/{} exists already", f.name));
    }
    if let Some(names) = cat.users.get_mut(&f.user) {
        names.remove(&f.name);
        if names.is_empty() {
            cat.users.remove(&f.user);
        }
    }
    cat.users
        .entry(user.to_string())
        .or_default()
        .insert(f.name.clone(), folder);
    let old = std::mem::replace(&mut f.user, user.to_string());
    assert_eq!(
        cat.users.get(user).and_then(|n| n.get(&f.name)),
        Some(&folder)
    );
    assert!(
        cat.users
            .get(&old)
            .is_none_or(|names| !names.contains_key(&f.name))
    );
    Ok(())
}

/// Keyword tables are append-only: the op names the table's next index.
fn define_keyword(f: &mut Folder, index: u8, name: &str) -> Result<(), String> {
    if index as usize != f.keywords.len() || f.keywords.len() >= 128 {
        return Err(format!("keyword index {index} out of order"));
    }
    f.keywords.push(name.to_string());
    assert!(f.keywords.len() == usize::from(index) + 1 && f.keywords.len() <= 128);
    Ok(())
}

/// A flag change of the named messages (missing ones are skipped): one MODSEQ for all.
fn set_flags(
    f: &mut Folder,
    modseq: u64,
    op: u8,
    flags: u8,
    keywords: KeywordSet,
    uids: &[u32],
) -> Result<(), String> {
    let op = flags::op_from_code(op).ok_or("unknown flag operation")?;
    let given = crate::Flags::from_bits(flags).ok_or("undefined flag bits")?;
    if !keywords.fits(f.keywords.len()) {
        return Err("keyword bit beyond the keyword table".into());
    }
    bump_modseq(f, modseq)?;
    let mut unseen = f.unseen;
    for uid in uids {
        if let Some(e) = f.messages.get_mut(uid) {
            let cur = crate::Flags::from_bits_truncate(e.flags);
            let was_seen = e.seen();
            e.flags = op.apply_flags(cur, given).bits();
            e.keywords = flags::apply_keywords(op, e.keywords, keywords);
            e.modseq = modseq;
            unseen = unseen + u64::from(was_seen && !e.seen()) - u64::from(!was_seen && e.seen());
        }
    }
    f.unseen = unseen;
    assert_eq!(f.highest_modseq, modseq, "S4");
    assert!(f.unseen <= f.messages.len() as u64);
    Ok(())
}

/// EXPUNGE of the named messages (missing ones are skipped).
fn expunge(
    f: &mut Folder,
    modseq: u64,
    uids: &[u32],
    freed: &mut Vec<Freed>,
) -> Result<(), String> {
    bump_modseq(f, modseq)?;
    let freed_before = freed.len();
    for &uid in uids {
        f.remove(uid, freed);
    }
    assert_eq!(f.highest_modseq, modseq, "S4");
    assert!(freed.len() - freed_before <= uids.len());
    assert!(uids.iter().all(|uid| !f.messages.contains_key(uid)));
    Ok(())
}

/// Every message below `uid`, with one split of the tree however many go.
fn expunge_below(
    f: &mut Folder,
    modseq: u64,
    uid: u32,
    freed: &mut Vec<Freed>,
) -> Result<(), String> {
    bump_modseq(f, modseq)?;
    let keep = f.messages.split_off(&uid);
    let gone = std::mem::replace(&mut f.messages, keep);
    for (uid, e) in gone {
        f.bytes -= e.content_len as u64;
        f.unseen -= u64::from(!e.seen());
        freed.push(Freed {
            uid,
            start: e.start,
            units: e.units(),
        });
    }
    assert_eq!(f.highest_modseq, modseq, "S4");
    assert!(
        f.messages
            .first_key_value()
            .is_none_or(|(&first, _)| first >= uid)
    );
    assert!(f.unseen <= f.messages.len() as u64);
    Ok(())
}

/// An import raising UIDNEXT to its source's (S3: it only goes up).
fn set_uidnext(f: &mut Folder, modseq: u64, uidnext: u32) -> Result<(), String> {
    // S3 holds: UIDNEXT only goes up, and stays below u32::MAX like an append's.
    if uidnext <= f.uidnext || uidnext == u32::MAX {
        return Err(format!(
            "UIDNEXT {uidnext} does not ascend past {}",
            f.uidnext
        ));
    }
    bump_modseq(f, modseq)?;
    f.uidnext = uidnext;
    assert_eq!((f.uidnext, f.highest_modseq), (uidnext, modseq), "S3, S4");
    Ok(())
}

/// S4's one exception (docs/storage.md): MODSEQs as another store gave them, the folder's
/// HIGHESTMODSEQ set to `highest`, never below any message's MODSEQ. Everything is checked
/// before anything changes, so a refused record (a damaged journal opened with salvage) leaves
/// no message above the folder's HIGHESTMODSEQ.
fn restore_modseqs(f: &mut Folder, highest: u64, entries: &[(u32, u64)]) -> Result<(), String> {
    if highest > MODSEQ_MAX {
        return Err(format!("MODSEQ {highest} is out of range"));
    }
    let mut restored: HashMap<u32, u64> = HashMap::with_capacity(entries.len());
    for &(uid, modseq) in entries {
        if modseq == 0 || modseq > highest {
            return Err(format!(
                "restored MODSEQ {modseq} of UID {uid} is not in 1..={highest}"
            ));
        }
        if !f.messages.contains_key(&uid) {
            return Err(format!("restored MODSEQ of missing UID {uid}"));
        }
        restored.insert(uid, modseq);
    }
    if let Some(above) = f
        .messages
        .iter()
        .map(|(uid, e)| restored.get(uid).copied().unwrap_or(e.modseq))
        .max()
        && above > highest
    {
        return Err(format!(
            "restored HIGHESTMODSEQ {highest} is below a message's MODSEQ {above}"
        ));
    }
    for (uid, modseq) in restored {
        if let Some(e) = f.messages.get_mut(&uid) {
            e.modseq = modseq;
        }
    }
    f.highest_modseq = highest;
    debug_assert!(f.messages.values().all(|e| e.modseq <= highest), "S4");
    Ok(())
}

/// The defrag switch: the message lives at `start` now; its old extent is freed.
fn move_message(
    f: &mut Folder,
    uid: u32,
    start: u64,
    freed: &mut Vec<Freed>,
) -> Result<(), String> {
    let e = f
        .messages
        .get_mut(&uid)
        .ok_or_else(|| format!("move of missing UID {uid}"))?;
    if !extent_fits(start, e.units()) {
        return Err(format!("move of UID {uid} to unit {start} is out of range"));
    }
    freed.push(Freed {
        uid,
        start: e.start,
        units: e.units(),
    });
    e.start = start;
    // The old extent and the new one are the same size: a move neither grows nor shrinks.
    assert_eq!(freed.last().map(|old| old.units), Some(e.units()));
    assert_eq!(e.start, start);
    Ok(())
}

/// S4: a folder's MODSEQ strictly ascends with every committed change.
fn bump_modseq(f: &mut Folder, modseq: u64) -> Result<(), String> {
    if modseq > MODSEQ_MAX {
        return Err(format!("MODSEQ {modseq} is out of range"));
    }
    if modseq <= f.highest_modseq {
        return Err(format!(
            "MODSEQ {modseq} does not ascend past {}",
            f.highest_modseq
        ));
    }
    f.highest_modseq = modseq;
    Ok(())
}

/// APPEND (S3: the UID ascends past UIDNEXT; S4: the MODSEQ past HIGHESTMODSEQ).
fn append(f: &mut Folder, a: &AppendOp) -> Result<(), String> {
    // S3: UIDs strictly ascend and are never reused.
    if a.uid < f.uidnext || a.uid == u32::MAX {
        return Err(format!(
            "UID {} does not ascend past UIDNEXT {}",
            a.uid, f.uidnext
        ));
    }
    if !a.keywords.fits(f.keywords.len()) {
        return Err("keyword bit beyond the keyword table".into());
    }
    if crate::Flags::from_bits(a.flags).is_none() {
        return Err("undefined flag bits".into());
    }
    if !extent_fits(a.start, units_for(a.summary_len, a.content_len)) {
        return Err(format!(
            "UID {} extent at unit {} is out of range",
            a.uid, a.start
        ));
    }
    bump_modseq(f, a.modseq)?;
    f.uidnext = a.uid + 1;
    f.insert(
        a.uid,
        Entry {
            start: a.start,
            modseq: a.modseq,
            internal_date: a.internal_date,
            keywords: a.keywords,
            content_len: a.content_len,
            summary_len: a.summary_len,
            data_crc: a.data_crc,
            flags: a.flags,
        },
    );
    // Every UID is below UIDNEXT (S3; the snapshot loader and this check keep it so): the
    // message is the folder's last, and the folder's tail is where it ends.
    assert_eq!(
        (f.uidnext, f.highest_modseq),
        (a.uid + 1, a.modseq),
        "S3, S4"
    );
    assert_eq!(
        f.messages.last_key_value().map(|(&uid, _)| uid),
        Some(a.uid)
    );
    Ok(())
}

/// A maximal run of messages, in UID order, each starting where the previous one ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fragment {
    pub(crate) start: u64,
    pub(crate) units: u64,
    /// (UID, entry) of each message, in UID order.
    pub(crate) messages: Vec<(u32, Entry)>,
}

impl Fragment {
    pub(crate) fn end(&self) -> u64 {
        self.start + self.units
    }
}

/// Counts a folder's fragments (docs/storage.md, "Allocation and contiguity").
pub(crate) fn count_fragments(messages: &BTreeMap<u32, Entry>) -> u64 {
    let mut count = 0;
    let mut prev_end = None;
    for e in messages.values() {
        if prev_end != Some(e.start) {
            count += 1;
        }
        prev_end = Some(e.end());
    }
    count
}

/// The fragments made of messages with UID in `range`, stopping once more than `units_max`
/// units have been collected (the caller cannot use more), so the cost is bounded by what
/// could be moved, not by the folder's size.
pub(crate) fn fragments_from(
    messages: &BTreeMap<u32, Entry>,
    after_uid: u32,
    units_max: u64,
) -> Vec<Fragment> {
    let mut out: Vec<Fragment> = Vec::new();
    let mut total = 0u64;
    for (&uid, e) in messages.range(after_uid.saturating_add(1)..) {
        if after_uid == u32::MAX {
            break;
        }
        match out.last_mut() {
            Some(f) if f.end() == e.start => {
                f.units += e.units();
                f.messages.push((uid, *e));
            }
            _ => {
                if total > units_max {
                    break;
                }
                out.push(Fragment {
                    start: e.start,
                    units: e.units(),
                    messages: vec![(uid, *e)],
                });
            }
        }
        total += e.units();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(start: u64, units: u64) -> Entry {
        Entry {
            start,
            modseq: 1,
            internal_date: 0,
            keywords: KeywordSet::default(),
            content_len: (units * 512 - 32) as u32,
            summary_len: 0,
            data_crc: 0,
            flags: 0,
        }
    }

    #[test]
    fn entry_is_small() {
        assert_eq!(std::mem::size_of::<Entry>(), 56);
    }

    #[test]
    fn fragment_counting() {
        let mut m = BTreeMap::new();
        assert_eq!(count_fragments(&m), 0);
        m.insert(1, entry(10, 2));
        m.insert(2, entry(12, 3));
        m.insert(3, entry(15, 1));
        assert_eq!(count_fragments(&m), 1);
        m.insert(4, entry(40, 1));
        assert_eq!(count_fragments(&m), 2);
        // Physically adjacent but out of UID order is a new fragment.
        m.insert(5, entry(5, 5));
        assert_eq!(count_fragments(&m), 3);
        m.remove(&2);
        assert_eq!(count_fragments(&m), 4);
    }

    #[test]
    fn fragments_after_a_uid_are_bounded() {
        let mut m = BTreeMap::new();
        m.insert(1, entry(0, 1));
        m.insert(2, entry(10, 2));
        m.insert(3, entry(12, 2));
        m.insert(4, entry(20, 3));
        m.insert(5, entry(30, 1));
        let f = fragments_from(&m, 1, u64::MAX);
        assert_eq!(f.len(), 3);
        assert_eq!((f[0].start, f[0].units, f[0].messages.len()), (10, 4, 2));
        assert_eq!((f[1].start, f[1].units), (20, 3));
        let f = fragments_from(&m, 1, 5);
        assert_eq!(f.len(), 2);
        assert!(fragments_from(&m, u32::MAX, 100).is_empty());
    }

    #[test]
    fn apply_checks_uid_and_modseq_order() {
        let cat = RwLock::new(Catalog::new());
        let mut freed = Vec::new();
        let create = Op::CreateFolder {
            folder: 1,
            uidvalidity: 5,
            user: "u".into(),
            name: "INBOX".into(),
        };
        apply(&cat, &create, &mut freed).unwrap();
        assert!(apply(&cat, &create, &mut freed).is_err());
        let a = AppendOp {
            folder: 1,
            uid: 3,
            start: 8,
            summary_len: 0,
            content_len: 100,
            data_crc: 0,
            internal_date: 0,
            flags: 0,
            keywords: KeywordSet::default(),
            modseq: 2,
        };
        apply(&cat, &Op::Append(a), &mut freed).unwrap();
        assert!(
            apply(
                &cat,
                &Op::Append(AppendOp {
                    uid: 3,
                    modseq: 3,
                    ..a
                }),
                &mut freed
            )
            .is_err()
        );
        assert!(
            apply(
                &cat,
                &Op::Append(AppendOp {
                    uid: 4,
                    modseq: 2,
                    ..a
                }),
                &mut freed
            )
            .is_err()
        );
        apply(
            &cat,
            &Op::Append(AppendOp {
                uid: 4,
                modseq: 3,
                start: 9,
                ..a
            }),
            &mut freed,
        )
        .unwrap();
        apply(
            &cat,
            &Op::ExpungeBelow {
                folder: 1,
                modseq: 4,
                uid: 4,
            },
            &mut freed,
        )
        .unwrap();
        assert_eq!(
            freed,
            vec![Freed {
                uid: 3,
                start: 8,
                units: 1
            }]
        );
        let c = cat.read().unwrap();
        let f = c.folders[&1].read();
        assert_eq!(f.messages.len(), 1);
        assert_eq!(f.uidnext, 5);
        assert_eq!(f.highest_modseq, 4);
        assert_eq!(f.bytes, 100);
    }

    /// A record `apply` refuses changes nothing, as its contract says: replay with salvage
    /// skips such a record and checkpoints what is left, so a half-applied one would be
    /// written into the snapshot (a message above HIGHESTMODSEQ makes the next open refuse).
    #[test]
    fn a_refused_record_leaves_the_folder_unchanged() {
        let cat = RwLock::new(Catalog::new());
        let mut freed = Vec::new();
        let create = Op::CreateFolder {
            folder: 1,
            uidvalidity: 5,
            user: "u".into(),
            name: "INBOX".into(),
        };
        apply(&cat, &create, &mut freed).unwrap();
        for (uid, start) in [(1, 8), (2, 9)] {
            let append = AppendOp {
                folder: 1,
                uid,
                start,
                summary_len: 0,
                content_len: 100,
                data_crc: 0,
                internal_date: 0,
                flags: 0,
                keywords: KeywordSet::default(),
                modseq: u64::from(uid) + 1,
            };
            apply(&cat, &Op::Append(append), &mut freed).unwrap();
        }
        let before = {
            let c = cat.read().unwrap();
            let f = c.folders[&1].read();
            (f.highest_modseq, f.messages.clone())
        };
        let refused = [
            // The first entry is fine, the second names a missing UID.
            Op::RestoreModseqs {
                folder: 1,
                highest: 50,
                entries: vec![(1, 40), (7, 41)],
            },
            // Every entry fine, but HIGHESTMODSEQ below UID 2's MODSEQ, which stays.
            Op::RestoreModseqs {
                folder: 1,
                highest: 2,
                entries: vec![(1, 1)],
            },
            // A flag bit that does not exist.
            Op::SetFlags {
                folder: 1,
                modseq: 9,
                op: 0,
                flags: 0xff,
                keywords: KeywordSet::default(),
                uids: vec![1],
            },
        ];
        for op in &refused {
            assert!(apply(&cat, op, &mut freed).is_err(), "{op:?}");
            let c = cat.read().unwrap();
            let f = c.folders[&1].read();
            assert_eq!(
                (f.highest_modseq, &f.messages),
                (before.0, &before.1),
                "{op:?}"
            );
        }
        let restore = Op::RestoreModseqs {
            folder: 1,
            highest: 2,
            entries: vec![(2, 2), (1, 1)],
        };
        apply(&cat, &restore, &mut freed).unwrap();
        let c = cat.read().unwrap();
        let f = c.folders[&1].read();
        assert_eq!(f.highest_modseq, 2);
        assert_eq!((f.messages[&1].modseq, f.messages[&2].modseq), (1, 2));
    }
}
