//! mbox files: reading ([`MboxReader`]), writing ([`MboxWriter`]) and directories of them
//! ([`scan_tree`]).
//!
//! A message starts at a From_ line, `From <sender> <date>`, and runs to the next one; the
//! empty line written before each From_ line belongs to the format, not to the message (one
//! is removed, as Python's `mailbox` and mutt do). A line starting with `From ` is a From_ line
//! only if a date follows the sender (mutt's and Dovecot's rule), so an unquoted `From ` in a
//! body does not cut a message in two. Quoted lines are unquoted: mboxrd removes one `>` from
//! every `>+From ` line, mboxo only from `>From ` lines. Reading mboxrd and writing mboxrd are
//! inverse on every line, so an mboxrd file read and written back is the same file.
//!
//! The metadata fields of the message's header, `Status` (`R` seen; `O` old), `X-Status`
//! (`A` answered, `D` deleted, `F` flagged, `T` draft), `X-Keywords`, Dovecot's `X-UID` and
//! `X-IMAPbase` (UIDVALIDITY, next UID and keywords, in the first message) and UW-IMAP's
//! `X-IMAP`, and `Content-Length`, are removed from the message and returned as flags,
//! keywords and UIDs (the fields Dovecot hides from IMAP clients). A first message carrying
//! `X-IMAP` is UW-IMAP's pseudo message, not mail: it is skipped. The writer puts the same
//! fields back at the end of the header.

use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

use crate::date::{asctime, parse_from_line};
use crate::lines::{field_value, remove_fields, split_header};
use crate::{Flags, mutf7};

/// The header fields that carry mbox metadata (removed on reading, written by the writer).
pub const METADATA_FIELDS: [&str; 7] = [
    "Status",
    "X-Status",
    "X-Keywords",
    "X-UID",
    "X-IMAPbase",
    "X-IMAP",
    "Content-Length",
];

/// How quoted `From ` lines are unquoted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Quoting {
    /// Remove one `>` from every line matching `>+From ` (mboxrd; what this writer writes).
    #[default]
    Mboxrd,
    /// Remove the `>` of `>From ` lines only (mboxo, what Python's `mailbox` writes).
    Mboxo,
}

/// One message read from an mbox file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MboxMessage {
    /// Byte offset of its From_ line in the file.
    pub offset: u64,
    /// The envelope sender of the From_ line.
    pub sender: String,
    /// The From_ line's date (Unix seconds); `None` if it had none.
    pub internal_date: Option<i64>,
    /// The message unquoted, its metadata fields removed, line endings as in the file.
    pub content: Vec<u8>,
    pub flags: Flags,
    pub keywords: Vec<String>,
    /// Dovecot's `X-UID`.
    pub uid: Option<u32>,
}

/// What [`MboxReader::next_item`] gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MboxItem {
    Message(MboxMessage),
    /// A message longer than the reader's bound: skipped (its bytes were not kept).
    TooLarge {
        offset: u64,
        bytes: u64,
    },
}

/// The folder's UIDVALIDITY and next UID (and keyword names) from `X-IMAPbase`/`X-IMAP`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MboxBase {
    pub uidvalidity: u32,
    pub uidnext: u32,
    pub keywords: Vec<String>,
}

/// Reads messages from an mbox, holding at most one message (bounded) in memory.
pub struct MboxReader<R> {
    input: R,
    quoting: Quoting,
    message_bytes_max: usize,
    /// The From_ line that starts the next message, already read: (offset, rest after "From ").
    next_from: Option<(u64, Vec<u8>)>,
    offset: u64,
    started: bool,
    first: bool,
    base: Option<MboxBase>,
    /// The current line, at most `line_keep_max` bytes of it; `line_len` is its real length.
    line: Vec<u8>,
    line_len: usize,
    line_keep_max: usize,
}

fn is_from_line(line: &[u8]) -> bool {
    line.starts_with(b"From ") && parse_from_line(&line[5..]).is_some()
}

