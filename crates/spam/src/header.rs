//! The header section as raw fields, without parsing the message: enough to find, read and
//! remove the `X-Spam-*` fields and to read the From field.

/// One header field: its name and its whole extent in the message (name, colon, value,
/// continuation lines, up to and including the final line end).
pub(crate) struct Field<'a> {
    pub(crate) name: &'a [u8],
    /// Everything after the colon, line ends included (empty for a line without a colon).
    pub(crate) value: &'a [u8],
    pub(crate) start: usize,
    pub(crate) end: usize,
}

/// The fields of the header section, which ends at the first empty line (RFC 5322 2.1).
/// Lines may end in CRLF or a bare LF. A line without a colon is a field with an empty value
/// and its whole line as the name, so that nothing is silently merged into a neighbour.
pub(crate) fn fields(message: &[u8]) -> impl Iterator<Item = Field<'_>> {
    let mut pos = 0;
    std::iter::from_fn(move || {
        let rest = message.get(pos..)?;
        if rest.is_empty() || rest.starts_with(b"\r\n") || rest.starts_with(b"\n") {
            return None;
        }
        let start = pos;
        let mut end = start + line_len(rest);
        // RFC 5322 2.2.3: a line starting with white space continues the field.
        while let Some(next) = message.get(end..)
            && matches!(next.first(), Some(b' ' | b'\t'))
        {
            end += line_len(next);
        }
        pos = end;
        let field = message.get(start..end)?;
        let first_line = &field[..line_len(field)];
        let (name, value) = match first_line.iter().position(|&b| b == b':') {
            Some(colon) => (trim_end(&field[..colon]), &field[colon + 1..]),
            None => (trim_end(field), &field[field.len()..]),
        };
        Some(Field {
            name,
            value,
            start,
            end,
        })
    })
}

/// The first field named `name` (case-insensitive, RFC 5322 1.2.2), its value unfolded
/// (RFC 5322 2.2.3) and trimmed, invalid UTF-8 replaced.
pub(crate) fn first_value(message: &[u8], name: &str) -> Option<String> {
    let field = fields(message).find(|f| f.name.eq_ignore_ascii_case(name.as_bytes()))?;
    let text = String::from_utf8_lossy(field.value);
    let unfolded: String = text.chars().filter(|c| *c != '\r' && *c != '\n').collect();
    Some(unfolded.trim().to_string())
}

/// The length of the first line of `bytes`, its LF included (all of `bytes` without one).
fn line_len(bytes: &[u8]) -> usize {
    memchr::memchr(b'\n', bytes).map_or(bytes.len(), |lf| lf + 1)
}

fn trim_end(bytes: &[u8]) -> &[u8] {
    let len = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(0, |last| last + 1);
    &bytes[..len]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_end_at_the_empty_line_and_keep_continuations() {
        let message = b"A: 1\r\nB: 2\r\n 3\r\nno colon\r\n\r\nC: body\r\n";
        let names: Vec<&[u8]> = fields(message).map(|f| f.name).collect();
        assert_eq!(names, [&b"A"[..], b"B", b"no colon"]);
        let b = fields(message).nth(1).expect("B");
        assert_eq!(&message[b.start..b.end], b"B: 2\r\n 3\r\n");
        assert_eq!(first_value(message, "b").as_deref(), Some("2 3"));
        assert_eq!(first_value(message, "C"), None);
    }

    #[test]
    fn bare_lf_and_no_body_work() {
        let message = b"A: 1\nB:2";
        let values: Vec<&[u8]> = fields(message).map(|f| f.value).collect();
        assert_eq!(values, [&b" 1\n"[..], b"2"]);
    }
}
