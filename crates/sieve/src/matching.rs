//! Comparators and match types: `:is`, `:contains`, `:matches` (RFC 5228 2.7), relational
//! `:value` (RFC 5231), `:regex` (draft-ietf-sieve-regex), and the three comparators
//! i;octet, i;ascii-casemap and i;ascii-numeric (RFC 4790 9).

use std::cmp::Ordering;

use regex::{Regex, RegexBuilder};

use crate::ir::{Comparator, MatchType, Relation};

/// The compiled size a `:regex` may reach: the regex crate matches in linear time, and
/// this bounds the memory a hostile pattern can claim.
pub(crate) const REGEX_SIZE_MAX: usize = 1 << 20;

/// Compiles a `:regex` key. Case-insensitive under i;ascii-casemap (as Pigeonhole does).
pub(crate) fn build_regex(pattern: &str, comparator: Comparator) -> Result<Regex, String> {
    RegexBuilder::new(pattern)
        .case_insensitive(comparator == Comparator::AsciiCasemap)
        .size_limit(REGEX_SIZE_MAX)
        .dfa_size_limit(REGEX_SIZE_MAX)
        .nest_limit(64)
        .build()
        .map_err(|e| format!("bad regular expression {pattern:?}: {e}"))
}

/// Whether `value` matches `key`. `captures`, when given, receives the match variables
/// (RFC 5229 3.2: `${0}` the matched text, then one per wildcard or group) on success.
pub(crate) fn matches(
    match_type: MatchType,
    comparator: Comparator,
    value: &str,
    key: &str,
    regex: Option<&Regex>,
    captures: Option<&mut Vec<String>>,
) -> bool {
    match match_type {
        MatchType::Is => equal(comparator, value, key),
        MatchType::Contains => contains(comparator, value, key),
        MatchType::Matches => glob(comparator, value, key, captures),
        MatchType::Regex => match regex {
            Some(re) => regex_match(re, value, captures),
            None => match build_regex(key, comparator) {
                Ok(re) => regex_match(&re, value, captures),
                Err(_) => false,
            },
        },
        MatchType::Value(rel) => relation(rel, compare(comparator, value, key)),
        MatchType::Count(rel) => relation(rel, compare(comparator, value, key)),
    }
}

pub(crate) fn relation(rel: Relation, ord: Ordering) -> bool {
    match rel {
        Relation::Gt => ord == Ordering::Greater,
        Relation::Ge => ord != Ordering::Less,
        Relation::Lt => ord == Ordering::Less,
        Relation::Le => ord != Ordering::Greater,
        Relation::Eq => ord == Ordering::Equal,
        Relation::Ne => ord != Ordering::Equal,
    }
}

fn equal(comparator: Comparator, a: &str, b: &str) -> bool {
    match comparator {
        Comparator::Octet => a == b,
        Comparator::AsciiCasemap => a.eq_ignore_ascii_case(b),
        Comparator::AsciiNumeric => numeric_cmp(a, b) == Ordering::Equal,
    }
}

/// Match variables a `:matches` or `:regex` sets: `${0}` (the whole) and up to 31 groups
/// or wildcards (RFC 5229 3.2 leaves the number to us; Pigeonhole keeps 32 too). Later
/// ones are empty.
pub(crate) const MATCH_VALUES_MAX: usize = 32;

/// The ordering a comparator gives (RFC 4790 9; RFC 5231 for `:value`).
pub(crate) fn compare(comparator: Comparator, a: &str, b: &str) -> Ordering {
    match comparator {
        Comparator::Octet => a.as_bytes().cmp(b.as_bytes()),
        Comparator::AsciiCasemap => a
            .bytes()
            .map(|c| c.to_ascii_lowercase())
            .cmp(b.bytes().map(|c| c.to_ascii_lowercase())),
        Comparator::AsciiNumeric => numeric_cmp(a, b),
    }
}

