//! Strings at compile time: encoded characters (RFC 5228 2.4.2.4) and variable references
//! (RFC 5229 3) cut into a [`Str`]; and the `set` modifiers (RFC 5229 4.1).

use std::collections::HashMap;

use crate::error::CompileError;
use crate::ir::{Modifier, Part, Str, VarRef};
use crate::lexer::Pos;

/// How the script's variable names map to references while compiling.
#[derive(Debug, Default)]
pub(crate) struct VarScope {
    /// Local variable names (lower-cased) and their slots.
    pub(crate) locals: HashMap<String, usize>,
    /// Names declared `global` (RFC 6609 3.5), lower-cased.
    pub(crate) globals: Vec<String>,
    /// Whether the `global.` namespace is known (include required).
    pub(crate) include: bool,
}

impl VarScope {
    /// Resolves a variable name (already checked for syntax), lower-cased.
    pub(crate) fn resolve(&mut self, name: &str, pos: Pos) -> Result<VarRef, CompileError> {
        let name = name.to_ascii_lowercase();
        if let Some(rest) = name.strip_prefix("global.") {
            if !self.include {
                return Err(
                    pos.error("the variable namespace \"global\" requires \"include\" in require")
                );
            }
            return Ok(VarRef::Global(rest.to_string()));
        }
        if name.contains('.') {
            return Err(pos.error(format!("unknown variable namespace in \"{name}\"")));
        }
        if self.globals.contains(&name) {
            return Ok(VarRef::Global(name));
        }
        let next = self.locals.len();
        Ok(VarRef::Local(*self.locals.entry(name).or_insert(next)))
    }
}

/// Whether `s` is an identifier (RFC 5228 8.1).
pub(crate) fn is_identifier(s: &str) -> bool {
    let mut chars = s.bytes();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Whether `s` is a variable name for `set` and friends: an identifier, or `global.`
/// followed by one (RFC 5229 3, RFC 6609 3.5).
pub(crate) fn is_variable_name(s: &str) -> bool {
    match s.split_once('.') {
        None => is_identifier(s),
        Some((ns, rest)) => is_identifier(ns) && rest.split('.').all(is_identifier),
    }
}

/// Cuts a string literal into a [`Str`]: `${hex:..}`/`${unicode:..}` decoded first when
/// `encoded` (RFC 5228 2.4.2.4), then `${name}` and `${N}` in the decoded text resolved
/// when `vars` is given (RFC 5229 3: "dear${hex:20 24 7b 4e}ame}" is "dear ${Name}",
/// which then expands the variable).
pub(crate) fn compile_string(
    s: &str,
    encoded: bool,
    vars: Option<&mut VarScope>,
    pos: Pos,
) -> Result<Str, CompileError> {
    if !s.contains("${") {
        return Ok(Str::Const(s.to_string()));
    }
    let decoded;
    let s = if encoded {
        decoded = decode_encoded(s, pos)?;
        if !decoded.contains("${") {
            return Ok(Str::Const(decoded));
        }
        decoded.as_str()
    } else {
        s
    };
    let mut vars = vars;
    let mut parts: Vec<Part> = Vec::new();
    let mut lit = String::new();
    let mut rest = s;
    while let Some(at) = rest.find("${") {
        lit.push_str(&rest[..at]);
        let tail = &rest[at..];
        // Only name characters may stand between "${" and "}": scanning stops at the
        // first other one, so scans never overlap and the whole pass stays linear.
        let name_len = tail.as_bytes()[2..]
            .iter()
            .position(|&b| !(b.is_ascii_alphanumeric() || b == b'_' || b == b'.'))
            .unwrap_or(tail.len() - 2);
        if let Some(scope) = vars.as_deref_mut()
            && tail.as_bytes().get(2 + name_len) == Some(&b'}')
        {
            let end = 2 + name_len;
            let name = &tail[2..end];
            if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) {
                if !lit.is_empty() {
                    parts.push(Part::Lit(std::mem::take(&mut lit)));
                }
                let n = name.trim_start_matches('0');
                let n = if n.is_empty() {
                    0
                } else {
                    n.parse().unwrap_or(usize::MAX)
                };
                parts.push(Part::Match(n));
                rest = &tail[end + 1..];
                continue;
            }
            if is_variable_name(name) {
                if !lit.is_empty() {
                    parts.push(Part::Lit(std::mem::take(&mut lit)));
                }
                parts.push(Part::Var(scope.resolve(name, pos)?));
                rest = &tail[end + 1..];
                continue;
            }
        }
        lit.push('$');
        rest = &tail[1..];
    }
    lit.push_str(rest);
    if parts.is_empty() {
        return Ok(Str::Const(lit));
    }
    if !lit.is_empty() {
        parts.push(Part::Lit(lit));
    }
    Ok(Str::Template(parts))
}

