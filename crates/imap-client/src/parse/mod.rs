//! Turning one framed response into a [`Resp`]: imap-codec first, then small own
//! parsers for what imap-codec rejects but real servers send.

use bytes::Bytes;
use imap_codec::ResponseCodec;
use imap_codec::decode::Decoder;
use imap_codec::imap_types::core::{NString, NString8};
use imap_codec::imap_types::extensions::quota::Resource;
use imap_codec::imap_types::fetch::MessageDataItem;
use imap_codec::imap_types::flag::{FlagFetch, FlagNameAttribute};
use imap_codec::imap_types::mailbox::Mailbox;
use imap_codec::imap_types::response::{Data, Response, Status, StatusKind};

use crate::Error;

/// What the client needs from one server response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Resp {
    /// `+ ...` command continuation request (RFC 3501 7.5).
    Continue,
    /// Status response (RFC 3501 7.1); `tag` is None for untagged ones.
    Status {
        tag: Option<String>,
        kind: Kind,
        /// Contents of the `[...]` response code, raw.
        code: Option<String>,
        /// The whole resp-text as sent, code included.
        text: String,
    },
    /// `* BYE` (RFC 3501 7.1.5) with its resp-text.
    Bye(String),
    /// `* CAPABILITY` (RFC 3501 7.2.1), upper-cased.
    Capability(Vec<String>),
    /// `* n EXISTS` (RFC 3501 7.3.1).
    Exists(u32),
    /// `* SEARCH` (RFC 3501 7.2.5) or `* ESEARCH ... ALL` (RFC 4731 3.1).
    Search(Vec<u32>),
    /// `* n FETCH (...)` (RFC 3501 7.4.2): the UID and the data of a BODY[...] or
    /// BINARY[...] item (None when absent or NIL).
    Fetch {
        seq: u32,
        uid: Option<u32>,
        data: Option<Bytes>,
        /// FLAGS, INTERNALDATE and MODSEQ when the response had any of them.
        meta: Option<Box<Meta>>,
    },
    /// `* LIST (attributes) delimiter name` (RFC 3501 7.2.2): the name decoded from
    /// modified UTF-7, the delimiter, and whether the name can be selected.
    List {
        name: String,
        delimiter: Option<char>,
        selectable: bool,
    },
    /// `* QUOTA root (resource usage limit ...)` (RFC 2087 5.1 / RFC 9208 5.1).
    Quota(Vec<(String, u64, u64)>),
    /// Anything else; ignored (RFC 3501 2.2.2: clients must cope with unsolicited data).
    Other,
}

/// The message attributes of a FETCH response besides its UID and body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Meta {
    /// As sent (`\\Seen`, keywords), `\\Recent` included.
    pub(crate) flags: Option<Vec<String>>,
    /// Unix seconds.
    pub(crate) internal_date: Option<i64>,
    pub(crate) modseq: Option<u64>,
}

/// Status condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Ok,
    No,
    Bad,
}

/// Parses one complete response as framed by [`crate::framer::Framer`].
#[cfg(test)]
pub(crate) fn parse(bytes: &[u8]) -> Result<Resp, Error> {
    parse_owned(bytes.to_vec())
}

/// Parses one complete response, keeping a large FETCH literal where it was received: the
/// data handed back is a view of `bytes`, not a copy.
pub(crate) fn parse_owned(bytes: Vec<u8>) -> Result<Resp, Error> {
    if bytes.starts_with(b"+") {
        return Ok(Resp::Continue);
    }
    if bytes.len() >= LITERAL_CUT_MIN
        && let Some((seq, uid, literal, meta)) = parse_cutting_literal(&bytes)
    {
        return Ok(Resp::Fetch {
            seq,
            uid,
            data: Some(Bytes::from(bytes).slice(literal)),
            meta,
        });
    }
    match ResponseCodec::default().decode(&bytes) {
        Ok((b"", response)) => Ok(from_codec(&bytes, response)),
        _ => fallback(&bytes),
    }
}

/// Literals at least this long are cut out of a FETCH before imap-codec sees it: it checks
/// a literal byte by byte and copies it, which was 8 % of the CPU of a mail file system
/// read. The framer already knows where the literal ends.
const LITERAL_CUT_MIN: usize = 64 * 1024;

/// A FETCH with one large literal: the response is parsed with the literal announced as
/// `{0}`; its sequence number, UID, where the literal lies in `bytes`, and its other
/// attributes. None (parse it whole) for anything else.
#[allow(clippy::type_complexity)]
fn parse_cutting_literal(
    bytes: &[u8],
) -> Option<(u32, Option<u32>, std::ops::Range<usize>, Option<Box<Meta>>)> {
    let mut big = None;
    let mut at = 0;
    while let Some(lf) = memchr::memchr(b'\n', &bytes[at..]) {
        let line_end = at + lf + 1;
        let Some(n) = crate::framer::literal_announcement(&bytes[at..line_end]) else {
            at = line_end;
            continue;
        };
        let brace = at + memchr::memrchr(b'{', &bytes[at..line_end])?;
        let end = line_end.checked_add(n).filter(|&e| e <= bytes.len())?;
        if n >= LITERAL_CUT_MIN {
            if big.is_some() {
                return None;
            }
            big = Some((brace, line_end..end));
        }
        at = end;
    }
    let (brace, literal) = big?;
    let mut skeleton = Vec::with_capacity(bytes.len() - literal.len() + 8);
    skeleton.extend_from_slice(&bytes[..brace]);
    skeleton.extend_from_slice(b"{0}\r\n");
    skeleton.extend_from_slice(&bytes[literal.end..]);
    let parsed = match ResponseCodec::default().decode(&skeleton) {
        Ok((b"", response)) => from_codec(&skeleton, response),
        // imap-codec does not know every item (MODSEQ): our own parser then.
        _ => fallback(&skeleton).ok()?,
    };
    match parsed {
        Resp::Fetch {
            seq,
            uid,
            data: Some(d),
            meta,
        } if d.is_empty() => Some((seq, uid, literal, meta)),
        _ => None,
    }
}