/// RFC 4790 9.1: the value of a string is its leading decimal digits; a string that does
/// not start with a digit is positive infinity (and equal to another such).
pub(crate) fn numeric_cmp(a: &str, b: &str) -> Ordering {
    fn digits(s: &str) -> Option<&str> {
        let end = s
            .bytes()
            .position(|c| !c.is_ascii_digit())
            .unwrap_or(s.len());
        if end == 0 {
            return None;
        }
        let d = s[..end].trim_start_matches('0');
        Some(d)
    }
    match (digits(a), digits(b)) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (Some(x), Some(y)) => x.len().cmp(&y.len()).then_with(|| x.cmp(y)),
    }
}

fn contains(comparator: Comparator, value: &str, key: &str) -> bool {
    match comparator {
        Comparator::Octet => value.contains(key),
        _ => {
            let (v, k) = (value.as_bytes(), key.as_bytes());
            if k.is_empty() {
                return true;
            }
            if k.len() > v.len() {
                return false;
            }
            let first = k[0].to_ascii_lowercase();
            (0..=v.len() - k.len()).any(|i| {
                v[i].to_ascii_lowercase() == first && v[i..i + k.len()].eq_ignore_ascii_case(k)
            })
        }
    }
}

fn regex_match(re: &Regex, value: &str, captures: Option<&mut Vec<String>>) -> bool {
    match captures {
        None => re.is_match(value),
        Some(out) => match re.captures(value) {
            None => false,
            Some(caps) => {
                out.clear();
                for i in 0..caps.len().min(MATCH_VALUES_MAX) {
                    out.push(
                        caps.get(i)
                            .map(|m| m.as_str().to_string())
                            .unwrap_or_default(),
                    );
                }
                true
            }
        },
    }
}

/// A piece of a `:matches` pattern.
#[derive(Debug, Clone, Copy)]
enum Glob<'a> {
    /// Literal text (one character, as its UTF-8 bytes).
    Lit(&'a [u8]),
    Any,
    Star,
}

fn char_len(first: u8) -> usize {
    match first {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

fn parse_glob(pattern: &str) -> Vec<Glob<'_>> {
    let p = pattern.as_bytes();
    let mut out = Vec::with_capacity(p.len());
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            b'*' => {
                out.push(Glob::Star);
                i += 1;
            }
            b'?' => {
                out.push(Glob::Any);
                i += 1;
            }
            b'\\' if i + 1 < p.len() => {
                let l = char_len(p[i + 1]).min(p.len() - i - 1);
                out.push(Glob::Lit(&p[i + 1..i + 1 + l]));
                i += 1 + l;
            }
            c => {
                let l = char_len(c).min(p.len() - i);
                out.push(Glob::Lit(&p[i..i + l]));
                i += l;
            }
        }
    }
    out
}

