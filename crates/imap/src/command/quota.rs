//! RFC 9208 QUOTA: GETQUOTA (4.1.1), GETQUOTAROOT (4.1.2), SETQUOTA (4.1.3, refused: limits
//! are set by an administrator with `mailstow user quota`), and the check every addition
//! (APPEND, COPY, MOVE) makes before it writes, answered `NO [OVERQUOTA]` (4.3.1).
//!
//! A user has one quota root, `""`, covering all of its folders. Its limits come from the
//! shell through [`crate::Quotas`] at every call; its usage from the store's index (no I/O),
//! through the same [`mail_model::Quota::admits`] that SMTP and LMTP use at RCPT.

use mail_model::{OverQuota, Quota, Usage};

use crate::backend::Backend;
use crate::response::write_mailbox;
use crate::session::Session;

/// The name of every user's one quota root.
const ROOT: &str = "";

/// Whether adding `added` to the user's folders fits its quota and the server's disk. When
/// it does not, the tagged `NO [OVERQUOTA]` (or `NO [UNAVAILABLE]` for a full disk) is
/// written and nothing should be added.
pub(crate) fn admits(
    s: &mut Session,
    tag: &str,
    user: &str,
    added: Usage,
    b: &Backend<'_>,
) -> bool {
    if b.quotas.storage_full(added.bytes) {
        s.tagged(tag, crate::command::STORAGE_FULL);
        return false;
    }
    let quota = b.quotas.quota(user);
    if !quota.is_limited() {
        return true;
    }
    match quota.admits(b.store.usage(user), added) {
        Ok(()) => true,
        Err(why) => {
            b.quotas.refused(user, added, why);
            // RFC 9208 4.3.1 and RFC 5530 3: OVERQUOTA, for a NO to APPEND, COPY or MOVE.
            let text = match why {
                OverQuota::TooLarge => "NO [OVERQUOTA] Larger than the mailbox quota",
                OverQuota::Full => "NO [OVERQUOTA] Mailbox quota exceeded",
            };
            s.tagged(tag, text);
            false
        }
    }
}

/// RFC 9208 4.1.2: `* QUOTAROOT mailbox ""`, then the root's QUOTA. A user without limits
/// has no quota root (`* QUOTAROOT mailbox`). The mailbox need not exist: the answer is
/// the root it would have.
pub(crate) fn get_quota_root(s: &mut Session, tag: &str, mailbox: &str, b: &Backend<'_>) {
    let Some(user) = s.user.clone() else {
        return;
    };
    let quota = b.quotas.quota(&user);
    // RFC 9208 4.2.2: QUOTAROOT mailbox *(SP root).
    // The name as this client sends and reads it (modified UTF-7 unless UTF8=ACCEPT).
    let wire = s.name_to_client(mailbox).into_owned();
    s.out.extend_from_slice(b"* QUOTAROOT ");
    write_mailbox(&mut s.out, &wire);
    if quota.is_limited() {
        s.out.extend_from_slice(b" \"\"\r\n");
        let line = quota_response(&quota, b.store.usage(&user));
        s.untagged(&line);
    } else {
        s.out.extend_from_slice(b"\r\n");
    }
    s.done(tag, "OK GETQUOTAROOT completed", b, true);
}

/// RFC 9208 4.1.1: the QUOTA of the root `""`; any other root does not exist.
pub(crate) fn get_quota(s: &mut Session, tag: &str, root: &[u8], b: &Backend<'_>) {
    let Some(user) = s.user.clone() else {
        return;
    };
    let quota = b.quotas.quota(&user);
    if root != ROOT.as_bytes() || !quota.is_limited() {
        s.tagged(tag, "NO [NONEXISTENT] No such quota root");
        return;
    }
    let line = quota_response(&quota, b.store.usage(&user));
    s.untagged(&line);
    s.done(tag, "OK GETQUOTA completed", b, true);
}

/// RFC 9208 4.1.3: a server may refuse to change limits; ours are the administrator's.
pub(crate) fn set_quota(s: &mut Session, tag: &str) {
    s.tagged(
        tag,
        "NO [NOPERM] Quotas are set by the administrator (mailstow user quota)",
    );
}

/// RFC 9208 4.2.1: `QUOTA "" (STORAGE used limit MESSAGE used limit)`, a resource only when
/// it has a limit. STORAGE counts units of 1024 octets (5.1): usage rounds up (a user with
/// mail never shows 0), the limit down (never more than is allowed).
fn quota_response(quota: &Quota, used: Usage) -> String {
    let mut resources = Vec::new();
    if let Some(max) = quota.bytes_max {
        resources.push(format!(
            "STORAGE {} {}",
            used.bytes.div_ceil(1024),
            max / 1024
        ));
    }
    if let Some(max) = quota.messages_max {
        // RFC 9208 5.2: MESSAGE, the number of messages.
        resources.push(format!("MESSAGE {} {max}", used.messages));
    }
    format!("QUOTA \"{ROOT}\" ({})", resources.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_without_a_limit_are_left_out() {
        let used = Usage {
            folders: 2,
            messages: 3,
            bytes: 1025,
        };
        let both = Quota {
            bytes_max: Some(10 << 20),
            messages_max: Some(100),
        };
        assert_eq!(
            quota_response(&both, used),
            "QUOTA \"\" (STORAGE 2 10240 MESSAGE 3 100)"
        );
        let bytes = Quota {
            bytes_max: Some(1023),
            messages_max: None,
        };
        assert_eq!(quota_response(&bytes, used), "QUOTA \"\" (STORAGE 2 0)");
        let messages = Quota {
            bytes_max: None,
            messages_max: Some(5),
        };
        assert_eq!(quota_response(&messages, used), "QUOTA \"\" (MESSAGE 3 5)");
    }
}
