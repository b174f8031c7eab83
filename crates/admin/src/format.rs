//! What the operator's commands print: the same text whether the running server answers
//! (through the admin socket) or the CLI runs the command itself.

use queue::{MessageDetail, QueueEntry, RecipientStatus};
use store::Mailstore as _;

/// `queue stats`'s answer.
pub fn format_queue_stats(s: &queue::QueueStats) -> String {
    format!(
        "segments: {} main, {} deferred, {} free\n\
         messages: {} pending, {} deferred, {} bounces, {} quarantined\n\
         bytes in use: {}\n",
        s.main_segments,
        s.deferred_segments,
        s.free_segments,
        s.pending_messages,
        s.deferred_messages,
        s.bounces,
        s.quarantined,
        s.bytes_used
    )
}

/// `store stats`'s answer: one line per folder, then the volume.
pub fn format_store_stats(stats: &store::StoreStats) -> String {
    let mut out = format!(
        "{:<32} {:<24} {:>10} {:>14} {:>10}\n",
        "user", "folder", "messages", "bytes", "fragments"
    );
    for folder in &stats.folders {
        out.push_str(&format!(
            "{:<32} {:<24} {:>10} {:>14} {:>10}\n",
            folder.user, folder.folder, folder.messages, folder.bytes, folder.fragments
        ));
    }
    out.push_str(&format!(
        "volume: {} bytes, used {}, free {} in {} extents, reserved {}\n",
        stats.volume_bytes,
        stats.used_bytes,
        stats.free_bytes,
        stats.free_extents,
        stats.reserved_bytes
    ));
    out
}

/// `user rename`'s answer.
pub fn format_renamed(old: &str, new: &str, moved: &store::Usage) -> String {
    format!(
        "user renamed: {old} -> {new} ({} folders, {} messages, {} bytes kept)\n",
        moved.folders, moved.messages, moved.bytes
    )
}

/// `user list`'s answer: one line per user with what it holds (from the store's index; all
/// zero without a store), its limits and its last login.
pub fn format_user_list(users: &[directory::UserInfo], store: Option<&store::Store>) -> String {
    let mut out = format!(
        "{:<40} {:>9} {:>8} {:>8} {:>9}  {}\n",
        "address", "messages", "size", "quota", "max msgs", "last login"
    );
    for user in users {
        let used = store.map(|s| s.usage(&user.address)).unwrap_or_default();
        out.push_str(&format!(
            "{:<40} {:>9} {:>8} {:>8} {:>9}  {}\n",
            user.address,
            used.messages,
            human_bytes(used.bytes),
            user.quota_bytes.map_or("none".into(), human_bytes),
            user.quota_messages
                .map_or("none".into(), |max| max.to_string()),
            last_login(user.last_login_at)
        ));
        // In a cluster, the owner node last, as `node=NAME`.
        if let Some(node) = &user.node {
            out.truncate(out.len() - 1);
            out.push_str(&format!(" node={node}\n"));
        }
    }
    out.push_str(&format!("{} users\n", users.len()));
    out
}

/// `user show`'s answer: the user's limits, usage and last login, then every folder with
/// its messages and bytes.
pub fn format_user_show(user: &directory::UserInfo, store: Option<&store::Store>) -> String {
    let used = store.map(|s| s.usage(&user.address)).unwrap_or_default();
    let limit = |max: Option<u64>, show: fn(u64) -> String| max.map_or("none".into(), show);
    let mut out = format!(
        "address: {}\nquota: {}\nmax messages: {}\nusage: {} messages, {} ({} bytes) in {} folders\n\
         last login: {}\nadmin: {}\n",
        user.address,
        limit(user.quota_bytes, human_bytes),
        limit(user.quota_messages, |max| max.to_string()),
        used.messages,
        human_bytes(used.bytes),
        used.bytes,
        used.folders,
        last_login(user.last_login_at),
        if user.admin { "yes" } else { "no" }
    );
    out.push_str(&format!(
        "{:<40} {:>9} {:>14} {:>8}\n",
        "folder", "messages", "bytes", "size"
    ));
    let Some(store) = store else {
        return out;
    };
    let mut folders = store.list_folders(&user.address);
    folders.sort();
    for folder in folders {
        // Deleted meanwhile: left out.
        let Ok(status) = store.status(&user.address, &folder) else {
            continue;
        };
        out.push_str(&format!(
            "{:<40} {:>9} {:>14} {:>8}\n",
            one_line(&folder),
            status.messages,
            status.bytes,
            human_bytes(status.bytes)
        ));
    }
    out
}