/// RFC 5228 2.4.2.4: `s` with its encoded-character sequences decoded (in one pass: what
/// they produce is not decoded again).
fn decode_encoded(s: &str, pos: Pos) -> Result<String, CompileError> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some((decoded, used)) = encoded_character(tail, pos)? {
            out.push_str(&decoded);
            rest = &tail[used..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// RFC 5228 2.4.2.4: at `tail` (which starts with "${"), an encoded-character sequence;
/// its decoded text and length, or None when it is not one (then it stays as written).
fn encoded_character(tail: &str, pos: Pos) -> Result<Option<(String, usize)>, CompileError> {
    let starts = |prefix: &[u8]| {
        tail.as_bytes()
            .get(..prefix.len())
            .is_some_and(|b| b.eq_ignore_ascii_case(prefix))
    };
    let (unicode, skip) = if starts(b"${hex:") {
        (false, 6)
    } else if starts(b"${unicode:") {
        (true, 10)
    } else {
        return Ok(None);
    };
    // Only hex digits and blanks may follow (the scan stops at anything else).
    let body_len = tail.as_bytes()[skip..]
        .iter()
        .position(|&b| !(b.is_ascii_hexdigit() || matches!(b, b' ' | b'\t' | b'\r' | b'\n')))
        .unwrap_or(tail.len() - skip);
    let end = skip + body_len;
    if tail.as_bytes().get(end) != Some(&b'}') {
        return Ok(None);
    }
    let body = &tail[skip..end];
    let blank = |c: char| matches!(c, ' ' | '\t' | '\r' | '\n');
    let items: Vec<&str> = body.split(blank).filter(|s| !s.is_empty()).collect();
    if items.is_empty()
        || !items
            .iter()
            .all(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Ok(None);
    }
    if unicode {
        let mut out = String::new();
        for item in items {
            let trimmed = item.trim_start_matches('0');
            let value = if trimmed.len() > 6 {
                None
            } else {
                u32::from_str_radix(if trimmed.is_empty() { "0" } else { trimmed }, 16).ok()
            };
            match value.and_then(char::from_u32) {
                Some(c) => out.push(c),
                None => {
                    return Err(pos.error(format!(
                        "${{unicode:{item}}} is not a Unicode scalar value (RFC 5228 2.4.2.4)"
                    )));
                }
            }
        }
        Ok(Some((out, end + 1)))
    } else {
        if items.iter().any(|h| h.len() > 2) {
            return Ok(None);
        }
        let bytes: Vec<u8> = items
            .iter()
            .filter_map(|h| u8::from_str_radix(h, 16).ok())
            .collect();
        Ok(Some((
            String::from_utf8_lossy(&bytes).into_owned(),
            end + 1,
        )))
    }
}

/// Applies `set` modifiers (already sorted by precedence, highest first).
pub(crate) fn apply_modifiers(value: String, modifiers: &[Modifier]) -> String {
    let mut value = value;
    for m in modifiers {
        value = match m {
            Modifier::Lower => value.to_lowercase(),
            Modifier::Upper => value.to_uppercase(),
            Modifier::LowerFirst => first_char(&value, true),
            Modifier::UpperFirst => first_char(&value, false),
            Modifier::QuoteWildcard => {
                let mut out = String::with_capacity(value.len());
                for c in value.chars() {
                    if matches!(c, '*' | '?' | '\\') {
                        out.push('\\');
                    }
                    out.push(c);
                }
                out
            }
            Modifier::QuoteRegex => regex::escape(&value),
            Modifier::EncodeUrl => {
                // RFC 5435 4.2: percent-encode all but unreserved characters (RFC 3986).
                let mut out = String::with_capacity(value.len());
                for b in value.bytes() {
                    if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                        out.push(b as char);
                    } else {
                        out.push_str(&format!("%{b:02X}"));
                    }
                }
                out
            }
            Modifier::Length => value.chars().count().to_string(),
        };
    }
    value
}

fn first_char(s: &str, lower: bool) -> String {
    let mut chars = s.chars();
    match chars.next() {
        None => String::new(),
        Some(c) => {
            let mut out: String = if lower {
                c.to_lowercase().collect()
            } else {
                c.to_uppercase().collect()
            };
            out.push_str(chars.as_str());
            out
        }
    }
}

/// Cuts `s` to at most `max` bytes on a character boundary (RFC 5229 5 allows
/// truncating values).
pub(crate) fn truncate(s: &mut String, max: usize) {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Pos {
        let _ = s;
        Pos { line: 1, column: 1 }
    }

    fn c(s: &str, enc: bool) -> Result<Str, CompileError> {
        compile_string(s, enc, None, p(s))
    }

    // RFC 5228 2.4.2.4
    #[test]
    fn encoded_characters() {
        let s = c("$${hex:24 24}", true).unwrap();
        assert_eq!(s.as_const(), Some("$$$"));
        assert_eq!(c("${hex:40}", false).unwrap().as_const(), Some("${hex:40}"));
        assert_eq!(
            c("${unicode:263a}", true).unwrap().as_const(),
            Some("\u{263a}")
        );
        assert_eq!(
            c("${Unicode: 48 49 }", true).unwrap().as_const(),
            Some("HI")
        );
        assert!(c("${unicode:D800}", true).is_err());
        assert!(c("${unicode:110000}", true).is_err());
        assert_eq!(c("${hex:xy}", true).unwrap().as_const(), Some("${hex:xy}"));
        assert_eq!(c("${hex:}", true).unwrap().as_const(), Some("${hex:}"));
        // Decoded once: what a sequence produces is not decoded again.
        assert_eq!(
            c("${hex:24 7b}hex:41}", true).unwrap().as_const(),
            Some("${hex:41}")
        );
    }

    // RFC 5228 2.4.2.4 and RFC 5229 3: encoded characters are decoded before variables
    // are substituted, so "dear${hex:20 24 7b 4e}ame}" is "dear ${Name}" and the
    // reference it forms is expanded at run time.
    #[test]
    fn encoded_characters_before_variables() {
        let mut scope = VarScope::default();
        let t =
            compile_string("dear${hex:20 24 7b 4e}ame}", true, Some(&mut scope), p("")).unwrap();
        match t {
            Str::Template(parts) => {
                assert!(matches!(&parts[0], Part::Lit(s) if s == "dear "));
                assert!(matches!(&parts[1], Part::Var(VarRef::Local(0))));
                assert_eq!(parts.len(), 2);
            }
            Str::Const(_) => panic!("expected a template"),
        }
        assert!(scope.locals.contains_key("name"));
        // Without variables the decoded text stays as it is.
        assert_eq!(
            c("dear${hex:20 24 7b 4e}ame}", true).unwrap().as_const(),
            Some("dear ${Name}")
        );
    }

    // RFC 5229 3 (the examples of what stays unchanged)
    #[test]
    fn variable_references() {
        let mut scope = VarScope::default();
        let t = compile_string("&%${}!", false, Some(&mut scope), p("")).unwrap();
        assert_eq!(t.as_const(), Some("&%${}!"));
        let t = compile_string("${doh!}", false, Some(&mut scope), p("")).unwrap();
        assert_eq!(t.as_const(), Some("${doh!}"));
        let t = compile_string("${BAD${Company}", false, Some(&mut scope), p("")).unwrap();
        match t {
            Str::Template(parts) => {
                assert!(matches!(&parts[0], Part::Lit(s) if s == "${BAD"));
                assert!(matches!(&parts[1], Part::Var(VarRef::Local(0))));
            }
            Str::Const(_) => panic!("expected a template"),
        }
        assert!(compile_string("${foo.bar}", false, Some(&mut scope), p("")).is_err());
        assert!(compile_string("${global.x}", false, Some(&mut scope), p("")).is_err());
        let t = compile_string("${007}", false, Some(&mut scope), p("")).unwrap();
        assert!(matches!(t, Str::Template(ref v) if matches!(v[0], Part::Match(7))));
    }

    // RFC 5229 4.1
    #[test]
    fn modifiers() {
        assert_eq!(
            apply_modifiers("juMBlEd".into(), &[Modifier::Lower, Modifier::UpperFirst]),
            "Jumbled"
        );
        assert_eq!(
            apply_modifiers("a*b?c\\".into(), &[Modifier::QuoteWildcard]),
            "a\\*b\\?c\\\\"
        );
        assert_eq!(apply_modifiers("år".into(), &[Modifier::Length]), "2");
        assert_eq!(
            apply_modifiers("a b/é".into(), &[Modifier::EncodeUrl]),
            "a%20b%2F%C3%A9"
        );
        let mut s = "aé".to_string();
        truncate(&mut s, 2);
        assert_eq!(s, "a");
    }
}
