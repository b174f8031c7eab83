//! Sequence sets (RFC 9051 9 sequence-set) to positions in the selected view.

use imap_codec::imap_types::sequence::{SeqOrUid, Sequence, SequenceSet};
use store::MessageInfo;

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