fn trim_eol(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn words(value: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(value)
        .split(|c: char| c.is_ascii_whitespace() || c == ',')
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

impl<R: BufRead> MboxReader<R> {
    pub fn new(input: R, quoting: Quoting, message_bytes_max: usize) -> MboxReader<R> {
        MboxReader {
            input,
            quoting,
            message_bytes_max,
            next_from: None,
            offset: 0,
            started: false,
            first: true,
            base: None,
            line: Vec::new(),
            line_len: 0,
            line_keep_max: message_bytes_max.saturating_add(4096),
        }
    }

    /// The folder's UIDVALIDITY and next UID, once the first message has been read (if it
    /// carried `X-IMAPbase` or `X-IMAP`).
    pub fn base(&self) -> Option<&MboxBase> {
        self.base.as_ref()
    }

    /// Bytes of the file consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Reads the next line, keeping at most `line_keep_max` bytes of it: a file without line
    /// ends cannot make the reader hold more than about one message.
    fn read_line(&mut self) -> io::Result<bool> {
        self.line.clear();
        self.line_len = 0;
        loop {
            let buf = match self.input.fill_buf() {
                Ok(buf) => buf,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if buf.is_empty() {
                break;
            }
            let (take, done) = match memchr::memchr(b'\n', buf) {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            let room = self.line_keep_max.saturating_sub(self.line.len());
            self.line.extend_from_slice(&buf[..take.min(room)]);
            self.line_len += take;
            self.input.consume(take);
            if done {
                break;
            }
        }
        self.offset += self.line_len as u64;
        Ok(self.line_len > 0)
    }

    /// Skips empty lines at the start; the first other line must begin with `From `.
    fn start(&mut self) -> io::Result<()> {
        self.started = true;
        loop {
            let at = self.offset;
            if !self.read_line()? {
                return Ok(());
            }
            if trim_eol(&self.line).is_empty() {
                continue;
            }
            if !self.line.starts_with(b"From ") {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "not an mbox file: it does not start with a From_ line",
                ));
            }
            self.next_from = Some((at, trim_eol(&self.line)[5..].to_vec()));
            return Ok(());
        }
    }

    /// The next message, `None` at the end of the file.
    pub fn next_item(&mut self) -> io::Result<Option<MboxItem>> {
        if !self.started {
            self.start()?;
        }
        loop {
            let Some((offset, from)) = self.next_from.take() else {
                return Ok(None);
            };
            let mut content: Vec<u8> = Vec::new();
            let mut bytes: u64 = 0;
            while self.read_line()? {
                if is_from_line(&self.line) {
                    self.next_from = Some((
                        self.offset - self.line_len as u64,
                        trim_eol(&self.line)[5..].to_vec(),
                    ));
                    break;
                }
                let unquote = match self.quoting {
                    Quoting::Mboxrd => {
                        let gt = self.line.iter().take_while(|&&b| b == b'>').count();
                        gt > 0 && self.line[gt..].starts_with(b"From ")
                    }
                    Quoting::Mboxo => self.line.starts_with(b">From "),
                };
                let (line, len) = if unquote {
                    (&self.line[1..], self.line_len - 1)
                } else {
                    (&self.line[..], self.line_len)
                };
                bytes += len as u64;
                if bytes <= self.message_bytes_max as u64 + 2 {
                    content.extend_from_slice(line);
                }
            }
            // The empty line before the next From_ line (or the end) is the format's.
            for blank in [&b"\n"[..], b"\r\n"] {
                if content.len() > blank.len()
                    && content.ends_with(blank)
                    && content[content.len() - blank.len() - 1] == b'\n'
                {
                    content.truncate(content.len() - blank.len());
                    bytes -= blank.len() as u64;
                    break;
                }
                if content == blank {
                    content.clear();
                    bytes = 0;
                    break;
                }
            }
            let first = std::mem::replace(&mut self.first, false);
            if bytes > self.message_bytes_max as u64 {
                return Ok(Some(MboxItem::TooLarge { offset, bytes }));
            }
            let (sender, internal_date) = match parse_from_line(&from) {
                Some((sender, date)) => (sender, Some(date)),
                None => (
                    String::from_utf8_lossy(&from)
                        .split_ascii_whitespace()
                        .next()
                        .unwrap_or("")
                        .to_string(),
                    None,
                ),
            };
            let (content, removed) = remove_fields(&content, &METADATA_FIELDS);
            let mut message = MboxMessage {
                offset,
                sender,
                internal_date,
                content,
                flags: Flags::default(),
                keywords: Vec::new(),
                uid: None,
            };
            let mut pseudo = false;
            for (name, value) in removed {
                match name.as_str() {
                    "status" if value.contains(&b'R') => message.flags.seen = true,
                    "x-status" => {
                        for b in value {
                            match b {
                                b'A' => message.flags.answered = true,
                                b'D' => message.flags.deleted = true,
                                b'F' => message.flags.flagged = true,
                                b'T' => message.flags.draft = true,
                                _ => {}
                            }
                        }
                    }
                    "x-keywords" => {
                        for k in words(&value) {
                            if !message.keywords.contains(&k) {
                                message.keywords.push(k);
                            }
                        }
                    }
                    "x-uid" => {
                        message.uid = String::from_utf8_lossy(&value).trim().parse().ok();
                    }
                    "x-imapbase" | "x-imap" if first => {
                        pseudo |= name == "x-imap";
                        let w = words(&value);
                        let num = |i: usize| w.get(i).and_then(|s| s.parse::<u32>().ok());
                        if let (Some(uidvalidity), Some(uidnext)) = (num(0), num(1)) {
                            self.base = Some(MboxBase {
                                uidvalidity,
                                uidnext,
                                keywords: w[2..].to_vec(),
                            });
                        }
                    }
                    _ => {}
                }
            }
            if pseudo {
                continue;
            }
            return Ok(Some(MboxItem::Message(message)));
        }
    }
}

/// A message to write.
#[derive(Debug, Clone, Copy)]
pub struct MboxOut<'a> {
    /// The From_ line's sender; empty means `MAILER-DAEMON`.
    pub sender: &'a str,
    pub internal_date: i64,
    pub flags: Flags,
    pub keywords: &'a [String],
    pub uid: Option<u32>,
    /// The message (its own metadata fields, if any, are replaced by the writer's).
    pub content: &'a [u8],
}

/// Writes mboxrd: From_ line with the internal date in UTC, the header with the metadata
/// fields at its end, every `>*From ` line quoted with one more `>`, an empty line after
/// each message.
pub struct MboxWriter<W> {
    output: W,
    first: bool,
}

/// The From_ sender for a message: its `Return-Path` address, else `MAILER-DAEMON`.
pub fn envelope_sender(content: &[u8]) -> String {
    field_value(content, "Return-Path")
        .map(|v| {
            String::from_utf8_lossy(&v)
                .trim()
                .trim_start_matches('<')
                .trim_end_matches('>')
                .to_string()
        })
        .filter(|s| !s.is_empty() && !s.contains(|c: char| c.is_whitespace() || c.is_control()))
        .unwrap_or_else(|| "MAILER-DAEMON".to_string())
}

impl<W: Write> MboxWriter<W> {
    pub fn new(output: W) -> MboxWriter<W> {
        MboxWriter {
            output,
            first: true,
        }
    }

    /// Writes one message; the first message of a file also gets `X-IMAPbase` when `base`
    /// is given (UIDVALIDITY, next UID, keyword names: Dovecot's form).
    pub fn write(&mut self, m: &MboxOut<'_>, base: Option<&MboxBase>) -> io::Result<()> {
        let sender = if m.sender.is_empty() {
            "MAILER-DAEMON"
        } else {
            m.sender
        };
        writeln!(self.output, "From {sender} {}", asctime(m.internal_date))?;
        let (mut content, _) = remove_fields(m.content, &METADATA_FIELDS);
        // mbox cannot tell a message without a final line end: it gets one, before the
        // header is looked at (an added LF can complete the empty line that ends it).
        if !content.is_empty() && !content.ends_with(b"\n") {
            content.push(b'\n');
        }
        let (header_end, _) = split_header(&content);
        let crlf = content[..header_end].ends_with(b"\r\n");
        let eol: &[u8] = if crlf { b"\r\n" } else { b"\n" };
        let mut fields: Vec<u8> = Vec::new();
        let mut field = |text: String| {
            fields.extend_from_slice(text.as_bytes());
            fields.extend_from_slice(eol);
        };
        if let Some(base) = base.filter(|_| self.first) {
            let mut line = format!("X-IMAPbase: {} {:010}", base.uidvalidity, base.uidnext);
            for k in &base.keywords {
                line.push(' ');
                line.push_str(k);
            }
            field(line);
        }
        if let Some(uid) = m.uid {
            field(format!("X-UID: {uid}"));
        }
        field(format!("Status: {}O", if m.flags.seen { "R" } else { "" }));
        let f = &m.flags;
        let x: String = [
            (f.answered, 'A'),
            (f.deleted, 'D'),
            (f.flagged, 'F'),
            (f.draft, 'T'),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, c)| *c)
        .collect();
        if !x.is_empty() {
            field(format!("X-Status: {x}"));
        }
        if !m.keywords.is_empty() {
            field(format!("X-Keywords: {}", m.keywords.join(" ")));
        }
        self.first = false;
        let mut body = Vec::with_capacity(content.len() + fields.len() + 64);
        body.extend_from_slice(&content[..header_end]);
        body.extend_from_slice(&fields);
        body.extend_from_slice(&content[header_end..]);
        let mut pos = 0;
        while pos < body.len() {
            let end = memchr::memchr(b'\n', &body[pos..]).map_or(body.len(), |i| pos + i + 1);
            let line = &body[pos..end];
            let gt = line.iter().take_while(|&&b| b == b'>').count();
            if line[gt..].starts_with(b"From ") {
                self.output.write_all(b">")?;
            }
            self.output.write_all(line)?;
            pos = end;
        }
        if !body.ends_with(b"\n") {
            self.output.write_all(b"\n")?;
        }
        self.output.write_all(b"\n")
    }

    pub fn into_inner(self) -> W {
        self.output
    }
}

