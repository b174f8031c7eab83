//! Writing XML: escaping and an indenting element writer. Element and attribute names come
//! from this crate; every value from outside goes through [`push_escaped`].

/// Appends `value` to `out` escaped for XML 1.0 character data and attribute values (in double
/// or single quotes). Characters XML 1.0 cannot carry at all, not even as character references
/// (the C0 controls other than tab and line feed, U+FFFE and U+FFFF; XML 1.0 section 2.2,
/// production `Char`), become U+FFFD. A carriage return is written as a reference so that a
/// parser's line-end normalisation (section 2.11) does not change it.
pub(crate) fn push_escaped(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\r' => out.push_str("&#13;"),
            '\t' | '\n' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
}

/// Spaces per nesting level.
const INDENT: usize = 2;

/// A document written element by element, indented, each element on its own line.
pub(crate) struct Writer {
    out: String,
    open: Vec<&'static str>,
}

impl Writer {
    /// A document starting with the XML declaration and `prolog` (written as it is: our own
    /// constant text, such as a DOCTYPE line).
    pub(crate) fn new(prolog: &str) -> Writer {
        let mut out = String::with_capacity(2048);
        out.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        out.push_str(prolog);
        Writer {
            out,
            open: Vec::new(),
        }
    }

    fn indent(&mut self) {
        for _ in 0..self.open.len() * INDENT {
            self.out.push(' ');
        }
    }

    fn start_tag(&mut self, name: &str, attributes: &[(&str, &str)]) {
        self.indent();
        self.out.push('<');
        self.out.push_str(name);
        for (key, value) in attributes {
            self.out.push(' ');
            self.out.push_str(key);
            self.out.push_str("=\"");
            push_escaped(&mut self.out, value);
            self.out.push('"');
        }
    }

    /// Opens element `name`; [`Writer::close`] closes it.
    pub(crate) fn open(&mut self, name: &'static str, attributes: &[(&str, &str)]) {
        self.start_tag(name, attributes);
        self.out.push_str(">\n");
        self.open.push(name);
    }

    /// Closes the innermost open element.
    pub(crate) fn close(&mut self) {
        let Some(name) = self.open.pop() else {
            debug_assert!(false, "close without open");
            return;
        };
        self.indent();
        self.out.push_str("</");
        self.out.push_str(name);
        self.out.push_str(">\n");
    }

    /// An element holding only `text`.
    pub(crate) fn leaf(&mut self, name: &str, text: &str) {
        self.leaf_with(name, &[], text);
    }

    /// An element with attributes holding only `text`.
    pub(crate) fn leaf_with(&mut self, name: &str, attributes: &[(&str, &str)], text: &str) {
        self.start_tag(name, attributes);
        self.out.push('>');
        push_escaped(&mut self.out, text);
        self.out.push_str("</");
        self.out.push_str(name);
        self.out.push_str(">\n");
    }

    /// An empty element, `<name/>`.
    pub(crate) fn empty(&mut self, name: &str) {
        self.start_tag(name, &[]);
        self.out.push_str("/>\n");
    }

    /// The document, every element closed.
    pub(crate) fn finish(mut self) -> String {
        while !self.open.is_empty() {
            self.close();
        }
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(value: &str) -> String {
        let mut out = String::new();
        push_escaped(&mut out, value);
        out
    }

    #[test]
    fn escapes_markup_and_replaces_what_xml_cannot_carry() {
        assert_eq!(
            escaped("<a & \"b\" 'c'>"),
            "&lt;a &amp; &quot;b&quot; &apos;c&apos;&gt;"
        );
        assert_eq!(
            escaped("a\u{0}b\u{1b}c\u{FFFF}"),
            "a\u{FFFD}b\u{FFFD}c\u{FFFD}"
        );
        assert_eq!(escaped("x\r\ny\tz"), "x&#13;\ny\tz");
        assert_eq!(escaped("Grüße 日本"), "Grüße 日本");
    }

    #[test]
    fn writer_nests_and_closes() {
        let mut writer = Writer::new("");
        writer.open("a", &[("k", "v\"")]);
        writer.leaf("b", "<x>");
        writer.empty("c");
        let text = writer.finish();
        assert_eq!(
            text,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<a k=\"v&quot;\">\n  <b>&lt;x&gt;</b>\n  <c/>\n</a>\n"
        );
    }
}
