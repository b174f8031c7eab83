//! RFC 9051 6.3.12 APPEND, with MULTIAPPEND (RFC 3502), APPENDUID (RFC 4315 3),
//! literal8 (RFC 3516 4.4), CATENATE (RFC 4469, `catenate.rs`) and the quota check
//! (RFC 9208 4.3.1).
//!
//! All messages of one APPEND go to the store as one batch: one group commit, and each
//! session's appends share syncs with every other session's.

use mail_model::{AppendRequest, NewMessage};

use super::catenate::{Builder, Refusal};
use crate::backend::Backend;
use crate::parse::{AppendData, AppendMessage};
use crate::response::uid_set;
use crate::session::Session;

pub(crate) fn run(
    s: &mut Session,
    tag: &str,
    mailbox: &str,
    messages: Vec<AppendMessage>,
    b: &Backend<'_>,
    now: i64,
) {
    let Some(user) = s.user.clone() else {
        return;
    };
    if messages.len() > s.config.append_messages_max {
        s.tagged(
            tag,
            &format!(
                "NO [LIMIT] At most {} messages per APPEND",
                s.config.append_messages_max
            ),
        );
        return;
    }
    // RFC 9051 6.3.12: a missing destination is TRYCREATE, not created on the fly.
    let status = match b.store.status(&user, mailbox) {
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
    // Held until the messages are stored: the budget's share of the bytes URLs brought in.
    let mut catenated = Builder::new(s);
    let messages = match new_messages(s, messages, &mut catenated, b, now) {
        Ok(messages) => messages,
        Err(refusal) => return s.tagged(tag, &refusal.text()),
    };
    // RFC 9208 4.3.1: checked before anything is written; all messages count together,
    // since MULTIAPPEND adds all or none (RFC 3502 6).
    let added = mail_model::Usage {
        folders: 0,
        messages: messages.len() as u64,
        bytes: messages.iter().map(|m| m.content.len() as u64).sum(),
    };
    if !super::quota::admits(s, tag, &user, added, b) {
        return;
    }
    let requests: Vec<AppendRequest> = messages
        .into_iter()
        .map(|message| AppendRequest {
            user: user.clone(),
            folder: mailbox.to_string(),
            message,
        })
        .collect();
    let results = b.store.append_batch(requests);
    let mut uids = Vec::with_capacity(results.len());
    let mut failure = None;
    let mut uidvalidity = status.uidvalidity;
    for r in results {
        match r {
            Ok(a) => {
                uids.push(a.uid);
                uidvalidity = a.uidvalidity;
            }
            Err(e) => failure = failure.or(Some(e)),
        }
    }
    if let Some(e) = failure {
        // RFC 3502 6: all or nothing.
        if !uids.is_empty() {
            let _ = b.store.expunge(&user, mailbox, &uids);
        }
        super::no(s, tag, &e);
        return;
    }
    uids.sort_unstable();
    let text = format!(
        "OK [APPENDUID {uidvalidity} {}] APPEND completed",
        uid_set(&uids)
    );
    s.done(tag, &text, b, true);
}

/// The messages to store. A CATENATE message is built here, before anything is written
/// (RFC 4469 5): a URL that names nothing refuses the whole command (RFC 3502 6).
fn new_messages(
    s: &Session,
    messages: Vec<AppendMessage>,
    catenated: &mut Builder,
    b: &Backend<'_>,
    now: i64,
) -> Result<Vec<NewMessage>, Refusal> {
    let mut out = Vec::with_capacity(messages.len());
    for m in messages {
        let content = match m.data {
            AppendData::Literal(content) => content,
            AppendData::Catenate(parts) => catenated.build(s, parts, b)?,
        };
        out.push(NewMessage {
            flags: m.flags,
            keywords: m.keywords,
            // RFC 9051 6.3.12: without a date-time, the time of the APPEND.
            internal_date: m.date.unwrap_or(now),
            content,
        });
    }
    Ok(out)
}
