//! A message's header fields, found the way both directions need them: to send each field to
//! a filter (`SMFIC_HEADER`) and to apply the filter's header changes to the same fields.

/// One header field: its name and the whole field, folded lines and line ends included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Field<'a> {
    pub(crate) name: &'a [u8],
    pub(crate) raw: &'a [u8],
}

/// A message cut into its header fields, the empty line after them, and the body.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Split<'a> {
    pub(crate) fields: Vec<Field<'a>>,
    /// The empty line (`\r\n`) that ends the header section; empty when the message ends
    /// inside its header or a line that is no field starts its body.
    pub(crate) separator: &'a [u8],
    pub(crate) body: &'a [u8],
}

/// Cuts a message. A field starts with a name (printable US-ASCII but the colon), optional
/// spaces or tabs and a colon (RFC 5322 2.2, the obsolete space before the colon of 4.5.3
/// included, as Postfix's is_header() accepts it); a line starting with a space or tab
/// continues it. The header section ends at the first empty line, or at the first line that
/// is neither, which begins the body.
pub(crate) fn split(message: &[u8]) -> Split<'_> {
    fn close<'a>(fields: &mut Vec<Field<'a>>, name: Option<&'a [u8]>, raw: &'a [u8]) {
        if let Some(name) = name {
            fields.push(Field { name, raw });
        }
    }
    let mut fields: Vec<Field<'_>> = Vec::new();
    let mut field_start = 0;
    let mut position = 0;
    let mut name: Option<&[u8]> = None;
    loop {
        let rest = &message[position..];
        if rest.is_empty() {
            close(&mut fields, name, &message[field_start..position]);
            return Split {
                fields,
                separator: b"",
                body: b"",
            };
        }
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .map_or(message.len(), |i| position + i + 1);
        let line = &message[position..end];
        if line == b"\r\n" || line == b"\n" {
            close(&mut fields, name, &message[field_start..position]);
            return Split {
                fields,
                separator: line,
                body: &message[end..],
            };
        }
        if name.is_some() && matches!(line[0], b' ' | b'\t') {
            position = end;
            continue;
        }
        close(&mut fields, name, &message[field_start..position]);
        name = field_name(line);
        if name.is_none() {
            return Split {
                fields,
                separator: b"",
                body: &message[position..],
            };
        }
        field_start = position;
        position = end;
    }
}

/// The name of the field this line starts, if it starts one.
pub(crate) fn field_name(line: &[u8]) -> Option<&[u8]> {
    let length = line
        .iter()
        .position(|&b| !(33..=126).contains(&b) || b == b':')?;
    let after = line[length..]
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .map(|i| line[length + i])?;
    (length > 0 && after == b':').then(|| &line[..length])
}

impl Field<'_> {
    /// The value as a filter gets it (milter8.c `milter8_header`): what follows the colon,
    /// without the one space after it unless `leading_space`, folded lines joined by LF (as
    /// Sendmail sends them), without the final line end.
    pub(crate) fn value_for_filter(&self, leading_space: bool) -> Vec<u8> {
        let colon = self
            .raw
            .iter()
            .position(|&b| b == b':')
            .map_or(self.raw.len(), |i| i + 1);
        let mut value = &self.raw[colon..];
        if !leading_space && value.first() == Some(&b' ') {
            value = &value[1..];
        }
        let value = value.strip_suffix(b"\n").unwrap_or(value);
        let value = value.strip_suffix(b"\r").unwrap_or(value);
        let mut out = Vec::with_capacity(value.len());
        let mut bytes = value.iter().peekable();
        while let Some(&byte) = bytes.next() {
            if byte == b'\r' && bytes.peek() == Some(&&b'\n') {
                continue;
            }
            out.push(byte);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_folds_separator_and_body() {
        let message = b"From: a@example.org\r\nSubject: one\r\n two\r\nTo : b\r\n\r\nbody\r\n";
        let split = split(message);
        let names: Vec<&[u8]> = split.fields.iter().map(|f| f.name).collect();
        assert_eq!(names, vec![&b"From"[..], b"Subject", b"To"]);
        assert_eq!(split.fields[1].raw, b"Subject: one\r\n two\r\n");
        assert_eq!(split.separator, b"\r\n");
        assert_eq!(split.body, b"body\r\n");
        assert_eq!(split.fields[1].value_for_filter(false), b"one\n two");
        assert_eq!(split.fields[1].value_for_filter(true), b" one\n two");
        assert_eq!(split.fields[2].value_for_filter(false), b"b");
    }

    #[test]
    fn a_line_that_is_no_field_starts_the_body() {
        let split = split(b"Subject: x\r\nnot a field\r\nmore\r\n");
        assert_eq!(split.fields.len(), 1);
        assert_eq!(split.separator, b"");
        assert_eq!(split.body, b"not a field\r\nmore\r\n");
    }

    #[test]
    fn header_only_and_empty_messages() {
        let split_header = split(b"Subject: x\r\nTo: y");
        assert_eq!(split_header.fields.len(), 2);
        assert_eq!(split_header.fields[1].raw, b"To: y");
        assert_eq!(split_header.body, b"");
        let empty = split(b"");
        assert!(empty.fields.is_empty() && empty.body.is_empty());
        let only_body = split(b"\r\nbody");
        assert!(only_body.fields.is_empty());
        assert_eq!(only_body.body, b"body");
        let continuation_first = split(b" x: y\r\n\r\n");
        assert!(continuation_first.fields.is_empty());
        assert_eq!(continuation_first.body, b" x: y\r\n\r\n");
    }

    #[test]
    fn field_names() {
        assert_eq!(field_name(b"Subject: x"), Some(&b"Subject"[..]));
        assert_eq!(field_name(b"X-A\t:x"), Some(&b"X-A"[..]));
        assert_eq!(field_name(b"X-A"), None);
        assert_eq!(field_name(b": x"), None);
        assert_eq!(field_name(b"Bad name: x"), None);
    }
}
