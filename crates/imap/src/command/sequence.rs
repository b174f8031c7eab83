//! Sequence sets (RFC 9051 9 sequence-set) to positions in the selected view.

use imap_codec::imap_types::sequence::{SeqOrUid, Sequence, SequenceSet};
use mail_model::MessageInfo;

/// Positions (0-based, ascending, no duplicates) of the messages a set names. For
/// message numbers, `Err` when a number is beyond the mailbox (RFC 9051 6.4: BAD); UIDs
/// that do not exist are simply skipped (RFC 9051 6.4.8).
pub(crate) fn resolve(
    set: &SequenceSet,
    messages: &[MessageInfo],
    uid: bool,
) -> Result<Vec<usize>, String> {
    // Half-open intervals, merged at the end: a set of many overlapping ranges costs no
    // more memory than the messages it names.
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    let count = messages.len();
    for seq in set.0.as_ref() {
        let (a, b) = match seq {
            Sequence::Single(v) => (*v, *v),
            Sequence::Range(a, b) => (*a, *b),
        };
        if uid {
            let largest = messages.last().map_or(0, |m| m.uid);
            let value = |v: SeqOrUid| match v {
                SeqOrUid::Value(n) => n.get(),
                SeqOrUid::Asterisk => largest,
            };
            let (lo, hi) = {
                let (x, y) = (value(a), value(b));
                (x.min(y), x.max(y))
            };
            let start = messages.partition_point(|m| m.uid < lo);
            let end = messages.partition_point(|m| m.uid <= hi);
            ranges.push((start, end));
        } else {
            let value = |v: SeqOrUid| match v {
                SeqOrUid::Value(n) => n.get() as usize,
                SeqOrUid::Asterisk => count,
            };
            let (x, y) = (value(a), value(b));
            let (lo, hi) = (x.min(y), x.max(y));
            if lo == 0 || hi > count {
                return Err("Invalid message sequence number".into());
            }
            ranges.push((lo - 1, hi));
        }
    }
    ranges.sort_unstable();
    let mut out = Vec::new();
    let mut done = 0;
    for (start, end) in ranges {
        let start = start.max(done);
        if start < end {
            out.extend(start..end);
            done = end;
        }
    }
    Ok(out)
}

/// The UID ranges (inclusive, merged, ascending) a UID set names, `*` being `largest`, cut
/// to `1..=largest`.
pub(crate) fn uid_ranges(set: &SequenceSet, largest: u32) -> Vec<(u32, u32)> {
    let value = |v: SeqOrUid| match v {
        SeqOrUid::Value(n) => n.get(),
        SeqOrUid::Asterisk => largest,
    };
    let mut ranges: Vec<(u32, u32)> = set
        .0
        .as_ref()
        .iter()
        .map(|seq| {
            let (a, b) = match seq {
                Sequence::Single(v) => (value(*v), value(*v)),
                Sequence::Range(a, b) => (value(*a), value(*b)),
            };
            (a.min(b), a.max(b).min(largest))
        })
        .filter(|(lo, hi)| lo <= hi)
        .collect();
    ranges.sort_unstable();
    let mut merged: Vec<(u32, u32)> = Vec::new();
    for (lo, hi) in ranges {
        match merged.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => merged.push((lo, hi)),
        }
    }
    merged
}

/// RFC 7162 3.2.5.1, 3.2.6: the UIDs within `ranges` that no message of `messages` (sorted
/// by UID) has, as ranges: what a VANISHED (EARLIER) reports. The store keeps no record of
/// expunged UIDs, so this names every missing one in the ranges, also those gone before the
/// client's MODSEQ (RFC 7162 allows the superset); its cost is the ranges and the messages
/// in them, never the width of the ranges.
pub(crate) fn missing_uids(ranges: &[(u32, u32)], messages: &[MessageInfo]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for &(lo, hi) in ranges {
        let mut next = lo;
        let start = messages.partition_point(|m| m.uid < lo);
        for m in messages[start..].iter().take_while(|m| m.uid <= hi) {
            if m.uid > next {
                out.push((next, m.uid - 1));
            }
            next = m.uid.saturating_add(1);
        }
        if next <= hi && next >= lo {
            out.push((next, hi));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::response::ranges_text;

    fn info(uid: u32) -> MessageInfo {
        MessageInfo {
            uid,
            size: 1,
            flags: mail_model::Flags::EMPTY,
            keywords: Vec::new(),
            modseq: 1,
            internal_date: 0,
        }
    }

    #[test]
    fn missing_uids_are_ranges_whatever_their_width() {
        let messages: Vec<MessageInfo> = [2, 3, 7].into_iter().map(info).collect();
        assert_eq!(missing_uids(&[(1, 9)], &messages), [(1, 1), (4, 6), (8, 9)]);
        assert_eq!(missing_uids(&[(2, 3)], &messages), []);
        assert_eq!(missing_uids(&[(4, 4), (7, 8)], &messages), [(4, 4), (8, 8)]);
        // A set as wide as UIDs go costs the messages, not the width.
        assert_eq!(
            missing_uids(&[(1, u32::MAX - 1)], &messages),
            [(1, 1), (4, 6), (8, u32::MAX - 1)]
        );
        assert_eq!(ranges_text(&[(1, 1), (4, 6)]), "1,4:6");
    }
}
