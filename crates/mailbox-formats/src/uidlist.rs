//! Dovecot's `dovecot-uidlist` (UIDVALIDITY, next UID, UID → file name) and
//! `dovecot-keywords` (keyword letter → name).
//!
//! `dovecot-uidlist`, version 3 (Dovecot 1.1 and later):
//!
//! ```text
//! 3 V1275660208 N25022 G3085f01b7f11094c501100008c4a11c1
//! 25006 :1276528487.M364837P9451.kurkku,S=1355,W=1394:2,
//! 25017 W2481 :1276533073.M242911P3632.kurkku:2,F
//! ```
//!
//! The header's fields are a letter and a value, in any order; a record is a UID, optional
//! fields, and after ` :` the last known file name (its flags may be stale: only the base,
//! up to the first `:`, identifies the file). Version 1 (also Courier's `courierimapuiddb`)
//! is `1 <uidvalidity> <nextuid>` and `<uid> <filename>`; version 2 puts a flags field
//! between them.
//!
//! `dovecot-keywords` is `<index> <name>` per line; index 0 is the letter `a`.

use std::collections::BTreeMap;

/// A parsed `dovecot-uidlist`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Uidlist {
    pub version: u32,
    pub uidvalidity: u32,
    pub uidnext: u32,
    /// The mailbox GUID (version 3), kept as text.
    pub guid: Option<String>,
    /// File name base → UID.
    pub records: BTreeMap<String, u32>,
    /// Lines that did not parse, and duplicates, described.
    pub problems: Vec<String>,
}

/// The part of a maildir file name that does not change with its flags: up to the first `:`.
pub fn base_name(filename: &str) -> &str {
    filename.split(':').next().unwrap_or(filename)
}

fn number(s: &str) -> Option<u32> {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// Parses a `dovecot-uidlist` (or `courierimapuiddb`). A header that does not parse is an
/// error (the file gives no UIDVALIDITY); a record that does not parse is skipped and noted.
pub fn parse_uidlist(bytes: &[u8]) -> Result<Uidlist, String> {
    let text = String::from_utf8_lossy(bytes);
    let mut lines = text.lines();
    let header = lines.next().ok_or("empty uidlist")?;
    let mut parts = header.split_ascii_whitespace();
    let version = parts.next().and_then(number).ok_or("no version number")?;
    let mut list = Uidlist {
        version,
        ..Uidlist::default()
    };
    match version {
        1 | 2 => {
            list.uidvalidity = parts.next().and_then(number).ok_or("no UIDVALIDITY")?;
            list.uidnext = parts.next().and_then(number).ok_or("no next UID")?;
        }
        3 => {
            let mut validity = None;
            let mut next = None;
            for field in parts {
                let (key, value) = field.split_at(field.chars().next().map_or(0, char::len_utf8));
                match key {
                    "V" => validity = number(value),
                    "N" => next = number(value),
                    "G" => list.guid = Some(value.to_string()),
                    _ => {}
                }
            }
            list.uidvalidity = validity.ok_or("no V (UIDVALIDITY) field")?;
            list.uidnext = next.ok_or("no N (next UID) field")?;
        }
        v => return Err(format!("uidlist version {v} is not known")),
    }
    for (n, line) in lines.enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let record = match version {
            3 => line.split_once(' ').and_then(|(uid, rest)| {
                let name = if let Some(name) = rest.strip_prefix(':') {
                    name
                } else {
                    rest.split_once(" :")?.1
                };
                Some((number(uid)?, name))
            }),
            _ => {
                let mut p = line.split_ascii_whitespace();
                let uid = p.next().and_then(number);
                if version == 2 {
                    p.next();
                }
                uid.zip(p.next())
            }
        };
        match record {
            Some((0, _)) => list.problems.push(format!("line {}: UID 0", n + 2)),
            Some((uid, name)) if !name.is_empty() => {
                let base = base_name(name).to_string();
                if let Some(first) = list.records.get(&base) {
                    list.problems.push(format!(
                        "line {}: {base} listed again (UID {uid}, first {first})",
                        n + 2
                    ));
                } else {
                    list.records.insert(base, uid);
                }
            }
            _ => list
                .problems
                .push(format!("line {}: not a uidlist record", n + 2)),
        }
    }
    Ok(list)
}

