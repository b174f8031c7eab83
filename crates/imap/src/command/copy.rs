//! RFC 9051 6.4.7 COPY and 6.4.8 MOVE (RFC 6851), with COPYUID (RFC 4315 3) and the quota
//! check (RFC 9208 4.3.1).
//!
//! The store has no copy primitive: each message is read and appended to the destination,
//! in batches that share one group commit. MOVE then expunges the originals with one
//! record.

use imap_codec::imap_types::sequence::SequenceSet;
use mail_model::{AppendRequest, NewMessage};

use crate::backend::Backend;
use crate::response::uid_set;
use crate::session::Session;

/// Bytes read into memory before a batch is appended.
const BATCH_BYTES_MAX: u64 = 16 << 20;

pub(crate) fn run(
    s: &mut Session,
    tag: &str,
    set: SequenceSet,
    dest: &str,
    uid: bool,
    moving: bool,
    b: &Backend<'_>,
) {
    let (Some(user), Some(sel)) = (s.user.clone(), s.selected.as_ref()) else {
        return;
    };
    if moving && sel.read_only {
        s.tagged(tag, "NO [READ-ONLY] Mailbox is read-only");
        return;
    }
    let indexes = match super::sequence::resolve(&set, &sel.messages, uid) {
        Ok(i) => i,
        Err(text) => {
            s.tagged(tag, &format!("BAD {text}"));
            return;
        }
    };
    let dest_status = match b.store.status(&user, dest) {
        Ok(st) => st,
        Err(e) if e.is_not_found() => {
            s.tagged(tag, "NO [TRYCREATE] No such mailbox");
            return;
        }
        Err(e) => {
            super::no(s, tag, &e);
            return;
        }
    };
    let folder = sel.name.clone();
    let messages: Vec<mail_model::MessageInfo> =
        indexes.iter().map(|&i| sel.messages[i].clone()).collect();
    // RFC 9208 4.3.1: checked before the first copy is written. MOVE is checked as the
    // copy it starts with: the copies exist beside the originals until the expunge, and a
    // MOVE that went through past the quota would let a user already over it (its limit
    // was lowered) keep shuffling mail around instead of deleting some. Dovecot lets MOVE
    // through since usage does not grow in the end; we refuse it like COPY, which a client
    // that is told OVERQUOTA handles the same way.
    let added = mail_model::Usage {
        folders: 0,
        messages: messages.len() as u64,
        bytes: messages.iter().map(|m| m.size).sum(),
    };
    if !super::quota::admits(s, tag, &user, added, b) {
        return;
    }
    let mut source_uids = Vec::new();
    let mut dest_uids = Vec::new();
    let mut batch: Vec<AppendRequest> = Vec::new();
    let mut batch_sources = Vec::new();
    let mut batch_bytes = 0u64;
    let mut uidvalidity = dest_status.uidvalidity;
    let mut flush = |batch: &mut Vec<AppendRequest>,
                     sources: &mut Vec<u32>|
     -> Result<(), mail_model::StoreError> {
        let results = b.store.append_batch(std::mem::take(batch));
        for (r, src) in results.into_iter().zip(sources.drain(..)) {
            let a = r?;
            uidvalidity = a.uidvalidity;
            source_uids.push(src);
            dest_uids.push(a.uid);
        }
        Ok(())
    };
    let mut result = Ok(());
    for m in messages {
        let content = match b.store.read(&user, &folder, m.uid) {
            Ok(c) => c,
            // Expunged meanwhile: RFC 9051 6.4.7 lets COPY skip it.
            Err(e) if e.is_not_found() => continue,
            Err(e) => {
                result = Err(e);
                break;
            }
        };
        batch_bytes += content.len() as u64;
        batch.push(AppendRequest {
            user: user.clone(),
            folder: dest.to_string(),
            message: NewMessage {
                flags: m.flags,
                keywords: m.keywords.clone(),
                internal_date: m.internal_date,
                content,
            },
        });
        batch_sources.push(m.uid);
        if batch_bytes >= BATCH_BYTES_MAX {
            batch_bytes = 0;
            if let Err(e) = flush(&mut batch, &mut batch_sources) {
                result = Err(e);
                break;
            }
        }
    }
    if result.is_ok() && !batch.is_empty() {
        result = flush(&mut batch, &mut batch_sources);
    }
    if let Err(e) = result {
        // RFC 9051 6.4.7: a failed COPY leaves the destination as it was.
        if !dest_uids.is_empty() {
            let _ = b.store.expunge(&user, dest, &dest_uids);
        }
        super::no(s, tag, &e);
        return;
    }
    // RFC 4315 3: both sets list UIDs in corresponding order; both ascend here, so the
    // compact form keeps the pairing.
    let code = if dest_uids.is_empty() {
        String::new()
    } else {
        format!(
            "[COPYUID {uidvalidity} {} {}] ",
            uid_set(&source_uids),
            uid_set(&dest_uids)
        )
    };
    if !dest_uids.is_empty() {
        b.filing.filed(&user, &folder, dest, &dest_uids);
    }
    if moving {
        if !source_uids.is_empty() {
            // RFC 6851 4.3: COPYUID comes untagged, before the EXPUNGEs.
            s.untagged(&format!("OK {code}Moved"));
            if let Err(e) = b.store.expunge(&user, &folder, &source_uids) {
                super::no(s, tag, &e);
                return;
            }
        }
        let verb = if uid { "UID MOVE" } else { "MOVE" };
        s.done(tag, &format!("OK {verb} completed"), b, true);
    } else {
        let verb = if uid { "UID COPY" } else { "COPY" };
        s.done(tag, &format!("OK {code}{verb} completed"), b, uid);
    }
}
