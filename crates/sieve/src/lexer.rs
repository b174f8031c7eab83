//! The lexer (RFC 5228 8.1): identifiers, tags, numbers with quantifiers, quoted and
//! multi-line strings, punctuation; hash and bracket comments are skipped.

use crate::error::CompileError;

/// Where a token starts: 1-based line and column (columns count characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Pos {
    pub(crate) line: u32,
    pub(crate) column: u32,
}

impl Pos {
    pub(crate) fn error(self, message: impl Into<String>) -> CompileError {
        CompileError {
            line: self.line,
            column: self.column,
            message: message.into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tok {
    Identifier(String),
    /// `:name`, without the colon, lower-cased (tags are case-insensitive, RFC 5228 2.6.2).
    Tag(String),
    Number(u64),
    /// A quoted or multi-line string, escapes and dot-stuffing undone (RFC 5228 2.4.2).
    Str(String),
    LBracket,
    RBracket,
    LParen,
    RParen,
    LBrace,
    RBrace,
    Comma,
    Semicolon,
}

/// The source cut into tokens, each with its position.
pub(crate) fn tokenize(source: &str) -> Result<Vec<(Tok, Pos)>, CompileError> {
    let mut lexer = Lexer {
        src: source.as_bytes(),
        text: source,
        at: 0,
        line: 1,
        column: 1,
    };
    let mut out = Vec::new();
    while let Some(token) = lexer.next_token()? {
        out.push(token);
    }
    Ok(out)
}

struct Lexer<'a> {
    src: &'a [u8],
    text: &'a str,
    at: usize,
    line: u32,
    column: u32,
}

impl Lexer<'_> {
    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            column: self.column,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.at).copied()
    }

    fn peek_at(&self, n: usize) -> Option<u8> {
        self.src.get(self.at + n).copied()
    }

    /// Advances one byte, keeping line and column (columns count UTF-8 characters).
    fn bump(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.at += 1;
        if b == b'\n' {
            self.line = self.line.saturating_add(1);
            self.column = 1;
        } else if b & 0xC0 != 0x80 {
            self.column = self.column.saturating_add(1);
        }
        Some(b)
    }

    fn skip_blanks_and_comments(&mut self) -> Result<(), CompileError> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\r' | b'\n') => {
                    self.bump();
                }
                Some(b'#') => {
                    while let Some(b) = self.bump() {
                        if b == b'\n' {
                            break;
                        }
                    }
                }
                Some(b'/') if self.peek_at(1) == Some(b'*') => {
                    let start = self.pos();
                    self.bump();
                    self.bump();
                    loop {
                        match self.bump() {
                            None => return Err(start.error("unterminated /* comment")),
                            Some(b'*') if self.peek() == Some(b'/') => {
                                self.bump();
                                break;
                            }
                            Some(_) => {}
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn next_token(&mut self) -> Result<Option<(Tok, Pos)>, CompileError> {
        self.skip_blanks_and_comments()?;
        let pos = self.pos();
        let Some(b) = self.peek() else {
            return Ok(None);
        };
        let tok = match b {
            b'[' => self.punct(Tok::LBracket),
            b']' => self.punct(Tok::RBracket),
            b'(' => self.punct(Tok::LParen),
            b')' => self.punct(Tok::RParen),
            b'{' => self.punct(Tok::LBrace),
            b'}' => self.punct(Tok::RBrace),
            b',' => self.punct(Tok::Comma),
            b';' => self.punct(Tok::Semicolon),
            b'"' => self.quoted(pos)?,
            b':' => {
                self.bump();
                match self.peek() {
                    Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                        Tok::Tag(self.identifier().to_ascii_lowercase())
                    }
                    _ => return Err(pos.error("a tag is ':' followed by an identifier")),
                }
            }
            b'0'..=b'9' => self.number(pos)?,
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let ident = self.identifier();
                if ident.eq_ignore_ascii_case("text") && self.peek() == Some(b':') {
                    self.bump();
                    self.multiline(pos)?
                } else {
                    Tok::Identifier(ident)
                }
            }
            _ => {
                let ch = self.text[self.at..].chars().next().unwrap_or('?');
                return Err(pos.error(format!("unexpected character {ch:?}")));
            }
        };
        Ok(Some((tok, pos)))
    }

    fn punct(&mut self, tok: Tok) -> Tok {
        self.bump();
        tok
    }

    fn identifier(&mut self) -> String {
        let start = self.at;
        while let Some(c) = self.peek() {
            if c.is_ascii_alphanumeric() || c == b'_' {
                self.bump();
            } else {
                break;
            }
        }
        self.text[start..self.at].to_string()
    }

    /// RFC 5228 2.4.1: digits, then an optional K, M or G (powers of two).
    fn number(&mut self, pos: Pos) -> Result<Tok, CompileError> {
        let mut value: u64 = 0;
        while let Some(c @ b'0'..=b'9') = self.peek() {
            self.bump();
            value = value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(c - b'0')))
                .ok_or_else(|| pos.error("number too large"))?;
        }
        let shift = match self.peek() {
            Some(b'k' | b'K') => 10,
            Some(b'm' | b'M') => 20,
            Some(b'g' | b'G') => 30,
            _ => 0,
        };
        if shift > 0 {
            self.bump();
            value = value
                .checked_mul(1u64 << shift)
                .ok_or_else(|| pos.error("number too large"))?;
        }
        if matches!(self.peek(), Some(c) if c.is_ascii_alphabetic() || c == b'_') {
            return Err(self.pos().error("unexpected letter after a number"));
        }
        Ok(Tok::Number(value))
    }

    /// RFC 5228 2.4.2: `\\` and `\"` are escapes; any other backslash is dropped. A line
    /// break in the string is CRLF in the value (a bare LF too), as in `text:` strings, so
    /// that the two forms of the same text are equal.
    fn quoted(&mut self, pos: Pos) -> Result<Tok, CompileError> {
        self.bump();
        let mut out: Vec<u8> = Vec::new();
        loop {
            match self.bump() {
                None => return Err(pos.error("unterminated quoted string")),
                Some(b'"') => break,
                Some(b'\\') => match self.bump() {
                    None => return Err(pos.error("unterminated quoted string")),
                    Some(c) => out.push(c),
                },
                Some(b'\n') if out.last() != Some(&b'\r') => out.extend_from_slice(b"\r\n"),
                Some(c) => out.push(c),
            }
        }
        Ok(Tok::Str(bytes_to_string(out)))
    }

    /// RFC 5228 2.4.2: `text:` then blanks or a hash comment, CRLF, lines up to a lone
    /// ".", a leading ".." standing for "." (dot-stuffing). Lines end in CRLF in the value.
    fn multiline(&mut self, pos: Pos) -> Result<Tok, CompileError> {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.bump();
        }
        if self.peek() == Some(b'#') {
            while let Some(b) = self.peek() {
                if b == b'\n' {
                    break;
                }
                self.bump();
            }
        }
        if self.peek() == Some(b'\r') {
            self.bump();
        }
        if self.bump() != Some(b'\n') {
            return Err(pos.error("text: must be followed by a line break"));
        }
        let mut out: Vec<u8> = Vec::new();
        loop {
            if self.peek().is_none() {
                return Err(pos.error("unterminated text: string (no line with a lone '.')"));
            }
            let start = self.at;
            while let Some(b) = self.peek() {
                if b == b'\n' {
                    break;
                }
                self.bump();
            }
            let mut line = &self.src[start..self.at];
            let had_newline = self.bump().is_some();
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            if line == b"." {
                break;
            }
            if !had_newline {
                return Err(pos.error("unterminated text: string (no line with a lone '.')"));
            }
            // RFC 5228 8.1 (multi-line-dotstart): "Remove a leading '.' if followed by
            // another '.'"; a line with one leading dot keeps it.
            if line.starts_with(b"..") {
                line = &line[1..];
            }
            out.extend_from_slice(line);
            out.extend_from_slice(b"\r\n");
        }
        Ok(Tok::Str(bytes_to_string(out)))
    }
}

