//! The hand parser for responses imap-codec refuses: FETCH with items it cannot read,
//! ESEARCH, odd status codes.

use super::*;

/// `* ...` / `tag ...` responses imap-codec rejected: FETCH with items it cannot read
/// (a partial `BINARY[1]<0> ~{n}`, NUL in a `{n}` literal), ESEARCH, odd status codes.
pub(super) fn fallback(bytes: &[u8]) -> Result<Resp, Error> {
    let mut p = Cursor { b: bytes, i: 0 };
    let first = p.token();
    if first != b"*" {
        // Tagged status (RFC 3501 7.1): tag SP ("OK" / "NO" / "BAD") SP resp-text.
        p.sp()?;
        let cond = p.token().to_ascii_uppercase();
        let kind = match cond.as_slice() {
            b"OK" => Kind::Ok,
            b"NO" => Kind::No,
            b"BAD" => Kind::Bad,
            _ => return Err(p.error("tagged response without OK/NO/BAD")),
        };
        let text = resp_text(bytes);
        return Ok(Resp::Status {
            tag: Some(String::from_utf8_lossy(first).into_owned()),
            kind,
            code: code_of(&text).map(str::to_string),
            text,
        });
    }
    p.sp()?;
    let word = p.token().to_ascii_uppercase();
    match word.as_slice() {
        b"OK" | b"NO" | b"BAD" => {
            let text = resp_text(bytes);
            Ok(Resp::Status {
                tag: None,
                kind: match word.as_slice() {
                    b"OK" => Kind::Ok,
                    b"NO" => Kind::No,
                    _ => Kind::Bad,
                },
                code: code_of(&text).map(str::to_string),
                text,
            })
        }
        b"BYE" => Ok(Resp::Bye(resp_text(bytes))),
        b"ESEARCH" => esearch(&mut p),
        w if !w.is_empty() && w.iter().all(u8::is_ascii_digit) => {
            let seq = parse_u32(w).ok_or_else(|| p.error("bad message number"))?;
            p.sp()?;
            let what = p.token().to_ascii_uppercase();
            if what == b"FETCH" {
                p.sp()?;
                fetch(&mut p, seq)
            } else {
                tracing::debug!("ignoring unparsed response {}", snippet(bytes));
                Ok(Resp::Other)
            }
        }
        _ => {
            tracing::debug!("ignoring unparsed response {}", snippet(bytes));
            Ok(Resp::Other)
        }
    }
}

/// `msg-att` list of a FETCH response (RFC 3501 7.4.2, RFC 3516 4.2).
pub(super) fn fetch(p: &mut Cursor<'_>, seq: u32) -> Result<Resp, Error> {
    p.expect(b'(')?;
    let mut uid = None;
    let mut data = None;
    let mut meta: Option<Box<Meta>> = None;
    loop {
        p.skip_spaces();
        if p.peek() == Some(b')') {
            p.i += 1;
            break;
        }
        let name = p.item_name()?.to_ascii_uppercase();
        p.sp()?;
        if name == b"FLAGS" || name == b"MODSEQ" {
            // A list of atoms (flags begin with `\\`, which `value` does not keep).
            let list = p.atom_list()?;
            let meta = meta.get_or_insert_default();
            if name == b"FLAGS" {
                meta.flags = Some(list);
            } else {
                meta.modseq = Some(
                    list.first()
                        .and_then(|n| n.parse().ok())
                        .ok_or_else(|| p.error("bad MODSEQ"))?,
                );
            }
            continue;
        }
        let value = p.value()?;
        if name == b"INTERNALDATE" {
            let Value::Bytes(date) = value else {
                return Err(p.error("bad INTERNALDATE"));
            };
            meta.get_or_insert_default().internal_date = Some(
                internal_date(&String::from_utf8_lossy(&date))
                    .ok_or_else(|| p.error("bad INTERNALDATE"))?,
            );
            continue;
        }
        if name == b"UID" {
            uid = match value {
                Value::Atom(a) => parse_u32(a),
                _ => None,
            };
            if uid.is_none() {
                return Err(p.error("bad UID"));
            }
        } else if name.starts_with(b"BODY[") || name.starts_with(b"BINARY[") {
            data = match value {
                Value::Bytes(b) => Some(Bytes::from(b)),
                _ => None,
            };
        }
    }
    p.end()?;
    Ok(Resp::Fetch {
        seq,
        uid,
        data,
        meta,
    })
}

/// `* ESEARCH [search-correlator] [SP "UID"] *(SP search-return-data)` (RFC 4731 3.1).
fn esearch(p: &mut Cursor<'_>) -> Result<Resp, Error> {
    let mut uids = Vec::new();
    loop {
        p.skip_spaces();
        if p.at_end() {
            break;
        }
        if p.peek() == Some(b'(') {
            p.value()?; // (TAG "a1")
            continue;
        }
        let key = p.token().to_ascii_uppercase();
        if key.is_empty() {
            return Err(p.error("bad ESEARCH"));
        }
        if key == b"UID" {
            continue;
        }
        p.sp()?;
        let value = p.value()?;
        if key == b"ALL"
            && let Value::Atom(set) = value
        {
            let set = std::str::from_utf8(set).map_err(|_| p.error("bad ESEARCH ALL"))?;
            uids.extend(
                crate::seqset::expand(set, 100_000_000)
                    .ok_or_else(|| p.error("bad ESEARCH ALL"))?,
            );
        }
    }
    Ok(Resp::Search(uids))
}

enum Value<'a> {
    Atom(&'a [u8]),
    Bytes(Vec<u8>),
    Nil,
    List,
}

