//! Line endings and header fields.
//!
//! Maildir and mbox files hold messages with LF line endings (what Dovecot, Python's `mailbox`
//! and most Unix software write); the store holds what IMAP and SMTP carry, CRLF.
//! [`to_crlf`] turns every LF that has no CR before it into CRLF and changes nothing else (a CR
//! alone stays); [`to_lf`] turns every CRLF into LF. So a file without any CRLF comes back
//! from `to_lf(to_crlf(file))` byte for byte, and a file written with CRLF comes back with LF.

/// Every LF without a CR before it becomes CRLF; nothing else changes.
pub fn to_crlf(bytes: &[u8]) -> Vec<u8> {
    let bare = memchr::memchr_iter(b'\n', bytes)
        .filter(|&i| i == 0 || bytes[i - 1] != b'\r')
        .count();
    let mut out = Vec::with_capacity(bytes.len() + bare);
    let mut from = 0;
    for i in memchr::memchr_iter(b'\n', bytes) {
        if i == 0 || bytes[i - 1] != b'\r' {
            out.extend_from_slice(&bytes[from..i]);
            out.extend_from_slice(b"\r\n");
            from = i + 1;
        }
    }
    out.extend_from_slice(&bytes[from..]);
    out
}

/// Every CRLF becomes LF; nothing else changes (a CR alone stays).
pub fn to_lf(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut from = 0;
    for i in memchr::memchr_iter(b'\n', bytes) {
        if i > 0 && bytes[i - 1] == b'\r' {
            out.extend_from_slice(&bytes[from..i - 1]);
            out.push(b'\n');
            from = i + 1;
        }
    }
    out.extend_from_slice(&bytes[from..]);
    out
}

/// Where the header ends: `(end, body)`, `end` being the offset of the empty line that ends it
/// (or the length, if there is none) and `body` the offset just after that empty line.
pub fn split_header(message: &[u8]) -> (usize, usize) {
    let mut pos = 0;
    while pos < message.len() {
        let line_end = memchr::memchr(b'\n', &message[pos..]).map(|i| pos + i + 1);
        let end = line_end.unwrap_or(message.len());
        let line = &message[pos..end];
        if line == b"\n" || line == b"\r\n" {
            return (pos, end);
        }
        pos = end;
    }
    (message.len(), message.len())
}

/// One header field: its name and the byte range of all its lines (terminators included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field<'a> {
    pub name: &'a [u8],
    pub start: usize,
    pub end: usize,
}

impl Field<'_> {
    /// The value: after the colon, lines unfolded, surrounding white space trimmed.
    pub fn value(&self, message: &[u8]) -> Vec<u8> {
        let raw = &message[self.start..self.end];
        let after = memchr::memchr(b':', raw).map_or(raw.len(), |i| i + 1);
        let mut out: Vec<u8> = raw[after..]
            .iter()
            .copied()
            .filter(|&b| b != b'\r' && b != b'\n')
            .collect();
        while out.first().is_some_and(|b| b.is_ascii_whitespace()) {
            out.remove(0);
        }
        while out.last().is_some_and(|b| b.is_ascii_whitespace()) {
            out.pop();
        }
        out
    }
}

/// The header's fields in order. A line that is not a continuation starts a field; its name
/// is what comes before the colon (the whole line if there is none).
pub fn fields(message: &[u8]) -> Vec<Field<'_>> {
    let (header_end, _) = split_header(message);
    let mut out: Vec<Field<'_>> = Vec::new();
    let mut pos = 0;
    while pos < header_end {
        let end =
            memchr::memchr(b'\n', &message[pos..header_end]).map_or(header_end, |i| pos + i + 1);
        let line = &message[pos..end];
        let continuation = matches!(line.first(), Some(b' ' | b'\t'));
        match out.last_mut() {
            Some(f) if continuation => f.end = end,
            _ => {
                let name_end = memchr::memchr(b':', line).unwrap_or(line.len());
                let name = trim_end(&line[..name_end]);
                out.push(Field {
                    name,
                    start: pos,
                    end,
                });
            }
        }
        pos = end;
    }
    out
}

fn trim_end(mut s: &[u8]) -> &[u8] {
    while let Some((last, rest)) = s.split_last() {
        if last.is_ascii_whitespace() {
            s = rest;
        } else {
            break;
        }
    }
    s
}

/// The value of the first field called `name` (case-insensitive).
pub fn field_value(message: &[u8], name: &str) -> Option<Vec<u8>> {
    fields(message)
        .into_iter()
        .find(|f| f.name.eq_ignore_ascii_case(name.as_bytes()))
        .map(|f| f.value(message))
}

/// The message without the header fields named in `names` (case-insensitive), and those
/// fields as (lower-case name, value), in order.
pub fn remove_fields(message: &[u8], names: &[&str]) -> (Vec<u8>, Vec<(String, Vec<u8>)>) {
    let fields = fields(message);
    let mut removed = Vec::new();
    let mut out = Vec::with_capacity(message.len());
    let mut from = 0;
    for f in &fields {
        if names
            .iter()
            .any(|n| f.name.eq_ignore_ascii_case(n.as_bytes()))
        {
            out.extend_from_slice(&message[from..f.start]);
            from = f.end;
            removed.push((
                String::from_utf8_lossy(f.name).to_ascii_lowercase(),
                f.value(message),
            ));
        }
    }
    if removed.is_empty() {
        return (message.to_vec(), removed);
    }
    out.extend_from_slice(&message[from..]);
    (out, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_endings_convert_both_ways() {
        assert_eq!(to_crlf(b"a\nb\r\nc\rd\n"), b"a\r\nb\r\nc\rd\r\n");
        assert_eq!(to_crlf(b"\n\n"), b"\r\n\r\n");
        assert_eq!(to_crlf(b""), b"");
        assert_eq!(to_lf(b"a\r\nb\nc\r\r\n"), b"a\nb\nc\r\n");
        let file = b"Subject: x\n\nbody\rwith a CR\n".to_vec();
        assert_eq!(to_lf(&to_crlf(&file)), file);
    }

    #[test]
    fn headers_split_and_fields_are_found() {
        let m = b"From: a\nSubject: long\n  folded\nStatus: RO\n\nbody\nStatus: no\n";
        let (end, body) = split_header(m);
        assert_eq!(&m[body..], b"body\nStatus: no\n");
        assert_eq!(end, body - 1);
        let f = fields(m);
        assert_eq!(f.len(), 3);
        assert_eq!(f[1].value(m), b"long  folded");
        assert_eq!(field_value(m, "status").unwrap(), b"RO");
        let (rest, removed) = remove_fields(m, &["Status", "X-Status"]);
        assert_eq!(
            rest,
            b"From: a\nSubject: long\n  folded\n\nbody\nStatus: no\n"
        );
        assert_eq!(removed, vec![("status".to_string(), b"RO".to_vec())]);
        // No empty line: everything is header.
        assert_eq!(split_header(b"A: b\r\nC: d"), (10, 10));
        assert_eq!(split_header(b"\r\nbody"), (0, 2));
    }
}