fn bytes_to_string(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        tokenize(s).unwrap().into_iter().map(|(t, _)| t).collect()
    }

    // RFC 5228 2.4.1
    #[test]
    fn numbers_with_quantifiers() {
        assert_eq!(
            toks("1 2K 3m 1G"),
            vec![
                Tok::Number(1),
                Tok::Number(2048),
                Tok::Number(3 << 20),
                Tok::Number(1 << 30)
            ]
        );
        assert!(tokenize("99999999999999999999").is_err());
        assert!(tokenize("17179869184G").is_err());
    }

    // RFC 5228 2.3 and 2.4.2
    #[test]
    fn comments_and_strings() {
        assert_eq!(
            toks("# c\nif /* x\n y */ \"a\\\"b\\\\c\\d\""),
            vec![Tok::Identifier("if".into()), Tok::Str("a\"b\\cd".into())]
        );
        assert!(tokenize("/* never closed").is_err());
        assert!(tokenize("\"never closed").is_err());
    }

    // RFC 5228 2.4.2 (multi-line strings, dot-stuffing)
    #[test]
    fn multiline_strings() {
        assert_eq!(
            toks("text: # comment\r\nline 1\r\n..dot\r\n.\r\n;"),
            vec![Tok::Str("line 1\r\n.dot\r\n".into()), Tok::Semicolon]
        );
        assert_eq!(toks("text:\n.\n"), vec![Tok::Str(String::new())]);
        assert!(tokenize("text:\nno end").is_err());
    }

    #[test]
    fn positions() {
        let t = tokenize("if true {\n  keep;\n}").unwrap();
        assert_eq!(t[3].1, Pos { line: 2, column: 3 });
        let e = tokenize("keep;\n  @").unwrap_err();
        assert_eq!((e.line, e.column), (2, 3));
    }
}