/// File names in a directory of mbox files that are not mailboxes: index and lock files.
fn is_auxiliary(name: &str) -> bool {
    name.starts_with('.')
        || [".msf", ".lock", ".lck", ".idx", ".dat", ".tmp"]
            .iter()
            .any(|ext| name.ends_with(ext))
}

fn decode_name(name: &str) -> String {
    mutf7::decode(name).unwrap_or_else(|| name.to_string())
}

/// Every mbox file under `root`, with its folder path: a file is a folder named after it;
/// a subdirectory `X.sbd` (Thunderbird) or `X` holds the folders below `X`. Dot files, index
/// and lock files are skipped. Sorted by path; at most `depth_max` levels.
pub fn scan_tree(root: &Path, depth_max: usize) -> io::Result<Vec<(Vec<String>, PathBuf)>> {
    fn walk(
        dir: &Path,
        prefix: &[String],
        depth_left: usize,
        out: &mut Vec<(Vec<String>, PathBuf)>,
    ) -> io::Result<()> {
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if is_auxiliary(&name) {
                continue;
            }
            let kind = entry.file_type()?;
            let path = entry.path();
            let kind = if kind.is_symlink() {
                std::fs::metadata(&path)?.file_type()
            } else {
                kind
            };
            if kind.is_file() {
                let mut p = prefix.to_vec();
                p.push(decode_name(&name));
                out.push((p, path));
            } else if kind.is_dir() && depth_left > 1 {
                let level = name.strip_suffix(".sbd").unwrap_or(&name);
                let mut p = prefix.to_vec();
                p.push(decode_name(level));
                walk(&path, &p, depth_left - 1, out)?;
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(root, &[], depth_max, &mut out)?;
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(bytes: &[u8], quoting: Quoting, max: usize) -> Vec<MboxItem> {
        let mut r = MboxReader::new(bytes, quoting, max);
        let mut out = Vec::new();
        while let Some(item) = r.next_item().unwrap() {
            out.push(item);
        }
        out
    }

    fn messages(bytes: &[u8], quoting: Quoting) -> Vec<MboxMessage> {
        read_all(bytes, quoting, 1 << 20)
            .into_iter()
            .map(|i| match i {
                MboxItem::Message(m) => m,
                other => panic!("{other:?}"),
            })
            .collect()
    }

    const FILE: &[u8] = b"From MAILER-DAEMON Sat Nov 21 12:00:00 2026\n\
Subject: one\n\
Status: RO\n\
X-Status: AF\n\
X-Keywords: $Junk, work\n\
\n\
>From the start\n\
>>From quoted twice\n\
From here on, an unquoted line that is no From_ line\n\
\n\
From a@b Sun Nov 22 12:00:00 2026\n\
Subject: two\n\
\n\
last\n";

    #[test]
    fn messages_flags_and_quoting() {
        let m = messages(FILE, Quoting::Mboxrd);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].sender, "MAILER-DAEMON");
        assert_eq!(m[0].internal_date, Some(1_795_262_400));
        assert_eq!(
            m[0].content,
            b"Subject: one\n\nFrom the start\n>From quoted twice\nFrom here on, an unquoted line that is no From_ line\n"
        );
        assert!(m[0].flags.seen && m[0].flags.answered && m[0].flags.flagged);
        assert!(!m[0].flags.deleted && !m[0].flags.draft);
        assert_eq!(m[0].keywords, vec!["$Junk", "work"]);
        assert_eq!(m[1].content, b"Subject: two\n\nlast\n");
        let second = FILE.windows(8).position(|w| w == b"From a@b").unwrap();
        assert_eq!(m[1].offset, second as u64);
        let o = messages(FILE, Quoting::Mboxo);
        assert!(o[0].content.windows(18).any(|w| w == b">>From quoted twic"));
    }

    #[test]
    fn mboxrd_written_back_is_the_same_file() {
        let m = messages(FILE, Quoting::Mboxrd);
        let mut w = MboxWriter::new(Vec::new());
        for msg in &m {
            w.write(
                &MboxOut {
                    sender: &msg.sender,
                    internal_date: msg.internal_date.unwrap(),
                    flags: msg.flags,
                    keywords: &msg.keywords,
                    uid: None,
                    content: &msg.content,
                },
                None,
            )
            .unwrap();
        }
        let out = w.into_inner();
        let expected = String::from_utf8_lossy(FILE)
            .replace("Status: RO\nX-Status: AF\nX-Keywords: $Junk, work\n", "")
            .replace(
                "Subject: one\n\n",
                "Subject: one\nStatus: RO\nX-Status: AF\nX-Keywords: $Junk work\n\n",
            )
            .replace("Subject: two\n\n", "Subject: two\nStatus: O\n\n")
            .replace("\nFrom here on", "\n>From here on")
            + "\n";
        assert_eq!(String::from_utf8_lossy(&out), expected);
        // And reading that again gives the same messages.
        assert_eq!(messages(&out, Quoting::Mboxrd), {
            let mut again = m.clone();
            again[1].offset = messages(&out, Quoting::Mboxrd)[1].offset;
            again
        });
    }

    #[test]
    fn dovecot_uids_and_the_uw_pseudo_message() {
        let file = b"From MAILER-DAEMON Sat Nov 21 12:00:00 2026\n\
Subject: DON'T DELETE THIS MESSAGE -- FOLDER INTERNAL DATA\n\
X-IMAP: 1100000000 0000000009 $Junk\n\
\n\
internal\n\
\n\
From x Sat Nov 21 12:00:01 2026\n\
X-UID: 7\n\
Content-Length: 5\n\
\n\
body\n";
        let mut r = MboxReader::new(&file[..], Quoting::Mboxrd, 1000);
        let MboxItem::Message(m) = r.next_item().unwrap().unwrap() else {
            panic!()
        };
        assert_eq!(m.uid, Some(7));
        assert_eq!(m.content, b"\nbody\n");
        assert_eq!(
            r.base(),
            Some(&MboxBase {
                uidvalidity: 1_100_000_000,
                uidnext: 9,
                keywords: vec!["$Junk".into()]
            })
        );
        assert_eq!(r.next_item().unwrap(), None);
    }

    #[test]
    fn bounds_and_garbage() {
        let items = read_all(FILE, Quoting::Mboxrd, 30);
        assert!(matches!(items[0], MboxItem::TooLarge { offset: 0, .. }));
        assert!(matches!(items[1], MboxItem::Message(_)));
        let mut r = MboxReader::new(&b"Subject: not mbox\n"[..], Quoting::Mboxrd, 100);
        assert!(r.next_item().is_err());
        assert_eq!(read_all(b"", Quoting::Mboxrd, 10), vec![]);
        assert_eq!(read_all(b"\n\n", Quoting::Mboxrd, 10), vec![]);
        // A From_ line without a date at the very start still starts the file.
        let m = messages(b"From nobody\nA: b\n\nc", Quoting::Mboxrd);
        assert_eq!(m[0].internal_date, None);
        assert_eq!(m[0].content, b"A: b\n\nc");
    }

    #[test]
    fn envelope_sender_from_return_path() {
        assert_eq!(envelope_sender(b"Return-Path: <a@b>\n\nx"), "a@b");
        assert_eq!(envelope_sender(b"Return-Path: <>\n\nx"), "MAILER-DAEMON");
        assert_eq!(envelope_sender(b"Subject: x\n\nx"), "MAILER-DAEMON");
    }
}
