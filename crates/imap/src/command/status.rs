//! RFC 9051 6.3.11 STATUS, with SIZE (RFC 8438) and HIGHESTMODSEQ (RFC 7162 3.1.6).

use imap_codec::imap_types::status::StatusDataItemName;
use mail_model::{Flags, StoreError};

use crate::backend::Backend;
use crate::response::write_mailbox;
use crate::session::Session;

pub(crate) fn run(
    s: &mut Session,
    tag: &str,
    name: &str,
    items: &[StatusDataItemName],
    b: &Backend<'_>,
) {
    let Some(user) = s.user.clone() else {
        return;
    };
    let items: Vec<&str> = items
        .iter()
        .map(|i| match i {
            StatusDataItemName::Messages => "MESSAGES",
            StatusDataItemName::Recent => "RECENT",
            StatusDataItemName::UidNext => "UIDNEXT",
            StatusDataItemName::UidValidity => "UIDVALIDITY",
            StatusDataItemName::Unseen => "UNSEEN",
            StatusDataItemName::Deleted => "DELETED",
            StatusDataItemName::DeletedStorage => "DELETED-STORAGE",
            StatusDataItemName::Size => "SIZE",
            StatusDataItemName::HighestModSeq => "HIGHESTMODSEQ",
        })
        .collect();
    let limit = s.config.literal_bytes_max;
    let wire = s.name_to_client(name).into_owned();
    match status_response(b.store, &user, name, &wire, &items, limit) {
        Ok(line) => {
            s.out.extend_from_slice(&line);
            s.done(tag, "OK STATUS completed", b, true);
        }
        Err(e) => super::no(s, tag, &e),
    }
}

/// `* STATUS name (ITEM n ...)\r\n`, the name as the client reads it (`wire_name`). Counters come from the index only: UNSEEN and
/// DELETED walk the folder's entries in memory.
pub(crate) fn status_response(
    store: &dyn mail_model::Mailstore,
    user: &str,
    name: &str,
    wire_name: &str,
    items: &[&str],
    append_limit: u64,
) -> Result<Vec<u8>, StoreError> {
    let status = store.status(user, name)?;
    let needs_flags = items
        .iter()
        .any(|i| *i == "UNSEEN" || *i == "DELETED" || *i == "DELETED-STORAGE" || *i == "RECENT");
    // RFC 3501 6.3.10: RECENT counts the messages a new session would see as recent,
    // without taking them.
    let first_recent = if items.contains(&"RECENT") {
        store.recent(user, name, false)?.0
    } else {
        u32::MAX
    };
    let (mut unseen, mut deleted, mut deleted_bytes, mut recent) = (0u64, 0u64, 0u64, 0u64);
    if needs_flags {
        for m in store.shared_view(user, name)?.1.iter() {
            if m.uid >= first_recent {
                recent += 1;
            }
            if !m.flags.contains(Flags::SEEN) {
                unseen += 1;
            }
            if m.flags.contains(Flags::DELETED) {
                deleted += 1;
                deleted_bytes += m.size;
            }
        }
    }
    let mut out = b"* STATUS ".to_vec();
    write_mailbox(&mut out, wire_name);
    out.extend_from_slice(b" (");
    for (i, item) in items.iter().enumerate() {
        let value = match *item {
            "MESSAGES" => status.messages,
            "RECENT" => recent,
            "UIDNEXT" => status.uidnext as u64,
            "UIDVALIDITY" => status.uidvalidity as u64,
            "UNSEEN" => unseen,
            "DELETED" => deleted,
            "DELETED-STORAGE" => deleted_bytes,
            "SIZE" => status.bytes,
            "HIGHESTMODSEQ" => status.highest_modseq,
            "APPENDLIMIT" => append_limit,
            _ => continue,
        };
        if i > 0 {
            out.push(b' ');
        }
        out.extend_from_slice(format!("{item} {value}").as_bytes());
    }
    out.extend_from_slice(b")\r\n");
    Ok(out)
}