/// A version 3 `dovecot-uidlist`: header, then `uid :filename` per record, UID order.
pub fn write_uidlist(uidvalidity: u32, uidnext: u32, records: &[(u32, String)]) -> String {
    let mut out = format!("3 V{uidvalidity} N{uidnext}\n");
    for (uid, name) in records {
        out.push_str(&format!("{uid} :{name}\n"));
    }
    out
}

/// Parses `dovecot-keywords`: index → name, for indexes 0..26 (the letters a..z). Lines that
/// do not parse are skipped.
pub fn parse_keywords(bytes: &[u8]) -> BTreeMap<u8, String> {
    let text = String::from_utf8_lossy(bytes);
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((index, name)) = line.trim_end().split_once(' ') else {
            continue;
        };
        if let Some(i) = number(index).filter(|&i| i < 26)
            && !name.is_empty()
        {
            out.entry(i as u8).or_insert_with(|| name.to_string());
        }
    }
    out
}

/// `dovecot-keywords` for up to 26 names (letter `a` first).
pub fn write_keywords(names: &[String]) -> String {
    names
        .iter()
        .take(26)
        .enumerate()
        .map(|(i, n)| format!("{i} {n}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_3_as_dovecot_writes_it() {
        let text = b"3 V1275660208 N25022 G3085f01b7f11094c501100008c4a11c1\n\
            25006 :1276528487.M364837P9451.kurkku,S=1355,W=1394:2,\n\
            25017 W2481 :1276533073.M242911P3632.kurkku:2,F\n\
            garbage\n\
            25018 G1a2b :1276533074.M1P1.kurkku\n";
        let list = parse_uidlist(text).unwrap();
        assert_eq!(
            (list.version, list.uidvalidity, list.uidnext),
            (3, 1_275_660_208, 25_022)
        );
        assert_eq!(
            list.guid.as_deref(),
            Some("3085f01b7f11094c501100008c4a11c1")
        );
        assert_eq!(
            list.records["1276528487.M364837P9451.kurkku,S=1355,W=1394"],
            25_006
        );
        assert_eq!(list.records["1276533073.M242911P3632.kurkku"], 25_017);
        assert_eq!(list.records["1276533074.M1P1.kurkku"], 25_018);
        assert_eq!(list.problems.len(), 1);
        let written = write_uidlist(7, 9, &[(3, "a:2,S".into()), (8, "b:2,".into())]);
        let again = parse_uidlist(written.as_bytes()).unwrap();
        assert_eq!((again.uidvalidity, again.uidnext), (7, 9));
        assert_eq!(again.records["a"], 3);
        assert_eq!(again.records["b"], 8);
    }

    #[test]
    fn versions_1_and_2() {
        let list = parse_uidlist(b"1 1100000000 12\n3 1100000001.M1.host:2,S\n11 x\n").unwrap();
        assert_eq!((list.uidvalidity, list.uidnext), (1_100_000_000, 12));
        assert_eq!(list.records["1100000001.M1.host"], 3);
        let list = parse_uidlist(b"2 5 6\n4 0 name\n").unwrap();
        assert_eq!(list.records["name"], 4);
        assert!(parse_uidlist(b"").is_err());
        assert!(parse_uidlist(b"3 N5\n").is_err());
        assert!(parse_uidlist(b"9 V1 N2\n").is_err());
    }

    #[test]
    fn keywords_file() {
        let k = parse_keywords(b"0 $Junk\n1 NonJunk\nbad\n26 tooFar\n1 again\n");
        assert_eq!(k.len(), 2);
        assert_eq!(k[&1], "NonJunk");
        let names = vec!["$Junk".to_string(), "NonJunk".to_string()];
        assert_eq!(
            parse_keywords(write_keywords(&names).as_bytes())
                .into_values()
                .collect::<Vec<_>>(),
            names
        );
    }
}
