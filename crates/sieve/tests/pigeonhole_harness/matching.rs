//! The testsuite's own tests' arguments and match types (`:is`, `:contains`, `:matches`,
//! `:value`, `:count`), as Pigeonhole's `test_result_*` and `test_message` use them.

use std::collections::BTreeMap;

use sieve::extension::Value;

pub(crate) fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::Strings(s) => s.clone(),
        Value::Number(n) => vec![n.to_string()],
        Value::Tag(t) => vec![format!(":{t}")],
    }
}

/// A registered test's arguments: tags (with their value) and positionals.
#[derive(Default, Debug)]
pub(crate) struct Args {
    pub(crate) tags: BTreeMap<String, Option<Value>>,
    pub(crate) positional: Vec<Value>,
}

impl Args {
    pub(crate) fn parse(args: &[Value]) -> Args {
        let mut out = Args::default();
        let mut it = args.iter().peekable();
        while let Some(a) = it.next() {
            match a {
                Value::Tag(t) => {
                    let takes = matches!(
                        t.as_str(),
                        "index"
                            | "comparator"
                            | "count"
                            | "value"
                            | "folder"
                            | "extension"
                            | "mailbox"
                    );
                    let value = if takes { it.next().cloned() } else { None };
                    out.tags.insert(t.clone(), value);
                }
                other => out.positional.push(other.clone()),
            }
        }
        out
    }
    pub(crate) fn tag_str(&self, name: &str) -> Option<String> {
        self.tags
            .get(name)
            .and_then(|v| v.as_ref())
            .and_then(|v| strings(v).into_iter().next())
    }
    pub(crate) fn index(&self) -> Option<usize> {
        match self.tags.get("index") {
            Some(Some(Value::Number(n))) => Some(*n as usize),
            _ => None,
        }
    }
    pub(crate) fn string(&self, i: usize) -> String {
        self.positional
            .get(i)
            .map(|v| strings(v).into_iter().next().unwrap_or_default())
            .unwrap_or_default()
    }
    pub(crate) fn list(&self, i: usize) -> Vec<String> {
        self.positional.get(i).map(strings).unwrap_or_default()
    }
}

/// `:matches` glob (`*`, `?`, `\` escapes).
pub(crate) fn glob(pattern: &[char], value: &[char], fold: bool) -> bool {
    let eq = |a: char, b: char| {
        if fold {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    match pattern.first() {
        None => value.is_empty(),
        Some('*') => (0..=value.len()).any(|i| glob(&pattern[1..], &value[i..], fold)),
        Some('?') => !value.is_empty() && glob(&pattern[1..], &value[1..], fold),
        Some('\\') if pattern.len() > 1 => {
            !value.is_empty() && eq(pattern[1], value[0]) && glob(&pattern[2..], &value[1..], fold)
        }
        Some(&c) => !value.is_empty() && eq(c, value[0]) && glob(&pattern[1..], &value[1..], fold),
    }
}

pub(crate) fn relation(rel: &str, ord: std::cmp::Ordering) -> bool {
    use std::cmp::Ordering::*;
    match rel.to_ascii_lowercase().as_str() {
        "gt" => ord == Greater,
        "ge" => ord != Less,
        "lt" => ord == Less,
        "le" => ord != Greater,
        "eq" => ord == Equal,
        "ne" => ord != Equal,
        _ => false,
    }
}

pub(crate) fn numeric(s: &str) -> Option<u64> {
    let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// A match test over `values` with `keys`, as the match-type and comparator tags say
/// (`default_fold`: i;ascii-casemap by default instead of i;octet).
pub(crate) fn match_values(
    args: &Args,
    values: &[String],
    keys: &[String],
    default_fold: bool,
) -> bool {
    let comparator = args.tag_str("comparator");
    let fold = match comparator.as_deref() {
        Some("i;ascii-casemap") => true,
        Some(_) => false,
        None => default_fold,
    };
    let numeric_cmp = comparator.as_deref() == Some("i;ascii-numeric");
    if let Some(rel) = args.tag_str("count") {
        let n = values.len() as u64;
        return keys
            .iter()
            .any(|k| numeric(k).is_some_and(|k| relation(&rel, n.cmp(&k))));
    }
    let cmp = |v: &str, k: &str| -> std::cmp::Ordering {
        if numeric_cmp {
            match (numeric(v), numeric(k)) {
                (Some(a), Some(b)) => a.cmp(&b),
                (None, None) => std::cmp::Ordering::Equal,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some(_), None) => std::cmp::Ordering::Less,
            }
        } else if fold {
            v.to_ascii_lowercase().cmp(&k.to_ascii_lowercase())
        } else {
            v.cmp(k)
        }
    };
    values.iter().any(|v| {
        keys.iter().any(|k| {
            if let Some(rel) = args.tag_str("value") {
                relation(&rel, cmp(v, k))
            } else if args.tags.contains_key("contains") {
                if fold {
                    v.to_ascii_lowercase().contains(&k.to_ascii_lowercase())
                } else {
                    v.contains(k.as_str())
                }
            } else if args.tags.contains_key("matches") {
                let p: Vec<char> = k.chars().collect();
                let s: Vec<char> = v.chars().collect();
                glob(&p, &s, fold)
            } else {
                cmp(v, k) == std::cmp::Ordering::Equal
            }
        })
    })
}