/// `:matches` (RFC 5228 2.7.1): `*` any run, `?` one character, `\` escapes. Iterative,
/// backing up only to the latest `*`: O(pattern x value) at worst, never exponential. The
/// wildcards match as little as possible (RFC 5229 3.2), which is what backing up only
/// the latest `*` yields.
pub(crate) fn glob(
    comparator: Comparator,
    value: &str,
    pattern: &str,
    captures: Option<&mut Vec<String>>,
) -> bool {
    if comparator == Comparator::AsciiNumeric {
        return false;
    }
    let fold = comparator == Comparator::AsciiCasemap;
    let pat = parse_glob(pattern);
    let t = value.as_bytes();
    // The wildcard number of each pattern piece, and each wildcard's span.
    let want_caps = captures.is_some();
    let mut wild_index = Vec::new();
    let mut spans: Vec<(usize, usize)> = Vec::new();
    if want_caps {
        let mut n = 0;
        for g in &pat {
            wild_index.push(n);
            if matches!(g, Glob::Star | Glob::Any) {
                n += 1;
            }
        }
        spans = vec![(0, 0); n];
    }
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None; // (pattern index, value index it extends to)
    loop {
        if pi < pat.len() {
            match pat[pi] {
                Glob::Star => {
                    star = Some((pi, ti));
                    if want_caps {
                        spans[wild_index[pi]] = (ti, ti);
                    }
                    pi += 1;
                    continue;
                }
                Glob::Any if ti < t.len() => {
                    let l = char_len(t[ti]).min(t.len() - ti);
                    if want_caps {
                        spans[wild_index[pi]] = (ti, ti + l);
                    }
                    ti += l;
                    pi += 1;
                    continue;
                }
                Glob::Lit(lit) if t.len() - ti >= lit.len() => {
                    let here = &t[ti..ti + lit.len()];
                    let same = if fold {
                        here.eq_ignore_ascii_case(lit)
                    } else {
                        here == lit
                    };
                    if same {
                        ti += lit.len();
                        pi += 1;
                        continue;
                    }
                }
                _ => {}
            }
        } else if ti == t.len() {
            if let Some(out) = captures {
                out.clear();
                out.push(value.to_string());
                for &(s, e) in spans.iter().take(MATCH_VALUES_MAX - 1) {
                    out.push(String::from_utf8_lossy(&t[s..e]).into_owned());
                }
            }
            return true;
        }
        // Mismatch: let the latest star take one more character.
        match star {
            Some((sp, st)) if st < t.len() => {
                let next = st + char_len(t[st]).min(t.len() - st);
                star = Some((sp, next));
                if want_caps {
                    spans[wild_index[sp]] = (spans[wild_index[sp]].0, next);
                }
                ti = next;
                pi = sp + 1;
            }
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn m(value: &str, pattern: &str) -> bool {
        glob(Comparator::AsciiCasemap, value, pattern, None)
    }

    // RFC 5228 2.7.1
    #[test]
    fn wildcards() {
        assert!(m("frobnitzm", "frob*"));
        assert!(m("FROB", "frob"));
        assert!(m("a", "?"));
        assert!(!m("", "?"));
        assert!(m("", "*"));
        assert!(m("é", "?"));
        assert!(m("a*b", "a\\*b"));
        assert!(!m("axb", "a\\*b"));
        assert!(m("a\\b", "a\\\\b"));
        assert!(m("abcabcabd", "*abd"));
        assert!(!glob(Comparator::Octet, "ABC", "abc", None));
    }

    // RFC 5229 3.2 (the examples)
    #[test]
    fn match_variables() {
        let mut caps = Vec::new();
        assert!(glob(
            Comparator::AsciiCasemap,
            "[acme-users] [fwd] version 1.0 is out",
            "[*] *",
            Some(&mut caps)
        ));
        assert_eq!(caps[1], "acme-users");
        assert_eq!(caps[2], "[fwd] version 1.0 is out");
        assert!(glob(
            Comparator::AsciiCasemap,
            "coyote@ACME.Example.COM",
            "coyote@**.com",
            Some(&mut caps)
        ));
        assert_eq!(caps, vec!["coyote@ACME.Example.COM", "", "ACME.Example"]);
    }

    // A pathological pattern must stay fast (no exponential backtracking).
    #[test]
    fn pathological_pattern_is_fast() {
        let value = "a".repeat(100_000);
        let start = Instant::now();
        assert!(!m(&value, "*a*a*a*a*a*a*b"));
        let mut caps = Vec::new();
        assert!(!glob(
            Comparator::Octet,
            &value,
            "*a*a*a*a*a*a*b",
            Some(&mut caps)
        ));
        assert!(start.elapsed().as_secs() < 2, "took {:?}", start.elapsed());
    }

    // RFC 4790 9.1
    #[test]
    fn ascii_numeric() {
        assert_eq!(numeric_cmp("10", "9"), Ordering::Greater);
        assert_eq!(numeric_cmp("007", "7abc"), Ordering::Equal);
        assert_eq!(
            numeric_cmp("x", "99999999999999999999999"),
            Ordering::Greater
        );
        assert_eq!(numeric_cmp("x", "y"), Ordering::Equal);
    }

    // RFC 5228 2.7.3
    #[test]
    fn casemap_contains() {
        assert!(contains(Comparator::AsciiCasemap, "Hello World", "WORLD"));
        assert!(!contains(Comparator::Octet, "Hello World", "WORLD"));
        assert!(contains(Comparator::AsciiCasemap, "x", ""));
    }
}