pub(super) struct Cursor<'a> {
    pub(super) b: &'a [u8],
    pub(super) i: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn at_end(&self) -> bool {
        matches!(&self.b[self.i..], b"" | b"\n" | b"\r\n")
    }

    fn end(&mut self) -> Result<(), Error> {
        self.skip_spaces();
        if self.at_end() {
            Ok(())
        } else {
            Err(self.error("trailing data"))
        }
    }

    fn error(&self, what: &str) -> Error {
        Error::Protocol(format!(
            "{what} at byte {} of response {}",
            self.i,
            snippet(self.b)
        ))
    }

    pub(super) fn sp(&mut self) -> Result<(), Error> {
        self.expect(b' ')
    }

    fn expect(&mut self, c: u8) -> Result<(), Error> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(self.error(&format!("expected {:?}", c as char)))
        }
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.i += 1;
        }
    }

    /// Bytes up to SP, CR, LF, `(`, `)`, `[` or `{`.
    pub(super) fn token(&mut self) -> &'a [u8] {
        let start = self.i;
        while let Some(c) = self.peek() {
            if matches!(c, b' ' | b'\r' | b'\n' | b'(' | b')' | b'[' | b'{' | b'"') {
                break;
            }
            self.i += 1;
        }
        &self.b[start..self.i]
    }

    /// A fetch item name such as `UID`, `BODY[HEADER.FIELDS (X-A)]<0>`, `BINARY[1]`.
    fn item_name(&mut self) -> Result<&'a [u8], Error> {
        let start = self.i;
        self.token();
        if self.peek() == Some(b'[') {
            // Section specs may hold spaces and parentheses but no `]`.
            let close = self.b[self.i..]
                .iter()
                .position(|&c| c == b']')
                .ok_or_else(|| self.error("unterminated section"))?;
            self.i += close + 1;
            if self.peek() == Some(b'<') {
                let close = self.b[self.i..]
                    .iter()
                    .position(|&c| c == b'>')
                    .ok_or_else(|| self.error("unterminated origin"))?;
                self.i += close + 1;
            }
        }
        if self.i == start {
            return Err(self.error("expected a fetch item"));
        }
        Ok(&self.b[start..self.i])
    }

    /// nstring / literal8 / number / atom / parenthesized list (skipped).
    fn value(&mut self) -> Result<Value<'a>, Error> {
        match self.peek() {
            Some(b'"') => self.quoted().map(Value::Bytes),
            Some(b'{') => self.literal().map(Value::Bytes),
            Some(b'~') if self.b.get(self.i + 1) == Some(&b'{') => {
                self.i += 1;
                self.literal().map(Value::Bytes)
            }
            Some(b'(') => {
                self.i += 1;
                loop {
                    self.skip_spaces();
                    match self.peek() {
                        Some(b')') => {
                            self.i += 1;
                            return Ok(Value::List);
                        }
                        None | Some(b'\r') | Some(b'\n') => {
                            return Err(self.error("unterminated list"));
                        }
                        Some(b'[') => {
                            self.item_name()?;
                        }
                        _ => {
                            if self.token().is_empty() {
                                self.value()?;
                            } else if self.peek() == Some(b'[') {
                                self.item_name()?;
                            }
                        }
                    }
                }
            }
            _ => {
                let atom = self.token();
                if atom.is_empty() {
                    Err(self.error("expected a value"))
                } else if atom.eq_ignore_ascii_case(b"NIL") {
                    Ok(Value::Nil)
                } else {
                    Ok(Value::Atom(atom))
                }
            }
        }
    }

    /// `(` atom *(SP atom) `)`, each atom up to SP or `)`.
    fn atom_list(&mut self) -> Result<Vec<String>, Error> {
        self.expect(b'(')?;
        let mut out = Vec::new();
        loop {
            self.skip_spaces();
            match self.peek() {
                Some(b')') => {
                    self.i += 1;
                    return Ok(out);
                }
                None | Some(b'\r') | Some(b'\n') | Some(b'(') => {
                    return Err(self.error("unterminated list"));
                }
                _ => {
                    let start = self.i;
                    while self
                        .peek()
                        .is_some_and(|c| !matches!(c, b' ' | b')' | b'\r' | b'\n' | b'('))
                    {
                        self.i += 1;
                    }
                    out.push(String::from_utf8_lossy(&self.b[start..self.i]).into_owned());
                }
            }
        }
    }

    fn quoted(&mut self) -> Result<Vec<u8>, Error> {
        self.expect(b'"')?;
        let mut out = Vec::new();
        loop {
            match self.peek() {
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    let c = self
                        .b
                        .get(self.i + 1)
                        .copied()
                        .ok_or_else(|| self.error("bad escape"))?;
                    out.push(c);
                    self.i += 2;
                }
                None | Some(b'\r') | Some(b'\n') => return Err(self.error("unterminated string")),
                Some(c) => {
                    out.push(c);
                    self.i += 1;
                }
            }
        }
    }

    /// `{n}` CRLF n octets (RFC 3501 4.3); the `~` of literal8 is already consumed.
    fn literal(&mut self) -> Result<Vec<u8>, Error> {
        self.expect(b'{')?;
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit() || c == b'+') {
            self.i += 1;
        }
        let digits = &self.b[start..self.i];
        let n: usize = std::str::from_utf8(digits.strip_suffix(b"+").unwrap_or(digits))
            .ok()
            .and_then(|d| d.parse().ok())
            .ok_or_else(|| self.error("bad literal length"))?;
        self.expect(b'}')?;
        if self.peek() == Some(b'\r') {
            self.i += 1;
        }
        self.expect(b'\n')?;
        if self.b.len() - self.i < n {
            return Err(self.error("short literal"));
        }
        let data = self.b[self.i..self.i + n].to_vec();
        self.i += n;
        Ok(data)
    }
}