fn from_codec(bytes: &[u8], response: Response<'_>) -> Resp {
    match response {
        Response::CommandContinuationRequest(_) => Resp::Continue,
        Response::Status(Status::Bye(_)) => Resp::Bye(resp_text(bytes)),
        Response::Status(status) => {
            let kind = match &status {
                Status::Untagged(body) => body.kind,
                Status::Tagged(tagged) => tagged.body.kind,
                Status::Bye(_) => StatusKind::Ok,
            };
            let text = resp_text(bytes);
            Resp::Status {
                tag: status.tag().map(|t| t.inner().to_string()),
                kind: match kind {
                    StatusKind::Ok => Kind::Ok,
                    StatusKind::No => Kind::No,
                    StatusKind::Bad => Kind::Bad,
                },
                code: code_of(&text).map(str::to_string),
                text,
            }
        }
        Response::Data(Data::Capability(caps)) => Resp::Capability(
            caps.as_ref()
                .iter()
                .map(|c| c.to_string().to_ascii_uppercase())
                .collect(),
        ),
        Response::Data(Data::Exists(n)) => Resp::Exists(n),
        Response::Data(Data::Search(uids, _)) => {
            Resp::Search(uids.into_iter().map(|n| n.get()).collect())
        }
        Response::Data(Data::Fetch { seq, items }) => {
            let mut uid = None;
            let mut data = None;
            let mut meta: Option<Box<Meta>> = None;
            for item in items.into_iter() {
                match item {
                    MessageDataItem::Uid(n) => uid = Some(n.get()),
                    MessageDataItem::Flags(flags) => {
                        meta.get_or_insert_default().flags = Some(
                            flags
                                .iter()
                                .map(|f| match f {
                                    FlagFetch::Flag(f) => f.to_string(),
                                    FlagFetch::Recent => "\\Recent".to_string(),
                                })
                                .collect(),
                        );
                    }
                    MessageDataItem::InternalDate(date) => {
                        meta.get_or_insert_default().internal_date =
                            Some(date.as_ref().timestamp());
                    }
                    MessageDataItem::ModSeq(n) => {
                        meta.get_or_insert_default().modseq = Some(n.get());
                    }
                    MessageDataItem::BodyExt { data: d, .. } => data = nstring(d),
                    MessageDataItem::Binary { value, .. } => {
                        data = match value {
                            NString8::NString(d) => nstring(d),
                            NString8::Literal8(l) => Some(Bytes::from(l.data.into_owned())),
                        }
                    }
                    _ => {}
                }
            }
            Resp::Fetch {
                seq: seq.get(),
                uid,
                data,
                meta,
            }
        }
        Response::Data(Data::List {
            items,
            delimiter,
            mailbox,
        }) => {
            let raw: &[u8] = match &mailbox {
                Mailbox::Inbox => b"INBOX",
                Mailbox::Other(other) => other.as_ref(),
            };
            Resp::List {
                name: utf7_decode(raw).unwrap_or_else(|| String::from_utf8_lossy(raw).into_owned()),
                delimiter: delimiter.map(|d| d.inner()),
                selectable: !items.iter().any(|a| {
                    matches!(a, FlagNameAttribute::Noselect)
                        || a.to_string().eq_ignore_ascii_case("\\NonExistent")
                }),
            }
        }
        Response::Data(Data::Quota { quotas, .. }) => Resp::Quota(
            quotas
                .into_iter()
                .map(|q| {
                    let name = match q.resource {
                        Resource::Storage => "STORAGE".to_string(),
                        other => other.to_string().to_ascii_uppercase(),
                    };
                    (name, q.usage, q.limit)
                })
                .collect(),
        ),
        Response::Data(_) => Resp::Other,
    }
}

/// The bytes of an nstring, whatever its form: a literal, a quoted string, or (when another
/// crate in the build enables imap-codec's `ext_utf8`, as the server does) a UTF-8 quoted one.
fn nstring(n: NString<'_>) -> Option<Bytes> {
    n.0.map(|s| Bytes::copy_from_slice(s.as_ref()))
}

/// The resp-text of a status response: everything after `tag SP cond SP` without CRLF.
fn resp_text(bytes: &[u8]) -> String {
    let line = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut parts = line.splitn(3, |&b| b == b' ');
    let _tag = parts.next();
    let _cond = parts.next();
    String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned()
}

/// The contents of a leading `[...]` response code (RFC 3501 7.1).
pub(crate) fn code_of(text: &str) -> Option<&str> {
    let rest = text.strip_prefix('[')?;
    rest.find(']').map(|end| &rest[..end])
}

mod fallback;
mod values;

use fallback::fallback;
pub(crate) use values::*;

#[cfg(test)]
mod tests;
