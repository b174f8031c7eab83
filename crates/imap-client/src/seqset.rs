//! Sequence sets (RFC 3501 9, `sequence-set`) from lists of UIDs.

/// Compresses UIDs (any order, duplicates allowed) into sequence-set syntax, e.g.
/// `[1, 2, 3, 4, 5, 9]` → `"1:5,9"`. Empty input gives an empty string.
pub fn compress(uids: &[u32]) -> String {
    split(uids, usize::MAX).pop().unwrap_or_default()
}

/// Like [`compress`] but splits into several sets, each at most `max_len` bytes
/// (at least one range per set, whatever its length), so that command lines stay short.
pub fn split(uids: &[u32], max_len: usize) -> Vec<String> {
    let mut sorted = uids.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut sets = Vec::new();
    let mut current = String::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end.wrapping_add(1) && end != u32::MAX {
            i += 1;
            end = sorted[i];
        }
        i += 1;
        let range = if start == end {
            start.to_string()
        } else {
            format!("{start}:{end}")
        };
        if !current.is_empty() && current.len() + 1 + range.len() > max_len {
            sets.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push(',');
        }
        current.push_str(&range);
    }
    if !current.is_empty() {
        sets.push(current);
    }
    sets
}

/// Expands a sequence set without `*` (e.g. from APPENDUID, RFC 4315 3) into its
/// numbers in the order written. `None` if it is malformed or larger than `limit`.
pub fn expand(set: &str, limit: usize) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in set.split(',') {
        let (a, b) = match part.split_once(':') {
            Some((a, b)) => (a.parse::<u32>().ok()?, b.parse::<u32>().ok()?),
            None => {
                let n = part.parse::<u32>().ok()?;
                (n, n)
            }
        };
        let (lo, hi) = (a.min(b), a.max(b));
        if out.len() + (hi - lo) as usize + 1 > limit {
            return None;
        }
        if a <= b {
            out.extend(lo..=hi);
        } else {
            out.extend((lo..=hi).rev());
        }
    }
    Some(out)
}

/// Whether `set` only has sequence-set characters (digits, `:`, `,`, `*`).
pub fn is_valid(set: &str) -> bool {
    !set.is_empty()
        && set
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b':' | b',' | b'*'))
        && !set.starts_with(',')
        && !set.ends_with(',')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compresses() {
        assert_eq!(compress(&[]), "");
        assert_eq!(compress(&[7]), "7");
        assert_eq!(compress(&[5, 1, 2, 3, 4, 9, 9]), "1:5,9");
        assert_eq!(compress(&[1, 3, 5, 6]), "1,3,5:6");
        assert_eq!(
            compress(&[u32::MAX, u32::MAX - 1, 1]),
            "1,4294967294:4294967295"
        );
    }

    #[test]
    fn splits_long_sets() {
        let uids: Vec<u32> = (1..=20_000).map(|n| n * 2).collect();
        let sets = split(&uids, 7000);
        assert!(sets.len() > 1);
        assert!(sets.iter().all(|s| s.len() <= 7000));
        let back: Vec<u32> = sets
            .iter()
            .flat_map(|s| expand(s, 1 << 20).unwrap())
            .collect();
        assert_eq!(back, uids);
    }

    #[test]
    fn expands() {
        assert_eq!(
            expand("3955:3957,4000", 100),
            Some(vec![3955, 3956, 3957, 4000])
        );
        assert_eq!(expand("5:3", 100), Some(vec![5, 4, 3]));
        assert_eq!(expand("1:1000", 10), None);
        assert_eq!(expand("x", 10), None);
        assert!(is_valid("1:*"));
        assert!(!is_valid("1 OR 2"));
    }
}
