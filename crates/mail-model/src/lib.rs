//! The data of mail storage, shared by the store that keeps it and the protocols that serve
//! it: flags, message entries and summaries, folder counters, quotas, and the error type; the
//! small encodings of that data every side needs (modified UTF-7 folder names, dates); and
//! [`Mailstore`], the store's interface as the protocols use it. Plain data, pure functions
//! and that one trait: no I/O, so a protocol crate can depend on it without depending on a
//! storage engine.

mod error;
mod flags;
mod mailstore;
pub mod mutf7;
mod quota;

pub use error::StoreError;
pub use flags::{FlagOp, Flags};
pub use mailstore::Mailstore;
pub use quota::{OverQuota, Quota, Usage};

/// A message to append.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewMessage {
    pub flags: Flags,
    pub keywords: Vec<String>,
    /// Unix seconds.
    pub internal_date: i64,
    pub content: Vec<u8>,
}

/// One append of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendRequest {
    pub user: String,
    pub folder: String,
    pub message: NewMessage,
}

/// What an acknowledged append got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub uid: u32,
    pub uidvalidity: u32,
    pub modseq: u64,
}

/// Header fields parsed once at append and stored in front of the content.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub from: String,
    pub to: String,
    pub subject: String,
    pub date: String,
    pub message_id: String,
    pub size: u64,
    /// The MIME structure (`mime_structure::Structure::to_bytes`), computed at arrival so
    /// IMAP FETCH never parses a message again. Empty for messages stored before it existed.
    pub structure: Vec<u8>,
    /// JMAP's `preview` (RFC 8621 4.1.4): at most 256 characters of the first text body,
    /// white space collapsed (`mime_structure::Preview`). Empty for messages stored before
    /// it existed, and for messages without a text body.
    pub preview: String,
    /// JMAP's `hasAttachment`: a part a client should offer as downloadable.
    pub has_attachment: bool,
    /// The message ids this message follows, for threading (RFC 5256 3, REFERENCES): the
    /// References field's, or the first of In-Reply-To when there is no References, oldest
    /// first, without angle brackets, space separated; the newest kept when they do not fit
    /// in `summary_field_bytes_max`. `None` for messages stored before it existed (a reader
    /// that needs it then looks at the envelope's In-Reply-To).
    pub references: Option<String>,
    /// The Date field in seconds since the epoch, UTC ([`sent_at`] of `date`): derived, never
    /// stored, filled wherever a summary is parsed or read back, so a sort by date parses no
    /// text. `None` when `date` is empty or not in the form the store writes.
    pub sent: Option<i64>,
}

/// The Date as the store writes it (mail-parser's `to_rfc822`: `Tue, 3 Jan 2023 10:00:00
/// +0100`) in seconds since the epoch, UTC, without a general parser. `None` for any other
/// shape.
pub fn sent_at(date: &str) -> Option<i64> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let mut parts = date.split_once(", ")?.1.split(' ');
    let day: i64 = parts.next()?.parse().ok()?;
    let month_name = parts.next()?;
    let month = MONTHS.iter().position(|m| *m == month_name)? as i64 + 1;
    let year: i64 = parts.next()?.parse().ok()?;
    let mut hms = parts.next()?.split(':').map(|v| v.parse::<i64>().ok());
    let (h, m, sec) = (hms.next()??, hms.next()??, hms.next()??);
    let zone = parts.next()?;
    if parts.next().is_some() || hms.next().is_some() || zone.len() != 5 {
        return None;
    }
    let days_in_month = [
        31,
        28 + i64::from(leap(year)),
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=days_in_month[month as usize - 1]).contains(&day)
        || !(0..24).contains(&h)
        || !(0..60).contains(&m)
        || !(0..=60).contains(&sec)
        || !(0..=9999).contains(&year)
    {
        return None;
    }
    let sign = match zone.as_bytes()[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let zh: i64 = zone.get(1..3)?.parse().ok()?;
    let zm: i64 = zone.get(3..5)?.parse().ok()?;
    let local = days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + sec;
    Some(local - sign * (zh * 3600 + zm * 60))
}

fn leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

/// Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's algorithm).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sent_at_reads_the_stored_date_form() {
        assert_eq!(sent_at("Thu, 1 Jan 1970 00:00:00 +0000"), Some(0));
        assert_eq!(sent_at("Mon, 7 Feb 1994 21:52:25 -0800"), Some(760_686_745));
        assert_eq!(
            sent_at("Tue, 29 Feb 2000 12:00:00 +0100"),
            Some(951_822_000)
        );
        assert_eq!(sent_at("Wed, 31 Dec 1969 23:59:59 +0000"), Some(-1));
        for bad in [
            "",
            "7 Feb 1994 21:52:25 -0800",
            "Mon, 30 Feb 1994 21:52:25 -0800",
            "Mon, 7 Feb 1994 24:00:00 -0800",
            "Mon, 7 Foo 1994 21:52:25 -0800",
            "Mon, 7 Feb 1994 21:52:25 PST",
        ] {
            assert_eq!(sent_at(bad), None, "{bad}");
        }
    }
}

/// A message as the index knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageInfo {
    pub uid: u32,
    pub size: u64,
    pub flags: Flags,
    pub keywords: Vec<String>,
    pub modseq: u64,
    pub internal_date: i64,
}

/// A folder's counters, O(1) to get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FolderStatus {
    pub messages: u64,
    /// Sum of message sizes.
    pub bytes: u64,
    pub uidvalidity: u32,
    pub uidnext: u32,
    pub highest_modseq: u64,
}

/// A folder opened for a session: its status and every message's index entry, UID order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FolderView {
    pub status: FolderStatus,
    pub messages: Vec<MessageInfo>,
}

/// What one expunge did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpungeReport {
    pub expunged: u64,
    /// Storage bytes returned to free space (the store's: whole volume units).
    pub bytes_freed: u64,
    /// Messages relocated by the store's defrag-on-delete rule.
    pub moves: u64,
    pub bytes_moved: u64,
    /// The folder's MODSEQ after the expunge.
    pub modseq: u64,
    /// The expunge is durable, but a defrag move after it failed (the store may have
    /// stopped; see `StoreError::Failed`).
    pub defrag_error: Option<String>,
}

/// What changed in a folder since a MODSEQ (see [`Mailstore::changes_since`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FolderChanges {
    pub status: FolderStatus,
    /// Messages whose MODSEQ is above the one asked about (new ones and changed flags),
    /// UID order.
    pub changed: Vec<MessageInfo>,
}