/// A size in binary units, as `user quota` takes them: `0`, `512B`, `1.5K`, `500M`, `2G`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "K", "M", "G", "T"];
    if bytes == 0 {
        return "0".into();
    }
    let mut unit = 0;
    while unit + 1 < UNITS.len() && bytes >= 1u64 << (10 * (unit + 1)) {
        unit += 1;
    }
    if unit == 0 {
        return format!("{bytes}B");
    }
    let whole = 1u64 << (10 * unit);
    if bytes.is_multiple_of(whole) {
        return format!("{}{}", bytes / whole, UNITS[unit]);
    }
    let tenths = (bytes as f64 / whole as f64 * 10.0).round() / 10.0;
    format!("{tenths}{}", UNITS[unit])
}

fn last_login(at: Option<i64>) -> String {
    match at {
        Some(at) => mail_parser::DateTime::from_timestamp(at).to_rfc3339(),
        None => "never".into(),
    }
}

/// `user del`'s answer.
pub fn format_deleted(user: &str, deleted: &store::DeletedUser, node: Option<&str>) -> String {
    if let Some(node) = node {
        return format!("user removed: {user} (its mail is removed by its node, {node})\n");
    }
    format!(
        "user removed: {user} ({} folders, {} messages, {} bytes freed)\n",
        deleted.folders, deleted.messages, deleted.bytes
    )
}

/// One line per message, then `<n> messages`:
/// `<id> <class> <arrival> <size> <attempts> from=<sender> to=<rcpt>:<status>,...`.
pub fn format_list(entries: &[QueueEntry]) -> String {
    let mut out = String::new();
    for e in entries {
        out.push_str(&format!(
            "{} {} {} {} {} ",
            e.id,
            e.class.name(),
            rfc3339(e.envelope.arrival_ms),
            e.size,
            e.attempts
        ));
        match &e.damage {
            Some(why) => out.push_str(&format!("damaged: {}", one_line(why))),
            None => {
                let to: Vec<String> = e
                    .envelope
                    .recipients
                    .iter()
                    .map(|r| format!("{}:{}", one_line(&r.address), status_name(r.status)))
                    .collect();
                out.push_str(&format!(
                    "from={} to={}",
                    sender(&e.envelope.sender),
                    to.join(",")
                ));
            }
        }
        out.push('\n');
    }
    out.push_str(&format!("{} messages\n", entries.len()));
    out
}

/// The envelope as `key: value` lines, a blank line, then the content as stored.
pub fn format_show(m: &MessageDetail) -> Vec<u8> {
    let e = &m.entry;
    let mut head = format!(
        "id: {}\nclass: {}\nsegment: {}\narrival: {}\nsize: {}\nattempts: {}\nnext-attempt: {}\n\
         leased: {}\nfrom: {}\n",
        e.id,
        e.class.name(),
        if e.deferred { "deferred" } else { "main" },
        rfc3339(e.envelope.arrival_ms),
        e.size,
        e.attempts,
        if e.next_attempt_ms == 0 {
            "now".to_string()
        } else {
            rfc3339(e.next_attempt_ms)
        },
        if e.leased { "yes" } else { "no" },
        sender(&e.envelope.sender),
    );
    for r in &e.envelope.recipients {
        head.push_str(&format!(
            "to: {} {}\n",
            one_line(&r.address),
            status_name(r.status)
        ));
    }
    for r in &e.envelope.recipients {
        if let Some(why) = &r.last_error {
            head.push_str(&format!(
                "last-error: {} {}\n",
                one_line(&r.address),
                one_line(why)
            ));
        }
    }
    head.push('\n');
    let mut out = head.into_bytes();
    out.extend_from_slice(&m.content);
    out
}

fn status_name(s: RecipientStatus) -> &'static str {
    match s {
        RecipientStatus::Pending => "pending",
        RecipientStatus::Delivered => "delivered",
        RecipientStatus::Failed => "failed",
        RecipientStatus::Moved => "moved",
    }
}

fn sender(s: &str) -> String {
    if s.is_empty() {
        "<>".into()
    } else {
        one_line(s)
    }
}

/// Keeps a field on its line: control characters (a CR/LF in a remote error text) become
/// spaces.
pub(crate) fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

pub(crate) fn rfc3339(ms: u64) -> String {
    mail_parser::DateTime::from_timestamp((ms / 1000) as i64).to_rfc3339()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_binary_units() {
        assert_eq!(human_bytes(0), "0");
        assert_eq!(human_bytes(1023), "1023B");
        assert_eq!(human_bytes(1024), "1K");
        assert_eq!(human_bytes(1536), "1.5K");
        assert_eq!(human_bytes(500 << 20), "500M");
        assert_eq!(human_bytes(3 << 29), "1.5G");
        assert_eq!(human_bytes(2 << 40), "2T");
        assert_eq!(human_bytes(u64::MAX), "16777216T");
    }

    #[test]
    fn fields_stay_on_one_line() {
        assert_eq!(one_line("451 a\r\nb"), "451 a  b");
        assert_eq!(sender(""), "<>");
        assert_eq!(rfc3339(1_700_000_000_999), "2023-11-14T22:13:20Z");
    }
}
